"""Round time of the ERIS simulator against a plain FedAvg loop, side by side (``run.py``).

The plain loop is what a user would write without this package: every client trains from
``x_t`` on its own seeded stream, the server adds ``p_k u_k`` and steps. Both run on the same
model and data, interleaved in blocks so that a change of machine load hits both alike.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import tasks
import torch

from eris_fl import ERISConfig, ERISSimulator, LocalTrainer, assign, flatten
from eris_fl._seeding import LOCAL, derived_generator
from eris_fl.data import load_digits_federated
from eris_fl.observers import ByteCounter


def plain_fedavg_round(
    model: torch.nn.Module,
    x: torch.Tensor,
    clients: list[Any],
    trainer: LocalTrainer,
    seed: int,
    t: int,
) -> torch.Tensor:
    """One round of a hand-written FedAvg loop (sample-weighted mean of the updates).

    Each client draws from eris_fl's per-client stream, so both loops see the same batches.
    """
    n = [len(y) for _, y in clients]
    v = torch.zeros_like(x)
    for k, data in enumerate(clients):
        u = trainer.update(model, x.clone(), data, derived_generator(seed, t, k, LOCAL))
        v += (n[k] / sum(n)) * u
    x = x + v
    assign(model, x)
    return x


def round_times(
    seed: int, rounds: int, blocks: int, num_clients: int, num_aggregators: int
) -> dict[str, Any]:
    """Median seconds per round of the plain loop, ERIS, and ERIS with a byte counter.

    Returns:
        ``{"plain", "eris", "eris_counted"}`` medians (s), the per-block ratios and the
        largest ``|x_ERIS - x_plain|`` after all rounds (0.0 = bit-identical).
    """
    fd = load_digits_federated(num_clients, alpha=0.5, test_fraction=0.3, seed=seed)
    trainer = LocalTrainer(local_epochs=1, batch_size=16)
    cfg = ERISConfig(num_aggregators=num_aggregators, seed=seed)
    plain_model, eris_model, counted_model = (tasks.mlp(64, seed, torch.float32) for _ in range(3))
    x_plain = flatten(plain_model)
    eris = ERISSimulator(eris_model, fd.clients, cfg, trainer)
    counted = ERISSimulator(counted_model, fd.clients, cfg, trainer, observers=[ByteCounter(None)])
    # untimed: the first optimizer step of a process imports torch._dynamo (seconds)
    plain_fedavg_round(tasks.mlp(64, seed, torch.float32), x_plain, fd.clients, trainer, seed, 0)
    times: dict[str, list[float]] = {"plain": [], "eris": [], "eris_counted": []}
    t = 0
    for _ in range(blocks):
        for name in times:
            start = time.perf_counter()
            for r in range(t, t + rounds):
                if name == "plain":
                    x_plain = plain_fedavg_round(plain_model, x_plain, fd.clients, trainer, seed, r)
                elif name == "eris":
                    eris.step()
                else:
                    counted.step()
            times[name].append((time.perf_counter() - start) / rounds)
        t += rounds
    ratios = [e / p for e, p in zip(times["eris"], times["plain"], strict=True)]
    return {
        **{k: statistics.median(v) for k, v in times.items()},
        "ratios": ratios,
        "counted_ratios": [
            c / p for c, p in zip(times["eris_counted"], times["plain"], strict=True)
        ],
        "max_diff": float((eris.x - x_plain).abs().max()),
        "counted_diff": float((counted.x - x_plain).abs().max()),
    }
