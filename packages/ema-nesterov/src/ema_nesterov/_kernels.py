"""The element-wise updates of one EMA-Nesterov step, with as few memory passes as torch allows.

Each function takes lists of same-shaped tensors (parameters ``ps``, EMA buffers ``ms``,
scratch copies ``ys``). Where all tensors share one dtype and a CPU/CUDA device, the arithmetic
runs in one pass through ``torch._fused_sgd_``: SGD with momentum computes
``d = grad + wd * param``, ``buf <- momentum * buf + (1 - dampening) * d`` and
``param <- param - lr * buf`` in a single kernel, which is exactly the shape of the EMA update
followed by the lookahead shift (the arguments below map one onto the other). Elsewhere
(other devices, mixed dtypes, a torch without the kernel) the same arithmetic runs as
``torch._foreach_*`` calls, or per tensor in the wider dtype.

Passes over memory per step, in parameter-sized reads + writes (AdamW's fused step is 7):
two-buffer mode 2 (copy ``y``) + 5 (update and shift), one-buffer fold 3 + 4.
"""

from __future__ import annotations

import torch

_FUSED = hasattr(torch, "_fused_sgd_")


def fusable(*lists: list[torch.Tensor]) -> bool:
    """True when one fused kernel can take all tensors (one dtype, one CPU/CUDA device)."""
    first = lists[0][0]
    if not _FUSED or first.device.type not in ("cpu", "cuda"):
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
    """``p <- p + alpha m`` (computed in the wider of the two dtypes)."""
    if p.dtype == m.dtype:
        p.add_(m, alpha=alpha)
    else:
        p.copy_(p.to(m.dtype).add_(m, alpha=alpha))


def save_point(ps: list[torch.Tensor], ys: list[torch.Tensor]) -> None:
    """Two-buffer mode, before the base step: ``y <- p`` (the lookahead point)."""
    torch._foreach_copy_(ys, ps)


def fold_in(
    ps: list[torch.Tensor], ms: list[torch.Tensor], gamma: float, beta: float, fused: bool = True
) -> None:
    """One-buffer fold, before the base step: ``m <- (gamma + (1 - gamma) beta) m - (1 - gamma) y``.

    The fused form computes ``m - (1 - gamma) (y + (1 - beta) m)``, the same number up to
    rounding (the fold is not bit-exact anyway: it cancels ``y`` out again after the step).
    """
    a = 1.0 - gamma
    if fused and fusable(ps, ms):
        # param := m, grad := y: m <- m - a * (y + (1 - beta) * m), momentum 0 (no buffer)
        _fused_sgd(ms, ps, [], weight_decay=1.0 - beta, momentum=0.0, lr=a, dampening=0.0)
    elif all(p.dtype == m.dtype for p, m in zip(ps, ms, strict=True)):
        torch._foreach_mul_(ms, gamma + a * beta)
        torch._foreach_add_(ms, ps, alpha=-a)
    else:
        for p, m in zip(ps, ms, strict=True):
            m.mul_(gamma + a * beta).add_(p.to(m.dtype), alpha=-a)


def fold_out(
    ps: list[torch.Tensor], ms: list[torch.Tensor], gamma: float, b_next: float, fused: bool = True
) -> None:
    """One-buffer fold, after the base step: ``m <- m + (1 - gamma) p``, then ``p <- p + b_next m``.

    Bit for bit the same as the two ``foreach`` calls (tested).
    """
    a = 1.0 - gamma
    if fused and b_next != 0.0 and fusable(ps, ms):
        # grad := p (read before p is written, element by element): buf <- buf + a * p,
        # then p <- p + b_next * buf; 1 - dampening = 1 - gamma is a itself.
        _fused_sgd(ps, ps, ms, weight_decay=0.0, momentum=1.0, lr=-b_next, dampening=gamma)
        return
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
