"""Baselines: ConvLSTM (deterministic, EarthNet2021 family), persistence, NDVI climatology.

The undifferentiated-diffusion baseline is :class:`~eo_wm.model.EOWorldModel` with
``conditioning="undifferentiated"``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from numpy.typing import ArrayLike
from torch import Tensor, nn

from eo_wm._validation import check_mask


class ConvLSTMCell(nn.Module):
    """One ConvLSTM cell (3x3 gates)."""

    def __init__(self, c_in: int, hidden: int) -> None:
        super().__init__()
        self.hidden = hidden
        self.gates = nn.Conv2d(c_in + hidden, 4 * hidden, 3, padding=1)

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        """One step: the new ``(h, c)`` from input ``x`` and the previous state."""
        h, c = state
        i, f, o, g = self.gates(torch.cat([x, h], 1)).chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class ConvLSTMForecaster(nn.Module):
    """Deterministic direct multi-step ConvLSTM with weather broadcast as input channels.

    Encoder steps read ``[frame (cloudy pixels zeroed), mask, static, weather_t, sin d, cos d]``;
    decoder steps read ``[static, weather_t, sin d, cos d]`` (no feedback of predictions) and
    emit the residual to the last clean context pixel. Trained with a masked L1 loss.

    Args:
        in_channels: Bands ``C``.
        static_channels: Static maps ``C_s``.
        n_weather: Weather variables ``m``.
        t_future: Forecast steps.
        hidden: ConvLSTM channels.
    """

    band_mean: Tensor
    band_std: Tensor
    static_mean: Tensor
    static_std: Tensor
    weather_mean: Tensor
    weather_std: Tensor

    def __init__(
        self,
        in_channels: int,
        static_channels: int,
        n_weather: int,
        t_future: int,
        hidden: int = 32,
    ) -> None:
        super().__init__()
        self.t_future, self.C = t_future, in_channels
        extra = static_channels + n_weather + 2
        self.enc = ConvLSTMCell(in_channels + 1 + extra, hidden)
        self.dec = ConvLSTMCell(extra + in_channels, hidden)
        self.head = nn.Conv2d(hidden, in_channels, 1)
        for name, size in (
            ("band", in_channels),
            ("static", static_channels),
            ("weather", n_weather),
        ):
            self.register_buffer(f"{name}_mean", torch.zeros(size))
            self.register_buffer(f"{name}_std", torch.ones(size))

    def set_normalization(self, **stats: Tensor) -> None:
        """Same buffers as :meth:`EOWorldModel.set_normalization` (extra keys are ignored)."""
        for k, v in stats.items():
            if hasattr(self, k):
                getattr(self, k).copy_(torch.as_tensor(v, dtype=torch.float32))

    def forward(
        self, context: Tensor, context_mask: Tensor, static: Tensor, weather: Tensor, doy: Tensor
    ) -> Tensor:
        """Forecast ``(B, T_f, C, H, W)`` in raw units; ``weather``/``doy`` cover T_c + T_f."""
        check_mask(context_mask, context.shape, "context_mask")
        B, Tc, C, H, W = context.shape
        if weather.shape[1] != Tc + self.t_future:
            raise ValueError(
                f"weather must cover t_context + t_future = {Tc + self.t_future} "
                f"steps, got {weather.shape[1]}"
            )
        bm, bs = self.band_mean[:, None, None], self.band_std[:, None, None]
        x = (context - bm) / bs * context_mask
        st = (static - self.static_mean[:, None, None]) / self.static_std[:, None, None]
        w = (weather - self.weather_mean) / self.weather_std
        ang = 2 * torch.pi * doy / 365.0
        met = torch.cat([w, torch.sin(ang)[..., None], torch.cos(ang)[..., None]], -1)
        met = met[..., None, None].expand(-1, -1, -1, H, W)
        h = x.new_zeros(B, self.enc.hidden, H, W)
        state = (h, h.clone())
        last = x.new_zeros(B, C, H, W)
        for t in range(Tc):
            m = context_mask[:, t]
            last = torch.where(m > 0.5, x[:, t], last)
            state = self.enc(torch.cat([x[:, t], m, st, met[:, t]], 1), state)
        outs = []
        for t in range(self.t_future):
            state = self.dec(torch.cat([st, met[:, Tc + t], last], 1), state)
            outs.append(last + self.head(state[0]))
        return torch.stack(outs, 1) * bs + bm


def train_convlstm(
    model: ConvLSTMForecaster,
    dataset: Mapping[str, Tensor],
    steps: int,
    batch_size: int = 16,
    lr: float = 2e-4,
    generator: torch.Generator | None = None,
) -> list[float]:
    """AdamW on the masked L1 loss (in normalised units); returns the loss per step."""
    from eo_wm.train import normalization_stats

    model.set_normalization(**normalization_stats(dataset))
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    n = dataset["context"].shape[0]
    bs = model.band_std[:, None, None]
    losses = []
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, n, (batch_size,), generator=generator)
        pred = model(
            dataset["context"][idx],
            dataset["context_mask"][idx],
            dataset["static"][idx],
            dataset["weather"][idx],
            dataset["doy"][idx],
        )
        m = dataset["target_mask"][idx].expand_as(pred)
        loss = ((pred - dataset["target"][idx]).abs() / bs * m).sum() / m.sum().clamp_min(1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def predict_convlstm(
    model: ConvLSTMForecaster, dataset: Mapping[str, Tensor], batch_size: int = 64
) -> Tensor:
    """Forecasts ``(N, T_f, C, H, W)`` for every window."""
    n = dataset["context"].shape[0]
    out = [
        model(
            *(
                dataset[k][i : i + batch_size]
                for k in ("context", "context_mask", "static", "weather", "doy")
            )
        )
        for i in range(0, n, batch_size)
    ]
    return torch.cat(out)


def persistence_forecast(context: ArrayLike, context_mask: ArrayLike, t_future: int) -> np.ndarray:
    """Last valid context pixel repeated ``t_future`` times.

    ``context (..., T_c, C, H, W)`` gives ``(..., t_future, C, H, W)``.

    Pixels never seen in the context take the mean of the valid context pixels of that band.
    """
    x = np.asarray(context, dtype=np.float64)
    m = np.asarray(context_mask, dtype=np.float64)
    check_mask(m, x.shape, "context_mask")
    valid = np.broadcast_to(m > 0.5, x.shape)
    last = np.full(x.shape[:-4] + x.shape[-3:], np.nan)
    for t in range(x.shape[-4]):
        last = np.where(valid[..., t, :, :, :], x[..., t, :, :, :], last)
    with np.errstate(invalid="ignore"):
        fill = np.nanmean(np.where(valid, x, np.nan), axis=(-4, -2, -1), keepdims=True)[
            ..., 0, :, :, :
        ]
    last = np.where(np.isnan(last), np.nan_to_num(fill, nan=0.0), last)
    return np.repeat(last[..., None, :, :, :], t_future, axis=-4)


def climatology_forecast(
    history_ndvi: ArrayLike, history_mask: ArrayLike | None = None
) -> np.ndarray:
    """Per-pixel NDVI climatology: mean over past years of the same location and day of year.

    Args:
        history_ndvi: ``(Y, ..., T_f, H, W)``: NDVI of the forecast steps in ``Y`` other years.
        history_mask: Validity of those pixels (1 = valid), same shape or with a singleton
            band axis; cloudy values are ignored.

    Returns:
        ``(..., T_f, H, W)``; NaN where no year saw the pixel.
    """
    h = np.asarray(history_ndvi, dtype=np.float64)
    if history_mask is not None:
        m = np.asarray(history_mask, dtype=np.float64)
        if m.ndim == h.ndim + 1:
            m = m[..., 0, :, :]
        h = np.where(m > 0.5, h, np.nan)
    with np.errstate(invalid="ignore"), np.testing.suppress_warnings() as sup:
        sup.filter(RuntimeWarning)
        return np.nanmean(h, axis=0)
