"""Local work of one client (step 1): the FedAvg pseudo-gradient or one stochastic gradient."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from eris_fl.params import assign, flatten, state_tensors

LossFn = Callable[[nn.Module, Sequence[torch.Tensor]], torch.Tensor]
OptimizerFactory = Callable[[list[nn.Parameter]], torch.optim.Optimizer]
UpdateFn = Callable[[nn.Module, torch.Tensor, Any, torch.Generator], torch.Tensor]


def cross_entropy_loss(model: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
    """Default loss: ``cross_entropy(model(batch[0]), batch[1])``."""
    return nn.functional.cross_entropy(model(batch[0]), batch[1])


def dataset_size(dataset: Any) -> int:
    """Number of examples of a client's data.

    ``(X, y, ...)`` tuples, ``TensorDataset``s and sized datasets report their length; a
    ``DataLoader`` the number of examples one pass over it trains on (its sampler's length,
    less what ``drop_last`` drops; a custom batch sampler's batches added up), which is what
    FedAvg weights by; a callable yielding batches is iterated once and its batches' first
    dimensions added up (give it a ``__len__`` to skip that pass).
    """
    if isinstance(dataset, tuple | list):
        if not dataset or not all(isinstance(t, torch.Tensor) for t in dataset):
            raise TypeError("a tuple dataset must hold tensors, e.g. (X, y)")
        return int(dataset[0].shape[0])
    if isinstance(dataset, torch.utils.data.DataLoader):
        return loader_size(dataset)
    if hasattr(dataset, "__len__"):
        return len(dataset)
    if callable(dataset):
        return sum(int(_as_batch(b)[0].shape[0]) for b in dataset())
    raise TypeError(
        "client data must be (X, y) tensors, a torch Dataset, a DataLoader or a callable "
        f"yielding batches, got {type(dataset).__name__}"
    )


def loader_size(loader: torch.utils.data.DataLoader) -> int:
    """Examples one epoch of ``loader`` yields: its sampler and ``drop_last`` decide, not its data.

    Only indices are drawn (no example is loaded). An iterable-style dataset without a sampler
    reports its own length.
    """
    from torch.utils.data import BatchSampler, IterableDataset

    if isinstance(loader.dataset, IterableDataset):
        if not hasattr(loader.dataset, "__len__"):
            raise TypeError(
                "an IterableDataset without __len__ cannot report its size; give it __len__ "
                "or pass a callable yielding batches"
            )
        return len(loader.dataset)
    batches = loader.batch_sampler
    if batches is None:  # batch_size=None: the sampler yields one example at a time
        return len(loader.sampler)  # type: ignore[arg-type]  # torch's Sampler stub has no __len__
    if type(batches) is BatchSampler:
        n = len(batches.sampler)  # type: ignore[arg-type]  # torch's Sampler stub has no __len__
        return (n // batches.batch_size) * batches.batch_size if batches.drop_last else n
    return sum(len(batch) for batch in batches)


def _as_batch(batch: Any) -> tuple[torch.Tensor, ...]:
    return tuple(batch) if isinstance(batch, list | tuple) else (batch,)


def _batches(dataset: Any, batch_size: int, generator: torch.Generator) -> list[tuple[Any, ...]]:
    """One epoch of mini-batches.

    Tensors and datasets are shuffled with the client's seeded ``generator`` (the stream
    every transport shares); a ``DataLoader`` or a batch callable gives its own batches.
    """
    if isinstance(dataset, torch.utils.data.TensorDataset):
        dataset = dataset.tensors
    if isinstance(dataset, tuple | list):
        n = dataset[0].shape[0]
        perm = torch.randperm(n, generator=generator)
        return [
            tuple(t[perm[i : i + batch_size].to(t.device)] for t in dataset)
            for i in range(0, n, batch_size)
        ]
    if isinstance(dataset, torch.utils.data.DataLoader):
        return [_as_batch(b) for b in dataset]
    if not isinstance(dataset, torch.utils.data.Dataset) and callable(dataset):
        return [_as_batch(b) for b in dataset()]
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=True, generator=generator
    )
    return [_as_batch(b) for b in loader]


class LocalTrainer:
    """Runs a client's local training and returns its update ``u_k``.

    ``update="delta"`` (FedAvg): ``E`` epochs of mini-batch training from ``x_t``, then
    ``u_k = x_k^local - x_t``. ``update="gradient"``: one mini-batch gradient at ``x_t``,
    ``u_k = -g_k`` (buffers contribute 0).

    Args:
        loss_fn: ``loss_fn(model, batch) -> scalar``; default cross-entropy on ``(X, y)``.
        optimizer_factory: ``params -> optimizer``; default SGD with lr 0.1.
        local_epochs: ``E >= 1``.
        batch_size: Mini-batch size ``>= 1``.
        update: ``"delta"`` or ``"gradient"``.
        trainable_only: Must match the run's configuration.
        include_buffers: Must match the run's configuration.
    """

    def __init__(
        self,
        loss_fn: LossFn | None = None,
        optimizer_factory: OptimizerFactory | None = None,
        local_epochs: int = 1,
        batch_size: int = 16,
        update: str = "delta",
        trainable_only: bool = True,
        include_buffers: bool = True,
    ) -> None:
        if local_epochs < 1:
            raise ValueError(f"local_epochs must be >= 1, got {local_epochs}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if update not in ("delta", "gradient"):
            raise ValueError(f"update must be 'delta' or 'gradient', got {update!r}")
        self.loss_fn: LossFn = loss_fn or cross_entropy_loss
        self.optimizer_factory: OptimizerFactory = optimizer_factory or (
            lambda params: torch.optim.SGD(params, lr=0.1)
        )
        self.local_epochs: int = local_epochs
        self.batch_size: int = batch_size
        self.update_kind: str = update
        self.trainable_only: bool = trainable_only
        self.include_buffers: bool = include_buffers

    def update(
        self, module: nn.Module, x_t: torch.Tensor, dataset: Any, generator: torch.Generator
    ) -> torch.Tensor:
        """Return ``u_k`` computed from the global state ``x_t`` on ``dataset``.

        Raises:
            ValueError: If the dataset is empty.
        """
        if dataset_size(dataset) == 0:
            raise ValueError("client dataset is empty")
        assign(module, x_t, self.trainable_only, self.include_buffers)
        module.train()
        params = [p for p in module.parameters() if p.requires_grad]
        if self.update_kind == "gradient":
            batch = _batches(dataset, self.batch_size, generator)[0]
            module.zero_grad(set_to_none=True)
            self.loss_fn(module, batch).backward()
            grads = []
            for t in state_tensors(module, self.trainable_only, self.include_buffers):
                g = getattr(t, "grad", None) if isinstance(t, nn.Parameter) else None
                grads.append(torch.zeros_like(t) if g is None else g.detach())
            module.zero_grad(set_to_none=True)
            return -torch.cat([g.reshape(-1).to(x_t.dtype) for g in grads])
        opt = self.optimizer_factory(params)
        for _ in range(self.local_epochs):
            for batch in _batches(dataset, self.batch_size, generator):
                opt.zero_grad(set_to_none=True)
                self.loss_fn(module, batch).backward()
                opt.step()
        return flatten(module, self.trainable_only, self.include_buffers) - x_t

    __call__ = update
