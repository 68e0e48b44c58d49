"""A tiny encoder-decoder audiovisual captioner and its word-level tokenizer."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional

from eva_cap._validation import check_texts
from eva_cap.policy import completion_mask
from eva_cap.synthetic.grammar import DEFAULT_VOCAB, caption_words
from methodkit.checks import check_int

__all__ = ["TinyAVCaptioner", "WordTokenizer"]


class WordTokenizer:
    """Word-level tokenizer: ``<pad>=0, <bos>=1, <eos>=2, <unk>=3``, then the words."""

    PAD, BOS, EOS, UNK = 0, 1, 2, 3

    def __init__(self, words: Sequence[str] = DEFAULT_VOCAB.words) -> None:
        self.itos = ["<pad>", "<bos>", "<eos>", "<unk>", *dict.fromkeys(words)]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, captions: Sequence[str], max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokenize: ``(tokens [N, L], mask [N, L])`` with EOS.

        Longer captions are truncated to ``max_len`` tokens (EOS kept) with a
        ``UserWarning`` naming how many.

        Raises:
            TypeError: If ``captions`` is a single str or holds a non-str.
            ValueError: If ``captions`` is empty or ``max_len < 1``.
        """
        captions = check_texts("captions", captions)
        if not captions:
            raise ValueError("captions is empty: nothing to tokenize")
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        rows, cut = [], 0
        for c in captions:
            ids = [self.stoi.get(w, self.UNK) for w in caption_words(c)]
            if len(ids) + 1 > max_len:
                cut += 1
                ids = ids[: max_len - 1]
            rows.append([*ids, self.EOS])
        if cut:
            warnings.warn(f"{cut} of {len(rows)} captions are longer than max_len={max_len} "
                          "tokens and were truncated", UserWarning, stacklevel=2)  # fmt: skip
        L = max(len(r) for r in rows)
        tok = torch.full((len(rows), L), self.PAD, dtype=torch.long)
        mask = torch.zeros((len(rows), L), dtype=torch.long)
        for i, r in enumerate(rows):
            tok[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        return tok, mask

    def decode(self, tokens: torch.Tensor) -> list[str]:
        """Text up to the first EOS (pad, bos and unk dropped)."""
        out = []
        for row in tokens.tolist():
            words = []
            for t in row:
                if t == self.EOS:
                    break
                if t > self.UNK:
                    words.append(self.itos[t])
            out.append(" ".join(words))
        return out


class _Attention(nn.Module):
    """Multi-head attention with an optional key/value cache (incremental decoding)."""

    def __init__(self, d: int, nhead: int) -> None:
        super().__init__()
        self.h = nhead
        self.q, self.kv, self.o = nn.Linear(d, d), nn.Linear(d, 2 * d), nn.Linear(d, d)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        B, L, d = x.shape
        return x.view(B, L, self.h, d // self.h).transpose(1, 2)

    def keys_values(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        k, v = self.kv(x).chunk(2, dim=-1)
        return self.split(k), self.split(v)

    def forward(
        self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False
    ) -> torch.Tensor:
        y = functional.scaled_dot_product_attention(self.split(self.q(x)), k, v, is_causal=causal)
        B, _, L, dh = y.shape
        return self.o(y.transpose(1, 2).reshape(B, L, self.h * dh))


class _Layer(nn.Module):
    """Pre-norm transformer layer: self-attention, optional cross-attention, MLP."""

    def __init__(self, d: int, nhead: int, cross: bool) -> None:
        super().__init__()
        self.n1, self.n3 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.self_attn = _Attention(d, nhead)
        self.cross = _Attention(d, nhead) if cross else None
        self.n2 = nn.LayerNorm(d) if cross else None
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(
        self,
        x: torch.Tensor,
        mem_kv: list | None = None,
        cache: list | None = None,
        causal: bool = False,
    ) -> torch.Tensor:
        h = self.n1(x)
        k, v = self.self_attn.keys_values(h)
        if cache is not None:  # incremental decoding: append this step's keys and values
            if cache:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            cache[:] = [k, v]
        x = x + self.self_attn(h, k, v, causal=causal and cache is None)
        if self.cross is not None:
            assert self.n2 is not None  # built together with cross
            if mem_kv is None:
                raise ValueError("a cross-attention layer needs mem_kv (the memory's keys, values)")
            x = x + self.cross(self.n2(x), *mem_kv)
        return x + self.mlp(self.n3(x))


class TinyAVCaptioner(nn.Module):
    """A modality-typed transformer encoder over both streams and a transformer decoder.

    The T visual and T audio steps become 2T encoder tokens (linear projection + step and
    modality embeddings); the decoder attends to them causally over caption words. Implements
    :class:`~eva_cap.CaptionPolicy` on batches from :func:`~eva_cap.synthetic.collate`.

    Args:
        tokenizer: Word tokenizer (default: the grammar's words).
        dv: Visual feature size.
        da: Audio feature size.
        d: Model width.
        nhead: Attention heads.
        n_enc: Encoder layers.
        n_dec: Decoder layers.
        max_steps: Longest clip (T).
        max_len: Longest caption in tokens (EOS included).

    Raises:
        ValueError: On a size below 1 or ``d`` not divisible by ``nhead``.
        TypeError: On a size that is not an int.
    """

    def __init__(
        self,
        tokenizer: WordTokenizer | None = None,
        dv: int = 32,
        da: int = 32,
        d: int = 64,
        nhead: int = 4,
        n_enc: int = 2,
        n_dec: int = 2,
        max_steps: int = 64,
        max_len: int = 40,
    ) -> None:
        super().__init__()
        for name, value in (("dv", dv), ("da", da), ("d", d), ("nhead", nhead),
                            ("max_steps", max_steps), ("max_len", max_len)):  # fmt: skip
            check_int(name, value, low=1)
        check_int("n_enc", n_enc, low=0)
        check_int("n_dec", n_dec, low=0)
        if d % nhead:
            raise ValueError(f"d must be divisible by nhead, got d={d}, nhead={nhead}")
        self.tokenizer = tokenizer or WordTokenizer()
        self.dv, self.da, self.max_steps, self.max_len = dv, da, max_steps, max_len
        self.v_in, self.a_in = nn.Linear(dv, d), nn.Linear(da, d)
        self.step_emb = nn.Embedding(max_steps, d)
        self.mod_emb = nn.Embedding(2, d)
        self.encoder = nn.ModuleList([_Layer(d, nhead, cross=False) for _ in range(n_enc)])
        self.enc_norm = nn.LayerNorm(d)
        self.decoder = nn.ModuleList([_Layer(d, nhead, cross=True) for _ in range(n_dec)])
        self.tok_emb = nn.Embedding(len(self.tokenizer), d)
        self.pos_emb = nn.Embedding(max_len + 1, d)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, len(self.tokenizer))

    def encode(self, visual: torch.Tensor, audio: torch.Tensor) -> torch.Tensor:
        """Encoder memory ``[B, 2T, d]``.

        Raises:
            ValueError: If the streams' shapes do not match the model or each other, or
                they hold NaN or infinite values.
        """
        if visual.ndim != 3 or audio.ndim != 3:
            raise ValueError(f"visual and audio must be [B, T, features], got "
                             f"{tuple(visual.shape)} and {tuple(audio.shape)}")  # fmt: skip
        if visual.shape[:2] != audio.shape[:2]:
            raise ValueError(f"visual and audio streams have different lengths: "
                             f"{tuple(visual.shape[:2])} vs {tuple(audio.shape[:2])}")  # fmt: skip
        if visual.shape[2] != self.dv or audio.shape[2] != self.da:
            raise ValueError(f"expected {self.dv} visual and {self.da} audio features, got "
                             f"{visual.shape[2]} and {audio.shape[2]}")  # fmt: skip
        for name, x in (("visual", visual), ("audio", audio)):
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"{name} contains NaN or infinite values")
        T = visual.shape[1]
        if self.max_steps < T:
            raise ValueError(f"clips have {T} steps but max_steps is {self.max_steps}")
        steps = self.step_emb(torch.arange(T, device=visual.device))
        v = self.v_in(visual) + steps + self.mod_emb.weight[0]
        a = self.a_in(audio) + steps + self.mod_emb.weight[1]
        x = torch.cat([v, a], dim=1)
        for layer in self.encoder:
            x = layer(x)
        return self.enc_norm(x)

    def _memory_kv(self, memory: torch.Tensor, rows: int) -> list:
        """Per decoder layer: cross-attention keys/values, repeated to ``rows`` completions."""
        if rows % memory.shape[0]:
            raise ValueError(f"{rows} completions for {memory.shape[0]} inputs")
        k = rows // memory.shape[0]
        out = []
        for layer in self.decoder:
            assert isinstance(layer, _Layer)  # the decoder holds _Layers built with cross=True
            assert layer.cross is not None
            out.append([t.repeat_interleave(k, dim=0) for t in layer.cross.keys_values(memory)])
        return out

    def _decode(
        self, dec_in: torch.Tensor, mem_kv: list, offset: int = 0, caches: list | None = None
    ) -> torch.Tensor:
        L = dec_in.shape[1]
        x = self.tok_emb(dec_in) + self.pos_emb(torch.arange(offset, offset + L,
                                                             device=dec_in.device))  # fmt: skip
        for i, layer in enumerate(self.decoder):
            x = layer(x, mem_kv[i], None if caches is None else caches[i], causal=True)
        return self.out(self.norm(x))

    def token_logprobs(
        self, inputs: Mapping[str, Any], tokens: torch.Tensor, temperature: float = 1.0
    ) -> torch.Tensor:
        """``[N, L]`` log-probs of ``tokens`` given the clips (teacher forcing)."""
        mem_kv = self._memory_kv(self.encode(inputs["visual"], inputs["audio"]), tokens.shape[0])
        bos = torch.full_like(tokens[:, :1], self.tokenizer.BOS)
        logits = self._decode(torch.cat([bos, tokens[:, :-1]], dim=1), mem_kv)
        logp = torch.log_softmax(logits / temperature, dim=-1)
        return logp.gather(-1, tokens[..., None]).squeeze(-1)

    @torch.no_grad()
    def sample(
        self,
        inputs: Mapping[str, Any],
        num_generations: int = 1,
        max_len: int | None = None,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``num_generations`` captions per clip (group-major); ``temperature=0``: greedy.

        Decodes incrementally with a key/value cache; the log-probs of the sampled tokens
        equal :meth:`token_logprobs` (tested).
        """
        L = min(max_len or self.max_len, self.max_len)
        B = inputs["visual"].shape[0]
        N, tok = B * num_generations, self.tokenizer
        mem_kv = self._memory_kv(self.encode(inputs["visual"], inputs["audio"]), N)
        caches: list[list] = [[] for _ in self.decoder]
        nxt = torch.full((N,), tok.BOS, dtype=torch.long, device=inputs["visual"].device)
        done = torch.zeros(N, dtype=torch.bool, device=nxt.device)
        out = []
        for t in range(L):
            logits = self._decode(nxt[:, None], mem_kv, offset=t, caches=caches)[:, -1]
            if temperature == 0:
                nxt = logits.argmax(-1)
            else:
                probs = torch.softmax(logits / temperature, dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            nxt = torch.where(done, torch.full_like(nxt, tok.PAD), nxt)
            out.append(nxt)
            done |= nxt == tok.EOS
            if bool(done.all()):
                break
        tokens = torch.stack(out, dim=1)
        mask = completion_mask(tokens, tok.EOS)
        return tokens.masked_fill(mask == 0, tok.PAD), mask

    def decode(self, tokens: torch.Tensor) -> list[str]:
        """Captions as text."""
        return self.tokenizer.decode(tokens)

    def encode_captions(
        self, captions: Sequence[str], max_len: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokenize captions for teacher forcing (truncation warns)."""
        return self.tokenizer.encode(captions, max_len or self.max_len)
