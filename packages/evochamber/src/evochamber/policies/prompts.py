"""Every prompt of the LLM policy, in one place (wording inferred: the paper's was not public)."""

from __future__ import annotations

from dataclasses import dataclass

#: Steps whose reply is an answer (parsed by :func:`~evochamber.policies.llm.parse_answer`).
ANSWER_STEPS = ("answer", "verify", "debate", "solve_with_plan")
#: Steps whose reply is one or more lessons (``Lesson: ...`` lines or a JSON list).
LESSON_STEPS = ("distill", "self_reflect")


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
    #: Text forced at the start of the reply of every answering step (``""``: none). The
    #: back-end continues it (transformers; llama.cpp server, Ollama and vLLM with
    #: ``continue_final_message``); a back-end that ignores it still replies, and the tolerant
    #: parser reads either form.
    answer_prefix: str = ""
    #: Text forced at the start of the reply of the lesson steps (distill, self_reflect).
    lesson_prefix: str = ""
    #: Completion budget of the answering steps (``None``: the policy's ``max_tokens``).
    answer_max_tokens: int | None = None

    def prefix(self, step: str) -> str:
        """The forced reply prefix of ``step`` (a field name of the templates)."""
        if step in ANSWER_STEPS:
            return self.answer_prefix
        if step in LESSON_STEPS:
            return self.lesson_prefix
        return ""


@dataclass(frozen=True)
class SmallModelPrompts(DefaultPrompts):
    """Prompts a ~135M instruct model can follow: few-shot, a forced answer line, short replies.

    Every answering step shows worked examples ending in a line ``Answer: <answer>`` and forces
    the reply to start with ``Answer:`` (:attr:`answer_prefix`), so the model only has to
    continue one short line; the lesson steps start with ``Lesson: When`` and show no example
    (a 135M model copies an example lesson word for word). Replies are
    read by the tolerant :func:`~evochamber.policies.llm.parse_answer` (which also accepts
    ``The answer is X``, a bare last line, ``... = 12``) and
    :func:`~evochamber.policies.llm.parse_insights` (also the JSON list of
    :class:`DefaultPrompts`). Use with ``LLMPolicy(chat, prompts=SmallModelPrompts())``.
    """

    answer: str = (
        "Reply with one line: Answer: <answer>. One word or number.\n\n"
        "Task: What is 2 + 2?\nAnswer: 4\n\n"
        "Task: What is the capital of Italy? Answer with one word.\nAnswer: Rome\n\n"
        "Task: {task}"
    )
    verify: str = (
        "Check the proposed answer. Reply with one line: Answer: <correct answer>.\n\n"
        "Task: What is 3 + 4?\nProposed: 8\nAnswer: 7\n\n"
        "Task: What colour is grass? Answer with one word.\nProposed: green\nAnswer: green\n\n"
        "Task: {task}\nProposed: {answer}"
    )
    debate: str = (
        "Read the other answers, then reply with one line: Answer: <answer>.\n\n"
        "Task: What is 5 + 1?\nOthers: 6\nYou: 7\nAnswer: 6\n\n"
        "Task: {task}\nOthers: {peers}\nYou: {answer}"
    )
    plan: str = "Task: {task}\nIn one short line, say how to solve it (no answer)."
    solve_with_plan: str = (
        "Follow the plan. Reply with one line: Answer: <answer>.\n\n"
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
    # no worked lesson here: SmolLM2 copies an example lesson verbatim (12 of 12 replies);
    # the forced start "Lesson: When" makes it write its own, about the task
    distill: str = (
        "Task: {task}\nReflections:\n{reflections}\nCritique: {critique}\n\n"
        "Write at most {m} short lessons for similar tasks, one per line, each starting "
        "'Lesson:'."
    )
    self_reflect: str = (
        "Task: {task}\nYour answer: {answer}. {feedback}.\n\n"
        "Write one short lesson for similar tasks, starting 'Lesson:'."
    )
    answer_prefix: str = "Answer:"
    lesson_prefix: str = "Lesson: When"
    answer_max_tokens: int | None = 12
