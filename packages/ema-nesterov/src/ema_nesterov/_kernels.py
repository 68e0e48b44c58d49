"""The element-wise updates of one EMA-Nesterov step, with as few memory passes as torch allows.

Each function takes lists of same-shaped tensors (parameters ``ps``, EMA buffers ``ms``,
scratch copies ``ys``). Where all tensors share one dtype and a CPU/CUDA device, the update
after the base step runs in one pass through ``torch._fused_sgd_``: SGD with momentum computes
``d = grad + wd * param``, ``buf <- momentum * buf + (1 - dampening) * d`` and
``param <- param - lr * buf`` in a single kernel, which is exactly the shape of the EMA update
followed by the lookahead shift (the arguments below map one onto the other). Elsewhere
(other devices, mixed dtypes, a torch without the kernel) the same arithmetic runs as
``torch._foreach_*`` calls, or per tensor in the wider dtype.

Passes over memory per step, in parameter-sized reads + writes (AdamW's fused step is 7):
two-buffer mode 2 (copy ``y``) + 5 (update and shift), one-buffer fold 3 + 4. The wrapper
walks them back to front in chunks (:func:`backwards`), so that they meet the end of the base
step's sweep still in cache.
"""

from __future__ import annotations

import torch

_FUSED = hasattr(torch, "_fused_sgd_")
#: Chunk length of :func:`backwards`, in elements: 1 MiB of float32, a multiple of every
#: vector width (so the fused kernel's scalar tail stays at the tensor's own end).
CHUNK = 1 << 18
#: Below this ``gamma + (1 - gamma) beta``, :func:`fold_in` does not divide by it.
_MIN_SCALE = 1e-6


def backwards(*lists: list[torch.Tensor]) -> list[list[torch.Tensor]]:
    """The lists' tensors as views of at most :data:`CHUNK` elements, last chunk first.

    Base optimizers sweep their parameters front to back, so right after the base step the
    cache holds the end of that sweep; an update walking back from there reuses it, and the
    update before the step ends at the front, where the base's sweep begins. Every list is cut
    alike (position ``i`` of each output pairs the same elements); a tensor that is not
    contiguous in every list stays whole. Views only: no memory is allocated.
    """
    if all(t.numel() <= CHUNK for t in lists[0]):  # nothing to cut (small models)
        return [ts[::-1] for ts in lists]
    out: list[list[torch.Tensor]] = [[] for _ in lists]
    for same in zip(*lists, strict=True):
        if same[0].numel() > CHUNK and all(t.is_contiguous() for t in same):
            pieces = [t.detach().view(-1).split(CHUNK) for t in same]
        else:
            pieces = [(t,) for t in same]
        for chunks, piece in zip(out, pieces, strict=True):
            chunks.extend(piece)
    return [chunks[::-1] for chunks in out]


def _compiling() -> bool:
    is_compiling = getattr(torch.compiler, "is_compiling", None)
    return bool(is_compiling and is_compiling())


def fusable(*lists: list[torch.Tensor]) -> bool:
    """True when one fused kernel can take all tensors (one dtype, one CPU/CUDA device).

    Never under ``torch.compile``: dynamo does not trace ``torch._fused_sgd_``, and the
    ``foreach`` form (bit for bit the same arithmetic, tested) is what inductor fuses itself.
    """
    first = lists[0][0]
    if not _FUSED or first.device.type not in ("cpu", "cuda") or _compiling():
        return False
    return all(t.dtype == first.dtype and t.device == first.device for ts in lists for t in ts)


def _fused_sgd(params, grads, bufs, *, weight_decay, momentum, lr, dampening) -> None:  # noqa: ANN001
    torch._fused_sgd_(
        params,
        grads,
        bufs,
        weight_decay=weight_decay,
        momentum=momentum,
        lr=lr,
        dampening=dampening,
        nesterov=False,
        maximize=False,
        is_first_step=False,
    )


def shift(p: torch.Tensor, m: torch.Tensor, alpha: float) -> None:
    """``p <- p + alpha m`` (computed in the wider of the two dtypes).

    Complex tensors are updated through ``view_as_real``: a real ``alpha`` scales both parts
    exactly as on the real view (complex multiplication by ``alpha + 0j`` may round otherwise).
    """
    if p.is_complex():
        p, m = torch.view_as_real(p), torch.view_as_real(m)
    if p.dtype == m.dtype:
        p.add_(m, alpha=alpha)
    else:
        p.copy_(p.to(m.dtype).add_(m, alpha=alpha))


def save_point(ps: list[torch.Tensor], ys: list[torch.Tensor]) -> None:
    """Two-buffer mode, before the base step: ``y <- p`` (the lookahead point)."""
    torch._foreach_copy_(ys, ps)


def _add(ms: list[torch.Tensor], ps: list[torch.Tensor], alpha: float) -> None:
    """``m <- m + alpha p`` in the buffers' dtype (one foreach call where the dtypes agree)."""
    if all(p.dtype == m.dtype for p, m in zip(ps, ms, strict=True)):
        torch._foreach_add_(ms, ps, alpha=alpha)
    else:
        for p, m in zip(ps, ms, strict=True):
            m.add_(p.to(m.dtype), alpha=alpha)


def fold_in(ps: list[torch.Tensor], ms: list[torch.Tensor], gamma: float, beta: float) -> float:
    """One-buffer fold, before the base step; returns the ``scale`` :func:`fold_out` takes.

    The fold is ``m <- c m - (1 - gamma) y`` with ``c = gamma + (1 - gamma) beta``; it is kept
    as ``m - ((1 - gamma) / c) y`` (one pass of 3 reads+writes) and multiplied by ``c``
    inside :func:`fold_out`'s pass. The same number up to rounding (the fold is not bit-exact
    anyway: it cancels ``y`` out again after the step); the rounding stays that of ``y`` times
    ``1 - gamma`` for every ``c``. Where ``c`` is ~0 (``gamma = 0``, ``beta = 0``) the fold is
    applied as it stands and the scale is 1.
    """
    a = 1.0 - gamma
    c = gamma + a * beta
    if c >= _MIN_SCALE:
        _add(ms, ps, -a / c)
        return c
    torch._foreach_mul_(ms, c)
    _add(ms, ps, -a)
    return 1.0


def fold_out(
    ps: list[torch.Tensor],
    ms: list[torch.Tensor],
    gamma: float,
    b_next: float,
    scale: float = 1.0,
    fused: bool = True,
) -> None:
    """One-buffer fold, after the base step: ``m <- scale m + (1 - gamma) p; p <- p + b_next m``.

    Bit for bit the same as the ``foreach`` calls (tested).
    """
    a = 1.0 - gamma
    if fused and b_next != 0.0 and fusable(ps, ms):
        # grad := p (read before p is written, element by element): buf <- scale buf + a p,
        # then p <- p + b_next * buf; 1 - dampening = 1 - gamma is a itself.
        _fused_sgd(ps, ps, ms, weight_decay=0.0, momentum=scale, lr=-b_next, dampening=gamma)
        return
    if scale != 1.0:
        torch._foreach_mul_(ms, scale)
    if all(p.dtype == m.dtype for p, m in zip(ps, ms, strict=True)):
        torch._foreach_add_(ms, ps, alpha=a)
        if b_next != 0.0:
            torch._foreach_add_(ps, ms, alpha=b_next)
        return
    for p, m in zip(ps, ms, strict=True):
        m.add_(p.to(m.dtype), alpha=a)
        if b_next != 0.0:
            shift(p, m, b_next)


def ema_update(
    ps: list[torch.Tensor],
    ys: list[torch.Tensor],
    ms: list[torch.Tensor],
    gamma: float,
    b: float,
    b_next: float,
    fused: bool = True,
) -> None:
    """Two-buffer mode, after the base step (``p`` holds theta_{t+1}, ``y`` holds y_t).

    The increment is ``theta_{t+1} - theta_t = p - y + b m``, so
    ``m <- (gamma + (1 - gamma) b) m + (1 - gamma) (p - y)``; then ``p <- p + b_next m``.
    The fused form is bit for bit the ``foreach`` one in float32 (tested); ``y`` is left as is.
    """
    a = 1.0 - gamma
    coeff = gamma + a * b
    if fused and b_next != 0.0 and fusable(ps, ys, ms):
        # grad := y, wd -1: d = y - p; buf <- coeff * m - a * d; p <- p + b_next * buf
        _fused_sgd(ps, ys, ms, weight_decay=-1.0, momentum=coeff, lr=-b_next, dampening=1.0 + a)
        return
    if all(p.dtype == m.dtype == y.dtype for p, m, y in zip(ps, ms, ys, strict=True)):
        torch._foreach_sub_(ys, ps)  # y <- y_t - theta_{t+1}
        torch._foreach_mul_(ms, coeff)
        torch._foreach_add_(ms, ys, alpha=-a)
        if b_next != 0.0:
            torch._foreach_add_(ps, ms, alpha=b_next)
        return
    for p, m, y in zip(ps, ms, ys, strict=True):
        m.mul_(coeff).add_(p.to(m.dtype) - y.to(m.dtype), alpha=a)
        if b_next != 0.0:
            shift(p, m, b_next)
