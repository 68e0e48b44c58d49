import pytest

from eva_agent import IterativeReplanner, assess, check, extract_claim, fuzzy_match, normalise
from eva_agent.types import Evidence, Final, Observation, ToolCall
from eva_agent.verify import edit_distance, evidence_answer
from reference import edit_distance_reference, normalise_reference

DET = {
    "label": "blue circle",
    "color": "blue",
    "shape": "circle",
    "conf": 1.0,
    "box": [100, 100, 140, 140],
}
DET2 = {
    "label": "red square",
    "color": "red",
    "shape": "square",
    "conf": 1.0,
    "box": [220, 100, 260, 140],
}
SQ2 = {
    "label": "green square",
    "color": "green",
    "shape": "square",
    "conf": 1.0,
    "box": [20, 100, 60, 140],
}


def det_ev(items, args=None, region=None):
    return Evidence("detect", args or {}, Observation("ok", items), 1.0, region, 1, "ok", "detect")


def ocr_ev(items, tool="rapidocr", region=(60, 130, 300, 200)):
    region = list(region) if region else None
    return Evidence(
        tool,
        {"region": region},
        Observation("ok", items),
        1.0,
        tuple(region) if region else None,
        2,
        "ok",
        "ocr",
    )


def txt(t, conf=0.95, x=120, y=150):
    return {"text": t, "conf": conf, "box": [x - 15, y - 8, x + 15, y + 8]}


@pytest.mark.parametrize("text", ["B42", "b 42", "OIL-5", "  a1o|", "Zz 0o", "ref 7731"])
def test_normalise_matches_reference(text):
    assert normalise(text) == normalise_reference(text)


@pytest.mark.parametrize(
    ("a", "b"),
    [("kitten", "sitting"), ("", "abc"), ("B42", "B24"), ("A17", "AI7"), ("TOTAL", "T0TAL")],
)
def test_edit_distance_matches_reference(a, b):
    assert edit_distance(a, b) == edit_distance_reference(a, b)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("A17", "AI7", True),
        ("B40", "B4O", True),
        ("b 42", "B42", True),
        ("B42", "B43", False),
        ("ref 7731", "ref 773 1", True),
        ("ref 7731", "ref 7781", True),
        ("ref 7731", "ref 7881", False),
        ("K1", "K7", False),
        ("", "", False),
    ],
)
def test_fuzzy_match_table(a, b, same):
    assert fuzzy_match(a, b) is same


@pytest.mark.parametrize(
    ("answer", "qtype", "claim"),
    [
        ("Three", "count", "3"),
        ("there are 4 shapes", "count", "4"),
        ("Yes, there is", "existence", "yes"),
        ("no", "existence", "no"),
        ("It is blue.", "attribute", "blue"),
        ("the red square", "spatial", "red square"),
        ("1,284", "arithmetic", "1284"),
        ("b 42", "read", "B42"),
        ("maybe", "existence", None),
        ("", "read", None),
    ],
)
def test_extract_claim_table(answer, qtype, claim):
    assert extract_claim(answer, qtype) == claim


READ_Q = "What code is written under the blue circle?"


def test_read_verdicts_every_branch():
    ledger = [det_ev([DET, DET2]), ocr_ev([txt("B42"), txt("K77", x=240)])]
    assert check("B42", ledger, "read", READ_Q).label == "supported"
    assert check("b4 2", ledger, "read", READ_Q).label == "supported"
    v = check("B43", ledger, "read", READ_Q)
    assert v.label == "contradicted"
    assert v.evidence_answer == "B42"
    assert v.evidence_conf == 0.95
    assert check("K77", ledger, "read", READ_Q).label == "contradicted"  # not under the circle
    assert check("B42", [det_ev([DET])], "read", READ_Q).label == "unverifiable"
    assert check("", ledger, "read", READ_Q).label == "unverifiable"


def test_count_existence_attribute_spatial_verdicts():
    full = [det_ev([DET, DET2, SQ2])]
    assert check("2", full, "count", "How many squares are there?").label == "supported"
    assert check("3", full, "count", "How many squares are there?").label == "contradicted"
    assert check("no", full, "existence", "Is there a blue star?").label == "supported"
    assert check("yes", full, "existence", "Is there a blue star?").label == "contradicted"
    assert check("blue", full, "attribute", "What colour is the circle?").label == "supported"
    assert check("red", full, "attribute", "What colour is the circle?").label == "contradicted"
    q = "Which shape is nearest to the left of the red square?"
    assert check("blue circle", full, "spatial", q).label == "supported"
    assert check("green square", full, "spatial", q).label == "contradicted"
    # a detection filtered on another colour does not cover the question: unverifiable
    other = [det_ev([DET2], {"color": "red"})]
    assert check("0", other, "count", "How many blue shapes are there?").label == "unverifiable"


def test_arithmetic_is_recomputed_from_ocr_numbers():
    q = "What is the sum of the numbers under the squares?"
    ledger = [
        det_ev([DET2, SQ2], {"shape": "square"}),
        ocr_ev([txt("K17", x=240), txt("A25", x=40)], region=(0, 130, 300, 200)),
    ]
    assert evidence_answer(q, "arithmetic", ledger)[0] == "42"
    assert check("42", ledger, "arithmetic", q).label == "supported"
    assert check("43", ledger, "arithmetic", q).label == "contradicted"
    missing = [ledger[0], ocr_ev([txt("K17", x=240)], region=(0, 130, 300, 200))]
    assert check("42", missing, "arithmetic", q).label == "unverifiable"


def test_assessor_table():
    grounded = [det_ev([DET, DET2])]
    cases = [
        (Observation("error", [], "boom"), "ocr", grounded, "error"),
        (Observation("ok", []), "ocr", grounded, "empty"),
        (Observation("ok", [txt("K77", x=240)]), "ocr", grounded, "irrelevant"),
        (Observation("ok", [txt("B42", conf=0.4)]), "ocr", grounded, "low_conf"),
        (Observation("ok", [txt("B42")]), "ocr", grounded, "ok"),
        (Observation("ok", [txt("B49")]), "ocr", [*grounded, ocr_ev([txt("B42")])], "conflict"),
        (Observation("ok", [txt("B42")]), "ocr", [], "irrelevant"),  # whole image, not grounded
        # a whole-image detection without the entity is evidence of its absence, not noise
        (Observation("ok", [DET2]), "detect", [], "ok"),
        (Observation("ok", [DET]), "detect", [], "ok"),
    ]
    for obs, kind, ledger, status in cases:
        assert assess(obs, READ_Q, ledger, kind).status == status, (obs, status)
    # an OCR read aimed at a region before grounding is accepted
    assert (
        assess(Observation("ok", [txt("B42")]), READ_Q, [], "ocr", [90, 130, 150, 170]).status
        == "ok"
    )


class ScriptedVLM:
    def __init__(self, steps):
        self.steps, self.calls = list(steps), 0

    def plan(self, image, question, ledger, feedback=None, *, hints=None):
        self.calls += 1
        return self.steps.pop(0) if self.steps else Final("x")


def test_replanner_respects_rounds_budget_and_call_order():
    vlm = ScriptedVLM([ToolCall(f"t{k}", {}) for k in range(10)])
    ledger, log = [], []

    def call(step, j):
        return Evidence(step.name, {}, Observation("ok", []), 0.0, None, j, "empty", "ocr")

    calls, _ = IterativeReplanner(3).run(vlm, None, READ_Q, "read", ledger, call, 10, log)
    assert calls == 3
    assert [e.tool for e in ledger] == ["t0", "t1", "t2"]
    assert [e.round for e in ledger] == [1, 2, 3]
    ledger2 = []
    calls, _ = IterativeReplanner(3).run(vlm, None, READ_Q, "read", ledger2, call, 2, log)
    assert calls == 2
    with pytest.raises(ValueError, match=r"max_rounds must be an int in \[1, inf\)"):
        IterativeReplanner(0)
