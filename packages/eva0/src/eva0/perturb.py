"""Per-sample parameters without copying the model.

Two ways to run one batched forward pass in which sample ``i`` sees its own parameter values:

* :class:`PerSampleNorm`: LayerNorm / GroupNorm / BatchNorm (eval mode) modules whose affine
  weight and bias are replaced, for the duration of a ``with`` block, by (B, C) tensors
  broadcast over the batch. Cheap: the normalisation itself is computed once.
* :func:`per_sample_call`: any parameter set, through ``torch.func.functional_call`` vmapped
  over (B, ...) parameter stacks (one sample per vmap lane).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import torch
from torch import nn
from torch.nn import functional

from eva0.outputs import as_logits

__all__ = ["NORM_TYPES", "PerSampleNorm", "per_sample_call"]

#: Norm layers whose affines :class:`PerSampleNorm` can make per-sample.
NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.LayerNorm,
    nn.GroupNorm,
    nn.modules.batchnorm._BatchNorm,
)


def _normalise(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The module's normalisation without its affine."""
    if isinstance(module, nn.LayerNorm):
        return functional.layer_norm(x, module.normalized_shape, None, None, module.eps)
    if isinstance(module, nn.GroupNorm):
        return functional.group_norm(x, module.num_groups, None, None, module.eps)
    assert isinstance(module, nn.modules.batchnorm._BatchNorm)
    return functional.batch_norm(
        x, module.running_mean, module.running_var, None, None, False, 0.0, module.eps
    )


def _affine_view(module: nn.Module, t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Reshape a (B, *param_shape) stack so it broadcasts against ``x`` (batch first)."""
    B = t.shape[0]
    if isinstance(module, nn.LayerNorm):  # affine over the trailing dims
        n_mid = x.dim() - 1 - len(module.normalized_shape)
        return t.reshape(B, *([1] * n_mid), *module.normalized_shape)
    return t.reshape(B, t.shape[1], *([1] * (x.dim() - 2)))  # channel dim 1


class PerSampleNorm:
    """Make norm-layer affines per-sample inside a ``with`` block.

    Args:
        model: The model holding the norm layers.

    Example:
        >>> import torch
        >>> net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4))
        >>> psn = PerSampleNorm(net)
        >>> w = torch.ones(2, 4) + torch.randn(2, 4)
        >>> with psn.apply({"1.weight": w}):
        ...     out = net(torch.randn(2, 3))
    """

    def __init__(self, model: nn.Module) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
        self.model = model
        self.owners: dict[str, tuple[nn.Module, str]] = {}
        for mname, mod in model.named_modules():
            if isinstance(mod, NORM_TYPES):
                for pname in ("weight", "bias"):
                    if getattr(mod, pname, None) is not None:
                        full = f"{mname}.{pname}" if mname else pname
                        self.owners[full] = (mod, pname)

    def supports(self, names: list[str]) -> bool:
        """Whether every name is a norm affine this wrapper can make per-sample.

        BatchNorm layers in training mode (batch statistics) are not supported: their output
        for one sample depends on the whole batch.
        """
        for n in names:
            if n not in self.owners:
                return False
            mod = self.owners[n][0]
            if isinstance(mod, nn.modules.batchnorm._BatchNorm) and (
                mod.training or mod.running_mean is None
            ):
                return False
        return True

    @contextlib.contextmanager
    def apply(self, stacks: Mapping[str, torch.Tensor]) -> Iterator[None]:
        """Use ``stacks[name]`` (shape (B, *param.shape)) as the per-sample values of ``name``.

        Names not in ``stacks`` keep their shared value. The forward methods are restored on
        exit, also when the body raises.

        Raises:
            KeyError: If a name is not a norm affine of the model.
            ValueError: If a stack's trailing shape does not match its parameter.
        """
        per_mod: dict[nn.Module, dict[str, torch.Tensor]] = {}
        for name, t in stacks.items():
            if name not in self.owners:
                raise KeyError(f"{name!r} is not a LayerNorm/GroupNorm/BatchNorm affine")
            mod, pname = self.owners[name]
            if tuple(t.shape[1:]) != tuple(getattr(mod, pname).shape):
                raise ValueError(
                    f"stack for {name!r} has shape {tuple(t.shape)}, expected "
                    f"(B, {', '.join(map(str, getattr(mod, pname).shape))})"
                )
            per_mod.setdefault(mod, {})[pname] = t
        patched = []
        try:
            for mod, vals in per_mod.items():

                def fwd(x: torch.Tensor, _m: nn.Module = mod, _v: dict = vals) -> torch.Tensor:
                    y = _normalise(_m, x)
                    w = _v.get("weight")
                    b = _v.get("bias")
                    mw, mb = _m.weight, _m.bias  # a Parameter or None (no affine)
                    if w is not None:
                        y = y * _affine_view(_m, w, x)
                    elif isinstance(mw, torch.Tensor):
                        y = y * _affine_view(_m, mw.unsqueeze(0), x)
                    if b is not None:
                        y = y + _affine_view(_m, b, x)
                    elif isinstance(mb, torch.Tensor):
                        y = y + _affine_view(_m, mb.unsqueeze(0), x)
                    return y

                mod.forward = fwd  # instance attribute shadows the class method
                patched.append(mod)
            yield
        finally:
            for mod in patched:
                del mod.forward


def per_sample_call(
    model: nn.Module, params_stack: Mapping[str, torch.Tensor], x: torch.Tensor
) -> torch.Tensor:
    """Batched forward pass where sample ``i`` uses ``params_stack[name][i]`` (vmap path).

    Args:
        model: Any module; parameters not in ``params_stack`` keep their values.
        params_stack: ``{name: tensor of shape (B, *param.shape)}``.
        x: Input batch of shape (B, ...).

    Returns:
        The model output for the batch, shape (B, ...).

    Raises:
        ValueError: If a stack's leading size differs from the batch size.
    """
    B = x.shape[0]
    for name, t in params_stack.items():
        if t.shape[0] != B:
            raise ValueError(f"params_stack[{name!r}] has {t.shape[0]} rows for a batch of {B}")

    def one(p: dict[str, torch.Tensor], xi: torch.Tensor) -> torch.Tensor:
        out = torch.func.functional_call(model, p, (xi.unsqueeze(0),), strict=False)
        return as_logits(out).squeeze(0)

    return torch.func.vmap(one, in_dims=(0, 0), randomness="different")(dict(params_stack), x)
