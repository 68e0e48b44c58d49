r"""Deep Leakage from Gradients (DLG) with iDLG label inference, on observed coordinates only.

An observer holding some coordinates ``g[mask]`` of a single-example gradient optimises a
dummy input ``x'`` (and label) so that the dummy gradient matches on those coordinates:

.. math:: \min_{x'} \big\| (\nabla_\theta L(f_\theta(x'), y') - g) \odot m \big\|_2^2

References:
    Zhu, Liu, Han, "Deep Leakage from Gradients", NeurIPS 2019; Zhao, Mopuri, Bilen,
    "iDLG: Improved Deep Leakage from Gradients", 2020.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from methodkit import progress as show_progress


@dataclass
class DLGResult:
    """Reconstructed input, the label used, and the gradient-matching loss per step."""

    x: torch.Tensor
    label: int
    losses: list[float]


def _params(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def _check(model: nn.Module, observed: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    d = sum(p.numel() for p in _params(model))
    if observed.dim() != 1 or observed.numel() != d:
        raise ValueError(
            f"observed must be 1-D of length {d} (the model's trainable parameters), "
            f"got {tuple(observed.shape)}"
        )
    if mask is None:
        return torch.ones(d, dtype=torch.bool, device=observed.device)
    if mask.dim() != 1 or mask.numel() != d:
        raise ValueError(f"mask must be 1-D of length {d}, got {tuple(mask.shape)}")
    return mask.to(device=observed.device, dtype=torch.bool)


def infer_label(model: nn.Module, observed: torch.Tensor, mask: torch.Tensor | None = None) -> int:
    """iDLG: the true class is the output row whose observed last-layer gradient is negative.

    With cross-entropy, ``dL/dz_i = p_i - 1[i = y]``, negative only for ``y``; the last
    layer's weight row ``i`` is that times non-negative activations (sigmoid/ReLU) and its
    bias entry is exactly it. The observed entries of each row are summed; the smallest wins.

    Raises:
        ValueError: Bad lengths, or no observed coordinate in the last layer.
    """
    mask = _check(model, observed, mask)
    params = _params(model)
    offsets = [0]
    for p in params:
        offsets.append(offsets[-1] + p.numel())
    last_w = max(i for i, p in enumerate(params) if p.dim() == 2)
    rows = params[last_w].shape[0]
    score = torch.zeros(rows, dtype=observed.dtype, device=observed.device)
    seen = torch.zeros(rows, dtype=torch.bool, device=observed.device)
    blocks = [last_w]
    if last_w + 1 < len(params) and params[last_w + 1].shape == (rows,):
        blocks.append(last_w + 1)
    for i in blocks:
        g = observed[offsets[i] : offsets[i + 1]].reshape(rows, -1)
        m = mask[offsets[i] : offsets[i + 1]].reshape(rows, -1)
        score += (g * m).sum(1)
        seen |= m.any(1)
    if not bool(seen.any()):
        raise ValueError("no observed coordinate in the last layer: cannot infer the label")
    score[~seen] = math.inf
    return int(score.argmin())


def dlg(
    model: nn.Module,
    observed: torch.Tensor,
    mask: torch.Tensor | None = None,
    label: int | None = None,
    shape: Sequence[int] = (1, 64),
    iters: int = 300,
    optimizer: str = "adam",
    lr: float = 0.05,
    generator: torch.Generator | None = None,
    progress: bool | None = None,
) -> DLGResult:
    """Reconstruct one training example from (some coordinates of) its gradient.

    Args:
        model: The model at the parameters where the gradient was taken.
        observed: Flat gradient over the trainable parameters (``flatten(model,
            include_buffers=False)`` order); unobserved entries are ignored.
        mask: Boolean mask of the observed coordinates (``None`` = all).
        label: True label if known; otherwise inferred with :func:`infer_label` (iDLG),
            or, if no last-layer coordinate is observed, optimised jointly as soft logits (DLG).
        shape: Input shape, batch of one (e.g. ``(1, 64)``).
        iters: Optimisation steps.
        optimizer: ``"adam"`` or ``"lbfgs"``.
        lr: Step size.
        generator: For the random initial dummy input (uniform in [0, 1]).
        progress: A bar over the iterations: ``None`` (default) on a terminal only,
            ``True`` always, ``False`` never.

    Returns:
        :class:`DLGResult`.

    Raises:
        ValueError: Wrong ``observed``/``mask`` length or unknown optimizer.
    """
    if optimizer not in ("adam", "lbfgs"):
        raise ValueError(f"optimizer must be 'adam' or 'lbfgs', got {optimizer!r}")
    if iters < 1:
        raise ValueError(f"iters must be >= 1, got {iters}")
    mask = _check(model, observed, mask)
    params = _params(model)
    dtype = params[0].dtype
    target = observed.detach().to(dtype)[mask]
    soft = None
    if label is None:
        try:
            label = infer_label(model, observed, mask)
        except ValueError:
            n_out = [p for p in params if p.dim() == 2][-1].shape[0]
            soft = torch.zeros(1, n_out, dtype=dtype, requires_grad=True)
            label = -1
    x = torch.rand(tuple(shape), generator=generator, dtype=dtype).requires_grad_(True)
    variables = [x] if soft is None else [x, soft]
    opt: torch.optim.Optimizer
    if optimizer == "adam":
        opt = torch.optim.Adam(variables, lr=lr)
    else:
        opt = torch.optim.LBFGS(variables, lr=lr, max_iter=1)
    y = torch.tensor([max(label, 0)])
    losses: list[float] = []

    def closure() -> torch.Tensor:
        opt.zero_grad()
        out = model(x)
        if soft is None:
            loss = nn.functional.cross_entropy(out, y)
        else:
            loss = -(soft.softmax(-1) * out.log_softmax(-1)).sum()
        grads = torch.autograd.grad(loss, params, create_graph=True)
        flat = torch.cat([g.reshape(-1) for g in grads])[mask]
        match = (flat - target).pow(2).sum()
        match.backward()
        return match

    for _ in show_progress(range(iters), enabled=progress, desc="DLG", total=iters):
        losses.append(float(opt.step(closure).detach()))
    if soft is not None:
        label = int(soft.argmax())
    return DLGResult(x=x.detach(), label=int(label), losses=losses)


def psnr(x_hat: torch.Tensor, x: torch.Tensor, data_range: float = 1.0) -> float:
    """Peak signal-to-noise ratio in dB of ``x_hat`` (clipped to the data range) against ``x``."""
    mse = float((x_hat.clamp(0.0, data_range) - x).pow(2).mean())
    return math.inf if mse == 0 else 10.0 * math.log10(data_range**2 / mse)
