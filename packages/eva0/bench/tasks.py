"""Helpers of the digits-C benchmark (bench/run.py): data, source model, streams, methods.

Script helpers, not part of the wheel.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from eva0 import EVA0
from eva0.baselines import FOA, DeYO, NoAdapt, Tent, ZOShared
from eva0.corruptions import corrupt
from eva0.models import tiny_vit
from methodkit.data import load_digits_arrays
from methodkit.torch import generator

TEST_CORRUPTIONS = [
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "contrast",
    "brightness",
    "pixelate",
    "elastic_transform",
]
BATCH = 16
METHODS = [
    "NoAdapt",
    "Tent",
    "DeYO",
    "FOA",
    "ZOShared",
    "EVA-0",
    "EVA-0 (plain entropy)",
    "EVA-0 (no anchor)",
]
QUICK_METHODS = ["NoAdapt", "Tent", "FOA", "EVA-0"]
MEMORY_METHODS = ["NoAdapt", "Tent", "FOA", "EVA-0"]


def digits16() -> tuple[Any, Any, Any, Any]:
    """1,200 train / 597 test digits, [0, 1], bilinearly upsampled to 16x16 (seed 0 split)."""
    X, y = load_digits_arrays()
    X = X.reshape(-1, 8, 8)
    perm = np.random.default_rng(0).permutation(len(y))
    X16 = torch.nn.functional.interpolate(
        torch.as_tensor(X).unsqueeze(1), size=(16, 16), mode="bilinear", align_corners=False
    ).clamp(0, 1)
    tr, te = perm[:1200], perm[1200:]
    return X16[tr], torch.as_tensor(y[tr]), X16[te], torch.as_tensor(y[te])


def train_vit(Xtr: Any, ytr: Any, epochs: int, seed: int = 0) -> Any:
    """Train the source TinyViT; afterwards only its norm affines require grad."""
    gen = generator(seed)
    model = tiny_vit(16, 4, 1, 10, generator=gen)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    steps = epochs * math.ceil(len(ytr) / 64)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(len(ytr), generator=gen)
        for i in range(0, len(ytr), 64):
            idx = perm[i : i + 64]
            loss = torch.nn.functional.cross_entropy(model(Xtr[idx]), ytr[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    for n, p in model.named_parameters():  # only the norm affines are adapted by BP baselines
        if "norm" in n:
            p.requires_grad_(True)
    return model


def accuracy(model: Any, X: Any, y: Any) -> float:
    with torch.no_grad():
        return float((model(X).argmax(1) == y).float().mean())


def stream(Xte: Any, yte: Any, name: str, severity: int = 5) -> list[tuple[Any, Any]]:
    """The corrupted test set (corruption rng 1234), shuffled with seed 0, in batches of 16."""
    Xc = torch.as_tensor(corrupt(Xte.numpy(), name, severity, np.random.default_rng(1234)))
    order = torch.randperm(len(yte), generator=generator(0))
    Xc, yc = Xc[order], yte[order]
    return [(Xc[i : i + BATCH], yc[i : i + BATCH]) for i in range(0, len(yc), BATCH)]


def make_method(name: str, model: Any, seed: int, src_images: Any) -> Any:
    """One of :data:`METHODS` around ``model`` at the benchmark's settings."""
    if name == "NoAdapt":
        return NoAdapt(model)
    if name == "Tent":
        return Tent(model, lr=1e-3, momentum=0.9)
    if name == "DeYO":
        return DeYO(model, lr=1e-3, momentum=0.9, seed=seed)
    if name == "FOA":
        return FOA(model, src_images, n_prompts=3, seed=seed)
    if name == "ZOShared":
        return ZOShared(model, eps=0.02, lr=0.05, seed=seed)
    if name == "EVA-0":
        return EVA0(model, seed=seed)
    if name == "EVA-0 (plain entropy)":
        return EVA0(model, loss="entropy", seed=seed)
    if name == "EVA-0 (no anchor)":
        return EVA0(model, anchor_weight=0.0, seed=seed)
    raise ValueError(name)


def memory_job(state_path: str, method: str) -> None:
    """Run one method on 6 batches of a fresh model (module level: picklable for spawn)."""
    torch.set_num_threads(1)
    blob = torch.load(state_path)
    model = tiny_vit(16, 4, 1, 10)
    model.load_state_dict(blob["state"])
    model.eval()
    for n, p in model.named_parameters():
        p.requires_grad_("norm" in n)
    m = make_method(method, model, 0, blob["src"])
    for x in blob["batches"]:
        m(x)


def curve_plot(curves: dict[str, list[float]], corruption: str, path: Path) -> None:
    """Running accuracy over the first seed's stream of ``corruption``, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for m, v in curves.items():
        ax.plot(np.cumsum(v) / np.arange(1, len(v) + 1), label=m)
    ax.set_xlabel("batch (16 samples)")
    ax.set_ylabel("running accuracy (fraction)")
    ax.set_title(f"{corruption}, severity 5, first seed")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
