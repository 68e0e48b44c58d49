"""EasyLens: tag subtle-lesion patches and amplify them inside a frozen encoder (no training)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as nnf

from easylens._hooks import edit_inputs
from easylens._validation import check_choice, check_finite, check_nonneg
from easylens.amplifier import EasyAmplifier
from easylens.bank import EasyBank
from easylens.tag import EasyTag, TagResult


@dataclass
class LensReport:
    """What :meth:`EasyLens.explain` returns.

    Attributes:
        tag: The :class:`~easylens.TagResult` at the tagging layer.
        selected: The patches actually amplified (a baseline may override the tag), ``[B, H, W]``.
        weights: ``w_i * gamma_i`` actually applied, ``[B, H, W]``.
        n_selected: Patches in ``S`` per image, ``[B]``.
        g_plain: The plain encoder's embedding, ``[B, E]``.
        g_lens: The amplified embedding, ``[B, E]``.
    """

    tag: TagResult
    selected: torch.Tensor
    weights: torch.Tensor
    n_selected: torch.Tensor
    g_plain: torch.Tensor
    g_lens: torch.Tensor


def text_direction(encoder: Any, prompts: Sequence[str]) -> torch.Tensor:
    """L2-normalised mean of the L2-normalised prompt embeddings."""
    if isinstance(prompts, str) or len(prompts) == 0:
        raise ValueError(f"prompts must be a non-empty list of strings, got {prompts!r}")
    t = nnf.normalize(encoder.encode_text(list(prompts)).float(), dim=-1)
    return nnf.normalize(t.mean(0), dim=0)


class EasyLens:
    """Training-free subtle-lesion amplifier for a frozen ViT-style encoder (inferred box).

    ``encode_image`` runs the frozen encoder once. At the tokens entering block ``tag_layer``
    EasyTag compares each patch with the bank's lesion prototypes and with its
    anatomy-matched normal counterfactual ``n*(i)``; EasyAmplifier then rewrites the tagged
    patches entering block ``layer``::

        c_i   = max_k cos(z_i, p_k) - max_{m in A(i)} cos(z_i, n_m)        # EasyTag margin
        S     = top-k_max {i : (c_i - mu) / sigma > tau}
        z_i' = z_i + alpha w_i gamma_C(i) (z_i - ||z_i|| n*(i))            # EasyAmplifier

    and the frozen remainder recomputes ``g`` (``inject="layer"``), or the enhanced patches
    are pooled into the joint embedding, ``g' = normalize(g^ + lam * sum_i w_i gamma_i
    to_joint(z_i')^ / sum_i w_i gamma_i)`` (``inject="pool"``). No parameter changes and no
    gradient is taken; with ``alpha = 0`` or an empty ``S`` the output is the plain output.

    Args:
        adapter: A :class:`~easylens.adapters.TokenEncoderAdapter`.
        bank: An :class:`~easylens.EasyBank` built with this adapter at ``tag_layer``.
        tag: :class:`~easylens.EasyTag` (default settings if None).
        amplifier: :class:`~easylens.EasyAmplifier` (default settings if None).
        layer: Injection layer ``l`` (default ``bank.layer``).
        tag_layer: Layer EasyTag reads (default ``bank.layer``; the bank must be built there).
        inject: ``"layer"`` or ``"pool"`` (needs ``adapter.to_joint``).
        pool_weight: ``lam`` of ``inject="pool"``.
        prompts: ``(positive, negative)`` prompt lists, needed by ``EasyTag(verify=True)``.

    References:
        EasyLens: A Training-Free Plug-and-Play Subtle-Lesion Representation Amplifier for
        Medical Vision-Language Models (arXiv 2606.06379).

    Example:
        >>> import torch
        >>> from easylens import EasyBank, EasyLens, ScanGenerator, tiny_clip_adapter
        >>> from easylens.synthetic import TinyCLIP
        >>> adapter = tiny_clip_adapter(TinyCLIP(seed=0))
        >>> gen = ScanGenerator(seed=0)
        >>> bank = EasyBank.build(adapter, gen.sample(16).images, gen.sample(8, "obvious").images)
        >>> EasyLens(adapter, bank).encode_image(gen.sample(2, "subtle").images).shape
        torch.Size([2, 64])
    """

    def __init__(
        self,
        adapter: Any,
        bank: EasyBank,
        tag: EasyTag | None = None,
        amplifier: EasyAmplifier | None = None,
        layer: int | None = None,
        tag_layer: int | None = None,
        inject: str = "layer",
        pool_weight: float = 0.5,
        prompts: tuple[Sequence[str], Sequence[str]] | None = None,
    ) -> None:
        if not isinstance(bank, EasyBank):
            raise TypeError(f"bank must be an EasyBank, got {type(bank).__name__}")
        self.adapter, self.bank = adapter, bank
        self.tag = tag if tag is not None else EasyTag()
        self.amplifier = amplifier if amplifier is not None else EasyAmplifier()
        self.tag_layer = bank.layer if tag_layer is None else adapter.layer_index(tag_layer)
        self.layer = self.tag_layer if layer is None else adapter.layer_index(layer)
        bank.check_compatible(adapter, self.tag_layer)
        if self.layer not in bank.normal_tokens:
            raise ValueError(
                f"the bank stores counterfactuals at layers {sorted(bank.normal_tokens)}; "
                f"build it with extra_layers=[{self.layer}] to inject at layer {self.layer}"
            )
        self.inject = check_choice(inject, "inject", ("layer", "pool"))
        if inject == "pool" and not adapter.has_joint:
            raise ValueError(
                f"inject='pool' needs an adapter with to_joint; {type(adapter).__name__} has none"
            )
        self.pool_weight = check_nonneg(pool_weight, "pool_weight")
        self._directions: tuple[torch.Tensor, torch.Tensor] | None = None
        self._in_hook = False  # re-entrancy guard: verify's re-run must see the plain encoder
        if prompts is not None:
            self.set_prompts(*prompts)
        if self.tag.verify and prompts is None:
            raise ValueError("EasyTag(verify=True) needs prompts=(positive, negative)")

    # -- public ------------------------------------------------------------------------------
    def set_prompts(self, positive: Sequence[str], negative: Sequence[str]) -> None:
        """Prompts defining ``s(I) = cos(g, t+) - cos(g, t-)`` (used by ``verify``)."""
        self._directions = (
            text_direction(self.adapter, positive),
            text_direction(self.adapter, negative),
        )

    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        """The adapter's text embeddings (unchanged)."""
        return self.adapter.encode_text(texts)

    @torch.no_grad()
    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Enhanced image embeddings ``[B, E]``."""
        return self._run(images)[0]

    @torch.no_grad()
    def explain(self, images: torch.Tensor) -> LensReport:
        """Tags, applied weights and both embeddings for ``images``."""
        g_lens, box = self._run(images)
        g_plain = self.adapter.encode_image(images)
        return LensReport(
            tag=box["tag"],
            selected=box["selected"].reshape(-1, *self.bank.grid_size),
            weights=box["coef"].reshape(-1, *self.bank.grid_size),
            n_selected=box["selected"].reshape(len(images), -1).sum(1),
            g_plain=g_plain,
            g_lens=g_lens,
        )

    @contextmanager
    def attach(self) -> Iterator[EasyLens]:
        """Install the amplifier on the wrapped model's blocks for any downstream forward.

        Inside the block, every forward of the model (a generative VLM's vision tower too)
        receives the amplified tokens at ``layer``; the hooks are removed on exit.
        """
        if self.inject != "layer" or self.tag_layer > self.layer:
            raise ValueError("attach() needs inject='layer' and tag_layer <= layer")
        box: dict[str, Any] = {}
        with edit_inputs(self._hooks(box), seq_first=self.adapter.seq_first):
            yield self

    def as_module(self) -> nn.Module:
        """An ``nn.Module`` whose ``forward(images)`` is :meth:`encode_image`."""
        return _LensModule(self)

    # -- the pass ----------------------------------------------------------------------------
    def _guarded(self, fn: Callable[[torch.Tensor], Any]) -> Callable[[torch.Tensor], Any]:
        """Wrap a hook so that forwards started from inside it pass through unchanged.

        ``verify=True`` re-runs the encoder from the tagging layer while the lens's own hook
        is running; without this guard that re-run would re-enter the hook (and tag, verify
        and re-run again: a RecursionError) or overwrite the grabbed tokens.
        """

        def hook(x: torch.Tensor) -> Any:
            if self._in_hook:
                return None
            self._in_hook = True
            try:
                return fn(x)
            finally:
                self._in_hook = False

        return hook

    def _hooks(self, box: dict[str, Any]) -> list:
        if self.tag_layer == self.layer:
            edit = self._guarded(lambda x: self._edit(x, x, box))
            return [(self.adapter.blocks[self.layer], edit)]

        def grab(x: torch.Tensor) -> None:
            box["tag_tokens"] = x.clone()

        inject = self._guarded(lambda x: self._edit(x, box["tag_tokens"], box))
        return [
            (self.adapter.blocks[self.tag_layer], self._guarded(grab)),
            (self.adapter.blocks[self.layer], inject),
        ]

    def _run(self, images: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        images = self.adapter.check_images(images)
        box: dict[str, Any] = {"images": images}
        if self.inject == "pool":
            return self._run_pool(images, box), box
        if self.tag_layer > self.layer:
            box["tag_tokens"] = self.adapter.tokens_at(images, self.tag_layer)
            edit = self._guarded(lambda x: self._edit(x, box["tag_tokens"], box))
            hooks = [(self.adapter.blocks[self.layer], edit)]
        else:
            hooks = self._hooks(box)
        edits = {self.adapter.blocks.index(b): fn for b, fn in hooks}
        return self.adapter.forward_with_edits(images, edits), box

    def _run_pool(self, images: torch.Tensor, box: dict[str, Any]) -> torch.Tensor:
        captured: dict[int, torch.Tensor] = {}

        def grab(layer: int) -> Callable[[torch.Tensor], None]:
            def fn(x: torch.Tensor) -> None:
                captured[layer] = x.clone()

            return fn

        edits = {self.layer: grab(self.layer), self.tag_layer: grab(self.tag_layer)}
        g = self.adapter.forward_with_edits(images, edits)
        x = captured[self.layer]
        new = self._edit(x, captured[self.tag_layer], box)
        coef = box["coef"].reshape(len(images), -1)
        if self.amplifier.alpha == 0 or not bool((coef > 0).any()):
            return g
        p = self.bank.num_prefix_tokens
        zj = nnf.normalize(self.adapter.to_joint(new[:, p:]).float(), dim=-1)
        pooled = (coef.unsqueeze(-1) * zj).sum(1) / coef.sum(1, keepdim=True).clamp_min(1e-12)
        g_new = nnf.normalize(nnf.normalize(g.float(), dim=-1) + self.pool_weight * pooled, dim=-1)
        g_new = g_new * g.float().norm(dim=-1, keepdim=True)
        has = coef.sum(1) > 0
        return torch.where(has.unsqueeze(-1), g_new.to(g.dtype), g)

    def _edit(self, x: torch.Tensor, tag_tokens: torch.Tensor, box: dict[str, Any]) -> torch.Tensor:
        check_finite(x, "tokens")
        tag = self._tag(tag_tokens, box)
        selected = self._select(tag, x, box)
        w, g = self._weights(selected)
        coef = (w * g).reshape(x.shape[0], -1)
        cf, proto = self.bank.residual_targets(tag, self.layer)
        box.update(tag=tag, selected=selected, coef=coef)
        return self.amplifier.amplify(x, coef, cf, proto, self.bank.num_prefix_tokens)

    def _tag(self, tokens: torch.Tensor, box: dict[str, Any]) -> TagResult:
        patches = self.bank.patch_tokens(tokens)
        feats = self.adapter.to_joint(patches) if self.bank.feature_space == "joint" else None
        verifier = self._verifier(tokens) if self.tag.verify else None
        return self.tag(tokens, self.bank, features=feats, verifier=verifier)

    # -- override points for the baselines ---------------------------------------------------
    def _select(self, tag: TagResult, tokens: torch.Tensor, box: dict[str, Any]) -> torch.Tensor:
        return tag.selected

    def _weights(self, selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.amplifier.weights(selected)

    # -- verify=True: the true intervention --------------------------------------------------
    def _verifier(self, tokens: torch.Tensor) -> Callable[..., torch.Tensor]:
        if self._directions is None:
            raise ValueError("verify=True needs prompts (EasyLens(prompts=...) or set_prompts)")
        t_pos, t_neg = self._directions
        p = self.bank.num_prefix_tokens
        cf_table = self.bank.normal_tokens[self.bank.layer]

        def score(g: torch.Tensor) -> torch.Tensor:
            g = nnf.normalize(g.float(), dim=-1)
            return g @ t_pos - g @ t_neg

        def verify(i: int, pos: torch.Tensor, m_idx: torch.Tensor) -> torch.Tensor:
            x = tokens[i].unsqueeze(0).repeat(len(pos) + 1, 1, 1)  # copy 0: unmodified
            rows = torch.arange(1, len(pos) + 1)
            z = x[rows, p + pos]
            x[rows, p + pos] = z.norm(dim=-1, keepdim=True) * cf_table[m_idx].to(z.dtype)
            s = score(self.adapter.resume(x, self.tag_layer))
            return s[0] - s[1:]

        return verify


class _LensModule(nn.Module):
    def __init__(self, lens: EasyLens) -> None:
        super().__init__()
        self.lens = lens

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.lens.encode_image(images)
