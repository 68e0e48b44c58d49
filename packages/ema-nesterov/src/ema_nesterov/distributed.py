"""Checkpoints of an :class:`~ema_nesterov.EMANesterov` run via ``torch.distributed.checkpoint``.

:func:`get_state_dict` and :func:`set_state_dict` mirror the functions of the same name in
``torch.distributed.checkpoint.state_dict``: the model and the base optimizers go through
torch's own functions (canonical FQN keys; DTensor shards under FSDP2 ``fully_shard``; the
``module.`` prefix of DDP and the ``_orig_mod.`` of ``torch.compile`` dropped), and the
wrapper adds its EMA buffers, keyed by the same FQNs, with its counters. The result is what
``torch.distributed.checkpoint.save`` / ``load`` take, so a checkpoint is written and read
shard by shard, and loads under another parallelism or world size:

.. code-block:: python

    import torch.distributed.checkpoint as dcp
    from ema_nesterov.distributed import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=path)
    # ... later, on fresh objects built the same way:
    model_sd, optim_sd = get_state_dict(model, opt)  # the template dcp.load fills in place
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
"""

from __future__ import annotations

from typing import Any

import torch

from ema_nesterov._ema_nesterov import EMANesterov

_COUNTERS = ("step", "skipped_steps", "training", "beta_applied")


def _check(model: Any, opt: Any) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(opt, EMANesterov):
        raise TypeError(f"opt must be an EMANesterov, got {type(opt).__name__}")
    known = {id(p) for p in model.parameters()}
    outside = sum(id(p) not in known for g in opt.param_groups for p in g["params"])
    if outside:
        raise ValueError(
            f"{outside} parameter(s) of opt are not parameters of model; every parameter the "
            "optimizer holds must belong to the model"
        )


def _fqns(opt: EMANesterov, base_sd: dict[str, Any]) -> list[str]:
    """The canonical FQN of every wrapped parameter, in the wrapper's parameter order.

    Torch's optimizer state dict lists, group by group and base by base, the FQNs of the
    parameters in the bases' own order, which is the wrapper's order.
    """
    fqns = [fqn for group in base_sd["param_groups"] for fqn in group["params"]]
    n = sum(len(g["params"]) for g in opt.param_groups)
    if len(fqns) != n:
        raise ValueError(
            f"the model names {len(fqns)} of the optimizer's {n} parameters; every parameter "
            "the optimizer holds must belong to the model"
        )
    return fqns


def get_state_dict(model: torch.nn.Module, opt: EMANesterov) -> tuple[dict, dict]:
    """The model's and the optimizer's state dicts for ``torch.distributed.checkpoint``.

    Like torch's ``get_state_dict``, this initialises any optimizer state not created yet
    (torch steps each base once with zero gradients and learning rate 0; the wrapper adds
    zero EMA buffers, which change nothing), so a fresh run's dicts are the template that
    ``torch.distributed.checkpoint.load`` fills in place. Tensors are not copied.

    Args:
        model: The module the optimizer trains (plain, DDP, ``fully_shard``, compiled).
        opt: The wrapper, in training or eval mode.

    Returns:
        ``(model_state_dict, optim_state_dict)``, with ``optim_state_dict = {"base": torch's
        optimizer state dict of the bases, "ema": {"m": {fqn: buffer}, "step", ...}}``.

    Raises:
        TypeError: If ``model`` is not a module or ``opt`` not an :class:`EMANesterov`.
        ValueError: If some parameter of ``opt`` is not a parameter of ``model``.
    """
    from torch.distributed.checkpoint import state_dict as dsd

    _check(model, opt)
    model_sd, base_sd = dsd.get_state_dict(model, opt.base_optimizers)
    fqns = _fqns(opt, base_sd)
    opt.init_state()
    params = [p for g in opt.param_groups for p in g["params"]]
    ema = opt.state_dict()["ema"]
    m = {fqn: opt.state[p]["m"] for fqn, p in zip(fqns, params, strict=True)}
    optim_sd = {"base": base_sd, "ema": {"m": m, **{k: ema[k] for k in _COUNTERS}}}
    return model_sd, optim_sd


def set_state_dict(
    model: torch.nn.Module,
    opt: EMANesterov,
    *,
    model_state_dict: dict[str, Any],
    optim_state_dict: dict[str, Any],
) -> None:
    """Load what :func:`get_state_dict` returned (after ``torch.distributed.checkpoint.load``).

    Args:
        model: The module, built and parallelised as when the checkpoint was written (or
            otherwise: the state is resharded by torch).
        opt: A wrapper over the same base optimizer classes and parameters.
        model_state_dict: The model part.
        optim_state_dict: The optimizer part, ``{"base": ..., "ema": ...}``.

    Raises:
        TypeError: If ``model`` is not a module or ``opt`` not an :class:`EMANesterov`.
        ValueError: If ``optim_state_dict`` lacks its parts, or names other parameters.
    """
    from torch.distributed.checkpoint import state_dict as dsd

    _check(model, opt)
    if not isinstance(optim_state_dict, dict) or set(optim_state_dict) != {"base", "ema"}:
        raise ValueError("optim_state_dict must have exactly the keys 'base' and 'ema'")
    ema = optim_state_dict["ema"]
    missing = [k for k in ("m", *_COUNTERS) if k not in ema]
    if missing:
        raise ValueError(f"optim_state_dict['ema'] lacks {missing}")
    dsd.set_state_dict(
        model,
        opt.base_optimizers,
        model_state_dict=model_state_dict,
        optim_state_dict=optim_state_dict["base"],
    )
    base_sd = dsd.get_optimizer_state_dict(model, opt.base_optimizers)  # FQNs; no copies
    fqns = _fqns(opt, base_sd)
    unknown = sorted(set(ema["m"]) - set(fqns))
    if unknown:
        raise ValueError(
            f"optim_state_dict['ema']['m'] names parameters not in the model: {unknown}"
        )
    index = {fqn: i for i, fqn in enumerate(fqns)}
    own = opt.state_dict()  # the bases as just loaded; the config this wrapper checks against
    own["ema"] = {
        **{k: ema[k] for k in _COUNTERS},
        "state": {index[fqn]: {"m": m} for fqn, m in ema["m"].items()},
        "config": own["ema"]["config"],
    }
    opt.load_state_dict(own)
