"""scikit-learn estimators wrapping :class:`~hel.models.EchoRNN` (aeon numpy3D input)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from hel._estimator import GradientEstimator
from hel._hel import EchoLearning, HamiltonianEcho
from hel.baselines import BPTT, EProp, FrozenRecurrence, TruncatedBPTT
from hel.cells import HopfieldOscillatorCell, RateEchoCell
from hel.models import EchoRNN
from methodkit import progress as show_progress

__all__ = ["ESTIMATORS", "EchoRNNClassifier", "EchoRNNRegressor"]

ESTIMATORS = ("hel", "hel_two_pass", "el", "bptt", "tbptt", "eprop", "frozen")


def _make_estimator(name: str, model: EchoRNN, loss: Any, T: int) -> GradientEstimator:
    if name == "hel":
        return HamiltonianEcho(model, loss)  # mode and checkpoint interval chosen by the echo
    if name == "hel_two_pass":
        return HamiltonianEcho(model, loss, mode="two_pass")
    if name == "el":
        return EchoLearning(model, loss, homeostasis=1e-2)
    if name == "bptt":
        return BPTT(model, loss)
    if name == "tbptt":
        return TruncatedBPTT(model, loss, k=max(1, T // 8))
    if name == "eprop":
        return EProp(model, loss)
    return FrozenRecurrence(model, loss)


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _positive(name: str, value: object, integer: bool) -> None:
    """Raise naming ``name`` unless ``value`` is a finite number (an integer) > 0."""
    kind = "an integer >= 1" if integer else "a finite number > 0"
    ok_type = (
        _is_int(value)
        if integer
        else (isinstance(value, int | float | np.number) and not isinstance(value, bool))
    )
    if not ok_type or not isinstance(value, int | float | np.number):  # the second narrows
        raise TypeError(f"{name} must be {kind}, got {value!r} ({type(value).__name__})")
    if not (math.isfinite(float(value)) and float(value) > 0):
        raise ValueError(f"{name} must be {kind}, got {value!r}")


def check_params(est: BaseEstimator) -> None:
    """Validate the constructor arguments of an Echo RNN estimator at ``fit`` (sklearn style)."""
    if est.estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {est.estimator!r}")
    _positive("hidden_size", est.hidden_size, True)
    _positive("dt", est.dt, False)
    _positive("epochs", est.epochs, True)
    _positive("lr", est.lr, False)
    _positive("batch_size", est.batch_size, True)
    if est.random_state is not None and not _is_int(est.random_state):
        raise TypeError(f"random_state must be None or an integer, got {est.random_state!r}")
    if est.progress is not None and not isinstance(est.progress, bool):
        raise TypeError(f"progress must be None, True or False, got {est.progress!r}")
    try:
        torch.device(est.device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(
            f"device must be a torch device such as 'cpu' or 'cuda', got {est.device!r}"
        ) from err


def _validate(
    est: BaseEstimator,
    X: Any,
    y: Any = "no_validation",
    reset: bool = True,
    multi_output: bool = False,
) -> Any:
    """scikit-learn's input validation (``validate_data`` from 1.6, the method before)."""
    kw: dict[str, Any] = {"allow_nd": True, "dtype": [np.float64, np.float32], "reset": reset}
    if not (isinstance(y, str) and y == "no_validation"):
        kw["multi_output"] = multi_output
    try:
        from sklearn.utils.validation import validate_data
    except ImportError:  # scikit-learn < 1.6
        return est._validate_data(X, y, **kw)
    return validate_data(est, X, y, **kw)


class _EchoRNNBase(BaseEstimator):
    """Shared fit loop (Adam, mini-batches, mean readout, per-channel standardisation)."""

    def __init__(
        self,
        hidden_size: int = 64,
        dt: float = 0.2,
        estimator: str = "hel",
        epochs: int = 200,
        lr: float = 3e-3,
        batch_size: int = 64,
        device: str = "cpu",
        random_state: int | None = None,
        progress: bool | None = None,
    ) -> None:
        self.hidden_size = hidden_size
        self.dt = dt
        self.estimator = estimator
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.device = device
        self.random_state = random_state
        self.progress = progress

    def _to_tensor(self, X: Any) -> torch.Tensor:
        X = np.asarray(X, dtype=np.float32)
        if X.ndim == 2:  # univariate (n_cases, n_timepoints)
            X = X[:, None, :]
        if X.ndim != 3:
            raise ValueError(
                f"X must be numpy3D (n_cases, n_channels, n_timepoints), got {X.shape}"
            )
        X = (X - self.mean_[None, :, None]) / self.scale_[None, :, None]
        return torch.from_numpy(np.ascontiguousarray(X.transpose(0, 2, 1))).to(self.device)

    def _standardizer(self, X: NDArray[Any]) -> None:
        """Per-channel mean and scale of the training series (the inputs' units vary)."""
        X3 = X[:, None, :] if X.ndim == 2 else X
        self.mean_ = X3.mean(axis=(0, 2)).astype(np.float32)
        std = X3.std(axis=(0, 2)).astype(np.float32)
        self.scale_ = np.where(std > 1e-8, std, 1.0).astype(np.float32)

    def _fit(self, X: Any, target: torch.Tensor, out: int, loss: Any) -> None:
        if X.ndim not in (2, 3):
            raise ValueError(
                f"X must be numpy3D (n_cases, n_channels, n_timepoints), got {X.shape}"
            )
        self._standardizer(X)
        x = self._to_tensor(X)
        seed = 0 if self.random_state is None else int(self.random_state)
        gen = torch.Generator().manual_seed(seed)
        cell_cls = RateEchoCell if self.estimator == "el" else HopfieldOscillatorCell
        cell = cell_cls(x.shape[2], self.hidden_size, dt=self.dt, generator=gen)
        model = EchoRNN(cell, out).to(self.device)
        head = model.head
        assert isinstance(head, torch.nn.Linear), "EchoRNN's default head"
        with torch.no_grad():  # deterministic head init from the same generator
            head.weight.uniform_(-1, 1, generator=gen).mul_(self.hidden_size**-0.5)
            head.bias.zero_()
        est = _make_estimator(self.estimator, model, loss, x.shape[1])
        opt = torch.optim.Adam(model.parameters(), lr=self.lr)
        n = x.shape[0]
        self.loss_curve_: list[float] = []
        epochs = show_progress(
            range(self.epochs),
            enabled=self.progress,
            desc=f"{type(self).__name__} ({self.estimator})",
            total=self.epochs,
            unit="epoch",
        )
        for _ in epochs:
            perm = torch.randperm(n, generator=gen)
            total = 0.0
            for i in range(0, n, self.batch_size):
                idx = perm[i : i + self.batch_size]
                opt.zero_grad()
                total += float(est.backward(x[idx], target[idx])) * len(idx)
                opt.step()
            self.loss_curve_.append(total / n)
        self.model_ = model

    def _forward(self, X: Any) -> torch.Tensor:
        check_is_fitted(self, "model_")
        X = _validate(self, X, reset=False)
        with torch.no_grad():
            return self.model_(self._to_tensor(X))


class EchoRNNClassifier(ClassifierMixin, _EchoRNNBase):
    """Time-series classifier: dense Hopfield oscillator RNN trained with HEL (default).

    Args:
        hidden_size: Neurons.
        dt: Leapfrog step.
        estimator: One of ``"hel"``, ``"hel_two_pass"``, ``"el"`` (RateEchoCell with
            homeostasis 1e-2), ``"bptt"``, ``"tbptt"`` (k = T/8), ``"eprop"``, ``"frozen"``.
        epochs: Passes over the data (200: UCR training sets are small).
        lr: Adam learning rate (3e-3: the best of {1e-2, 3e-3} x hidden_size {32, 64} by
            inner validation on the training splits of aeon's four bundled sets; the
            ``classifier`` benchmark).
        batch_size: Mini-batch size (64: full batch on most bundled UCR sets).
        device: Torch device.
        random_state: Seed of initialisation and shuffling.
        progress: Progress bar over the epochs (``None``: on a terminal only; ``TQDM_DISABLE=1``
            silences it).

    Raises:
        ValueError: At ``fit``, for an unknown ``estimator``, a ``hidden_size``, ``epochs`` or
            ``batch_size`` below 1, a ``dt`` or ``lr`` that is not finite and > 0, ``X`` that
            is not 2-D or numpy3D, has NaN/inf, no series or no time steps, ``X`` and ``y`` of
            different lengths, ``y`` with a single class, an unknown ``device``; at
            ``predict``, ``X`` with another number of channels.
        TypeError: At ``fit``, for a non-numeric ``hidden_size``, ``dt``, ``epochs``, ``lr`` or
            ``batch_size`` (integers where counted), a non-integer ``random_state`` or a
            ``progress`` other than ``None``/``True``/``False``.

    Example:
        >>> import numpy as np
        >>> from hel import EchoRNNClassifier
        >>> X = np.random.default_rng(0).normal(size=(20, 1, 15))
        >>> clf = EchoRNNClassifier(hidden_size=8, epochs=2, random_state=0).fit(X, [0, 1] * 10)
        >>> clf.predict(X).shape
        (20,)
    """

    def fit(self, X: Any, y: Any) -> EchoRNNClassifier:
        """Fit on numpy3D ``X`` ``(n, channels, T)`` (or 2-D univariate) and labels ``y``."""
        check_params(self)
        X, y = _validate(self, X, y)
        check_classification_targets(y)
        self.classes_, enc = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(
                f"y contains only 1 class ({self.classes_[0]!r}); a classifier needs 2 or more"
            )
        self._fit(
            X,
            torch.from_numpy(enc.astype(np.int64)).to(self.device),
            len(self.classes_),
            torch.nn.CrossEntropyLoss(),
        )
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Class probabilities ``(n, n_classes)``."""
        return torch.softmax(self._forward(X), dim=1).double().cpu().numpy()

    def predict(self, X: Any) -> NDArray[Any]:
        """Predicted labels."""
        proba = self.predict_proba(X)  # raises NotFittedError before fit
        return self.classes_[proba.argmax(axis=1)]


class EchoRNNRegressor(RegressorMixin, _EchoRNNBase):
    """Time-series regressor (one scalar or vector target per series), same options."""

    def __sklearn_tags__(self) -> Any:  # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _more_tags(self) -> dict[str, bool]:  # scikit-learn < 1.6
        return {"multioutput": True}

    def fit(self, X: Any, y: Any) -> EchoRNNRegressor:
        """Fit on numpy3D ``X`` and targets ``y`` ``(n,)`` or ``(n, k)``."""
        check_params(self)
        X, y = _validate(self, X, y, multi_output=True)
        y = np.asarray(y, dtype=np.float32)
        self._y_1d = y.ndim == 1
        y2 = y[:, None] if self._y_1d else y
        self._fit(X, torch.from_numpy(y2).to(self.device), y2.shape[1], torch.nn.MSELoss())
        return self

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Predictions ``(n,)`` or ``(n, k)``."""
        out = self._forward(X).double().cpu().numpy()
        return out[:, 0] if self._y_1d else out
