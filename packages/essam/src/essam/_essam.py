"""The ESSAM optimizer: evolution strategies with a sharpness-aware (SAM) ascent step.

This file mirrors the algorithm box of the method (see :class:`ESSAM`). All noise is
regenerated from integer seeds through :mod:`methodkit.zo`; the optimizer never stores a
parameter-sized tensor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from methodkit import zo

__all__ = ["ESSAM", "ESSAMStepInfo", "shape_rewards"]

_VARIANTS = ("standard", "accelerated", "es")
_SHAPINGS = ("zscore", "centered_ranks", "none")
_NOISES = ("gaussian", "rademacher")
_STATE_KEY = "essam"
# group keys read from ``defaults``: a state dict saved under other values cannot resume this run
_RUN_KEYS = (
    "population_size",
    "shaping",
    "variant",
    "sam_refresh",
    "antithetic",
    "noise",
    "maximize",
)
# phases of derive_seed(seed, phase, step): 0 = ascent population at theta, 1 = update population
_ASCENT, _UPDATE = 0, 1


@dataclass
class ESSAMStepInfo:
    """What one :meth:`ESSAM.step` did.

    Attributes:
        update_rewards: Rewards of the population the update used (at the adversarial point
            for ESSAM, at theta for plain ES).
        ascent_rewards: Rewards of the fresh population at theta that formed the SAM ascent
            direction (``None`` when none was evaluated: plain ES, ``rho=0`` or an accelerated
            step reusing the previous estimate).
        ascent_norm: ``n = ||sum_i c_i eps_i||`` of the ascent estimate (0 when no SAM move).
        rollouts: Closure calls made in this step.
        step: Index of the step (0-based).
    """

    update_rewards: list[float]
    ascent_rewards: list[float] | None = None
    ascent_norm: float = 0.0
    rollouts: int = 0
    step: int = 0

    @property
    def mean_reward(self) -> float:
        """Mean reward of the update population."""
        return float(np.mean(self.update_rewards))


def shape_rewards(rewards: Sequence[float], shaping: str = "zscore") -> np.ndarray:
    """Fitness shaping ``f = shape(r)`` of one population's rewards.

    Args:
        rewards: The N rewards.
        shaping: ``"zscore"``: ``(r - mean r) / (std r + 1e-8)`` with the sample standard
            deviation (``ddof=1``, as ``torch.std`` in the ES-at-scale code);
            ``"centered_ranks"``: average ranks mapped to ``[-0.5, 0.5]``; ``"none"``: ``r``.

    Returns:
        float64 array of shaped fitness values; all-equal rewards give all zeros (except
        ``"none"``).

    Raises:
        ValueError: On an unknown ``shaping`` or fewer than 2 rewards.
    """
    if shaping not in _SHAPINGS:
        raise ValueError(f"shaping must be one of {_SHAPINGS}, got {shaping!r}")
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 1 or r.size < 2:
        raise ValueError(f"rewards must be a 1-D sequence of >= 2 values, got shape {r.shape}")
    if shaping == "none":
        return r.copy()
    if shaping == "zscore":
        return (r - r.mean()) / (r.std(ddof=1) + 1e-8)
    order = np.argsort(r, kind="stable")
    ranks = np.empty_like(r)
    ranks[order] = np.arange(r.size, dtype=np.float64)
    for value in np.unique(r):  # average ranks of ties: equal rewards, equal fitness
        tie = r == value
        ranks[tie] = ranks[tie].mean()
    return ranks / (r.size - 1) - 0.5


class ESSAM(torch.optim.Optimizer):
    r"""Evolution Strategies with Sharpness-Aware Maximization (forward passes only).

    ``step(closure)`` maximises the reward ``R(theta)`` returned by ``closure()`` (evaluated at
    the current in-place weights, with gradients disabled). One standard iteration
    (2N rollouts), with :math:`\varepsilon(s)` Gaussian noise regenerated from seed s:

    1. seeds :math:`s_1..s_N`; :math:`r_i = R(\theta + \sigma\varepsilon(s_i))`;
       :math:`f = \mathrm{shape}(r)`; :math:`c_i = f_i / N`.
    2. :math:`n = \|\sum_i c_i \varepsilon(s_i)\|` (streamed per tensor); no SAM move if n = 0.
    3. adversarial point in place: :math:`\theta \leftarrow \theta - (\rho/n)\sum_i c_i
       \varepsilon(s_i)`.
    4. seeds :math:`s'_1..s'_N`; :math:`r'_i = R(\theta_{adv} + \sigma\varepsilon(s'_i))`;
       :math:`f' = \mathrm{shape}(r')`.
    5. undo step 3 by replaying the same seeds and coefficients with the opposite sign.
    6. :math:`\theta \leftarrow (1-\alpha\lambda)\theta`, then
       :math:`\theta \leftarrow \theta + \alpha \frac{1}{N}\sum_i f'_i \varepsilon(s'_i)`.

    ``variant="accelerated"`` (inferred: the paper only says "nearly 2x faster, same memory")
    skips steps 1-2 and reuses the previous step's update estimate (its seeds and coefficients
    :math:`f'/N`, O(N) scalars) as the ascent direction; a fresh estimate is computed at step 0
    and every ``sam_refresh`` steps (``sam_refresh=0``: only at step 0). ``variant="es"`` is
    plain ES (Qiu et al. 2025): steps 4 and 6 at theta, N rollouts. With ``rho=0`` the
    standard variant skips steps 1-5 and is bitwise identical to ``"es"``.

    Per parameter group: ``lr`` (alpha), ``sigma``, ``rho`` and ``weight_decay``; a group
    with ``lr=0`` is frozen (never perturbed). Parameters with ``requires_grad=False`` are
    skipped. Noise for tensor j under seed s comes from
    ``methodkit.zo.tensor_generator(s, j)`` where j is the tensor's position over all groups.
    Extra memory: one float32 accumulator and one noise tensor the size of the largest
    parameter; ``state_dict()`` holds the step count, the previous estimate's seeds and
    coefficients (accelerated variant) and nothing parameter-sized.

    Args:
        params: Parameters or parameter-group dicts.
        sigma: Perturbation scale (> 0).
        lr: Learning rate alpha (> 0; a group may set 0 to freeze itself).
        rho: SAM radius (>= 0) or ``"auto"`` = ``0.05 * sigma * sqrt(d)``, d = number of
            trainable entries.
        population_size: N (>= 2; even when ``antithetic``).
        shaping: ``"zscore"``, ``"centered_ranks"`` or ``"none"`` (see :func:`shape_rewards`).
        variant: ``"standard"``, ``"accelerated"`` or ``"es"``.
        sam_refresh: Accelerated variant: recompute a fresh ascent estimate every this many
            steps (0 = only at step 0).
        antithetic: Use N/2 mirrored pairs (+eps, -eps).
        weight_decay: lambda of step 6 (>= 0).
        noise: ``"gaussian"`` or ``"rademacher"``.
        seed: Non-negative int; all population seeds derive from it and the step count. It is
            part of ``state_dict()``: ``load_state_dict`` continues the saved run's seed.
        maximize: ``True`` (default): the closure returns a reward to maximise. ``False``: it
            returns a loss to minimise (the reward is its negative).
        population: Where population members are evaluated: ``None`` (this process) or an
            :class:`essam.distributed.DistributedPopulation`, which splits the closure calls
            over the ranks of a ``torch.distributed`` group and exchanges only seeds and scalar
            rewards; the weights and the update stay bitwise those of one process.

    References:
        ESSAM: "Evolution Strategies with Sharpness-Aware Maximization for LLM fine-tuning"
        (NeurIPS 2026 submission). Qiu et al., "Evolution Strategies at Scale: LLM Fine-Tuning
        Beyond Reinforcement Learning", 2025. Foret et al., "Sharpness-Aware Minimization for
        Efficiently Improving Generalization", ICLR 2021.

    Example:
        >>> import torch
        >>> from essam import ESSAM
        >>> w = torch.nn.Parameter(torch.zeros(5))
        >>> opt = ESSAM([w], sigma=0.1, lr=0.05, rho=0.05, population_size=8)
        >>> info = opt.step(lambda: -((w - 1) ** 2).sum())  # reward to maximise
        >>> info.rollouts
        16
    """

    def __init__(
        self,
        params: Iterable[Any],
        *,
        sigma: float = 1e-3,
        lr: float = 5e-4,
        rho: float | str = "auto",
        population_size: int = 30,
        shaping: str = "zscore",
        variant: str = "standard",
        sam_refresh: int = 0,
        antithetic: bool = False,
        weight_decay: float = 0.0,
        noise: str = "gaussian",
        seed: int = 0,
        maximize: bool = True,
        population: Any = None,
    ) -> None:
        _check_positive("sigma", sigma)
        _check_positive("lr", lr)
        _check_rho(rho)
        _check_nonneg("weight_decay", weight_decay)
        if isinstance(population_size, bool) or not isinstance(population_size, int):
            raise TypeError(f"population_size must be an int, got {population_size!r}")
        if population_size < 2:
            raise ValueError(f"population_size must be >= 2, got {population_size}")
        if antithetic and population_size % 2:
            raise ValueError(
                f"population_size must be even with antithetic=True, got {population_size}"
            )
        if variant not in _VARIANTS:
            raise ValueError(f"variant must be one of {_VARIANTS}, got {variant!r}")
        if shaping not in _SHAPINGS:
            raise ValueError(f"shaping must be one of {_SHAPINGS}, got {shaping!r}")
        if noise not in _NOISES:
            raise ValueError(f"noise must be one of {_NOISES}, got {noise!r}")
        if isinstance(sam_refresh, bool) or not isinstance(sam_refresh, int) or sam_refresh < 0:
            raise ValueError(f"sam_refresh must be an int >= 0, got {sam_refresh!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {seed!r}")
        defaults = {
            "lr": lr,
            "sigma": sigma,
            "rho": rho,
            "weight_decay": weight_decay,
            "population_size": population_size,
            "shaping": shaping,
            "variant": variant,
            "sam_refresh": sam_refresh,
            "antithetic": antithetic,
            "noise": noise,
            "seed": seed,
            "maximize": maximize,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            _check_nonneg("lr", group["lr"])
            _check_positive("sigma", group["sigma"])
            _check_rho(group["rho"])
            _check_nonneg("weight_decay", group["weight_decay"])
            for p in group["params"]:
                if p.device.type == "meta":
                    raise ValueError(
                        "parameters on the 'meta' device cannot be perturbed; load weights first"
                    )
        if not self._entries():
            raise ValueError("ESSAM selected no parameter (all have requires_grad=False)")
        self.population = population

    # ------------------------------------------------------------------ helpers
    def _entries(self) -> list[tuple[int, torch.Tensor, dict[str, Any]]]:
        """``(global index, tensor, group)`` of every trainable, non-frozen tensor."""
        out = []
        index = 0
        for group in self.param_groups:
            for p in group["params"]:
                if p.requires_grad and group["lr"] > 0:
                    out.append((index, p, group))
                index += 1
        return out

    @property
    def _essam_state(self) -> dict[str, Any]:
        # torch types ``state`` as keyed by tensors; its state_dict() also packs the one
        # string key kept here (the seeds and coefficients, never a parameter-sized tensor)
        state: dict[Any, Any] = self.state
        if _STATE_KEY not in state:
            state[_STATE_KEY] = {
                "step": 0,
                "seed": self.defaults["seed"],
                "prev_seeds": [],
                "prev_coeffs": [],
            }
        return state[_STATE_KEY]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a saved state; the run continues with the saved seed and step, bit for bit.

        Raises:
            ValueError: If the saved state has no seed (saved by essam 0.1.0) or was saved
                under another population size, shaping, variant, ``sam_refresh``,
                ``antithetic``, noise or ``maximize``: such a resume would silently follow
                another run.
        """
        saved = state_dict.get("state", {}).get(_STATE_KEY)
        if saved is not None and "seed" not in saved:
            raise ValueError(
                "the saved ESSAM state holds no seed (saved by essam 0.1.0): its run cannot "
                "be resumed bit for bit"
            )
        for group in state_dict.get("param_groups", []):
            for key in _RUN_KEYS:
                if key in group and group[key] != self.defaults[key]:
                    raise ValueError(
                        f"the saved state was taken with {key}={group[key]!r}, this optimizer "
                        f"has {key}={self.defaults[key]!r}"
                    )
        super().load_state_dict(state_dict)

    def _noise(self, p: torch.Tensor, seed: int, index: int) -> torch.Tensor:
        gen = zo.tensor_generator(seed, index, p.device)
        return zo.sample(p, gen, self.defaults["noise"])

    def _perturb(self, entries: list, seed: int, sign: float) -> None:
        """theta_j += sign * sigma_g * eps_j(seed), one tensor at a time."""
        for index, p, group in entries:
            z = self._noise(p, seed, index)
            p.add_(z, alpha=sign * group["sigma"])
            del z

    def _combination(
        self, p: torch.Tensor, index: int, seeds: Sequence[int], coeffs: Sequence[float]
    ) -> torch.Tensor:
        acc_dtype = torch.float64 if p.dtype == torch.float64 else torch.float32
        acc = torch.zeros(p.shape, dtype=acc_dtype, device=p.device)
        for s, c in zip(seeds, coeffs, strict=True):
            if c != 0.0:
                acc.add_(self._noise(p, s, index).to(acc_dtype), alpha=float(c))
        return acc

    def _apply(
        self,
        entries: list,
        seeds: Sequence[int],
        coeffs: Sequence[float],
        factors: dict[int, float],
        scale: float,
    ) -> None:
        """theta_j += scale * factor_g * sum_k coeffs[k] eps_j(seeds[k]) (fp32 accumulation)."""
        for index, p, group in entries:
            factor = scale * float(factors[id(group)])
            if factor == 0.0:
                continue
            acc = self._combination(p, index, seeds, coeffs)
            if p.dtype == acc.dtype:
                p.add_(acc, alpha=factor)
            else:
                p.copy_(p.to(acc.dtype).add_(acc, alpha=factor))
            del acc

    def _sq_norm(self, entries: list, seeds: Sequence[int], coeffs: Sequence[float]) -> float:
        total = 0.0
        for index, p, _ in entries:
            acc = self._combination(p, index, seeds, coeffs)
            flat = acc.reshape(-1)
            total += float(torch.dot(flat, flat))  # no float64 copy of acc
            del acc
        return total

    def _members(self, phase: int, step: int, seed: int) -> tuple[list[int], list[float]]:
        """Seeds and signs of one population (antithetic: N/2 seeds, each with +1 and -1)."""
        n = self.defaults["population_size"]
        if self.defaults["antithetic"]:
            base = [zo.derive_seed(seed, phase, step, i) for i in range(n // 2)]
            return [s for s in base for _ in (0, 1)], [1.0, -1.0] * (n // 2)
        return [zo.derive_seed(seed, phase, step, i) for i in range(n)], [1.0] * n

    def _evaluate(
        self, closure: Callable[[], Any], entries: list, seeds: list[int], signs: list[float]
    ) -> list[float]:
        def reward(i: int) -> float:
            with torch.no_grad():
                value = closure()
            r = zo.as_scalar(value, f"closure (population member {i})")
            return r if self.defaults["maximize"] else -r

        def member(i: int, call: bool) -> float | None:
            """Perturb by member i, call the closure if asked, restore (also on errors)."""
            self._perturb(entries, seeds[i], signs[i])
            try:
                return reward(i) if call else None
            finally:
                self._perturb(entries, seeds[i], -signs[i])

        if self.population is None:
            return [member(i, True) for i in range(len(seeds))]  # type: ignore[misc]
        return self.population.evaluate(member, len(seeds))

    def _rho(self, entries: list) -> dict[int, float]:
        d = sum(p.numel() for _, p, _ in entries)
        out = {}
        for _, _, group in entries:
            rho = group["rho"]
            out[id(group)] = 0.05 * group["sigma"] * math.sqrt(d) if rho == "auto" else rho
        return out

    # --------------------------------------------------------------------- step
    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> ESSAMStepInfo:  # type: ignore[override]
        """One ESSAM iteration; ``closure()`` returns the reward at the current weights.

        Returns:
            An :class:`ESSAMStepInfo`.

        Raises:
            TypeError: If ``closure`` is missing or returns a non-scalar.
            ValueError: If the closure returns NaN/inf (the parameters are restored first).
        """
        if closure is None or not callable(closure):
            raise TypeError("ESSAM.step needs a closure returning the reward (forward only)")
        st = self._essam_state
        t, seed = st["step"], st["seed"]
        d = self.defaults
        if self.population is not None:
            self.population.check_agreement(seed, t)
        entries = self._entries()
        n = d["population_size"]
        rhos = self._rho(entries)
        use_sam = d["variant"] != "es" and any(v > 0 for v in rhos.values())
        info = ESSAMStepInfo(update_rewards=[], step=t)

        asc_seeds: list[int] = []
        asc_coeffs: list[float] = []
        if use_sam:
            fresh = d["variant"] == "standard" or t == 0 or not st["prev_seeds"]
            if d["variant"] == "accelerated" and d["sam_refresh"] > 0 and t % d["sam_refresh"] == 0:
                fresh = True
            if fresh:  # steps 1-2 at theta
                seeds, signs = self._members(_ASCENT, t, seed)
                rewards = self._evaluate(closure, entries, seeds, signs)
                info.ascent_rewards = rewards
                info.rollouts += n
                f = shape_rewards(rewards, d["shaping"])
                asc_seeds = seeds
                asc_coeffs = [float(fi * sg / n) for fi, sg in zip(f, signs, strict=True)]
            else:  # accelerated: previous step's estimate
                asc_seeds = list(st["prev_seeds"])
                asc_coeffs = list(st["prev_coeffs"])
            norm = math.sqrt(self._sq_norm(entries, asc_seeds, asc_coeffs))
            info.ascent_norm = norm
            if norm == 0.0:
                use_sam = False
        if use_sam:  # step 3: theta_adv = theta - (rho/n) sum c_i eps_i
            self._apply(entries, asc_seeds, asc_coeffs, rhos, -1.0 / info.ascent_norm)
        try:  # step 4
            seeds, signs = self._members(_UPDATE, t, seed)
            rewards = self._evaluate(closure, entries, seeds, signs)
        finally:
            if use_sam:  # step 5: undo by replaying the same seeds/coefficients
                self._apply(entries, asc_seeds, asc_coeffs, rhos, 1.0 / info.ascent_norm)
        info.update_rewards = rewards
        info.rollouts += n
        f = shape_rewards(rewards, d["shaping"])
        coeffs = [float(fi * sg / n) for fi, sg in zip(f, signs, strict=True)]
        # step 6: weight decay, then theta += alpha * (1/N) sum f'_i eps'_i
        for _, p, group in entries:
            if group["weight_decay"] > 0:
                p.mul_(1.0 - group["lr"] * group["weight_decay"])
        lrs = {id(group): float(group["lr"]) for _, _, group in entries}
        self._apply(entries, seeds, coeffs, lrs, 1.0)
        # a new dict each step: a state_dict() taken earlier is not mutated afterwards
        state: dict[Any, Any] = self.state
        state[_STATE_KEY] = {
            "step": t + 1,
            "seed": seed,
            "prev_seeds": [int(s) for s in seeds],
            "prev_coeffs": coeffs,
        }
        return info


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{name} must be a number > 0, got {value!r}")


def _check_nonneg(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")


def _check_rho(rho: Any) -> None:
    if rho == "auto":
        return
    if isinstance(rho, bool) or not isinstance(rho, int | float) or not rho >= 0:
        raise ValueError(f"rho must be 'auto' or a number >= 0, got {rho!r}")
