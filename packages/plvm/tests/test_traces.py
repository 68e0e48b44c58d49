import numpy as np
import pandas as pd
import pytest
import torch

from plvm import DeepSetsEncoder, GRUEncoder, TraceSet, simulate_population
from plvm.traces import FEATURES, process_statistics


@pytest.fixture(scope="module")
def study():
    return simulate_population(40, "complementary", seed=0)


@pytest.mark.parametrize("tau", [0.05, 0.25, 0.5, 1.0])
def test_truncate_keeps_the_first_events(study, tau):
    part = study.traces.truncate(frac=tau)
    for full, cut in zip(study.traces.events["A"], part.events["A"], strict=True):
        k = min(len(full), max(2, int(np.ceil(tau * len(full)))))
        assert len(cut) == k
        np.testing.assert_array_equal(cut, full[:k])


def test_truncate_by_count_and_seconds(study):
    part = study.traces.truncate(n_events=3)
    assert set(part.lengths("B")) == {3}
    part = study.traces.truncate(seconds=2.0)
    for full, cut in zip(study.traces.events["A"], part.events["A"], strict=True):
        t = np.cumsum(full[:, 6])
        assert len(cut) == max(1, int((t <= 2.0).sum()))


@pytest.mark.parametrize("kw", [{"frac": 0.0}, {"frac": 1.5}, {"frac": -0.1}])
def test_tau_out_of_range(study, kw):
    with pytest.raises(ValueError, match=r"frac must be in \(0, 1\]"):
        study.traces.truncate(**kw)


def test_truncate_needs_exactly_one_limit(study):
    with pytest.raises(ValueError, match="exactly one"):
        study.traces.truncate(frac=0.5, n_events=3)


def test_featurize_pads_and_masks(study):
    part = study.traces.truncate(frac=0.25)
    X, mask = part.featurize("A")
    lengths = part.lengths("A")
    assert X.shape == (40, lengths.max(), len(FEATURES))
    assert X.dtype == np.float32
    np.testing.assert_array_equal(mask.sum(1), lengths)
    assert np.all(X[~mask] == 0)
    X2, _m2 = part.featurize("A", max_len=5)
    assert X2.shape[1] == 5
    assert np.array_equal(X2, X[:, :5])


@pytest.mark.parametrize("enc", [DeepSetsEncoder, GRUEncoder])
def test_encoders_ignore_padded_events(study, enc):
    X, mask = study.traces.truncate(frac=0.25).featurize("B")
    X, mask = torch.as_tensor(X), torch.as_tensor(mask)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        e = enc(X.shape[-1], 2, hidden=8)
    mu, lv = e(X, mask)
    X2 = torch.where(mask.unsqueeze(-1), X, torch.randn_like(X) * 100)
    mu2, lv2 = e(X2, mask)
    torch.testing.assert_close(mu, mu2, rtol=0, atol=1e-6)
    torch.testing.assert_close(lv, lv2, rtol=0, atol=1e-6)


def _df():
    return pd.DataFrame({
        "person": ["p", "p", "p", "p", "q", "q"],
        "task": ["L1", "L1", "L1", "L2", "L1", "L1"],
        "time": [0.0, 1.0, 3.0, 0.0, 0.0, 0.5],
        "zone": [2, 2, 5, 1, 0, 1],
        "progress": [0.3, 1.0, 0.2, 0.5, 0.4, 0.1],
        "noise": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    })  # fmt: skip


def test_from_dataframe_builds_events_and_extra_features():
    ts = TraceSet.from_dataframe(_df(), extra_cols=["noise"])
    assert ts.tasks == ["L1", "L2"]
    assert list(ts.person_ids) == ["p", "q"]
    p = ts.events["L1"][0]
    np.testing.assert_allclose(p[:, 2], [0.0, 0.3, 0.0])  # progress before
    np.testing.assert_allclose(p[:, 4], [0, 0, 1])  # switched
    np.testing.assert_allclose(p[:, 5], [0, 0, 3])  # |5 - 2|
    np.testing.assert_allclose(p[:, 6], [0, 1, 2])  # dt
    assert ts.events["L2"][1] is None
    assert not ts.present("L2")[1]
    X, _mask = ts.featurize("L1")
    assert X.shape == (2, 3, len(FEATURES) + 1)
    np.testing.assert_allclose(X[0, :, -1], [1, 2, 3])
    assert X[0, 2, 1] == 0.0  # left zone 2 at progress 1.0: finished
    stats = process_statistics(ts, "L1")
    np.testing.assert_allclose(stats[0], [1 / 3, 1.0, 0.0, 3.0])
    assert np.isnan(process_statistics(ts, "L2")[1]).all()


def test_from_dataframe_bad_input():
    df = _df()
    with pytest.raises(ValueError, match=r"missing required columns: \['zone', 'progress'\]"):
        TraceSet.from_dataframe(df.drop(columns=["zone", "progress"]))
    bad = df.copy()
    bad.loc[2, "time"] = 0.5
    with pytest.raises(ValueError, match="not monotone"):
        TraceSet.from_dataframe(bad)
    bad = df.copy()
    bad.loc[1, "progress"] = 1.2
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        TraceSet.from_dataframe(bad)
