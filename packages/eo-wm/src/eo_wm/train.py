"""Rectified-flow training and ensemble sampling of :class:`~eo_wm.model.EOWorldModel`.

A dataset is a dict of tensors (see :func:`eo_wm.simulator.make_dataset`): ``context``
``(N, T_c, C, H, W)``, ``context_mask``, ``target (N, T_f, C, H, W)``, ``target_mask``,
``static (N, C_s, H, W)``, ``doy (N, T)``, ``weather (N, T, m)`` and the decomposer's
``baseline``, ``anomaly``, ``stress`` (``(N, T, .)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from eo_wm._eo_wm import EOWorldModel, last_clean
from methodkit import progress as progress_bar

DECOMPOSED = ("baseline", "anomaly", "stress", "doy")
RAW = ("weather", "doy")


def cond_of(model: EOWorldModel, data: Mapping[str, Tensor], idx: Tensor | None = None) -> dict:
    """The ``cond`` dict ``model`` expects, cut from ``data`` (rows ``idx``)."""
    return {k: data[k] if idx is None else data[k][idx] for k in cond_of_keys(model)}


def flow_matching_loss(
    model: EOWorldModel, batch: Mapping[str, Tensor], generator: torch.Generator | None = None
) -> Tensor:
    """Rectified-flow loss averaged over valid (cloud-free) target pixels.

    ``x_s = (1 - s) eps + s x``, target ``x - eps``; each pathway is dropped independently with
    probability ``cond_dropout`` (baseline -> learned null embedding, anomaly -> no cross-attn).
    """
    mask = batch["target_mask"]
    x = model.to_flow_space(batch["target"], batch["context"], batch["context_mask"])
    x = x * mask  # cloudy targets carry no signal; the loss ignores them
    B = x.shape[0]
    dev, dt = x.device, x.dtype
    s = torch.rand(B, generator=generator, device=dev, dtype=dt)
    eps = torch.randn(x.shape, generator=generator, device=dev, dtype=dt)
    xs = (1 - s.view(-1, 1, 1, 1, 1)) * eps + s.view(-1, 1, 1, 1, 1) * x
    p = model.config.cond_dropout
    keep_b = (torch.rand(B, generator=generator, device=dev) >= p).to(dt)
    keep_a = (torch.rand(B, generator=generator, device=dev) >= p).to(dt)
    v = model(
        xs,
        s,
        batch["context"],
        batch["context_mask"],
        batch["static"],
        cond_of(model, batch),
        keep_base=keep_b,
        keep_anomaly=keep_a,
        validate=False,
    )
    w = mask.expand_as(x)
    return ((v - (x - eps)) ** 2 * w).sum() / w.sum().clamp_min(1.0)


def normalization_stats(data: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Per-band, per-static-channel and per-variable mean/std from training windows.

    ``residual_std``: per-band RMS of the normalised target minus the last clean context pixel;
    ``stress_mean/std``: per stress channel, when ``data`` has a stress.
    """
    tgt, m = data["target"], data["target_mask"]
    w = m.expand_as(tgt)
    n = w.sum((0, 1, 3, 4)).clamp_min(1)
    mean = (tgt * w).sum((0, 1, 3, 4)) / n
    var = (((tgt - mean[:, None, None]) ** 2) * w).sum((0, 1, 3, 4)) / n
    std = var.sqrt().clamp_min(1e-3)
    cm = data["context_mask"]
    last, _ = last_clean((data["context"] - mean[:, None, None]) / std[:, None, None] * cm, cm)
    res = (tgt - mean[:, None, None]) / std[:, None, None] - last[:, None]
    res_var = (res**2 * w).sum((0, 1, 3, 4)) / n
    st = data["static"]
    wt = data["weather"].reshape(-1, data["weather"].shape[-1])
    extra = {}
    if "stress" in data and data["stress"].shape[-1]:
        sv = data["stress"].reshape(-1, data["stress"].shape[-1])
        extra = {"stress_mean": sv.mean(0), "stress_std": sv.std(0).clamp_min(1e-3)}
    return {
        **extra,
        "band_mean": mean,
        "band_std": std,
        "residual_std": res_var.sqrt().clamp_min(1e-3),
        "static_mean": st.mean((0, 2, 3)),
        "static_std": st.std((0, 2, 3)).clamp_min(1e-3),
        "weather_mean": wt.mean(0),
        "weather_std": wt.std(0).clamp_min(1e-3),
    }


def check_dataset(model: EOWorldModel, dataset: Mapping[str, Tensor]) -> None:
    """Every key ``model`` trains on is present, and every tensor is finite.

    Cloudy pixels are masked, not NaN: a NaN frame would make every loss and weight NaN.
    """
    needed = ("context", "context_mask", "target", "target_mask", "static", *cond_of_keys(model))
    missing = [k for k in needed if k not in dataset]
    if missing:
        raise ValueError(
            f"dataset lacks {missing} (has {sorted(dataset)}); build it with "
            "eo_wm.simulator.make_dataset or add the WeatherDecomposer's outputs"
        )
    for key in needed:
        value = dataset[key]
        if not isinstance(value, Tensor):
            raise TypeError(f"dataset[{key!r}] must be a torch.Tensor, got {type(value).__name__}")
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            bad = int((~torch.isfinite(value)).sum())
            raise ValueError(
                f"dataset[{key!r}] has {bad} NaN or infinite value(s); mark cloudy pixels "
                "in the mask and give them any finite value"
            )
    if dataset["context"].shape[0] == 0:
        raise ValueError("dataset has no window (context has 0 rows)")


def cond_of_keys(model: EOWorldModel) -> tuple[str, ...]:
    """The conditioning keys ``model`` reads: raw weather, or the decomposed pathways."""
    return RAW if model.config.conditioning == "undifferentiated" else DECOMPOSED


def train_model(
    model: EOWorldModel,
    dataset: Mapping[str, Tensor],
    steps: int,
    batch_size: int = 16,
    lr: float = 2e-4,
    weight_decay: float = 0.01,
    generator: torch.Generator | None = None,
    progress: bool | None = None,
) -> list[float]:
    """Train with AdamW on random mini-batches; returns the loss per step.

    Sets the model's normalisation buffers from ``dataset`` first. ``progress``: a bar over
    the steps (None: on a terminal only).

    Raises:
        ValueError: On a missing key, a NaN or infinite tensor, an empty dataset, or
            ``steps < 0`` / ``batch_size < 1``.
    """
    if steps < 0 or batch_size < 1:
        raise ValueError(f"steps must be >= 0 and batch_size >= 1, got {steps}, {batch_size}")
    check_dataset(model, dataset)
    model.set_normalization(**normalization_stats(dataset))
    model.check_inputs(
        dataset["context"][:1],
        dataset["context_mask"][:1],
        dataset["static"][:1],
        cond_of(model, dataset, torch.arange(1)),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    n = dataset["context"].shape[0]
    keys = ("context", "context_mask", "target", "target_mask", "static", *DECOMPOSED, "weather")
    losses = []
    model.train()
    for _ in progress_bar(range(steps), enabled=progress, desc="train eo-wm", unit="step"):
        idx = torch.randint(0, n, (batch_size,), generator=generator)
        batch = {k: dataset[k][idx] for k in keys if k in dataset}
        loss = flow_matching_loss(model, batch, generator)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses


def sample_ensemble(
    model: EOWorldModel,
    dataset: Mapping[str, Tensor],
    n_members: int = 8,
    n_steps: int = 30,
    batch_size: int = 32,
    generator: torch.Generator | None = None,
    progress: bool | None = None,
    **kwargs: Any,
) -> Tensor:
    """Ensembles ``(n_members, N, T_f, C, H, W)`` for every window of ``dataset`` (in chunks).

    ``progress``: a bar over the chunks (None: on a terminal only).
    """
    n = dataset["context"].shape[0]
    outs = []
    chunks = range(0, n, batch_size)
    for i in progress_bar(chunks, enabled=progress, desc="sample eo-wm", unit="chunk"):
        idx = torch.arange(i, min(n, i + batch_size))
        outs.append(
            model.sample(
                dataset["context"][idx],
                dataset["context_mask"][idx],
                dataset["static"][idx],
                cond_of(model, dataset, idx),
                n_members=n_members,
                n_steps=n_steps,
                generator=generator,
                **kwargs,
            )
        )
    return torch.cat(outs, 1)
