"""Shared machinery of every zeroth-order optimizer in this package.

A step is built from *directions*: a function ``direction(index, param) -> xi`` that
regenerates the perturbation of one tensor from integer seeds (through ``methodkit.zo``),
so no direction is ever stored (it returns a fresh tensor the caller may overwrite).
``_probe`` evaluates the closure at ``fl(theta + eps xi)`` and ``fl(theta - eps xi)``;
``_restore_and_update`` then takes the step from the exact ``theta``. Floating-point
addition loses bits, so every probe keeps a sparse record of the entries whose inverse
(``fl(fl(theta + d) - d)``) would not give ``theta`` back bitwise (a few percent of the
entries, freed at the end of the step): theta is restored *bitwise* after a failing closure
and every update starts from the exact theta.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from methodkit import zo

Direction = Callable[[int, torch.Tensor], torch.Tensor]
Entry = tuple[int, dict[str, Any], torch.Tensor]
#: ``(flat indices, exact values, sign)`` of the entries of ``fl(theta + sign d)`` that
#: ``fl(. - sign d)`` does not map back to theta bitwise.
Fixes = tuple[torch.Tensor, torch.Tensor, int]
_NOISE = ("gaussian", "rademacher")


def as_dtype(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` in ``dtype`` (no call at all when it already is: this runs per tensor per pass)."""
    return t if t.dtype == dtype else t.to(dtype)


def check_positive(name: str, value: float, allow_zero: bool = False) -> float:
    """Return ``float(value)`` or raise ValueError if it is not finite and > 0 (>= 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    ok = value >= 0 if allow_zero else value > 0
    if not ok:
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    return float(value)


def check_int(name: str, value: int, low: int) -> int:
    """Return ``value`` or raise if it is not an int >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return value


def check_noise(noise: str) -> str:
    """Return ``noise`` or raise ValueError for an unknown noise kind."""
    if noise not in _NOISE:
        raise ValueError(f"noise must be one of {_NOISE}, got {noise!r}")
    return noise


class ZOOptimizer(torch.optim.Optimizer):
    """Base class: closure contract, forward counting, seeded probes and int/float state.

    Subclasses implement ``_zo_step_impl(closure) -> float`` using ``_probe``, ``_restore``,
    ``_restore_and_update`` and ``_apply``, and
    may extend ``_extra_state`` / ``_load_extra_state`` with ints and floats.
    """

    forwards_per_step = 2

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any], seed: int) -> None:
        check_int("seed", seed, 0)
        for key in ("lr", "eps"):
            if key in defaults:
                check_positive(key, defaults[key])
        super().__init__(params, defaults)
        for group in self.param_groups:
            check_positive("lr (param group)", group["lr"], allow_zero=True)
            check_positive("eps (param group)", group["eps"])
            check_positive("weight_decay", group.get("weight_decay", 0.0), allow_zero=True)
            for p in group["params"]:
                if not torch.is_floating_point(p):
                    # torch itself forbids requires_grad on integer tensors; an integer
                    # tensor cannot be perturbed either, so reject it whatever its flag.
                    raise TypeError(f"parameters must be floating point, got {p.dtype}")
        self.seed = seed
        self._zo_step = 0
        self._forward_passes = 0

    # ------------------------------------------------------------------ bookkeeping
    @property
    def forward_passes(self) -> int:
        """Number of closure calls (forward passes) made so far."""
        return self._forward_passes

    @property
    def steps(self) -> int:
        """Number of completed steps."""
        return self._zo_step

    def _entries(self) -> Iterator[Entry]:
        """``(index, group, param)`` of every trainable tensor; index is global and stable.

        Frozen tensors (``requires_grad=False``) and groups with ``lr == 0`` are skipped, so
        they are never perturbed and stay bitwise unchanged.
        """
        index = 0
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad and group["lr"] != 0:
                    yield index, group, p
                index += 1

    def _step_seed(self, step: int | None = None) -> int:
        return zo.derive_seed(self.seed, 0, self._zo_step if step is None else step)

    def _call(self, closure: Callable[[], Any]) -> float:
        self._forward_passes += 1
        with torch.no_grad():
            value = closure()
        return zo.as_scalar(value, "closure")

    @staticmethod
    def _check_closure(closure: Callable[[], Any] | None) -> Callable[[], Any]:
        if closure is None:
            raise TypeError(
                "zeroth-order optimizers need a closure: step(closure) with closure() returning "
                "the loss from forward passes only"
            )
        if not callable(closure):
            raise TypeError(f"closure must be callable, got {type(closure).__name__}")
        return closure

    # ------------------------------------------------------------------ primitives
    @torch.no_grad()
    def _apply(
        self,
        direction: Direction,
        coeff: Callable[[dict[str, Any]], float],
        decay: Callable[[dict[str, Any]], float] | None = None,
    ) -> None:
        """``theta_i <- decay(g) * theta_i + coeff(g) * xi_i`` for every trainable tensor."""
        for index, group, p in self._entries():
            xi = direction(index, p)
            if decay is not None:
                factor = decay(group)
                if factor != 1.0:
                    p.mul_(factor)
            p.add_(xi.to(p.dtype), alpha=coeff(group))
            del xi

    def _probe(self, closure: Callable[[], Any], direction: Direction) -> tuple[float, float]:
        """Evaluate ``f(fl(theta + eps xi))`` and ``f(fl(theta - eps xi))``; stay at ``-eps``.

        If the closure raises (or returns a bad value) theta is restored bitwise before
        re-raising. On success ``self._fixes`` holds what :meth:`_restore` needs.
        """
        self._fixes: dict[int, Fixes] = {}
        offset = 0
        try:
            self._shift(direction, +1)
            offset = 1
            f_plus = self._call(closure)
            self._shift(direction, -1)
            offset = -1
            f_minus = self._call(closure)
        except BaseException:
            if offset:
                self._restore(direction)
            self._fixes = {}
            raise
        return f_plus, f_minus

    @torch.no_grad()
    def _shift(self, direction: Direction, sign: int) -> None:
        """Move every tensor to ``fl(theta + sign d)``, ``d = eps xi``, from theta or (``-1``).

        ``fl(theta + d)``; records the entries that ``fl(. - sign d)`` does not map back to
        theta bitwise (flat indices in row-major order).
        """
        for index, group, p in self._entries():
            d = as_dtype(direction(index, p).mul_(group["eps"]), p.dtype)
            theta = p if sign > 0 else self._exact_theta(index, p, d)
            new = torch.add(theta, d, alpha=sign)
            bad = torch.sub(new, d, alpha=sign).ne_(theta).reshape(-1).nonzero().view(-1)
            bad = bad.to(torch.int32)  # half the bytes of the record
            self._fixes[index] = (bad, theta.reshape(-1)[bad], sign)
            p.copy_(new)
            del d, theta, new

    def _exact_theta(self, index: int, p: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
        """Theta, bitwise, from ``p = fl(theta + sign d)`` and the probe's sparse record."""
        bad, values, sign = self._fixes[index]
        theta = torch.sub(p, d, alpha=sign)
        if bad.numel():
            theta = theta.contiguous()
            theta.view(-1)[bad] = values
        return theta

    @torch.no_grad()
    def _restore(self, direction: Direction) -> None:
        """Back to theta, bitwise, from wherever :meth:`_probe` left each tensor."""
        for index, group, p in self._entries():
            if index in self._fixes:
                d = as_dtype(direction(index, p).mul_(group["eps"]), p.dtype)
                p.copy_(self._exact_theta(index, p, d))
        self._fixes = {}

    @torch.no_grad()
    def _restore_and_update(
        self,
        direction: Direction,
        half_diff: float,
        lr_key: str = "lr",
        on_direction: Callable[[int, dict[str, Any], torch.Tensor, torch.Tensor], None]
        | None = None,
    ) -> None:
        """From ``fl(theta - eps xi)``: ``theta <- (1 - lr wd) theta - lr c xi`` (exact theta).

        ``c = half_diff / eps`` per group, so per-group eps gives an unbiased estimate. Done in
        one pass per tensor; ``on_direction(index, group, param, xi)`` sees each regenerated
        ``xi``.
        """
        for index, group, p in self._entries():
            lr = group.get(lr_key)
            lr = group["lr"] if lr is None else lr
            xi = direction(index, p)
            if on_direction is not None:
                on_direction(index, group, p, xi)
            theta = self._exact_theta(index, p, as_dtype(xi * group["eps"], p.dtype))
            decay = 1.0 - lr * group.get("weight_decay", 0.0)
            if decay != 1.0:
                theta.mul_(decay)
            p.copy_(theta.add_(as_dtype(xi, p.dtype), alpha=-lr * half_diff / group["eps"]))
            del xi, theta
        self._fixes = {}

    # ------------------------------------------------------------------ step / state
    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> torch.Tensor:  # type: ignore[override]
        """Take one zeroth-order step; ``closure()`` returns the loss (forward passes only).

        Returns:
            The mean of the probe losses as a 0-dim tensor.

        Raises:
            TypeError: If no closure is given or it returns a non-scalar.
            ValueError: If it returns NaN or inf (parameters are restored first).
        """
        closure = self._check_closure(closure)
        loss = self._zo_step_impl(closure)
        self._zo_step += 1
        return torch.tensor(loss)

    def _zo_step_impl(self, closure: Callable[[], Any]) -> float:
        """One zeroth-order step of the subclass's method; returns the loss it saw."""
        raise NotImplementedError

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        """Standard optimizer state plus ``"zo"``: seeds and counters (ints and floats)."""
        sd = super().state_dict()
        sd["zo"] = {
            "seed": self.seed,
            "step": self._zo_step,
            "forward_passes": self._forward_passes,
            **self._extra_state(),
        }
        return sd

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state written by :meth:`state_dict` (continues the same trajectory)."""
        sd = dict(state_dict)
        extra = dict(sd.pop("zo", {}))
        super().load_state_dict(sd)
        if extra:
            self.seed = int(extra.pop("seed"))
            self._zo_step = int(extra.pop("step"))
            self._forward_passes = int(extra.pop("forward_passes"))
            self._load_extra_state(extra)
