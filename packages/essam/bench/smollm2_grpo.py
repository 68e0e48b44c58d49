"""The GRPO peers of the SmolLM2 benchmark: TRL's ``GRPOTrainer`` and ``MinimalGRPO``.

Both train the same parameter subset (whatever has ``requires_grad``) on the same prompts and
partial-credit reward as the ES family, for the same wall-time budget ``cfg["seconds"]``,
checked between steps (the last step may overrun). TRL's trainer is built before its clock
starts; the build (which loads TRL's reference model from the model's folder) is timed apart.
"""

from __future__ import annotations

import copy
import gc
import tempfile
import time
from typing import Any

import numpy as np

from essam.baselines import MinimalGRPO
from essam.tasks.sums import make_sum_prompts, sum_reward


def partial_sum_reward(prompts: Any, completions: Any, answer: Any, **_: Any) -> list[float]:
    """The training reward of every method: exact match, partial credit for a near number."""
    return sum_reward(prompts, completions, answer, partial=True)


def drop_grads(model: Any) -> None:
    """Free the gradients a GRPO run leaves on the model, and the trainer's reference cycles."""
    for p in model.parameters():
        p.grad = None
    gc.collect()


def trl_available() -> bool:
    """Whether TRL (and ``datasets``) can be imported; imports them if so."""
    try:
        import datasets  # noqa: F401
        import trl  # noqa: F401
    except ImportError:
        return False
    return True


def trl_config(cfg: dict, seed: int, output_dir: str, max_steps: int) -> dict[str, Any]:
    """``trl.GRPOConfig`` keywords: CPU, no logging backends, no checkpoints, constant LR."""
    g = cfg["grpo"]
    return {
        "output_dir": output_dir,
        "max_steps": max_steps,
        "per_device_train_batch_size": g["prompts"] * g["G"],
        "num_generations": g["G"],
        "max_completion_length": cfg["max_new_tokens"],
        "learning_rate": g["lr"],
        "lr_scheduler_type": "constant",
        "beta": g["beta"],
        "temperature": 1.0,
        "use_vllm": False,
        "use_cpu": True,
        "bf16": False,
        "gradient_checkpointing": False,
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
        "disable_tqdm": True,
        "seed": seed,
    }


def _trl_train(model: Any, tok: Any, cfg: dict, seed: int, max_steps: int, seconds: float) -> dict:
    import datasets

    from essam.baselines import trl_grpo

    use_cache = model.config.use_cache
    rows = make_sum_prompts(2000, "train", 100 + seed)
    limit = trl_grpo.wall_clock_limit(seconds)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="essam-trl-") as out:
        trainer = trl_grpo.run(
            model,
            partial_sum_reward,
            datasets.Dataset.from_list(rows),
            processing_class=copy.deepcopy(tok),  # TRL may set the tokenizer's padding side
            callbacks=[limit],
            **trl_config(cfg, seed, out, max_steps),
        )
    total = time.perf_counter() - t0
    steps = trainer.state.global_step
    del trainer
    drop_grads(model)
    model.config.use_cache = use_cache  # transformers' Trainer switches the KV cache off
    model.eval()
    return {
        "rollouts": steps * cfg["grpo"]["prompts"] * cfg["grpo"]["G"],
        "seconds": limit.elapsed,
        "setup_seconds": total - limit.elapsed,
        "iters": steps,
        "curve": limit.curve,
    }


def run_trl(model: Any, tok: Any, cfg: dict, seed: int) -> dict:
    """TRL's GRPO for ``cfg["seconds"]`` of training wall time."""
    return _trl_train(model, tok, cfg, seed, 10**6, cfg["seconds"])


def trl_step(model: Any, tok: Any, cfg: dict) -> None:
    """One TRL GRPO step, trainer (and reference model) built inside: for the memory table."""
    _trl_train(model, tok, cfg, 0, 1, 1e9)


def _minimal(model: Any, tok: Any, cfg: dict, seed: int) -> MinimalGRPO:
    g = cfg["grpo"]
    return MinimalGRPO(
        model,
        tok,
        partial_sum_reward,
        num_generations=g["G"],
        learning_rate=g["lr"],
        beta=g["beta"],
        max_completion_length=cfg["max_new_tokens"],
        seed=seed,
    )


def run_minimal(model: Any, tok: Any, cfg: dict, seed: int) -> dict:
    """The package's pure-torch ``MinimalGRPO`` for ``cfg["seconds"]`` of wall time."""
    trainer = _minimal(model, tok, cfg, seed)
    rng = np.random.default_rng(seed)
    train = make_sum_prompts(2000, "train", 100 + seed)
    curve, it = [], 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < cfg["seconds"]:
        rows = [train[i] for i in rng.choice(len(train), cfg["grpo"]["prompts"], replace=False)]
        out = trainer.step(rows)
        curve.append((time.perf_counter() - t0, out["reward"]))
        it += 1
    seconds = time.perf_counter() - t0
    model.eval()
    del trainer
    drop_grads(model)
    return {
        "rollouts": it * cfg["grpo"]["prompts"] * cfg["grpo"]["G"],
        "seconds": seconds,
        "iters": it,
        "curve": curve,
    }


def minimal_step(model: Any, tok: Any, cfg: dict) -> None:
    """One ``MinimalGRPO`` step (reference copy built inside): for the memory table."""
    rows = make_sum_prompts(cfg["grpo"]["prompts"], "train", 7)
    trainer = _minimal(model, tok, cfg, 0)
    trainer.step(rows)
    del trainer
    drop_grads(model)
