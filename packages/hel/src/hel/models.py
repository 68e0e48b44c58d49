"""``EchoRNN``: a recurrent cell unrolled with the leapfrog integrator plus a readout head."""

from __future__ import annotations

import torch
from torch import nn

from hel.cells import ForceCell, leapfrog_step

__all__ = ["READOUTS", "EchoRNN"]

READOUTS = ("mean", "last", "sequence")


class EchoRNN(nn.Module):
    """A recurrent network ``cell`` integrated with leapfrog steps, read out on positions.

    The state after step ``t`` (``t = 1..T``) is ``(phi_t, pi_t)``; the head sees
    ``mean_t phi_t`` (``readout="mean"``), ``phi_T`` (``"last"``) or every ``phi_t``
    (``"sequence"``). Plain autograd through :meth:`forward` is the BPTT reference; the
    estimators in :mod:`hel._hel` and :mod:`hel.baselines` fill the same ``.grad`` fields.

    Args:
        cell: The recurrent core (a :class:`~hel.cells.ForceCell`).
        output_size: Output features of the default linear head.
        readout: ``"mean"``, ``"last"`` or ``"sequence"``.
        head: Optional module mapping ``(..., n)`` positions to outputs (default ``nn.Linear``).

    Example:
        >>> import torch
        >>> from hel import EchoRNN, HopfieldOscillatorCell
        >>> model = EchoRNN(HopfieldOscillatorCell(1, 8), output_size=3)
        >>> model(torch.randn(4, 20, 1)).shape
        torch.Size([4, 3])
    """

    def __init__(
        self,
        cell: ForceCell,
        output_size: int,
        readout: str = "mean",
        head: nn.Module | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(cell, ForceCell):
            raise TypeError(
                f"cell must be a hel ForceCell/HamiltonianCell, got {type(cell).__name__}"
            )
        if readout not in READOUTS:
            raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
        if isinstance(output_size, bool) or not isinstance(output_size, int) or output_size < 1:
            raise ValueError(f"output_size must be an integer >= 1, got {output_size!r}")
        self.cell = cell
        self.readout = readout
        self.output_size = output_size
        self.head = head if head is not None else nn.Linear(cell.hidden_size, output_size)

    def check_input(self, x: torch.Tensor) -> None:
        """Validate a batch-first input ``(B, T, m)``.

        Raises:
            TypeError: If ``x`` is not a floating tensor.
            ValueError: On a wrong rank, feature size, an empty batch, ``T == 0`` or
                non-finite values.
        """
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 3:
            raise ValueError(f"x must be 3-D (batch, time, features), got shape {tuple(x.shape)}")
        if x.shape[2] != self.cell.input_size:
            raise ValueError(
                f"x has {x.shape[2]} features but the cell's input_size is {self.cell.input_size}"
            )
        if x.shape[0] == 0:
            raise ValueError("x is an empty batch (batch size 0); need at least one sequence")
        if x.shape[1] == 0:
            raise ValueError("x has T = 0 time steps; need T >= 1")
        if x.dtype in (torch.float16, torch.bfloat16):
            raise TypeError(f"x has dtype {x.dtype}; the echo needs float32 or float64 state")
        if not x.is_floating_point():
            raise TypeError(f"x must be a floating tensor, got dtype {x.dtype}")
        if not torch.isfinite(x).all():
            raise ValueError("x contains NaN or inf")

    def initial_state(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Zero ``(phi0, pi0)`` on ``x``'s device and dtype, or the given state."""
        if state is not None:
            phi0, pi0 = state
            shape = (x.shape[0], self.cell.hidden_size)
            if tuple(phi0.shape) != shape or tuple(pi0.shape) != shape:
                raise ValueError(f"state tensors must have shape {shape}")
            return phi0.to(x), pi0.to(x)
        z = x.new_zeros(x.shape[0], self.cell.hidden_size)
        return z, z.clone()

    def forward(
        self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor] | None = None
    ) -> torch.Tensor:
        """Run the network on ``x`` ``(B, T, m)``; returns ``(B, out)`` or ``(B, T, out)``."""
        self.check_input(x)
        phi, pi = self.initial_state(x, state)
        T = x.shape[1]
        outs = []
        acc = torch.zeros_like(phi)
        for t in range(T):
            phi, pi, _ = leapfrog_step(self.cell, phi, pi, x[:, t])
            if self.readout == "sequence":
                outs.append(self.head(phi))
            elif self.readout == "mean":
                acc = acc + phi
        if self.readout == "sequence":
            return torch.stack(outs, dim=1)
        if self.readout == "mean":
            return self.head(acc / T)
        return self.head(phi)

    def compute_loss(
        self, output: torch.Tensor, y: torch.Tensor, loss_fn: nn.Module
    ) -> torch.Tensor:
        """Loss of :meth:`forward`'s output.

        ``loss_fn(output, y)``, or for ``"sequence"`` ``mean_t loss_fn(output[:, t], y[:, t])``
        (the per-step decomposition the echo estimators use).
        """
        if self.readout != "sequence":
            return loss_fn(output, y)
        T = output.shape[1]
        return sum(loss_fn(output[:, t], y[:, t]) for t in range(T)) / T
