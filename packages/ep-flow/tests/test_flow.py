import numpy as np
import pytest
import torch
from torch import nn

from ep_flow import (
    AxialGridTransformer,
    EPFlow,
    EPFlowConfig,
    collate_crystals,
    condition_of,
    make_disordered_dataset,
    train_flow,
)
from ep_flow.baselines import (
    IndependenceCoupling,
    LinearDoubleCenteredFlow,
    OrderedCSPFlow,
    RowSimplexFlow,
)
from ep_flow.flow import wrap

SMALL = EPFlowConfig(width=16, n_layers=1, n_heads=2)


def _batch(n=6, seed=0):
    return collate_crystals(make_disordered_dataset(n, seed=seed))


def test_network_is_permutation_equivariant():
    torch.manual_seed(0)
    net = AxialGridTransformer(16, 2, 2).double().eval()
    b = _batch(1, seed=3).to(dtype=torch.float64)
    N, M = b.P.shape[1:]
    lat, t = torch.zeros(1, 6, dtype=torch.float64), torch.tensor([0.3], dtype=torch.float64)
    rm, cm = torch.ones(1, N, dtype=torch.bool), torch.ones(1, M, dtype=torch.bool)
    args = lambda Z, F, zs, c: (Z, F, lat, t, zs, c, rm, cm)  # noqa: E731
    Z, F, zs, c = b.Z, b.frac, b.atomic_numbers, b.c / N
    vz, vf, vl = net(*args(Z, F, zs, c))
    pr, pc = torch.randperm(N), torch.randperm(M)
    vz2, vf2, vl2 = net(*args(Z[:, pr][:, :, pc], F[:, pr], zs[:, pc], c[:, pc]))
    assert torch.allclose(vz2, vz[:, pr][:, :, pc], atol=1e-5)
    assert torch.allclose(vf2, vf[:, pr], atol=1e-5)
    assert torch.allclose(vl2, vl, atol=1e-5)


class RandomNet(nn.Module):
    def __init__(self, scale: float = 5.0) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, Z, frac, lattice, t, zs, c, rm, cm):
        return self.scale * torch.randn_like(Z), torch.randn_like(frac), torch.randn_like(lattice)


def test_trajectory_stays_in_d_and_decodes_exactly():
    model = EPFlow(SMALL, network=RandomNet())
    b = _batch(8, seed=1)
    model.set_normalization(b)
    *_, path = model.integrate(b, n_steps=20, path=True)
    w = (b.row_mask[:, :, None] & b.col_mask[:, None]).float()
    for Z in path:
        assert float((Z * w).sum(2).abs().max()) <= 1e-6 * max(1, float(Z.abs().max()))
        assert float((Z * w).sum(1).abs().max()) <= 1e-6 * max(1, float(Z.abs().max()))
    conds = [condition_of(o) for o in make_disordered_dataset(8, seed=1)]
    for odm in model.sample(conds, n_steps=5, seed=1):
        assert odm.is_feasible(1e-8)


def test_hostile_network_samples_decode_exactly():
    # velocities of std 100 push Z far into the polytope's corners (issue 47: 1 of 8 raised)
    torch.manual_seed(0)
    model = EPFlow(SMALL, network=RandomNet(100.0))
    data = make_disordered_dataset(16, seed=5)
    model.set_normalization(collate_crystals(data))
    out = model.sample([condition_of(o) for o in data], n_steps=50, n_samples=2, seed=0)
    assert len(out) == 32
    assert max(o.marginal_error() for o in out) <= 1e-8
    assert all(o.is_feasible(1e-8) for o in out)


@pytest.mark.parametrize("cls", [EPFlow, OrderedCSPFlow, RowSimplexFlow, LinearDoubleCenteredFlow])
def test_every_model_trains_and_samples(cls):
    data = make_disordered_dataset(12, seed=2)
    model = cls(SMALL)
    losses = train_flow(model, data, steps=3, batch_size=4)
    assert np.isfinite(losses).all()
    out = model.sample([condition_of(o) for o in data[:3]], n_steps=3, n_samples=2)
    assert len(out) == 6
    rows = np.array([np.abs(o.P.sum(1) - 1).max() for o in out])
    assert rows.max() <= 1e-6  # every model keeps the site constraint
    if cls is OrderedCSPFlow:
        assert all(set(np.unique(o.P)) <= {0.0, 1.0} for o in out)
    if cls in (EPFlow, LinearDoubleCenteredFlow):
        assert all(o.is_feasible(1e-8) for o in out)
    if cls is EPFlow:
        ind = IndependenceCoupling(model).sample([condition_of(data[0])], n_steps=3)
        assert ind[0].is_feasible(1e-12)
        assert ind[0].to_structure().is_ordered is False


def test_sample_bad_inputs():
    model = EPFlow(EPFlowConfig(width=16, n_layers=1, n_heads=2, max_z=20))
    with pytest.raises(KeyError, match="Zn"):
        model.sample([("ZnO", 2, 1)], n_steps=2)
    with pytest.raises(ValueError, match="n_steps must be >= 1"):
        model.sample([("NaCl", 2, 1)], n_steps=0)
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        model.sample([("NaCl", 2, 1)], n_samples=0)
    with pytest.raises(ValueError, match="sum\\(c\\) > N"):
        model.sample([("NaCl2", 2, 1)])
    with pytest.raises(ValueError, match="eps must be in"):
        EPFlowConfig(eps=0.7)
    with pytest.raises(ValueError, match="lam_f must be a finite number >= 0, got nan"):
        EPFlowConfig(lam_f=float("nan"))
    with pytest.raises(ValueError, match="lam_z must be a finite number >= 0, got -1"):
        EPFlowConfig(lam_z=-1.0)
    with pytest.raises(ValueError, match="divisible"):
        AxialGridTransformer(width=10, n_heads=4)


def test_structure_output_and_cif(tmp_path):
    from pymatgen.io.cif import CifWriter

    from ep_flow import from_cif

    odm = make_disordered_dataset(5, seed=7)[1]
    path = tmp_path / "x.cif"
    CifWriter(odm.to_structure()).write_file(path)
    back = from_cif(str(path))[0]
    assert back.composition.almost_equals(odm.composition, atol=1e-4)


def test_cosine_schedule_warms_up_and_decays(monkeypatch):
    data = make_disordered_dataset(6, seed=3)
    lrs = []
    step = torch.optim.AdamW.step

    def spy(self, *args, **kwargs):
        lrs.append(self.param_groups[0]["lr"])
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    train_flow(EPFlow(SMALL), data, steps=40, batch_size=4, lr=1e-2, schedule="cosine")
    assert lrs[0] == pytest.approx(1e-2 / 2, rel=1e-6)  # warm-up: 2 of 40 steps
    assert lrs[20] == pytest.approx(1e-2 * 0.5 * (1 + np.cos(np.pi * 0.5)), rel=1e-6)
    assert max(lrs) <= 1e-2
    assert lrs[-1] < 1e-4  # decays to ~0
    lrs.clear()
    train_flow(EPFlow(SMALL), data, steps=5, batch_size=4, lr=1e-2)
    assert lrs == [1e-2] * 5  # default: constant
    with pytest.raises(ValueError, match="schedule must be one of"):
        train_flow(EPFlow(SMALL), data, steps=2, schedule="linear")
    # schedule_steps: the first 10 steps of the 40-step schedule see the same learning rates
    lrs.clear()
    train_flow(EPFlow(SMALL), data, steps=40, batch_size=4, lr=1e-2, schedule="cosine")
    full = list(lrs)
    lrs.clear()
    train_flow(EPFlow(SMALL), data, steps=10, batch_size=4, lr=1e-2, schedule="cosine",
               schedule_steps=40)  # fmt: skip
    assert lrs == pytest.approx(full[:10], rel=1e-12)
    with pytest.raises(ValueError, match=r"schedule_steps must be >= steps \(5\), got 4"):
        train_flow(EPFlow(SMALL), data, steps=5, schedule_steps=4)


@pytest.mark.slow
def test_tiny_overfit():
    torch.manual_seed(0)
    data = make_disordered_dataset(8, seed=5)
    model = EPFlow(EPFlowConfig(width=32, n_layers=2, n_heads=4))
    losses = train_flow(model, data, steps=300, batch_size=8, lr=3e-3)
    assert np.mean(losses[-30:]) <= 0.5 * np.mean(losses[:30])


class _CoordinateOracle(nn.Module):
    """Velocity network that knows each site's target: ``v_F = w(F_1 - F_t) / (1 - t)``."""

    def __init__(self, target: torch.Tensor) -> None:
        super().__init__()
        self.target = target

    def forward(self, Z, frac, lattice, t, atomic_numbers, c_frac, row_mask, col_mask):
        v_f = wrap(self.target - frac) / (1 - t[:, None, None])
        return torch.zeros_like(Z), v_f, torch.zeros_like(lattice)


def test_coordinate_target_matches_the_torus_path_and_the_sampler():
    # the training target w(F_1 - F_0) is the exact velocity of F_t = F_0 + t w(F_1 - F_0) mod 1,
    # and Euler integration from t = 0 with that field lands on F_1 (same time convention)
    b = _batch(16, seed=4).to(dtype=torch.float64)
    cfg = EPFlowConfig(lam_z=0.0, lam_l=0.0)
    model = EPFlow(cfg, network=_CoordinateOracle(b.frac)).double()
    model.set_normalization(b)
    loss = model.loss(b, torch.Generator().manual_seed(0))
    assert float(loss) < 1e-20
    _, F, _ = model.integrate(b, n_steps=7, generator=torch.Generator().manual_seed(1))
    err = wrap(F - b.frac).abs()[b.row_mask]
    assert float(err.max()) < 1e-12


def test_train_flow_progress_bar(monkeypatch):
    import io
    import sys

    data = make_disordered_dataset(6, seed=3)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    train_flow(EPFlow(SMALL), data, steps=3, batch_size=4, progress=True)
    assert "train EPFlow" in buf.getvalue()
    assert "3/3" in buf.getvalue()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf2 = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf2)
    train_flow(EPFlow(SMALL), data, steps=3, batch_size=4)
    train_flow(EPFlow(SMALL), data, steps=3, batch_size=4, progress=True)  # TQDM_DISABLE wins
    assert buf2.getvalue() == ""


def test_train_flow_callback_and_bad_arguments():
    data = make_disordered_dataset(6, seed=3)
    seen = []

    def callback(step, model):
        seen.append((step, model.training))
        model.eval()  # train_flow puts it back in training mode

    losses = train_flow(EPFlow(SMALL), data, steps=7, batch_size=4, callback=callback,
                        callback_every=3)  # fmt: skip
    assert [s for s, _ in seen] == [3, 6, 7]
    assert all(t for _, t in seen)
    assert len(losses) == 7
    assert np.isfinite(losses).all()
    bad = [({"steps": 0}, "steps must be >= 1, got 0"),
           ({"batch_size": 0}, "batch_size must be >= 1, got 0"),
           ({"lr": float("nan")}, "lr must be a finite number > 0, got nan"),
           ({"lr": -1.0}, "lr must be a finite number > 0"),
           ({"callback": callback}, "callback_every must be >= 1 with a callback")]  # fmt: skip
    for kwargs, msg in bad:
        with pytest.raises(ValueError, match=msg):
            train_flow(EPFlow(SMALL), data, **{"steps": 2, **kwargs})
    with pytest.raises(ValueError, match="at least one crystal"):
        train_flow(EPFlow(SMALL), [], steps=2)
