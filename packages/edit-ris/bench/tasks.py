"""Helpers of the edit-ris benchmark: the tiny editor (trained once per run), evaluation loops."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edit_ris import (
    EditRIS,
    ShapeRefGenerator,
    TinyEditor,
    miou,
    oiou,
    precision_at,
    separability_curve,
    train_tiny_editor,
)
from edit_ris import baselines as bl

TEMPLATE = (
    "make the {ref} purple"  # a real edit for every referent: purple is never a source colour
)
SPLITS = ("attr", "size", "spatial")
_EDITORS: dict[str, tuple[TinyEditor, dict]] = {}


class CountingBackbone:
    """Wraps a backbone and counts denoiser evaluations per image (forward_capture and edit)."""

    def __init__(self, backbone: Any) -> None:
        self._b = backbone
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._b, name)

    def forward_capture(
        self, images: Any, instructions: Any, t: Any, seed: Any, capture: Any = None
    ) -> Any:
        self.calls += len(instructions)
        return self._b.forward_capture(images, instructions, t, seed, capture=capture)

    def edit(
        self, images: Any, instructions: Any, num_inference_steps: Any = 20, seed: Any = 0
    ) -> Any:
        self.calls += len(instructions) * num_inference_steps
        return self._b.edit(images, instructions, num_inference_steps, seed)


def log(msg: str) -> None:
    print(f"[edit-ris] {msg}", file=sys.stderr, flush=True)


def editor(cfg: dict[str, Any], seed: int) -> tuple[TinyEditor, dict]:
    """The tiny editor for (cfg, seed): trained in this run once, cached on disk for reuse."""
    keys = ("train_steps", "batch", "lr")
    tag = hashlib.sha1(json.dumps([cfg[k] for k in keys] + [seed]).encode()).hexdigest()[:10]
    if tag in _EDITORS:
        return _EDITORS[tag]
    cache = Path(os.environ.get("EDIT_RIS_CACHE", Path.home() / ".cache" / "edit-ris"))
    path = cache / f"tiny-{tag}.pt"
    if cfg.get("cache") and path.is_file():
        model, info = TinyEditor.load(path), json.loads(path.with_suffix(".json").read_text())
        info = {**info, "trained_in_this_run": False}
    else:
        gen = ShapeRefGenerator(seed=10_000 + seed)  # training scenes: seeds disjoint from test
        model, info = train_tiny_editor(
            gen, steps=cfg["train_steps"], batch_size=cfg["batch"], lr=cfg["lr"], seed=seed
        )
        if cfg.get("cache"):
            cache.mkdir(parents=True, exist_ok=True)
            model.save(path)
            path.with_suffix(".json").write_text(json.dumps(info))
        info = {**info, "trained_in_this_run": True}
        log(f"trained editor: {info}")
    _EDITORS[tag] = (model, info)
    return model, info


def test_items(split: str, n: int, seed: int) -> Any:
    """Test items of a split (generator seeds disjoint from training), purple edits."""
    gen = ShapeRefGenerator(seed=1_000 * (seed + 1) + SPLITS.index(split))
    items = gen.sample(n, split=split, edit="purple")
    x = np.stack([it.image for it in items])
    return x, [it.expression for it in items], np.stack([it.mask for it in items])


def evaluate(method: Any, x: Any, exprs: Any, gt: Any, batch: int) -> dict[str, float]:
    """mIoU, oIoU, Pr@0.5, seconds and denoiser calls per expression of ``method``."""
    backbone = getattr(method, "backbone", None)
    calls0 = backbone.calls if isinstance(backbone, CountingBackbone) else 0
    t0, preds = time.perf_counter(), []
    for i in range(0, len(exprs), batch):
        out = method.predict(x[i : i + batch], exprs[i : i + batch])
        preds.append(out.masks if hasattr(out, "masks") else out)
    seconds = time.perf_counter() - t0
    pred = np.concatenate(preds)
    calls = (backbone.calls - calls0) if isinstance(backbone, CountingBackbone) else 0
    return {
        "mIoU": miou(pred, gt),
        "oIoU": oiou(pred, gt),
        "Pr@0.5": precision_at(pred, gt, (0.5,))[0.5],
        "ms_per_expr": 1000.0 * seconds / len(exprs),
        "calls_per_expr": calls / len(exprs),
    }


def methods_at_t0(bb: Any, cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """The method and every baseline of the main table (t0 where a timestep applies)."""
    kw = {"template": TEMPLATE, "seed": seed}
    return {
        "EditRIS": EditRIS(bb, **kw),
        "AttentionOnly": bl.AttentionOnly(bb, **kw),
        "AttentionAffinity": bl.AttentionAffinity(bb, **kw),
        "FeatureOnly": bl.FeatureOnly(bb, **kw),
        "CenterPrior": bl.CenterPrior(),
        "OneStepDifference": bl.OneStepDifference(bb, **kw),
        "NoiseDifference": bl.NoiseDifference(bb, **kw),
        "EditDifference": bl.EditDifference(bb, num_inference_steps=cfg["edit_steps"], **kw),
    }


def run_ris(cfg: dict[str, Any], seed: int) -> dict[str, dict[str, dict[str, float]]]:
    """{split: {method: metrics}} of the main comparison."""
    model, _ = editor(cfg, seed)
    bb = CountingBackbone(model)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for split in SPLITS:
        x, exprs, gt = test_items(split, cfg["n_test"], seed)
        out[split] = {}
        for name, method in methods_at_t0(bb, cfg, seed).items():
            n = cfg.get(f"n_{name}", len(exprs))  # subsets for the slowest baselines
            if n == 0:  # the quick run skips FeatureOnly (its scikit-learn start-up alone is ~5 s)
                continue
            out[split][name] = evaluate(method, x[:n], exprs[:n], gt[:n], cfg["eval_batch"])
            log(f"{split} {name}: {out[split][name]}")
    return out


def run_timesteps(cfg: dict[str, Any], seed: int) -> dict[str, Any]:
    """Timestep ablation (T, 0.5T, 0.2T) on attr+size: EditRIS, AttentionOnly, probe."""
    model, _ = editor(cfg, seed)
    bb = CountingBackbone(model)
    xs, es, gs = zip(
        *(test_items(s, cfg["n_ablation"], seed) for s in ("attr", "size")), strict=True
    )
    x, exprs, gt = np.concatenate(xs), [e for part in es for e in part], np.concatenate(gs)
    rows: list[dict[str, Any]] = []
    for label, frac in (("T", 1.0), ("0.5T", 0.5), ("0.2T", 0.2)):
        kw = {"template": TEMPLATE, "seed": seed, "timestep": frac}
        t = EditRIS(bb, **kw).resolved_timestep
        row: dict[str, Any] = {"timestep": label, "t": t}
        for name, meth in (
            ("EditRIS", EditRIS(bb, **kw)),
            ("AttentionOnly", bl.AttentionOnly(bb, **kw)),
            ("AttentionAffinity", bl.AttentionAffinity(bb, **kw)),
        ):
            row[name] = evaluate(meth, x, exprs, gt, cfg["eval_batch"])["mIoU"]
        one = bl.OneStepDifference(bb, template=TEMPLATE, seed=seed)
        preds = [
            one.predict(x[i : i + 50], exprs[i : i + 50], timestep=t) for i in range(0, len(x), 50)
        ]
        row["OneStepDifference"] = miou(np.concatenate(preds), gt)
        n = cfg["n_probe"]
        probe = separability_curve(
            model, x[:n], exprs[:n], gt[:n], [t], template=TEMPLATE, seed=seed
        )
        for layer, au, fi in zip(probe["layer"], probe["auroc"], probe["fisher"], strict=True):
            row[f"AUROC {layer}"], row[f"Fisher {layer}"] = au, fi
        rows.append(row)
        log(f"timestep {row}")
    return {"rows": rows}


def set_torch_threads(n: int) -> None:
    torch.set_num_threads(n)
