"""The Flower App of the deployment test: ERIS on a tiny MLP, the ServerApp's traffic kept.

Copied into a Flower App folder as ``eris_app.py``; the test imports it too, to run the
simulator on the same model, data and settings. The ServerApp writes every byte string it
relayed (:func:`eris_fl.flower.relay_payloads`) to ``$FLWR_HOME/relay-payloads.pkl``.
"""

import os
import pickle
from pathlib import Path

import torch

from eris_fl import ERISConfig, LocalTrainer
from eris_fl.flower import FlowerERIS, relay_payloads

ROUNDS, NODES = 2, 2
CONFIG = ERISConfig(num_aggregators=2, seed=1)
TRAINER = LocalTrainer(batch_size=4)
RELAY_LOG = "relay-payloads.pkl"


def make_mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def client_data(k: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen, n = torch.Generator().manual_seed(100 + k), 8 + 2 * k
    return torch.randn(n, 6, generator=gen), torch.randint(0, 3, (n,), generator=gen)


class RecordingGrid:
    """Forwards to Flower's grid and keeps every message sent and received."""

    def __init__(self, grid):
        self.grid, self.seen = grid, []

    def __getattr__(self, name):
        return getattr(self.grid, name)

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        replies = list(self.grid.send_and_receive(messages, timeout=timeout))
        self.seen += messages + replies
        return replies


class RecordingERIS(FlowerERIS):
    def run_server(self, grid):
        recording = RecordingGrid(grid)
        try:
            return super().run_server(recording)
        finally:
            path = Path(os.environ["FLWR_HOME"]) / RELAY_LOG
            path.write_bytes(pickle.dumps(relay_payloads(recording.seen)))


torch.set_num_threads(1)
eris = RecordingERIS(make_mlp, client_data, CONFIG, ROUNDS, NODES, TRAINER, timeout_s=300)
server_app = eris.server_app()
client_app = eris.client_app()
