"""Every prompt of the LLM policy, in one place (wording inferred: the paper's was not public)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DefaultPrompts:
    """Templates filled with ``str.format``; override any field to change a prompt."""

    insights: str = "Lessons from your archive for this kind of task:\n{items}"
    answer: str = (
        "{task}\n\nThink briefly, then give the final answer on the last line as "
        "'Answer: <answer>'."
    )
    verify: str = (
        "Task:\n{task}\n\nYour answer: {answer}\nCheck it. If it is wrong, correct it. "
        "End with 'Answer: <answer>'."
    )
    debate: str = (
        "Task:\n{task}\n\nOther agents answered:\n{peers}\nYour previous answer: {answer}\n"
        "Reconsider and end with 'Answer: <answer>'."
    )
    plan: str = "Task:\n{task}\n\nWrite a short plan (no answer yet)."
    solve_with_plan: str = (
        "Task:\n{task}\n\nPlan from a teammate:\n{plan}\nFollow it and end with 'Answer: <answer>'."
    )
    reflect: str = (
        "Task:\n{task}\n\nYour answer: {answer}\nTeam answer: {team_answer}\nFeedback: "
        "{feedback}\nIn two sentences: what went wrong or right in your step?"
    )
    cross_examine: str = (
        "Task:\n{task}\n\nReflections of the team:\n{reflections}\nPoint out which "
        "reflections are wrong or incomplete, in at most three sentences."
    )
    distill: str = (
        "Task:\n{task}\n\nReflections:\n{reflections}\nCritique:\n{critique}\n"
        'Distill at most {m} reusable lessons as a JSON list of objects {{"text": ..., '
        '"kind": "strategy"|"pitfall"|"check", "quality": 0..1}}. Reply with JSON only.'
    )
    self_reflect: str = (
        "Task:\n{task}\n\nYour answer: {answer}\nFeedback: {feedback}\nWrite one reusable "
        "lesson for similar tasks, in one sentence."
    )


@dataclass(frozen=True)
class SmallModelPrompts(DefaultPrompts):
    """Prompts a ~135M instruct model can follow: few-shot, one short answer line each.

    Every answering step shows two worked examples and asks for exactly one line
    ``Answer: <answer>``; distillation asks for lines ``Lesson: <one sentence>`` (parsed by
    :func:`~evochamber.policies.llm.parse_insights`, which also accepts the JSON list of
    :class:`DefaultPrompts`). Use with ``LLMPolicy(chat, prompts=SmallModelPrompts())``.
    """

    answer: str = (
        "Reply with one line: Answer: <answer>.\n\n"
        "Task: What is 2 + 2?\nAnswer: 4\n\n"
        "Task: What is the capital of Italy? Answer with one word.\nAnswer: Rome\n\n"
        "Task: {task}"
    )
    verify: str = (
        "Check the answer. Reply with one line: Answer: <correct answer>.\n\n"
        "Task: What is 3 + 4?\nProposed: 8\nAnswer: 7\n\n"
        "Task: What colour is grass? Answer with one word.\nProposed: green\nAnswer: green\n\n"
        "Task: {task}\nProposed: {answer}"
    )
    debate: str = (
        "Others answered: {peers}. You answered: {answer}. Reply with one line: "
        "Answer: <answer>.\n\n"
        "Task: What is 5 + 1?\nOthers answered: 6. You answered: 7.\nAnswer: 6\n\n"
        "Task: {task}"
    )
    plan: str = "Task: {task}\nIn one short line, say how to solve it (no answer)."
    solve_with_plan: str = (
        "Reply with one line: Answer: <answer>.\n\n"
        "Task: What is 6 - 2?\nPlan: subtract.\nAnswer: 4\n\n"
        "Task: {task}\nPlan: {plan}"
    )
    reflect: str = (
        "Task: {task}\nYour answer: {answer}. Team answer: {team_answer}. {feedback}.\n"
        "In one short sentence, say what went right or wrong."
    )
    cross_examine: str = (
        "Task: {task}\nReflections:\n{reflections}\nIn one short sentence, say which "
        "reflection is wrong, or 'none'."
    )
    distill: str = (
        "Write {m} short lessons for similar tasks, one per line, each starting 'Lesson:'.\n\n"
        "Task: What is 8 - 5?\nReflections: the answer 13 added instead of subtracting.\n"
        "Lesson: Read the operator before computing.\n\n"
        "Task: {task}\nReflections:\n{reflections}\nCritique: {critique}"
    )
    self_reflect: str = (
        "Task: {task}\nYour answer: {answer}. {feedback}.\n"
        "Write one line: Lesson: <one sentence for similar tasks>."
    )
