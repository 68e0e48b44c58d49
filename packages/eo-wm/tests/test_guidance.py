import math

import numpy as np
import pytest
import torch

import eo_wm.guidance as G  # noqa: N812
from _eowm_helpers import HW, TC, TF, tiny_config
from eo_wm import EOWorldModel, metrics, train_model
from eo_wm.guidance import GuidanceChoice, select_guidance, validation_score

N = 4


def _cfg(**kw):
    return tiny_config(depth=1, **kw)


def _data(seed=0, n=N):
    g = torch.Generator().manual_seed(seed)
    T = TC + TF
    veg = torch.tensor([0.03, 0.06, 0.04, 0.45]).view(1, 1, 4, 1, 1)
    soil = torch.tensor([0.10, 0.14, 0.18, 0.24]).view(1, 1, 4, 1, 1)
    v = torch.rand(n, 1, 1, HW, HW, generator=g)
    frames = v * veg + (1 - v) * soil + 0.01 * torch.randn(n, T, 4, HW, HW, generator=g)
    return {
        "context": frames[:, :TC],
        "context_mask": torch.ones(n, TC, 1, HW, HW),
        "target": frames[:, TC:],
        "target_mask": torch.ones(n, TF, 1, HW, HW),
        "static": torch.rand(n, 3, HW, HW, generator=g),
        "weather": torch.randn(n, T, 3, generator=g),
        "baseline": torch.randn(n, T, 3, generator=g),
        "anomaly": torch.randn(n, T, 3, generator=g),
        "stress": torch.rand(n, T, 4, generator=g),
        "doy": torch.linspace(150, 250, T).expand(n, T).contiguous(),
    }


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    model = EOWorldModel(_cfg())
    train_model(model, _data(), steps=4, batch_size=4, lr=1e-2, generator=torch.manual_seed(0))
    return model


def test_select_guidance_scores_every_weight_and_picks_the_lowest(trained):
    val = _data(seed=1)
    choice = select_guidance(trained, val, grid=(0, 1, 2), n_members=2, n_steps=2, seed=3)
    assert isinstance(choice, GuidanceChoice)
    assert sorted(choice.scores) == [0.0, 1.0, 2.0]
    assert all(math.isfinite(s) for s in choice.scores.values())
    assert choice.scores[choice.guidance] == min(choice.scores.values())
    assert choice.criterion == "ndvi_mae"
    again = select_guidance(trained, val, grid=(0, 1, 2), n_members=2, n_steps=2, seed=3)
    assert again.scores == choice.scores  # same noise for every call and every w
    # the score of w is the NDVI MAE of that w's ensemble mean, sampled with the seed's noise
    members = trained.sample(
        val["context"],
        val["context_mask"],
        val["static"],
        {k: val[k] for k in ("baseline", "anomaly", "stress", "doy")},
        n_members=2,
        n_steps=2,
        generator=torch.Generator().manual_seed(3),
        guidance=2.0,
    )
    want = metrics.ndvi_mae(members.mean(0).numpy(), val["target"].numpy(), val["target_mask"])
    assert choice.scores[2.0] == pytest.approx(want, rel=1e-6)


def test_ties_go_to_the_smaller_weight_and_nan_never_wins(trained, monkeypatch):
    queue = [0.3, 0.2, 0.2, float("nan")]
    monkeypatch.setattr(G, "validation_score", lambda *a, **k: queue.pop(0))
    choice = select_guidance(trained, _data(1), grid=(0, 1, 2, 3), n_members=1, n_steps=1)
    assert choice.guidance == 1.0
    queue[:] = [float("nan"), 0.5]
    assert select_guidance(trained, _data(1), grid=(0, 1), n_members=1, n_steps=1).guidance == 1
    queue[:] = [float("nan")]
    with pytest.raises(ValueError, match="every validation ndvi_mae is NaN"):
        select_guidance(trained, _data(1), grid=(1,), n_members=1, n_steps=1)


def test_guidance_zero_switches_the_anomaly_pathway_off(trained):
    val = _data(seed=2)
    cond = {k: val[k] for k in ("baseline", "anomaly", "stress", "doy")}
    other = {**cond, "anomaly": -cond["anomaly"], "stress": cond["stress"].flip(1)}

    def run(c, w):
        g = torch.Generator().manual_seed(0)
        args = (val["context"], val["context_mask"], val["static"], c)
        return trained.sample(*args, n_members=2, n_steps=2, generator=g, guidance=w)

    assert torch.equal(run(cond, 0.0), run(other, 0.0))
    assert not torch.equal(run(cond, 1.0), run(other, 1.0))


def test_crps_criterion_of_one_member_is_the_trajectory_mae():
    val = _data(seed=4)
    pred = val["target"] + 0.02
    gt_nd = metrics.ndvi(val["target"].numpy())
    mask = val["target_mask"].numpy()
    traj = metrics.ndvi_trajectory(metrics.ndvi(pred.numpy()), gt_nd, mask)
    gt = metrics.ndvi_trajectory(gt_nd, gt_nd, mask)
    got = validation_score(pred[None], val, criterion="ndvi_crps")
    assert got == pytest.approx(float(np.nanmean(np.abs(traj - gt))), rel=1e-6)


def test_bad_inputs(trained):
    val = _data(1)
    kw = dict(n_members=1, n_steps=1)
    with pytest.raises(ValueError, match="at least one guidance weight"):
        select_guidance(trained, val, grid=(), **kw)
    with pytest.raises(ValueError, match=r"finite and >= 0, got \[-1.0\]"):
        select_guidance(trained, val, grid=(1, -1), **kw)
    with pytest.raises(ValueError, match=r"finite and >= 0, got \[nan\]"):
        select_guidance(trained, val, grid=(float("nan"),), **kw)
    with pytest.raises(TypeError, match="grid must be a sequence of numbers"):
        select_guidance(trained, val, grid=("a",), **kw)
    with pytest.raises(ValueError, match="criterion must be one of"):
        select_guidance(trained, val, criterion="mse", **kw)
    with pytest.raises(ValueError, match="criterion must be one of"):
        validation_score(val["target"][None], val, criterion="mse")
    undiff = EOWorldModel(_cfg(conditioning="undifferentiated"))
    with pytest.raises(ValueError, match="has none"):
        select_guidance(undiff, val, **kw)
    bad = {**val, "target": val["target"].clone()}
    bad["target"][0, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"dataset\['target'\] has 1 NaN"):
        select_guidance(trained, bad, **kw)
    bare = {k: v for k, v in val.items() if k != "target_mask"}
    with pytest.raises(ValueError, match=r"lacks \['target_mask'\]"):
        select_guidance(trained, bare, **kw)
    bare_soil = {**val, "target": torch.full_like(val["target"], 0.2)}  # NDVI 0: no vegetation
    with (
        pytest.raises(ValueError, match="no valid vegetated pixel"),
        pytest.warns(RuntimeWarning),
    ):
        select_guidance(trained, bare_soil, grid=(1,), **kw)


def test_progress_bar_when_asked(trained, monkeypatch, capsys):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    select_guidance(trained, _data(1), grid=(1,), n_members=1, n_steps=1, progress=True)
    assert "guidance" in capsys.readouterr().err
