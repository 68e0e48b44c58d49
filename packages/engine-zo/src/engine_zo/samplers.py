"""Structured perturbation samplers, pluggable into ``methodkit.zo.sample(..., sampler=...)``.

Both samplers are called as ``sampler(param, generator)`` where ``generator`` is the
per-tensor stream of the *step* (``zo.tensor_generator(step_seed, index)``); the slowly
changing basis comes from a second seed (``basis_seed``) and the tensor's index, which the
sampler looks up by identity in the parameter list it was built with. Tensors that are not
matrices, matrices with ``min(m, n) <= rank``, and tensors listed in ``full`` receive plain
full-space noise. A sampler caches its basis factors (``rank * (m + n)`` numbers per matrix,
drawn once), so the optimizers keep one sampler per basis period instead of redrawing them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

from methodkit import zo


def draw(
    shape: tuple[int, ...], generator: torch.Generator, like: torch.Tensor, kind: str
) -> torch.Tensor:
    """Draw a ``shape`` tensor of ``kind`` noise in ``like``'s dtype and device."""
    if kind == "gaussian":
        return torch.randn(shape, generator=generator, dtype=like.dtype, device=like.device)
    bits = torch.randint(0, 2, shape, generator=generator, device=like.device)
    return (bits * 2 - 1).to(like.dtype)


class _Base:
    def __init__(
        self,
        rank: int,
        basis_seed: int,
        params: Iterable[tuple[int, torch.Tensor]],
        kind: str = "gaussian",
        full: Iterable[torch.Tensor] = (),
    ) -> None:
        self.rank = rank
        self.basis_seed = basis_seed
        self.kind = kind
        self._index = {id(p): i for i, p in params}
        self._full = {id(p) for p in full}
        self._bases: dict[int, tuple[torch.Tensor, ...]] = {}

    def is_lowrank(self, param: torch.Tensor) -> bool:
        """Whether ``param`` receives the low-rank perturbation (else full noise)."""
        return (
            param.dim() == 2
            and min(param.shape) > self.rank
            and id(param) not in self._full
            and id(param) in self._index
        )

    def _basis_generator(self, param: torch.Tensor) -> torch.Generator:
        return zo.tensor_generator(self.basis_seed, self._index[id(param)], param.device)


class LowRankSampler(_Base):
    r"""LOZO-style low-rank noise ``xi_W = U V_c^T / sqrt(r)``.

    ``U ~ N(0, 1)^{m x r}`` comes from the step's generator (fresh every step); ``V_c ~
    N(0, 1)^{n x r}`` from ``(basis_seed, index)`` (fixed while ``basis_seed`` is). Averaged
    over ``V_c`` the estimator is unbiased: ``E[<xi, G> xi] = G``.
    """

    def factor(self, param: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """The step's left factor ``U`` (m x r) of a low-rank ``param``."""
        return draw((param.shape[0], self.rank), generator, param, self.kind)

    def basis(self, param: torch.Tensor) -> torch.Tensor:
        """The cycle's right factor ``V_c`` (n x r) of a low-rank ``param`` (cached)."""
        key = id(param)
        if key not in self._bases:
            shape = (param.shape[1], self.rank)
            self._bases[key] = (draw(shape, self._basis_generator(param), param, self.kind),)
        return self._bases[key][0]

    def basis_gram(self, param: torch.Tensor) -> torch.Tensor:
        """``V_c^T V_c`` in float64 (cached): ``||U V_c^T||^2 = sum((U^T U) * V_c^T V_c)``."""
        key = -id(param) - 1  # the Gram matrix shares the basis cache under its own key
        if key not in self._bases:
            V = self.basis(param).double()
            self._bases[key] = (V.T @ V,)
        return self._bases[key][0]

    def __call__(self, param: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Return the perturbation of ``param`` for the step whose stream is ``generator``."""
        if not self.is_lowrank(param):
            return draw(tuple(param.shape), generator, param, self.kind)
        U = self.factor(param, generator)
        return (U @ self.basis(param).T).div_(math.sqrt(self.rank))


class SubspaceSampler(_Base):
    r"""SubZero-style noise ``xi_W = sqrt(m n) / r * U S V^T``.

    ``U`` (m x r) and ``V`` (n x r) are orthonormal (QR of Gaussians from ``(basis_seed,
    index)``), ``S ~ N(0, 1)^{r x r}`` comes from the step's generator. The factor
    ``sqrt(mn)/r`` makes the estimator unbiased over random bases (``E[U U^T] = r/m I``)
    and gives ``E||xi||^2 = mn`` like full noise (SubZero itself uses factor 1).
    """

    def __call__(self, param: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Return the perturbation of ``param`` for the step whose stream is ``generator``."""
        if not self.is_lowrank(param):
            return draw(tuple(param.shape), generator, param, self.kind)
        m, n = param.shape
        r = self.rank
        if id(param) not in self._bases:
            basis = self._basis_generator(param)
            A = torch.randn((m, r), generator=basis, dtype=torch.float64, device=param.device)
            B = torch.randn((n, r), generator=basis, dtype=torch.float64, device=param.device)
            U = torch.linalg.qr(A).Q.to(param.dtype)
            V = torch.linalg.qr(B).Q.to(param.dtype)
            self._bases[id(param)] = (U, V)
        U, V = self._bases[id(param)]
        S = torch.randn((r, r), generator=generator, dtype=param.dtype, device=param.device)
        return (U @ S @ V.T).mul_(math.sqrt(m * n) / r)
