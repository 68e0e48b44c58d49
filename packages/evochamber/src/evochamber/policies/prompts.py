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
