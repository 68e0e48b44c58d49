"""Shared machinery of every zeroth-order optimizer in this package.

A step is built from *directions*: a function ``direction(index, param) -> xi`` that
regenerates the perturbation of one tensor from integer seeds (through ``methodkit.zo``),
so no direction is ever stored. ``_probe`` evaluates the closure at ``theta + eps xi`` and
``theta - eps xi`` (MeZO order ``+eps, -2 eps``), restoring theta if the closure raises;
``_apply`` adds ``coeff * xi`` tensor by tensor (one temporary the size of the largest tensor).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from methodkit import zo

Direction = Callable[[int, torch.Tensor], torch.Tensor]
Entry = tuple[int, dict[str, Any], torch.Tensor]
_NOISE = ("gaussian", "rademacher")


def check_positive(name: str, value: float, allow_zero: bool = False) -> float:
    """Return ``float(value)`` or raise ValueError naming ``name`` if it is not > 0 (>= 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
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

    Subclasses implement ``_zo_step(closure) -> float`` using ``_probe`` and ``_apply``, and
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
        """Evaluate ``f(theta + eps xi)`` and ``f(theta - eps xi)``; leave theta at ``-eps``.

        If the closure raises (or returns a bad value) theta is restored before re-raising.
        """
        offset = 0.0
        try:
            self._apply(direction, lambda g: g["eps"])
            offset = 1.0
            f_plus = self._call(closure)
            self._apply(direction, lambda g: -2.0 * g["eps"])
            offset = -1.0
            f_minus = self._call(closure)
        except BaseException:
            if offset != 0.0:
                off = offset
                self._apply(direction, lambda g: -off * g["eps"])
            raise
        return f_plus, f_minus

    def _restore_and_update(
        self, direction: Direction, half_diff: float, lr_key: str = "lr"
    ) -> None:
        """From ``theta - eps xi``: restore and take ``theta <- (1 - lr wd) theta - lr c xi``.

        ``c = half_diff / eps`` per group, so per-group eps gives an unbiased estimate. Done in
        one pass: ``theta <- k (theta - eps xi) + (k eps - lr c) xi`` with ``k = 1 - lr wd``.
        """

        def lr_of(g: dict[str, Any]) -> float:
            lr = g.get(lr_key)
            return g["lr"] if lr is None else lr

        def decay(g: dict[str, Any]) -> float:
            return 1.0 - lr_of(g) * g.get("weight_decay", 0.0)

        def coeff(g: dict[str, Any]) -> float:
            return decay(g) * g["eps"] - lr_of(g) * half_diff / g["eps"]

        self._apply(direction, coeff, decay)

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
