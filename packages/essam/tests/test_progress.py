"""Progress bars: shown when asked (progress=True), silent by default under TQDM_DISABLE."""

import io
import sys

import pytest
import torch

from essam import ESSAMConfig, ESSAMTrainer
from essam.tasks import arithmetic as ar

transformers = pytest.importorskip("transformers")


def _trainer(progress, tmp_path):
    tok = ar.CharTokenizer()
    with torch.random.fork_rng():
        torch.manual_seed(0)
        cfg = transformers.GPT2Config(
            n_layer=1, n_embd=16, n_head=2, n_positions=128, vocab_size=len(tok),
            eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )  # fmt: skip
        model = transformers.GPT2LMHeadModel(cfg)
    args = ESSAMConfig(
        max_steps=2, per_device_train_batch_size=2, population_size=2, max_completion_length=4,
        output_dir=str(tmp_path / "out"), progress=progress,
    )  # fmt: skip
    train, test = ar.make_problems(4, "rl_train"), ar.make_problems(4, "rl_test")
    return ESSAMTrainer(
        model, [ar.partial_reward], train, args, processing_class=tok, eval_dataset=test
    )


def _stderr(monkeypatch) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    return buf


def test_train_and_evaluate_show_a_bar_when_asked(monkeypatch, tmp_path):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert ESSAMConfig().progress is None
    trainer = _trainer(True, tmp_path)
    buf = _stderr(monkeypatch)
    trainer.train()
    trainer.evaluate(batch_size=2)
    assert "essam" in buf.getvalue()
    assert "2/2" in buf.getvalue()
    assert "essam evaluate" in buf.getvalue()


def test_default_is_silent_under_tqdm_disable(monkeypatch, tmp_path):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    for progress in (None, True):
        trainer = _trainer(progress, tmp_path)
        buf = _stderr(monkeypatch)
        trainer.train()
        trainer.evaluate(batch_size=2)
        assert buf.getvalue() == ""
