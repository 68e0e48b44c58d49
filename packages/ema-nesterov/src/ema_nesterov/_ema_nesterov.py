"""EMA-Nesterov: a lookahead along an EMA of parameter increments, around any base optimizer."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ema_nesterov._kernels import backwards, ema_update, fold_in, fold_out, save_point, shift
from ema_nesterov._wrapping import (
    as_base_list,
    check_nonneg,
    check_sparse,
    check_unit_interval,
    merged_defaults,
)

if torch.distributed.is_available():
    from torch.distributed.tensor import DTensor

    def _local_shard(t: torch.Tensor) -> torch.Tensor:
        """A DTensor's local shard; any other tensor as it is."""
        return t.to_local() if isinstance(t, DTensor) else t

else:  # pragma: no cover - torch built without distributed support

    def _local_shard(t: torch.Tensor) -> torch.Tensor:
        """The tensor as it is (no DTensor without torch.distributed)."""
        return t


#: one bucket of :meth:`EMANesterov._pre_step`: saved ``y`` (None when folded), params, m, scale
_PlanEntry = tuple[list[torch.Tensor] | None, list[torch.Tensor], list[torch.Tensor], float]
_APPLIED = "_ema_beta_applied"
_EMA_KEYS = ("step", "training", "state", "beta_applied", "config")
_CONFIG_KEYS = ("memory_efficient", "n_params", "shapes", "base_classes")
_LOW_PRECISION = (torch.float16, torch.bfloat16)
_EXACT = (torch.float32, torch.float64)
_COMPLEX_OF = {torch.float16: torch.complex32, torch.float32: torch.complex64}
_COMPLEX_OF[torch.float64] = torch.complex128


def _real_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of one real component (``complex64`` -> ``float32``); reals map to themselves."""
    return dtype.to_real() if dtype.is_complex else dtype


def _real_view(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a plain real tensor sharing its memory, for the element-wise kernels.

    A ``DTensor`` (FSDP2 ``fully_shard``, tensor parallel) gives its local shard: the update
    is element-wise and the wrapper's buffers are sharded like the parameter, so each rank
    updates its own shard, with no communication (and the fused kernel, which ``DTensor``
    does not dispatch, applies). A complex tensor gives ``view_as_real``: on the real and
    imaginary parts the update is exactly that of the ``view_as_real`` parameters (what
    torch's own optimizers do with complex tensors).
    """
    t = _local_shard(t)
    return torch.view_as_real(t) if t.is_complex() else t


def _require_keys(mapping: Any, keys: Sequence[str], where: str) -> None:
    """A truncated or foreign checkpoint fails with the missing keys named, not a KeyError."""
    if not isinstance(mapping, dict):
        raise ValueError(f"{where} must be a dict, got {type(mapping).__name__}")
    missing = [k for k in keys if k not in mapping]
    if missing:
        raise ValueError(
            f"{where} lacks {missing}: truncated, or not written by EMANesterov.state_dict()"
        )


class EMANesterov(torch.optim.Optimizer):
    r"""EMA-Nesterov lookahead wrapped around one or more base optimizers.

    With base iterate :math:`\theta_t`, increment EMA :math:`m_t` (:math:`m_0 = 0`) and a
    base-optimizer step :math:`\mathcal{A}_t` (a black box that reads the gradient at its
    input point and returns the new point; momentum, bias correction and weight decay stay
    inside it), one step is

    .. math::

        y_t &= \theta_t + \beta_t m_t \\
        \theta_{t+1} &= \mathcal{A}_t(y_t) \quad (\text{gradient evaluated at } y_t) \\
        m_{t+1} &= \gamma m_t + (1 - \gamma)(\theta_{t+1} - \theta_t)

    ``gamma = 0`` is one-step Nesterov lookahead (exactly Nesterov's accelerated gradient
    with plain gradient descent as the base); ``beta = 0`` is the base optimizer unchanged.

    During training the parameters hold the lookahead point :math:`y_t`, so an ordinary
    forward/backward gives the gradient at :math:`y_t`; ``step()`` calls the base step(s),
    updates :math:`m` and moves the parameters to :math:`\theta_{t+1} + \beta_{t+1} m_{t+1}`.
    :math:`\theta = p - \beta_\text{applied}\, m` holds for every parameter at all times
    (``eval()`` puts :math:`\theta` into the model, ``train()`` moves back).

    ``gamma`` and ``beta`` are stored in every parameter group as ``ema_gamma`` and
    ``ema_beta``; ``param_groups`` are the base optimizers' own group dicts, so any
    ``torch.optim.lr_scheduler`` built on the wrapper drives the base learning rates.
    The applied lookahead is ``ema_beta * beta_schedule(step)``.

    Args:
        base_optimizer: A ``torch.optim.Optimizer`` or a sequence of them over disjoint
            parameters (e.g. ``torch.optim.Muon`` for hidden matrices plus ``AdamW``).
        gamma: EMA decay in ``[0, 1)`` (default 0.9, inferred).
        beta: Lookahead size ``>= 0`` (default 1.0, inferred).
        beta_schedule: ``step -> multiplier >= 0`` applied to ``ema_beta`` (default: 1),
            e.g. :func:`ema_nesterov.wsd_lookahead_schedule`.
        memory_efficient: ``None`` (default): one buffer ``m`` per parameter, the lookahead
            point folded into it during the step, for float32/float64 parameters and
            buffers, where the fold is as accurate as keeping ``y`` (tested against a float64
            reference); two buffers (``m`` and a scratch ``y``) for fp16/bf16. ``True``:
            always fold (float32/float64 only); ``False``: always keep ``y``.
        state_dtype: dtype of the buffers (default: the parameter's); ``torch.float32``
            keeps the EMA accurate for bf16/fp16 parameters.
        skip_nonfinite: Skip a step whose gradients hold a NaN or inf (no base step, no EMA
            update) and count it in ``skipped_steps``, as ``GradScaler`` does (default off:
            the check costs one synchronisation per step).

    Raises:
        TypeError: If ``base_optimizer`` is not an optimizer (or a sequence of them), is an
            ``EMANesterov``, or ``beta_schedule`` is not callable.
        ValueError: For ``gamma`` outside ``[0, 1)``, negative or non-finite ``beta``, an empty
            sequence, overlapping parameters, or ``memory_efficient`` with fp16/bf16 parameters.

    References:
        Yau, Li, Glentis, Boreiko, Wai, Hong. *EMA-Nesterov: Stabilizing Nesterov Lookahead
        with Exponential Moving Averages of Updates*. arXiv:2605.25395, 2026.

    Example:
        >>> import torch
        >>> from ema_nesterov import EMANesterov
        >>> model = torch.nn.Linear(4, 1)
        >>> opt = EMANesterov(torch.optim.AdamW(model.parameters(), lr=1e-2), gamma=0.9)
        >>> model(torch.randn(8, 4)).pow(2).mean().backward()
        >>> opt.step()
        >>> opt.zero_grad()
    """

    def __init__(
        self,
        base_optimizer: torch.optim.Optimizer | Sequence[torch.optim.Optimizer],
        gamma: float = 0.9,
        beta: float = 1.0,
        beta_schedule: Callable[[int], float] | None = None,
        memory_efficient: bool | None = None,
        state_dtype: torch.dtype | None = None,
        skip_nonfinite: bool = False,
    ) -> None:
        gamma = check_unit_interval("gamma", gamma)
        beta = check_nonneg("beta", beta)
        if beta_schedule is not None and not callable(beta_schedule):
            raise TypeError(
                f"beta_schedule must be callable (step -> multiplier), got "
                f"{type(beta_schedule).__name__}"
            )
        if state_dtype is not None and not (
            isinstance(state_dtype, torch.dtype) and state_dtype.is_floating_point
        ):
            raise TypeError(f"state_dtype must be a floating torch.dtype, got {state_dtype!r}")
        if memory_efficient and state_dtype in _LOW_PRECISION:
            raise ValueError(
                f"memory_efficient=True needs a float32/float64 state_dtype, got {state_dtype}"
            )
        self._bases = as_base_list(base_optimizer, EMANesterov)
        self.beta_schedule = beta_schedule
        self.memory_efficient = None if memory_efficient is None else bool(memory_efficient)
        self.state_dtype = state_dtype
        self.skip_nonfinite = bool(skip_nonfinite)
        #: Steps skipped for non-finite gradients (``skip_nonfinite=True``).
        self.skipped_steps = 0
        self._ema_step = 0
        self._training = True
        self._eval_backup: dict[torch.Tensor, torch.Tensor] = {}
        self._ready = False
        ema_defaults = {"ema_gamma": gamma, "ema_beta": beta}
        super().__init__([g for b in self._bases for g in b.param_groups], ema_defaults)
        self.defaults = merged_defaults(self._bases, ema_defaults)
        self._ema_defaults = ema_defaults
        self._ready = True

    # ------------------------------------------------------------------ groups
    @property
    def base_optimizers(self) -> list[torch.optim.Optimizer]:
        """The wrapped base optimizers, in the order their steps are taken."""
        return list(self._bases)

    @property
    def training(self) -> bool:
        """True while the parameters hold the lookahead point (see :meth:`eval`)."""
        return self._training

    def _init_group(self, group: dict[str, Any]) -> None:
        check_unit_interval("ema_gamma", group["ema_gamma"])
        check_nonneg("ema_beta", group["ema_beta"])
        for p in group["params"]:
            if self.memory_efficient is True and _real_dtype(p.dtype) not in _EXACT:
                raise ValueError(
                    "memory_efficient=True supports float32/float64 (and complex64/complex128) "
                    f"parameters only (cancellation), got a {p.dtype} parameter of shape "
                    f"{tuple(p.shape)}"
                )
            if p.is_complex() and self.state_dtype not in (None, *_COMPLEX_OF):
                raise ValueError(
                    f"state_dtype={self.state_dtype} has no complex counterpart for the "
                    f"{p.dtype} parameter of shape {tuple(p.shape)}; use torch.float32 "
                    "or torch.float64"
                )
        group[_APPLIED] = group["ema_beta"] * self._multiplier(self._ema_step)

    def add_param_group(self, param_group: dict[str, Any], base_index: int | None = None) -> None:
        """Add a parameter group to a base optimizer and to the wrapper.

        Args:
            param_group: The group dict, as for ``torch.optim.Optimizer.add_param_group``.
            base_index: Which base optimizer receives it (required with several bases).

        Raises:
            ValueError: If ``base_index`` is missing or out of range with several bases, or a
                parameter is already optimized by the wrapper.
        """
        if not self._ready:  # called by torch.optim.Optimizer.__init__ for the base groups
            super().add_param_group(param_group)
            self._init_group(param_group)
            return
        if base_index is None:
            if len(self._bases) != 1:
                raise ValueError(
                    f"base_index is required with {len(self._bases)} base optimizers, got None"
                )
            base_index = 0
        if not 0 <= base_index < len(self._bases):
            raise ValueError(f"base_index must be in [0, {len(self._bases)}), got {base_index}")
        params = param_group["params"]
        new = [params] if isinstance(params, torch.Tensor) else list(params)
        known = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in known for p in new):
            raise ValueError("some parameters of param_group are already optimized by the wrapper")
        base = self._bases[base_index]
        base.add_param_group(param_group)
        group = base.param_groups[-1]
        for key, value in self._ema_defaults.items():
            group.setdefault(key, value)
        self._init_group(group)
        self.param_groups = [g for b in self._bases for g in b.param_groups]

    # ------------------------------------------------------------- schedule
    def _multiplier(self, step: int) -> float:
        if self.beta_schedule is None:
            return 1.0
        value = float(self.beta_schedule(step))
        if not math.isfinite(value) or value < 0:
            raise ValueError(
                f"beta_schedule({step}) returned {value}; it must return a finite number >= 0"
            )
        return value

    def _buffer_dtype(self, p: torch.Tensor) -> torch.dtype:
        """``state_dtype`` (its complex counterpart for a complex ``p``), else ``p.dtype``."""
        if self.state_dtype is None:
            return p.dtype
        return _COMPLEX_OF[self.state_dtype] if p.is_complex() else self.state_dtype

    def _buffer(self, p: torch.Tensor, name: str) -> torch.Tensor:
        state = self.state[p]
        if name not in state:
            dtype = p.dtype if name == "y" else self._buffer_dtype(p)
            state[name] = torch.zeros_like(p, dtype=dtype, memory_format=torch.preserve_format)
        return state[name]

    @torch.no_grad()
    def init_state(self) -> None:
        """Create the EMA buffer ``m`` (zeros) of every parameter that has none yet.

        A zero buffer changes nothing (``theta = p``); a checkpoint loader that fills the
        state in place (``torch.distributed.checkpoint.load``) needs it to exist.
        """
        for group in self.param_groups:
            for p in group["params"]:
                self._buffer(p, "m")

    # ----------------------------------------------------------------- step
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        """Take one EMA-Nesterov step.

        Args:
            closure: Optional callable that re-evaluates the model and returns the loss. It is
                evaluated once, at the lookahead point :math:`y_t`, before the base step(s)
                (base optimizers that re-evaluate the closure, like LBFGS, are unsupported).

        Returns:
            The closure's loss, or None.

        Raises:
            RuntimeError: In eval mode, or for sparse gradients.
            ValueError: For a group's ``ema_gamma``/``ema_beta`` out of range or a schedule
                returning a negative or non-finite multiplier.
        """
        if not self._training:
            raise RuntimeError(
                "EMANesterov.step() called in eval mode (parameters hold theta); call "
                "opt.train() first"
            )
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if self.skip_nonfinite and not self._grads_finite():
            self.skipped_steps += 1
            return loss
        b_next_mult = self._multiplier(self._ema_step + 1)
        checked = []  # every check runs before any buffer or parameter moves
        for group in self.param_groups:
            gamma = check_unit_interval("ema_gamma", group["ema_gamma"])
            beta = check_nonneg("ema_beta", group["ema_beta"])
            check_sparse(group["params"], "EMANesterov")
            checked.append((group, gamma, beta))
        plans = []
        for group, gamma, beta in checked:
            active = [p for p in group["params"] if p.grad is not None]
            idle = [p for p in group["params"] if p.grad is None and "m" in self.state[p]]
            b_now = float(group[_APPLIED])
            plan = self._pre_step(gamma, b_now, active)
            plans.append((group, gamma, b_now, beta * b_next_mult, plan, idle))
        for base in self._bases:
            base.step()
        for group, gamma, b_now, b_next, plan, idle in plans:
            self._post_step(gamma, b_now, b_next, plan)
            if b_next != b_now:  # re-apply the lookahead on parameters the base skipped
                for p in idle:
                    shift(p, self.state[p]["m"], b_next - b_now)
            group[_APPLIED] = b_next
        self._ema_step += 1
        return loss

    def _grads_finite(self) -> bool:
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        if not grads:
            return True
        norms = torch._foreach_norm([g.float() if g.dtype in _LOW_PRECISION else g for g in grads])
        return bool(torch.isfinite(torch.stack([n.float().cpu() for n in norms])).all())

    def _folds(self, p: torch.Tensor) -> bool:
        """Whether ``p`` keeps one buffer (the lookahead point folded into ``m``) or two."""
        if self.memory_efficient is not None:
            return self.memory_efficient
        return _real_dtype(p.dtype) in _EXACT and (
            self.state_dtype is None or self.state_dtype in _EXACT
        )

    def _buckets(
        self, params: list[torch.Tensor]
    ) -> list[tuple[bool, list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]]:
        """``(folds, ps, ms, ys)`` per mode, device and dtype, so each runs as one kernel.

        The tensors are real views (:func:`_real_view`) of the parameters and buffers;
        ``ys`` (the scratch copies of the two-buffer mode) is empty where the bucket folds.
        """
        buckets: dict[tuple, tuple[bool, list, list, list]] = {}
        for p in params:
            m = _real_view(self._buffer(p, "m"))
            folds = self._folds(p)
            pv = _real_view(p)
            key = (folds, pv.device, pv.dtype, m.dtype)
            bucket = buckets.setdefault(key, (folds, [], [], []))
            bucket[1].append(pv)
            bucket[2].append(m)
            if not folds:
                bucket[3].append(_real_view(self._buffer(p, "y")))
        return list(buckets.values())

    def _pre_step(self, gamma: float, b: float, params: list[torch.Tensor]) -> list[_PlanEntry]:
        """Fold ``y`` into ``m`` or save it; the plan holds what :meth:`_post_step` needs.

        Each bucket's tensors are walked back to front in chunks (``backwards``), so both
        passes meet the base step's sweep in cache.
        """
        plan: list[_PlanEntry] = []
        for folds, ps, ms, ys in self._buckets(params):
            if folds:  # m <- (gamma + (1 - gamma) b) m - (1 - gamma) y_t, completed after
                ps, ms = backwards(ps, ms)
                plan.append((None, ps, ms, fold_in(ps, ms, gamma, b)))
            else:
                ps, ys, ms = backwards(ps, ys, ms)
                save_point(ps, ys)
                plan.append((ys, ps, ms, 1.0))
        return plan

    def _post_step(self, gamma: float, b: float, b_next: float, plan: list[_PlanEntry]) -> None:
        for ys, ps, ms, scale in plan:
            if ys is None:
                fold_out(ps, ms, gamma, b_next, scale)
            else:
                ema_update(ps, ys, ms, gamma, b, b_next)

    @torch.no_grad()
    def sync_lookahead(self) -> None:
        r"""Re-apply the lookahead with the groups' current ``ema_beta`` and the schedule.

        ``step()`` always uses the lookahead the gradient was taken at; call this after
        changing ``ema_beta`` by hand to move the parameters to the new lookahead point now
        (:class:`ema_nesterov.BetaScheduler` does it for you). :math:`\\theta` is unchanged.
        """
        mult = self._multiplier(self._ema_step)
        for group in self.param_groups:
            b_new = check_nonneg("ema_beta", group["ema_beta"]) * mult
            delta = b_new - float(group[_APPLIED])
            if delta != 0.0:
                for p in group["params"]:
                    if "m" not in self.state[p]:
                        continue
                    if self._training:
                        shift(p, self.state[p]["m"], delta)
                    elif p in self._eval_backup:  # eval mode: move the stored lookahead point
                        shift(self._eval_backup[p], self.state[p]["m"], delta)
            group[_APPLIED] = b_new

    # ------------------------------------------------------------ eval/train
    @torch.no_grad()
    def theta(self, p: torch.Tensor) -> torch.Tensor:
        r"""The base iterate :math:`\theta` of parameter ``p``, as a new tensor.

        ``p - beta_applied * m`` in training mode, a copy of ``p`` in eval mode (``p`` holds
        theta there); a parameter not stepped yet is its own theta.

        Raises:
            KeyError: If ``p`` is not optimized by this wrapper.
        """
        for group in self.param_groups:
            if any(q is p for q in group["params"]):
                out = p.detach().clone()
                m = self.state[p].get("m")
                b = float(group[_APPLIED])
                if self._training and m is not None and b != 0.0:
                    shift(out, m, -b)
                return out
        raise KeyError("the tensor is not a parameter of this EMANesterov")

    def _with_m(self) -> list[tuple[torch.Tensor, torch.Tensor, float]]:
        return [
            (p, self.state[p]["m"], float(g[_APPLIED]))
            for g in self.param_groups
            for p in g["params"]
            if "m" in self.state[p]
        ]

    @torch.no_grad()
    def eval(self) -> EMANesterov:
        r"""Move the parameters to :math:`\\theta` (for evaluation or export); idempotent.

        The lookahead point is kept aside, so ``train()`` restores it bit for bit.
        Weights edited while in eval mode are replaced by ``train()``.
        """
        if not self._training:
            return self
        for p, m, b in self._with_m():
            if b != 0.0:
                backup = self.state[p].get("y")
                backup = torch.empty_like(p) if backup is None else backup
                backup.copy_(p)
                self._eval_backup[p] = backup
                shift(p, m, -b)
        self._training = False
        return self

    @torch.no_grad()
    def train(self, mode: bool = True) -> EMANesterov:
        """Move the parameters back to the lookahead point :math:`y`; idempotent.

        Args:
            mode: ``False`` is the same as :meth:`eval` (``nn.Module.train`` convention).
        """
        if not mode:
            return self.eval()
        if self._training:
            return self
        for p, m, b in self._with_m():
            if p in self._eval_backup:
                p.copy_(self._eval_backup[p])
            elif b != 0.0:  # e.g. a checkpoint loaded in eval mode
                shift(p, m, b)
        self._eval_backup.clear()
        self._training = True
        return self

    @torch.no_grad()
    def finalize(self) -> None:
        r"""Put :math:`\\theta` into the model and set ``ema_beta`` (and the lookahead) to 0.

        Training may continue afterwards; it is then the base optimizer alone.
        """
        if self._training:
            for p, m, b in self._with_m():
                if b != 0.0:
                    shift(p, m, -b)
        self._eval_backup.clear()
        self._training = True
        for group in self.param_groups:
            group["ema_beta"] = 0.0
            group[_APPLIED] = 0.0

    # ------------------------------------------------------------ checkpoint
    def _all_params(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def state_dict(self) -> dict[str, Any]:
        """Return ``{"base": [base.state_dict(), ...], "ema": {...}}`` (tensors not copied)."""
        params = self._all_params()
        return {
            "base": [b.state_dict() for b in self._bases],
            "ema": {
                "step": self._ema_step,
                "skipped_steps": self.skipped_steps,
                "training": self._training,
                "state": {
                    i: {"m": self.state[p]["m"]}
                    for i, p in enumerate(params)
                    if "m" in self.state[p]
                },
                "beta_applied": [float(g[_APPLIED]) for g in self.param_groups],
                "config": {
                    "memory_efficient": self.memory_efficient,
                    "n_params": len(params),
                    "shapes": [list(p.shape) for p in params],
                    "base_classes": [type(b).__name__ for b in self._bases],
                },
            },
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state dict produced by :meth:`state_dict` of a matching wrapper.

        Raises:
            ValueError: If the structure (a truncated checkpoint names its missing keys), the
                parameter count or shapes, or the base optimizer classes differ.
        """
        if not isinstance(state_dict, dict) or set(state_dict) != {"base", "ema"}:
            raise ValueError("state_dict must have exactly the keys 'base' and 'ema'")
        ema = state_dict["ema"]
        _require_keys(ema, _EMA_KEYS, "state_dict['ema']")
        cfg = ema["config"]
        _require_keys(cfg, _CONFIG_KEYS, "state_dict['ema']['config']")
        classes = [type(b).__name__ for b in self._bases]
        if cfg["base_classes"] != classes or len(state_dict["base"]) != len(self._bases):
            raise ValueError(
                f"state_dict has base optimizers {cfg['base_classes']}, this wrapper {classes}"
            )
        params = self._all_params()
        if cfg["n_params"] != len(params):
            raise ValueError(
                f"state_dict has {cfg['n_params']} parameters, this wrapper {len(params)}"
            )
        for i, (shape, p) in enumerate(zip(cfg["shapes"], params, strict=True)):
            if list(shape) != list(p.shape):
                raise ValueError(
                    f"parameter {i} has shape {tuple(shape)} in state_dict, {tuple(p.shape)} here"
                )
        for base, sd in zip(self._bases, state_dict["base"], strict=True):
            base.load_state_dict(sd)
        self.param_groups = [g for b in self._bases for g in b.param_groups]
        self.state = defaultdict(dict)
        if len(ema["beta_applied"]) != len(self.param_groups):
            raise ValueError(
                f"state_dict has {len(ema['beta_applied'])} parameter groups, this wrapper "
                f"{len(self.param_groups)}"
            )
        for i, p in enumerate(params):
            saved = ema["state"].get(i)
            if saved is not None:
                if "m" not in saved or tuple(saved["m"].shape) != tuple(p.shape):
                    raise ValueError(
                        f"state_dict['ema']['state'][{i}] must hold 'm' of shape {tuple(p.shape)}"
                    )
                self.state[p]["m"] = saved["m"].to(
                    device=p.device, dtype=self._buffer_dtype(p), copy=True
                )
        for group, b in zip(self.param_groups, ema["beta_applied"], strict=True):
            group[_APPLIED] = float(b)
        self._ema_step = int(ema["step"])
        self.skipped_steps = int(ema.get("skipped_steps", 0))  # absent before 0.2
        self._training = bool(ema["training"])
        self._eval_backup.clear()

    def __repr__(self) -> str:
        group = self.param_groups[0]
        bases = ",\n".join("  " + repr(b).replace("\n", "\n  ") for b in self._bases)
        return (
            f"{type(self).__name__}(gamma={group['ema_gamma']}, beta={group['ema_beta']}, "
            f"memory_efficient={self.memory_efficient}, step={self._ema_step},\n{bases}\n)"
        )
