"""Frozen-layer replay leaves completions bitwise unchanged; the few-shot sums task."""

import pytest
import torch

from essam.tasks import sums

pytest.importorskip("transformers")


def test_replayed_frozen_layers_give_the_same_completions_and_follow_the_top():
    from essam.memo import memoize_frozen_layers
    from essam.rollout import generate
    from methodkit.smollm2 import tiny_smollm2

    model, tok = tiny_smollm2(layers=3, hidden=48)
    for p in model.parameters():
        p.requires_grad_(False)
    prompts = [r["prompt"] for r in sums.make_sum_prompts(4, "test", 1)]
    plain = generate(model, tok, prompts, 4)
    top = model.model.layers[2].mlp.down_proj.weight
    with memoize_frozen_layers(model.model.layers[:2]) as memos:
        first, again = generate(model, tok, prompts, 4), generate(model, tok, prompts, 4)
        assert [m.hits for m in memos] == [1, 1]
        with torch.no_grad():
            top.mul_(-3.0)  # the trained top changes: replay must not hide it
        changed = generate(model, tok, prompts[:3], 4)  # another batch: computed afresh
        changed_again = generate(model, tok, prompts[:3], 4)
    assert first == again == plain
    assert changed == changed_again == generate(model, tok, prompts[:3], 4)
    assert "forward" not in vars(model.model.layers[0])  # the original forward is back
    top.requires_grad_(True)
    with (
        pytest.raises(ValueError, match="needs frozen layers"),
        memoize_frozen_layers(model.model.layers[2:]),
    ):
        pass


def test_sum_prompts_and_reward():
    rows = sums.make_sum_prompts(50, "test", seed=3)
    train_pairs = set(sums.split_pairs("train"))
    for r in rows:
        lines = r["prompt"].split("\n")
        assert len(lines) == 4 * 2 + 2
        assert lines[-1] == "A:"
        a, b = (int(x) for x in lines[-2][3:].split(" + "))
        assert (a, b) not in train_pairs
        assert r["answer"] == a + b
        for q, ans in zip(lines[0:8:2], lines[1:8:2], strict=True):
            x, y = (int(v) for v in q[3:].split(" + "))
            assert (x, y) in train_pairs
            assert ans == f"A: {x + y}"
    assert sums.sum_reward(None, [" 7\nQ", " 8", "none", "-1"], [7, 7, 7, 7]) == [1, 0, 0, 0]
    assert sums.sum_reward(None, [" 9"], [7], partial=True) == [pytest.approx(0.4)]
    with pytest.raises(ValueError, match="split must be one of"):
        sums.make_sum_prompts(2, "dev")
    with pytest.raises(ValueError, match="2 completions for 1 answers"):
        sums.sum_reward(None, ["1", "2"], [1])
