"""Selective Evidence Routing (SER): risk scores, the threshold router and its calibration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from eva_agent._validation import check_finite_array
from eva_agent._vocab import QTYPES
from methodkit.checks import check_real

#: Per-type risk prior pi (inferred): reading, counting and arithmetic over text are high,
#: colour/shape attributes low.
TYPE_PRIOR: dict[str, float] = {
    "attribute": 0.05,
    "existence": 0.2,
    "count": 0.25,
    "read": 0.7,
    "spatial": 0.25,
    "arithmetic": 0.8,
}
#: Prior of an affirmative fast answer to an existence question (inferred: a "yes" to a
#: plausible but absent object is the hallucination POPE measures, so it is the risky case).
AFFIRMATIVE_PRIOR = 0.9


class ThresholdRouter:
    """r = max(1 - c_hat, pi[type(q)]); go slow iff r > tau.

    Args:
        tau: Threshold in [0, 1] (tau = 1: never slow; tau = 0: slow unless r = 0).
        type_prior: pi per question type (default :data:`TYPE_PRIOR`; unknown types get 0.5).

    Example:
        >>> ThresholdRouter(0.5).route(0.9, "read")
        True
    """

    def __init__(
        self,
        tau: float = 0.5,
        type_prior: Mapping[str, float] | None = None,
        affirmative_prior: float = AFFIRMATIVE_PRIOR,
    ) -> None:
        self.tau = check_real("tau", tau, 0.0, 1.0)
        prior = dict(TYPE_PRIOR if type_prior is None else type_prior)
        for k, v in prior.items():
            check_real(f"type_prior[{k!r}]", v, 0.0, 1.0)
        self.type_prior = prior
        self.affirmative_prior = check_real("affirmative_prior", affirmative_prior, 0.0, 1.0)

    def risk(self, conf: float, qtype: str, answer: str | None = None, **features: Any) -> float:
        """Risk r = max(1 - conf, pi[qtype]).

        pi is ``affirmative_prior`` for a "yes" to an existence question.
        """
        pi = self.type_prior.get(qtype, 0.5)
        if qtype == "existence" and str(answer or "").strip().lower().startswith("yes"):
            pi = max(pi, self.affirmative_prior)
        return max(1.0 - check_real("conf", conf, 0.0, 1.0), pi)

    def route(self, conf: float, qtype: str, **features: Any) -> bool:
        """True = slow (tool) path."""
        return self.risk(conf, qtype, **features) > self.tau


class AlwaysSlow:
    """Router of the AlwaysTool baseline (every question takes the tool path)."""

    tau = 0.0

    def risk(self, conf: float, qtype: str, **features: Any) -> float:
        """The risk score r of a fast answer."""
        return 1.0

    def route(self, conf: float, qtype: str, **features: Any) -> bool:
        """True = slow (tool) path."""
        return True


def calibrate_tau(
    risks: Sequence[float],
    target_rate: float | None = None,
    *,
    fast_correct: Sequence[float] | None = None,
    slow_correct: Sequence[float] | None = None,
    slow_calls: Sequence[float] | None = None,
    lam: float = 0.0,
) -> float:
    """Choose tau on a validation split.

    Either for a target tool-call rate (the share of questions with r > tau), or, given the
    per-question correctness of both paths and the tool calls of the slow one, to maximise
    accuracy - lam * (mean tool calls). Ties in r are broken towards the nearer achievable rate.

    Raises:
        ValueError: If neither mode is specified, lengths differ, ``target_rate`` is
            outside [0, 1], ``lam`` is negative, or a risk / correctness / call count is NaN or
            infinite (a risk must also lie in [0, 1]).
    """
    r = check_finite_array("risks", risks)
    if len(r) == 0:
        raise ValueError("risks must be a non-empty 1-D sequence")
    if r.min() < 0 or r.max() > 1:
        raise ValueError(f"risks must lie in [0, 1], got range [{r.min():.3g}, {r.max():.3g}]")
    lam = check_real("lam", lam, 0.0)
    cands = np.unique(np.concatenate([[0.0, 1.0], r]))
    mids = np.unique(np.concatenate([cands, (cands[1:] + cands[:-1]) / 2]))
    mids = mids[(mids >= 0) & (mids <= 1)]
    if target_rate is not None:
        target_rate = check_real("target_rate", target_rate, 0.0, 1.0)
        rates = np.array([(r > t).mean() for t in mids])
        return float(mids[int(np.argmin(np.abs(rates - target_rate)))])
    if fast_correct is None or slow_correct is None:
        raise ValueError("give target_rate, or fast_correct and slow_correct (and slow_calls)")
    fc = check_finite_array("fast_correct", fast_correct)
    sc = check_finite_array("slow_correct", slow_correct)
    calls = np.zeros_like(r) if slow_calls is None else check_finite_array("slow_calls", slow_calls)
    if not (len(fc) == len(sc) == len(calls) == len(r)):
        raise ValueError(
            f"risks, fast_correct, slow_correct, slow_calls lengths differ: "
            f"{len(r)}, {len(fc)}, {len(sc)}, {len(calls)}"
        )
    scores = []
    for t in mids:
        slow = r > t
        scores.append(np.where(slow, sc, fc).mean() - lam * np.where(slow, calls, 0).mean())
    return float(mids[int(np.argmax(scores))])


class LogisticRouter:
    """A learned risk: P(direct answer wrong | c_hat, type one-hot, agreement, text boxes).

    Fitted with scikit-learn's ``LogisticRegression`` on validation questions
    (``pip install "eva-agent[sklearn]"``); routes slow iff the risk exceeds ``tau``.

    Raises:
        ValueError: If ``tau`` is outside [0, 1] or ``C`` is not a finite number > 0.
    """

    def __init__(self, tau: float = 0.5, C: float = 1.0) -> None:
        self.tau = check_real("tau", tau, 0.0, 1.0)
        self.C = check_real("C", C)
        if self.C <= 0:
            raise ValueError(f"C (inverse regularisation strength) must be > 0, got {C!r}")
        self.model: Any = None

    @staticmethod
    def features(
        conf: float,
        qtype: str,
        agreement: float = 1.0,
        n_text: float = 0.0,
        answer: str | None = None,
    ) -> list:
        """c_hat, sample agreement, text boxes, "yes" answer, type one-hot."""
        yes = float(str(answer or "").strip().lower().startswith("yes"))
        return [conf, agreement, n_text, yes] + [float(qtype == t) for t in QTYPES]

    def fit(self, rows: Sequence[dict[str, Any]], direct_wrong: Sequence[int]) -> LogisticRouter:
        """Fit on validation rows.

        ``rows``: dicts with ``conf``, ``qtype`` and optional ``agreement``, ``n_text``,
        ``answer``; ``direct_wrong``: 1 where the direct answer was wrong.

        Raises:
            ImportError: Without scikit-learn (the ``sklearn`` extra).
            ValueError: If ``rows`` and ``direct_wrong`` differ in length, a feature is NaN
                or infinite, a label is not 0/1, or only one class is present.
        """
        try:
            from sklearn.linear_model import LogisticRegression
        except ImportError as e:
            raise ImportError('LogisticRouter needs: pip install "eva-agent[sklearn]"') from e
        rows = list(rows)
        y = check_finite_array("direct_wrong", direct_wrong)
        if len(rows) != len(y):
            raise ValueError(f"{len(rows)} rows but {len(y)} direct_wrong labels")
        if not np.isin(y, (0, 1)).all():
            raise ValueError("direct_wrong must hold 0/1 labels (1 = direct answer wrong)")
        X = np.array([self.features(**r) for r in rows], dtype=float)
        if X.size and not np.isfinite(X).all():
            raise ValueError("rows hold NaN or infinite features (conf, agreement, n_text)")
        y = y.astype(int)
        if len(set(y.tolist())) < 2:
            raise ValueError("direct_wrong must contain both 0 and 1 to fit a router")
        self.model = LogisticRegression(C=self.C, max_iter=1000).fit(X, y)
        return self

    def risk(self, conf: float, qtype: str, **features: Any) -> float:
        """The risk score r of a fast answer."""
        if self.model is None:
            raise RuntimeError("LogisticRouter.fit must be called before routing")
        x = np.array([self.features(conf, qtype, **features)])
        return float(self.model.predict_proba(x)[0, 1])

    def route(self, conf: float, qtype: str, **features: Any) -> bool:
        """True = slow (tool) path."""
        return self.risk(conf, qtype, **features) > self.tau
