r"""Linear-Gaussian PLVM: factor analysis with one shared latent across tasks, exact Bayes.

Per-task process statistics ``s_t = W_t z + c_t + eps_t``, ``eps_t ~ N(0, Psi_t)`` diagonal,
``z ~ N(0, I_D)``, fit by EM on persons with any subset of tasks. The posterior of a person
is Gaussian with

.. math:: \\Lambda = I + \\sum_{t \\in obs} W_t^T \\Psi_t^{-1} W_t, \\qquad
    \\mu = \\Lambda^{-1} \\sum_{t \\in obs} W_t^T \\Psi_t^{-1} (s_t - c_t),

the product of the per-task Gaussian experts with the prior. The target head is a logistic
regression on the posterior mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.exceptions import NotFittedError  # a ValueError, as before

from methodkit.checks import check_int, check_real
from plvm._validation import check_binary, check_latent_dim

__all__ = ["PLVMLinear"]

StatsByTask = Mapping[str, np.ndarray]


class PLVMLinear:
    """Exact linear-Gaussian PLVM (sklearn style).

    Args:
        latent_dim: ``D >= 1``.
        max_iter: EM iterations.
        tol: Stop when the log-likelihood gains less than ``tol`` per person.
        min_var: Floor on the noise variances ``Psi`` as a fraction of each statistic's
            variance (a guard against Heywood cases, where one factor is spent on two nearly
            collinear statistics of one task; *inferred*, chosen on the simulator).
        C: Inverse regularisation of the logistic target head.
        random_state: Seed of the initial loadings.

    Attributes:
        tasks_: Task names seen in ``fit``.
        W_: ``{task: (d_t, D)}`` loadings; ``c_``: ``{task: (d_t,)}`` offsets;
        psi_: ``{task: (d_t,)}`` noise variances.
        loglik_: Marginal log-likelihood after every EM iteration (non-decreasing).

    References:
        Kasumba, Barbour & Ho, "Early Prediction of Future Behavioral Strategy from Process
        Traces", arXiv 2605.30550 (2026); this linear variant is inferred, not from the paper.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> z = rng.normal(size=(200, 1))
        >>> stats = {"A": z @ [[1.0, 2.0]] + 0.1 * rng.normal(size=(200, 2))}
        >>> m = PLVMLinear(1).fit(stats, y=(z[:, 0] > 0).astype(float))
        >>> m.predict_proba(stats).shape
        (200, 2)
    """

    def __init__(
        self,
        latent_dim: int = 2,
        max_iter: int = 300,
        tol: float = 1e-7,
        min_var: float = 0.2,
        C: float = 1.0,
        random_state: int = 0,
    ) -> None:
        self.latent_dim = latent_dim
        self.max_iter = max_iter
        self.tol = tol
        self.min_var = min_var
        self.C = C
        self.random_state = random_state

    # ------------------------------------------------------------------ inputs
    def _inputs(self, stats: StatsByTask, tasks: Sequence[str]) -> dict[str, np.ndarray]:
        if not isinstance(stats, Mapping):
            raise TypeError(
                f"stats_by_task must be a dict {{task: (N, d) array}}, got {type(stats).__name__}"
            )
        if not stats:
            raise ValueError("stats_by_task is empty: give at least one task's statistics")
        unknown = [t for t in stats if t not in tasks]
        if unknown:
            raise ValueError(f"unknown task(s) {unknown}; the model knows {list(tasks)}")
        out = {}
        for t, s in stats.items():
            try:
                out[t] = np.asarray(s, dtype=np.float64)
            except (TypeError, ValueError) as e:
                raise TypeError(f"stats_by_task[{t!r}] must be numeric") from e
            if np.isinf(out[t]).any():
                raise ValueError(
                    f"stats_by_task[{t!r}] holds inf; only a NaN row may mark a missing task"
                )
        ns = {t: len(s) for t, s in out.items()}
        if len(set(ns.values())) > 1:
            raise ValueError(f"stats_by_task have different numbers of persons: {ns}")
        for t, s in out.items():
            if s.ndim != 2:
                raise ValueError(f"stats_by_task[{t!r}] must be 2-D (N, d), got {s.shape}")
        return out

    @staticmethod
    def _present(s: np.ndarray) -> np.ndarray:
        return np.all(np.isfinite(s), axis=1)

    # ------------------------------------------------------------------ EM
    def fit(self, stats_by_task: StatsByTask, y: np.ndarray | None = None) -> PLVMLinear:
        """EM for the shared factor model; then the logistic head on labelled persons.

        Args:
            stats_by_task: ``{task: (N, d_t)}``; a row of NaN marks a missing task.
            y: Optional 0/1 labels (NaN = unknown) for the target head.

        Raises:
            TypeError: Statistics that are not numeric, or a non-integer ``max_iter``.
            ValueError: No tasks, a 1-D statistic, inf values, a task with fewer than two
                observed persons, mismatched numbers of persons, bad labels, or a
                hyper-parameter out of range (``max_iter < 1``, ``C <= 0``, NaN, ...).
        """
        D = check_latent_dim(self.latent_dim)
        check_int("max_iter", self.max_iter, low=1)
        check_real("tol", self.tol, low=0.0)
        check_real("min_var", self.min_var, low=0.0)
        check_real("C", self.C, low=0.0, low_open=True)
        known = list(stats_by_task) if isinstance(stats_by_task, Mapping) else []
        S = self._inputs(stats_by_task, known)
        self.tasks_ = list(S)
        rng = np.random.default_rng(self.random_state)
        pres = {t: self._present(s) for t, s in S.items()}
        few = {t: int(p.sum()) for t, p in pres.items() if p.sum() < 2}
        if few:
            raise ValueError(
                f"every task needs >= 2 persons with finite statistics; got {few} "
                "(a row with a NaN marks a missing task)"
            )
        # standardise each task's statistics (fit in that space, map back at the end)
        loc = {t: np.nanmean(s[pres[t]], 0) for t, s in S.items()}
        sc = {t: np.nanstd(s[pres[t]], 0) + 1e-9 for t, s in S.items()}
        Sz = {t: np.where(pres[t][:, None], (s - loc[t]) / sc[t], 0.0) for t, s in S.items()}
        self.W_ = {t: 0.5 * rng.standard_normal((s.shape[1], D)) for t, s in Sz.items()}
        self.c_ = {t: np.zeros(s.shape[1]) for t, s in Sz.items()}
        self.psi_ = {t: np.ones(s.shape[1]) for t, s in Sz.items()}
        n = len(next(iter(S.values())))
        self.loglik_ = []
        for _ in range(self.max_iter):
            mu, cov = self._posterior_std(Sz, pres)
            self.loglik_.append(self._loglik_std(Sz, pres))
            for t, s in Sz.items():
                p = pres[t]
                zt = np.hstack([mu[p], np.ones((p.sum(), 1))])  # E[z~], z~ = (z, 1)
                Ezz = np.zeros((D + 1, D + 1))
                Ezz[:D, :D] = cov[p].sum(0) + mu[p].T @ mu[p]
                Ezz[:D, D] = Ezz[D, :D] = mu[p].sum(0)
                Ezz[D, D] = p.sum()
                Wt = np.linalg.solve(Ezz, zt.T @ s[p]).T  # (d, D + 1)
                self.W_[t], self.c_[t] = Wt[:, :D], Wt[:, D]
                resid = (s[p] ** 2).sum(0) - np.einsum("dk,nk,nd->d", Wt, zt, s[p])
                self.psi_[t] = np.maximum(resid / p.sum(), self.min_var)
            if len(self.loglik_) > 1 and self.loglik_[-1] - self.loglik_[-2] < self.tol * n:
                break
        self.loglik_.append(self._loglik_std(Sz, pres))
        # back to the raw scale: s = sc * s_std + loc
        for t in S:
            self.W_[t] = sc[t][:, None] * self.W_[t]
            self.c_[t] = loc[t] + sc[t] * self.c_[t]
            self.psi_[t] = sc[t] ** 2 * self.psi_[t]
        self.head_ = None
        if y is not None:
            self._fit_head(S, y)
        return self

    def _fit_head(self, S: dict[str, np.ndarray], y: np.ndarray) -> None:
        from sklearn.linear_model import LogisticRegression

        yy = check_binary(y, "y", allow_missing=True)
        if len(yy) != len(next(iter(S.values()))):
            raise ValueError(f"y has {len(yy)} labels for {len(next(iter(S.values())))} persons")
        lab = ~np.isnan(yy)
        if len(np.unique(yy[lab])) < 2:
            raise ValueError("y needs both classes among the labelled persons")
        mu, _ = self.posterior(S)
        self.head_ = LogisticRegression(C=self.C).fit(mu[lab], yy[lab])

    def _posterior_std(
        self, S: dict[str, np.ndarray], pres: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        n = len(next(iter(S.values())))
        D = self.latent_dim
        lam = np.broadcast_to(np.eye(D), (n, D, D)).copy()
        eta = np.zeros((n, D))
        for t, s in S.items():
            WtPi = self.W_[t].T / self.psi_[t]  # W_t^T Psi_t^{-1}
            p = pres[t]
            lam[p] += WtPi @ self.W_[t]
            eta[p] += (s[p] - self.c_[t]) @ WtPi.T
        cov = np.linalg.inv(lam)
        return np.einsum("nij,nj->ni", cov, eta), cov

    def _loglik_std(self, S: dict[str, np.ndarray], pres: dict[str, np.ndarray]) -> float:
        """Marginal log-likelihood, summed over persons, grouped by missingness pattern."""
        tasks = list(S)
        pattern = np.stack([pres[t] for t in tasks], 1)
        total = 0.0
        for pat in np.unique(pattern, axis=0):
            rows = np.all(pattern == pat, 1)
            obs = [t for t, k in zip(tasks, pat, strict=True) if k]
            if not obs:
                continue
            W = np.vstack([self.W_[t] for t in obs])
            c = np.concatenate([self.c_[t] for t in obs])
            cov = W @ W.T + np.diag(np.concatenate([self.psi_[t] for t in obs]))
            x = np.hstack([S[t][rows] for t in obs]) - c
            _, logdet = np.linalg.slogdet(cov)
            quad = np.einsum("ni,ni->n", x @ np.linalg.inv(cov), x)
            total += float(-0.5 * (quad + logdet + len(c) * np.log(2 * np.pi)).sum())
        return total

    # ------------------------------------------------------------------ inference
    def posterior(self, stats_by_task: StatsByTask) -> tuple[np.ndarray, np.ndarray]:
        """Exact posterior ``(mu (N, D), cov (N, D, D))`` from any subset of tasks.

        Tasks left out of ``stats_by_task`` (or NaN rows) drop out; none gives the prior.
        """
        self._check_fitted()
        S = self._inputs(stats_by_task, self.tasks_)
        for t, s in S.items():
            if s.shape[1] != self.W_[t].shape[0]:
                raise ValueError(
                    f"stats_by_task[{t!r}] has {s.shape[1]} columns, fit saw {self.W_[t].shape[0]}"
                )
        pres = {t: self._present(s) for t, s in S.items()}
        S = {t: np.where(pres[t][:, None], s, 0.0) for t, s in S.items()}
        return self._posterior_std(S, pres)

    def transform(self, stats_by_task: StatsByTask) -> np.ndarray:
        """Posterior means ``(N, D)``."""
        return self.posterior(stats_by_task)[0]

    def predict_proba(self, stats_by_task: StatsByTask) -> np.ndarray:
        """``(N, 2)`` class probabilities of the logistic head on the posterior mean."""
        self._check_fitted()
        if self.head_ is None:
            raise ValueError("fit was called without y: there is no target head")
        return self.head_.predict_proba(self.transform(stats_by_task))

    def _check_fitted(self) -> None:
        if not hasattr(self, "W_"):
            raise NotFittedError("PLVMLinear is not fitted; call fit first")
