"""GRPO with TRL semantics for any captioning policy (the package's trainer never imports trl).

The loss formulas are the same as the ``essam`` package's minimal GRPO baseline; the core
package hosts no GRPO module yet, so this is the second copy (see the README).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from eva_cap._validation import check_weights
from eva_cap.policy import TrainablePolicy, repeat_columns
from methodkit.checks import check_int, check_real

__all__ = [
    "AGGREGATIONS",
    "LOSS_TYPES",
    "SCALE_REWARDS",
    "GRPOConfig",
    "GRPOTrainer",
    "group_advantages",
    "grpo_token_loss",
]

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
SCALE_REWARDS = ("group", "batch", "none")
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")
STD_EPS = 1e-4  # TRL's epsilon in A = (r - mean) / (std + 1e-4)


@dataclass
class GRPOConfig:
    """GRPO hyper-parameters; names follow ``trl.GRPOConfig``.

    ``reward_weights`` may be negative (a penalty, as in TRL) but must be finite.

    Raises:
        ValueError: On ``num_generations < 2``, ``epsilon <= 0``, ``epsilon_high <= 0``,
            ``beta < 0``, ``temperature <= 0``, ``learning_rate <= 0``,
            ``max_grad_norm <= 0``, ``num_iterations < 1``, ``max_completion_length < 1``, a
            NaN or infinite number, or an unknown ``loss_type`` / ``scale_rewards`` /
            ``multi_objective_aggregation``.
        TypeError: On a count that is not an int or a number that is not real.
    """

    num_generations: int = 8
    beta: float = 0.04
    epsilon: float = 0.2
    epsilon_high: float | None = None  # None: = epsilon
    loss_type: str = "dapo"
    scale_rewards: str = "group"
    temperature: float = 1.0
    max_completion_length: int = 40
    num_iterations: int = 1
    reward_weights: Sequence[float] | None = None
    multi_objective_aggregation: str = "sum_then_normalize"
    learning_rate: float = 1e-4
    max_grad_norm: float | None = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("num_generations", "num_iterations", "max_completion_length", "seed"):
            check_int(name, getattr(self, name), low=0)
        for name in ("beta", "epsilon", "temperature", "learning_rate"):
            check_real(name, getattr(self, name))  # finite first: NaN passes every comparison
        if self.epsilon_high is not None:
            check_real("epsilon_high", self.epsilon_high)
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.max_grad_norm is not None:
            check_real("max_grad_norm", self.max_grad_norm, 0.0, low_open=True)
        if self.reward_weights is not None:
            n = len(self.reward_weights) if hasattr(self.reward_weights, "__len__") else -1
            check_weights("reward_weights", self.reward_weights, n, nonnegative=False)
        if self.num_generations < 2:
            raise ValueError(f"num_generations must be >= 2 (GRPO needs a group), "
                             f"got {self.num_generations}")  # fmt: skip
        if self.epsilon_high is None:
            self.epsilon_high = self.epsilon
        if self.epsilon <= 0 or self.epsilon_high <= 0:
            raise ValueError(f"epsilon and epsilon_high must be > 0, got {self.epsilon}, "
                             f"{self.epsilon_high}")  # fmt: skip
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0, got {self.beta}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.num_iterations < 1 or self.max_completion_length < 1:
            raise ValueError("num_iterations and max_completion_length must be >= 1, got "
                             f"{self.num_iterations}, {self.max_completion_length}")  # fmt: skip
        for name, allowed in (("loss_type", LOSS_TYPES), ("scale_rewards", SCALE_REWARDS),
                              ("multi_objective_aggregation", AGGREGATIONS)):  # fmt: skip
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")


def group_advantages(rewards: Any, G: int, scale: str = "group") -> np.ndarray:
    """TRL's group-relative advantages ``A_i = (r_i - mean_group r) / (std + 1e-4)``.

    ``std`` is Bessel-corrected over the group (``scale="group"``) or the whole batch
    (``"batch"``); ``"none"`` skips the division. NaN rewards are ignored in the statistics
    and get advantage 0.

    Args:
        rewards: ``[B * G]`` rewards, group-major (``G`` consecutive entries per prompt).
        G: Group size (>= 2).
        scale: ``"group"``, ``"batch"`` or ``"none"``.

    Raises:
        TypeError: If ``G`` is not an int.
        ValueError: On ``G < 2``, no rewards, an infinite reward, a length not divisible by
            ``G`` or an unknown ``scale``.
    """
    r = np.asarray(rewards, dtype=np.float64)
    check_int("G", G, low=0)
    if r.size == 0:
        raise ValueError("rewards is empty")
    if np.isinf(r).any():
        raise ValueError("rewards contain infinite values (NaN marks a missing reward)")
    if G < 2:
        raise ValueError(f"G must be >= 2 (GRPO needs a group), got {G}")
    if r.ndim != 1 or r.size % G:
        raise ValueError(f"rewards must be 1-D with a length divisible by G={G}, "
                         f"got shape {r.shape}")  # fmt: skip
    if scale not in SCALE_REWARDS:
        raise ValueError(f"scale must be one of {SCALE_REWARDS}, got {scale!r}")
    g = r.reshape(-1, G)
    with np.errstate(invalid="ignore", divide="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(g, axis=1, keepdims=True)
            adv = g - mean
            if scale == "group":
                adv = adv / (np.nanstd(g, axis=1, ddof=1, keepdims=True) + STD_EPS)
            elif scale == "batch":
                adv = adv / (np.nanstd(r, ddof=1) + STD_EPS)
    return np.nan_to_num(adv.reshape(-1), nan=0.0)


def grpo_token_loss(
    logp: torch.Tensor,
    logp_old: torch.Tensor,
    logp_ref: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: GRPOConfig,
) -> tuple[torch.Tensor, dict[str, float]]:
    r"""The clipped GRPO surrogate with the k3 KL penalty, aggregated per ``cfg.loss_type``.

    .. math::
        \rho = e^{\ell - \ell_{old}},\quad
        l_t = -\min(\rho A_i, \mathrm{clip}(\rho, 1-\epsilon, 1+\epsilon_{high}) A_i)
              + \beta\,(e^{\ell_{ref}-\ell} - (\ell_{ref}-\ell) - 1)

    ``grpo``: mean over tokens per sequence, then over sequences; ``bnpo`` and ``dapo``: sum
    over all tokens / number of tokens (one process: the same); ``dr_grpo``: sum /
    (B * max_completion_length).

    Args:
        logp: ``[N, T]`` token log-probs under the policy (with grad).
        logp_old: ``[N, T]`` under the sampling policy (detached).
        logp_ref: ``[N, T]`` under the reference, or None when ``cfg.beta == 0``.
        advantages: ``[N]``.
        mask: ``[N, T]`` completion mask (1 up to and including EOS).
        cfg: The configuration.

    Returns:
        The scalar loss and stats ``kl`` (mean k3 per token), ``clip_ratio``.

    Raises:
        ValueError: On mismatched shapes or a missing ``logp_ref`` with ``beta > 0``.
    """
    if logp.shape != mask.shape or logp_old.shape != mask.shape:
        raise ValueError(f"logp {tuple(logp.shape)}, logp_old {tuple(logp_old.shape)} and mask "
                         f"{tuple(mask.shape)} must have the same shape")  # fmt: skip
    if advantages.shape != (logp.shape[0],):
        raise ValueError(f"advantages must have shape ({logp.shape[0]},) (one per sequence), "
                         f"got {tuple(advantages.shape)}")  # fmt: skip
    if logp_ref is not None and logp_ref.shape != mask.shape:
        raise ValueError(f"logp_ref {tuple(logp_ref.shape)} and mask {tuple(mask.shape)} must "
                         "have the same shape")  # fmt: skip
    m = mask.to(logp.dtype)
    a = advantages.to(logp.dtype)[:, None]
    rho = torch.exp(logp - logp_old)
    eps_hi = cfg.epsilon_high if cfg.epsilon_high is not None else cfg.epsilon
    surrogate = torch.min(rho * a, torch.clamp(rho, 1 - cfg.epsilon, 1 + eps_hi) * a)
    per_token = -surrogate
    kl = torch.zeros_like(logp)
    if cfg.beta > 0:
        if logp_ref is None:
            raise ValueError("logp_ref is required when beta > 0")
        d = logp_ref - logp
        kl = torch.exp(d) - d - 1  # k3 estimator of KL(pi || pi_ref), >= 0
        per_token = per_token + cfg.beta * kl
    if cfg.loss_type == "grpo":
        loss = ((per_token * m).sum(1) / m.sum(1).clamp(min=1)).mean()
    elif cfg.loss_type in ("bnpo", "dapo"):
        loss = (per_token * m).sum() / m.sum().clamp(min=1)
    else:  # dr_grpo
        loss = (per_token * m).sum() / (logp.shape[0] * cfg.max_completion_length)
    with torch.no_grad():
        clipped = ((rho < 1 - cfg.epsilon) & (a < 0)) | ((rho > 1 + eps_hi) & (a > 0))
        n_tok = m.sum().clamp(min=1)
        stats = {
            "kl": float((kl * m).sum() / n_tok),
            "clip_ratio": float((clipped.to(m.dtype) * m).sum() / n_tok),
        }
    return loss, stats


RewardFunc = Callable[..., Any]


def _as_array(out: Any, n: int) -> tuple[np.ndarray, dict[str, float]]:
    """A reward callable's output (list with None, array, or {"reward": ..., logs}) as [n]."""
    logs: dict[str, float] = {}
    if isinstance(out, Mapping):
        logs = {k: float(np.nanmean(np.asarray(v, float))) for k, v in out.items() if k != "reward"}
        out = out["reward"]
    arr = np.array([np.nan if v is None else float(v) for v in out], dtype=np.float64)
    if arr.shape != (n,):
        raise ValueError(f"a reward function returned {arr.shape[0]} values for {n} completions")
    return arr, logs


def _callables(funcs: Iterable[object]) -> list[RewardFunc]:
    """``funcs`` as a list, each checked to be callable (``TypeError`` names the first not)."""
    out: list[RewardFunc] = []
    for f in funcs:
        if not callable(f):
            raise TypeError(f"reward and metric functions must be callable, got {f!r}")
        out.append(f)
    return out


class GRPOTrainer:
    """Model-agnostic GRPO (DeepSeekMath; TRL semantics) for a :class:`CaptionPolicy`.

    One :meth:`step` per batch of B prompts: sample G completions each from pi_old
    (temperature ``cfg.temperature``), score them with every reward callable ``f(prompts=None,
    completions=..., **columns)`` (columns of the batch repeated G times, as TRL passes them),
    combine them with ``cfg.reward_weights`` (``sum_then_normalize``: weighted nansum, then
    :func:`group_advantages`; ``normalize_then_sum``: per-reward group advantages, then their
    weighted sum), then ``cfg.num_iterations`` gradient steps on :func:`grpo_token_loss`.

    Args:
        policy: The trained policy (an ``nn.Module`` implementing :class:`CaptionPolicy`).
        ref_policy: The frozen reference (default: a frozen copy of ``policy`` when beta > 0).
        reward_fn: One reward callable or a list (TRL's ``reward_funcs``).
        cfg: The configuration.
        optimizer: Default AdamW at ``cfg.learning_rate``.
        metric_funcs: Callables scored for logging only (e.g. the reward components).

    Raises:
        ValueError: If ``cfg.reward_weights`` does not have one weight per reward callable.
        TypeError: If a reward or metric function is not callable or ``cfg`` is not a
            :class:`GRPOConfig`.
    """

    def __init__(
        self,
        policy: TrainablePolicy,
        ref_policy: TrainablePolicy | None,
        reward_fn: RewardFunc | Sequence[RewardFunc],
        cfg: GRPOConfig | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        metric_funcs: Sequence[RewardFunc] = (),
    ) -> None:
        self.cfg = cfg if cfg is not None else GRPOConfig()
        if not isinstance(self.cfg, GRPOConfig):
            raise TypeError(f"cfg must be a GRPOConfig, got {type(self.cfg).__name__}")
        funcs = list(reward_fn) if isinstance(reward_fn, list | tuple) else [reward_fn]
        self.reward_funcs = _callables(funcs)
        metric = _callables(metric_funcs)
        w = self.cfg.reward_weights
        self.weights = np.ones(len(self.reward_funcs)) if w is None else np.asarray(w, float)
        if self.weights.shape != (len(self.reward_funcs),):
            raise ValueError(f"reward_weights has {self.weights.size} entries for "
                             f"{len(self.reward_funcs)} reward functions")  # fmt: skip
        self.policy = policy
        if ref_policy is None and self.cfg.beta > 0:
            ref_policy = copy.deepcopy(policy)
        if ref_policy is not None:
            for p in ref_policy.parameters():
                p.requires_grad_(False)
        self.ref_policy = ref_policy
        self.optimizer = optimizer or torch.optim.AdamW(
            policy.parameters(),
            lr=self.cfg.learning_rate,
        )
        self.metric_funcs = metric
        self.generator = torch.Generator().manual_seed(int(self.cfg.seed))
        self.steps = 0

    def _score(self, completions: list[str], columns: dict[str, list]) -> tuple[np.ndarray, dict]:
        n = len(completions)
        per, logs = [], {}
        for f in self.reward_funcs:
            arr, extra = _as_array(f(prompts=None, completions=completions, **columns), n)
            per.append(arr)
            logs[f"reward/{getattr(f, '__name__', type(f).__name__)}"] = float(np.nanmean(arr))
            logs.update(extra)
        for f in self.metric_funcs:
            arr, _ = _as_array(f(prompts=None, completions=completions, **columns), n)
            logs[f"metric/{getattr(f, '__name__', type(f).__name__)}"] = float(np.nanmean(arr))
        return np.stack(per, axis=1), logs

    def _advantages(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        G, scale = self.cfg.num_generations, self.cfg.scale_rewards
        total = np.nansum(r * self.weights, axis=1)
        if self.cfg.multi_objective_aggregation == "sum_then_normalize":
            adv = group_advantages(total, G, scale)
        else:
            adv = sum(w * group_advantages(r[:, k], G, scale) for k, w in enumerate(self.weights))
        return np.asarray(adv), total

    def step(self, batch: Mapping[str, Any]) -> dict[str, float]:
        """One GRPO iteration on a batch of B prompts; returns the step's logs."""
        cfg, G = self.cfg, self.cfg.num_generations
        was_training = self.policy.training
        self.policy.eval()
        with torch.no_grad():
            tokens, mask = self.policy.sample(
                batch, G, cfg.max_completion_length, cfg.temperature, self.generator
            )
        completions = self.policy.decode(tokens)
        r, logs = self._score(completions, repeat_columns(batch, G))
        adv_np, total = self._advantages(r)
        adv = torch.as_tensor(adv_np, dtype=torch.float32, device=tokens.device)
        with torch.no_grad():
            old = None
            if cfg.num_iterations > 1:
                old = self.policy.token_logprobs(batch, tokens, cfg.temperature)
            ref = None
            if cfg.beta > 0:
                assert self.ref_policy is not None  # __init__ sets one whenever beta > 0
                ref = self.ref_policy.token_logprobs(batch, tokens, cfg.temperature)
        self.policy.train(was_training)
        stats: dict[str, float] = {}
        for _ in range(cfg.num_iterations):
            logp = self.policy.token_logprobs(batch, tokens, cfg.temperature)
            loss, stats = grpo_token_loss(
                logp, logp.detach() if old is None else old, ref, adv, mask, cfg
            )
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(
                    self.policy.parameters(),
                    cfg.max_grad_norm,
                )
            self.optimizer.step()
        self.steps += 1
        groups = total.reshape(-1, G)
        logs.update(
            loss=float(loss.detach()),
            reward=float(np.nanmean(total)),
            zero_std_fraction=float(np.mean(np.nanstd(groups, axis=1) == 0)),
            completion_length=float(mask.sum(1).float().mean()),
            **stats,
        )
        return logs
