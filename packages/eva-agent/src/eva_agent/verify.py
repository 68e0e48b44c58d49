"""Evidence Consistency Verification (ECV): claim extraction, evidence answers, verdicts.

Relevance is geometric and vocabulary-based (inferred): a detection is relevant when its colour
and shape match the entities the question names; an OCR item is relevant when it sits in the
label zone under a relevant detection, or, before anything is grounded, when it was read from a
region the VLM aimed at.
"""

from __future__ import annotations

import re
from typing import Any

from eva_agent._vocab import COLOURS, SHAPES, entities, infer_qtype
from eva_agent.tools.calc import evaluate
from eva_agent.types import Evidence, Verdict
from methodkit.checks import check_real

#: Evidence-derived answers at or above this confidence may replace a contradicted answer.
EVIDENCE_CONF = 0.8
_CONFUSABLE = str.maketrans({"O": "0", "Q": "0", "I": "1", "L": "1", "|": "1"})
_NUMBER_WORDS = {
    w: str(i)
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
    )
}


def normalise(text: str) -> str:
    """Upper case, no spaces or punctuation, confusables folded (O/Q->0, I/L->1)."""
    t = re.sub(r"[^0-9A-Za-z|]", "", str(text)).upper()
    return t.translate(_CONFUSABLE)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def fuzzy_match(a: str, b: str) -> bool:
    """Equal after :func:`normalise`, or edit distance <= 1 when both have >= 5 characters."""
    na, nb = normalise(a), normalise(b)
    if not na or not nb:
        return False
    if na == nb:
        return True
    return min(len(na), len(nb)) >= 5 and edit_distance(na, nb) <= 1


def _centre(box: Any) -> tuple[float, float]:
    return (box[0] + box[2]) / 2, (box[1] + box[3]) / 2


def in_label_zone(item_box: Any, det_box: Any) -> bool:
    """Is the text's centre in the zone under a detection (its label)?"""
    cx, cy = _centre(item_box)
    dx, _ = _centre(det_box)
    return abs(cx - dx) <= 50 and det_box[3] - 2 <= cy <= det_box[3] + 48


def _matches(d: dict[str, Any], colours: set[str], shapes: set[str]) -> bool:
    return (not colours or d.get("color") in colours) and (not shapes or d.get("shape") in shapes)


def detections(ledger: list[Evidence]) -> list[dict[str, Any]]:
    """All detections in the ledger, duplicates (same label and box) removed."""
    seen, out = set(), []
    for e in ledger:
        if e.kind != "detect" or e.output.status == "error":
            continue
        for d in e.output.items:
            key = (d.get("label"), tuple(round(v) for v in d["box"]))
            if key not in seen:
                seen.add(key)
                out.append(d)
    return out


def covering(question: str, ledger: list[Evidence], unfiltered: bool = False) -> bool:
    """Is there a whole-image detection whose filters are within the question's entities?"""
    colours, shapes = entities(question)
    for e in ledger:
        if e.kind != "detect" or e.output.status == "error" or e.args.get("region") is not None:
            continue
        c, s = e.args.get("color"), e.args.get("shape")
        if unfiltered and (c or s):
            continue
        if (c is None or c in colours) and (s is None or s in shapes):
            return True
    return False


def relevant_detections(question: str, ledger: list[Evidence]) -> list[dict[str, Any]]:
    """Detections matching the colours and shapes the question names."""
    colours, shapes = entities(question)
    return [d for d in detections(ledger) if _matches(d, colours, shapes)]


def relevant_ocr(
    question: str, ledger: list[Evidence]
) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
    """``(ocr_item, detection_or_None)`` pairs relevant to the question (see module doc)."""
    dets = relevant_detections(question, ledger)
    out: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for e in ledger:
        if e.kind != "ocr" or e.output.status == "error":
            continue
        for it in e.output.items:
            item = {**it, "tool": e.tool}
            if dets:
                near = [d for d in dets if in_label_zone(it["box"], d["box"])]
                if near:
                    out.append((item, near[0]))
            elif not detections(ledger) and e.region is not None:
                out.append((item, None))  # aimed, not yet grounded
    return out


def _numbers(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", normalise(text))]


def _best(pairs: list[tuple[dict, Any]]) -> tuple[dict, Any]:
    return max(pairs, key=lambda p: p[0]["conf"])


def evidence_answer(question: str, qtype: str, ledger: list[Evidence]) -> tuple[str, float] | None:
    """The answer the evidence alone gives, with its confidence; None when it gives none."""
    colours, shapes = entities(question)
    dets = relevant_detections(question, ledger)
    if qtype == "read":
        pairs = relevant_ocr(question, ledger)
        if not pairs:
            return None
        item, _ = _best(pairs)
        agree = [
            p
            for p in pairs
            if p[0]["tool"] != item["tool"] and fuzzy_match(p[0]["text"], item["text"])
        ]
        conf = max(item["conf"], EVIDENCE_CONF) if agree else item["conf"]
        return re.sub(r"\s+", "", item["text"]), float(conf)
    if qtype == "spatial":
        if len(dets) != 1 or not covering("", ledger, unfiltered=True):
            return None
        ref = dets[0]
        rx, ry = _centre(ref["box"])
        left = [
            d
            for d in detections(ledger)
            if abs(_centre(d["box"])[1] - ry) < 35 and _centre(d["box"])[0] < rx - 5
        ]
        if not left:
            return None
        best = max(left, key=lambda d: _centre(d["box"])[0])
        return f"{best['color']} {best['shape']}", float(min(best["conf"], ref["conf"]))
    if not covering(question, ledger):
        return None
    if qtype == "existence":
        return ("yes", float(max(d["conf"] for d in dets))) if dets else ("no", 0.9)
    if qtype == "count":
        return str(len(dets)), float(min([d["conf"] for d in dets], default=0.9))
    if qtype == "attribute":
        if len(dets) != 1:
            return None
        d = dets[0]
        if shapes and not colours:
            return d["color"], float(d["conf"])
        return d["shape"], float(d["conf"])
    if qtype == "arithmetic":
        if not dets:
            return None
        pairs = relevant_ocr(question, ledger)
        nums, confs = [], []
        for d in dets:
            mine = [p for p in pairs if p[1] is d and _numbers(p[0]["text"])]
            if not mine:
                return None
            item, _ = _best(mine)
            nums.append(_numbers(item["text"])[-1])
            confs.append(item["conf"])
        value = evaluate(" + ".join(str(x) for x in nums))  # the calculator recomputes
        return str(int(value)), float(min(confs))
    return None


def extract_claim(answer: str, qtype: str) -> str | None:
    """The checkable claim in an answer, normalised per type (None if there is none)."""
    a = str(answer).strip().lower()
    if qtype == "read":
        return normalise(answer) or None
    if qtype in ("count", "arithmetic"):
        m = re.search(r"-?\d[\d,]*", a)
        if m:
            return str(int(m.group().replace(",", "")))
        words = [_NUMBER_WORDS[w] for w in re.findall(r"[a-z]+", a) if w in _NUMBER_WORDS]
        return words[0] if words else None
    if qtype == "existence":
        if re.match(r"^(yes|yeah|true|there is)\b", a):
            return "yes"
        if re.match(r"^(no|false|there is no)\b", a):
            return "no"
        return None
    cols = [c for c in COLOURS if c in a]
    shps = [s for s in SHAPES if s in a]
    if qtype == "spatial":
        return f"{cols[0]} {shps[0]}" if cols and shps else None
    if qtype == "attribute":
        return (cols or shps or [""])[0] or None
    return a or None


def check(answer: str, ledger: list[Evidence], qtype: str | None, question: str = "") -> Verdict:
    """Verdict on ``answer``: supported, contradicted or unverifiable by the ledger.

    Per type: read -> fuzzy match against every relevant OCR item; count -> equals the
    detector count; existence -> matches the detection result; arithmetic -> equals the
    calculator's recomputation from the OCR numbers; attribute and spatial -> match the
    detector labels.
    """
    qtype = qtype or infer_qtype(question)
    claim = extract_claim(answer, qtype)
    ev = evidence_answer(question, qtype, ledger)
    ea, ec = (ev[0], ev[1]) if ev else (None, 0.0)
    if claim is None:
        return Verdict("unverifiable", None, ea, ec, f"no {qtype} claim in the answer")
    if ev is None:
        return Verdict("unverifiable", claim, None, 0.0, f"the evidence gives no {qtype} answer")
    if qtype == "read":
        texts = [p[0]["text"] for p in relevant_ocr(question, ledger)]
        ok = any(fuzzy_match(claim, t) for t in texts)
        reason = f"claim {claim!r} vs OCR {texts}"
    else:
        ok = ea is not None and claim == extract_claim(ea, qtype)
        reason = f"claim {claim!r} vs evidence {ea!r}"
    return Verdict("supported" if ok else "contradicted", claim, ea, ec, reason)


class EvidenceVerifier:
    """ECV as an object: :meth:`check` plus the threshold for evidence-derived answers.

    Args:
        evidence_conf: An evidence-derived answer replaces a still-contradicted one only at or
            above this confidence (spec: 0.8), in [0, 1].

    Raises:
        ValueError: If ``evidence_conf`` is outside [0, 1] (NaN included).
    """

    def __init__(self, evidence_conf: float = EVIDENCE_CONF) -> None:
        self.evidence_conf = check_real("evidence_conf", evidence_conf, 0.0, 1.0)

    def check(
        self, answer: str, ledger: list[Evidence], qtype: str | None, question: str = ""
    ) -> Verdict:
        """See :func:`check`."""
        return check(answer, ledger, qtype, question)
