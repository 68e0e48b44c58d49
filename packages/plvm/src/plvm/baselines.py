"""Baselines the paper argues against: outcome summaries, single-task process models, no fusion.

* :class:`OutcomeSummaryClassifier`: logistic regression on aggregate outcomes per task.
* :class:`ProcessStatsClassifier`: logistic regression on hand-made process statistics.
* :class:`SingleTaskPLVM`: :class:`~plvm.PLVMClassifier` on one source task.
* :class:`HMMProcessBaseline`: a 2-state HMM per task on stay/switch sequences (extra ``hmm``).
* :class:`LateFusion`: the average of single-task PLVM probabilities.
* :class:`ConcatNoFusion`: concatenated encoder states -> classifier (no shared latent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Self

import numpy as np

from plvm._validation import check_binary
from plvm.estimator import PLVMClassifier
from plvm.traces import SWITCHED, TraceSet, outcome_summaries, process_statistics

__all__ = [
    "ConcatNoFusion",
    "HMMProcessBaseline",
    "LateFusion",
    "OutcomeSummaryClassifier",
    "ProcessStatsClassifier",
    "SingleTaskPLVM",
]


class _FeatureLogistic:
    """Standardised logistic regression on per-task feature blocks (missing task = zeros)."""

    C = 1.0

    def _features(self, traces: TraceSet, tasks: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def _design(self, traces: TraceSet, tasks: Sequence[str]) -> np.ndarray:
        traces.check_tasks(tasks)
        F = self._features(traces, tasks)
        miss = ~np.isfinite(F)
        F = np.where(miss, 0.0, F)
        flags = np.stack([traces.present(t) for t in tasks], 1).astype(float)
        return np.hstack([F, flags])

    def fit(self, traces: TraceSet, y: Any, tasks: Sequence[str]) -> Self:
        """Fit on the traces of ``tasks`` with 0/1 labels ``y``."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        yy = check_binary(y, "y")
        self.tasks_ = list(tasks)
        self.model_ = make_pipeline(StandardScaler(), LogisticRegression(C=self.C, max_iter=1000))
        self.model_.fit(self._design(traces, self.tasks_), yy)
        return self

    def predict_proba(self, traces: TraceSet) -> np.ndarray:
        """``(N, 2)`` class probabilities."""
        return self.model_.predict_proba(self._design(traces, self.tasks_))


class OutcomeSummaryClassifier(_FeatureLogistic):
    """Aggregate outcomes (actions, total time, completion step, total progress) -> logistic."""

    def _features(self, traces: TraceSet, tasks: Sequence[str]) -> np.ndarray:
        return np.hstack([outcome_summaries(traces, t) for t in tasks])


class ProcessStatsClassifier(_FeatureLogistic):
    """The four hand-made process statistics per task -> logistic regression."""

    def _features(self, traces: TraceSet, tasks: Sequence[str]) -> np.ndarray:
        return np.hstack([process_statistics(traces, t) for t in tasks])


class SingleTaskPLVM(PLVMClassifier):
    """:class:`~plvm.PLVMClassifier` restricted to one source task (same parameters)."""

    def fit(
        self, traces: TraceSet, y: object, source_tasks: Sequence[str] | None = None
    ) -> SingleTaskPLVM:
        """Fit on exactly one source task."""
        tasks = list(traces.tasks if source_tasks is None else source_tasks)
        if len(tasks) != 1:
            raise ValueError(f"SingleTaskPLVM takes exactly one source task, got {tasks}")
        super().fit(traces, y, tasks)
        return self


class ConcatNoFusion(PLVMClassifier):
    """No shared latent: :class:`~plvm.PLVMClassifier` with ``fusion="concat"``."""

    def __init__(self, **params: Any) -> None:
        params.setdefault("fusion", "concat")
        super().__init__(**params)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters of the underlying :class:`~plvm.PLVMClassifier`."""
        return PLVMClassifier.get_params(self, deep)

    @classmethod
    def _get_param_names(cls) -> list[str]:
        return PLVMClassifier._get_param_names()


class LateFusion:
    """One :class:`SingleTaskPLVM` per source task; predict the mean of their probabilities.

    A person missing a task is predicted from the tasks she has.
    """

    def __init__(self, **params: Any) -> None:
        self.params = params

    def fit(self, traces: TraceSet, y: object, source_tasks: Sequence[str]) -> LateFusion:
        """Fit one single-task model per task, each on the persons who have that task."""
        self.models_ = {}
        yy = check_binary(y, "y", allow_missing=True)
        for t in source_tasks:
            has = traces.present(t)
            self.models_[t] = SingleTaskPLVM(**self.params).fit(traces.subset(has), yy[has], [t])
        return self

    def predict_proba(self, traces: TraceSet) -> np.ndarray:
        """``(N, 2)``: mean of the present tasks' probabilities."""
        num = np.zeros(len(traces))
        cnt = np.zeros(len(traces))
        for t, m in self.models_.items():
            has = traces.present(t)
            if has.any():
                num[has] += m.predict_proba(traces.subset(has))[:, 1]
                cnt[has] += 1
        if (cnt == 0).any():
            raise ValueError("some persons have no events in any source task")
        p = num / cnt
        return np.stack([1 - p, p], 1)


class HMMProcessBaseline(_FeatureLogistic):
    """2-state categorical HMM per task on the stay(0)/switch(1) sequence -> features -> logistic.

    Features per task: mean posterior occupancy of each state, log-likelihood per event and
    the switch rate. Needs the ``hmm`` extra (hmmlearn).

    Args:
        n_states: Hidden states per task.
        random_state: Seed of hmmlearn's initialisation.
    """

    def __init__(self, n_states: int = 2, random_state: int = 0) -> None:
        self.n_states = n_states
        self.random_state = random_state

    def fit(self, traces: TraceSet, y: Any, tasks: Sequence[str]) -> HMMProcessBaseline:
        """Fit one HMM per task on all persons' sequences, then the logistic head."""
        try:
            from hmmlearn.hmm import CategoricalHMM
        except ImportError as e:  # pragma: no cover - depends on the environment
            raise ImportError("HMMProcessBaseline needs hmmlearn: pip install 'plvm[hmm]'") from e
        self.hmms_ = {}
        for t in tasks:
            seqs = [tr[:, SWITCHED].astype(int) for tr in traces.events[t] if tr is not None]
            seqs = [s for s in seqs if len(s)]
            X = np.concatenate(seqs)[:, None]
            hmm = CategoricalHMM(
                n_components=self.n_states, n_iter=50, random_state=self.random_state,
                n_features=2,
            )  # fmt: skip
            hmm.fit(X, [len(s) for s in seqs])
            # order the states by their switch probability, so features are comparable
            self.hmms_[t] = (hmm, np.argsort(hmm.emissionprob_[:, 1]))
        return super().fit(traces, y, tasks)

    def _features(self, traces: TraceSet, tasks: Sequence[str]) -> np.ndarray:
        k = self.n_states
        blocks = []
        for t in tasks:
            hmm, order = self.hmms_[t]
            out = np.full((len(traces), k + 2), np.nan)
            present = [(i, tr) for i, tr in enumerate(traces.events[t]) if tr is not None]
            present = [(i, tr) for i, tr in present if len(tr)]
            if present:
                has = [i for i, _ in present]
                seqs = [tr[:, SWITCHED].astype(int) for _, tr in present]
                lengths = [len(s) for s in seqs]
                # one call: hmmlearn runs forward-backward per sequence given the lengths
                _, post = hmm.score_samples(np.concatenate(seqs)[:, None], lengths)
                ends = np.cumsum(lengths)[:-1]
                occ = np.stack([p.mean(0) for p in np.split(post, ends)])
                out[has, :k] = occ[:, order]
                out[has, k] = sequence_loglik(hmm, seqs) / np.asarray(lengths)
                out[has, k + 1] = [s.mean() for s in seqs]
            blocks.append(out)
        return np.hstack(blocks)


def sequence_loglik(hmm: Any, seqs: Sequence[np.ndarray]) -> np.ndarray:
    """Log-likelihood of every sequence under a categorical HMM (scaled forward pass).

    Vectorised over the sequences (padded to the longest), so scoring thousands of short
    traces costs one pass instead of one hmmlearn call per person.
    """
    lengths = np.array([len(s) for s in seqs])
    X = np.zeros((len(seqs), lengths.max()), dtype=int)
    for i, s in enumerate(seqs):
        X[i, : len(s)] = s
    B = hmm.emissionprob_.T  # (symbols, states)
    alpha = hmm.startprob_[None, :] * B[X[:, 0]]
    c = alpha.sum(1)
    ll = np.log(c)
    alpha = alpha / c[:, None]
    for step in range(1, X.shape[1]):
        live = step < lengths
        a = (alpha @ hmm.transmat_) * B[X[:, step]]
        c = a.sum(1)
        ll[live] += np.log(c[live])
        alpha[live] = a[live] / c[live, None]
    return ll
