"""Context-managed forward-pre-hooks that read or swap a block's input.

The core package (methodkit) has no hook utility yet; ``edit-ris`` needs the same one for
attention capture, so this is a candidate to move into the core once a second user lands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from typing import Any

import torch
from torch import nn

Edit = Callable[[torch.Tensor], torch.Tensor | None]


class StopForwardError(Exception):
    """Raised by a capture hook to end a forward pass early (caught by ``capture_input``)."""


def _split(args: tuple, kwargs: dict) -> tuple[torch.Tensor, Callable[[torch.Tensor], Any]]:
    """The block's hidden-state input and a function that rebuilds (args, kwargs) around it."""
    if args and isinstance(args[0], torch.Tensor):
        return args[0], lambda x: ((x, *args[1:]), kwargs)
    for key in ("hidden_states", "x", "input", "q_x"):
        if isinstance(kwargs.get(key), torch.Tensor):
            return kwargs[key], lambda x, k=key: (args, {**kwargs, k: x})
    raise TypeError("cannot find the hidden-state tensor among the block's inputs")


@contextmanager
def edit_input(block: nn.Module, edit: Edit, *, seq_first: bool = False) -> Iterator[None]:
    """Install a pre-hook on ``block`` that passes its input (batch-first) through ``edit``.

    ``edit`` receives ``[B, T, d]`` and returns a replacement (or None to keep it). The hook is
    removed on exit, also when the body raises.
    """

    def hook(_module: nn.Module, args: tuple, kwargs: dict) -> Any:
        x, rebuild = _split(args, kwargs)
        xb = x.transpose(0, 1) if seq_first else x
        out = edit(xb)
        if out is None:
            return None
        out = out.to(dtype=x.dtype)
        return rebuild(out.transpose(0, 1).contiguous() if seq_first else out)

    handle = block.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def edit_inputs(edits: list[tuple[nn.Module, Edit]], *, seq_first: bool = False) -> Iterator[None]:
    """Several :func:`edit_input` hooks at once (all removed on exit)."""
    with ExitStack() as stack:
        for block, fn in edits:
            stack.enter_context(edit_input(block, fn, seq_first=seq_first))
        yield


def capture_input(
    run: Callable[[], Any], block: nn.Module, *, seq_first: bool = False
) -> torch.Tensor:
    """Run ``run()`` until ``block`` is entered and return its input ``[B, T, d]``."""
    box: list[torch.Tensor] = []

    def grab(x: torch.Tensor) -> None:
        box.append(x.clone())
        raise StopForwardError

    with edit_input(block, grab, seq_first=seq_first), suppress(StopForwardError):
        run()
    if not box:
        raise RuntimeError("the block was never called during the forward pass")
    return box[0]


def capture_output(
    run: Callable[[], Any], block: nn.Module, *, seq_first: bool = False
) -> torch.Tensor:
    """Run ``run()`` and return the (batch-first) hidden-state output of ``block``."""
    box: list[torch.Tensor] = []

    def hook(_module: nn.Module, _args: tuple, out: Any) -> None:
        x = out[0] if isinstance(out, tuple) else out
        box.append((x.transpose(0, 1) if seq_first else x).clone())

    handle = block.register_forward_hook(hook)
    try:
        run()
    finally:
        handle.remove()
    if not box:
        raise RuntimeError("the block was never called during the forward pass")
    return box[-1]
