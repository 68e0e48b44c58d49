"""Every bad input a new user might pass gets a ValueError/TypeError naming the problem."""

import sys

import numpy as np
import pandas as pd
import pytest
import torch

from plvm import (
    PLVMClassifier,
    PLVMLinear,
    TraceSet,
    poe,
    simulate_population,
    zone_strategy_labels,
)
from plvm.baselines import HMMProcessBaseline
from plvm.evaluate import cross_task_benchmark, latent_probe_r2

FAST = {"epochs": 1, "hidden": 4, "restarts": 0}


@pytest.fixture(scope="module")
def study():
    st = simulate_population(40, "complementary", seed=0)
    return st, st.traces.truncate(frac=0.25).select_tasks(["A", "B"])


@pytest.fixture
def df():
    return pd.DataFrame(
        {
            "person": [1, 1, 2, 2],
            "task": ["A"] * 4,
            "time": [0.0, 1.0, 0.0, 2.0],
            "zone": [0, 1, 0, 0],
            "progress": [0.5, 0.2, 0.3, 0.6],
        }
    )


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"epochs": 0}, ValueError, r"epochs must be an int in \[1, inf\), got 0"),
        ({"epochs": -1}, ValueError, r"epochs must be an int in \[1, inf\), got -1"),
        ({"epochs": 2.5}, TypeError, r"epochs must be an int, got 2\.5 of type float"),
        ({"batch_size": 0}, ValueError, r"batch_size must be an int in \[1, inf\), got 0"),
        ({"hidden": 0}, ValueError, r"hidden must be an int in \[1, inf\), got 0"),
        ({"patience": 0}, ValueError, r"patience must be an int in \[1, inf\), got 0"),
        ({"restarts": -1}, ValueError, r"restarts must be an int in \[0, inf\), got -1"),
        ({"max_len": 0}, ValueError, r"max_len must be an int in \[1, inf\), got 0"),
        ({"lr": float("nan")}, ValueError, r"lr must be finite and in \[0\.0, inf\), got nan"),
        ({"lr": -1.0}, ValueError, r"lr must be in \[0\.0, inf\), got -1\.0"),
        ({"weight_decay": -0.1}, ValueError, r"weight_decay must be in \[0\.0, inf\), got -0\.1"),
        ({"lambda_y": -1.0}, ValueError, r"lambda_y must be in \[0\.0, inf\), got -1\.0"),
        ({"kl_warmup": float("nan")}, ValueError, r"kl_warmup must be finite"),
        ({"kl_warmup": 1.5}, ValueError, r"kl_warmup must be in \[0\.0, 1\.0\], got 1\.5"),
        (
            {"validation_fraction": 1.5},
            ValueError,
            r"validation_fraction must be in \[0\.0, 1\.0\], got 1\.5",
        ),
        ({"validation_fraction": 1.0}, ValueError, r"validation_fraction must be < 1"),
        ({"chance_margin": float("inf")}, ValueError, r"chance_margin must be finite"),
        ({"lr": "fast"}, TypeError, r"lr must be a real number, got 'fast' of type str"),
        ({"progress": "yes"}, TypeError, r"progress must be True, False or None"),
    ],
)
def test_classifier_hyperparameters_out_of_range(study, params, error, match):
    st, src = study
    with pytest.raises(error, match=match):
        PLVMClassifier(**{**FAST, **params}).fit(src, st.y)


@pytest.mark.parametrize("bad", [np.zeros((40, 5)), [[0.0]] * 40, None])
def test_classifier_wants_a_traceset(study, bad):
    st, src = study
    with pytest.raises(TypeError, match=r"traces must be a plvm.TraceSet, got"):
        PLVMClassifier(**FAST).fit(bad, st.y)
    clf = PLVMClassifier(**FAST).fit(src, st.y)
    with pytest.raises(TypeError, match=r"traces must be a plvm.TraceSet, got"):
        clf.predict_proba(bad)


def test_classifier_bad_labels_and_empty(study):
    st, src = study
    with pytest.raises(ValueError, match=r"y has 37 labels for 40 persons"):
        PLVMClassifier(**FAST).fit(src, st.y[:-3])
    with pytest.raises(ValueError, match=r"y must be 1-D \(one label per person\)"):
        PLVMClassifier(**FAST).fit(src, np.stack([st.y, st.y], 1))
    with pytest.raises(TypeError, match=r"y must be numeric 0/1 labels"):
        PLVMClassifier(**FAST).fit(src, np.array(["a"] * 40))
    with pytest.raises(ValueError, match=r"y must be binary \(0/1\); found values \[inf\]"):
        PLVMClassifier(**FAST).fit(src, np.where(np.arange(40) == 0, np.inf, st.y))
    with pytest.raises(ValueError, match=r"traces has no persons"):
        PLVMClassifier(**FAST).fit(src.subset([]), st.y[:0])
    with pytest.raises(ValueError, match=r"y needs both classes"):
        PLVMClassifier(**FAST).fit(src, np.zeros(40))
    with pytest.raises(ValueError, match=r"not fitted"):
        PLVMClassifier().predict_proba(src)


def test_from_dataframe_bad_frames(df):
    with pytest.raises(ValueError, match=r"df has no rows"):
        TraceSet.from_dataframe(df.iloc[:0])
    with pytest.raises(TypeError, match=r"df must be a pandas DataFrame, got dict"):
        TraceSet.from_dataframe(df.to_dict("list"))
    with pytest.raises(TypeError, match=r"df must be a pandas DataFrame, got ndarray"):
        TraceSet.from_dataframe(df.to_numpy())
    with pytest.raises(ValueError, match=r"missing required columns: \['zone'\]"):
        TraceSet.from_dataframe(df.drop(columns=["zone"]))


@pytest.mark.parametrize(
    ("column", "values", "error", "match"),
    [
        ("time", [0.0, np.nan, 0.0, 1.0], ValueError, r"column 'time' must be finite; found 1"),
        ("time", [0.0, np.inf, 0.0, 1.0], ValueError, r"column 'time' must be finite"),
        ("time", ["a", "b", "c", "d"], TypeError, r"column 'time' must be numeric"),
        ("time", [0.0, -1.0, 0.0, 1.0], ValueError, r"timestamps in 'time' are not monotone"),
        ("progress", [0.5, np.nan, 0.1, 0.2], ValueError, r"'progress' .* must be in \[0, 1\]"),
        ("progress", [0.5, 1.5, 0.1, 0.2], ValueError, r"'progress' .* must be in \[0, 1\]"),
        ("person", [1.0, np.nan, 2.0, 2.0], ValueError, r"column 'person' has 1 missing"),
        ("zone", [0, None, 1, 1], ValueError, r"column 'zone' has 1 missing"),
    ],
)
def test_from_dataframe_bad_columns(df, column, values, error, match):
    df[column] = values
    with pytest.raises(error, match=match):
        TraceSet.from_dataframe(df)


def test_from_dataframe_bad_extra_column(df):
    df["x"] = [1.0, np.nan, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"column 'x' must be finite"):
        TraceSet.from_dataframe(df, extra_cols=["x"])


def test_traceset_constructor_checks(study):
    _, src = study
    ev = {t: [None if e is None else e.copy() for e in src.events[t]] for t in src.tasks}
    ev["A"][0][1, 6] = np.nan
    with pytest.raises(ValueError, match=r"events\['A'\]\[0\] must be finite; found 1"):
        TraceSet(src.person_ids, src.tasks, ev)
    ev["A"][0] = ev["A"][0][:, :3]
    with pytest.raises(ValueError, match=r"events\['A'\]\[0\] must have shape \(L, 7\)"):
        TraceSet(src.person_ids, src.tasks, ev)
    ev["A"][0] = np.full((3, 7), "x")
    with pytest.raises(TypeError, match=r"events\['A'\]\[0\] must be a numeric array"):
        TraceSet(src.person_ids, src.tasks, ev)
    with pytest.raises(ValueError, match=r"events\['A'\] has 40 traces but there are 39"):
        TraceSet(src.person_ids[:-1], src.tasks, src.events)
    with pytest.raises(ValueError, match=r"person_ids must be 1-D"):
        TraceSet(src.person_ids.reshape(-1, 2), src.tasks, src.events)
    with pytest.raises(TypeError, match=r"events must be a dict"):
        TraceSet(src.person_ids, src.tasks, [1, 2])


def test_traceset_views_bad_arguments(study):
    _, src = study
    with pytest.raises(IndexError, match=r"person index 1000 is out of range for 40 persons"):
        src.subset([1000])
    with pytest.raises(IndexError, match=r"boolean mask of persons must have shape \(40,\)"):
        src.subset(np.ones(3, dtype=bool))
    with pytest.raises(TypeError, match=r"integer indices or a boolean mask, got dtype"):
        src.subset([0.5, 1.5])
    with pytest.raises(TypeError, match=r"use select_tasks"):
        src["A"]
    with pytest.raises(TypeError, match=r"indexed by persons only"):
        src[0, 1]
    with pytest.raises(ValueError, match=r"max_len must be an int in \[1, inf\), got 0"):
        src.featurize("A", max_len=0)
    with pytest.raises(ValueError, match=r"frac must be in \(0, 1\], got nan"):
        src.truncate(frac=float("nan"))
    with pytest.raises(ValueError, match=r"seconds must be > 0, got nan"):
        src.truncate(seconds=float("nan"))
    with pytest.raises(ValueError, match=r"unknown task"):
        zone_strategy_labels(src, "Z")
    with pytest.raises(ValueError, match=r"threshold must be finite"):
        zone_strategy_labels(src, "A", threshold=float("nan"))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n": 0}, ValueError, r"n must be an int in \[2, inf\), got 0"),
        ({"n": float("nan")}, TypeError, r"n must be an int, got nan of type float"),
        ({"n": 10, "source_specs": "nope"}, ValueError, r"unknown preset 'nope'"),
        ({"n": 10, "sep": float("nan")}, ValueError, r"sep must be finite"),
        ({"n": 10, "noise": -1.0}, ValueError, r"noise must be in \[0\.0, inf\), got -1\.0"),
    ],
)
def test_simulator_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        simulate_population(**kwargs)


def test_linear_bad_inputs():
    stats = {"A": np.random.default_rng(0).normal(size=(40, 3))}
    with pytest.raises(ValueError, match=r"max_iter must be an int in \[1, inf\), got 0"):
        PLVMLinear(max_iter=0).fit(stats)
    with pytest.raises(ValueError, match=r"min_var must be in \[0\.0, inf\), got -1\.0"):
        PLVMLinear(min_var=-1.0).fit(stats)
    with pytest.raises(ValueError, match=r"C must be in \(0\.0, inf\), got 0\.0"):
        PLVMLinear(C=0.0).fit(stats)
    with pytest.raises(ValueError, match=r"stats_by_task is empty"):
        PLVMLinear().fit({})
    with pytest.raises(TypeError, match=r"stats_by_task must be a dict"):
        PLVMLinear().fit(np.zeros((40, 3)))
    with pytest.raises(ValueError, match=r"must be 2-D \(N, d\)"):
        PLVMLinear().fit({"A": np.zeros(40)})
    with pytest.raises(ValueError, match=r"needs >= 2 persons with finite statistics"):
        PLVMLinear().fit({"A": np.full((40, 3), np.nan)})
    with pytest.raises(ValueError, match=r"holds inf; only a NaN row may mark a missing"):
        PLVMLinear().fit({"A": np.where(np.eye(40, 3) > 0, np.inf, stats["A"])})
    with pytest.raises(TypeError, match=r"stats_by_task\['A'\] must be numeric"):
        PLVMLinear().fit({"A": np.array([["a"]] * 40)})
    with pytest.raises(ValueError, match=r"y has 39 labels for 40 persons"):
        PLVMLinear().fit(stats, np.zeros(39))
    with pytest.raises(ValueError, match=r"different numbers of persons"):
        PLVMLinear().fit({"A": stats["A"], "B": stats["A"][:-1]})


def test_fusion_and_probe_shapes():
    with pytest.raises(ValueError, match=r"mus and logvars must both have shape \(T, N, D\)"):
        poe(torch.zeros(2, 3, 2), torch.zeros(2, 4, 2))
    with pytest.raises(ValueError, match=r"present_mask must have shape \(T, N\) = \(2, 3\)"):
        poe(torch.zeros(2, 3, 2), torch.zeros(2, 3, 2), torch.ones(3, 3, dtype=torch.bool))
    z = np.zeros((5, 2))
    with pytest.raises(ValueError, match=r"mu_train has 10 rows but z_train has 9"):
        latent_probe_r2(np.zeros((10, 2)), np.zeros((9, 2)), z, z)
    with pytest.raises(ValueError, match=r"mu_test must be finite"):
        latent_probe_r2(z, z, np.full((5, 2), np.nan), z)


def test_benchmark_bad_arguments(study):
    st, _ = study
    with pytest.raises(ValueError, match=r"unknown model 'nope'"):
        cross_task_benchmark(st, models=["nope"])
    with pytest.raises(ValueError, match=r"unknown model 'nope'"):
        cross_task_benchmark(st, models={"outcome": [["A"]], "nope": [["A"]]})
    with pytest.raises(ValueError, match=r"tau must be in \(0, 1\]"):
        cross_task_benchmark(st, taus=[0.0])
    with pytest.raises(ValueError, match=r"train_fraction=2.0 leaves too few persons"):
        cross_task_benchmark(st, train_fraction=2.0)


def test_missing_hmmlearn_names_the_extra(study, monkeypatch):
    st, src = study
    monkeypatch.setitem(sys.modules, "hmmlearn", None)
    monkeypatch.setitem(sys.modules, "hmmlearn.hmm", None)
    with pytest.raises(ImportError, match=r"pip install 'plvm\[hmm\]'"):
        HMMProcessBaseline().fit(src, st.y, ["A"])
