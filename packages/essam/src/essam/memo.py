"""Replay frozen decoder layers on a repeated prompt batch (exact, for ES populations).

ESSAM evaluates every population member on the *same* prompts. When only the top of a model
is trained, the frozen bottom layers compute the same prompt activations for every member.
:func:`memoize_frozen_layers` makes each frozen layer remember its last prompt-length call
(input, output and the key/value states it wrote to the cache) and replay it when called on
an equal input, so a member's prefill runs only through the trained layers. The replayed
tensors are the ones the layer computed, so the completions are bitwise unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

__all__ = ["memoize_frozen_layers"]


class _Memo:
    """The last prompt-length call of one frozen decoder layer."""

    def __init__(self, layer: torch.nn.Module) -> None:
        self.layer = layer
        self.forward = layer.forward
        attn: Any = layer.self_attn  # a transformers attention module (checked by the caller)
        self.index: int = attn.layer_idx
        self.saved: tuple[torch.Tensor, Any, torch.Tensor, torch.Tensor] | None = None
        self.hits = 0

    def __call__(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        cache = kwargs.get("cache", kwargs.get("past_key_values"))
        if cache is None or hidden_states.shape[1] <= 1:
            return self.forward(hidden_states, *args, **kwargs)
        if self.saved is not None and cache.get_seq_length(self.index) == 0:
            x, out, keys, values = self.saved
            if x.shape == hidden_states.shape and torch.equal(x, hidden_states):
                cache.update(keys, values, self.index)
                self.hits += 1
                return out
        out = self.forward(hidden_states, *args, **kwargs)
        if cache.get_seq_length(self.index) == hidden_states.shape[1]:
            entry = cache.layers[self.index]
            self.saved = (hidden_states.detach(), out, entry.keys, entry.values)
        return out


@contextmanager
def memoize_frozen_layers(layers: Sequence[torch.nn.Module]) -> Iterator[list[_Memo]]:
    """Within the block, ``layers`` replay their last prompt call on an equal input.

    For ``transformers`` decoder layers (with ``self_attn.layer_idx``) of a model that writes
    a ``DynamicCache``; use it only for layers whose parameters stay fixed inside the block
    (the replay does not check the weights). Yields the memos (``.hits`` counts replays).

    Raises:
        ValueError: If a layer has trainable parameters (``requires_grad=True``).
    """
    for layer in layers:
        if any(p.requires_grad for p in layer.parameters()):
            raise ValueError(
                "memoize_frozen_layers needs frozen layers; this one has trainable parameters"
            )
    memos = [_Memo(layer) for layer in layers]
    for memo in memos:
        memo.layer.forward = memo
    try:
        yield memos
    finally:
        for memo in memos:
            del memo.layer.forward
