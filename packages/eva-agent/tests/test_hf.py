import pytest

torch = pytest.importorskip("torch")

from eva_agent import HFVLM, ShapeTextVQA  # noqa: E402
from eva_agent.types import ToolCall  # noqa: E402
from eva_agent.vlm import ReplyParseError  # noqa: E402


@pytest.fixture(scope="module")
def item():
    return ShapeTextVQA(6, seed=0)[2]


class StandInProcessor:
    """In-code processor: characters are token ids (no download)."""

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False):
        content = messages[0]["content"]
        if isinstance(content, list):
            content = " ".join(p.get("text", "<image>") for p in content)
        return "<user>" + content + "<assistant>"

    def __call__(self, text=None, images=None, return_tensors="pt"):
        self.saw_image = images is not None
        return {"input_ids": torch.tensor([[ord(c) % 256 for c in text[-64:]]])}

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(int(i)) for i in ids)


class StandInModel:
    """Exposes ``generate()`` and emits a scripted reply with known scores."""

    def __init__(self, reply):
        self.reply = reply

    def generate(self, input_ids, max_new_tokens, **kw):
        ids = [ord(c) for c in self.reply][:max_new_tokens]
        scores = []
        for t in ids:
            s = torch.full((1, 256), -1e4)
            s[0, t], s[0, 0] = 0.0, 0.0  # p(token) = 0.5
            scores.append(s)
        seq = torch.cat([input_ids, torch.tensor([ids])], dim=1)

        class Out:
            pass

        out = Out()
        out.sequences, out.scores = seq, tuple(scores)
        return out


def test_hfvlm_runs_one_agent_step(item):
    proc = StandInProcessor()
    vlm = HFVLM(StandInModel('{"tool": "detect", "args": {}}'), proc, max_new_tokens=64)
    step = vlm.plan(item.image, item.question, [])
    assert step == ToolCall("detect", {})
    assert proc.saw_image
    ans, conf = HFVLM(StandInModel("5"), proc).answer(item.image, item.question)
    assert ans == "5"
    assert conf == pytest.approx(0.5)
    with pytest.raises(ReplyParseError, match="after one repair retry"):
        HFVLM(StandInModel("hmm"), proc).plan(item.image, item.question, [])


class StandInDetProcessor:
    """Processor of a stand-in zero-shot detector: returns fixed boxes and scores."""

    def __call__(self, text=None, images=None, return_tensors="pt"):
        self.phrase = text[0][0]
        return {"pixel_values": torch.zeros(1, 3, 4, 4)}

    def post_process_object_detection(self, outputs, threshold, target_sizes):
        keep = outputs["scores"] >= threshold
        return [{"scores": outputs["scores"][keep], "boxes": outputs["boxes"][keep]}]


def test_hf_zero_shot_detector_plumbing(item):
    from eva_agent import HFZeroShotDetector

    def model(**inputs):
        return {
            "scores": torch.tensor([0.9, 0.1]),
            "boxes": torch.tensor([[10.0, 20.0, 50.0, 60.0], [0.0, 0.0, 5.0, 5.0]]),
        }

    proc = StandInDetProcessor()
    obs = HFZeroShotDetector(model, proc, threshold=0.3)(item.image, phrase="red star")
    assert proc.phrase == "red star"
    assert obs.items == [
        {
            "label": "red star",
            "color": "red",
            "shape": "star",
            "conf": pytest.approx(0.9),
            "box": [10.0, 20.0, 50.0, 60.0],
        }
    ]
    assert HFZeroShotDetector(model, proc)(item.image, phrase=" ").status == "error"
