"""``PLVMClassifier``: the neural PLVM as a scikit-learn estimator over a :class:`TraceSet`."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError  # a ValueError, as before

from methodkit import progress as show_progress
from methodkit.checks import check_int, check_real
from plvm._plvm import PLVM, Batch
from plvm._validation import (
    DECODERS,
    ENCODERS,
    FUSIONS,
    check_binary,
    check_choice,
    check_latent_dim,
)
from plvm.traces import TraceSet

__all__ = ["PLVMClassifier"]


class PLVMClassifier(ClassifierMixin, BaseEstimator):
    """Predict a target strategy from partial source traces with a :class:`~plvm.PLVM`.

    Training: Adam on the negative ELBO of :class:`~plvm.PLVM` (KL warm-up over the first
    ``kl_warmup`` share of steps), a stratified validation split and early stopping on the
    validation log-loss (the best epoch's weights are kept). Patience only counts once the
    KL warm-up is over (the objective still changes before), and a fit whose best validation
    log-loss does not beat the constant (class-prior) predictor by ``chance_margin`` nats is
    a chance plateau: it is restarted from new weights, up to ``restarts`` times, and the fit
    with the lowest validation loss is kept.

    Args:
        latent_dim: ``D``.
        encoder: ``"deepsets"`` or ``"gru"``.
        fusion: ``"poe"``, ``"moe"`` or ``"concat"``.
        decoder: ``"switch_policy"`` or ``"switch_policy+gaussian"``.
        hidden: MLP width.
        lambda_y: Label weight.
        epochs: Maximum epochs.
        batch_size: Persons per step.
        lr: Adam learning rate.
        weight_decay: Adam weight decay.
        kl_warmup: Share of the steps over which the KL weight grows from 0 to 1.
        validation_fraction: Share of the labelled persons held out for early stopping
            (0 disables it).
        patience: Epochs without a better validation loss before stopping (counted after
            the KL warm-up).
        restarts: Extra fits from new weights when a fit ends on a chance plateau.
        chance_margin: Validation log-loss gain over the constant predictor (nats) below
            which a fit counts as a chance plateau.
        max_len: Events kept per trace (the first ``max_len``).
        allow_missing: If True a person with no events in any requested task gets the prior;
            else predicting for such a person raises.
        random_state: Seed of the weights, the split, the batches and the noise.
        device: Torch device (default CPU); data follow the model there.
        progress: Show a bar over the epochs of each fit: ``None`` (default) on a terminal
            only, ``True`` always, ``False`` never (``TQDM_DISABLE=1`` silences it).

    Attributes:
        model_: The trained :class:`~plvm.PLVM`; ``source_tasks_``; ``classes_``;
        ``history_``: per-epoch ``(train_loss, val_log_loss)`` of the kept fit;
        ``best_epoch_``; ``n_fits_``: fits run (1 + restarts used).

    Example:
        >>> from plvm.sim import simulate_population
        >>> st = simulate_population(60, "complementary", seed=0)
        >>> src = st.traces.truncate(frac=0.25).select_tasks(["A", "B"])
        >>> clf = PLVMClassifier(epochs=2).fit(src, st.y)
        >>> clf.predict_proba(src).shape
        (60, 2)
    """

    def __init__(
        self,
        latent_dim: int = 2,
        encoder: str = "deepsets",
        fusion: str = "poe",
        decoder: str = "switch_policy",
        hidden: int = 32,
        lambda_y: float = 10.0,
        epochs: int = 100,
        batch_size: int = 128,
        lr: float = 3e-3,
        weight_decay: float = 0.0,
        kl_warmup: float = 0.1,
        validation_fraction: float = 0.2,
        patience: int = 15,
        restarts: int = 2,
        chance_margin: float = 0.01,
        max_len: int | None = 40,
        allow_missing: bool = False,
        random_state: int = 0,
        device: str | None = None,
        progress: bool | None = None,
    ) -> None:
        self.latent_dim = latent_dim
        self.encoder = encoder
        self.fusion = fusion
        self.decoder = decoder
        self.hidden = hidden
        self.lambda_y = lambda_y
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.kl_warmup = kl_warmup
        self.validation_fraction = validation_fraction
        self.patience = patience
        self.restarts = restarts
        self.chance_margin = chance_margin
        self.max_len = max_len
        self.allow_missing = allow_missing
        self.random_state = random_state
        self.device = device
        self.progress = progress

    # ------------------------------------------------------------------ data
    def _batch(
        self, traces: TraceSet, tasks: Sequence[str], idx: np.ndarray | None = None
    ) -> Batch:
        dev = torch.device(self.device or "cpu")
        X: dict[str, torch.Tensor] = {}
        M: dict[str, torch.Tensor] = {}
        for t in tasks:
            x, m = traces.featurize(t, self.max_len)
            if idx is not None:
                x, m = x[idx], m[idx]
            X[t] = torch.as_tensor(x, device=dev)
            M[t] = torch.as_tensor(m, device=dev)
        return {"X": X, "mask": M}

    @staticmethod
    def _check_type(traces: object) -> TraceSet:
        if not isinstance(traces, TraceSet):
            raise TypeError(
                f"traces must be a plvm.TraceSet, got {type(traces).__name__}; build one with "
                "TraceSet.from_dataframe(df) or plvm.simulate_population"
            )
        return traces

    def _check_traces(self, traces: object, tasks: Sequence[str]) -> None:
        ts = self._check_type(traces)
        ts.check_tasks(tasks)
        if len(ts) == 0:
            raise ValueError("traces has no persons")

    def _check_params(self) -> None:
        """Every hyper-parameter in its allowed range (named in the error)."""
        check_latent_dim(self.latent_dim)
        check_choice(self.encoder, ENCODERS, "encoder")
        check_choice(self.fusion, FUSIONS, "fusion")
        check_choice(self.decoder, DECODERS, "decoder")
        for name in ("epochs", "batch_size", "hidden", "patience"):
            check_int(name, getattr(self, name), low=1)
        check_int("restarts", self.restarts, low=0)
        if self.max_len is not None:
            check_int("max_len", self.max_len, low=1)
        check_real("lambda_y", self.lambda_y, low=0.0)
        check_real("lr", self.lr, low=0.0)
        check_real("weight_decay", self.weight_decay, low=0.0)
        check_real("kl_warmup", self.kl_warmup, 0.0, 1.0)
        if check_real("validation_fraction", self.validation_fraction, 0.0, 1.0) == 1.0:
            raise ValueError("validation_fraction must be < 1: nothing would be left to train on")
        check_real("chance_margin", self.chance_margin, low=0.0)
        if self.progress is not None and not isinstance(self.progress, bool):
            raise TypeError(f"progress must be True, False or None, got {self.progress!r}")

    def _check_coverage(self, traces: TraceSet, tasks: Sequence[str]) -> None:
        any_present = np.zeros(len(traces), dtype=bool)
        for t in tasks:
            any_present |= traces.present(t)
        if not any_present.all() and not self.allow_missing:
            bad = traces.person_ids[~any_present][:5].tolist()
            raise ValueError(
                f"{int((~any_present).sum())} person(s) have no events in any of the source "
                f"tasks {list(tasks)} (e.g. {bad}); pass allow_missing=True to give them the "
                "prior"
            )

    # ------------------------------------------------------------------ fit
    def fit(
        self, traces: TraceSet, y: object, source_tasks: Sequence[str] | None = None
    ) -> PLVMClassifier:
        """Train on ``traces`` of ``source_tasks`` (default: all tasks of ``traces``).

        Args:
            traces: Partial source traces.
            y: 0/1 target labels, ``(N,)``; NaN marks an unlabelled person (semi-supervised).
            source_tasks: Tasks to encode and fuse.

        Raises:
            TypeError: If ``traces`` is not a :class:`~plvm.TraceSet`, ``y`` is not numeric or
                an integer hyper-parameter is not an integer.
            ValueError: A hyper-parameter out of range (``epochs < 1``, ``lr < 0``, NaN, ...),
                no persons, ``y`` not 1-D 0/1 of one label per person, one class only, or a
                person without events in any source task.
        """
        self._check_params()
        self._check_type(traces)
        tasks = list(traces.tasks if source_tasks is None else source_tasks)
        self._check_traces(traces, tasks)
        yy = check_binary(y, "y", allow_missing=True)
        if len(yy) != len(traces):
            raise ValueError(f"y has {len(yy)} labels for {len(traces)} persons")
        lab = ~np.isnan(yy)
        if len(np.unique(yy[lab])) < 2:
            raise ValueError("y needs both classes among the labelled persons")
        self._check_coverage(traces, tasks)
        self.source_tasks_ = tasks
        self.classes_ = np.array([0, 1])
        rng = np.random.default_rng(self.random_state)
        n = len(traces)
        val = np.zeros(n, dtype=bool)
        if self.validation_fraction > 0:
            for c in (0.0, 1.0):  # stratified split of the labelled persons
                ids = np.flatnonzero(yy == c)
                k = round(self.validation_fraction * len(ids))
                val[rng.choice(ids, k, replace=False)] = True
        train = np.flatnonzero(~val)
        data = self._batch(traces, tasks)
        dev = torch.device(self.device or "cpu")
        y_t = torch.as_tensor(yy, dtype=torch.float32, device=dev)
        n_feat = next(iter(data["X"].values())).shape[-1]
        gen = torch.Generator(device=dev).manual_seed(self.random_state)
        plateau = self._chance_loss(yy, train, val) - self.chance_margin
        kept: tuple[float, PLVM, list[tuple[float, float]], int] | None = None
        for attempt in range(1 + max(0, self.restarts)):
            with torch.random.fork_rng(devices=[]):  # seeded weights, global RNG untouched
                torch.manual_seed(self.random_state + 7919 * attempt)
                model = PLVM(
                    tasks, n_feat, self.latent_dim, self.encoder, self.fusion, self.decoder,
                    self.hidden, self.lambda_y,
                )  # fmt: skip
            model.to(dev)
            self._set_scaling(model, data, train)
            loss, history, best_epoch = self._train(
                model, data, y_t, train, np.flatnonzero(val), rng, gen
            )
            if kept is None or loss < kept[0]:
                kept = (loss, model, history, best_epoch)
            if not val.any() or loss < plateau:  # no split to judge by, or off the plateau
                break
        assert kept is not None  # the first attempt always sets it
        _, self.model_, self.history_, self.best_epoch_ = kept
        self.n_fits_ = attempt + 1
        return self

    @staticmethod
    def _chance_loss(y: np.ndarray, train: np.ndarray, val: np.ndarray) -> float:
        """Validation log-loss of the constant predictor (the training class frequency)."""
        ytr, yv = y[train], y[val]
        ytr, yv = ytr[~np.isnan(ytr)], yv[~np.isnan(yv)]
        if not len(yv) or not len(ytr):
            return np.inf
        p = float(np.clip(ytr.mean(), 1e-6, 1 - 1e-6))
        return float(-(yv * np.log(p) + (1 - yv) * np.log(1 - p)).mean())

    @staticmethod
    def _set_scaling(model: PLVM, data: Batch, rows: np.ndarray) -> None:
        feats = [data["X"][t][rows][data["mask"][t][rows]] for t in model.tasks]
        allf = torch.cat(feats, 0)
        if len(allf):
            model.feat_loc.copy_(allf.mean(0))
            model.feat_scale.copy_(allf.std(0).clamp(min=1e-3))

    @staticmethod
    def _take(data: Batch, y: torch.Tensor, idx: np.ndarray) -> Batch:
        ii = torch.as_tensor(idx, device=y.device)
        return {
            "X": {t: v[ii] for t, v in data["X"].items()},
            "mask": {t: v[ii] for t, v in data["mask"].items()},
            "y": y[ii],
        }

    def _train(
        self,
        model: PLVM,
        data: Batch,
        y: torch.Tensor,
        train: np.ndarray,
        val: np.ndarray,
        rng: np.random.Generator,
        gen: torch.Generator,
    ) -> tuple[float, list[tuple[float, float]], int]:
        """One fit; returns (best validation loss, history, best epoch), best weights loaded."""
        opt = torch.optim.Adam(model.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        steps_per_epoch = max(1, int(np.ceil(len(train) / self.batch_size)))
        warm = max(1, int(self.kl_warmup * self.epochs * steps_per_epoch))
        warm_epochs = int(np.ceil(warm / steps_per_epoch))
        vb = self._take(data, y, val) if len(val) else None
        best, best_state, bad, step = np.inf, None, 0, 0
        history: list[tuple[float, float]] = []
        best_epoch = self.epochs - 1
        epochs = show_progress(
            range(self.epochs), enabled=self.progress, desc="PLVM fit epochs", total=self.epochs
        )
        for epoch in epochs:
            model.train()
            perm = rng.permutation(train)
            losses = []
            for s in range(steps_per_epoch):
                b = self._take(data, y, perm[s * self.batch_size : (s + 1) * self.batch_size])
                loss = -model.elbo(b, gen, kl_weight=min(1.0, step / warm))
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                step += 1
            vl = self._val_loss(model, vb) if vb is not None else np.nan
            history.append((float(np.mean(losses)), vl))
            if vb is None:
                continue
            if vl < best - 1e-5:
                best, bad, best_epoch = vl, 0, epoch
                best_state = copy.deepcopy(model.state_dict())
            elif epoch >= warm_epochs:  # patience runs once the objective is fixed
                bad += 1
                if bad >= self.patience:
                    break
        if best_state is not None:
            model.load_state_dict(best_state)
        model.eval()
        return float(best), history, best_epoch

    @staticmethod
    @torch.no_grad()
    def _val_loss(model: PLVM, vb: Batch) -> float:
        model.eval()
        p = model.predict_proba(vb).clamp(1e-6, 1 - 1e-6)
        y = vb["y"]
        return float(-(y * p.log() + (1 - y) * (1 - p).log()).mean())

    # ------------------------------------------------------------------ predict
    def _tasks(self, traces: TraceSet, tasks: Sequence[str] | None) -> list[str]:
        if not hasattr(self, "model_"):
            raise NotFittedError("PLVMClassifier is not fitted; call fit first")
        tasks = list(self.source_tasks_ if tasks is None else tasks)
        unknown = [t for t in tasks if t not in self.source_tasks_]
        if unknown:
            raise ValueError(
                f"unknown task(s) {unknown}; the model was fitted on {self.source_tasks_}"
            )
        self._check_traces(traces, tasks)
        self._check_coverage(traces, tasks)
        return tasks

    def _full_batch(self, traces: TraceSet, tasks: list[str]) -> Batch:
        # tasks not requested are fed as empty traces (their experts drop out)
        b = self._batch(traces, tasks)
        ref = next(iter(b["mask"].values()))
        for t in self.source_tasks_:
            if t not in tasks:
                nf = next(iter(b["X"].values())).shape[-1]
                b["X"][t] = torch.zeros((len(traces), 1, nf), device=ref.device)
                b["mask"][t] = torch.zeros((len(traces), 1), dtype=torch.bool, device=ref.device)
        return b

    @torch.no_grad()
    def predict_proba(self, traces: TraceSet, tasks: Sequence[str] | None = None) -> np.ndarray:
        """``(N, 2)`` probabilities from the traces of ``tasks`` (default: all source tasks)."""
        tasks = self._tasks(traces, tasks)
        pt = self.model_.predict_proba(self._full_batch(traces, tasks), tasks)
        p = pt.double().cpu().numpy()
        return np.stack([1.0 - p, p], 1)

    def predict(self, traces: TraceSet, tasks: Sequence[str] | None = None) -> np.ndarray:
        """0/1 predictions (probability > 0.5)."""
        return (self.predict_proba(traces, tasks)[:, 1] > 0.5).astype(int)

    @torch.no_grad()
    def transform(self, traces: TraceSet, tasks: Sequence[str] | None = None) -> np.ndarray:
        """Posterior means ``(N, D)`` of the shared latent (not for ``fusion="concat"``)."""
        tasks = self._tasks(traces, tasks)
        mu, _ = self.model_.posterior(self._full_batch(traces, tasks), tasks)
        return mu.double().cpu().numpy()
