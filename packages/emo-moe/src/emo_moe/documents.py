"""Document ids of packed rows: from EOS tokens, position-id restarts or cu_seqlens.

A document id tensor has the shape ``(B, S)`` of the packed batch; any integers, as long as every
id forms one contiguous run inside its row (rows are independent: row 0 and row 1 may both use 0).
"""

from __future__ import annotations

import torch

__all__ = [
    "doc_ids_from_cu_seqlens",
    "doc_ids_from_eos",
    "doc_ids_from_position_ids",
    "document_index",
    "validate_doc_ids",
]


def check_token_ids(x: object, name: str) -> None:
    """``x`` must be an integer torch tensor (token ids, positions): TypeError otherwise."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor (torch.long), got dtype {x.dtype}")


def _as_2d(x: torch.Tensor, name: str) -> torch.Tensor:
    check_token_ids(x, name)
    if x.dim() == 1:
        x = x.unsqueeze(0)
    if x.dim() != 2:
        raise ValueError(f"{name} must have shape (B, S) or (S,), got {tuple(x.shape)}")
    return x


def doc_ids_from_eos(input_ids: torch.Tensor, eos_id: int) -> torch.Tensor:
    """Document ids from EOS separators: an EOS token ends (and belongs to) its document.

    Args:
        input_ids: ``(B, S)`` token ids (or ``(S,)``, treated as one row).
        eos_id: the end-of-document token.

    Returns:
        ``(B, S)`` long tensor; the id of token ``t`` is the number of EOS tokens before ``t``.

    Raises:
        TypeError: If ``input_ids`` is not an integer tensor or ``eos_id`` not an int.
        ValueError: If ``input_ids`` is not ``(B, S)`` or ``(S,)``.
    """
    ids = _as_2d(input_ids, "input_ids")
    if isinstance(eos_id, bool) or not isinstance(eos_id, int):
        raise TypeError(f"eos_id must be an int, got {eos_id!r}")
    is_eos = (ids == eos_id).long()
    # exclusive cumulative sum: the EOS itself stays in the document it closes
    return torch.cumsum(is_eos, dim=1) - is_eos


def doc_ids_from_position_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """Document ids from position ids that restart at 0 at each document.

    This is the packed-sequence convention of transformers' ``DataCollatorWithFlattening``.
    A row that does not start at position 0 starts with a (truncated) document of its own.
    """
    pos = _as_2d(position_ids, "position_ids")
    starts = pos == 0
    starts[:, 0] = True
    return torch.cumsum(starts.long(), dim=1) - 1


def doc_ids_from_cu_seqlens(cu_seqlens: torch.Tensor, total_len: int | None = None) -> torch.Tensor:
    """Document ids of one flattened row from flash-attention varlen ``cu_seqlens``.

    Args:
        cu_seqlens: 1-D, starts at 0, non-decreasing: ``[0, l_1, l_1 + l_2, ...]``.
        total_len: length of the packed row (default ``cu_seqlens[-1]``).

    Returns:
        ``(1, total_len)`` long tensor.
    """
    cu = torch.as_tensor(cu_seqlens)
    check_token_ids(cu, "cu_seqlens")
    if cu.dim() != 1 or cu.numel() < 2 or int(cu[0]) != 0:
        raise ValueError(f"cu_seqlens must be 1-D, start at 0 and have >= 2 entries, got {cu}")
    if bool((cu[1:] < cu[:-1]).any()):
        raise ValueError(f"cu_seqlens must be non-decreasing, got {cu.tolist()}")
    n = int(cu[-1]) if total_len is None else int(total_len)
    if n > int(cu[-1]):
        raise ValueError(f"total_len={n} exceeds cu_seqlens[-1]={int(cu[-1])}")
    t = torch.arange(n, device=cu.device)
    return (torch.searchsorted(cu[1:].contiguous(), t, right=True)).unsqueeze(0)


def validate_doc_ids(doc_ids: torch.Tensor, shape: tuple[int, int] | torch.Size) -> torch.Tensor:
    """Check that ``doc_ids`` has ``shape`` (B, S), integer dtype and contiguous runs per row.

    Raises:
        ValueError: On a wrong shape or dtype, or an id that appears in two separate runs.
    """
    if not isinstance(doc_ids, torch.Tensor):
        raise TypeError(f"doc_ids must be a torch.Tensor, got {type(doc_ids).__name__}")
    if tuple(doc_ids.shape) != tuple(shape):
        raise ValueError(
            f"doc_ids must have shape (B, S) = {tuple(shape)}, got {tuple(doc_ids.shape)}"
        )
    if doc_ids.dtype.is_floating_point or doc_ids.dtype == torch.bool:
        raise ValueError(f"doc_ids must be an integer tensor, got {doc_ids.dtype}")
    runs = (doc_ids[:, 1:] != doc_ids[:, :-1]).sum(dim=1) + 1
    srt = torch.sort(doc_ids, dim=1).values
    distinct = (srt[:, 1:] != srt[:, :-1]).sum(dim=1) + 1
    bad = torch.nonzero(runs != distinct).flatten()
    if bad.numel():
        r = int(bad[0])
        raise ValueError(
            f"doc_ids are not contiguous: row {r} has {int(distinct[r])} distinct ids in "
            f"{int(runs[r])} runs (each document must be one contiguous span)"
        )
    return doc_ids


def document_index(doc_ids: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Relabel contiguous per-row ids to global document numbers ``0 .. D-1`` (row-major).

    Returns:
        ``(index, D)``: a ``(B, S)`` long tensor and the number of documents in the batch.
    """
    change = torch.ones_like(doc_ids, dtype=torch.long)
    change[:, 1:] = (doc_ids[:, 1:] != doc_ids[:, :-1]).long()
    index = torch.cumsum(change.flatten(), dim=0).view_as(doc_ids) - 1
    return index, int(index[-1, -1]) + 1 if index.numel() else 0
