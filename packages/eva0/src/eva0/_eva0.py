"""EVA-0: test-time adaptation with two forward passes per batch (the paper's algorithm box)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from eva0.defaults import profile_of, resolve
from eva0.guard import CollapseGuard
from eva0.losses import entropy, scale_invariant_entropy
from eva0.outputs import as_logits
from eva0.perturb import NORM_TYPES, PerSampleNorm, per_sample_call
from methodkit import zo

__all__ = ["EVA0", "EVA0Stats"]

ParamSpec = str | Sequence[str] | Callable[[str, nn.Module, nn.Parameter], bool]
LossSpec = str | Callable[[torch.Tensor], torch.Tensor]

#: Default tolerance of the collapse guard (units of ln C); see :class:`eva0.guard.CollapseGuard`.
GUARD_TOLERANCE = 0.05


@dataclass
class EVA0Stats:
    """Running counters of an :class:`EVA0` wrapper.

    Attributes:
        forward_passes: Model calls made so far (2 per batch).
        batches: Batches seen.
        updates: Batches that produced a parameter update.
        skipped: Batches whose update was skipped (non-finite logits, all samples filtered,
            a guard reset, or the guard has stopped adaptation).
        resets: Times the guard reset theta to the anchor.
        frozen: Whether the guard has stopped adaptation for this stream.
        last_loss: Mean loss of the last batch over both passes (NaN before the first).
        drift: ``||theta - theta_0||_2`` after the last batch.
    """

    forward_passes: int = 0
    batches: int = 0
    updates: int = 0
    skipped: int = 0
    resets: int = 0
    frozen: bool = False
    last_loss: float = math.nan
    drift: float = 0.0


def select_params(model: nn.Module, params: ParamSpec) -> list[tuple[str, nn.Parameter]]:
    """The adapted parameters θ of ``model``: ``(name, parameter)`` pairs in model order.

    Package-internal (the baselines adapt the same set); users pass ``params`` to :class:`EVA0`.

    Args:
        model: The wrapped model.
        params: ``"norm"`` (every affine of a normalisation layer), a list of parameter
            names, or a callable ``(name, owner_module, parameter) -> bool``.

    Raises:
        ValueError: On an unknown spec, unknown names, or when nothing is selected.
    """
    owner = {}
    for mname, mod in model.named_modules():
        for pname, _p in mod.named_parameters(recurse=False):
            owner[f"{mname}.{pname}" if mname else pname] = mod
    named = list(model.named_parameters())
    if isinstance(params, str):
        if params != "norm":
            raise ValueError(
                f"params must be 'norm', a list of names or a callable, got {params!r}"
            )
        out = [(n, p) for n, p in named if isinstance(owner[n], NORM_TYPES)]
    elif callable(params):
        out = [(n, p) for n, p in named if params(n, owner[n], p)]
    else:
        wanted = list(params)
        known = dict(named)
        missing = [n for n in wanted if n not in known]
        if missing:
            raise ValueError(f"params names not found in the model: {missing}")
        out = [(n, known[n]) for n in wanted]
    if not out:
        raise ValueError(f"no adaptable parameters found in the model for params={params!r}")
    return out


class EVA0(nn.Module):
    r"""EVA-0 test-time adaptation wrapper: two forward passes per batch, no backpropagation.

    For batch :math:`t` with samples :math:`x_1..x_B` and adapted parameters :math:`\theta`
    (norm affines by default), with one direction :math:`z_i \sim N(0, I)` per sample drawn
    from ``zo.tensor_generator(seed_t, j)`` for tensor ``j``:

    .. math::

        f^\pm_i &= f(x_i;\ \theta \pm \epsilon z_i) \quad \text{(two batched passes)} \\
        \bar p_i &= \tfrac12\big(\mathrm{softmax} f^+_i + \mathrm{softmax} f^-_i\big)
            \quad \text{(returned prediction, error } O(\epsilon^2)) \\
        \ell^\pm_i &= H\big(\mathrm{softmax}(\tau f^\pm_i / \lVert f^\pm_i\rVert)\big)
            \quad \text{(scale-invariant entropy)} \\
        \hat g &= \frac{1}{\sum_i w_i} \sum_i w_i\,\frac{\ell^+_i - \ell^-_i}{2\epsilon}\, z_i \\
        \theta &\leftarrow \theta - \eta \hat g - \lambda (\theta - a)
            \quad (a = \theta_0 \text{ or a slow EMA of } \theta)

    The loss form, the anchor rule and the sample-wise reading of the perturbation are
    inferred from the paper's abstract (the spec marks them "inferred"). Everything runs under
    ``torch.no_grad()``; no autograd graph is built.

    Args:
        model: Classifier mapping a batch to (B, C) logits.
        params: ``"norm"`` (every LayerNorm/GroupNorm/BatchNorm affine), a list of parameter
            names, or a callable ``(name, module, param) -> bool``.
        eps: Perturbation scale (> 0), or ``"auto"``: the value of the model's profile
            (:data:`eva0.defaults.PROFILES`: 0.05 LayerNorm, 0.01 GroupNorm, 0.02 BatchNorm).
        lr: Step size (>= 0), or ``"auto"`` (0.01 LayerNorm and GroupNorm; 0 for BatchNorm:
            no update by default there, see :mod:`eva0.defaults`).
        anchor: ``"source"`` (anchor at theta_0) or ``"ema"`` (slow EMA of theta).
        anchor_weight: Pull towards the anchor, in [0, 1); 0 disables it.
        anchor_momentum: EMA rate of the ``"ema"`` anchor, in (0, 1].
        per_sample: One direction per sample (True) or one shared direction per batch.
            Falls back to shared, with a warning, when the model cannot run per-sample
            parameters (BatchNorm in training mode, or the vmap path fails).
        noise: ``"gaussian"`` or ``"rademacher"``.
        loss: ``"scale_invariant_entropy"``, ``"entropy"`` or a callable
            ``logits -> (B,) losses``.
        weighting: ``None``, ``"filter"`` (w_i = 1[H(p_i) < 0.4 ln C]) or ``"eata"``
            (filter times exp(0.4 ln C - H(p_i))).
        tau: Norm of the scale-invariant loss; ``None``: the mean logit norm of the first batch.
        max_step: Clip ``||lr * g||_2`` to this value (``None``: no clipping), or ``"auto"``
            (0.01 LayerNorm, 0.002 GroupNorm, 0.001 BatchNorm profile).
        guard: Tolerance (units of ln C) of the label-free :class:`eva0.guard.CollapseGuard`:
            theta goes back to the anchor when the running marginal prediction entropy falls,
            or the running loss rises, by more than ``guard * ln C`` from its first-batches
            value; after 2 resets adaptation stops for the stream. ``None`` disables it.
        seed: Seed of the direction streams (``seed_t = zo.derive_seed(seed, t)``).

    Raises:
        ValueError: On an out-of-range hyperparameter or when no adaptable parameter is found.
        TypeError: If ``model`` is not an ``nn.Module`` or ``loss`` has the wrong type.

    References:
        EVA-0: Test-Time Model Evolution with Only Two Forward Passes per Sample.
        arXiv:2605.18867 (2026).

    Example:
        >>> import torch
        >>> from eva0 import EVA0
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8),
        ...                           torch.nn.Linear(8, 3))
        >>> adapted = EVA0(net)  # the safe defaults (README: how they were chosen)
        >>> logp = adapted(torch.randn(16, 4))   # 2 forward passes, one update
        >>> logp.shape, adapted.stats.forward_passes
        (torch.Size([16, 3]), 2)
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        params: ParamSpec = "norm",
        eps: float | str = "auto",
        lr: float | str = "auto",
        anchor: str = "source",
        anchor_weight: float = 0.1,
        anchor_momentum: float = 1e-3,
        per_sample: bool = True,
        noise: str = "gaussian",
        loss: LossSpec = "scale_invariant_entropy",
        weighting: str | None = None,
        tau: float | None = None,
        max_step: float | str | None = "auto",
        guard: float | None = GUARD_TOLERANCE,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
        self.named_params = select_params(model, params)
        self.names = [n for n, _ in self.named_params]
        self.profile = profile_of(model, self.names)
        chosen = resolve(self.profile, eps=eps, lr=lr, max_step=max_step)
        eps_v, lr_v, max_step_v = chosen["eps"], chosen["lr"], chosen["max_step"]
        if eps_v is None or not eps_v > 0:
            raise ValueError(f"eps must be > 0, got {eps_v}")
        if lr_v is None or not lr_v >= 0:
            raise ValueError(f"lr must be >= 0, got {lr_v}")
        if not 0 <= anchor_weight < 1:
            raise ValueError(f"anchor_weight must be in [0, 1), got {anchor_weight}")
        if not 0 < anchor_momentum <= 1:
            raise ValueError(f"anchor_momentum must be in (0, 1], got {anchor_momentum}")
        if anchor not in ("source", "ema"):
            raise ValueError(f"anchor must be 'source' or 'ema', got {anchor!r}")
        if noise not in ("gaussian", "rademacher"):
            raise ValueError(f"noise must be 'gaussian' or 'rademacher', got {noise!r}")
        if weighting not in (None, "filter", "eata"):
            raise ValueError(f"weighting must be None, 'filter' or 'eata', got {weighting!r}")
        if isinstance(loss, str):
            if loss not in ("scale_invariant_entropy", "entropy"):
                raise ValueError(
                    f"loss must be 'scale_invariant_entropy', 'entropy' or a callable, got {loss!r}"
                )
        elif not callable(loss):
            raise TypeError(f"loss must be a string or a callable, got {type(loss).__name__}")
        if tau is not None and not tau > 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        if max_step_v is not None and not max_step_v > 0:
            raise ValueError(f"max_step must be > 0, got {max_step_v}")
        self.guard = None if guard is None else CollapseGuard(guard)
        zo.derive_seed(seed)  # validates the seed (int >= 0)
        self.model = model
        self.eps, self.lr = eps_v, lr_v
        self.anchor, self.anchor_weight = anchor, float(anchor_weight)
        self.anchor_momentum = float(anchor_momentum)
        self.noise, self.loss, self.weighting = noise, loss, weighting
        self.max_step, self.seed = max_step_v, seed
        self._tau_given = tau
        self.tau: float | None = tau
        self.source = [p.detach().clone() for _, p in self.named_params]
        self.anchor_values = [s.clone() for s in self.source]
        self._norms = PerSampleNorm(model)
        self.per_sample = per_sample
        self.mode = self._initial_mode(per_sample)
        self.t = 0
        self.stats = EVA0Stats()

    # ------------------------------------------------------------------ setup
    def _initial_mode(self, per_sample: bool) -> str:
        if not per_sample:
            return "shared"
        bn_train = any(
            isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training
            for m in self.model.modules()
        )
        if bn_train:
            warnings.warn(
                "the model has BatchNorm in training mode (batch statistics): per-sample "
                "directions are impossible, falling back to per_sample=False",
                stacklevel=3,
            )
            return "shared"
        return "norm" if self._norms.supports(self.names) else "vmap"

    @property
    def params(self) -> list[nn.Parameter]:
        """The adapted parameter tensors (in place, shared with the model)."""
        return [p for _, p in self.named_params]

    def reset(self) -> None:
        """Restore theta_0 bit for bit and restart the direction stream and statistics."""
        with torch.no_grad():
            for p, s in zip(self.params, self.source, strict=True):
                p.copy_(s)
            for a, s in zip(self.anchor_values, self.source, strict=True):
                a.copy_(s)
        self.tau = self._tau_given
        self.t = 0
        self.mode = self._initial_mode(self.per_sample)
        self.stats = EVA0Stats()
        if self.guard is not None:
            self.guard.reset()

    # ------------------------------------------------------------------ pieces
    def directions(self, batch: int) -> list[torch.Tensor]:
        """Directions of the current batch: (B, *shape) per tensor, or (*shape) when shared."""
        seed_t = zo.derive_seed(self.seed, self.t)
        B = None if self.mode == "shared" else batch
        return [
            zo.sample(p, zo.tensor_generator(seed_t, j, p.device), self.noise, batch=B)
            for j, p in enumerate(self.params)
        ]

    def _logits(self, x: torch.Tensor, z: list[torch.Tensor], sign: float) -> torch.Tensor:
        eps = sign * self.eps
        if self.mode == "shared":
            saved = [p.detach().clone() for p in self.params]
            for p, zj in zip(self.params, z, strict=True):
                p.add_(zj, alpha=eps)
            try:
                return as_logits(self.model(x))
            finally:  # restore theta bit for bit
                for p, s in zip(self.params, saved, strict=True):
                    p.copy_(s)
        stacks = {
            n: p.unsqueeze(0) + eps * zj
            for n, p, zj in zip(self.names, self.params, z, strict=True)
        }
        if self.mode == "norm":
            with self._norms.apply(stacks):
                return as_logits(self.model(x))
        return per_sample_call(self.model, stacks, x)

    def _losses(self, logits: torch.Tensor) -> torch.Tensor:
        if callable(self.loss):
            out = self.loss(logits)
            if not isinstance(out, torch.Tensor) or out.shape != (logits.shape[0],):
                raise ValueError(
                    f"loss callable must return a ({logits.shape[0]},) tensor, got "
                    f"{getattr(out, 'shape', type(out).__name__)}"
                )
            return out
        if self.loss == "entropy":
            return entropy(logits)
        assert self.tau is not None
        return scale_invariant_entropy(logits, self.tau)

    def _weights(self, p_bar: torch.Tensor) -> torch.Tensor:
        B, C = p_bar.shape
        if self.weighting is None:
            return torch.ones(B, dtype=p_bar.dtype, device=p_bar.device)
        e0 = 0.4 * math.log(C)
        h = -(p_bar * p_bar.clamp_min(1e-12).log()).sum(1)
        w = (h < e0).to(p_bar.dtype)
        if self.weighting == "eata":
            w = w * torch.exp(e0 - h)
        return w

    # ------------------------------------------------------------------ passes
    def _passes(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list]:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() < 1 or x.shape[0] < 1:
            raise ValueError(f"x must be a non-empty batch, got shape {tuple(x.shape)}")
        z = self.directions(x.shape[0])
        if self.mode == "vmap":
            try:
                f_plus = self._logits(x, z, +1.0)
            except Exception as exc:  # vmap unsupported by this model: shared directions
                warnings.warn(
                    f"per-sample (vmap) forward failed ({type(exc).__name__}: {exc}); falling "
                    "back to per_sample=False",
                    stacklevel=3,
                )
                self.mode = "shared"
                return self._passes(x)
        else:
            f_plus = self._logits(x, z, +1.0)
        f_minus = self._logits(x, z, -1.0)
        self.stats.forward_passes += 2
        for f in (f_plus, f_minus):
            if f.dim() != 2 or f.shape[0] != x.shape[0]:
                raise ValueError(
                    f"the model must return (B, C) logits, got shape {tuple(f.shape)} for a "
                    f"batch of {x.shape[0]}"
                )
        return f_plus, f_minus, 0.5 * (f_plus.softmax(1) + f_minus.softmax(1)), z

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Log of the symmetric averaged probabilities, without updating theta (2 passes)."""
        return self._passes(x)[2].clamp_min(1e-30).log()

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Two passes at theta +- eps z, one update of theta; returns log p_bar, shape (B, C).

        Raises:
            TypeError: If ``x`` is not a tensor.
            ValueError: If the model does not return (B, C) logits.
        """
        f_plus, f_minus, p_bar, z = self._passes(x)
        self.stats.batches += 1
        out = p_bar.clamp_min(1e-30).log()
        if not (torch.isfinite(f_plus).all() and torch.isfinite(f_minus).all()):
            warnings.warn("non-finite logits: update skipped, theta kept", stacklevel=2)
            self._skip()
            return out
        if self.tau is None and not callable(self.loss) and self.loss == "scale_invariant_entropy":
            norms = 0.5 * (f_plus.norm(dim=1) + f_minus.norm(dim=1))
            self.tau = max(float(norms.mean()), 1e-6)
        l_plus, l_minus = self._losses(f_plus), self._losses(f_minus)
        self.stats.last_loss = float(0.5 * (l_plus.mean() + l_minus.mean()))
        if self._guard_says_stop(p_bar):
            self._skip()
            return out
        w = self._weights(p_bar)
        if float(w.sum()) <= 0:
            self._skip()
            return out
        coef = w * (l_plus - l_minus) / (2 * self.eps) / w.sum()  # (B,)
        self._update(coef, z)
        self.stats.updates += 1
        self.t += 1
        self.stats.drift = self.drift()
        return out

    def _guard_says_stop(self, p_bar: torch.Tensor) -> bool:
        """Let the guard see the batch; on a trigger put theta back to the anchor."""
        if self.guard is None:
            return False
        if self.guard.frozen:
            return True
        if not self.guard.observe(p_bar, self.stats.last_loss):
            return False
        for p, a in zip(self.params, self.anchor_values, strict=True):
            p.copy_(a)
        self.stats.resets = self.guard.resets
        self.stats.frozen = self.guard.frozen
        return True

    def _skip(self) -> None:
        self.stats.skipped += 1
        self.t += 1
        self.stats.drift = self.drift()

    def gradient_estimate(self, coef: torch.Tensor, z: list[torch.Tensor]) -> list[torch.Tensor]:
        """``g_j = sum_i coef_i z_ij`` (per-sample) or ``(sum_i coef_i) z_j`` (shared)."""
        if self.mode == "shared":
            return [float(coef.sum()) * zj for zj in z]
        return [torch.tensordot(coef.to(zj.dtype), zj, dims=1) for zj in z]

    def _update(self, coef: torch.Tensor, z: list[torch.Tensor]) -> None:
        g = self.gradient_estimate(coef, z)
        self.last_gradient = g
        scale = self.lr
        if self.max_step is not None:
            gnorm = math.sqrt(sum(float(gj.pow(2).sum()) for gj in g))
            if self.lr * gnorm > self.max_step:
                scale = self.max_step / gnorm
        lam = self.anchor_weight
        for p, gj, a in zip(self.params, g, self.anchor_values, strict=True):
            step = scale * gj
            if lam > 0:
                step = step + lam * (p - a)
            p.sub_(step)
            if self.anchor == "ema":
                a.mul_(1 - self.anchor_momentum).add_(p, alpha=self.anchor_momentum)

    def drift(self) -> float:
        """``||theta - theta_0||_2`` over the adapted tensors."""
        return math.sqrt(
            sum(
                float((p.detach() - s).pow(2).sum())
                for p, s in zip(self.params, self.source, strict=True)
            )
        )
