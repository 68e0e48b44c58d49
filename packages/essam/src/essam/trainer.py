"""``ESSAMTrainer``: TRL-GRPOTrainer-like loop that fine-tunes a causal LM with :class:`ESSAM`."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from essam._essam import ESSAM

__all__ = ["ESSAMConfig", "ESSAMTrainer"]

logger = logging.getLogger(__name__)

RewardFunc = Callable[..., Sequence[float]]


@dataclass
class ESSAMConfig:
    """Training arguments; names mirror ``trl.GRPOConfig`` where they overlap.

    Attributes:
        learning_rate: alpha of the ES/ESSAM update.
        per_device_train_batch_size: Prompts per iteration (one mini-batch B_t).
        max_completion_length: Tokens generated per completion.
        temperature: 0 = greedy decoding (R is then a deterministic function of the weights).
        max_steps: Iterations of :meth:`ESSAMTrainer.train`.
        logging_steps: Log every this many iterations.
        seed: Seed of the batch order and of the population seeds.
        output_dir: Where :meth:`ESSAMTrainer.save_model` writes by default.
        sigma: Perturbation scale.
        rho: SAM radius (float or ``"auto"``).
        population_size: N.
        variant: ``"standard"``, ``"accelerated"`` or ``"es"``.
        shaping: Fitness shaping (``"zscore"``, ``"centered_ranks"``, ``"none"``).
        sam_refresh: Accelerated variant refresh period (0 = only at step 0).
        antithetic: Mirrored noise pairs.
        weight_decay: Decoupled weight decay.
        reward_weights: Optional weights of the reward functions (default all 1).
        success_threshold: A completion counts as correct in ``evaluate`` when its summed
            reward is >= this value.
        progress: A bar over the iterations of ``train`` and the batches of ``evaluate``:
            ``None`` (default) on a terminal only, ``True`` always, ``False`` never
            (``TQDM_DISABLE=1`` silences it).
        distributed: Split each population's closure calls over the ranks of the initialised
            ``torch.distributed`` world group (see :mod:`essam.distributed`); every rank
            needs the same model, data and config.
    """

    learning_rate: float = 5e-4
    per_device_train_batch_size: int = 8
    max_completion_length: int = 32
    temperature: float = 0.0
    max_steps: int = 10
    logging_steps: int = 1
    seed: int = 0
    output_dir: str = "essam-output"
    sigma: float = 1e-3
    rho: float | str = "auto"
    population_size: int = 30
    variant: str = "standard"
    shaping: str = "zscore"
    sam_refresh: int = 0
    antithetic: bool = False
    weight_decay: float = 0.0
    reward_weights: Sequence[float] | None = None
    success_threshold: float = 1.0
    progress: bool | None = None
    distributed: bool = False

    @property
    def num_iterations(self) -> int:
        """Alias of ``max_steps``."""
        return self.max_steps


class ESSAMTrainer:
    """Reward fine-tuning of a causal LM with :class:`ESSAM` (same vocabulary as ``GRPOTrainer``).

    Each iteration takes ``per_device_train_batch_size`` prompts and calls
    ``ESSAM.step(closure)``; the closure generates completions at the current (perturbed)
    weights with :meth:`generate` and returns the mean summed reward. Reward functions are
    called as TRL calls GRPO reward functions: ``f(prompts=..., completions=..., **columns)``
    where the other dataset columns arrive as keyword lists.

    Args:
        model: A ``transformers`` causal LM (or any module :meth:`generate` can drive).
        reward_funcs: A callable or list of callables returning one float per completion.
        train_dataset: A sequence of dicts with a ``"prompt"`` key (``datasets.Dataset`` works).
        args: An :class:`ESSAMConfig`.
        processing_class: The tokenizer.
        eval_dataset: Optional evaluation dataset.

    Raises:
        TypeError: If a reward function is not callable.
        ValueError: If a dataset row has no ``"prompt"``, a dataset is empty, or no
            ``processing_class`` (tokenizer) is given while :meth:`generate` is not overridden.

    Example:
        Needs a causal LM and its tokenizer (the README's Quickstart builds a tiny one), so the
        lines are not run as a doctest:

        >>> cfg = ESSAMConfig()  # doctest: +SKIP
        >>> trainer = ESSAMTrainer(model, correctness_reward, train, cfg, tok)  # doctest: +SKIP
        >>> history = trainer.train()  # doctest: +SKIP
    """

    def __init__(
        self,
        model: Any,
        reward_funcs: RewardFunc | Sequence[RewardFunc],
        train_dataset: Sequence[dict[str, Any]],
        args: ESSAMConfig | None = None,
        processing_class: Any = None,
        eval_dataset: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        self.model = model
        self.args = args or ESSAMConfig()
        given: list[object] = (
            list(reward_funcs) if isinstance(reward_funcs, list | tuple) else [reward_funcs]
        )
        # return values are checked where they are used (compute_rewards): length, finiteness
        funcs: list[Callable[..., Any]] = []
        for f in given:
            if not callable(f):
                raise TypeError(f"reward_funcs must be callables, got {type(f).__name__}")
            funcs.append(f)
        self.reward_funcs = funcs
        weights = self.args.reward_weights
        self.reward_weights = [1.0] * len(funcs) if weights is None else [float(w) for w in weights]
        if len(self.reward_weights) != len(funcs):
            raise ValueError(
                f"reward_weights has {len(self.reward_weights)} entries for {len(funcs)} functions"
            )
        self.train_dataset = self._check_dataset(train_dataset, "train_dataset")
        self.eval_dataset = (
            None if eval_dataset is None else self._check_dataset(eval_dataset, "eval_dataset")
        )
        if processing_class is None and type(self).generate is ESSAMTrainer.generate:
            raise ValueError(
                "ESSAMTrainer needs processing_class (the model's tokenizer) to generate "
                "completions: pass processing_class=tokenizer, or override "
                "ESSAMTrainer.generate for another backend"
            )
        self.processing_class = processing_class
        a = self.args
        population = None
        if a.distributed:
            from essam.distributed import DistributedPopulation

            population = DistributedPopulation()
        self.optimizer = ESSAM(
            [p for p in model.parameters() if p.requires_grad],
            sigma=a.sigma,
            lr=a.learning_rate,
            rho=a.rho,
            population_size=a.population_size,
            shaping=a.shaping,
            variant=a.variant,
            sam_refresh=a.sam_refresh,
            antithetic=a.antithetic,
            weight_decay=a.weight_decay,
            seed=a.seed,
            population=population,
        )
        self.rollouts = 0

    @staticmethod
    def _check_dataset(ds: Sequence[dict[str, Any]], name: str) -> Sequence[dict[str, Any]]:
        if len(ds) == 0:
            raise ValueError(f"{name} is empty")
        if "prompt" not in ds[0]:
            raise ValueError(f"{name} rows need a 'prompt' key, got keys {sorted(ds[0])}")
        return ds

    def generate(self, prompts: Sequence[str]) -> list[str]:
        """Completions for ``prompts`` at the current weights (override to swap the backend)."""
        from essam.rollout import generate

        return generate(
            self.model,
            self.processing_class,
            prompts,
            max_new_tokens=self.args.max_completion_length,
            temperature=self.args.temperature,
            seed=self.args.seed + self.rollouts,
        )

    def compute_rewards(self, rows: Sequence[dict[str, Any]], completions: list[str]) -> np.ndarray:
        """Summed weighted rewards of ``completions`` (one per row).

        Raises:
            ValueError: If a reward function returns the wrong number of values or NaN.
        """
        prompts = [r["prompt"] for r in rows]
        columns = {k: [r[k] for r in rows] for k in rows[0] if k not in ("prompt", "completion")}
        total = np.zeros(len(rows))
        for f, w in zip(self.reward_funcs, self.reward_weights, strict=True):
            vals = [
                np.nan if v is None else float(v)
                for v in f(prompts=prompts, completions=completions, **columns)
            ]
            if len(vals) != len(rows):
                raise ValueError(
                    f"reward function {getattr(f, '__name__', f)!r} returned {len(vals)} values "
                    f"for {len(rows)} completions"
                )
            arr = np.asarray(vals, dtype=np.float64)
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"reward function {getattr(f, '__name__', f)!r} returned NaN/inf")
            total += w * arr
        return total

    def _batch(self, step: int, rng: np.random.Generator, order: list[int]) -> list[dict]:
        b = self.args.per_device_train_batch_size
        n = len(self.train_dataset)
        while len(order) < b:
            order.extend(rng.permutation(n).tolist())
        idx = [order.pop(0) for _ in range(b)]
        return [self.train_dataset[i] for i in idx]

    def train(self) -> list[dict[str, Any]]:
        """Run ``args.max_steps`` iterations; returns one history dict per iteration."""
        from methodkit import progress

        rng = np.random.default_rng(self.args.seed)
        order: list[int] = []
        history = []
        steps = self.args.max_steps
        for step in progress(range(steps), self.args.progress, desc="essam", total=steps):
            rows = self._batch(step, rng, order)
            prompts = [r["prompt"] for r in rows]

            def closure(rows: list[dict] = rows, prompts: list[str] = prompts) -> float:
                self.rollouts += len(prompts)
                return float(self.compute_rewards(rows, self.generate(prompts)).mean())

            info = self.optimizer.step(closure)
            rec = {
                "step": step,
                "reward": info.mean_reward,
                "ascent_norm": info.ascent_norm,
                "rollouts": self.rollouts,
            }
            history.append(rec)
            if self.args.logging_steps and step % self.args.logging_steps == 0:
                logger.info("step %d reward %.4f rollouts %d", step, rec["reward"], self.rollouts)
        return history

    @torch.no_grad()
    def evaluate(
        self, dataset: Sequence[dict[str, Any]] | None = None, batch_size: int = 64
    ) -> dict[str, float]:
        """Evaluate at the current weights: ``{"reward": mean, "accuracy": frac}``.

        Raises:
            ValueError: If no dataset is given and no ``eval_dataset`` was set.
        """
        ds = dataset if dataset is not None else self.eval_dataset
        if ds is None:
            raise ValueError("evaluate needs a dataset (or eval_dataset at construction)")
        ds = self._check_dataset(ds, "dataset")
        from methodkit import progress

        rewards = []
        starts = range(0, len(ds), batch_size)
        bar = progress(starts, self.args.progress, desc="essam evaluate", total=len(starts))
        for i in bar:
            rows = [ds[j] for j in range(i, min(i + batch_size, len(ds)))]
            rewards.append(self.compute_rewards(rows, self.generate([r["prompt"] for r in rows])))
        r = np.concatenate(rewards)
        return {
            "reward": float(r.mean()),
            "accuracy": float(np.mean(r >= self.args.success_threshold)),
        }

    def save_model(self, path: str | os.PathLike[str] | None = None) -> str:
        """Save with ``save_pretrained`` when the model has it, else ``torch.save(state_dict)``."""
        out = str(path if path is not None else self.args.output_dir)
        if hasattr(self.model, "save_pretrained"):
            self.model.save_pretrained(out)
            if self.processing_class is not None and hasattr(
                self.processing_class, "save_pretrained"
            ):
                self.processing_class.save_pretrained(out)
        else:
            os.makedirs(out, exist_ok=True)
            torch.save(self.model.state_dict(), os.path.join(out, "model.pt"))
        return out
