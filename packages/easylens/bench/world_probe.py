"""Cheap room probe of a candidate world before any full suite (SYNTHETIC stand-in; issue 44).

Trains one TinyCLIP (pooling, steps, training scans and mix given on the command line; cached
like the benchmark's), then on one seed of the spec's bank / test sizes measures what
``room.diagnose`` measures (linear probe on ``g`` against the probe on the tokens at the known
lesion location, both classes located: sham patches on normals) and the label-independent
oracle (``oracle_sham``: normal images amplified at a random subtle image's patches) with layer
and pool injection at layers 1-3 and a few strengths, next to the label-dependent OracleTag.

    python bench/world_probe.py --pool mean --steps 1000 --n-train 2000 --out /tmp/probe.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import dose
import numpy as np
import room
import tasks
import torch

from easylens import EasyBank, ZeroShotDetector, tiny_clip_adapter, train_tiny_clip
from easylens import baselines as bl
from easylens.synthetic.scans import REGIMES


def probe_world(args: argparse.Namespace) -> dict:
    """Train (or load) the world and measure its room on ``args.seed``."""
    t0 = time.perf_counter()
    cache = tasks.CACHE
    if args.subtle_contrast is not None:  # a world with another "subtle" regime (train + test)
        lo, hi = args.subtle_contrast
        REGIMES["subtle"] = (REGIMES["subtle"][0], (lo, hi))
        cache = cache / f"subtle-{lo:g}-{hi:g}"
    model, tok = train_tiny_clip(
        seed=0,
        n_train=args.n_train,
        steps=args.steps,
        mix=tuple(args.mix),
        pool=args.pool,
        local_weight=args.local_weight,
        stem=args.stem,
        patch=args.patch,
        filter_bank=args.filter_bank,
        cache_dir=cache,
    )
    train_s = time.perf_counter() - t0
    world = tasks.World(steps=args.steps, n_train=args.n_train)
    data = tasks.sample(world, args.seed)
    adapter = tiny_clip_adapter(model, tok)
    pos, neg = tasks.POSITIVE, tasks.NEGATIVE
    y = np.r_[np.zeros(world.n_test), np.ones(world.n_test)]
    g_plain = adapter.encode_image(data["normal"].images)
    van = bl.Vanilla(adapter)
    van_det = ZeroShotDetector(van, pos, neg)
    out: dict = {"vanilla": dose.evaluate(van, van_det, data, y, None, g_plain)}
    sham = dose.oracle_masks(data, args.seed, sham=True)
    for layer in args.layers:
        bank = EasyBank.build(
            adapter,
            data["bank_normal"].images,
            data["bank_lesion"].images,
            layer=layer,
            reference=args.reference,
            seed=args.seed,
        )
        if layer == args.layers[0]:
            out["diagnosis"] = room.diagnose(model, adapter, bank, data, sham, args.seed, van_det)
        # is the amplified direction lesion content? (max ||r|| / ||z|| over the known patches)
        out["diagnosis"][f"residual_known_location_auroc_layer{layer}"] = room.residual_auroc(
            adapter, bank, data, sham
        )
        for name, is_sham, inject in (
            ("oracle_tag", False, "layer"),
            ("oracle_sham", True, "layer"),
            ("oracle_sham_pool", True, "pool"),
        ):
            masks = dose.oracle_masks(data, args.seed, is_sham)
            for a in args.alphas:
                enc = dose.make("oracle_tag", adapter, bank, a, args.seed, inject)
                det = ZeroShotDetector(enc, pos, neg)
                key = f"{name}_layer{layer}@alpha={a:g}"
                out[key] = dose.evaluate(enc, det, data, y, masks, g_plain)
    out["config"] = {**vars(args), "train_s": train_s, "total_s": time.perf_counter() - t0}
    out["config"]["load_avg"] = list(os.getloadavg())
    return out


def table(paths: list[str]) -> str:
    """A markdown table of probe records: the world's gap, its room and the oracles' best gain."""
    head = (
        "| world (record) | Vanilla subtle / obvious (gap) | probe g | probe g + tokens at the "
        "lesion (room) | probe tokens at the lesion, output | best label-independent oracle "
        "| best OracleTag (label-dependent) |\n|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        v, d = r["vanilla"], r["diagnosis"]
        van = v["auroc_subtle"]
        layers = r["config"]["layers"]
        out_key = max(k for k in d if k.startswith("probe_tokens_layer"))

        def best(prefix: str, r: dict = r, van: float = van) -> str:
            gains = {k: m["auroc_subtle"] - van for k, m in r.items() if k.startswith(prefix)}
            k = max(gains, key=lambda x: gains[x])
            return f"{gains[k]:+.3f} ({k.replace('oracle_', '')})"

        room = d["probe_cls_plus_tokens"] - d["probe_cls"]
        lines.append(
            f"| {os.path.basename(path).removesuffix('.json')} (layers {layers}) "
            f"| {van:.3f} / {v['auroc_obvious']:.3f} ({v['auroc_obvious'] - van:.3f}) "
            f"| {d['probe_cls']:.3f} | {d['probe_cls_plus_tokens']:.3f} ({room:+.3f}) "
            f"| {d[out_key]:.3f} | {best('oracle_sham')} | {best('oracle_tag')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pool", default="cls", choices=("cls", "mean"))
    p.add_argument("--local-weight", type=float, default=0.0)
    p.add_argument("--stem", type=int, default=0)
    p.add_argument("--patch", type=int, default=4)
    p.add_argument("--reference", default="position", choices=("position", "cluster"))
    p.add_argument("--filter-bank", default="none", choices=("none", "dog", "dog_max"))
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--n-train", type=int, default=2000)
    p.add_argument("--mix", type=float, nargs=3, default=(0.5, 0.425, 0.075))
    p.add_argument("--subtle-contrast", type=float, nargs=2, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layers", type=int, nargs="+", default=(1, 2, 3))
    p.add_argument("--alphas", type=float, nargs="+", default=(1.0, 4.0, 16.0))
    p.add_argument("--out", help="where the probe's JSON goes")
    p.add_argument("--table", nargs="+", help="print a markdown table of these records instead")
    args = p.parse_args(argv)
    if args.table:
        print(table(args.table))
        return 0
    if not args.out:
        p.error("--out is required unless --table is given")
    torch.set_num_threads(1)
    dose.PATCH = args.patch
    res = probe_world(args)
    res["config"]["command"] = "python bench/world_probe.py " + " ".join(sys.argv[1:])
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1, default=float)
    d, v = res["diagnosis"], res["vanilla"]
    print(f"vanilla subtle {v['auroc_subtle']:.3f} obvious {v['auroc_obvious']:.3f}")
    print(
        f"probe g {d['probe_cls']:.3f}  g+tokens {d['probe_cls_plus_tokens']:.3f}  "
        + "  ".join(f"{k} {x:.3f}" for k, x in d.items() if k.startswith("probe_tokens"))
        + f"  pixels {d['pixel_highpass_lung_max']:.3f}"
    )
    print(
        "residual at the known location (AUROC): "
        + "  ".join(f"{k.rsplit('_', 1)[1]} {x:.3f}" for k, x in d.items() if "residual_known" in k)
    )
    for k, m in res.items():
        if "@" in k:
            print(
                f"{k:36s} subtle {m['auroc_subtle'] - v['auroc_subtle']:+.3f} "
                f"cos {m['cos_normal']:.3f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
