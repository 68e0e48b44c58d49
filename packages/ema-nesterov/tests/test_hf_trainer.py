"""EMANesterovCallback: Trainer checkpoints, save_model() and evaluation hold theta."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")

from ema_nesterov import EMANesterov  # noqa: E402
from ema_nesterov.hf_trainer import EMANesterovCallback, find_ema_nesterov  # noqa: E402

APPLIED = "_ema_beta_applied"


class TinyRegressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
        )

    def forward(self, x, labels=None):
        out = self.net(x)
        loss = None if labels is None else ((out - labels) ** 2).mean()
        return {"loss": loss, "logits": out}


def _rows(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = x.sum(1, keepdim=True).sin()
    return [{"x": a, "labels": b} for a, b in zip(x, y, strict=True)], x, y


class ThetaRecorder(transformers.TrainerCallback):
    """theta = p - beta_applied * m at the end of every step, and the loss there on eval data."""

    def __init__(self, x, y):
        self.x, self.y, self.theta, self.loss, self.eval_loss = x, y, {}, {}, {}

    def on_step_end(self, args, state, control, model=None, optimizer=None, **kw):
        opt = find_ema_nesterov(optimizer)
        assert opt.training
        theta = {}
        for group in opt.param_groups:
            for p in group["params"]:
                theta[p] = p.detach() - group[APPLIED] * opt.state[p]["m"]
        names = {p: n for n, p in model.named_parameters()}
        self.theta[state.global_step] = {names[p]: t.clone() for p, t in theta.items()}
        with torch.no_grad():
            backup = {p: p.detach().clone() for p in theta}
            for p, t in theta.items():
                p.copy_(t)
            self.loss[state.global_step] = ((model(self.x)["logits"] - self.y) ** 2).mean().item()
            for p, t in backup.items():
                p.copy_(t)

    def on_evaluate(self, args, state, control, metrics=None, **kw):
        self.eval_loss[state.global_step] = metrics["eval_loss"]


def _train(tmp_path, with_callback):
    torch.manual_seed(0)
    model = TinyRegressor()
    train_rows, _, _ = _rows(64, 0)
    eval_rows, ex, ey = _rows(32, 1)
    opt = EMANesterov(torch.optim.AdamW(model.parameters(), lr=3e-2), gamma=0.9, beta=1.0)
    recorder = ThetaRecorder(ex, ey)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=6,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=32,
        eval_strategy="steps",
        eval_steps=3,
        save_steps=2,  # checkpoints 2 and 4 come without an evaluation before them
        logging_steps=100,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    callbacks = [recorder] + ([EMANesterovCallback()] if with_callback else [])
    trainer = transformers.Trainer(
        model=model,
        args=args,
        train_dataset=train_rows,
        eval_dataset=eval_rows,
        optimizers=(opt, None),
        callbacks=callbacks,
    )
    trainer.train()
    return trainer, recorder, opt


def _saved(path):
    return safetensors_torch.load_file(str(path / "model.safetensors"))


def _gap(saved, theta):
    return max((saved[n] - t).abs().max().item() for n, t in theta.items())


@pytest.mark.slow  # ~7 s: the first Trainer run of the session imports accelerate
def test_checkpoints_save_model_and_evaluation_hold_theta(tmp_path):
    trainer, rec, opt = _train(tmp_path / "run", with_callback=True)
    for step in (2, 4, 6):
        assert _gap(_saved(tmp_path / "run" / f"checkpoint-{step}"), rec.theta[step]) == 0.0
    for step in (3, 6):
        assert rec.eval_loss[step] == pytest.approx(rec.loss[step], rel=1e-6)
    assert not opt.training  # after train(): the model holds theta
    trainer.save_model(str(tmp_path / "final"))
    assert _gap(_saved(tmp_path / "final"), rec.theta[6]) == 0.0
    assert trainer.evaluate()["eval_loss"] == pytest.approx(rec.loss[6], rel=1e-6)


def test_without_the_callback_checkpoints_hold_the_lookahead_point(tmp_path):
    """The failure the callback fixes: Trainer calls opt.eval() before evaluating (for
    schedule-free optimizers), never before a checkpoint without an evaluation."""
    _, rec, _ = _train(tmp_path / "run", with_callback=False)
    for step in (2, 4):
        assert _gap(_saved(tmp_path / "run" / f"checkpoint-{step}"), rec.theta[step]) > 1e-4


def test_callback_without_an_ema_nesterov_optimizer_fails_before_training(tmp_path):
    model = TinyRegressor()
    rows, _, _ = _rows(16, 0)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=1, report_to=[], use_cpu=True, disable_tqdm=True
    )
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=rows, callbacks=[EMANesterovCallback()]
    )
    with pytest.raises(TypeError, match="needs the Trainer to use an EMANesterov"):
        trainer.train()
