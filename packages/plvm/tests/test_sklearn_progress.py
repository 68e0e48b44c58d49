"""TraceSet with scikit-learn's splitters and cross_val_score; progress bars on long calls."""

import io
import sys

import numpy as np
import pytest
from sklearn.model_selection import KFold, StratifiedKFold, cross_val_score, train_test_split

from plvm import PLVMClassifier, TraceSet, simulate_population
from plvm.evaluate import cross_task_benchmark

FAST = {"epochs": 2, "hidden": 4, "restarts": 0}


@pytest.fixture(scope="module")
def study():
    st = simulate_population(60, "complementary", seed=0)
    return st, st.traces.truncate(frac=0.25).select_tasks(["A", "B"])


def _same(a: TraceSet, b: TraceSet) -> bool:
    return list(a.person_ids) == list(b.person_ids) and all(
        np.array_equal(x, y) for t in a.tasks for x, y in zip(a.events[t], b.events[t], strict=True)
    )


def test_traceset_indexes_like_array_rows(study):
    _, src = study
    assert len(src) == 60
    assert src.shape == (60,)
    idx = np.array([5, 0, 7])
    assert _same(src[idx], src.subset(idx))
    assert _same(src[idx, ...], src.subset(idx))  # how sklearn's _safe_indexing asks
    assert _same(src[2:8:2], src.subset([2, 4, 6]))
    mask = np.arange(60) % 3 == 0
    assert _same(src[mask], src.subset(np.flatnonzero(mask)))
    assert list(src[3].person_ids) == [src.person_ids[3]]
    assert list(src[-1].person_ids) == [src.person_ids[-1]]
    assert src[[]].shape == (0,)


def test_train_test_split_returns_tracesets(study):
    st, src = study
    a, b, ya, _yb = train_test_split(src, st.y, test_size=0.25, random_state=0, stratify=st.y)
    assert isinstance(a, TraceSet)
    assert isinstance(b, TraceSet)
    assert (len(a), len(b)) == (45, 15)
    assert sorted([*a.person_ids, *b.person_ids]) == sorted(src.person_ids)
    by_id = dict(zip(src.person_ids, st.y, strict=True))
    np.testing.assert_array_equal(ya, [by_id[p] for p in a.person_ids])


@pytest.mark.parametrize("cv", [KFold(3, shuffle=True, random_state=0), StratifiedKFold(3)])
def test_cross_val_score_matches_a_manual_loop(study, cv):
    st, src = study
    got = cross_val_score(PLVMClassifier(**FAST), src, st.y, cv=cv)
    want = []
    for tr, te in cv.split(np.zeros(len(src)), st.y):
        clf = PLVMClassifier(**FAST).fit(src.subset(tr), st.y[tr])
        want.append(np.mean(clf.predict(src.subset(te)) == st.y[te]))
    assert got.shape == (3,)
    np.testing.assert_allclose(got, want)


def _stderr(monkeypatch) -> io.StringIO:
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    return buf


def test_fit_shows_epochs_only_when_asked(study, monkeypatch):
    st, src = study
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    buf = _stderr(monkeypatch)
    PLVMClassifier(**FAST, progress=True).fit(src, st.y)
    assert "PLVM fit epochs" in buf.getvalue()
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf = _stderr(monkeypatch)
    PLVMClassifier(**FAST).fit(src, st.y)
    PLVMClassifier(**FAST, progress=True).fit(src, st.y)
    assert buf.getvalue() == ""


def test_benchmark_shows_its_fits_only_when_asked(study, monkeypatch):
    st, _ = study
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    buf = _stderr(monkeypatch)
    cross_task_benchmark(st, [0.5], ["outcome"], progress=True)
    assert "cross-task benchmark" in buf.getvalue()
    assert "3/3" in buf.getvalue()  # A, B and A+B
    monkeypatch.setenv("TQDM_DISABLE", "1")
    buf = _stderr(monkeypatch)
    cross_task_benchmark(st, [0.5], ["outcome"])
    assert buf.getvalue() == ""
