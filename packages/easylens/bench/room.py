"""Why the label-independent oracle has no room (SYNTHETIC stand-in; issue 44 "(b)").

Measured on one seed's subtle test split, with every image's "lesion location" known in both
classes (lesion images: their ground-truth patches; normal images: the sham patches of
``dose.oracle_masks(..., sham=True)``), so no number below depends on the label through *where*
it looks. Each is an AUROC (lesion vs normal) unless named otherwise:

* ``pixel_highpass_lung_max``: max over the lung pixels of ``image - gaussian(image, 1.5)``: the
  cue is present in the pixels (no location needed).
* ``zero_shot_cls`` / ``probe_cls``: Vanilla's zero-shot score and a 5-fold cross-validated
  logistic-regression probe on the same embedding ``g`` (the embedding's linear ceiling).
* ``probe_tokens_layer{l}``: the same probe on the mean of the tokens entering block ``l`` at the
  known location (``l = L``: the encoder's output tokens): what the patches there encode.
* ``probe_cls_plus_tokens``: the probe on ``g`` and the output tokens at the known location
  together: the room that any label-independent re-weighting of those patches could reach with
  a linear read-out.
* ``residual_known_location_auroc`` (in ``residual_layer{l}``, :func:`residual_auroc`): max over
  the known patches of ``||r|| / ||z||`` with the bank's residual ``r = z - ||z|| n*``: is the
  amplified direction lesion content?
* under sham-oracle amplification at the working layer, per alpha: the zero-shot AUROC, a probe
  re-fit on the amplified ``g'`` (CLS pooling) and on mean-pooled joint-space output tokens,
  and the mean cosine to the un-amplified embedding on each class for both poolings.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from scipy import ndimage
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from torch.nn import functional as nnf

from easylens import EasyAmplifier, EasyBank, EasyTag, auroc
from easylens import baselines as bl

DIAG_ALPHAS = (1.0, 4.0, 16.0)


def probe(x: np.ndarray, y: np.ndarray, seed: int) -> float:
    """5-fold cross-validated AUROC of a standardised L2 logistic regression (C = 0.1)."""
    x = np.asarray(x, dtype=np.float64)
    x = (x - x.mean(0)) / (x.std(0) + 1e-9)
    folds = StratifiedKFold(5, shuffle=True, random_state=seed)
    clf = LogisticRegression(C=0.1, max_iter=2000)
    return auroc(y, cross_val_predict(clf, x, y, cv=folds, method="decision_function"))


def _masked_mean(tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.reshape(len(mask), -1, 1).to(tokens.dtype)
    return (tokens * m).sum(1) / m.sum(1).clamp_min(1)


def _pixel_ceiling(normal: Any, subtle: Any, y: np.ndarray) -> float:
    imgs = torch.cat([normal.images, subtle.images])[:, 0].numpy()
    lung = torch.cat([normal.lung_mask, subtle.lung_mask]).numpy()
    high = imgs - np.stack([ndimage.gaussian_filter(a, 1.5) for a in imgs])
    return auroc(y, np.array([h[m].max() for h, m in zip(high, lung, strict=True)]))


def _run_from(model: Any, tokens: torch.Tensor, layer: int) -> torch.Tensor:
    """TinyCLIP's output tokens from the tokens entering block ``layer``."""
    x = tokens
    for block in list(model.blocks)[layer:]:
        x = block(x)
    return x


@torch.no_grad()
def diagnose(
    model: Any, adapter: Any, bank: EasyBank, data: dict, masks: dict, seed: int, det: Any
) -> dict[str, float]:
    """``{metric: value}`` of the module docstring for one seed (``bank.layer`` = working layer)."""
    normal, subtle = data["normal"], data["subtle"]
    y = np.r_[np.zeros(len(normal.labels)), np.ones(len(subtle.labels))]
    imgs = torch.cat([normal.images, subtle.images])
    where = torch.cat([masks["normal"], masks["subtle"]])
    n_layers = len(list(model.blocks))
    g = adapter.encode_image(imgs)
    out_tokens = _run_from(model, adapter.tokens_at(imgs, 0), 0)
    out = {
        "pixel_highpass_lung_max": _pixel_ceiling(normal, subtle, y),
        "zero_shot_cls": auroc(y, det.score_embeddings(g)),
        "probe_cls": probe(g.numpy(), y, seed),
        "probe_cls_plus_tokens": probe(
            torch.cat([g, _masked_mean(out_tokens[:, 1:], where)], 1).numpy(), y, seed
        ),
    }
    for layer in range(1, n_layers + 1):
        t = out_tokens if layer == n_layers else adapter.tokens_at(imgs, layer)
        out[f"probe_tokens_layer{layer}"] = probe(_masked_mean(t[:, 1:], where).numpy(), y, seed)
    out.update(_amplified(model, adapter, bank, imgs, where, y, seed, det, g))
    return out


@torch.no_grad()
def residual_auroc(adapter: Any, bank: EasyBank, data: dict, masks: dict) -> float:
    """AUROC of the max residual ratio ``||r|| / ||z||`` over the known patches (bank's layer)."""
    normal, subtle = data["normal"], data["subtle"]
    y = np.r_[np.zeros(len(normal.labels)), np.ones(len(subtle.labels))]
    imgs = torch.cat([normal.images, subtle.images])
    where = torch.cat([masks["normal"], masks["subtle"]])
    t = adapter.tokens_at(imgs, bank.layer)
    cf, _ = bank.residual_targets(EasyTag()(t, bank), bank.layer)
    z = t[:, bank.num_prefix_tokens :]
    rel = (z - z.norm(dim=-1, keepdim=True) * cf).norm(dim=-1) / z.norm(dim=-1)
    known = torch.where(where.reshape(len(z), -1), rel, torch.full_like(rel, -1.0))
    return auroc(y, known.max(1).values.numpy())


def _amplified(
    model: Any,
    adapter: Any,
    bank: EasyBank,
    imgs: torch.Tensor,
    where: torch.Tensor,
    y: np.ndarray,
    seed: int,
    det: Any,
    g: torch.Tensor,
) -> dict[str, float]:
    """Sham-oracle amplification at ``bank.layer``: CLS vs mean pooling, probes re-fit."""
    lay, n0 = bank.layer, int((y == 0).sum())
    t = adapter.tokens_at(imgs, lay)
    mean_plain = nnf.normalize(model.to_joint(_run_from(model, t, lay)[:, 1:]).mean(1), dim=-1)
    res: dict[str, float] = {}
    for a in DIAG_ALPHAS:
        enc = bl.OracleTag(adapter, bank, amplifier=EasyAmplifier(alpha=a))
        g_amp = enc.encode_image(imgs, where)
        tokens_amp = _amplify(enc, t, where, bank)
        if not torch.allclose(adapter.resume(tokens_amp, lay), g_amp, atol=1e-4):
            raise RuntimeError("the re-built amplified tokens do not reproduce OracleTag")
        mean_amp = nnf.normalize(
            model.to_joint(_run_from(model, tokens_amp, lay)[:, 1:]).mean(1), dim=-1
        )
        cos_cls = nnf.cosine_similarity(g_amp, g, dim=-1)
        cos_mean = (mean_amp * mean_plain).sum(-1)
        k = f"@alpha={a:g}"
        res[f"sham_zero_shot{k}"] = auroc(y, det.score_embeddings(g_amp))
        res[f"sham_probe_cls{k}"] = probe(g_amp.numpy(), y, seed)
        res[f"sham_probe_mean_pool{k}"] = probe(mean_amp.numpy(), y, seed)
        res[f"sham_cos_cls_normal{k}"] = float(cos_cls[:n0].mean())
        res[f"sham_cos_cls_lesion{k}"] = float(cos_cls[n0:].mean())
        res[f"sham_cos_mean_pool_normal{k}"] = float(cos_mean[:n0].mean())
        res[f"sham_cos_mean_pool_lesion{k}"] = float(cos_mean[n0:].mean())
    res["probe_mean_pool"] = probe(mean_plain.numpy(), y, seed)
    return res


def _amplify(enc: Any, tokens: torch.Tensor, where: torch.Tensor, bank: EasyBank) -> torch.Tensor:
    """The amplified tokens OracleTag feeds block ``bank.layer`` (same weights and residual)."""
    tag = EasyTag()(tokens, bank)
    w, gain = enc.amplifier.weights(where)
    cf, proto = bank.residual_targets(tag, bank.layer)
    return enc.amplifier.amplify(tokens, w * gain, cf, proto, bank.num_prefix_tokens)
