import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from plvm import mean_run_length, simulate_population, zone_strategy_labels
from plvm.sim import PRESETS, TaskSpec, simulate_task
from plvm.traces import EVENT_COLUMNS
from reference import mean_run_length_reference


def test_deterministic_given_seed():
    a = simulate_population(60, "complementary", seed=3)
    b = simulate_population(60, "complementary", seed=3)
    c = simulate_population(60, "complementary", seed=4)
    for t in a.traces.tasks:
        for x, y in zip(a.traces.events[t], b.traces.events[t], strict=True):
            np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(a.z, c.z)


def test_event_columns_are_valid():
    st = simulate_population(80, "complementary", seed=0)
    assert len(EVENT_COLUMNS) == 7
    for t, spec in [*PRESETS["complementary"][0].items(), ("T", PRESETS["complementary"][1])]:
        for tr in st.traces.events[t]:
            assert 1 <= len(tr) <= spec.horizon
            assert np.all((tr[:, 2] >= 0) & (tr[:, 2] <= 1) & (tr[:, 3] >= 0) & (tr[:, 3] <= 1))
            assert np.all(tr[:, 3] >= tr[:, 2])  # cleaning never undoes progress
            assert set(np.unique(tr[:, 4])) <= {0.0, 1.0}
            assert tr[0, 4] == 0
            assert np.all((tr[:, 5] > 0) == (tr[:, 4] > 0))
            assert np.all(tr[:, 6] > 0)
            assert np.all(np.diff(tr[:, 0]) == 1)
            # a person stops when every zone is clean, or at the horizon
            final = {}
            for zn, p in zip(tr[:, 1], tr[:, 3], strict=True):
                final[zn] = p
            done = len(final) == spec.n_zones and all(v >= 1 for v in final.values())
            assert done or len(tr) == spec.horizon


def test_labels_are_run_length_above_median():
    st = simulate_population(101, "complementary", seed=1)
    rl = mean_run_length(st.traces, "T")
    for i in (0, 50, 100):
        assert rl[i] == pytest.approx(mean_run_length_reference(st.traces.events["T"][i][:, 1]))
    assert np.array_equal(st.y, (rl > np.median(rl)).astype(float))
    assert st.y.sum() == 50
    with pytest.raises(ValueError, match="unknown rule"):
        zone_strategy_labels(st.traces, "T", rule="clicks")
    with pytest.raises(ValueError, match="unknown task"):
        zone_strategy_labels(st.traces, "Z")


def test_zero_slopes_make_labels_independent_of_z():
    # b = beta = 0 in the target: oracle-z AUROC within 0.5 +- 0.05 (sd ~0.013 at this n)
    st = simulate_population(3000, "irrelevant", seed=0)
    m = LogisticRegression().fit(st.z[:2000], st.y[:2000])
    auc = roc_auc_score(st.y[2000:], m.predict_proba(st.z[2000:])[:, 1])
    assert abs(auc - 0.5) <= 0.05


def test_persistence_slope_shortens_runs():
    rng = np.random.default_rng(0)
    spec = TaskSpec(12, 4.0, -1.5, 1.5, 0.0, 0.0, 120)
    z = np.array([[2.0, 0.0]] * 200 + [[-2.0, 0.0]] * 200)
    tr = simulate_task(spec, z, np.zeros(400), rng)
    sw = np.array([t[1:, 4].mean() for t in tr])
    assert sw[:200].mean() < sw[200:].mean() - 0.1  # persistent persons switch less


def test_bad_simulation_input():
    with pytest.raises(ValueError, match="unknown preset"):
        simulate_population(10, "nope")
    with pytest.raises(ValueError, match="n must be"):
        simulate_population(1, "complementary")
