"""Helpers of the easylens benchmark: the synthetic world, the methods and their metrics.

Everything here is a SYNTHETIC stand-in: procedural scans and a TinyCLIP trained from scratch
in the run, not a medical dataset or model.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as nnf

from easylens import (
    EasyBank,
    EasyLens,
    ScanGenerator,
    ZeroShotDetector,
    auprc,
    auroc,
    tag_precision_recall,
    tiny_clip_adapter,
    train_tiny_clip,
)
from easylens import baselines as bl
from easylens.synthetic import MORPHOLOGIES, SIDES, ScanBatch, TinyCLIP, TinyTokenizer, report

POSITIVE = [report(m, s) for m in MORPHOLOGIES for s in SIDES]  # 8 prompts
NEGATIVE = [report(None, None)]
CACHE = Path(tempfile.gettempdir()) / "easylens-tinyclip"
# spec protocol (full scale): 4,000 scans, 4,000 steps at batch 64
SPEC_STEPS, SPEC_TRAIN = 4000, 4000


@dataclass
class World:
    """Protocol sizes (spec: 96 normal bank images, 48 lesion, 200 + 200 subtle, 200 obvious)."""

    steps: int
    n_train: int
    n_bank_normal: int = 96
    n_bank_lesion: int = 48
    n_test: int = 200

    @property
    def scale(self) -> float:
        return self.steps / SPEC_STEPS


def train(
    world: World, seed: int = 0, batch_size: int = 64
) -> tuple[TinyCLIP, TinyTokenizer, float]:
    """TinyCLIP trained from scratch (cached in a temp dir keyed by every argument)."""
    t0 = time.perf_counter()
    model, tok = train_tiny_clip(
        seed=seed, n_train=world.n_train, steps=world.steps, batch_size=batch_size, cache_dir=CACHE
    )
    return model, tok, time.perf_counter() - t0


def sample(world: World, seed: int) -> dict:
    """Bank and test sets for one seed (bank and test generators have disjoint seeds)."""
    bank_gen, test_gen = ScanGenerator(seed=10_000 + seed), ScanGenerator(seed=20_000 + seed)
    return {
        "bank_normal": bank_gen.sample(world.n_bank_normal, "normal"),
        "bank_lesion": bank_gen.sample(world.n_bank_lesion, "obvious"),
        "normal": test_gen.sample(world.n_test, "normal"),
        "subtle": test_gen.sample(world.n_test, "subtle"),
        "obvious": test_gen.sample(world.n_test, "obvious"),
        "subtle_spec": test_gen.sample(world.n_test, "subtle_spec"),  # the spec's contrast
    }


def timed_scores(fn: Callable, images: torch.Tensor) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    s = fn(images)
    return s, 1e3 * (time.perf_counter() - t0) / len(images)


def evaluate_seed(
    model: TinyCLIP, tok: TinyTokenizer, data: dict, seed: int, layers: tuple[int, ...] = (1, 2)
) -> dict:
    """Every method's metrics on one seed: ``{method: {metric: value}}``."""
    adapter = tiny_clip_adapter(model, tok)
    normal, subtle, obvious = data["normal"], data["subtle"], data["obvious"]
    banks = {
        lay: EasyBank.build(
            adapter, data["bank_normal"].images, data["bank_lesion"].images, layer=lay, seed=seed
        )
        for lay in layers
    }
    main = banks[layers[0]]
    methods = {
        "vanilla": bl.Vanilla(adapter),
        "easylens": EasyLens(adapter, main),
        **{f"easylens@layer{lay}": EasyLens(adapter, banks[lay]) for lay in layers[1:]},
        "easylens_pool": EasyLens(adapter, main, inject="pool"),
        "blind_amplifier": bl.BlindAmplifier(adapter, main),
        "random_tag": bl.RandomTag(adapter, main, seed=seed),
        "lesion_only_tag": bl.LesionOnlyTag(adapter, main),
        "no_morphology": bl.NoMorphology(adapter, main),
        "cls_attention": bl.CLSAttentionReweight(adapter, main.layer, rho=3 / main.num_patches),
        "oracle_tag": bl.OracleTag(adapter, main),
    }
    y = np.r_[np.zeros(len(normal.labels)), np.ones(len(subtle.labels))]
    out: dict[str, dict[str, float]] = {}
    g_plain = adapter.encode_image(normal.images)
    for name, enc in methods.items():
        det = ZeroShotDetector(enc, POSITIVE, NEGATIVE)
        if name == "oracle_tag":
            score = lambda b, enc=enc, det=det: det.score_embeddings(  # noqa: E731
                enc.encode_image(b.images, b.patch_mask(4))
            )
        else:
            score = lambda b, det=det: det.decision_function(b.images)  # noqa: E731
        out[name] = _metrics(score, normal, subtle, obvious, y)
        if isinstance(enc, EasyLens) and name != "oracle_tag":
            out[name].update(_tag_stats(enc, normal, subtle))
        if name != "oracle_tag":
            g = enc.encode_image(normal.images)
            out[name]["cos_normal"] = float(nnf.cosine_similarity(g, g_plain, dim=-1).mean())
    out["easylens_pool"].update(_tagged_only(methods, normal, subtle, out))
    vanilla = ZeroShotDetector(methods["vanilla"], POSITIVE, NEGATIVE).decision_function
    spec_scores = np.r_[vanilla(normal.images), vanilla(data["subtle_spec"].images)]
    out["vanilla"]["auroc_subtle_spec"] = auroc(y, spec_scores)
    pms = bl.PatchMaxScore(adapter, POSITIVE, NEGATIVE)
    out["patch_max_score"] = _metrics(
        lambda b: pms.decision_function(b.images), normal, subtle, obvious, y
    )
    return out


def _tagged_only(methods: dict, normal: ScanBatch, subtle: ScanBatch, out: dict) -> dict:
    """Pool injection judged where tagging does not depend on the label.

    ``inject="pool"`` changes only images with a tagged patch, so on all images its AUROC
    mixes "was anything tagged" with "what was amplified". On the images EasyTag tagged (both
    classes) every image is changed, so only the content can move the AUROC; Vanilla is
    scored on the same images. NaN (left out) when either class has no tagged image.
    """
    pool = methods["easylens_pool"]
    tn = pool.explain(normal.images).n_selected > 0
    ts = pool.explain(subtle.images).n_selected > 0
    if not (bool(tn.any()) and bool(ts.any())):
        return {"auroc_subtle_tagged_only": float("nan")}
    y = np.r_[np.zeros(int(tn.sum())), np.ones(int(ts.sum()))]
    res = {}
    for name in ("easylens_pool", "vanilla"):
        det = ZeroShotDetector(methods[name], POSITIVE, NEGATIVE)
        s = np.r_[
            det.decision_function(normal.images[tn]), det.decision_function(subtle.images[ts])
        ]
        res[name] = auroc(y, s)
    out["vanilla"]["auroc_subtle_tagged_only"] = res["vanilla"]
    out["vanilla"]["n_tagged_only"] = float(len(y))
    return {"auroc_subtle_tagged_only": res["easylens_pool"]}


def _metrics(
    score: Callable, normal: ScanBatch, subtle: ScanBatch, obvious: ScanBatch, y: np.ndarray
) -> dict[str, float]:
    t0 = time.perf_counter()
    s_n, s_s, s_o = score(normal), score(subtle), score(obvious)
    ms = 1e3 * (time.perf_counter() - t0) / (3 * len(s_n))
    return {
        "auroc_subtle": auroc(y, np.r_[s_n, s_s]),
        "auroc_obvious": auroc(y, np.r_[s_n, s_o]),
        "auprc_subtle": auprc(y, np.r_[s_n, s_s]),
        "auprc_obvious": auprc(y, np.r_[s_n, s_o]),
        "ms_per_image": ms,
    }


def _tag_stats(lens: EasyLens, normal: ScanBatch, subtle: ScanBatch) -> dict[str, float]:
    """Statistics of EasyTag's tags (``rep.tag``) under ``lens``'s weights.

    For a baseline that overrides the selection (blind, random, lesion-only) precision and hit
    rate describe EasyTag's tags intersected with that baseline's weights, not its own choice;
    the README shows these rows for the EasyLens variants only.
    """
    rep_s, rep_n = lens.explain(subtle.images), lens.explain(normal.images)
    sel = rep_s.weights > 0
    gt = subtle.patch_mask(4)
    core = rep_s.tag.selected & (rep_s.weights > 0)
    prec, _ = tag_precision_recall(core, gt)
    hit = float(((core & gt).flatten(1).any(1)).float().mean())
    return {
        "tag_precision": prec,
        "lesion_hit_rate": hit,
        "normal_tagged": float((rep_n.n_selected > 0).float().mean()),
        "subtle_tagged": float(sel.flatten(1).any(1).float().mean()),
    }


HIGHER_IS_BETTER = {
    "auroc_subtle": True,
    "auroc_obvious": True,
    "auroc_subtle_spec": True,
    "auroc_subtle_tagged_only": True,
    "n_tagged_only": True,
    "residual_ratio_lesion": True,
    "residual_ratio_other": False,
    "patch_token_norm": True,
    "cls_token_norm": True,
    "auprc_subtle": True,
    "auprc_obvious": True,
    "ms_per_image": False,
    "tag_precision": True,
    "lesion_hit_rate": True,
    "normal_tagged": False,
    "subtle_tagged": True,
    "cos_normal": True,
    "train_s": False,
}


def _mean(vals: dict, method: str, metric: str) -> float:
    v = vals.get((method, metric))
    return float(np.mean(v)) if v else float("nan")


def claims(vals: dict, check: Callable, compare: Callable) -> list:
    """The spec's claims (a)-(e) and the world's calibration, from per-seed values."""
    return [*_world_claims(vals, check), *_easylens_claims(vals, check, compare)]


def _world_claims(vals: dict, check: Callable) -> list:
    """The world's band and (a): Vanilla has room on subtle lesions and dilutes them."""
    van_s, van_o = _mean(vals, "vanilla", "auroc_subtle"), _mean(vals, "vanilla", "auroc_obvious")
    return [
        check(
            "world calibrated: Vanilla subtle-lesion AUROC has room (0.55 <= AUROC <= 0.90)",
            0.55 <= van_s <= 0.90,
            f"vanilla subtle AUROC {van_s:.3f}",
            inputs=[van_s],
        ),
        check(
            "(a) frozen encoder much better on obvious than subtle lesions (AUROC gap >= 0.10)",
            van_o - van_s >= 0.10,
            f"obvious {van_o:.3f} - subtle {van_s:.3f} = {van_o - van_s:.3f}",
            inputs=[van_o, van_s],
        ),
    ]


def _easylens_claims(vals: dict, check: Callable, compare: Callable) -> list:
    """(b)-(e): EasyLens' gain, its cost on obvious lesions, the oracle, the baselines, drift."""
    m = lambda a, b: _mean(vals, a, b)  # noqa: E731
    van_s, van_o = m("vanilla", "auroc_subtle"), m("vanilla", "auroc_obvious")
    ez_s, ez_o = m("easylens", "auroc_subtle"), m("easylens", "auroc_obvious")
    per_seed = np.asarray(vals[("easylens", "auroc_subtle")]) - np.asarray(
        vals[("vanilla", "auroc_subtle")]
    )
    gain, drop = ez_s - van_s, van_o - ez_o
    orc = m("oracle_tag", "auroc_subtle") - van_s
    cos = m("easylens", "cos_normal")
    return [
        check(
            "(b) EasyLens raises subtle AUROC by >= 0.02 over Vanilla (mean), every seed positive",
            gain >= 0.02 and bool((per_seed > 0).all()),
            f"gain {gain:+.4f}; per seed {', '.join(f'{x:+.4f}' for x in per_seed)}",
            inputs=[ez_s, van_s, *per_seed],
        ),
        check(
            "(b) EasyLens obvious-lesion AUROC drops by <= 0.01",
            drop <= 0.01,
            f"vanilla {van_o:.4f}, easylens {ez_o:.4f}, drop {drop:+.4f}",
            inputs=[van_o, ez_o],
            degenerate=van_o == 1.0 and ez_o == 1.0,
        ),
        check(
            "(c) OracleTag (GT patches, same amplifier) raises subtle AUROC by >= 0.10",
            orc >= 0.10,
            f"oracle {m('oracle_tag', 'auroc_subtle'):.3f} vs vanilla {van_s:.3f} ({orc:+.3f})",
            inputs=[orc],
        ),
        *_baseline_claims(vals, compare),
        check(
            "(e) normal images nearly unchanged: mean cos(g', g) on normal test images >= 0.97",
            cos >= 0.97,
            f"mean cos {cos:.4f}",
            inputs=[cos],
        ),
    ]


def _baseline_claims(vals: dict, compare: Callable) -> list:
    """(d): EasyLens beats BlindAmplifier and RandomTag; blind amplification hurts obvious."""
    m = lambda a, b: _mean(vals, a, b)  # noqa: E731
    ez_s, van_o = m("easylens", "auroc_subtle"), m("vanilla", "auroc_obvious")
    bl_s, bl_o = m("blind_amplifier", "auroc_subtle"), m("blind_amplifier", "auroc_obvious")
    rn_s = m("random_tag", "auroc_subtle")
    return [
        compare(
            "(d) EasyLens beats BlindAmplifier on subtle AUROC",
            ez_s,
            ">",
            bl_s,
            measured=f"easylens {ez_s:.4f} vs blind {bl_s:.4f}",
        ),
        compare(
            "(d) EasyLens beats RandomTag on subtle AUROC",
            ez_s,
            ">",
            rn_s,
            measured=f"easylens {ez_s:.4f} vs random {rn_s:.4f}",
        ),
        compare(
            "(d) BlindAmplifier lowers obvious AUROC below Vanilla",
            bl_o,
            "<",
            van_o,
            measured=f"blind {bl_o:.4f} vs vanilla {van_o:.4f}",
        ),
    ]


def calibration_claims(vals: dict, check: Callable, best_gain: Callable) -> list:
    """The world's calibration, judged before EasyLens: (a) dilution, (b) oracle room."""
    van_s, van_o = _mean(vals, "vanilla", "auroc_subtle"), _mean(vals, "vanilla", "auroc_obvious")
    gain, where = best_gain(vals, "oracle_tag_layer1")
    gain2, where2 = best_gain(vals, "oracle_tag_layer2")
    controls = [
        best_gain(vals, p)
        for p in (
            "oracle_sham_layer1",
            "oracle_sham_layer2",
            "oracle_sham_pool_layer1",
            "oracle_sham_pool_layer2",
            "oracle_sham_prototype_residual_layer1",
        )
    ]
    c_gain, c_where = max(controls, key=lambda t: t[0] if t[0] == t[0] else -np.inf)
    p_cls, p_both = (
        _mean(vals, "diagnosis", "probe_cls"),
        _mean(vals, "diagnosis", "probe_cls_plus_tokens"),
    )
    p_pix, room = _mean(vals, "diagnosis", "pixel_highpass_lung_max"), p_both - p_cls
    return [
        check(
            "(a) the frozen encoder dilutes subtle cues: Vanilla obvious - subtle AUROC >= 0.10",
            van_o - van_s >= 0.10,
            f"obvious {van_o:.3f} - subtle {van_s:.3f} = {van_o - van_s:.3f}",
            inputs=[van_o, van_s],
        ),
        check(
            "(b) OracleTag (layer 1) >= Vanilla + 0.10 subtle AUROC at some alpha on the grid",
            gain >= 0.10,
            f"best {where}: {gain:+.3f} (layer 2 best {where2}: {gain2:+.3f})",
            inputs=[gain],
        ),
        check(
            "(b, control) with label-independent tagging (sham tags on normals; layer 1/2, "
            "layer or pool injection, normal or prototype residual) the oracle still gains >= 0.10",
            c_gain >= 0.10,
            f"best {c_where}: {c_gain:+.3f}",
            inputs=[c_gain],
        ),
        check(
            "(b, why) room for any label-independent re-weighting of the true lesion patches: "
            "the encoder's output tokens there add >= 0.10 to a linear probe on the embedding",
            room >= 0.10,
            f"probe(g) {p_cls:.3f}, probe(g + lesion-location tokens) {p_both:.3f} "
            f"({room:+.3f}); the pixels hold more (high-pass max in the lungs {p_pix:.3f})",
            inputs=[p_cls, p_both],
        ),
    ]


def dose_claims(vals: dict, check: Callable, best_gain: Callable) -> list:
    """Does a stronger (or weaker) amplifier than the spec's alpha = 1 rescue EasyLens?"""
    gain, where = best_gain(vals, "easylens")
    cos = _mean(vals, where, "cos_normal") if where != "none" else float("nan")
    rnd = _mean(vals, where.replace("easylens", "random_tag"), "auroc_subtle")
    ez = _mean(vals, where, "auroc_subtle")
    return [
        check(
            "EasyLens raises subtle AUROC by >= 0.02 over Vanilla at some alpha on the grid "
            "(the spec's (b) at its best strength, not only at alpha = 1)",
            gain >= 0.02,
            f"best {where}: {gain:+.4f}",
            inputs=[gain],
        ),
        check(
            "at that alpha EasyLens beats RandomTag on subtle AUROC and keeps normal "
            "cos(g', g) >= 0.97 (spec (d), (e))",
            ez > rnd and cos >= 0.97,
            f"easylens {ez:.4f} vs random {rnd:.4f}; cos {cos:.4f}",
            inputs=[ez, rnd, cos],
        ),
    ]
