"""transformers back-end: batched, KV-cached sampling with per-token log-probs."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from methodkit.torch import generator

from ..types import Path
from ._loop import continue_grouped, sample_loop

__all__ = ["HFGenerator"]


class HFGenerator:
    """Sample from a causal LM of ``transformers`` (``AutoModelForCausalLM``) with log-probs.

    A manual KV-cached loop: the prompt (plus the prefix, for ``continue_``) is fed once, then one
    token per step; the log-probs recorded are those of the untempered next-token distribution,
    i.e. exactly what a teacher-forced forward pass over the same tokens gives.

    Args:
        model: a causal LM (``model(input_ids, past_key_values=..., use_cache=True)``).
        tokenizer: anything with ``encode(text, add_special_tokens=False)``, ``decode(ids)`` and
            ``eos_token_id``.
        top_k: top log-probs recorded per step.
        batch_size: sequences per forward batch.
        device: torch device.
    """

    supports_logprobs = True

    def __init__(
        self, model: Any, tokenizer: Any, top_k: int = 20, batch_size: int = 16, device: str = "cpu"
    ) -> None:
        try:
            import torch  # noqa: F401
        except ImportError as exc:  # pragma: no cover
            raise ImportError("HFGenerator needs torch: pip install preg[hf]") from exc
        if top_k < 1 or batch_size < 1:
            raise ValueError(f"top_k and batch_size must be >= 1, got {top_k}, {batch_size}")
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.top_k, self.batch_size, self.device = top_k, batch_size, device
        self.eos_id = getattr(tokenizer, "eos_token_id", None)
        # transformers >= 5.2x renamed ``past_key_values`` to ``cache``
        params = inspect.signature(type(model).forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    def _encode(self, text: str) -> list[int]:
        try:
            return list(self.tokenizer.encode(text, add_special_tokens=False))
        except TypeError:
            return list(self.tokenizer.encode(text))

    def _text(self, tok: int) -> str:
        if tok == self.eos_id:
            return ""
        return str(self.tokenizer.decode([tok]))

    def _run(
        self, ctx: list[list[int]], steps: int, temperature: float, top_p: float, gen: Any
    ) -> list[Path]:
        import torch

        out: list[Path] = []
        for s in range(0, len(ctx), self.batch_size):
            ids = torch.tensor(ctx[s : s + self.batch_size], dtype=torch.long, device=self.device)

            def fwd(x: Any, past: Any) -> tuple[Any, Any]:
                o = self.model(input_ids=x, use_cache=True, **{self._cache_kw: past})
                return o.logits[:, -1].float().cpu(), getattr(o, self._cache_kw)

            with torch.no_grad():
                out += sample_loop(
                    fwd, ids, steps, self.eos_id, temperature, top_p, self.top_k, gen, self._text
                )
        return out

    def sample(
        self,
        prompt: str,
        n: int,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """``n`` independent samples of at most ``max_new_tokens`` tokens."""
        gen = generator(0 if seed is None else int(seed))
        base = self._encode(prompt)
        if not base:
            raise ValueError("the prompt encodes to no tokens")
        return self._run([base] * n, max_new_tokens, temperature, top_p, gen)

    def continue_(
        self,
        prompt: str,
        paths: Sequence[Path],
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[Path]:
        """Continue prompt + prefix ids (prefix tokens unchanged) to ``max_new_tokens`` in total."""
        gen = generator(0 if seed is None else int(seed))
        base = self._encode(prompt)
        paths = list(paths)
        for p in paths:
            if not p.token_ids and p.n_tokens:
                raise ValueError("HFGenerator.continue_ needs paths with token_ids")

        def run(idx: list[int], steps: int) -> list[Path]:
            return self._run(
                [base + list(paths[i].token_ids) for i in idx], steps, temperature, top_p, gen
            )

        return continue_grouped(paths, max_new_tokens, run)
