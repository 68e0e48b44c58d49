r"""Baselines with the estimators' interface: BPTT, truncated BPTT, e-prop, frozen recurrence.

``BPTT`` (autograd through the unrolled steps) is also the reference the echo gradient is
checked against; the others are the learning rules the paper compares with.

**e-prop** (Bellec et al. 2020) for leapfrog-integrated cells: each synapse ``theta_ij`` onto
neuron ``i`` keeps an eligibility vector over neuron ``i``'s own 2-d state ``(phi_i, pi_i)``,
propagated with the 2x2 diagonal block of the step Jacobian (``D_i = df_i/dphi_i`` at the half
step):

.. math::
    e^{\phi}_{1/2} = e^{\phi} + \tfrac{h}{2} e^{\pi},\quad
    e^{\pi} \leftarrow e^{\pi} + h (D_i e^{\phi}_{1/2} + \partial f_i/\partial\theta_{ij}),\quad
    e^{\phi} \leftarrow e^{\phi}_{1/2} + \tfrac{h}{2} e^{\pi},

and the gradient is ``sum_t L_{t,i} e^phi_t`` with the immediate learning signal
``L_t = dl_t/dphi_t`` (through the true readout weights or a fixed random feedback matrix).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hel._estimator import GradientEstimator, accumulate, check_finite
from hel.cells import leapfrog_step
from hel.models import EchoRNN

__all__ = ["BPTT", "FEEDBACKS", "EProp", "FrozenRecurrence", "TruncatedBPTT"]

FEEDBACKS = ("symmetric", "random")


class EProp(GradientEstimator):
    """e-prop: eligibility traces times an online learning signal (no backward pass in time).

    Args:
        model: The model; its cell must provide ``jacobian_diagonal`` and
            ``force_param_local`` (both built-in cells do).
        loss_fn: Scalar loss.
        feedback: ``"symmetric"`` (true readout weights) or ``"random"`` (fixed random matrix;
            needs an ``nn.Linear`` head).
        seed: Seed of the random feedback matrix.

    Raises:
        NotImplementedError: If the cell lacks the analytic diagonal Jacobian blocks.

    References:
        Bellec et al., "A solution to the learning dilemma for recurrent networks of spiking
        neurons", Nature Communications 11, 3625 (2020).
    """

    name = "eprop"

    def __init__(
        self, model: EchoRNN, loss_fn: Any, feedback: str = "symmetric", seed: int = 0
    ) -> None:
        super().__init__(model, loss_fn)
        if feedback not in FEEDBACKS:
            raise ValueError(f"feedback must be one of {FEEDBACKS}, got {feedback!r}")
        cell = model.cell
        dtype = next((p.dtype for p in cell.parameters()), torch.get_default_dtype())
        probe = torch.zeros(1, cell.hidden_size, dtype=dtype)
        probe_u = torch.zeros(1, cell.input_size, dtype=dtype)
        # both raise NotImplementedError (naming the two methods) when the cell lacks them
        cell.jacobian_diagonal(probe, probe_u)
        cell.force_param_local(probe, probe_u)
        self.feedback = feedback
        self._B_rand: torch.Tensor | None = None
        if feedback == "random":
            head = model.head
            if not isinstance(head, nn.Linear):
                raise ValueError("feedback='random' needs an nn.Linear head")
            g = torch.Generator().manual_seed(seed)
            bound = 1.0 / head.in_features**0.5
            self._B_rand = (
                torch.rand(head.out_features, head.in_features, generator=g) * 2 - 1
            ) * bound

    def __repr__(self) -> str:
        return f"EProp(feedback={self.feedback!r})"

    def _feedback(
        self, r: torch.Tensor, y: torch.Tensor, per_step_T: int | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Learning signal w.r.t. head input ``r``; accumulates the head's gradient."""
        if self.feedback == "symmetric":
            if per_step_T is None:
                return self._readout_signal(r, y)
            return self._step_signal(r, y, per_step_T, True)
        head = self.model.head
        r = r.detach()
        with torch.enable_grad():
            out = head(r).detach().requires_grad_(True)
            loss = self._scalar(self.loss_fn(out, y))
            if per_step_T is not None:
                loss = loss / per_step_T
            (g_out,) = torch.autograd.grad(loss, [out])
        # head's own gradient (plain autograd on its input, like every estimator)
        if per_step_T is None:
            self._readout_signal(r, y)
        else:
            self._step_signal(r, y, per_step_T, True)
        B_rand = self._B_rand
        assert B_rand is not None, "feedback='random' builds the matrix in __init__"
        return g_out @ B_rand.to(g_out), loss.detach()

    def backward(  # noqa: D102
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        self._check(x, y)
        cell = self.model.cell
        h = cell.dt
        T = x.shape[1]
        readout = self.model.readout
        names = dict(cell.named_parameters())
        phi, pi = self.model.initial_state(x, state)
        acc = torch.zeros_like(phi)
        elig: dict[str, list[torch.Tensor]] = {}
        G: dict[str, torch.Tensor] = {}  # sum_t L_t e^phi_t (sequence) or sum_t w_t e^phi_t
        loss = x.new_zeros(())
        with torch.no_grad():
            for t in range(T):
                u = x[:, t]
                phi_half = phi + 0.5 * h * pi
                D = cell.jacobian_diagonal(phi_half, u)
                local = cell.force_param_local(phi_half, u)
                pi = pi + h * cell.force(phi_half, u)
                phi = phi_half + 0.5 * h * pi
                if readout == "sequence":
                    L_t, lt = self._feedback(phi, y[:, t], T)
                    loss = loss + lt
                else:
                    acc += phi
                for name, (post, pre) in local.items():
                    # e_half = e_phi + h/2 e_pi ; e_pi += h (D e_half + df/dtheta) ;
                    # e_phi = e_half + h/2 e_pi   (in place: the traces are the big tensors)
                    imm = post.clone() if pre is None else post[:, :, None] * pre[:, None, :]
                    Dx = D if pre is None else D[:, :, None]
                    if name not in elig:
                        elig[name] = [torch.zeros_like(imm), torch.zeros_like(imm)]
                        G[name] = torch.zeros_like(imm)
                    e_phi, e_pi = elig[name]
                    e_phi.add_(e_pi, alpha=0.5 * h)
                    imm.addcmul_(Dx, e_phi)
                    e_pi.add_(imm, alpha=h)
                    e_phi.add_(e_pi, alpha=0.5 * h)
                    if readout == "sequence":
                        G[name].addcmul_(L_t if pre is None else L_t[:, :, None], e_phi)
                    elif readout == "mean":
                        G[name].add_(e_phi, alpha=1.0 / T)
                    elif t == T - 1:
                        G[name].add_(e_phi)
            if readout != "sequence":
                r = acc / T if readout == "mean" else phi
                c, loss = self._feedback(r, y, None)
                for name, val in G.items():
                    G[name] = val * (c if val.dim() == 2 else c[:, :, None])
        grads = []
        for name, p in names.items():
            if name not in G:
                grads.append(torch.zeros_like(p))
                continue
            g = G[name].sum(0)
            if name in getattr(cell, "eprop_symmetric", ()):
                g = 0.5 * (g + g.T)
            grads.append(g.reshape(p.shape))
        check_finite("EProp", cell, grads)
        accumulate(list(names.values()), grads)
        self.last_stats = {"passes": 1, "stored_steps": 0}
        return loss


class BPTT(GradientEstimator):
    """Backpropagation through time: autograd through the unrolled leapfrog steps.

    Stores the whole trajectory (memory grows linearly with ``T``); the reference for the
    echo estimators.
    """

    name = "bptt"

    def backward(  # noqa: D102
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        self._check(x, y)
        with torch.enable_grad():
            out = self.model(x, state)
            loss = self._scalar(self.model.compute_loss(out, y, self.loss_fn))
            loss.backward()
        check_finite(
            "BPTT",
            self.model.cell,
            [torch.zeros(()) if p.grad is None else p.grad for p in self.cell_params],
        )
        self.last_stats = {"passes": 1, "stored_steps": x.shape[1]}
        return loss.detach()


class TruncatedBPTT(GradientEstimator):
    """Truncated BPTT with chunk length ``k``.

    The state is detached at chunk boundaries, so each loss term ``l_t`` back-propagates only
    to the start of its chunk. A first pass without a graph computes the readout's error
    signals ``g_t = dL/dphi_t`` (needed for pooled readouts); the second pass runs chunk by
    chunk and back-propagates ``sum_t <g_t, phi_t>`` inside each chunk.

    Args:
        model: The model.
        loss_fn: Scalar loss.
        k: Chunk length (>= 1); ``k >= T`` is exact BPTT, ``k = 1`` the per-step immediate
            gradient.
    """

    name = "tbptt"

    def __init__(self, model: EchoRNN, loss_fn: Any, k: int) -> None:
        super().__init__(model, loss_fn)
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1, got {k!r}")
        self.k = k

    def __repr__(self) -> str:
        return f"TruncatedBPTT(k={self.k})"

    def backward(  # noqa: D102
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        self._check(x, y)
        T = x.shape[1]
        readout = self.model.readout
        _, _, c, loss = self._free_run(x, y, state)
        params = self.cell_params
        phi, pi = self.model.initial_state(x, state)
        phi, pi = phi.detach(), pi.detach()
        for start in range(0, T, self.k):
            with torch.enable_grad():
                surrogate = x.new_zeros(())
                for t in range(start, min(start + self.k, T)):
                    phi, pi, _ = leapfrog_step(self.model.cell, phi, pi, x[:, t])
                    g: torch.Tensor | None
                    if readout == "sequence":
                        g = self._step_signal(phi, y[:, t], T, False)[0]
                    else:
                        assert c is not None, "_free_run returns c for 'mean' and 'last'"
                        g = c / T if readout == "mean" else (c if t == T - 1 else None)
                    if g is not None:
                        surrogate = surrogate + (g * phi).sum()
                if surrogate.requires_grad:
                    grads = torch.autograd.grad(surrogate, params, allow_unused=True)
                    accumulate(
                        params,
                        [
                            torch.zeros_like(p) if g is None else g
                            for p, g in zip(params, grads, strict=True)
                        ],
                    )
            phi, pi = phi.detach(), pi.detach()
        self.last_stats = {"passes": 2, "stored_steps": min(self.k, T)}
        return loss


class FrozenRecurrence(GradientEstimator):
    """Reservoir control: the recurrent core gets zero gradient, only the head learns."""

    name = "frozen"

    def backward(  # noqa: D102
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        state: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        self._check(x, y)
        _, _, _, loss = self._free_run(x, y, state)
        params = self.cell_params
        accumulate(params, [torch.zeros_like(p) for p in params])
        self.last_stats = {"passes": 1, "stored_steps": 0}
        return loss
