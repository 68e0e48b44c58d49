"""The communication ledger matches the formulas of the spec."""

import math

import pytest

from _eris_helpers import make_clients, make_mlp
from eris_fl import ERISConfig, FedAvgConfig, LocalTrainer, RandK, run_fedavg, run_simulation
from eris_fl.params import num_state


def _run(cfg, K=6):
    data = make_clients(K)
    return run_simulation(make_mlp(), data, cfg, 2, LocalTrainer(batch_size=8), count_bytes=True)


def test_eris_balanced_loads_match_formulas():
    K, A = 6, 3
    d = num_state(make_mlp())
    led = _run(ERISConfig(num_aggregators=A, partition="balanced")).ledger
    for rnd in (0, 1):
        up = led.client_uplink(rnd)
        assert set(up.values()) == {4 * d}  # every client sends its whole update, split
        assert led.max_inbound(rnd, kind="shard") == K * 4 * math.ceil(d / A)
    fed = run_fedavg(
        make_mlp(), make_clients(K), FedAvgConfig(), 2, LocalTrainer(batch_size=8), count_bytes=True
    )
    assert fed.ledger.max_inbound(0, kind="shard") == K * 4 * d  # the FedAvg server
    assert fed.ledger.inbound(0, kind="shard") == {"server": K * 4 * d}


def test_eris_dsc_randk_payload():
    K, A = 6, 2
    d = num_state(make_mlp())
    comp = RandK(0.25)
    led = _run(ERISConfig(num_aggregators=A, compressor=comp, partition="balanced")).ledger
    assert set(led.client_uplink(0).values()) == {4 * comp.k(d)}
    # each aggregator receives the kept coordinates of its shard from every client
    total = sum(led.inbound(0, kind="shard").values())
    assert total == K * 4 * comp.k(d)
    assert led.max_inbound(0, kind="shard") < K * 4 * math.ceil(d / A)


def test_broadcast_covers_every_coordinate_once_per_client():
    K = 6
    d = num_state(make_mlp())
    led = _run(ERISConfig(num_aggregators=3)).ledger
    received = led.inbound(0, kind="broadcast")
    # each client gets every segment except the one it aggregated itself
    assert sum(received.values()) == (K - 1) * 4 * d
    assert all(v <= 4 * d for v in received.values())


def test_ledger_rejects_negative_bytes():
    from eris_fl import CommLedger

    with pytest.raises(ValueError, match="nbytes"):
        CommLedger().record(0, "a", "b", -1, "shard")
