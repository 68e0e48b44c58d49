"""SimulatedVLM: a labelled, calibrated stochastic simulator of a VLM. No neural network.

It reads the scene spec attached to a rendered ShapeTextVQA image through an explicit noise
model whose failure modes are parameters (:class:`SimParams`): per-type direct accuracy,
overconfidence, wrong tool / wrong region when planning, repair when told why, evidence
neglect, and a shared percept across samples (the shared-wrong-assumption failure of debate).
Every draw is keyed by (seed, scene, question, purpose), so two methods that ask the same thing
of the simulator get the same answer: Direct and EVA's fast pass coincide exactly.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from eva_agent._vocab import COLOURS, SHAPES
from eva_agent.types import Evidence, Final, ToolCall
from eva_agent.verify import covering, evidence_answer, relevant_detections
from eva_agent.world.questions import answer_question, parse_question
from eva_agent.world.scenes import CELL_W, LETTERS, label_box, scene_of, shape_box

#: (engine, scale) tried in turn on a label zone when a reading is empty, low or conflicting.
OCR_LADDER = (("rapidocr", 2.0), ("rapidocr", 3.0), ("tesseract", 3.0), ("tesseract", 2.0))


@dataclass(frozen=True)
class SimParams:
    """Failure modes of the simulated VLM (defaults: the spec's rough range of open 7B VLMs).

    Attributes:
        attribute, existence, spatial, arithmetic: Direct accuracy per type.
        false_yes: P("yes") for a plausible absent object.
        count_base, count_drop, count_free: count accuracy ``base - drop * max(0, n - free)``.
        read_at_28, read_at_12: read accuracy at 28 px and 12 px glyph height (logistic in
            the effective height = font px x grey factor x zoom).
        grey_factor: effective-height factor of grey low-contrast text.
        conf_correct, conf_wrong: Beta parameters of the confidence of right / wrong answers.
        wrong_tool, wrong_region: planning mistakes per round.
        fix: P(a mistake is fixed in the next round when the assessor says why).
        neglect, neglect_evidence_first: P(answer from the prior despite evidence), plain and
            under an evidence-first instruction.
        shared_percept: P(sample k > 0 shares sample 0's percept).
    """

    attribute: float = 0.92
    existence: float = 0.85
    false_yes: float = 0.15
    count_base: float = 0.9
    count_drop: float = 0.1
    count_free: int = 3
    read_at_28: float = 0.85
    read_at_12: float = 0.35
    grey_factor: float = 0.8
    spatial: float = 0.7
    arithmetic: float = 0.35
    conf_correct: tuple[float, float] = (8.0, 2.0)
    conf_wrong: tuple[float, float] = (5.0, 3.0)
    wrong_tool: float = 0.2
    wrong_region: float = 0.25
    fix: float = 0.7
    neglect: float = 0.3
    neglect_evidence_first: float = 0.1
    shared_percept: float = 0.6

    @classmethod
    def perfect(cls) -> SimParams:
        """All noise off: every percept right, no planning mistake, no evidence neglect."""
        return cls(
            attribute=1,
            existence=1,
            false_yes=0,
            count_base=1,
            count_drop=0,
            read_at_28=1,
            read_at_12=1,
            spatial=1,
            arithmetic=1,
            wrong_tool=0,
            wrong_region=0,
            fix=1,
            neglect=0,
            neglect_evidence_first=0,
        )

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in ("conf_correct", "conf_wrong"):
                if len(v) != 2 or not all(math.isfinite(x) and x > 0 for x in v):
                    raise ValueError(f"{f.name} must be two positive Beta parameters, got {v}")
            elif f.name == "count_free":
                if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                    raise ValueError(f"count_free must be an int >= 0, got {v!r}")
            elif f.name != "count_free" and not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"{f.name} must be in [0, 1], got {v}")


def _label_zone(box: Any) -> list[int]:
    cx = (box[0] + box[2]) / 2
    return [int(cx - 50), int(box[3] - 2), int(cx + 50), int(box[3] + 48)]


def _union(boxes: list[list[int]]) -> list[int]:
    return [
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    ]


class SimulatedVLM:
    """Simulated VLM, no neural network: answers, plans and judges through :class:`SimParams`.

    Args:
        params: The noise model (default :class:`SimParams`).
        seed: Seed of all draws.
        detector, ocr_tools: Names of the tools it plans with.

    Example:
        >>> from eva_agent.world import ShapeTextVQA
        >>> item = ShapeTextVQA(6, seed=0)[0]
        >>> SimulatedVLM(SimParams.perfect()).answer(item.image, item.question)[0] == item.answer
        True
    """

    def __init__(
        self, params: SimParams | None = None, seed: int = 0, detector: str = "detect"
    ) -> None:
        self.params = params or SimParams()
        self.seed = int(seed)
        self.detector = detector
        self._given: dict[tuple[str, str], float] = {}  # (question, answer) -> conf, for judge

    def with_params(self, **changes: Any) -> SimulatedVLM:
        """A copy with some parameters changed."""
        return SimulatedVLM(replace(self.params, **changes), self.seed, self.detector)

    # ----- draws -----
    def _rng(self, key: str, *purpose: Any) -> np.random.Generator:
        h = hashlib.sha256(repr((key, purpose)).encode()).digest()
        return np.random.default_rng([self.seed, int.from_bytes(h[:8], "little")])

    def _item(self, image: Any, question: str) -> tuple[dict, dict, str, str]:
        scene = scene_of(image)
        parsed = parse_question(question)
        if scene is None or parsed is None:
            raise ValueError(
                "SimulatedVLM answers ShapeTextVQA questions on rendered scenes only "
                "(image.info['eva_scene'] and a template question)"
            )
        truth = answer_question(scene, parsed)
        if truth is None:
            raise ValueError(f"question {question!r} is ill-posed on scene {scene['id']!r}")
        return scene, parsed, truth, f"{scene['id']}|{question}"

    def _accuracy(self, scene: dict, parsed: dict, truth: str, ledger: list[Evidence]) -> float:
        p, qt = self.params, parsed["qtype"]
        if qt == "existence":
            return 1 - p.false_yes if truth == "no" else p.existence
        if qt == "count":
            return max(0.0, p.count_base - p.count_drop * max(0, int(truth) - p.count_free))
        if qt == "read":
            if p.read_at_12 >= 1.0:
                return 1.0
            t = next(s for s in scene["shapes"] if s["label"] == truth)
            h = t["font"] * (p.grey_factor if t["grey"] else 1.0) * self._zoom(t, ledger)
            lo, hi = (math.log(x / (1 - x)) for x in (p.read_at_12, min(p.read_at_28, 1 - 1e-9)))
            slope = (hi - lo) / 16.0
            return 1.0 / (1.0 + math.exp(-(lo + slope * (h - 12.0))))
        return float(getattr(p, qt))

    @staticmethod
    def _zoom(target: dict, ledger: list[Evidence]) -> float:
        """Crop-and-zoom raises the effective glyph height: the largest zoom over the label."""
        lb, z = label_box(target), 1.0
        for e in ledger:
            r = e.args.get("region")
            if (
                e.kind == "zoom"
                and r
                and r[0] <= lb[0]
                and r[1] <= lb[1]
                and r[2] >= lb[2]
                and r[3] >= lb[3]
            ):
                z = max(z, float(e.args.get("scale", 2.0)))
        return z

    def _wrong(self, scene: dict, parsed: dict, truth: str, rng: np.random.Generator) -> str:
        qt = parsed["qtype"]
        if qt == "existence":
            return "yes" if truth == "no" else "no"
        if qt == "count":
            return str(max(0, int(truth) + int(rng.choice([-1, 1, 1, 2]))))
        if qt == "arithmetic":
            return str(max(0, int(truth) + int(rng.choice([-10, 10, -1, 1, 9, -9]))))
        if qt == "read":
            k = int(rng.integers(len(truth)))
            chars = "0123456789" if truth[k].isdigit() else LETTERS
            c = str(rng.choice([x for x in chars if x != truth[k]]))
            return truth[:k] + c + truth[k + 1 :]
        if qt == "spatial":
            others = sorted({f"{s['color']} {s['shape']}" for s in scene["shapes"]} - {truth})
            return str(rng.choice(others)) if others else truth
        pool = SHAPES if truth in SHAPES else tuple(COLOURS)
        return str(rng.choice([x for x in pool if x != truth]))

    def _percept(
        self, image: Any, question: str, sample: int, ledger: list[Evidence]
    ) -> tuple[str, float]:
        scene, parsed, truth, key = self._item(image, question)
        if sample > 0 and self._rng(key, "share", sample).random() < self.params.shared_percept:
            sample = 0
        correct = self._rng(key, "percept", sample).random() < self._accuracy(
            scene, parsed, truth, ledger
        )
        ans = truth if correct else self._wrong(scene, parsed, truth, self._rng(key, "w", sample))
        a, b = self.params.conf_correct if correct else self.params.conf_wrong
        return ans, float(self._rng(key, "conf", sample).beta(a, b))

    # ----- the VLM protocol -----
    def answer(
        self,
        image: Any,
        question: str,
        evidence: list[Evidence] | None = None,
        *,
        hints: dict[str, Any] | None = None,
        sample: int = 0,
    ) -> tuple[str, float]:
        """Percept, or the evidence's answer unless the prior wins (evidence neglect)."""
        hints = hints or {}
        ledger = list(evidence or [])
        _, parsed, _, key = self._item(image, question)
        ans, conf = self._percept(image, question, sample, ledger)
        if str(hints.get("critique", "")).startswith("uncertain"):
            ans2, conf2 = self._percept(image, question, 1000 + sample, ledger)  # a second look
            if conf2 > conf:
                ans, conf = ans2, conf2
        peers = [str(x) for x in hints.get("peers", [])]
        if len(peers) >= 2 and len(set(peers)) == 1 and peers[0] != ans:
            ans = peers[0]  # two agreeing peers sway a dissenting agent
        if ledger:
            ev = evidence_answer(question, parsed["qtype"], ledger)
            first = bool(hints.get("evidence_first"))
            p = self.params.neglect_evidence_first if first else self.params.neglect
            if ev is not None and self._rng(key, "neglect", len(ledger), first).random() >= p:
                ans, conf = ev[0], 0.5 + 0.5 * float(ev[1])
        self._given[(question, ans)] = conf
        return ans, conf

    def judge(self, question: str, answer: str, ledger: list[Evidence]) -> str:
        """Say "uncertain ..." when its confidence in ``answer`` (as it gave it) is below 0.7."""
        conf = self._given.get((question, str(answer)), 0.0)
        return "confident" if conf >= 0.7 else "uncertain: look again"

    def plan(
        self,
        image: Any,
        question: str,
        ledger: list[Evidence],
        feedback: dict[str, Any] | None = None,
        *,
        hints: dict[str, Any] | None = None,
    ) -> ToolCall | Final:
        """The correct next call, unless a planning mistake is drawn (see :class:`SimParams`)."""
        scene, parsed, _, key = self._item(image, question)
        single = bool((hints or {}).get("single_shot"))
        correct = self._correct(question, parsed, scene, ledger, single)
        if correct is None:
            return Final("")
        rng = self._rng(key, "plan", len(ledger))
        if feedback and ledger:
            then = self._correct(question, parsed, scene, ledger[:-1], single)
            last = ToolCall(feedback["tool"], feedback["args"])
            if then is not None and last != then:  # the last call was a mistake, and it is told
                return correct if rng.random() < self.params.fix else last
        u = rng.random()
        if u < self.params.wrong_tool:
            if correct.name == self.detector:
                return ToolCall("rapidocr", {})
            return ToolCall(self.detector, {})
        if u < self.params.wrong_tool + self.params.wrong_region:
            return self._misaim(correct, scene, rng)
        return correct

    def _correct(
        self, question: str, parsed: dict, scene: dict, ledger: list[Evidence], single: bool
    ) -> ToolCall | None:
        qt, c, s = parsed["qtype"], parsed.get("color"), parsed.get("shape")
        filters = {} if qt == "spatial" else {k: v for k, v in (("color", c), ("shape", s)) if v}
        if single and qt in ("read", "arithmetic"):  # one call, aimed from its own percept
            targets = [
                x
                for x in scene["shapes"]
                if (c is None or x["color"] == c) and (s is None or x["shape"] == s)
            ]
            zones = [_label_zone(shape_box(x)) for x in targets]
            return ToolCall("rapidocr", {"region": _union(zones), "scale": 2.0}) if zones else None
        if not covering(question, ledger, unfiltered=qt == "spatial"):
            return ToolCall(self.detector, filters)
        if qt not in ("read", "arithmetic"):
            return None
        dets = relevant_detections(question, ledger)
        if not dets:
            return None
        region = _union([_label_zone(d["box"]) for d in dets])
        tried = {
            (e.tool, float(e.args.get("scale", 1.0)))
            for e in ledger
            if e.kind == "ocr" and e.args.get("region") == region
        }
        for engine, scale in OCR_LADDER:
            if (engine, scale) not in tried:
                return ToolCall(engine, {"region": region, "scale": scale})
        return None

    def _misaim(self, correct: ToolCall, scene: dict, rng: np.random.Generator) -> ToolCall:
        args = dict(correct.args)
        if correct.name == self.detector:
            if "color" in args or not args.get("shape"):
                args["color"] = str(rng.choice([x for x in COLOURS if x != args.get("color")]))
            else:
                args["shape"] = str(rng.choice([x for x in SHAPES if x != args["shape"]]))
            return ToolCall(correct.name, args)
        x0, y0, x1, y1 = args["region"]
        dx = CELL_W if x1 + CELL_W <= scene["width"] else -CELL_W
        args["region"] = [x0 + dx, y0, x1 + dx, y1]
        return ToolCall(correct.name, args)
