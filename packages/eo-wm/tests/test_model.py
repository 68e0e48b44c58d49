import numpy as np
import pytest
import torch

from _eowm_helpers import HW, TC, TF, tiny_config
from eo_wm import EOWorldModel, LatentAutoencoderWrapper, flow_matching_loss

B = 2


def _cfg(**kw):
    return tiny_config(**kw)


def _inputs(seed=0, mode="decomposed"):
    g = torch.Generator().manual_seed(seed)
    ctx = torch.rand(B, TC, 4, HW, HW, generator=g)
    msk = (torch.rand(B, TC, 1, HW, HW, generator=g) > 0.2).float()
    st = torch.rand(B, 3, HW, HW, generator=g)
    T = TC + TF
    doy = torch.full((B, T), 180.0)
    if mode == "undifferentiated":
        cond = {"weather": torch.randn(B, T, 3, generator=g), "doy": doy}
    else:
        cond = {
            "baseline": torch.randn(B, T, 3, generator=g),
            "anomaly": torch.randn(B, T, 3, generator=g),
            "stress": torch.rand(B, T, 4, generator=g),
            "doy": doy,
        }
    return ctx, msk, st, cond


def _batch(mode="decomposed"):
    ctx, msk, st, cond = _inputs(mode=mode)
    return {
        "context": ctx,
        "context_mask": msk,
        "static": st,
        "target": torch.rand(B, TF, 4, HW, HW),
        "target_mask": torch.ones(B, TF, 1, HW, HW),
        **cond,
    }


@pytest.mark.parametrize("mode", ["decomposed", "undifferentiated", "merged"])
def test_shapes(mode):
    torch.manual_seed(0)
    m = EOWorldModel(_cfg(conditioning=mode))
    ctx, msk, st, cond = _inputs(mode=mode)
    v = m(torch.randn(B, TF, 4, HW, HW), torch.rand(B), ctx, msk, st, cond)
    assert v.shape == (B, TF, 4, HW, HW)
    assert m.sample(ctx, msk, st, cond, n_members=3, n_steps=2).shape == (3, B, TF, 4, HW, HW)


def test_initial_output_ignores_cond_then_learns_from_the_anomaly():
    torch.manual_seed(0)
    m = EOWorldModel(_cfg(cond_dropout=0.0))
    ctx, msk, st, cond = _inputs()
    x, s = torch.randn(B, TF, 4, HW, HW), torch.rand(B)
    cond2 = {**cond, "anomaly": cond["anomaly"] + 3.0}
    assert torch.equal(m(x, s, ctx, msk, st, cond), m(x, s, ctx, msk, st, cond2))
    # Two sign-gradient steps (Adam's first step; the first moves the zero-initialised outputs,
    # the second the conditioning behind them). Not torch.optim: its first step imports
    # torch._dynamo, which costs seconds.
    for _ in range(2):
        m.zero_grad()
        flow_matching_loss(m, _batch(), torch.Generator().manual_seed(1)).backward()
        with torch.no_grad():
            for p in m.parameters():
                if p.grad is not None:
                    p -= 1e-2 * p.grad.sign()
    d = (m(x, s, ctx, msk, st, cond) - m(x, s, ctx, msk, st, cond2)).abs().max()
    assert d > 1e-6


@pytest.mark.parametrize("causal", [True, False])
def test_causal_forcing_mask_at_token_level(causal):
    torch.manual_seed(0)
    m = EOWorldModel(_cfg(causal_forcing=causal))
    attn = m.blocks[0].cross
    torch.nn.init.normal_(attn.out.weight)
    T, N = TC + TF, m.n_patches
    q = torch.randn(1, T * N, 16)
    f = torch.randn(1, T, 16)
    f2 = f.clone()
    t_prime = 3
    f2[:, t_prime] += 1.0
    mask = m.cross_mask()
    a, b = attn(q, f, mask), attn(q, f2, mask)
    change = (a - b).abs().amax(-1).view(T, N).amax(-1)
    if causal:
        assert torch.all(change[:t_prime] == 0)
        assert torch.all(change[t_prime:] > 0)
    else:
        assert torch.all(change > 0)


def test_modes_reject_the_other_inputs():
    ctx, msk, st, cond = _inputs()
    _, _, _, raw = _inputs(mode="undifferentiated")
    x, s = torch.randn(B, TF, 4, HW, HW), torch.rand(B)
    with pytest.raises(ValueError, match="undifferentiated mode"):
        EOWorldModel(_cfg(conditioning="undifferentiated"))(x, s, ctx, msk, st, cond)
    with pytest.raises(ValueError, match="raw 'weather'"):
        EOWorldModel(_cfg())(x, s, ctx, msk, st, raw)


def test_bad_inputs():
    m = EOWorldModel(_cfg())
    ctx, msk, st, cond = _inputs()
    x, s = torch.randn(B, TF, 4, HW, HW), torch.rand(B)
    with pytest.raises(ValueError, match="divisible by patch_size"):
        _cfg(image_size=10)
    with pytest.raises(ValueError, match="t_context"):
        m(x, s, ctx[:, :1], msk[:, :1], st, cond)
    with pytest.raises(ValueError, match="t_future"):
        m(x[:, :2], s, ctx, msk, st, cond)
    short = {k: v[:, :-1] for k, v in cond.items()}
    with pytest.raises(ValueError, match="t_context \\+ t_future"):
        m(x, s, ctx, msk, st, short)
    with pytest.raises(ValueError, match=r"doy must lie in \[1, 366\]"):
        m(x, s, ctx, msk, st, {**cond, "doy": cond["doy"] + 300})
    with pytest.raises(ValueError, match="0 or 1"):
        m(x, s, ctx, msk * 0.5, st, cond)
    with pytest.raises(ValueError, match="context_mask must have shape"):
        m(x, s, ctx, msk[..., :4], st, cond)
    with pytest.raises(ValueError, match="conditioning must be"):
        _cfg(conditioning="other")


def test_sampling_members_seeds_and_full_cloud():
    torch.manual_seed(0)
    m = EOWorldModel(_cfg())
    for p in m.parameters():  # leave the zero init so the output depends on the noise path
        torch.nn.init.normal_(p, std=0.05)
    ctx, msk, st, cond = _inputs()
    a = m.sample(ctx, msk, st, cond, 3, 4, generator=torch.Generator().manual_seed(5))
    b = m.sample(ctx, msk, st, cond, 3, 4, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)
    assert (a[0] - a[1]).abs().max() > 1e-3
    c = m.sample(
        ctx,
        torch.zeros_like(msk),
        st,
        cond,
        2,
        4,
        method="heun",
        guidance=2.0,
        generator=torch.Generator().manual_seed(5),
    )
    assert torch.isfinite(c).all()


class _TinyAE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Conv2d(4, 2, 2, stride=2)
        self.dec = torch.nn.ConvTranspose2d(2, 4, 2, stride=2)

    def encode(self, x):
        return self.enc(x)

    def decode(self, z):
        return self.dec(z)


def test_latent_wrapper_round_trip_shapes():
    torch.manual_seed(0)
    wrap = LatentAutoencoderWrapper(_TinyAE())
    ctx, msk, st, cond = _inputs()
    cfg = _cfg(in_channels=2, image_size=HW // 2, patch_size=2)
    out = wrap.sample(EOWorldModel(cfg), ctx, msk, st, cond, n_members=2, n_steps=2)
    assert out.shape == (2, B, TF, 4, HW, HW)
    with pytest.raises(TypeError, match="encode"):
        LatentAutoencoderWrapper(torch.nn.Linear(2, 2))


def test_loss_ignores_cloudy_target_pixels():
    torch.manual_seed(0)
    m = EOWorldModel(_cfg())
    batch = _batch()
    batch["target_mask"][:, :, :, :4] = 0
    with torch.no_grad():
        l1 = flow_matching_loss(m, batch, torch.Generator().manual_seed(0))
    batch["target"][:, :, :, :4] += 100.0
    with torch.no_grad():
        l2 = flow_matching_loss(m, batch, torch.Generator().manual_seed(0))
    assert float(l1) == pytest.approx(float(l2))
    assert np.isfinite(float(l1))


@pytest.mark.parametrize("residual", [True, False])
def test_flow_space_round_trip(residual):
    m = EOWorldModel(_cfg(residual=residual))
    m.set_normalization(
        band_mean=torch.tensor([0.1, 0.2, 0.3, 0.4]),
        band_std=torch.tensor([0.5, 0.6, 0.7, 0.8]),
        residual_std=torch.tensor([0.2, 0.3, 0.4, 0.5]),
    )
    ctx, msk, _, _ = _inputs()
    tgt = torch.rand(B, TF, 4, HW, HW)
    back = m.from_flow_space(m.to_flow_space(tgt, ctx, msk), ctx, msk)
    assert torch.allclose(back, tgt, atol=1e-6)


def test_residual_flow_space_is_zero_for_persistence():
    """A target equal to the last clean context pixel is 0 in the residual space."""
    from eo_wm.baselines import persistence_forecast

    m = EOWorldModel(_cfg())
    m.set_normalization(band_mean=torch.full((4,), 0.2), band_std=torch.full((4,), 0.1))
    ctx, msk, _, _ = _inputs()
    msk[:, 0] = 1.0  # every pixel seen at least once
    pers = torch.as_tensor(persistence_forecast(ctx.numpy(), msk.numpy(), TF), dtype=torch.float32)
    assert m.to_flow_space(pers, ctx, msk).abs().max() < 1e-5
    assert m.to_flow_space(pers + 0.1, ctx, msk).abs().min() > 0.5  # scaled by residual_std
    plain = EOWorldModel(_cfg(residual=False))
    plain.set_normalization(band_mean=torch.full((4,), 0.2), band_std=torch.full((4,), 0.1))
    assert plain.to_flow_space(pers, ctx, msk).abs().max() > 0.1


def test_residual_std_from_training_windows():
    from eo_wm.train import normalization_stats

    batch = {**_batch(), "weather": torch.randn(B, TC + TF, 3)}
    batch["context_mask"][:] = 1.0
    batch["target"] = batch["context"][:, -1:].repeat(1, TF, 1, 1, 1) + 0.0
    stats = normalization_stats(batch)
    assert torch.allclose(stats["residual_std"], torch.full((4,), 1e-3))  # clamped: no residual
    batch["target"][:, :, 1] += 0.05
    std = normalization_stats(batch)["residual_std"]
    assert std[1] == pytest.approx(0.05 / float(stats["band_std"][1]), rel=1e-4)


def _dataset(n=4):
    ctx, msk, st, cond = _inputs()
    g = torch.Generator().manual_seed(1)
    rows = torch.arange(n) % B
    data = {
        "context": ctx[rows],
        "context_mask": msk[rows],
        "static": st[rows],
        "target": torch.rand(n, TF, 4, HW, HW, generator=g),
        "target_mask": torch.ones(n, TF, 1, HW, HW),
        "weather": torch.randn(n, TC + TF, 3, generator=g),
    }
    data.update({k: v[rows] for k, v in cond.items()})
    return data


def test_train_model_refuses_nan_frames_missing_keys_and_empty_data():
    from eo_wm import train_model

    model = EOWorldModel(_cfg())
    data = _dataset()
    data["target"][0, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"dataset\['target'\] has 1 NaN"):
        train_model(model, data, steps=1)
    data = _dataset()
    del data["stress"]
    with pytest.raises(ValueError, match=r"dataset lacks \['stress'\]"):
        train_model(model, data, steps=1)
    data = {k: v[:0] for k, v in _dataset().items()}
    with pytest.raises(ValueError, match="no window"):
        train_model(model, data, steps=1)
    with pytest.raises(TypeError, match=r"dataset\['context'\] must be a torch.Tensor"):
        train_model(model, {**_dataset(), "context": np.zeros(3)}, steps=1)


def test_train_model_shows_progress_when_asked(monkeypatch, capsys):
    from eo_wm import train_model

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    losses = train_model(EOWorldModel(_cfg()), _dataset(), steps=2, batch_size=2, progress=True)
    assert len(losses) == 2
    assert "train eo-wm" in capsys.readouterr().err
    monkeypatch.setenv("TQDM_DISABLE", "1")
    train_model(EOWorldModel(_cfg()), _dataset(), steps=1, batch_size=2, progress=True)
    assert capsys.readouterr().err == ""


def test_stress_is_standardised_before_the_forcing_mlp():
    from eo_wm.train import normalization_stats

    batch = {**_batch(), "weather": torch.randn(B, TC + TF, 3)}
    batch["stress"] = batch["stress"] * 10 + 3
    stats = normalization_stats(batch)
    flat = batch["stress"].reshape(-1, 4)
    assert torch.allclose(stats["stress_mean"], flat.mean(0))
    assert torch.allclose(stats["stress_std"], flat.std(0))
    torch.manual_seed(0)
    m = EOWorldModel(_cfg())
    for p in m.parameters():  # undo the zero-initialised gates so that cond reaches the output
        torch.nn.init.normal_(p, std=0.2)
    m2 = EOWorldModel(_cfg())
    m2.load_state_dict(m.state_dict())
    m.set_normalization(stress_mean=stats["stress_mean"], stress_std=stats["stress_std"])
    ctx, msk, st, cond = _inputs()
    shifted = {**cond, "stress": cond["stress"] * stats["stress_std"] + stats["stress_mean"]}
    x, s = torch.randn(B, TF, 4, HW, HW), torch.full((B,), 0.5)
    with torch.no_grad():
        out_shift = m(x, s, ctx, msk, st, shifted)
        out_unit = m2(x, s, ctx, msk, st, cond)  # default stress_mean 0, stress_std 1
        out_raw = m(x, s, ctx, msk, st, cond)
    assert torch.allclose(out_shift, out_unit, atol=1e-4)  # (S - mean) / std reaches the MLP
    assert not torch.allclose(out_raw, out_unit, atol=1e-3)
