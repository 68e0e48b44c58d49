"""Clients as tensors, DataLoaders or batch callables; eval metrics as a history everywhere."""

import pytest
import torch
import torch.utils.data as tud

from _eris_helpers import FixedInit, dist_loader, dist_model, make_clients, make_mlp, mean_loss
from eris_fl import (
    ERISConfig,
    FedAvgConfig,
    RandK,
    flatten,
    run_fedavg,
    run_simulation,
)
from eris_fl.client import dataset_size
from eris_fl.distributed import launch_local


def _loaders(data, batch_size=4):
    return [tud.DataLoader(tud.TensorDataset(X, y), batch_size=batch_size) for X, y in data]


def _callables(data, batch_size=4):
    def make(X, y):
        def batches():
            for i in range(0, len(y), batch_size):
                yield X[i : i + batch_size], y[i : i + batch_size]

        return batches

    return [make(X, y) for X, y in data]


def test_dataloaders_and_batch_callables_give_the_same_run():
    data = make_clients(5)
    cfg = ERISConfig(num_aggregators=2, compressor=RandK(0.3), seed=1)
    loaders = run_simulation(make_mlp(), _loaders(data), cfg, 3).params
    calls = run_simulation(make_mlp(), _callables(data), cfg, 3).params
    assert torch.equal(loaders, calls)
    tuples = run_simulation(make_mlp(), data, cfg, 3).params
    assert not torch.equal(loaders, tuples)  # tuples are shuffled by the seeded stream


def test_eris_with_dataloaders_equals_fedavg_with_dataloaders():
    data = _loaders(make_clients(6))
    eris = run_simulation(make_mlp(), data, ERISConfig(num_aggregators=3, seed=2), 3).params
    fed = run_fedavg(make_mlp(), data, FedAvgConfig(seed=2), 3).params
    torch.testing.assert_close(eris, fed, rtol=0, atol=1e-12)


def test_client_sizes_of_every_kind():
    X, y = make_clients(1)[0]
    assert dataset_size((X, y)) == len(y)
    assert dataset_size(tud.TensorDataset(X, y)) == len(y)
    assert dataset_size(_loaders([(X, y)], batch_size=2)[0]) == len(y)
    assert dataset_size(_callables([(X, y)], batch_size=2)[0]) == len(y)
    with pytest.raises(TypeError, match="a DataLoader or a callable yielding batches"):
        dataset_size(42)


def test_simulator_history_has_every_rounds_metrics():
    data = make_clients(4)
    seen = []
    hist = run_simulation(
        make_mlp(), data, ERISConfig(num_aggregators=2), 3, eval_fn=lambda m: seen.append(1) or 0.5
    )
    assert [row["round"] for row in hist.metrics] == [0.0, 1.0, 2.0]
    assert hist.last("metric") == 0.5
    assert len(seen) == 3
    with pytest.raises(AttributeError, match="pass count_bytes=True"):
        _ = hist.ledger


@pytest.mark.slow
def test_gloo_engine_takes_dataloaders_and_returns_a_history():
    torch.manual_seed(0)
    x0 = flatten(dist_model())
    cfg = ERISConfig(num_aggregators=2, seed=3)
    hist = launch_local(
        3, FixedInit(x0), dist_loader, cfg, 3, eval_fn=mean_loss, return_history=True
    )
    model = FixedInit(x0)()
    ref = run_simulation(model, [dist_loader(r) for r in range(3)], cfg, 3, eval_fn=mean_loss)
    torch.testing.assert_close(hist.params, ref.params, rtol=0, atol=1e-6)
    assert [row["round"] for row in hist.metrics] == [0.0, 1.0, 2.0]
    assert hist.last("loss") == pytest.approx(ref.last("loss"), abs=1e-5)


class _EveryOtherBatch(tud.Sampler):
    """A custom batch sampler: batches of 3 from every other index."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        idx = list(range(0, self.n, 2))
        return iter([idx[i : i + 3] for i in range(0, len(idx), 3)])

    def __len__(self):
        return -(-len(range(0, self.n, 2)) // 3)


def _rows(n=40):
    return tud.TensorDataset(torch.zeros(n, 2), torch.zeros(n, dtype=torch.long))


@pytest.mark.parametrize(
    ("make_loader", "rows"),
    [
        (lambda ds: tud.DataLoader(ds, batch_size=8), 40),
        (lambda ds: tud.DataLoader(ds, batch_size=16, drop_last=True), 32),
        (lambda ds: tud.DataLoader(ds, batch_size=3, shuffle=True, drop_last=True), 39),
        (lambda ds: tud.DataLoader(ds, batch_size=4, sampler=tud.SubsetRandomSampler(range(8))), 8),
        (
            lambda ds: tud.DataLoader(
                ds, batch_size=5, sampler=tud.RandomSampler(ds, replacement=True, num_samples=12)
            ),
            12,
        ),
        (
            lambda ds: tud.DataLoader(
                ds, batch_size=4, sampler=tud.WeightedRandomSampler([1.0] * 40, 10), drop_last=True
            ),
            8,
        ),
        (
            lambda ds: tud.DataLoader(
                ds, batch_size=4, sampler=tud.DistributedSampler(ds, num_replicas=4, rank=1)
            ),
            10,
        ),
        (lambda ds: tud.DataLoader(ds, batch_sampler=_EveryOtherBatch(len(ds))), 20),
        (lambda ds: tud.DataLoader(ds, batch_size=None, sampler=range(7)), 7),
    ],
)
def test_a_dataloader_counts_the_rows_it_trains_on(make_loader, rows):
    loader = make_loader(_rows())
    assert dataset_size(loader) == rows
    assert dataset_size(loader) == sum(len(b[0]) if b[0].dim() > 1 else 1 for b in loader)


def test_round_weights_follow_the_sampler_not_the_dataset():
    from eris_fl._eris import round_weights

    small = tud.DataLoader(_rows(40), batch_size=4, sampler=tud.SubsetRandomSampler(range(8)))
    full = tud.DataLoader(_rows(22), batch_size=4)
    sizes = [dataset_size(small), dataset_size(full)]
    weights = round_weights("samples", sizes, [0, 1])
    assert float(weights[0]) == pytest.approx(8 / 30)  # 0.267; counting the dataset gave 0.444


def test_an_iterable_dataset_without_length_is_named():
    class Stream(tud.IterableDataset):
        def __iter__(self):
            yield from range(3)

    with pytest.raises(TypeError, match="IterableDataset without __len__"):
        dataset_size(tud.DataLoader(Stream(), batch_size=2))
