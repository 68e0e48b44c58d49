"""Read (B, C) logits out of whatever a classifier returns.

Users wrap timm, torchvision and Hugging Face models alike: a plain tensor, an output object
with a ``.logits`` tensor (``transformers``' ``ImageClassifierOutput``), a mapping with a
``"logits"`` key, or a tuple/list whose first element is the logits (``return_dict=False``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["as_logits"]


def as_logits(output: Any) -> torch.Tensor:
    """The logits tensor inside a model output.

    Args:
        output: A tensor, an object with a tensor ``.logits``, a mapping with ``"logits"``,
            or a non-empty tuple/list whose first element is a tensor.

    Returns:
        The logits tensor (not reshaped; callers check it is (B, C)).

    Raises:
        TypeError: If no logits tensor can be found in ``output``.

    Example:
        >>> import torch
        >>> as_logits((torch.zeros(2, 3), "aux")).shape
        torch.Size([2, 3])
    """
    if isinstance(output, torch.Tensor):
        return output
    logits = getattr(output, "logits", None)
    if logits is None and isinstance(output, Mapping):
        logits = output.get("logits")
    if logits is None and isinstance(output, tuple | list) and output:
        logits = output[0]
    if not isinstance(logits, torch.Tensor):
        raise TypeError(
            "the model must return logits as a tensor, an object with a .logits tensor, a "
            f"mapping with 'logits' or a tuple whose first element is a tensor; got "
            f"{type(output).__name__}"
        )
    return logits
