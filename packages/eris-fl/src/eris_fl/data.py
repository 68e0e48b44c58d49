"""Non-IID federated splits: Dirichlet label skew, and the digits benchmark data."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from numpy.typing import ArrayLike, NDArray

from methodkit import rng


def dirichlet_split(
    labels: ArrayLike,
    num_clients: int,
    alpha: float,
    seed: int | np.random.Generator | None = 0,
    min_size: int = 1,
    max_tries: int = 100,
) -> list[NDArray[np.int64]]:
    """Split example indices among clients with Dirichlet(alpha) label proportions.

    For each class, the class's (shuffled) indices are cut among the clients in proportions
    drawn from ``Dirichlet(alpha * 1_K)``; smaller ``alpha`` gives more skewed clients. The
    draw is repeated until every client holds at least ``min_size`` examples.

    Args:
        labels: Integer class label of each example.
        num_clients: ``K >= 1``.
        alpha: Concentration ``> 0``.
        seed: Seed or NumPy generator.
        min_size: Minimum examples per client.
        max_tries: Redraws allowed before giving up.

    Returns:
        ``K`` sorted index arrays, disjoint, covering every example.

    Raises:
        ValueError: For bad arguments, or if no draw gives every client ``min_size`` examples.
    """
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {y.shape}")
    if num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha}")
    if min_size * num_clients > y.size:
        raise ValueError(
            f"min_size={min_size} x num_clients={num_clients} exceeds the {y.size} examples"
        )
    gen = rng(seed)
    for _ in range(max_tries):
        parts: list[list[int]] = [[] for _ in range(num_clients)]
        for label in np.unique(y):
            idx = np.flatnonzero(y == label)
            gen.shuffle(idx)
            props = gen.dirichlet(np.full(num_clients, float(alpha)))
            cuts = (np.cumsum(props)[:-1] * idx.size).astype(int)
            for k, chunk in enumerate(np.split(idx, cuts)):
                parts[k].extend(chunk.tolist())
        if min(len(p) for p in parts) >= min_size:
            return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]
    raise ValueError(
        f"no Dirichlet(alpha={alpha}) split gave every one of {num_clients} clients "
        f"{min_size} examples in {max_tries} tries; raise alpha or lower min_size"
    )


@dataclass(frozen=True)
class FederatedData:
    """Per-client training tensors and a shared test set."""

    clients: list[tuple[torch.Tensor, torch.Tensor]]
    test: tuple[torch.Tensor, torch.Tensor]
    client_indices: list[NDArray[np.int64]]


def load_digits_federated(
    num_clients: int,
    alpha: float,
    test_fraction: float = 0.3,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    min_size: int = 2,
) -> FederatedData:
    """Sklearn's 8x8 digits (offline), stratified train/test split, Dirichlet non-IID clients.

    Args:
        num_clients: ``K``.
        alpha: Dirichlet concentration of the label skew.
        test_fraction: Held-out fraction (stratified).
        seed: Seed of both the split and the client assignment.
        dtype: Feature dtype (labels are int64).
        min_size: Minimum training examples per client.

    Returns:
        :class:`FederatedData` with features in [0, 1] of shape (n, 64).
    """
    from methodkit.data import split_digits

    X_tr, X_te, y_tr, y_te = split_digits(test_fraction, random_state=seed, dtype=np.float64)
    parts = dirichlet_split(y_tr, num_clients, alpha, seed=seed + 1, min_size=min_size)
    Xt = torch.as_tensor(X_tr, dtype=dtype)
    yt = torch.as_tensor(y_tr, dtype=torch.long)
    clients = [(Xt[idx], yt[idx]) for idx in parts]
    test = (torch.as_tensor(X_te, dtype=dtype), torch.as_tensor(y_te, dtype=torch.long))
    return FederatedData(clients=clients, test=test, client_indices=parts)
