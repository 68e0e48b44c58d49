"""A batched, cached autoregressive sampling loop shared by the torch back-ends."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from ..types import Path

Forward = Callable[[Any, Any], tuple[Any, Any]]


def sample_loop(
    forward: Forward,
    ctx: Any,
    max_steps: int,
    eos_id: int | Collection[int] | None,
    temperature: float,
    top_p: float,
    top_k_record: int,
    generator: Any,
    token_text: Callable[[int], str],
) -> list[Path]:
    """Sample up to ``max_steps`` tokens after ``ctx`` (``(B, T0)`` ids, no padding).

    ``forward(ids, state) -> (last_logits (B, V), state)``: ``state=None`` on the first call with
    the whole context, then one new token per call. Log-probs, entropies and top-k log-probs are
    recorded from the untempered distribution (float64); sampling uses ``temperature``/``top_p``.
    ``eos_id`` is one id or a set of ids that finish a path (kept as its last token).
    """
    import torch

    stops = set() if eos_id is None else {eos_id} if isinstance(eos_id, int) else set(eos_id)
    pad = min(stops) if stops else None

    bsz = ctx.shape[0]
    toks: list[list[int]] = [[] for _ in range(bsz)]
    lps: list[list[float]] = [[] for _ in range(bsz)]
    ents: list[list[float]] = [[] for _ in range(bsz)]
    tops: list[list[np.ndarray]] = [[] for _ in range(bsz)]
    done = np.zeros(bsz, dtype=bool)
    finished = np.zeros(bsz, dtype=bool)
    if max_steps <= 0:
        return []
    logits, state = forward(ctx, None)
    for _ in range(max_steps):
        lp = torch.log_softmax(logits.double(), dim=-1)
        ent = -(lp.exp() * lp).nan_to_num(0.0).sum(-1)
        kk = min(top_k_record, lp.shape[-1])
        topv = lp.topk(kk, dim=-1).values
        if temperature == 0:
            tok = logits.argmax(-1)
        else:
            probs = torch.softmax(logits.double() / temperature, dim=-1)
            if top_p < 1.0:
                sp, si = probs.sort(dim=-1, descending=True)
                cut = (sp.cumsum(-1) - sp) >= top_p
                sp = sp.masked_fill(cut, 0.0)
                probs = torch.zeros_like(probs).scatter(-1, si, sp)
            tok = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        tok_lp = lp.gather(-1, tok[:, None]).squeeze(-1)
        tl, tlp, te, tv = tok.tolist(), tok_lp.tolist(), ent.tolist(), topv.numpy()
        for b in range(bsz):
            if done[b]:
                continue
            toks[b].append(tl[b])
            lps[b].append(tlp[b])
            ents[b].append(te[b])
            tops[b].append(tv[b])
            if tl[b] in stops:
                done[b] = finished[b] = True
        if done.all():
            break
        if pad is not None:
            tok = torch.where(torch.as_tensor(done), torch.full_like(tok, pad), tok)
        logits, state = forward(tok[:, None], state)
    out = []
    for b in range(bsz):
        texts = [token_text(t) for t in toks[b]]
        out.append(
            Path(
                token_ids=toks[b],
                text="".join(texts),
                token_logprobs=np.asarray(lps[b]),
                token_entropies=np.asarray(ents[b]),
                topk_logprobs=np.asarray(tops[b]).reshape(len(toks[b]), -1),
                finished=bool(finished[b]),
                token_texts=texts,
            )
        )
    return out


def continue_grouped(
    paths: list[Path],
    max_new_tokens: int,
    run: Callable[[list[int], int], list[Path]],
) -> list[Path]:
    """Continue paths grouped by identical prefix ids (one batch per group, no padding).

    ``run(prefix_ids_list_indices, steps)`` is called per group with the indices of ``paths``.
    """
    out: list[Path | None] = [None] * len(paths)
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(paths):
        if p.finished or p.n_tokens >= max_new_tokens:
            out[i] = p
        else:
            groups.setdefault(p.n_tokens, []).append(i)
    for length, idx in groups.items():
        rest = run(idx, max_new_tokens - length)
        for i, r in zip(idx, rest, strict=True):
            out[i] = Path.concat(paths[i], r)
    return [p for p in out if p is not None]
