"""Without DSC, ERIS reassembles exactly the FedAvg update (float64, atol 1e-12)."""

import pytest
import torch

from _eris_helpers import make_clients, make_mlp
from eris_fl import ERISConfig, FedAvgConfig, LocalTrainer, flatten, run_fedavg, run_simulation
from reference import hand_fedavg

ROUNDS = 5


@pytest.fixture(scope="module")
def reference():
    data = make_clients(7)
    trainer = LocalTrainer(batch_size=4, local_epochs=2)
    return {
        w: hand_fedavg(make_mlp(), data, trainer, w, ROUNDS, seed=5, server_lr=0.7)
        for w in ("samples", "uniform")
    }


@pytest.mark.parametrize("weights", ["samples", "uniform"])
@pytest.mark.parametrize("A", [1, 2, 3, 7])
@pytest.mark.parametrize("scheme", ["random", "contiguous", "balanced"])
def test_eris_equals_fedavg(reference, weights, A, scheme):
    data = make_clients(7)
    cfg = ERISConfig(num_aggregators=A, partition=scheme, weights=weights, server_lr=0.7, seed=5)
    hist = run_simulation(
        make_mlp(), data, cfg, ROUNDS, trainer=LocalTrainer(batch_size=4, local_epochs=2)
    )
    torch.testing.assert_close(hist.params, reference[weights], rtol=0, atol=1e-12)


def test_run_fedavg_equals_hand_loop(reference):
    cfg = FedAvgConfig(server_lr=0.7, seed=5)
    model = make_mlp()
    hist = run_fedavg(
        model, make_clients(7), cfg, ROUNDS, trainer=LocalTrainer(batch_size=4, local_epochs=2)
    )
    torch.testing.assert_close(hist.params, reference["samples"], rtol=0, atol=1e-12)
    torch.testing.assert_close(flatten(model), hist.params, rtol=0, atol=0)


@pytest.mark.parametrize("selection", ["random", "round_robin"])
def test_partial_participation_stays_exact(selection):
    data = make_clients(7)
    trainer = LocalTrainer(batch_size=4)
    ref = hand_fedavg(make_mlp(), data, trainer, "samples", ROUNDS, seed=2, per_round=4)
    cfg = ERISConfig(num_aggregators=3, clients_per_round=4, aggregator_selection=selection, seed=2)
    seen = []
    hist = run_simulation(make_mlp(), data, cfg, ROUNDS, trainer, tap=lambda v: seen.append(v))
    torch.testing.assert_close(hist.params, ref, rtol=0, atol=1e-12)
    subsets = {tuple(v.clients) for v in seen}
    assert len(subsets) > 1, "a different subset of clients each round"
    for v in seen:
        assert len(v.clients) == 4
        assert set(v.aggregators) <= set(v.clients)
        assert len(set(v.aggregators)) == 3


def test_fixed_aggregator_list_and_float32():
    data = make_clients(4, dtype=torch.float32)
    trainer = LocalTrainer(batch_size=4)
    model = make_mlp(dtype=torch.float32)
    ref = hand_fedavg(make_mlp(dtype=torch.float32), data, trainer, "samples", 3, seed=0)
    cfg = ERISConfig(num_aggregators=2, aggregator_selection=[3, 1])
    hist = run_simulation(model, data, cfg, 3, trainer)
    assert hist.params.dtype == torch.float32
    torch.testing.assert_close(hist.params, ref, rtol=0, atol=1e-6)
