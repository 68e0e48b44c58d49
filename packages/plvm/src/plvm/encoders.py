"""Per-task encoders ``E_t: (X, mask) -> (mu_t, logvar_t)`` (plain ``nn.Module`` s).

``X`` is ``(N, L, F)`` padded event features and ``mask`` ``(N, L)`` marks real events.
Padded events never change the output. ``.embed(X, mask)`` returns the pooled state that the
no-fusion baseline concatenates.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["DeepSetsEncoder", "GRUEncoder"]


class DeepSetsEncoder(nn.Module):
    """Event MLP, masked mean + max pooling, log event count, then a head to ``(mu, logvar)``.

    Args:
        n_features: ``F``.
        latent_dim: ``D``.
        hidden: Width of the event MLP and of the head.
    """

    def __init__(self, n_features: int, latent_dim: int, hidden: int = 32) -> None:
        super().__init__()
        self.event = nn.Sequential(
            nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
        )
        self.embed_dim = 2 * hidden + 1
        self.head = nn.Sequential(
            nn.Linear(self.embed_dim, hidden), nn.ReLU(), nn.Linear(hidden, 2 * latent_dim)
        )

    def embed(self, X: Tensor, mask: Tensor) -> Tensor:
        """Pooled state ``(N, 2 * hidden + 1)``: masked mean, masked max, log(1 + count)."""
        h = self.event(X)
        m = mask.unsqueeze(-1).to(h.dtype)
        count = m.sum(1)
        mean = (h * m).sum(1) / count.clamp(min=1.0)
        neg = torch.finfo(h.dtype).min
        mx = torch.where(mask.unsqueeze(-1), h, torch.full_like(h, neg)).amax(1)
        mx = torch.where(count > 0, mx, torch.zeros_like(mx))
        return torch.cat([mean, mx, torch.log1p(count)], -1)

    def forward(self, X: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """``(mu, logvar)``, each ``(N, D)``."""
        mu, logvar = self.head(self.embed(X, mask)).chunk(2, -1)
        return mu, logvar.clamp(-8.0, 8.0)


class GRUEncoder(nn.Module):
    """GRU over the real events; the hidden state after the last real event feeds the head.

    Several times slower than :class:`DeepSetsEncoder` on CPU.
    """

    def __init__(self, n_features: int, latent_dim: int, hidden: int = 32) -> None:
        super().__init__()
        self.gru = nn.GRU(n_features, hidden, batch_first=True)
        self.embed_dim = hidden + 1
        self.head = nn.Sequential(
            nn.Linear(self.embed_dim, hidden), nn.ReLU(), nn.Linear(hidden, 2 * latent_dim)
        )

    def embed(self, X: Tensor, mask: Tensor) -> Tensor:
        """Last real hidden state and log(1 + count), ``(N, hidden + 1)``."""
        lengths = mask.sum(1)
        out, _ = self.gru(X * mask.unsqueeze(-1).to(X.dtype))
        idx = (lengths - 1).clamp(min=0)
        last = out[torch.arange(len(X), device=X.device), idx]
        last = torch.where((lengths > 0).unsqueeze(-1), last, torch.zeros_like(last))
        return torch.cat([last, torch.log1p(lengths.to(X.dtype)).unsqueeze(-1)], -1)

    def forward(self, X: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """``(mu, logvar)``, each ``(N, D)``."""
        mu, logvar = self.head(self.embed(X, mask)).chunk(2, -1)
        return mu, logvar.clamp(-8.0, 8.0)
