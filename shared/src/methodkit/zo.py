"""Seeded zeroth-order perturbations: the shared core of the zeroth-order packages.

Noise is never stored: every noise tensor is regenerated from an integer ``seed`` and the
tensor's position ``index`` in the parameter list, through :func:`tensor_generator`, which
seeds a ``torch.Generator`` with a splitmix64 mix of ``(seed, index)``. Every tensor
therefore gets its own stream (two equal-shaped tensors never receive the same noise under
one seed), and the same seed, index, shape, dtype and device type give bitwise identical
noise. CPU and CUDA generators produce different streams; that is documented, not an error.

This module imports torch (install ``methodkit[torch]``); ``import methodkit`` does not.

Example:
    >>> import torch
    >>> from methodkit import zo
    >>> model = torch.nn.Linear(3, 1)
    >>> params = zo.param_list(model)
    >>> x, y = torch.randn(8, 3), torch.randn(8, 1)
    >>> loss = lambda: torch.nn.functional.mse_loss(model(x), y)
    >>> c, f_plus, f_minus = zo.two_point(loss, params, seed=0, eps=1e-3)
    >>> zo.apply_combination_(params, [0], [-0.01 * c])  # one MeZO step
"""

from __future__ import annotations

import contextlib
import fnmatch
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from methodkit._seeding import MASK64, check_seed, derive_seed, splitmix64

__all__ = [
    "Params",
    "Sampler",
    "apply_combination_",
    "as_scalar",
    "combination_sq_norm",
    "derive_seed",
    "param_list",
    "perturb_",
    "perturbed",
    "sample",
    "tensor_generator",
    "two_point",
]

_KINDS = ("gaussian", "rademacher")

#: ``sampler(param, generator) -> noise shaped like param`` (structured noise, e.g. low rank).
Sampler = Callable[[torch.Tensor, torch.Generator], torch.Tensor]
#: What the functions below accept as parameters: tensors, or ``(name, tensor)`` pairs as
#: returned by :func:`param_list`. The position in the sequence is the tensor's ``index``.
Params = Sequence[torch.Tensor] | Sequence[tuple[str, torch.Tensor]]
Filter = str | Sequence[str] | Callable[[str, torch.Tensor], bool] | None


def tensor_generator(seed: int, index: int, device: torch.device | str = "cpu") -> torch.Generator:
    """Return a ``torch.Generator`` on ``device`` seeded with splitmix64 of ``(seed, index)``.

    Args:
        seed: Non-negative int (the perturbation's seed).
        index: Non-negative int (the tensor's position in the parameter list).
        device: Device of the generator (noise is drawn on the parameter's device).

    Returns:
        A fresh generator; equal ``(seed, index)`` give the same stream on one device type.

    Raises:
        TypeError: If ``seed`` or ``index`` is not an int.
        ValueError: If ``seed`` or ``index`` is negative.
    """
    check_seed(seed)
    check_seed(index, "index")
    mixed = splitmix64(splitmix64(seed & MASK64) ^ index)
    gen = torch.Generator(device=device)
    gen.manual_seed(mixed)
    return gen


def _matches(name: str, param: torch.Tensor, rule: Filter) -> bool:
    if callable(rule):
        return bool(rule(name, param))
    patterns = [rule] if isinstance(rule, str) else list(rule or [])
    return any(fnmatch.fnmatchcase(name, pat) or pat in name.split(".") for pat in patterns)


def param_list(
    module_or_params: torch.nn.Module | Iterable[Any],
    include: Filter = None,
    exclude: Filter = None,
) -> list[tuple[str, torch.Tensor]]:
    """Return the ordered ``(name, tensor)`` list the zeroth-order functions work on.

    Args:
        module_or_params: An ``nn.Module`` (its trainable parameters in ``named_parameters()``
            order; tied weights appear once), or an iterable of tensors, of ``(name, tensor)``
            pairs, or of optimizer param-group dicts with a ``"params"`` key.
        include: Keep only names matching: a glob pattern (``"*.weight"``), a list of
            patterns, or a callable ``(name, tensor) -> bool``. ``None`` keeps all.
        exclude: Drop names matching (same forms as ``include``), applied after it.

    Returns:
        The list; unnamed tensors are called ``"0"``, ``"1"``, ... by position.

    Raises:
        TypeError: If an entry is not a tensor, pair or param group.
        ValueError: If no parameter is left.
    """
    if isinstance(module_or_params, torch.nn.Module):
        named: list[tuple[str, torch.Tensor]] = [
            (n, p) for n, p in module_or_params.named_parameters() if p.requires_grad
        ]
    else:
        named = []
        for i, item in enumerate(module_or_params):
            if isinstance(item, dict):
                named += [(f"{len(named) + j}", p) for j, p in enumerate(item["params"])]
            elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
                named.append(item)
            elif isinstance(item, torch.Tensor):
                named.append((str(i), item))
            else:
                raise TypeError(
                    f"module_or_params entries must be tensors, (name, tensor) pairs or param "
                    f"groups, got {type(item).__name__}"
                )
    seen: set[int] = set()
    out = []
    for name, p in named:
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"parameter {name!r} is a {type(p).__name__}, not a tensor")
        if id(p) in seen:
            continue  # tied weights once
        seen.add(id(p))
        if include is not None and not _matches(name, p, include):
            continue
        if exclude is not None and _matches(name, p, exclude):
            continue
        out.append((name, p))
    if not out:
        raise ValueError("param_list selected no parameter (check include/exclude)")
    return out


def _tensors(params: Params) -> list[torch.Tensor]:
    out = []
    for p in params:
        t = p[1] if isinstance(p, tuple) else p
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"params must hold tensors or (name, tensor) pairs, got {type(t)}")
        out.append(t)
    return out


def _check_kind(kind: str) -> None:
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")


def sample(
    param: torch.Tensor,
    generator: torch.Generator,
    kind: str = "gaussian",
    sampler: Sampler | None = None,
    batch: int | None = None,
) -> torch.Tensor:
    """Draw noise shaped like ``param`` (dtype and device of ``param``) from ``generator``.

    Args:
        param: The tensor the noise is for.
        generator: Source of randomness (see :func:`tensor_generator`).
        kind: ``"gaussian"`` (N(0, 1) entries) or ``"rademacher"`` (+-1 entries).
        sampler: Optional structured sampler ``sampler(param, generator)``; replaces ``kind``.
        batch: If given, return ``batch`` independent draws stacked on a leading axis.

    Returns:
        A tensor of shape ``param.shape`` (or ``(batch, *param.shape)``).

    Raises:
        ValueError: On an unknown ``kind``, ``batch`` < 1, or a sampler returning a wrong shape.
    """
    _check_kind(kind)
    if batch is not None and batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if sampler is not None:
        draws = [sampler(param, generator) for _ in range(batch or 1)]
        for d in draws:
            if d.shape != param.shape:
                raise ValueError(
                    f"sampler returned shape {tuple(d.shape)} for a {tuple(param.shape)} param"
                )
        return torch.stack(draws) if batch is not None else draws[0]
    shape = tuple(param.shape) if batch is None else (batch, *param.shape)
    if kind == "gaussian":
        return torch.randn(shape, generator=generator, dtype=param.dtype, device=param.device)
    bits = torch.randint(0, 2, shape, generator=generator, device=param.device)
    return (bits * 2 - 1).to(param.dtype)


def _scales(scale: float | Sequence[float], n: int) -> list[float]:
    if isinstance(scale, int | float):
        return [float(scale)] * n
    out = [float(s) for s in scale]
    if len(out) != n:
        raise ValueError(f"scale has {len(out)} entries for {n} parameters")
    return out


@torch.no_grad()
def perturb_(
    params: Params,
    seed: int,
    scale: float | Sequence[float],
    kind: str = "gaussian",
    sampler: Sampler | None = None,
) -> None:
    """In place: ``theta_j += scale * z_j(seed)`` for every tensor j, one tensor at a time.

    Extra memory is one noise tensor the size of the largest parameter.

    Args:
        params: Tensors or ``(name, tensor)`` pairs; position = stream index.
        seed: Perturbation seed.
        scale: A float, or one float per tensor (e.g. per-group step sizes).
        kind: Noise kind (see :func:`sample`).
        sampler: Optional structured sampler (see :func:`sample`).
    """
    tensors = _tensors(params)
    for index, (p, s) in enumerate(zip(tensors, _scales(scale, len(tensors)), strict=True)):
        z = sample(p, tensor_generator(seed, index, p.device), kind, sampler)
        p.add_(z, alpha=s)
        del z


def _acc_dtype(p: torch.Tensor) -> torch.dtype:
    return torch.float64 if p.dtype == torch.float64 else torch.float32


def _combination(
    p: torch.Tensor,
    index: int,
    seeds: Sequence[int],
    coeffs: Sequence[float],
    kind: str,
    sampler: Sampler | None,
) -> torch.Tensor:
    acc = torch.zeros(p.shape, dtype=_acc_dtype(p), device=p.device)
    for s, c in zip(seeds, coeffs, strict=True):
        z = sample(p, tensor_generator(s, index, p.device), kind, sampler)
        acc.add_(z.to(acc.dtype), alpha=float(c))
        del z
    return acc


def _check_combination(seeds: Sequence[int], coeffs: Sequence[float]) -> None:
    if len(seeds) != len(coeffs):
        raise ValueError(f"seeds ({len(seeds)}) and coeffs ({len(coeffs)}) differ in length")


@torch.no_grad()
def apply_combination_(
    params: Params,
    seeds: Sequence[int],
    coeffs: Sequence[float],
    kind: str = "gaussian",
    sampler: Sampler | None = None,
) -> None:
    """In place: ``theta_j += sum_k coeffs[k] * z_j(seeds[k])`` for every tensor j.

    The sum is accumulated per tensor in float32 (float64 for float64 parameters) and cast
    back to the parameter dtype once, so low-precision weights lose no small terms. Extra
    memory: one accumulator plus one noise tensor the size of the largest parameter.

    Raises:
        ValueError: If ``seeds`` and ``coeffs`` differ in length.
    """
    _check_combination(seeds, coeffs)
    _check_kind(kind)
    for index, p in enumerate(_tensors(params)):
        acc = _combination(p, index, seeds, coeffs, kind, sampler)
        if p.dtype == acc.dtype:
            p.add_(acc)
        else:
            p.copy_(p.to(acc.dtype).add_(acc))
        del acc


@torch.no_grad()
def combination_sq_norm(
    params: Params,
    seeds: Sequence[int],
    coeffs: Sequence[float],
    kind: str = "gaussian",
    sampler: Sampler | None = None,
) -> float:
    """Return ``||sum_k coeffs[k] z(seeds[k])||^2`` over all tensors, streamed per tensor.

    Raises:
        ValueError: If ``seeds`` and ``coeffs`` differ in length.
    """
    _check_combination(seeds, coeffs)
    _check_kind(kind)
    total = 0.0
    for index, p in enumerate(_tensors(params)):
        acc = _combination(p, index, seeds, coeffs, kind, sampler)
        total += float(torch.linalg.vector_norm(acc, dtype=torch.float64) ** 2)
        del acc
    return total


@contextlib.contextmanager
def perturbed(
    params: Params,
    seed: int,
    scale: float | Sequence[float],
    kind: str = "gaussian",
    sampler: Sampler | None = None,
) -> Iterator[None]:
    """Context manager: ``+scale * z(seed)`` on enter, ``-scale * z(seed)`` on exit.

    The exit step also runs when the body raises, so the parameters are restored (up to
    floating-point rounding of ``theta + s z - s z``).
    """
    scales = _scales(scale, len(_tensors(params)))
    perturb_(params, seed, scales, kind, sampler)
    try:
        yield
    finally:
        perturb_(params, seed, [-s for s in scales], kind, sampler)


def as_scalar(value: Any, what: str = "closure") -> float:
    """Convert a loss (float or one-element tensor) to a finite Python float.

    Raises:
        TypeError: If ``value`` is neither a number nor a one-element tensor.
        ValueError: If it is NaN or infinite.
    """
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(
                f"{what} must return a scalar, got a tensor of shape {tuple(value.shape)}"
            )
        out = float(value.detach().reshape(()).item())
    elif isinstance(value, int | float) and not isinstance(value, bool):
        out = float(value)
    else:
        raise TypeError(f"{what} must return a float or 0-dim tensor, got {type(value).__name__}")
    if not math.isfinite(out):
        raise ValueError(f"{what} returned a non-finite value: {out}")
    return out


def two_point(
    closure: Callable[[], Any],
    params: Params,
    seed: int,
    eps: float | Sequence[float],
    kind: str = "gaussian",
    sampler: Sampler | None = None,
) -> tuple[float, float, float]:
    """Central two-point estimate along ``z(seed)``; the parameters are restored on return.

    Evaluates ``f_plus = f(theta + eps z)`` and ``f_minus = f(theta - eps z)`` (MeZO order:
    ``+eps``, ``-2 eps``, ``+eps``) with gradients disabled.

    Args:
        closure: Returns the loss (float or one-element tensor) at the current weights.
        params: Tensors or ``(name, tensor)`` pairs.
        seed: Direction seed.
        eps: Perturbation scale (> 0), or one per tensor (then ``proj_grad`` uses the first).
        kind: Noise kind.
        sampler: Optional structured sampler.

    Returns:
        ``(proj_grad, f_plus, f_minus)`` with ``proj_grad = (f_plus - f_minus) / (2 eps)``.

    Raises:
        ValueError: If ``eps`` <= 0 or the closure returns NaN/inf (after restoring theta).
        TypeError: If the closure returns a non-scalar (after restoring theta).
    """
    scales = _scales(eps, len(_tensors(params)))
    if not scales or min(scales) <= 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    offset = 0.0  # current multiple of +z(seed)*eps applied to theta
    try:
        perturb_(params, seed, scales, kind, sampler)
        offset = 1.0
        with torch.no_grad():
            f_plus = as_scalar(closure())
        perturb_(params, seed, [-2 * s for s in scales], kind, sampler)
        offset = -1.0
        with torch.no_grad():
            f_minus = as_scalar(closure())
    finally:
        if offset != 0.0:
            perturb_(params, seed, [-offset * s for s in scales], kind, sampler)
    return (f_plus - f_minus) / (2 * scales[0]), f_plus, f_minus
