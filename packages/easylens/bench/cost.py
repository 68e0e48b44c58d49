"""Helper of bench/run.py: the ``cost`` suite (issue 51), EasyLens beside the plain encoder.

The paper's cost axis for a plug-in is what it adds to the frozen encoder's own
``encode_image``: time per image and memory. EasyLens and the plain encoder embed the same
images with the same model in one process, rep by rep in alternating order after one untimed
warm-up call each (``methodkit.bench.interleaved``; median of the reps, load average).

Two encoders: the benchmark's TinyCLIP (the spec's 4,000-step checkpoint from the temp-dir
cache; a cold cache trains it first, ~14 min on one core) on the 32 x 32 synthetic scans, and a
random-init open_clip ``ViT-B-16`` (the size of BiomedCLIP's image tower: 224 px, 196 patches,
width 768) on 224 x 224 scans, its bank built from a few synthetic scans: the cost does not
depend on the weights (one forward with a hook at the working layer, tagging and the
amplifier), only on the sizes. Memory: peak RSS above ``import torch`` of a spawned child that
loads the model (and the bank) and embeds the batch once (``methodkit.bench.peak_memory``).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from easylens import EasyBank, EasyLens, OpenCLIPAdapter, ScanGenerator, tiny_clip_adapter
from easylens.synthetic import TinyCLIP
from methodkit.bench import (
    Outcome,
    ResultRow,
    check,
    cost_entry,
    interleaved,
    load_average,
    peak_memory,
)

FULL = {"tiny_batch": 400, "vit_batch": 8, "vit_bank": (16, 8), "reps": 7}
QUICK = {"tiny_batch": 32, "vit_batch": 0, "vit_bank": (8, 4), "reps": 5}
METHOD, PEER = "EasyLens encode_image", "plain encode_image"


def memory_entry(axis: str, m_bytes: int, p_bytes: int) -> dict[str, Any]:
    """A memory entry (one measurement each: peak RSS is not noisy like time)."""
    m, p = m_bytes / 2**20, p_bytes / 2**20
    return {
        "axis": axis,
        "unit": "MiB",
        "lower_is_better": True,
        "method": METHOD,
        "value": m,
        "peer": PEER,
        "peer_value": p,
        "ratio": m / p if p > 0 else None,
        "statistic": "peak RSS above import torch, 1 run (spawned child)",
        "reps": 1,
        "load_avg": load_average(),
    }


def _vit_model() -> Any:
    import open_clip

    torch.manual_seed(0)  # random init, the same weights in every process
    return open_clip.create_model("ViT-B-16", pretrained=None).eval().requires_grad_(False)


def _scans(size: int, n: int, regime: str, seed: int, channels: int) -> torch.Tensor:
    imgs = ScanGenerator(size=2 * size, seed=seed).sample(n, regime).images
    return imgs.repeat(1, channels, 1, 1)


def embed_once(kind: str, state: str, bank_path: str, n: int, lens: bool) -> None:
    """Child of :func:`peak_memory`: load the model (and bank), embed ``n`` scans once."""
    torch.set_num_threads(1)
    if kind == "tiny":
        model = TinyCLIP(seed=0)
        if state:
            model.load_state_dict(torch.load(state, weights_only=True))
        adapter, imgs = tiny_clip_adapter(model.eval()), _scans(32, n, "subtle", 5, 1)
    else:
        adapter, imgs = OpenCLIPAdapter(_vit_model()), _scans(224, n, "subtle", 5, 3)
    with torch.no_grad():
        if lens:
            EasyLens(adapter, EasyBank.load(bank_path)).encode_image(imgs)
        else:
            adapter.encode_image(imgs)


def measure(
    kind: str, adapter: Any, bank: EasyBank, imgs: torch.Tensor, reps: int, state: str, quick: bool
) -> tuple[list[dict[str, Any]], dict[str, list[float]], dict[str, float]]:
    """Time (ms/image) and memory entries for one encoder, and the per-rep ms per image."""
    lens = EasyLens(adapter, bank)
    with torch.no_grad():
        secs = interleaved(
            {METHOD: lambda: lens.encode_image(imgs), PEER: lambda: adapter.encode_image(imgs)},
            reps,
        )
        rep = lens.explain(imgs)
    ms = {k: [1e3 * s / len(imgs) for s in v] for k, v in secs.items()}
    label = "TinyCLIP 32 px" if kind == "tiny" else "ViT-B/16 224 px"
    axis = f"time per image ({label})"
    entries = [cost_entry(axis, "ms/image", True, METHOD, ms[METHOD], PEER, ms[PEER])]
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bank.pt")
        bank.save(path)
        mem = [
            peak_memory(embed_once, args=(kind, state, path, len(imgs), flag), in_process=quick)
            for flag in (True, False)
        ]
    entries.append(memory_entry(f"peak memory of one batch of {len(imgs)} ({label})", *mem))
    same = rep.n_selected == 0
    untouched = bool(torch.equal(rep.g_lens[same], rep.g_plain[same]))
    info = {"n_selected_mean": float(rep.n_selected.float().mean()), "untouched_equal": untouched}
    return entries, ms, info


def cost(args: Any, train: Callable[[], tuple[Any, Any, float]]) -> Outcome:
    """ms/image and peak memory of EasyLens' encode_image beside the plain encoder's."""
    cfg = QUICK if args.quick else FULL
    model, tok, _ = train()
    state = str(Path(tempfile.mkdtemp()) / "tinyclip.pt")  # the children load these weights
    torch.save(model.state_dict(), state)
    adapter = tiny_clip_adapter(model, tok)
    gen = ScanGenerator(seed=10_000)
    normal, lesion = gen.sample(96, "normal").images, gen.sample(48, "obvious").images
    bank = EasyBank.build(adapter, normal, lesion, seed=0)
    imgs = _scans(32, cfg["tiny_batch"], "subtle", 5, 1)
    entries, ms, info = measure("tiny", adapter, bank, imgs, cfg["reps"], state, args.quick)
    infos = {"tiny": info}
    if cfg["vit_batch"]:
        vit = OpenCLIPAdapter(_vit_model())
        n_n, n_l = cfg["vit_bank"]
        vbank = EasyBank.build(
            vit, _scans(224, n_n, "normal", 1, 3), _scans(224, n_l, "obvious", 2, 3), seed=0
        )
        vimgs = _scans(224, cfg["vit_batch"], "subtle", 5, 3)
        v_entries, v_ms, infos["vit"] = measure(
            "vit", vit, vbank, vimgs, cfg["reps"], "", args.quick
        )
        entries += v_entries
        ms.update({f"{k} (ViT-B/16)": v for k, v in v_ms.items()})
    return _outcome(cfg, entries, ms, infos)


def _outcome(cfg: dict, entries: list, ms: dict, infos: dict) -> Outcome:
    ratios = entries[0]["ratio_reps"]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    iqr, med = q3 - q1, entries[0]["ratio"]
    claims = [
        check(
            "the time ratio is stable: IQR of the per-rep ratios <= 25 % of their median",
            iqr <= 0.25 * med,
            f"EasyLens / plain {med:.2f}x (IQR {iqr:.3g}; reps "
            + ", ".join(f"{r:.2f}" for r in ratios)
            + f"; load average {entries[0]['load_avg']})",
            inputs=[iqr, med],
        ),
        check(
            "at that cost images with no tagged patch get exactly the plain embedding",
            all(i["untouched_equal"] for i in infos.values()),
            ", ".join(
                f"{k}: {'equal' if i['untouched_equal'] else 'different'} "
                f"({i['n_selected_mean']:.2f} tagged patches per image)"
                for k, i in infos.items()
            ),
            inputs=[float(i["n_selected_mean"]) for i in infos.values()],
        ),
    ]
    rows = [ResultRow.from_values(k, "ms_per_image", v, False) for k, v in ms.items()]
    config = {
        **cfg,
        "cost": entries,
        "tagging": infos,
        "setup": "TinyCLIP: the spec's 4,000-step checkpoint, bank of 96 normal + 48 obvious "
        "scans, a batch of subtle scans; ViT-B/16: random-init open_clip, bank of "
        f"{cfg['vit_bank'][0]} normal + {cfg['vit_bank'][1]} obvious 224 px scans; "
        "one thread",
    }
    return Outcome(
        config,
        rows,
        claims,
        seeds=[0],
        plot_metrics=["ms_per_image"],
        units={"ms_per_image": "ms"},
        labels={"ms_per_image": "time per image"},
    )
