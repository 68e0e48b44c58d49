"""Tiny velocity networks and conditional flow matching training (offline, CPU-sized)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MLPVelocity", "train_flow_matching"]


class MLPVelocity(nn.Module):
    """MLP velocity field ``v(x, t)`` with the time concatenated to the input (SiLU).

    Args:
        dim: Data dimension (flat).
        hidden: Width of the hidden layers.
        n_layers: Number of hidden layers (>= 1).

    Example:
        >>> import torch
        >>> net = MLPVelocity(2, hidden=16, n_layers=2)
        >>> net(torch.zeros(5, 2), torch.zeros(5)).shape
        torch.Size([5, 2])
    """

    def __init__(self, dim: int, hidden: int = 128, n_layers: int = 3) -> None:
        super().__init__()
        if dim < 1 or hidden < 1 or n_layers < 1:
            raise ValueError(
                f"dim, hidden and n_layers must be >= 1, got {dim}, {hidden}, {n_layers}"
            )
        layers: list[nn.Module] = [nn.Linear(dim + 1, hidden), nn.SiLU()]
        for _ in range(n_layers - 1):
            layers += [nn.Linear(hidden, hidden), nn.SiLU()]
        layers.append(nn.Linear(hidden, dim))
        self.net = nn.Sequential(*layers)
        self.dim: int = dim

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Return ``v(x, t)``; ``t`` is a scalar or of shape ``(batch,)``."""
        t = torch.as_tensor(t, dtype=x.dtype, device=x.device)
        if t.ndim == 0:
            t = t.expand(x.shape[0])
        return self.net(torch.cat([x, t.reshape(-1, 1)], dim=-1))


def train_flow_matching(
    model: nn.Module,
    data: torch.Tensor,
    n_steps: int = 3000,
    batch_size: int = 512,
    lr: float = 1e-3,
    *,
    generator: torch.Generator | None = None,
    progress: bool | None = None,
) -> list[float]:
    r"""Train ``model(x, t)`` by conditional flow matching on the OT (linear) path.

    .. math:: x_t = (1 - t) x_0 + t x_1,\quad x_0 \sim N(0, I),\ x_1 \sim \text{data},\quad
              \mathcal{L} = \| v_\theta(x_t, t) - (x_1 - x_0) \|^2

    Args:
        model: Velocity network taking ``(x, t)``.
        data: Training samples ``(n, dim)``.
        n_steps: Adam steps.
        batch_size: Minibatch size.
        lr: Adam learning rate.
        generator: ``torch.Generator`` for minibatches, noise and times.
        progress: A bar over the steps: ``None`` (default) on a terminal only, ``True``
            always, ``False`` never (``TQDM_DISABLE=1`` silences it).

    Returns:
        The loss of every step.
    """
    from methodkit import progress as _progress

    if data.ndim != 2:
        raise ValueError(f"data must have shape (n, dim), got {tuple(data.shape)}")
    if n_steps < 1 or batch_size < 1 or not lr > 0:
        raise ValueError(f"invalid n_steps={n_steps}, batch_size={batch_size} or lr={lr}")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses: list[float] = []
    n = data.shape[0]
    model.train()
    for _ in _progress(range(n_steps), progress, desc="flow matching", total=n_steps):
        idx = torch.randint(0, n, (batch_size,), generator=generator)
        x1 = data[idx]
        x0 = torch.randn(x1.shape, generator=generator, dtype=x1.dtype)
        t = torch.rand(batch_size, generator=generator, dtype=x1.dtype)
        xt = (1 - t[:, None]) * x0 + t[:, None] * x1
        loss = ((model(xt, t) - (x1 - x0)) ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses
