import numpy as np
import pytest
import torch
from sklearn.base import clone

from plvm import PLVM, PLVMClassifier, TraceSet, simulate_population
from plvm.baselines import (
    ConcatNoFusion,
    HMMProcessBaseline,
    LateFusion,
    OutcomeSummaryClassifier,
    ProcessStatsClassifier,
    SingleTaskPLVM,
)


@pytest.fixture(scope="module")
def study():
    st = simulate_population(120, "complementary", seed=0)
    return st, st.traces.truncate(frac=0.25).select_tasks(["A", "B"])


def _batch(src, n=6, dtype=torch.float64):
    X, M = {}, {}
    for t in ("A", "B"):
        x, m = src.subset(range(n)).featurize(t, max_len=6)
        X[t], M[t] = torch.as_tensor(x, dtype=dtype), torch.as_tensor(m)
    M["B"][1] = False  # person 1 lacks task B
    return {"X": X, "mask": M, "y": torch.tensor([0.0, 1, float("nan"), 1, 0, 1], dtype=dtype)}


@pytest.mark.parametrize(
    ("fusion", "decoder"),
    [("poe", "switch_policy"), ("moe", "switch_policy"), ("poe", "switch_policy+gaussian")],
)
def test_elbo_gradcheck_float64(study, fusion, decoder):
    _, src = study
    batch = _batch(src)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = PLVM(["A", "B"], 7, 2, fusion=fusion, decoder=decoder, hidden=4).double()
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())

    def f(*ps):
        g = torch.Generator().manual_seed(1)  # the same noise at every evaluation
        out = torch.func.functional_call(
            model,
            dict(zip(names, ps, strict=True)),
            (batch,),
            {"generator": g, "kl_weight": 0.7},
            strict=False,
        )
        return out  # fmt: skip

    model.forward = model.elbo  # functional_call calls forward
    assert torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-5, rtol=1e-4)


def test_plvm_errors():
    with pytest.raises(ValueError, match="latent_dim"):
        PLVM(["A"], latent_dim=0)
    with pytest.raises(ValueError, match="unknown fusion"):
        PLVM(["A"], fusion="sum")
    with pytest.raises(ValueError, match="unknown encoder"):
        PLVM(["A"], encoder="lstm")
    with pytest.raises(ValueError, match="unknown decoder"):
        PLVM(["A"], decoder="poisson")
    with pytest.raises(ValueError, match="no shared latent"):
        PLVM(["A"], fusion="concat").posterior({"X": {}, "mask": {}})
    for fusion in ("poe", "concat"):
        with pytest.raises(ValueError, match="batch needs labels 'y'"):
            PLVM(["A"], fusion=fusion).elbo({"X": {}, "mask": {}})


def test_classifier_sklearn_contract_and_shapes(study):
    st, src = study
    clf = PLVMClassifier(epochs=2, hidden=8, random_state=1)
    params = clf.get_params()
    assert params["fusion"] == "poe"
    assert params["epochs"] == 2
    c2 = clone(clf).set_params(latent_dim=3)
    assert c2.latent_dim == 3
    assert clf.latent_dim == 2
    clf.fit(src, st.y)
    p = clf.predict_proba(src)
    assert p.shape == (120, 2)
    assert np.allclose(p.sum(1), 1)
    assert clf.predict(src).shape == (120,)
    assert clf.transform(src).shape == (120, 2)
    assert clf.transform(src, tasks=["A"]).shape == (120, 2)
    # same seed, same numbers
    p2 = PLVMClassifier(epochs=2, hidden=8, random_state=1).fit(src, st.y).predict_proba(src)
    np.testing.assert_array_equal(p, p2)
    nc = ConcatNoFusion(epochs=2, hidden=8)
    assert clone(nc).get_params()["fusion"] == "concat"
    assert nc.fit(src, st.y).predict_proba(src).shape == (120, 2)


def test_person_lacking_one_source_task(study):
    st, src = study
    ev = {t: list(src.events[t]) for t in src.tasks}
    ev["B"][0] = None
    ev["A"][1] = None
    ts = TraceSet(src.person_ids, src.tasks, ev)
    clf = PLVMClassifier(epochs=2, hidden=8).fit(ts, st.y)
    p = clf.predict_proba(ts)
    assert np.all(np.isfinite(p))
    # person 0 has A only: predicting from A alone changes nothing for her
    np.testing.assert_allclose(clf.predict_proba(ts.subset([0, 2]), ["A"])[0], p[0], atol=1e-6)


def test_classifier_bad_input(study):
    st, src = study
    with pytest.raises(ValueError, match="binary"):
        PLVMClassifier(epochs=1).fit(src, st.y * 2)
    with pytest.raises(ValueError, match="latent_dim"):
        PLVMClassifier(latent_dim=0).fit(src, st.y)
    with pytest.raises(ValueError, match="unknown fusion"):
        PLVMClassifier(fusion="max").fit(src, st.y)
    with pytest.raises(ValueError, match="unknown encoder"):
        PLVMClassifier(encoder="cnn").fit(src, st.y)
    with pytest.raises(ValueError, match="unknown task"):
        PLVMClassifier(epochs=1).fit(src, st.y, source_tasks=["A", "Z"])
    clf = PLVMClassifier(epochs=1, hidden=8).fit(src, st.y, source_tasks=["A"])
    with pytest.raises(ValueError, match=r"unknown task\(s\) \['B'\]"):
        clf.predict_proba(src, tasks=["B"])
    ev = {t: list(src.events[t]) for t in src.tasks}
    ev["A"][3] = None
    ts = TraceSet(src.person_ids, src.tasks, ev)
    with pytest.raises(ValueError, match="no events in any of the source tasks"):
        clf.predict_proba(ts)
    clf.set_params(allow_missing=True)
    mu = clf.transform(ts)
    np.testing.assert_array_equal(mu[3], 0.0)  # the prior mean


def test_baselines_run(study):
    st, src = study
    for m in (OutcomeSummaryClassifier(), ProcessStatsClassifier()):
        assert m.fit(src, st.y, ["A", "B"]).predict_proba(src).shape == (120, 2)
    assert SingleTaskPLVM(epochs=1, hidden=8).fit(src, st.y, ["B"]).predict_proba(src).shape
    with pytest.raises(ValueError, match="exactly one source task"):
        SingleTaskPLVM(epochs=1).fit(src, st.y, ["A", "B"])
    p = LateFusion(epochs=1, hidden=8).fit(src, st.y, ["A", "B"]).predict_proba(src)
    assert p.shape == (120, 2)
    pytest.importorskip("hmmlearn")
    h = HMMProcessBaseline().fit(src.subset(range(40)), st.y[:40], ["A"])
    assert h.predict_proba(src.subset(range(40))).shape == (40, 2)


def test_patience_waits_for_the_kl_warmup(study):
    # lr=0: the validation loss never improves, so only the stopping rule ends the fit
    st, src = study
    clf = PLVMClassifier(epochs=20, kl_warmup=0.5, patience=1, restarts=0, lr=0.0, hidden=8)
    clf.fit(src, st.y)
    # one step per epoch, warm-up = 10 epochs; then one epoch without gain stops it
    assert len(clf.history_) == 11
    assert clf.best_epoch_ == 0


def test_chance_plateau_is_restarted(study):
    st, src = study
    kw = {"epochs": 3, "kl_warmup": 0.0, "patience": 1, "lr": 0.0, "hidden": 8}
    one = PLVMClassifier(restarts=0, **kw).fit(src, st.y)
    three = PLVMClassifier(restarts=2, **kw).fit(src, st.y)
    assert one.n_fits_ == 1
    assert three.n_fits_ == 3  # an untrained model sits at chance: every attempt restarts
    # the kept fit is the attempt with the lowest validation loss
    assert min(v for _, v in three.history_) <= min(v for _, v in one.history_)
    no_val = PLVMClassifier(restarts=2, validation_fraction=0.0, **kw).fit(src, st.y)
    assert no_val.n_fits_ == 1  # without a validation split nothing can be judged


def test_hmm_sequence_loglik_matches_hmmlearn(study):
    pytest.importorskip("hmmlearn")
    from plvm.baselines import sequence_loglik
    from plvm.traces import SWITCHED

    st, src = study
    h = HMMProcessBaseline().fit(src, st.y, ["A"])
    hmm = h.hmms_["A"][0]
    seqs = [tr[:, SWITCHED].astype(int) for tr in src.events["A"][:30]]
    ref = [hmm.score(s[:, None]) for s in seqs]
    np.testing.assert_allclose(sequence_loglik(hmm, seqs), ref, rtol=1e-10)
    # the batched features equal the person-by-person hmmlearn ones
    k = 0
    _, post = hmm.score_samples(seqs[k][:, None])
    F = h._features(src.subset(range(30)), ["A"])
    np.testing.assert_allclose(F[k, :2], post.mean(0)[h.hmms_["A"][1]], rtol=1e-10)
    np.testing.assert_allclose(F[:, 2], np.array(ref) / [len(s) for s in seqs], rtol=1e-10)
