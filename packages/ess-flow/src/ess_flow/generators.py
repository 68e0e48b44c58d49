"""Deterministic generators ``z -> x`` built from velocity fields, and adapters to common APIs.

Convention (torchcfm / ``flow_matching``): ``t = 0`` is the Gaussian source, ``t = 1`` the data.
A :class:`FlowGenerator` integrates ``dx/dt = v(x, t)`` with a fixed-step solver, so the map
``T(z)`` is deterministic and ESS can run on ``z``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch

__all__ = [
    "FlowGenerator",
    "NoiseAugmentedGenerator",
    "from_callable",
    "from_flow_matching",
    "from_torchcfm",
]

Velocity = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_METHODS = ("euler", "midpoint", "rk4")


def _check_steps(n_steps: int) -> int:
    if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1:
        raise ValueError(f"n_steps must be an int >= 1, got {n_steps!r}")
    return n_steps


class FlowGenerator:
    """Fixed-step ODE solution ``T(z)`` of ``dx/dt = velocity(x, t)`` from ``x(t0) = z``.

    Runs under ``torch.inference_mode()``: no autograd graph is ever built, so the velocity
    model may be non-differentiable (quantized weights, a module whose backward raises).

    Args:
        velocity: Callable ``velocity(x, t) -> dx/dt`` with ``t`` a tensor of shape ``(batch,)``.
        n_steps: Number of solver steps (>= 1).
        method: ``"euler"``, ``"midpoint"`` or ``"rk4"``.
        t0: Source time.
        t1: Data time.
        postprocess: Optional callable applied to the ODE solution (quantization, decoding, ...).
        time_reversed: If True integrate from ``t1`` to ``t0`` instead (libraries whose noise
            sits at ``t = 1``, e.g. diffusers' ``FlowMatchEulerDiscreteScheduler`` sigmas).

    Raises:
        ValueError: If ``n_steps < 1`` or ``method`` is unknown.
        TypeError: If ``velocity`` or ``postprocess`` is not callable.

    Example:
        >>> import torch
        >>> gen = FlowGenerator(lambda x, t: -x, n_steps=10)
        >>> gen(torch.ones(3, 2)).shape
        torch.Size([3, 2])
    """

    def __init__(
        self,
        velocity: Velocity,
        n_steps: int = 20,
        method: str = "euler",
        t0: float = 0.0,
        t1: float = 1.0,
        postprocess: Callable[[torch.Tensor], torch.Tensor] | None = None,
        time_reversed: bool = False,
    ) -> None:
        if not callable(velocity):
            raise TypeError(f"velocity must be callable, got {type(velocity).__name__}")
        if postprocess is not None and not callable(postprocess):
            raise TypeError(f"postprocess must be callable, got {type(postprocess).__name__}")
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        self.velocity: Velocity = velocity
        self.n_steps: int = _check_steps(n_steps)
        self.method: str = method
        self.t0: float = float(t0)
        self.t1: float = float(t1)
        self.postprocess: Callable[[torch.Tensor], torch.Tensor] | None = postprocess
        self.time_reversed: bool = bool(time_reversed)

    def with_steps(self, n_steps: int) -> FlowGenerator:
        """Return a copy with ``n_steps`` solver steps (e.g. a cheap multi-fidelity generator)."""
        new = copy.copy(self)
        new.n_steps = _check_steps(n_steps)
        return new

    def _v(self, x: torch.Tensor, t: float) -> torch.Tensor:
        tt = torch.full((x.shape[0],), t, dtype=x.dtype, device=x.device)
        return self.velocity(x, tt)

    def integrate(self, z: torch.Tensor) -> torch.Tensor:
        """Solve the ODE from ``z`` without post-processing."""
        a, b = (self.t1, self.t0) if self.time_reversed else (self.t0, self.t1)
        h = (b - a) / self.n_steps
        x = z
        for k in range(self.n_steps):
            t = a + k * h
            if self.method == "euler":
                x = x + h * self._v(x, t)
            elif self.method == "midpoint":
                x = x + h * self._v(x + 0.5 * h * self._v(x, t), t + 0.5 * h)
            else:
                k1 = self._v(x, t)
                k2 = self._v(x + 0.5 * h * k1, t + 0.5 * h)
                k3 = self._v(x + 0.5 * h * k2, t + 0.5 * h)
                k4 = self._v(x + h * k3, t + h)
                x = x + (h / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)
        return x

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        """Map source samples ``z`` (batch first) to data samples ``T(z)``."""
        with torch.inference_mode():
            x = self.integrate(z)
            if self.postprocess is not None:
                x = self.postprocess(x)
        return x

    def __repr__(self) -> str:
        return (
            f"FlowGenerator(n_steps={self.n_steps}, method={self.method!r}, "
            f"t0={self.t0}, t1={self.t1}, time_reversed={self.time_reversed})"
        )


class NoiseAugmentedGenerator:
    """A stochastic (Euler-Maruyama) flow sampler made deterministic in an augmented source.

    The source is ``z = (x0, eps_1, ..., eps_n)`` of shape ``(batch, n_steps + 1, *data_shape)``
    and ``x_{k+1} = x_k + h v(x_k, t_k) + noise_scale(t_k) sqrt(h) eps_{k+1}``. Since every
    random draw sits in ``z ~ N(0, I)``, ESS applies unchanged and targets the posterior
    under this sampler's own output law (which is *not* the ODE's law unless the drift
    includes the matching score correction).

    Args:
        velocity: ``velocity(x, t)`` as for :class:`FlowGenerator`.
        data_shape: Shape of one data sample.
        n_steps: Number of Euler-Maruyama steps (>= 1).
        noise_scale: Constant or callable ``t -> float`` diffusion coefficient.
        postprocess: Optional callable applied to the final state.

    Example:
        >>> import torch
        >>> gen = NoiseAugmentedGenerator(lambda x, t: -x, (2,), n_steps=5, noise_scale=0.1)
        >>> gen.source_shape
        (6, 2)
        >>> gen(torch.zeros(4, 6, 2)).shape
        torch.Size([4, 2])
    """

    def __init__(
        self,
        velocity: Velocity,
        data_shape: tuple[int, ...],
        n_steps: int = 20,
        noise_scale: float | Callable[[float], float] = 0.1,
        postprocess: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> None:
        if not callable(velocity):
            raise TypeError(f"velocity must be callable, got {type(velocity).__name__}")
        self.velocity: Velocity = velocity
        self.data_shape: tuple[int, ...] = tuple(int(s) for s in data_shape)
        self.n_steps: int = _check_steps(n_steps)
        self.noise_scale: float | Callable[[float], float] = noise_scale
        self.postprocess: Callable[[torch.Tensor], torch.Tensor] | None = postprocess

    @property
    def source_shape(self) -> tuple[int, ...]:
        """Shape of one augmented source vector: ``(n_steps + 1, *data_shape)``."""
        return (self.n_steps + 1, *self.data_shape)

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        """Map augmented sources ``z`` to data samples."""
        if tuple(z.shape[1:]) != self.source_shape:
            raise ValueError(
                f"z must have shape (batch, {self.source_shape}), got {tuple(z.shape)}"
            )
        h = 1.0 / self.n_steps
        with torch.inference_mode():
            x = z[:, 0]
            for k in range(self.n_steps):
                t = k * h
                g = self.noise_scale(t) if callable(self.noise_scale) else self.noise_scale
                tt = torch.full((x.shape[0],), t, dtype=x.dtype, device=x.device)
                x = x + h * self.velocity(x, tt) + float(g) * math.sqrt(h) * z[:, k + 1]
            if self.postprocess is not None:
                x = self.postprocess(x)
        return x


def from_callable(
    fn: Velocity,
    n_steps: int = 20,
    method: str = "euler",
    postprocess: Callable[[torch.Tensor], torch.Tensor] | None = None,
    time_reversed: bool = False,
) -> FlowGenerator:
    """Wrap a plain ``fn(x, t) -> velocity`` (any callable or ``nn.Module``) as a generator.

    Example:
        >>> import torch
        >>> gen = from_callable(lambda x, t: torch.ones_like(x), n_steps=4)
        >>> gen(torch.zeros(1, 2))
        tensor([[1., 1.]])
    """
    return FlowGenerator(
        fn, n_steps=n_steps, method=method, postprocess=postprocess, time_reversed=time_reversed
    )


def from_torchcfm(
    model: Callable[..., torch.Tensor],
    n_steps: int = 20,
    method: str = "euler",
    postprocess: Callable[[torch.Tensor], torch.Tensor] | None = None,
    call: str = "concat",
    time_reversed: bool = False,
) -> FlowGenerator:
    """Wrap a torchcfm-style velocity model.

    torchcfm's MLP examples take the time concatenated as the last input column,
    ``model(torch.cat([x, t[:, None]], -1))`` (``call="concat"``, flat ``x`` only); its
    ``UNetModelWrapper`` takes ``model(t, x)`` (``call="t_x"``). torchcfm is not a dependency:
    only its calling convention is used.

    Raises:
        ValueError: If ``call`` is not ``"concat"`` or ``"t_x"``.

    Example:
        >>> import torch
        >>> net = torch.nn.Linear(3, 2)
        >>> from_torchcfm(net, n_steps=2)(torch.zeros(5, 2)).shape
        torch.Size([5, 2])
    """
    if call == "concat":

        def velocity(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            if x.ndim != 2:
                raise ValueError(
                    f"call='concat' needs flat x of shape (batch, dim), got {tuple(x.shape)}; "
                    "use call='t_x' for image-shaped models"
                )
            return model(torch.cat([x, t[:, None].to(x.dtype)], dim=-1))

    elif call == "t_x":

        def velocity(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return model(t, x)

    else:
        raise ValueError(f"call must be 'concat' or 't_x', got {call!r}")
    return FlowGenerator(
        velocity,
        n_steps=n_steps,
        method=method,
        postprocess=postprocess,
        time_reversed=time_reversed,
    )


def from_flow_matching(
    model: Callable[..., torch.Tensor],
    n_steps: int = 20,
    method: str = "euler",
    postprocess: Callable[[torch.Tensor], torch.Tensor] | None = None,
    time_reversed: bool = False,
    **model_extras: object,
) -> FlowGenerator:
    """Wrap a facebookresearch ``flow_matching`` ``ModelWrapper`` (or an ``ODESolver``).

    That library calls ``velocity_model(x=x, t=t, **model_extras)`` with ``t`` a 0-d tensor;
    an ``ODESolver`` is unwrapped through its ``velocity_model`` attribute. Only the calling
    convention is used; the library is not a dependency.

    Example:
        >>> import torch
        >>> class Wrapper(torch.nn.Module):
        ...     def forward(self, x, t, **extras):
        ...         return -x * t
        >>> from_flow_matching(Wrapper(), n_steps=2)(torch.ones(1, 2)).shape
        torch.Size([1, 2])
    """
    inner = getattr(model, "velocity_model", model)

    def velocity(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return inner(x=x, t=t[0], **model_extras)

    return FlowGenerator(
        velocity,
        n_steps=n_steps,
        method=method,
        postprocess=postprocess,
        time_reversed=time_reversed,
    )
