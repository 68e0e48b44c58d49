"""``MinimalGRPO``: a self-contained group-relative policy-gradient trainer in pure torch."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from essam.rollout import generate

__all__ = ["MinimalGRPO"]


class MinimalGRPO:
    r"""Group Relative Policy Optimization (Shao et al. 2024), minimal and offline.

    Per iteration, for every prompt q of the batch: sample G completions
    :math:`o_1..o_G` (temperature sampling), rewards :math:`r_j`, advantages
    :math:`A_j = (r_j - \mathrm{mean}_g r)/(\mathrm{std}_g r + 10^{-4})` shared by all tokens of
    :math:`o_j`; then ``num_inner`` AdamW steps on

    .. math::
        L = -\frac{1}{\sum |o_j|}\sum_{j,t} \min(\rho_{j,t} A_j,
        \mathrm{clip}(\rho_{j,t}, 1-\epsilon, 1+\epsilon) A_j) + \beta\,
        \mathrm{KL}_{k3}(\pi_\theta \| \pi_{ref})

    with :math:`\rho = \pi_\theta/\pi_{old}` per token, :math:`\epsilon = 0.2` and the k3
    estimator :math:`e^{\ell_{ref}-\ell} - (\ell_{ref}-\ell) - 1`. With ``beta > 0`` a frozen
    reference copy of the model is kept (the memory GRPO pays and ESSAM does not). The model
    runs in eval mode (no dropout) for sampling and for the loss, as TRL's default.
    Completions are re-tokenized as prompt + completion + EOS (exact for the character
    tokenizer of :mod:`essam.tasks.arithmetic`).

    Args:
        model: A ``transformers`` causal LM (trained in place).
        tokenizer: Its tokenizer.
        reward_funcs: TRL-style reward callable(s) ``f(prompts=, completions=, **columns)``.
        num_generations: G (>= 2).
        learning_rate: AdamW learning rate.
        beta: KL coefficient (0 = no reference model).
        epsilon: Clip range.
        num_inner: Gradient steps per batch of rollouts.
        max_completion_length: Tokens per completion.
        temperature: Sampling temperature (> 0).
        seed: Sampling seed.

    Raises:
        ValueError: On ``num_generations`` < 2, ``temperature`` <= 0 or negative ``beta``.
        TypeError: If ``tokenizer`` is ``None`` or a reward function is not callable.

    Example:
        >>> grpo = MinimalGRPO(model, tok, correctness_reward, num_generations=8)  # doctest: +SKIP
        >>> grpo.step(rows)  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        reward_funcs: Callable[..., Sequence[float]] | Sequence[Callable[..., Sequence[float]]],
        *,
        num_generations: int = 8,
        learning_rate: float = 1e-4,
        beta: float = 0.04,
        epsilon: float = 0.2,
        num_inner: int = 1,
        max_completion_length: int = 32,
        temperature: float = 1.0,
        seed: int = 0,
    ) -> None:
        if tokenizer is None:
            raise TypeError("MinimalGRPO needs the model's tokenizer, got tokenizer=None")
        if num_generations < 2:
            raise ValueError(f"num_generations must be >= 2, got {num_generations}")
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if beta < 0:
            raise ValueError(f"beta must be >= 0, got {beta}")
        self.model = model
        self.tokenizer = tokenizer
        given: list[object] = (
            list(reward_funcs) if isinstance(reward_funcs, list | tuple) else [reward_funcs]
        )
        # return values are checked where they are used (_rewards: shape)
        self.reward_funcs: list[Callable[..., Any]] = []
        for f in given:
            if not callable(f):
                raise TypeError(f"reward_funcs must be callables, got {type(f).__name__}")
            self.reward_funcs.append(f)
        self.G = num_generations
        self.beta = beta
        self.epsilon = epsilon
        self.num_inner = num_inner
        self.max_completion_length = max_completion_length
        self.temperature = temperature
        self.seed = seed
        self.ref = None
        if beta > 0:
            self.ref = copy.deepcopy(model).eval()
            for p in self.ref.parameters():
                p.requires_grad_(False)
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=learning_rate
        )
        self.rollouts = 0
        self._it = 0

    def _rewards(self, rows: Sequence[dict[str, Any]], completions: list[str]) -> np.ndarray:
        prompts = [r["prompt"] for r in rows]
        columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
        total = np.zeros(len(rows))
        for f in self.reward_funcs:
            vals = np.asarray(
                list(f(prompts=prompts, completions=completions, **columns)), dtype=np.float64
            )
            if vals.shape != (len(rows),):
                raise ValueError(f"reward function returned {vals.shape}, expected {len(rows)}")
            total += vals
        return total

    def _token_logprobs(self, model: Any, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, :-1]
        logp = torch.log_softmax(logits.float(), dim=-1)
        return logp.gather(-1, ids[:, 1:, None]).squeeze(-1)

    def step(self, rows: Sequence[dict[str, Any]]) -> dict[str, float]:
        """One GRPO iteration on a batch of dataset rows; returns mean reward and loss."""
        rep = [r for r in rows for _ in range(self.G)]
        prompts = [r["prompt"] for r in rep]
        completions = generate(
            self.model,
            self.tokenizer,
            prompts,
            self.max_completion_length,
            self.temperature,
            seed=self.seed * 1_000_003 + self._it,
        )
        self._it += 1
        self.rollouts += len(rep)
        r = self._rewards(rep, completions).reshape(len(rows), self.G)
        adv = (r - r.mean(1, keepdims=True)) / (r.std(1, keepdims=True) + 1e-4)
        tok = self.tokenizer
        eos = tok.eos_token or ""
        old_side = tok.padding_side
        tok.padding_side = "left"
        p_len = [len(tok(p)["input_ids"]) for p in prompts]
        enc = tok(
            [p + c + eos for p, c in zip(prompts, completions, strict=True)],
            return_tensors="pt",
            padding=True,
        )
        tok.padding_side = old_side
        device = next(self.model.parameters()).device
        ids, mask = enc["input_ids"].to(device), enc["attention_mask"].to(device)
        lengths = mask.sum(1)
        # completion-token mask over the shifted targets ids[:, 1:]
        T = ids.shape[1]
        col = torch.arange(1, T, device=device)[None, :]
        start = (T - lengths + torch.tensor(p_len, device=device))[:, None]
        cmask = (col >= start).float()
        A = torch.tensor(adv.reshape(-1), dtype=torch.float32, device=device)[:, None]
        with torch.no_grad():
            old = self._token_logprobs(self.model, ids, mask)
            ref = self._token_logprobs(self.ref, ids, mask) if self.ref is not None else None
        # dropout off throughout (as TRL's GRPOConfig(disable_dropout=True)): with dropout the
        # ratio pi/pi_old of a sample is noise even before any update, and the clip acts on it
        self.model.eval()
        loss_val = 0.0
        for _ in range(self.num_inner):
            logp = self._token_logprobs(self.model, ids, mask)
            ratio = torch.exp(logp - old)
            obj = torch.minimum(ratio * A, ratio.clamp(1 - self.epsilon, 1 + self.epsilon) * A)
            per_tok = -obj
            if ref is not None:
                d = ref - logp
                per_tok = per_tok + self.beta * (torch.exp(d) - d - 1)
            loss = (per_tok * cmask).sum() / cmask.sum().clamp(min=1)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            loss_val = float(loss.detach())
        return {"reward": float(r.mean()), "loss": loss_val, "rollouts": float(self.rollouts)}
