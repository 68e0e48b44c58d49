"""Benchmark metrics: correctness, accuracy by type, hallucination, tool use, consistency."""

from __future__ import annotations

from collections.abc import Sequence

from eva_agent.types import AgentResult, QAItem
from eva_agent.verify import check, extract_claim


def _pairs(items: Sequence[QAItem], results: Sequence[AgentResult]) -> None:
    """Raise unless ``items`` and ``results`` are non-empty and of one length."""
    if len(items) != len(results):
        raise ValueError(f"{len(items)} items but {len(results)} results: one result per item")
    if not items:
        raise ValueError("items is empty: no question to score")


def is_correct(prediction: str, truth: str, qtype: str) -> bool:
    """Prediction equals the truth after type-specific claim extraction."""
    p, t = extract_claim(prediction, qtype), extract_claim(truth, qtype)
    return p is not None and p == t


def accuracy_by_type(items: Sequence[QAItem], results: Sequence[AgentResult]) -> dict[str, float]:
    """``{"overall": ..., qtype: ...}``.

    Raises:
        ValueError: If ``items`` and ``results`` differ in length or are empty.
    """
    _pairs(items, results)
    by: dict[str, list[bool]] = {}
    for it, r in zip(items, results, strict=True):
        ok = is_correct(r.answer, it.answer, it.qtype)
        by.setdefault(it.qtype, []).append(ok)
        by.setdefault("overall", []).append(ok)
    return {k: sum(v) / len(v) for k, v in by.items()}


def hallucination_rate(items: Sequence[QAItem], results: Sequence[AgentResult]) -> float:
    """Share of "yes" answers to existence questions whose object is absent (NaN if none).

    Raises:
        ValueError: If ``items`` and ``results`` differ in length or are empty.
    """
    _pairs(items, results)
    absent = [
        (it, r)
        for it, r in zip(items, results, strict=True)
        if it.qtype == "existence" and it.answer == "no"
    ]
    if not absent:
        return float("nan")
    return sum(extract_claim(r.answer, "existence") == "yes" for _, r in absent) / len(absent)


def tool_call_rate(results: Sequence[AgentResult]) -> float:
    """Share of questions that made at least one tool call.

    Raises:
        ValueError: If ``results`` is empty.
    """
    if not results:
        raise ValueError("results is empty: no question to score")
    return sum(r.n_tool_calls > 0 for r in results) / len(results)


def evidence_consistency(
    items: Sequence[QAItem], results: Sequence[AgentResult], ledgers: Sequence[list] | None = None
) -> tuple[float, int]:
    """Share of final answers supported by the evidence, among the verifiable ones.

    Args:
        items: The questions.
        results: One result per question.
        ledgers: Evidence to check against (default: each result's own ledger; pass another
            method's ledgers to check answers that gathered none, e.g. Direct's).

    Returns:
        ``(rate, n_verifiable)``; only slow-path results are counted when ``ledgers`` is None.

    Raises:
        ValueError: If ``items``, ``results`` (and ``ledgers``) differ in length or are empty.
    """
    _pairs(items, results)
    if ledgers is not None and len(ledgers) != len(results):
        raise ValueError(f"{len(results)} results but {len(ledgers)} ledgers")
    sup = n = 0
    for k, (it, r) in enumerate(zip(items, results, strict=True)):
        if ledgers is None and r.route != "slow":
            continue
        ledger = r.ledger if ledgers is None else ledgers[k]
        v = check(r.answer, ledger, it.qtype, it.question)
        if v.label != "unverifiable":
            n += 1
            sup += v.label == "supported"
    return (sup / n if n else float("nan")), n
