"""EMANesterovLightningCallback: checkpoints, validation and the final weights at theta."""

import pytest

torch = pytest.importorskip("torch")
pl = pytest.importorskip("lightning.pytorch")

from ema_nesterov import EMANesterov  # noqa: E402
from ema_nesterov.lightning_callback import EMANesterovLightningCallback  # noqa: E402


def _data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return x, x.sum(1, keepdim=True).sin()


class Regressor(pl.LightningModule):
    def __init__(self, wrap=True):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)
        )
        self.wrap, self.val_losses = wrap, {}

    def training_step(self, batch, _):
        x, y = batch
        return ((self.net(x) - y) ** 2).mean()

    def validation_step(self, batch, _):
        x, y = batch
        self.val_losses[self.global_step] = ((self.net(x) - y) ** 2).mean().item()

    def configure_optimizers(self):
        base = torch.optim.AdamW(self.parameters(), lr=3e-2)
        return EMANesterov(base, gamma=0.9, beta=1.0) if self.wrap else base


class ThetaRecorder(pl.Callback):
    """theta of every parameter (by name) at the end of every training batch."""

    def __init__(self):
        self.theta = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, idx):
        opt = trainer.optimizers[0]
        self.theta[trainer.global_step] = {n: opt.theta(p) for n, p in pl_module.named_parameters()}


def _loader(n, seed, batch):
    x, y = _data(n, seed)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)


def _fit(tmp_path, steps=6, ckpt_path=None, checkpoint=None, wrap=True):
    torch.manual_seed(0)
    model, rec = Regressor(wrap), ThetaRecorder()
    checkpoint = checkpoint or pl.callbacks.ModelCheckpoint(
        dirpath=tmp_path, every_n_train_steps=2, save_top_k=-1, filename="{step}"
    )
    trainer = pl.Trainer(
        max_steps=steps,
        val_check_interval=3,  # every 3 steps, across epochs
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        callbacks=[rec, EMANesterovLightningCallback(), checkpoint],
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    # two batches an epoch: the checkpoints at even steps end an epoch, so a resumed run sees
    # the same batches as the uninterrupted one
    trainer.fit(model, _loader(16, 0, 8), _loader(32, 1, 32), ckpt_path=ckpt_path)
    return trainer, model, rec


def _gap(weights, theta):
    return max((weights[n] - t).abs().max().item() for n, t in theta.items())


@pytest.mark.slow  # ~6 s: Lightning's Trainer start-up
def test_checkpoints_validation_and_final_weights_hold_theta(tmp_path):
    trainer, model, rec = _fit(tmp_path)
    opt = trainer.optimizers[0]
    for step in (2, 4, 6):
        saved = torch.load(tmp_path / f"step={step}.ckpt", weights_only=False)
        assert _gap(saved["state_dict"], rec.theta[step]) == 0.0
        assert saved["optimizer_states"][0]["ema"]["training"] is False
        lookahead = max(
            (p - rec.theta[step][n]).abs().max().item() for n, p in model.named_parameters()
        )
        assert step == 6 or lookahead > 0  # mid-run the model itself still trains at y
    x, y = _data(32, 1)
    with torch.no_grad():  # after fit(): the model holds theta, and so did validation
        assert not opt.training
        assert _gap(dict(model.named_parameters()), rec.theta[6]) == 0.0
        assert model.val_losses[6] == pytest.approx(((model.net(x) - y) ** 2).mean().item())


@pytest.mark.slow
def test_resuming_from_a_theta_checkpoint_continues_the_run(tmp_path):
    _, _, full = _fit(tmp_path / "a")
    _, model, _ = _fit(tmp_path / "b", ckpt_path=tmp_path / "a" / "step=4.ckpt")
    # y is rebuilt as theta + beta m from the saved theta: equal up to float32 rounding
    assert _gap(dict(model.named_parameters()), full.theta[6]) < 1e-6


@pytest.mark.slow
def test_refuses_a_base_optimizer_and_weights_only_checkpoints(tmp_path):
    with pytest.raises(TypeError, match="EMANesterov"):
        _fit(tmp_path / "a", steps=1, wrap=False)
    weights_only = pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "b", save_weights_only=True)
    with pytest.raises(ValueError, match="save_weights_only"):
        _fit(tmp_path / "b", steps=1, checkpoint=weights_only)
