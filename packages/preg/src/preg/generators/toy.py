"""Batched sampling from the toy character model (:class:`preg.toy.CharGPT`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from methodkit.torch import generator

from ..toy.arith import VOCAB
from ..types import Path
from ._loop import continue_grouped, sample_loop

__all__ = ["TinyLMGenerator"]


class TinyLMGenerator:
    """Generator over a character model; the end-of-sequence character is ``"."``.

    Args:
        model: a :class:`preg.toy.CharGPT` (or any module ``model(ids, cache) -> (logits, cache)``).
        vocab: the characters, index = token id.
        top_k: how many top log-probs to record per step.
        batch_size: maximum sequences per forward batch.
    """

    supports_logprobs = True

    def __init__(
        self, model: Any, vocab: str = VOCAB, top_k: int = 5, batch_size: int = 4096
    ) -> None:
        self.model, self.vocab, self.top_k, self.batch_size = model, vocab, top_k, batch_size
        self.stoi = {c: i for i, c in enumerate(vocab)}
        self.eos_id = self.stoi.get(".")

    def _encode(self, text: str) -> list[int]:
        try:
            return [self.stoi[c] for c in text]
        except KeyError as exc:
            raise ValueError(f"character {exc.args[0]!r} is not in the vocabulary") from exc

    @torch.no_grad()
    def _run(
        self, ctx: list[list[int]], steps: int, temperature: float, top_p: float, gen: Any
    ) -> list[Path]:
        out: list[Path] = []
        for s in range(0, len(ctx), self.batch_size):
            ids = torch.tensor(ctx[s : s + self.batch_size], dtype=torch.long)

            def fwd(x: Any, cache: Any) -> tuple[Any, Any]:
                logits, cache = self.model(x, cache)
                return logits[:, -1], cache

            out += sample_loop(
                fwd,
                ids,
                steps,
                self.eos_id,
                temperature,
                top_p,
                self.top_k,
                gen,
                lambda t: self.vocab[t],
            )
        return out

    def sample_batch(
        self,
        prompts: Sequence[str],
        n: int,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        seed: int | None = None,
    ) -> list[list[Path]]:
        """``n`` samples for each of several equal-length prompts, in one batch."""
        lens = {len(p) for p in prompts}
        if len(lens) > 1:
            raise ValueError(
                f"sample_batch needs prompts of one length, got lengths {sorted(lens)}"
            )
        gen = generator(0 if seed is None else int(seed))
        ctx = [self._encode(p) for p in prompts for _ in range(n)]
        flat = self._run(ctx, max_new_tokens, temperature, top_p, gen)
        return [flat[i * n : (i + 1) * n] for i in range(len(prompts))]

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
        """``n`` independent samples of at most ``max_new_tokens`` characters."""
        return self.sample_batch(
            [prompt], n, max_new_tokens, temperature=temperature, top_p=top_p, seed=seed
        )[0]

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
        """Continue each path (prompt + its characters) to ``max_new_tokens`` in total."""
        gen = generator(0 if seed is None else int(seed))
        base = self._encode(prompt)
        paths = list(paths)

        def run(idx: list[int], steps: int) -> list[Path]:
            ctx = [base + list(paths[i].token_ids) for i in idx]
            return self._run(ctx, steps, temperature, top_p, gen)

        return continue_grouped(paths, max_new_tokens, run)
