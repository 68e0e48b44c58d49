"""ERIS on Flower's ServerApp/ClientApp: the simulator's model, and only ciphertext in the relay."""

import importlib.util

import pytest
import torch

from _eris_helpers import make_clients, make_mlp
from eris_fl import ERISConfig, LocalTrainer, RandK, run_simulation

HAS_FLWR = importlib.util.find_spec("flwr") is not None
ROUNDS, K = 3, 4


def _eris(cfg, data, **kw):
    from eris_fl.flower import FlowerERIS

    return FlowerERIS(make_mlp, lambda k: data[k], cfg, ROUNDS, K, LocalTrainer(batch_size=4), **kw)


def _true_shards(cfg, data):
    """Every client's real shard of every round, as the bytes a plaintext relay would carry."""
    views = []
    run_simulation(make_mlp(), data, cfg, ROUNDS, LocalTrainer(batch_size=4), tap=views.append)
    return [
        view.messages[k][view.owner == a].numpy().tobytes()
        for view in views
        for k in view.clients
        for a in range(len(view.aggregators))
    ]


def _leaked(shards, payloads):
    return [s for s in shards if any(s in blob for blob in payloads)]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_FLWR, reason="needs the flower extra")
@pytest.mark.parametrize("comp", [None, RandK(0.3)])
def test_flower_run_equals_the_simulator_and_the_relay_sees_no_plaintext_shard(comp):
    from eris_fl.flower import relay_payloads
    from eris_fl.flower_loopback import run_loopback

    data = make_clients(K)
    cfg = ERISConfig(num_aggregators=2, compressor=comp, seed=1)
    hist, grid = run_loopback(_eris(cfg, data, eval_fn=lambda m: {"one": 1.0}))
    ref = run_simulation(make_mlp(), data, cfg, ROUNDS, LocalTrainer(batch_size=4))
    torch.testing.assert_close(hist.params, ref.params, rtol=0, atol=1e-6)
    assert [row["round"] for row in hist.metrics] == [0.0, 1.0, 2.0]
    shards = _true_shards(cfg, data)
    assert len(shards) == ROUNDS * K * 2
    payloads = relay_payloads(grid.seen)
    assert len(payloads) > ROUNDS * K * 2  # the sealed shards did pass through the relay
    assert _leaked(shards, payloads) == []


@pytest.mark.slow
@pytest.mark.skipif(not HAS_FLWR, reason="needs the flower extra")
def test_the_plaintext_check_catches_unsealed_shards(monkeypatch):
    """Control: with sealing switched off, the same check finds every shard in the relay."""
    import eris_fl.flower as fl
    from eris_fl.flower_loopback import run_loopback

    monkeypatch.setattr(fl, "seal_shard", lambda shard, *a: shard.numpy().tobytes())
    monkeypatch.setattr(
        fl, "open_shard", lambda blob, *a: torch.frombuffer(bytearray(blob), dtype=a[-1])
    )
    data = make_clients(K)
    cfg = ERISConfig(num_aggregators=2, seed=1)
    _, grid = run_loopback(_eris(cfg, data))
    shards = _true_shards(cfg, data)
    assert len(_leaked(shards, fl.relay_payloads(grid.seen))) == len(shards)


@pytest.mark.skipif(not HAS_FLWR, reason="needs the flower extra")
def test_sealed_shard_opens_only_for_its_aggregator_and_label():
    from cryptography.exceptions import InvalidTag

    from eris_fl.sealing import KeyPair, open_shard, seal_shard, shard_label

    client, agg, other = KeyPair.generate(), KeyPair.generate(), KeyPair.generate()
    shard = torch.randn(10, dtype=torch.float64)
    label = shard_label(0, 1, 2, 0)
    sealed = seal_shard(shard, client.private, agg.public, label)
    assert len(sealed) == 12 + 80 + 16  # nonce, 10 float64 values, GCM tag
    assert shard.numpy().tobytes() not in sealed
    opened = open_shard(sealed, agg.private, client.public, label, torch.float64)
    assert torch.equal(opened, shard)
    with pytest.raises(InvalidTag):
        open_shard(sealed, other.private, client.public, label, torch.float64)
    with pytest.raises(InvalidTag):
        open_shard(sealed, agg.private, client.public, shard_label(1, 1, 2, 0), torch.float64)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_FLWR, reason="needs the flower extra")
def test_flower_names_the_failing_and_the_dropped_client():
    from eris_fl.flower_loopback import FIRST_NODE_ID, loopback_grid, run_loopback

    data = make_clients(K)
    cfg = ERISConfig(num_aggregators=2, seed=1)

    def bad_trainer(model, x_t, dataset, gen):
        if dataset is data[2]:
            raise ValueError("client two is broken")
        return torch.zeros_like(x_t)

    eris = _eris(cfg, data)
    eris.update_fn = bad_trainer
    with pytest.raises(RuntimeError, match=r"client 2 \(node \d+\) failed in round 0 \(training\)"):
        run_loopback(eris)
    eris = _eris(cfg, data)
    grid = loopback_grid(eris.client_app(), K)
    send = grid.send_and_receive
    lost = FIRST_NODE_ID + 3
    grid.send_and_receive = lambda msgs, timeout=None: [
        r
        for r in send(msgs)
        if r.metadata.src_node_id != lost or r.metadata.message_type.startswith("query.eris_h")
    ]
    with pytest.raises(
        RuntimeError, match=rf"client 3 \(node {lost}\) dropped: no reply in round 0"
    ):
        run_loopback(eris, grid)


@pytest.mark.skipif(HAS_FLWR, reason="flwr installed")
def test_missing_flwr_names_the_extra():
    from eris_fl.flower import require_flwr

    with pytest.raises(ImportError, match=r"pip install 'eris-fl\[flower\]'"):
        require_flwr()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_FLWR, reason="needs the flower extra")
def test_the_server_app_saves_its_history_where_the_run_config_says(tmp_path):
    from eris_fl.flower import HISTORY_KEY, load_history
    from eris_fl.flower_loopback import run_loopback

    eris = _eris(ERISConfig(num_aggregators=2, seed=1), make_clients(K), eval_fn=lambda m: 0.5)
    path = tmp_path / "history.pt"
    hist, _ = run_loopback(eris, run_config={HISTORY_KEY: str(path)})
    saved = load_history(str(path))
    assert torch.equal(saved.params, hist.params)
    assert saved.metrics == hist.metrics
    assert len(saved.metrics) == ROUNDS


@pytest.mark.skipif(not HAS_FLWR, reason="needs the flower extra")
def test_local_federation_needs_a_supernode(tmp_path):
    from eris_fl.flower_local import LocalFederation

    with pytest.raises(ValueError, match=r"num_supernodes must be >= 1, got 0"):
        LocalFederation(tmp_path, 0)
