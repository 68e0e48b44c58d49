"""Selective expert use: score experts on calibration data, keep a subset, restrict or prune.

Works on :class:`~emo_moe.model.TinyMoELM` (any module whose MoE layers are
:class:`~emo_moe.layers.MoEFeedForward`) and, for capture and restriction, on transformers MoE
models (OLMoE, Mixtral, Qwen2-MoE: the ``gate`` module of each sparse block).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from emo_moe.layers import MoEFeedForward
from emo_moe.model import TinyMoELM
from methodkit import progress as show_progress

__all__ = [
    "SCORES",
    "expert_importance",
    "hf_router_logits",
    "prune_experts",
    "restrict_experts",
    "restrict_hf_experts",
    "select_expert_subset",
]

SCORES = ("router_prob", "output_aware")


def _moe_layers(model: nn.Module) -> list[MoEFeedForward]:
    layers = [m for m in model.modules() if isinstance(m, MoEFeedForward)]
    if not layers:
        raise TypeError(f"{type(model).__name__} has no MoEFeedForward layers")
    return layers


def _check_subsets(
    subsets: Sequence, n_layers: int, num_experts: int, top_k: int
) -> list[torch.Tensor]:
    if len(subsets) != n_layers:
        raise ValueError(f"need one subset per MoE layer ({n_layers}), got {len(subsets)}")
    out = []
    for i, s in enumerate(subsets):
        raw = torch.as_tensor(s)
        if raw.numel() and (raw.dtype.is_floating_point or raw.dtype == torch.bool):
            raise TypeError(f"subset {i} must hold integer expert indices, got dtype {raw.dtype}")
        s = raw.to(torch.long).flatten()
        if s.numel() < top_k:
            raise ValueError(f"subset {i} has {s.numel()} experts, fewer than top_k={top_k}")
        if s.unique().numel() != s.numel():
            raise ValueError(f"subset {i} has duplicate expert indices: {s.tolist()}")
        if s.numel() and (int(s.min()) < 0 or int(s.max()) >= num_experts):
            raise ValueError(f"subset {i} has indices outside [0, {num_experts}): {s.tolist()}")
        out.append(s)
    return out


def _calibration_batches(data: Any) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Batches from a (B, S) tensor, 1-D documents or (input_ids, doc_ids) pairs."""
    if isinstance(data, torch.Tensor):
        data = [data] if data.dim() == 2 else [data.unsqueeze(0)]
    batches = []
    for item in data:
        if isinstance(item, tuple):
            batches.append(item)
        else:
            t = torch.as_tensor(item)
            batches.append((t if t.dim() == 2 else t.unsqueeze(0), None))
    if not batches or all(b[0].numel() == 0 for b in batches):
        raise ValueError("calibration data is empty: pass at least one document or batch")
    return batches


@torch.no_grad()
def _layer_scores(
    model: nn.Module,
    layers: list[MoEFeedForward],
    batches: list,
    method: str,
    which: int | None,
    progress: bool | None = None,
) -> torch.Tensor:
    E = layers[0].num_experts
    scores = torch.zeros(len(layers), E, dtype=torch.float64)
    captured: dict[int, tuple] = {}
    hooks = []
    for li, layer in enumerate(layers):

        def hook(mod: nn.Module, args: tuple, kwargs: dict, output: Any, li: int = li) -> None:
            captured[li] = (args[0] if args else kwargs["h"], output)

        hooks.append(layer.register_forward_hook(hook, with_kwargs=True))
    try:
        for ids, doc in show_progress(
            batches, enabled=progress, desc="expert importance", total=len(batches)
        ):
            captured.clear()
            model(ids, doc_ids=doc) if doc is not None else model(ids)
            for li in range(len(layers)) if which is None else [which]:
                h, (y, out) = captured[li]
                scores[li] += _score(layers[li], h, y, out, method).double()
    finally:
        for hk in hooks:
            hk.remove()
    n_tok = sum(b[0].numel() for b in batches)
    return scores / n_tok


def _score(
    layer: MoEFeedForward, h: torch.Tensor, y: torch.Tensor, out: Any, method: str
) -> torch.Tensor:
    E = layer.num_experts
    if method == "router_prob":  # sum of p_{t,e} over tokens (mean after dividing by T)
        return out.probs.reshape(-1, E).sum(dim=0)
    # output_aware (EASY-EP style, inferred): selected p_{t,e} * ||FFN_e(h_t)||, weighted by the
    # token's relative hidden-state change ||y_t|| / ||h_t||
    x = h.reshape(-1, h.shape[-1])
    w_tok = y.reshape(-1, h.shape[-1]).norm(dim=-1) / x.norm(dim=-1).clamp_min(1e-12)
    sel = torch.zeros(x.shape[0], E, dtype=out.probs.dtype, device=x.device)
    sel.scatter_(
        1, out.expert_indices.reshape(x.shape[0], -1), out.expert_weights.reshape(x.shape[0], -1)
    )
    s = torch.zeros(E, dtype=x.dtype, device=x.device)
    for e in range(E):
        tok = torch.nonzero(sel[:, e]).flatten()
        if tok.numel():
            norms = layer.experts[e](x[tok]).norm(dim=-1)
            s[e] = (sel[tok, e] * norms * w_tok[tok]).sum()
    return s


def expert_importance(
    model: nn.Module,
    calibration: Any,
    method: str = "router_prob",
    greedy_layerwise: bool = False,
    fraction: float | None = None,
    m: int | None = None,
    progress: bool | None = None,
) -> torch.Tensor:
    """Score every routed expert of every MoE layer on calibration data: ``(L, E)``.

    ``"router_prob"``: mean routed probability over the calibration tokens.
    ``"output_aware"``: sum of ``p_{t,e} ||FFN_e(h_t)||`` over tokens that selected ``e``,
    weighted by the token's relative hidden-state change (per calibration token).
    ``greedy_layerwise=True`` scores layer ``l`` with layers ``< l`` already restricted to their
    selected subsets (``fraction`` or ``m`` is then required). The model runs in eval mode.
    A transformers MoE model (OLMoE, Mixtral, Qwen2-MoE: what :func:`hf_router_logits` and
    :func:`restrict_hf_experts` accept) is scored through its ``gate`` modules.

    Args:
        model: a model with :class:`MoEFeedForward` layers, or a transformers MoE model.
        calibration: a ``(B, S)`` tensor, a list of 1-D token tensors (documents) or a list of
            ``(input_ids, doc_ids)`` pairs.
        method: ``"router_prob"`` or ``"output_aware"``.
        greedy_layerwise: score each layer with the earlier layers already restricted.
        fraction: subset share for the greedy restriction.
        m: subset size for the greedy restriction (instead of ``fraction``).
        progress: a bar over the calibration batches: ``None`` (default) on a terminal
            only, ``True`` always, ``False`` never.

    Raises:
        TypeError: A model that is not an ``nn.Module`` or has no MoE layers or gates.
        ValueError: Empty calibration data, an unknown method, greedy without a size,
            or document ids for a transformers model.
    """
    if method not in SCORES:
        raise ValueError(f"method must be one of {SCORES}, got {method!r}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch nn.Module, got {type(model).__name__}")
    batches = _calibration_batches(calibration)
    if greedy_layerwise and fraction is None and m is None:
        raise ValueError("greedy_layerwise=True needs fraction or m")
    if not any(isinstance(mod, MoEFeedForward) for mod in model.modules()):
        return _hf_importance(model, batches, method, greedy_layerwise, fraction, m, progress)
    layers = _moe_layers(model)
    was_training = model.training
    model.eval()
    try:
        if not greedy_layerwise:
            return _layer_scores(model, layers, batches, method, None, progress).float()
        scores = torch.zeros(len(layers), layers[0].num_experts)
        chosen: list[torch.Tensor] = []
        for li in range(len(layers)):
            full = [torch.arange(lay.num_experts) for lay in layers]
            with restrict_experts(model, chosen + full[li:]):
                scores[li] = _layer_scores(model, layers, batches, method, li, progress)[li].float()
            chosen.append(select_expert_subset(scores[li : li + 1], fraction, m)[0])
        return scores
    finally:
        model.train(was_training)


def select_expert_subset(
    importance: torch.Tensor,
    fraction: float | None = None,
    m: int | None = None,
    top_k: int | None = None,
) -> list[torch.Tensor]:
    """Keep the ``m = round(fraction * E)`` (or given ``m``) highest-scoring experts per layer.

    Returns one sorted long tensor of unique indices per layer; ties go to the lower index, so
    the selection is deterministic.

    Raises:
        TypeError: A non-integer ``m``.
        ValueError: Fraction outside ``(0, 1]``, neither or both sizes, ``m`` outside
            ``[top_k, E]``, ``importance`` not 2-D or not finite.
    """
    imp = torch.as_tensor(importance)
    if imp.dim() != 2:
        raise ValueError(f"importance must have shape (L, E), got {tuple(imp.shape)}")
    if not bool(torch.isfinite(imp.double()).all()):
        raise ValueError("importance holds NaN or inf scores; every expert needs a finite score")
    E = imp.shape[1]
    if (fraction is None) == (m is None):
        raise ValueError("give exactly one of fraction or m")
    if m is not None and (isinstance(m, bool) or not isinstance(m, int)):
        raise TypeError(f"m must be an int, got {m!r}")
    if fraction is not None:
        if not 0.0 < float(fraction) <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        m = max(1, round(float(fraction) * E))
    assert m is not None  # given, or computed from fraction (exactly one is set, checked above)
    low = top_k if top_k is not None else 1
    if not low <= m <= E:
        raise ValueError(f"subset size m={m} must be in [{low}, {E}] (top_k={top_k})")
    order = torch.sort(imp.double(), dim=1, descending=True, stable=True).indices
    return [torch.sort(order[li, :m]).values for li in range(imp.shape[0])]


@contextmanager
def restrict_experts(model: nn.Module, subsets: Sequence) -> Iterator[nn.Module]:
    """Mask router logits outside ``subsets`` in every MoE layer inside the ``with`` block.

    Shared experts are unaffected. On exit the previous restriction (normally none) returns.

    Raises:
        ValueError: A subset smaller than ``top_k``, duplicates, out-of-range indices, or a
            wrong number of subsets.
    """
    layers = _moe_layers(model)
    subs = _check_subsets(subsets, len(layers), layers[0].num_experts, layers[0].top_k)
    previous = [lay.router.allowed_experts for lay in layers]
    try:
        for lay, s in zip(layers, subs, strict=True):
            mask = torch.zeros(lay.num_experts, dtype=torch.bool)
            mask[s] = True
            lay.router.allowed_experts = mask
        yield model
    finally:
        for lay, prev in zip(layers, previous, strict=True):
            lay.router.allowed_experts = prev


def prune_experts(model: nn.Module, subsets: Sequence) -> nn.Module:
    """A deep copy of ``model`` keeping only ``subsets`` (expert weights and router rows).

    The pruned model computes what ``restrict_experts(model, subsets)`` computes, with less
    memory; expert ``j`` of a pruned layer is expert ``subsets[l][j]`` of the original.
    """
    layers = _moe_layers(model)
    subs = _check_subsets(subsets, len(layers), layers[0].num_experts, layers[0].top_k)
    new = copy.deepcopy(model)
    for lay, s in zip(_moe_layers(new), subs, strict=True):
        r = lay.router
        r.gate.weight = nn.Parameter(r.gate.weight.data[s].clone())
        r.gate.out_features = len(s)
        r.num_experts = lay.num_experts = len(s)
        if r.allowed_experts is not None:
            r.allowed_experts = r.allowed_experts[s]
        for name in ("pool_min", "pool_max", "pool_eval"):
            if hasattr(r, name):
                setattr(r, name, min(getattr(r, name), len(s)))
        lay.experts = nn.ModuleList(lay.experts[int(i)] for i in s)
    if isinstance(new, TinyMoELM):  # keep its config in step with the pruned layers
        k = len(subs[0])
        c = new.cfg
        new.cfg = dataclasses.replace(
            c,
            num_experts=k,
            pool_max=min(c.pool_max, k),
            pool_min=min(c.pool_min, k),
            pool_eval=min(c.pool_eval, k),
        )
    return new


# ---------------------------------------------------------------- transformers MoE models
def _hf_gates(model: nn.Module) -> list[nn.Module]:
    return [gate for _, gate in _hf_moe_blocks(model)]


def _hf_moe_blocks(model: nn.Module) -> list[tuple[nn.Module, nn.Module]]:
    """``(sparse MoE block, its gate)`` of every MoE layer of a transformers model, in depth order.

    Raises:
        TypeError: If the model has no recognisable MoE gate modules (lists what was found).
    """
    blocks = []
    for name, mod in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "gate" and (
            isinstance(mod, nn.Linear) or (hasattr(mod, "weight") and hasattr(mod, "top_k"))
        ):
            parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
            if hasattr(parent, "experts"):
                blocks.append((parent, mod))
    if not blocks:
        found = sorted({type(m).__name__ for m in model.modules()})
        raise TypeError(
            f"{type(model).__name__} has no recognisable MoE gate modules (a 'gate' nn.Linear or "
            f"top-k router beside 'experts'); module types found: {found}"
        )
    return blocks


def _gate_weight(gate: nn.Module) -> torch.Tensor:
    """The ``(E, d)`` router weight of a gate module."""
    w = getattr(gate, "weight", None)
    if not isinstance(w, torch.Tensor):
        raise TypeError(f"{type(gate).__name__}.weight must be a tensor, got {type(w).__name__}")
    return w


def _block_experts(block: nn.Module) -> nn.Module:
    """The ``experts`` module of a sparse MoE block (a ModuleList or a fused module)."""
    experts = getattr(block, "experts", None)
    if not isinstance(experts, nn.Module):
        raise TypeError(
            f"{type(block).__name__}.experts must be a module, got {type(experts).__name__}"
        )
    return experts


def _gate_logits(gate: nn.Module, h: torch.Tensor) -> torch.Tensor:
    h = h.reshape(-1, h.shape[-1])
    if isinstance(gate, nn.Linear):
        return gate(h)
    return torch.nn.functional.linear(h, _gate_weight(gate), getattr(gate, "bias", None))


@torch.no_grad()
def hf_router_logits(
    model: nn.Module, input_ids: torch.Tensor, **kwargs: Any
) -> list[torch.Tensor]:
    """Router logits ``(tokens, E)`` of every MoE gate of a transformers model, in depth order."""
    gates = _hf_gates(model)
    logs: list[torch.Tensor | None] = [None] * len(gates)
    hooks = [
        g.register_forward_hook(
            lambda mod, args, out, i=i: logs.__setitem__(i, _gate_logits(mod, args[0]).detach())
        )
        for i, g in enumerate(gates)
    ]
    try:
        model(input_ids, **kwargs)
    finally:
        for hk in hooks:
            hk.remove()
    return [x for x in logs if x is not None]


def _restricted_gate_output(
    gate: nn.Module, h: torch.Tensor, mask: torch.Tensor, output: Any
) -> Any:
    logits = _gate_logits(gate, h).masked_fill(~mask.to(h.device), float("-inf"))
    if isinstance(gate, nn.Linear):
        return logits.view(output.shape)
    # transformers >= 5 top-k routers return (logits, top-k weights, top-k indices)
    probs = torch.softmax(logits.float(), dim=-1)
    top, idx = torch.topk(probs, int(getattr(gate, "top_k", 1)), dim=-1)
    if getattr(gate, "norm_topk_prob", True):
        top = top / top.sum(dim=-1, keepdim=True)
    return logits, top.to(logits.dtype), idx


@contextmanager
def restrict_hf_experts(model: nn.Module, subsets: Sequence) -> Iterator[nn.Module]:
    """Route a transformers MoE model only to ``subsets`` (one per MoE layer) inside the block.

    Each block's ``gate`` output is recomputed with logits outside the subset at ``-inf``
    (for ``nn.Linear`` gates the masked logits feed the block's own softmax and top-k).

    Raises:
        TypeError: If the model has no recognisable MoE gate modules (lists what was found).
        ValueError: Bad subsets (see :func:`restrict_experts`).
    """
    gates = _hf_gates(model)
    E = _gate_weight(gates[0]).shape[0]
    top_k, _ = _hf_top_k(model, gates[0])
    subs = _check_subsets(subsets, len(gates), E, top_k)
    hooks = []
    for g, s in zip(gates, subs, strict=True):
        mask = torch.zeros(E, dtype=torch.bool)
        mask[s] = True
        hooks.append(
            g.register_forward_hook(
                lambda mod, args, out, mask=mask: _restricted_gate_output(mod, args[0], mask, out)
            )
        )
    try:
        yield model
    finally:
        for hk in hooks:
            hk.remove()


def _hf_top_k(model: nn.Module, gate: nn.Module) -> tuple[int, bool]:
    """Routed experts per token and whether their weights are renormalised."""
    cfg = getattr(model, "config", None)
    k = getattr(gate, "top_k", None) or getattr(cfg, "num_experts_per_tok", None) or 1
    norm = getattr(gate, "norm_topk_prob", getattr(cfg, "norm_topk_prob", False))
    return int(k), bool(norm)


def _hf_expert_output(experts: nn.Module, e: int, x: torch.Tensor) -> torch.Tensor:
    """``FFN_e(x)`` of one expert: a ModuleList entry, or a fused experts module (weight 1)."""
    if isinstance(experts, nn.ModuleList):
        return experts[e](x)
    idx = torch.full((x.shape[0], 1), e, dtype=torch.long, device=x.device)
    return experts(x, idx, torch.ones(x.shape[0], 1, dtype=x.dtype, device=x.device))


def _hf_score(
    model: nn.Module, block: nn.Module, gate: nn.Module, h: torch.Tensor, y: Any, method: str
) -> torch.Tensor:
    """One layer's scores on one batch (the formulas of :func:`_score`, from the gate)."""
    x = h.reshape(-1, h.shape[-1])
    probs = torch.softmax(_gate_logits(gate, x).double(), dim=-1)
    if method == "router_prob":
        return probs.sum(dim=0)
    k, norm = _hf_top_k(model, gate)
    w, idx = torch.topk(probs, k, dim=-1)
    if norm:
        w = w / w.sum(dim=-1, keepdim=True)
    y = y[0] if isinstance(y, tuple) else y
    w_tok = y.reshape(x.shape).double().norm(dim=-1) / x.double().norm(dim=-1).clamp_min(1e-12)
    s = torch.zeros(probs.shape[1], dtype=torch.float64)
    for e in idx.unique().tolist():
        tok, slot = torch.nonzero(idx == e, as_tuple=True)
        norms = _hf_expert_output(_block_experts(block), e, x[tok]).double().norm(dim=-1)
        s[e] = (w[tok, slot] * norms * w_tok[tok]).sum()
    return s


@torch.no_grad()
def _hf_layer_scores(
    model: nn.Module,
    blocks: list[tuple[nn.Module, nn.Module]],
    batches: list,
    method: str,
    which: int | None,
    progress: bool | None,
) -> torch.Tensor:
    scores = torch.zeros(len(blocks), _gate_weight(blocks[0][1]).shape[0], dtype=torch.float64)
    captured: dict[int, tuple] = {}
    hooks = [
        block.register_forward_hook(
            lambda mod, args, out, li=li: captured.__setitem__(li, (args[0], out))
        )
        for li, (block, _) in enumerate(blocks)
    ]
    try:
        for ids, doc in show_progress(
            batches, enabled=progress, desc="expert importance", total=len(batches)
        ):
            if doc is not None:
                raise ValueError(
                    "a transformers model takes no doc_ids: pass input_ids only as calibration"
                )
            captured.clear()
            model(ids)
            for li in range(len(blocks)) if which is None else [which]:
                h, y = captured[li]
                scores[li] += _hf_score(model, *blocks[li], h, y, method)
    finally:
        for hk in hooks:
            hk.remove()
    return scores / sum(b[0].numel() for b in batches)


def _hf_importance(
    model: nn.Module,
    batches: list,
    method: str,
    greedy_layerwise: bool,
    fraction: float | None,
    m: int | None,
    progress: bool | None,
) -> torch.Tensor:
    """:func:`expert_importance` for a transformers MoE model (scored through its gates)."""
    blocks = _hf_moe_blocks(model)
    was_training = model.training
    model.eval()
    try:
        if not greedy_layerwise:
            return _hf_layer_scores(model, blocks, batches, method, None, progress).float()
        E = _gate_weight(blocks[0][1]).shape[0]
        k, _ = _hf_top_k(model, blocks[0][1])
        scores = torch.zeros(len(blocks), E)
        chosen: list[torch.Tensor] = []
        for li in range(len(blocks)):
            subsets = chosen + [torch.arange(E)] * (len(blocks) - li)
            with restrict_hf_experts(model, subsets):
                layer = _hf_layer_scores(model, blocks, batches, method, li, progress)
            scores[li] = layer[li].float()
            chosen.append(select_expert_subset(scores[li : li + 1], fraction, m, top_k=k)[0])
        return scores
    finally:
        model.train(was_training)
