"""Helpers of the digits-C benchmark (bench/run.py): data, streams, methods, plots.

Script helpers, not part of the wheel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from zoo import timm_to_tiny_state

from eva0 import EVA0, adapt_stream
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
    "FOA (3 passes)",
    "ZOShared",
    "EVA-0",
    "EVA-0 (defaults)",
    "EVA-0 (plain entropy)",
    "EVA-0 (no anchor)",
]
QUICK_METHODS = ["NoAdapt", "Tent", "FOA", "EVA-0", "EVA-0 (defaults)"]
MEMORY_METHODS = ["NoAdapt", "Tent", "FOA", "EVA-0"]
#: Which tuned configuration each method uses (variants share their parent's).
TUNED_AS = {
    "Tent": "Tent",
    "DeYO": "DeYO",
    "FOA": "FOA",
    "FOA (3 passes)": "FOA",
    "ZOShared": "ZOShared",
    "EVA-0": "EVA-0",
    "EVA-0 (plain entropy)": "EVA-0",
    "EVA-0 (no anchor)": "EVA-0",
}


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


def accuracy(model: Any, X: Any, y: Any) -> float:
    with torch.no_grad():
        return float((model(X).argmax(1) == y).float().mean())


def stream(
    Xte: Any,
    yte: Any,
    name: str,
    severity: int = 5,
    corruption_seed: int = 1234,
    shuffle_seed: int = 0,
) -> list[tuple[Any, Any]]:
    """The corrupted test set (corruption rng 1234), shuffled with seed 0, in batches of 16."""
    rng = np.random.default_rng(corruption_seed)
    Xc = torch.as_tensor(corrupt(Xte.numpy(), name, severity, rng))
    order = torch.randperm(len(yte), generator=generator(shuffle_seed))
    Xc, yc = Xc[order], yte[order]
    return [(Xc[i : i + BATCH], yc[i : i + BATCH]) for i in range(0, len(yc), BATCH)]


def make_method(name: str, model: Any, seed: int, src_images: Any, cfg: dict | None = None) -> Any:
    """One of :data:`METHODS` around ``model``; ``cfg`` is the method's tuned configuration."""
    cfg = dict(cfg or {})
    if name == "NoAdapt":
        return NoAdapt(model)
    if name == "Tent":
        return Tent(model, momentum=0.9, **({"lr": 1e-3} | cfg))
    if name == "DeYO":
        return DeYO(model, momentum=0.9, seed=seed, **({"lr": 1e-3} | cfg))
    if name in ("FOA", "FOA (3 passes)"):
        if name == "FOA (3 passes)":  # about EVA-0's budget: 2 candidates + the incumbent
            cfg["popsize"] = 2
        return FOA(model, src_images, n_prompts=3, seed=seed, **cfg)
    if name == "ZOShared":
        return ZOShared(model, seed=seed, **cfg)
    if name == "EVA-0 (defaults)":
        return EVA0(model, seed=seed)
    if name == "EVA-0":
        return EVA0(model, seed=seed, **cfg)
    if name == "EVA-0 (plain entropy)":
        return EVA0(model, seed=seed, **(cfg | {"loss": "entropy"}))
    if name == "EVA-0 (no anchor)":
        return EVA0(model, seed=seed, **(cfg | {"anchor_weight": 0.0}))
    raise ValueError(name)


def run_stream(
    name: str, model: Any, state: dict, seed: int, src: Any, batches: list, cfg: dict | None = None
) -> dict:
    """Reset ``model`` to ``state``, build the method and score it on ``batches``."""
    model.load_state_dict(state)
    method = make_method(name, model, seed, src, cfg)
    torch.manual_seed(seed)
    out = adapt_stream(method, batches)
    model.load_state_dict(state)
    return out


def memory_job(state_path: str, method: str) -> None:
    """Run one method on 6 batches of a fresh model (module level: picklable for spawn).

    The trained timm ViT's weights are loaded into the identical :class:`eva0.models.TinyViT`
    so that importing timm is not counted as the method's memory.
    """
    torch.set_num_threads(1)
    blob = torch.load(state_path)
    model = tiny_vit(16, 4, 1, 10)
    model.load_state_dict(timm_to_tiny_state(blob["state"]))
    model.eval()
    for n, p in model.named_parameters():
        p.requires_grad_("norm" in n)
    m = make_method(method, model, 0, blob["src"], blob["cfg"].get(TUNED_AS.get(method, "")))
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
    ax.set_title(f"{corruption}, severity 5, first seed (tuned configurations)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)


def win_tie_loss(ours: dict, theirs: dict, margin: float = 0.005) -> tuple[int, int, int]:
    """Cells (corruption, severity) where ``ours`` is ahead by > margin, within, or behind.

    ``ours`` and ``theirs`` map a cell to its mean accuracy over seeds.
    """
    d = [ours[c] - theirs[c] for c in ours]
    return sum(v > margin for v in d), sum(abs(v) <= margin for v in d), sum(v < -margin for v in d)
