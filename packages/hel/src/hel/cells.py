"""Recurrent cells: position/momentum dynamics integrated with a reversible leapfrog step.

A cell holds the parameters of one recurrent layer and defines either a potential
``V(phi; theta, u)`` (:class:`HamiltonianCell`, usable with Hamiltonian Echo Learning) or only a
force field ``f(phi; theta, u)`` (:class:`ForceCell`, usable with Echo Learning). Positions
``phi`` and momenta ``pi`` are ``(B, n)`` tensors, inputs ``u`` are ``(B, m)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn.functional import softplus

__all__ = [
    "ForceCell",
    "HamiltonianCell",
    "HopfieldOscillatorCell",
    "RateEchoCell",
    "leapfrog_step",
]

_Act = tuple[
    Callable[[torch.Tensor], torch.Tensor], Callable[..., torch.Tensor], Callable[..., torch.Tensor]
]


# (sigma(x), sigma'(x, s), sigma''(x, s, d)) with s = sigma(x), d = sigma'(x); module-level
# functions (not lambdas) so that cells pickle.
def _dtanh(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return 1.0 - s * s


def _d2tanh(x: torch.Tensor, s: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    return -2.0 * s * d


def _dsigmoid(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return s * (1.0 - s)


def _d2sigmoid(x: torch.Tensor, s: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    return d * (1.0 - 2.0 * s)


def _dsin(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    return torch.cos(x)


def _d2sin(x: torch.Tensor, s: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    return -s


_ACTIVATIONS: dict[str, _Act] = {
    "tanh": (torch.tanh, _dtanh, _d2tanh),
    "sigmoid": (torch.sigmoid, _dsigmoid, _d2sigmoid),
    "sin": (torch.sin, _dsin, _d2sin),
}


def _check_positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value}")
    return float(value)


def _check_size(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return value


def _activation(name: str) -> _Act:
    if name not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {name!r}")
    return _ACTIVATIONS[name]


class ForceCell(nn.Module):
    r"""Base class of a recurrent cell defined by a position-dependent force ``f(phi; theta, u)``.

    Subclasses implement :meth:`force`. The leapfrog step

    .. math::
        \phi_{1/2} = \phi + \tfrac{h}{2}\pi,\quad
        \pi' = \pi + h\,(f(\phi_{1/2}; u) - \gamma\pi),\quad
        \phi' = \phi_{1/2} + \tfrac{h}{2}\pi'

    is time-reversible (flip ``pi``, step again, flip back) for any ``f`` when the damping
    ``gamma`` (attribute :attr:`damping`) is zero.

    Attributes:
        input_size: Number of input channels ``m``.
        hidden_size: Number of neurons ``n``.
        dt: Step size ``h``.
    """

    input_size: int
    hidden_size: int
    dt: float

    def __init__(self, input_size: int, hidden_size: int, dt: float = 0.2) -> None:
        super().__init__()
        self.input_size = _check_size("input_size", input_size)
        self.hidden_size = _check_size("hidden_size", hidden_size)
        self.dt = _check_positive("dt", dt)

    @property
    def damping(self) -> torch.Tensor | None:
        """Momentum damping ``gamma`` (``None`` for a conservative, reversible cell)."""
        return None

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """Within a pass without a graph: tensors derived from the parameters computed once.

        The echo estimators run each pass inside this context; a subclass whose force uses
        derived tensors (a symmetrised coupling, a softplus) caches them here. No-op default.
        """
        yield

    def force(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Force ``f(phi; theta, u)``, shape ``(B, n)``."""
        raise NotImplementedError

    def force_param_vjp(
        self, phi: torch.Tensor, u: torch.Tensor, cotangent: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Return ``(df/dtheta)^T cotangent`` for every parameter, summed over the batch.

        The default builds a one-step autograd graph; subclasses may override analytically.
        """
        params = tuple(self.parameters())
        with torch.enable_grad():
            f = self.force(phi.detach(), u)
            grads = torch.autograd.grad(f, params, grad_outputs=cotangent, allow_unused=True)
        return tuple(
            torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
        )

    def force_jvp(self, phi: torch.Tensor, u: torch.Tensor, tangent: torch.Tensor) -> torch.Tensor:
        """Directional derivative ``(df/dphi) tangent`` (forward mode, ``torch.func.jvp``)."""
        # jvp returns (primal_out, tangent_out) without has_aux; mypy sees a 2-or-3 tuple.
        result = torch.func.jvp(lambda p: self.force(p, u), (phi,), (tangent,))
        tangent_out: torch.Tensor = result[1]
        return tangent_out

    def jacobian_diagonal(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Diagonal of ``df/dphi`` (needed by e-prop); subclasses provide it analytically."""
        raise NotImplementedError(
            f"{type(self).__name__} has no analytic diagonal Jacobian block; EProp needs "
            "jacobian_diagonal(phi, u) and force_param_local(phi, u)"
        )

    def force_param_local(
        self, phi: torch.Tensor, u: torch.Tensor
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
        """Per-neuron immediate force derivatives ``(post, pre)`` per parameter (e-prop)."""
        raise NotImplementedError(
            f"{type(self).__name__} has no analytic per-neuron force derivatives; EProp needs "
            "jacobian_diagonal(phi, u) and force_param_local(phi, u)"
        )

    def jacobian(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Full force Jacobian ``J[b, i, j] = df_i/dphi_j`` (autograd, small ``n`` only)."""

        def single(p: torch.Tensor, uu: torch.Tensor) -> torch.Tensor:
            return self.force(p.unsqueeze(0), uu.unsqueeze(0)).squeeze(0)

        return torch.func.vmap(torch.func.jacrev(single))(phi, u)


class HamiltonianCell(ForceCell):
    """Base class of a conservative cell with separable Hamiltonian ``|pi|^2/2 + V(phi; theta, u)``.

    Subclasses implement :meth:`potential` (per sample, shape ``(B,)``); the force is
    ``-grad_phi V`` (autograd by default). Hamiltonian Echo Learning needs only
    ``grad_theta V`` at single points, taken here with one-step autograd graphs.
    """

    def potential(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Potential energy per sample, shape ``(B,)``."""
        raise NotImplementedError

    def force(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``-grad_phi V(phi, u)`` by autograd (differentiable w.r.t. the parameters)."""
        with torch.enable_grad():
            p = phi if phi.requires_grad else phi.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.potential(p, u).sum(), p, create_graph=True)
        return -g

    def potential_param_grad(
        self, phi: torch.Tensor, u: torch.Tensor, weight: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...]:
        """``sum_b weight_b * grad_theta V(phi_b, u_b)`` for every parameter (one-step graph)."""
        params = tuple(self.parameters())
        with torch.enable_grad():
            v = self.potential(phi.detach(), u)
            v = v.sum() if weight is None else (weight * v).sum()
            grads = torch.autograd.grad(v, params, allow_unused=True)
        return tuple(
            torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
        )


class HopfieldOscillatorCell(HamiltonianCell):
    r"""Dense Hopfield-style oscillator network (the HEL model; its form is inferred).

    .. math::
        V(\phi; u) = \sum_i \alpha_i \phi_i^2/2 - \tfrac12 s^\top W s - s^\top (B u + b),\quad
        s = \sigma(\phi),\ W = (A + A^\top)/2,\ \alpha = \mathrm{softplus}(\alpha_{raw}).

    ``V`` is a sum of per-neuron and per-synapse terms, so ``dV/dA = -s s^T/2``,
    ``dV/dB = -s u^T``, ``dV/db = -s``: the echo rule is a contrastive Hebbian update.

    Args:
        input_size: Input channels ``m``.
        hidden_size: Neurons ``n``.
        dt: Leapfrog step ``h`` (> 0).
        activation: ``"tanh"``, ``"sigmoid"`` or ``"sin"``.
        alpha_range: Range of the initial stiffnesses ``alpha`` (uniform).
        init_scale: Spectral scale of the initial recurrent weights (``A ~ N(0, scale^2/n)``).
        generator: Optional ``torch.Generator`` for the initialisation.
    """

    eprop_symmetric = ("A",)

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        dt: float = 0.2,
        activation: str = "tanh",
        alpha_range: tuple[float, float] = (0.5, 1.5),
        init_scale: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(input_size, hidden_size, dt)
        self.sigma, self.dsigma, self.d2sigma = _activation(activation)
        self.activation = activation
        lo, hi = alpha_range
        if not 0 < lo <= hi:
            raise ValueError(f"alpha_range must satisfy 0 < low <= high, got {alpha_range}")
        init_scale = _check_positive("init_scale", init_scale)
        n, m = hidden_size, input_size
        alpha = lo + (hi - lo) * torch.rand(n, generator=generator)
        self.A = nn.Parameter(torch.randn(n, n, generator=generator) * init_scale / math.sqrt(n))
        self.B = nn.Parameter(torch.randn(n, m, generator=generator) / math.sqrt(m))
        self.b = nn.Parameter(torch.zeros(n))
        self.alpha_raw = nn.Parameter(alpha + torch.log(-torch.expm1(-alpha)))  # softplus^-1
        self._derived: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def W(self) -> torch.Tensor:  # noqa: N802
        """Symmetric recurrent weight matrix ``(A + A^T)/2``."""
        return 0.5 * (self.A + self.A.T)

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """Build ``W = (A + A^T)/2`` and ``alpha = softplus(alpha_raw)`` once for a whole pass."""
        with torch.no_grad():
            self._derived = (self.W, softplus(self.alpha_raw))
        try:
            yield
        finally:
            self._derived = None

    def _coupling(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._derived is not None and not torch.is_grad_enabled():
            return self._derived
        return self.W, softplus(self.alpha_raw)

    def potential(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:  # noqa: D102
        s = self.sigma(phi)
        alpha = softplus(self.alpha_raw)
        quad = 0.5 * (alpha * phi * phi).sum(-1)
        rec = 0.5 * (s * (s @ self.W)).sum(-1)
        drive = (s * (u @ self.B.T + self.b)).sum(-1)
        return quad - rec - drive

    def force(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Analytic ``-grad_phi V = -alpha phi + sigma'(phi) (W s + B u + b)``."""
        W, alpha = self._coupling()
        s = self.sigma(phi)
        return -alpha * phi + self.dsigma(phi, s) * (s @ W + u @ self.B.T + self.b)

    def force_jvp(self, phi: torch.Tensor, u: torch.Tensor, tangent: torch.Tensor) -> torch.Tensor:
        """Analytic ``(df/dphi) v = -alpha v + sigma'' v (W s + B u + b) + sigma' W (sigma' v)``."""
        W, alpha = self._coupling()
        s = self.sigma(phi)
        d = self.dsigma(phi, s)
        drive = s @ W + u @ self.B.T + self.b
        return (
            -alpha * tangent + self.d2sigma(phi, s, d) * tangent * drive + d * ((d * tangent) @ W)
        )

    def potential_param_grad(
        self, phi: torch.Tensor, u: torch.Tensor, weight: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, ...]:
        """Analytic local statistics: ``(-s s^T/2, -s u^T, -s, phi^2/2 * sigmoid(alpha_raw))``."""
        s = self.sigma(phi)
        ws = s if weight is None else s * weight[:, None]
        wphi2 = phi * phi if weight is None else phi * phi * weight[:, None]
        g_A = -0.5 * ws.T @ s
        g_B = -ws.T @ u
        g_b = -ws.sum(0)
        g_alpha = 0.5 * wphi2.sum(0) * torch.sigmoid(self.alpha_raw)
        return g_A, g_B, g_b, g_alpha

    def force_param_vjp(
        self, phi: torch.Tensor, u: torch.Tensor, cotangent: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Analytic ``(df/dtheta)^T c``, summed over the batch.

        With ``q = c sigma'(phi)`` and ``G = q^T s``: ``(sym(G), q^T u, sum_b q,
        -sum_b c phi * sigmoid(alpha_raw))`` (one-step autograd would build a graph).
        """
        s = self.sigma(phi)
        q = cotangent * self.dsigma(phi, s)
        G = q.T @ s
        g_alpha = -(cotangent * phi).sum(0) * torch.sigmoid(self.alpha_raw)
        return 0.5 * (G + G.T), q.T @ u, q.sum(0), g_alpha

    def jacobian_diagonal(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """``df_i/dphi_i`` (analytic; used by e-prop)."""
        s = self.sigma(phi)
        d = self.dsigma(phi, s)
        drive = s @ self.W + u @ self.B.T + self.b
        return (
            -softplus(self.alpha_raw)
            + self.d2sigma(phi, s, d) * drive
            + d * d * torch.diagonal(self.W)
        )

    def force_param_local(
        self, phi: torch.Tensor, u: torch.Tensor
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
        """Per-neuron immediate force derivatives for e-prop (``W`` treated as unconstrained).

        Returns, per parameter name, ``(post, pre)``: ``df_i/dW_ij = post_i * pre_j`` etc.;
        ``pre`` is ``None`` for per-neuron parameters.
        """
        s = self.sigma(phi)
        d = self.dsigma(phi, s)
        return {
            "A": (d, s),
            "B": (d, u),
            "b": (d, None),
            "alpha_raw": (-phi * torch.sigmoid(self.alpha_raw), None),
        }


class RateEchoCell(ForceCell):
    r"""Non-conservative rate cell for Echo Learning (inferred form).

    .. math:: f(\phi; u) = -\alpha\phi + W\sigma(\phi) + B u + b

    with an unconstrained (non-symmetric) ``W``. The force Jacobian
    ``J_ij = -alpha delta_ij + W_ij sigma'(phi_j)`` is symmetric only when the homeostatic loss
    (:func:`hel.homeostatic_loss`) is driven to zero. A nonzero ``leak`` adds a learnable
    momentum damping ``gamma`` that breaks reversibility.

    Args:
        input_size: Input channels ``m``.
        hidden_size: Neurons ``n``.
        dt: Leapfrog step ``h`` (> 0).
        activation: ``"tanh"``, ``"sigmoid"`` or ``"sin"``.
        leak: Initial momentum damping (0 disables it; > 0 makes it a parameter).
        init_scale: Scale of the initial recurrent weights.
        generator: Optional ``torch.Generator`` for the initialisation.
    """

    alpha: torch.Tensor  # registered buffer (fixed unit restoring force)

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        dt: float = 0.2,
        activation: str = "tanh",
        leak: float = 0.0,
        init_scale: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__(input_size, hidden_size, dt)
        self.sigma, self.dsigma, self.d2sigma = _activation(activation)
        self.activation = activation
        if leak < 0:
            raise ValueError(f"leak must be >= 0, got {leak}")
        n, m = hidden_size, input_size
        self.W = nn.Parameter(torch.randn(n, n, generator=generator) * init_scale / math.sqrt(n))
        self.B = nn.Parameter(torch.randn(n, m, generator=generator) / math.sqrt(m))
        self.b = nn.Parameter(torch.zeros(n))
        self.register_buffer("alpha", torch.ones(n))
        self.leak = nn.Parameter(torch.tensor(float(leak))) if leak > 0 else None

    @property
    def damping(self) -> torch.Tensor | None:  # noqa: D102
        return self.leak

    def force(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:  # noqa: D102
        return -self.alpha * phi + self.sigma(phi) @ self.W.T + u @ self.B.T + self.b

    def force_jvp(self, phi: torch.Tensor, u: torch.Tensor, tangent: torch.Tensor) -> torch.Tensor:
        """Analytic ``(df/dphi) v = -alpha v + (sigma'(phi) v) W^T``."""
        d = self.dsigma(phi, self.sigma(phi))
        return -self.alpha * tangent + (d * tangent) @ self.W.T

    def jacobian(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Analytic ``J[b, i, j] = -alpha_i delta_ij + W_ij sigma'(phi_j)``."""
        d = self.dsigma(phi, self.sigma(phi))
        return self.W.unsqueeze(0) * d.unsqueeze(1) - torch.diag_embed(self.alpha.expand_as(phi))

    def jacobian_diagonal(self, phi: torch.Tensor, u: torch.Tensor) -> torch.Tensor:  # noqa: D102
        d = self.dsigma(phi, self.sigma(phi))
        return torch.diagonal(self.W) * d - self.alpha

    def force_param_local(
        self, phi: torch.Tensor, u: torch.Tensor
    ) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
        """Per-neuron immediate force derivatives for e-prop (see HopfieldOscillatorCell)."""
        ones = torch.ones_like(phi)
        out: dict[str, tuple[torch.Tensor, torch.Tensor | None]] = {
            "W": (ones, self.sigma(phi)),
            "B": (ones, u),
            "b": (ones, None),
        }
        if self.leak is not None:
            raise NotImplementedError("EProp does not support RateEchoCell with leak > 0")
        return out


def leapfrog_step(
    cell: ForceCell, phi: torch.Tensor, pi: torch.Tensor, u: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One reversible leapfrog (position Verlet) step of ``cell`` with input ``u``.

    Args:
        cell: The recurrent cell (its ``dt`` is the step ``h``).
        phi: Positions ``(B, n)``.
        pi: Momenta ``(B, n)``.
        u: Input ``(B, m)``.

    Returns:
        ``(phi', pi', phi_half)``; ``phi_half`` is where the force was evaluated.
    """
    h = cell.dt
    phi_half = phi + 0.5 * h * pi
    force = cell.force(phi_half, u)
    gamma = cell.damping
    if gamma is not None:
        force = force - gamma * pi
    pi_new = pi + h * force
    phi_new = phi_half + 0.5 * h * pi_new
    return phi_new, pi_new, phi_half
