"""The Flower relay protocol reproduces the simulator; the missing-flwr error is clear."""

import importlib.util

import pytest
import torch

from _eris_helpers import make_clients, make_mlp
from eris_fl import ERISConfig, LocalTrainer, RandK, flatten, run_simulation
from eris_fl._seeding import LOCAL, derived_generator
from eris_fl.flower import FlowerRelay, require_flwr


def test_relay_rounds_equal_the_simulator():
    data = make_clients(5)
    cfg = ERISConfig(num_aggregators=3, seed=2)
    trainer = LocalTrainer(batch_size=4)
    relay = FlowerRelay(cfg, [len(y) for _, y in data])
    model = make_mlp()
    x = flatten(model)
    for t in range(3):
        roles = relay.roles(t)
        shards = {
            k: relay.split(
                t, trainer.update(model, x.clone(), data[k], derived_generator(2, t, k, LOCAL))
            )
            for k in roles.clients
        }
        routed = relay.route(t, shards)
        segments = [relay.aggregate(t, routed[agg]) for agg in roles.aggregators]
        x = relay.reassemble(t, x, segments)
    ref = run_simulation(make_mlp(), data, cfg, 3, trainer).params
    torch.testing.assert_close(x, ref, rtol=0, atol=1e-12)


def test_relay_rejects_dsc():
    with pytest.raises(NotImplementedError, match="without DSC"):
        FlowerRelay(ERISConfig(num_aggregators=2, compressor=RandK(0.5)), [3, 3])


@pytest.mark.skipif(importlib.util.find_spec("flwr") is not None, reason="flwr installed")
def test_missing_flwr_names_what_to_install():
    with pytest.raises(ImportError, match=r"pip install 'flwr>=1\.20'"):
        require_flwr()
