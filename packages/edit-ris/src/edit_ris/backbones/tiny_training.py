"""train_tiny_editor: the TinyEditor's training loop on (source, instruction, edited) triplets."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.nn import functional as nnf

from edit_ris.backbones.tiny import TinyEditor
from methodkit import progress as progress_bar
from methodkit.checks import check_int, check_real

__all__ = ["train_tiny_editor"]


def _training_batch(gen: Any, batch_size: int, model: TinyEditor, split_cycle: list[str]) -> Any:
    items = []
    for i in range(batch_size):
        items.extend(gen.sample(1, split=split_cycle[i % len(split_cycle)], edit="mixed"))
    src = torch.from_numpy(np.stack([it.image for it in items]))
    dst = torch.from_numpy(np.stack([it.edited_image for it in items]))
    return src, dst, [it.edit_instruction for it in items]


def train_tiny_editor(
    dataset: Any,
    minutes: float | None = None,
    seed: int = 0,
    *,
    steps: int = 2300,
    batch_size: int = 32,
    lr: float = 2e-3,
    model: TinyEditor | None = None,
    vocab: Sequence[str] | None = None,
    progress: bool | None = None,
) -> tuple[TinyEditor, dict]:
    """Train a TinyEditor from scratch on editing triplets (never on masks).

    Loss: ``|| x0_hat(x_t, c_I, c_T, t) - E(edited) ||^2`` with t ~ U{0..T-1}, x_t from the
    cosine schedule (so even t = T - 1 carries a signal: the model must produce the edit).

    Args:
        dataset: A :class:`~edit_ris.data.ShapeRefGenerator` drawn from on the fly (``attr``
            and ``size`` splits, mixed recolour/remove instructions; ``spatial`` is held out).
        minutes: Optional wall-clock cap; training stops at ``steps`` or at the cap.
        seed: Seed of the initialisation (``TinyEditor(..., seed=seed)``) and of the noise
            draws (a private ``torch.Generator``; the global RNG is never seeded).
        steps: Optimiser steps (AdamW).
        batch_size: Triplets per step.
        lr: Peak learning rate (cosine decay).
        model: Optional model to train (default: a fresh one over the grammar's vocabulary).
        vocab: Vocabulary for a fresh model (default: the grammar's).
        progress: Progress bar over the steps: ``None`` on a terminal only, ``True`` always,
            ``False`` never (``TQDM_DISABLE=1`` silences it).

    Returns:
        ``(model in eval mode, log)`` where ``log`` has ``steps``, ``seconds``, ``loss`` (last
        50-step mean) and ``n_params``.

    Raises:
        TypeError: If ``dataset`` has no ``sample(n, split=, edit=)`` method or ``model`` is
            not a :class:`TinyEditor`.
        ValueError: For ``steps < 1``, ``batch_size < 1``, ``seed < 0``, a non-finite or
            non-positive ``lr`` or ``minutes``.
    """
    from edit_ris.data.shapes import vocabulary

    if not callable(getattr(dataset, "sample", None)):
        raise TypeError(
            "dataset must have a sample(n, split=, edit=) method (a ShapeRefGenerator), "
            f"got {type(dataset).__name__}"
        )
    if model is not None and not isinstance(model, TinyEditor):
        raise TypeError(f"model must be a TinyEditor or None, got {type(model).__name__}")
    steps = check_int("steps", steps, low=1)
    batch_size = check_int("batch_size", batch_size, low=1)
    seed = check_int("seed", seed, low=0)
    lr = check_real("lr", lr, low=0.0, low_open=True)
    if minutes is not None:
        minutes = check_real("minutes", minutes, low=0.0, low_open=True)
    if model is None:
        model = TinyEditor(vocab if vocab is not None else vocabulary(), seed=seed)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, steps // 20)  # 5 % linear warm-up, then cosine decay to 0

    def factor(i: int) -> float:
        return (i + 1) / warm if i < warm else 0.5 * (1 + math.cos(math.pi * (i - warm) / steps))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    model.train()
    t0, losses, step = time.perf_counter(), [], 0
    bar = progress_bar(range(1, steps + 1), progress, desc="TinyEditor training", total=steps)
    for step in bar:  # noqa: B007 (step is logged after the loop)
        src, dst, instr = _training_batch(dataset, batch_size, model, ["attr", "size"])
        tb = model.tokenize(instr)
        x0, lat = model.encode(dst), model.encode(src)
        t = torch.randint(0, model.num_train_timesteps, (batch_size,), generator=g)
        ab = model.alphas_cumprod[t][:, None, None, None]
        noise = torch.randn(x0.shape, generator=g)
        x_t = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
        pred = model.denoise(x_t, lat, t, tb.ids, tb.attention_mask)
        loss = nnf.mse_loss(pred, x0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if minutes is not None and time.perf_counter() - t0 > 60.0 * minutes:
            break
    model.eval()
    n_params = sum(p.numel() for p in model.parameters())
    log = {
        "steps": step,
        "seconds": time.perf_counter() - t0,
        "loss": float(np.mean(losses[-50:])),
        "n_params": n_params,
    }
    return model, log
