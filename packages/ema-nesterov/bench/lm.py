"""A tiny byte-level GPT trained from scratch on Python's documentation text (offline).

Benchmark code (``bench/``), not part of the ema-nesterov wheel.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from methodkit.torch import generator


@dataclass(frozen=True)
class CharCorpus:
    """Byte-level train/validation split of the corpus and its provenance."""

    train: torch.Tensor
    val: torch.Tensor
    sha256: str
    python_version: str
    n_bytes: int


def stdlib_char_corpus(max_bytes: int = 1_500_000, val_fraction: float = 0.1) -> CharCorpus:
    """Bytes of ``methodkit.data.load_stdlib_text()`` (Python's pydoc topics), split in two.

    The first ``max_bytes`` UTF-8 bytes are used; the last ``val_fraction`` of them are held
    out. The text is fixed for a given Python version; its sha256 is returned for the record.

    Raises:
        ValueError: If ``val_fraction`` is not in (0, 1) or ``max_bytes`` is too small.
    """
    from methodkit.data import load_stdlib_text

    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    if max_bytes < 1000:
        raise ValueError(f"max_bytes must be >= 1000, got {max_bytes}")
    corpus = load_stdlib_text()
    raw = corpus.text.encode("utf-8")[:max_bytes]
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()
    n_val = int(len(data) * val_fraction)
    return CharCorpus(
        train=data[:-n_val],
        val=data[-n_val:],
        sha256=corpus.sha256,
        python_version=corpus.python_version,
        n_bytes=len(raw),
    )


class _Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, mlp_ratio: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc = nn.Linear(d_model, mlp_ratio * d_model)
        self.out = nn.Linear(mlp_ratio * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    """Pre-LayerNorm decoder-only transformer over bytes (vocabulary 256), no dropout.

    Args:
        vocab_size: Vocabulary size (256 for bytes).
        n_layer: Number of transformer blocks.
        d_model: Width.
        n_head: Attention heads (must divide ``d_model``).
        context: Maximum sequence length (learned positional embeddings).
        mlp_ratio: Hidden width of the MLP as a multiple of ``d_model``.

    Raises:
        ValueError: If ``n_head`` does not divide ``d_model``.
    """

    def __init__(
        self,
        vocab_size: int = 256,
        n_layer: int = 2,
        d_model: int = 128,
        n_head: int = 4,
        context: int = 64,
        mlp_ratio: int = 4,
    ) -> None:
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"n_head={n_head} must divide d_model={d_model}")
        self.context = context
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context, d_model)
        self.blocks = nn.ModuleList(_Block(d_model, n_head, mlp_ratio) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Return logits of shape ``(batch, time, vocab)`` for byte ids ``idx``."""
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    def hidden_matrices(self) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
        """Split parameters into (2-D weights inside the blocks, everything else).

        The first list is what Muon optimizes; embeddings, norms, biases and the head go to
        AdamW, the usual Muon recipe.
        """
        hidden = [p for p in self.blocks.parameters() if p.ndim == 2]
        ids = {id(p) for p in hidden}
        return hidden, [p for p in self.parameters() if id(p) not in ids]


@dataclass(frozen=True)
class Phases:
    """Warmup-stable-decay phases of a run (steps)."""

    total: int
    warmup: int
    decay: int

    def lr_factor(self, step: int) -> float:
        """Linear warm-up, constant, then linear decay to 0 over the last ``decay`` steps."""
        if step < self.warmup:
            return (step + 1) / self.warmup
        if step >= self.total - self.decay:
            return max(0.0, (self.total - step) / self.decay)
        return 1.0


@dataclass
class LMResult:
    """Outcome of :func:`train_lm`."""

    final_val_loss: float
    curve_steps: list[int] = field(default_factory=list)
    curve_val_loss: list[float] = field(default_factory=list)
    sec_per_step: float = float("nan")
    state_bytes: int = 0
    param_bytes: int = 0
    diverged: bool = False


def batch_windows(
    data: torch.Tensor, idx: torch.Tensor, context: int
) -> tuple[torch.Tensor, torch.Tensor]:
    offsets = idx[:, None] + torch.arange(context + 1)
    chunk = data[offsets]
    return chunk[:, :-1], chunk[:, 1:]


@torch.no_grad()
def evaluate(
    model: TinyGPT, data: torch.Tensor, context: int, max_windows: int | None = None
) -> float:
    """Mean next-byte cross-entropy (nats) over non-overlapping windows of ``data``."""
    n = (len(data) - 1) // context
    if max_windows is not None:
        n = min(n, max_windows)
    starts = torch.arange(n) * context
    total, count = 0.0, 0
    for chunk in starts.split(64):
        x, y = batch_windows(data, chunk, context)
        logits = model(x)
        total += float(F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum"))
        count += y.numel()
    return total / count


def optimizer_state_bytes(opt: torch.optim.Optimizer) -> int:
    seen: set[int] = set()
    total = 0
    stack: list[object] = [opt.state]
    for base in getattr(opt, "base_optimizers", []):
        stack.append(base.state)
    while stack:
        obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            if id(obj) not in seen and obj.numel() > 1:
                seen.add(id(obj))
                total += obj.numel() * obj.element_size()
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple):
            stack.extend(obj)
    return total


def train_lm(
    make_optimizer: Callable[[TinyGPT, Phases], torch.optim.Optimizer],
    corpus: CharCorpus,
    *,
    steps: int = 800,
    batch_size: int = 32,
    warmup: int = 50,
    decay_fraction: float = 0.2,
    seed: int = 0,
    eval_every: int = 100,
    eval_windows: int = 128,
    final_windows: int | None = None,
    model_kwargs: dict[str, int] | None = None,
    schedule_lr: bool = True,
) -> LMResult:
    """Train a :class:`TinyGPT` with a warmup-stable-decay learning rate; return the losses.

    ``make_optimizer(model, phases)`` builds the optimizer (wrapper or plain); a
    ``LambdaLR`` with :meth:`Phases.lr_factor` is attached to it. Wrappers with ``eval()``/
    ``train()`` are switched to their evaluation weights around every evaluation.

    Args:
        make_optimizer: Optimizer factory.
        corpus: From :func:`stdlib_char_corpus`.
        steps: Training steps.
        batch_size: Sequences per batch.
        warmup: Warm-up steps.
        decay_fraction: Fraction of steps in the final linear decay.
        seed: Seed of the model initialisation and the batch order.
        eval_every: Validation interval for the curve (on ``eval_windows`` windows).
        eval_windows: Windows used for the curve.
        final_windows: Windows of the final loss (default: the whole split; the quick smoke
            run takes fewer).
        model_kwargs: :class:`TinyGPT` arguments.
        schedule_lr: Attach the warmup-stable-decay ``LambdaLR`` (off for schedule-free
            optimizers, which warm up themselves and need no decay).

    Returns:
        The final validation loss (nats/byte), the curve, time per step and state size.
    """
    model_kwargs = dict(model_kwargs or {})
    context = model_kwargs.get("context", 64)
    gen = generator(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # scoped: the global RNG is restored on exit
        model = TinyGPT(**model_kwargs)
    phases = Phases(steps, warmup, round(decay_fraction * steps))
    opt = make_optimizer(model, phases)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, phases.lr_factor) if schedule_lr else None
    result = LMResult(final_val_loss=float("nan"))
    result.param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    def _eval(windows: int | None) -> float:
        switch = hasattr(opt, "eval") and hasattr(opt, "train")
        if switch:
            opt.eval()  # type: ignore[attr-defined]
        loss = evaluate(model, corpus.val, context, windows)
        if switch:
            opt.train()  # type: ignore[attr-defined]
        return loss

    elapsed = 0.0
    for step in range(steps):
        if step % eval_every == 0:
            curve_loss = _eval(eval_windows)
            if not math.isfinite(curve_loss):  # the curve ends at its last finite point
                result.diverged = True
                break
            result.curve_steps.append(step)
            result.curve_val_loss.append(curve_loss)
        idx = torch.randint(0, len(corpus.train) - context - 1, (batch_size,), generator=gen)
        x, y = batch_windows(corpus.train, idx, context)
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        if not math.isfinite(loss.item()):
            result.diverged = True
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        elapsed += time.perf_counter() - t0
    result.sec_per_step = elapsed / max(1, step + 1)
    result.state_bytes = optimizer_state_bytes(opt)
    if result.diverged:
        return result
    final = _eval(final_windows)
    result.final_val_loss = final
    result.diverged = not math.isfinite(final)
    if not result.diverged:  # records are strict JSON: no NaN or inf in a curve
        result.curve_steps.append(steps)
        result.curve_val_loss.append(final)
    return result
