"""One seed of each eris-fl benchmark: the model, the runs, the attacks (used by ``run.py``).

Every random draw comes from a generator seeded by the run seed (``methodkit.torch.generator``)
or by the library's own per-round streams, so a seed gives the same numbers on every call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from eris_fl import (
    ERISConfig,
    ERISSimulator,
    FedAvgConfig,
    LocalTrainer,
    RandK,
    TopK,
    assign,
    run_fedavg,
    run_simulation,
)
from eris_fl.attacks import dlg, loss_threshold_mia, observer_model_estimate, psnr
from eris_fl.data import load_digits_federated
from eris_fl.params import num_state
from methodkit.data import load_digits_arrays
from methodkit.torch import generator

#: A method of the utility benchmark: ``make(seed) -> ERISConfig | FedAvgConfig``.
MakeConfig = Callable[[int], ERISConfig | FedAvgConfig]


def mlp(hidden: int, seed: int, dtype: torch.dtype, act: str = "relu") -> torch.nn.Sequential:
    """MLP 64-``hidden``-10 with torch's default init drawn from ``generator(seed)``."""
    gen = generator(seed)
    layers = [torch.nn.Linear(64, hidden), torch.nn.ReLU() if act == "relu" else torch.nn.Sigmoid()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(hidden, 10)).to(dtype)
    with torch.no_grad():  # default init, but drawn from our own generator
        for mod in model:
            if isinstance(mod, torch.nn.Linear):
                bound = 1 / math.sqrt(mod.in_features)
                mod.weight.uniform_(-bound, bound, generator=gen)
                mod.bias.uniform_(-bound, bound, generator=gen)
    return model


def utility_methods(num_aggregators: int) -> dict[str, MakeConfig]:
    """FedAvg, ERIS (random and balanced partitions), ERIS+DSC, unshifted rand-k/top-k."""
    A = num_aggregators
    return {
        "fedavg": lambda s: FedAvgConfig(seed=s),
        "eris_A4": lambda s: ERISConfig(num_aggregators=A, seed=s),
        "eris_A4_balanced": lambda s: ERISConfig(num_aggregators=A, partition="balanced", seed=s),
        "randk10_noshift": lambda s: FedAvgConfig(compressor=RandK(0.1), seed=s),
        "topk10_noshift": lambda s: FedAvgConfig(compressor=TopK(0.1), seed=s),
        "eris_dsc_randk10": lambda s: ERISConfig(num_aggregators=A, compressor=RandK(0.1), seed=s),
        "eris_dsc_randk3": lambda s: ERISConfig(num_aggregators=A, compressor=RandK(0.03), seed=s),
    }


def utility_seed(
    seed: int,
    methods: Mapping[str, MakeConfig],
    rounds: int,
    exact_rounds: int,
    exact_As: list[int],
    num_clients: int,
    num_aggregators: int,
) -> dict[str, Any]:
    """Accuracy and traffic of every method, and the float64 ERIS-vs-FedAvg exactness error.

    Returns:
        ``acc``, ``uplink`` and ``inbound`` (``{method: value}``), ``exact_err`` (one per A)
        and ``d`` (the model size).
    """
    K, A = num_clients, num_aggregators
    trainer = LocalTrainer(
        optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1), local_epochs=1, batch_size=16
    )
    fd = load_digits_federated(K, alpha=0.5, test_fraction=0.3, seed=seed)
    X_te, y_te = fd.test

    def evaluate(model: Any) -> dict[str, float]:
        return {"acc": float((model(X_te).argmax(1) == y_te).float().mean())}

    out: dict[str, Any] = {"acc": {}, "uplink": {}, "inbound": {}}
    d = 0
    for name, make in methods.items():
        model = mlp(64, seed, torch.float32)
        d = num_state(model)
        cfg = make(seed)
        run = run_fedavg if isinstance(cfg, FedAvgConfig) else run_simulation
        hist = run(model, fd.clients, cfg, rounds, trainer, evaluate, count_bytes=True)
        led = hist.ledger
        up = [sum(led.client_uplink(r).values()) / K for r in led.rounds]
        inb = [led.max_inbound(r, kind="shard") for r in led.rounds]
        fedavg_client = 4 * d  # FedAvg: every client sends its full update
        fedavg_server_over_A = K * 4 * d / A
        out["acc"][name] = hist.last("acc")
        out["uplink"][name] = sum(up) / len(up) / fedavg_client
        out["inbound"][name] = max(inb) / fedavg_server_over_A
    # exactness in float64: ERIS without DSC vs FedAvg, same random streams
    data64 = [(X.double(), y) for X, y in fd.clients]
    ref = run_fedavg(
        mlp(64, seed, torch.float64), data64, FedAvgConfig(seed=seed), exact_rounds, trainer
    ).params
    out["exact_err"] = []
    for a in exact_As:
        got = run_simulation(
            mlp(64, seed, torch.float64),
            data64,
            ERISConfig(num_aggregators=a, seed=seed),
            exact_rounds,
            trainer,
        ).params
        out["exact_err"].append(float((got - ref).abs().max()))
    out["d"] = d
    return out


def mia_seed(
    seed: int, variants: Mapping[str, dict[str, Any]], warmup: int, epochs: int, num_clients: int
) -> dict[str, float]:
    """Mean membership-inference AUC of aggregator 0 against every other client, per variant.

    Also ``"global model only"``: the same attack on the broadcast model, in the A=1 run.
    """
    fd = load_digits_federated(num_clients, alpha=1.0, test_fraction=0.5, seed=seed)
    X_out, y_out = fd.test
    gen = generator(seed)  # one stream for the non-member picks of every variant, in order
    warm_tr = LocalTrainer(optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1), batch_size=16)
    over_tr = LocalTrainer(
        optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1), local_epochs=epochs, batch_size=8
    )
    aucs: dict[str, float] = {}
    for name, kw in variants.items():
        model = mlp(256, seed, torch.float32)
        sim = ERISSimulator(model, fd.clients, ERISConfig(seed=seed, **kw), warm_tr)
        for _ in range(warmup):
            sim.step()
        views: list[Any] = []
        sim.step(trainer=over_tr, tap=views.append)
        view = views[0]  # round >= 3: with DSC the shifts are learned by now
        observer = view.aggregators[0]
        comp = kw.get("compressor")
        scale = comp.k(sim.d) / sim.d if comp is not None else 1.0
        per_client, global_only = [], []
        for k in view.clients:
            if k == observer:
                continue
            mask = view.owner == 0
            if view.support[k] is not None:
                mask = mask & view.support[k]
            est = observer_model_estimate(view.x_t, view.messages[k], mask, scale)
            X_in, y_in = fd.clients[k]
            pick = torch.randperm(len(y_out), generator=gen)[: len(y_in)]
            non = (X_out[pick], y_out[pick])
            per_client.append(loss_threshold_mia(model, est, (X_in, y_in), non))
            if name == "server (A=1)":
                global_only.append(loss_threshold_mia(model, view.x_t, (X_in, y_in), non))
        aucs[name] = sum(per_client) / len(per_client)
        if global_only:
            aucs["global model only"] = sum(global_only) / len(global_only)
    return aucs


def dlg_clients(seed: int, num_clients: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``num_clients`` clients holding one random digit each (float64), drawn by ``seed``."""
    X_all, y_all = load_digits_arrays()
    X = torch.as_tensor(X_all, dtype=torch.float64)
    y = torch.as_tensor(y_all)
    pick = torch.randperm(len(y), generator=generator(seed))[:num_clients]
    return [(X[i : i + 1], y[i : i + 1]) for i in pick.tolist()]


def dlg_seed(
    seed: int,
    runs: Mapping[str, dict[str, Any]],
    num_clients: int,
    n_targets: int,
    iters: int,
    attack_round: int,
) -> dict[str, float]:
    """Mean DLG reconstruction PSNR of aggregator 0's targets, per run (and two references).

    ``"A=4 + rand-k 10% (no shift)"`` passes the A=4 messages through an unshifted rand-k draw;
    ``"random guess"`` scores a uniform random image against the targets of the A=1 run.
    """
    data = dlg_clients(seed, num_clients)
    trainer = LocalTrainer(update="gradient", batch_size=1)
    scores: dict[str, float] = {}
    for name, kw in runs.items():
        views: list[Any] = []

        def tap(view: Any, views: list[Any] = views) -> None:
            if view.round == attack_round:
                views.append(view)

        model = mlp(64, seed, torch.float64, act="sigmoid")
        cfg = ERISConfig(server_lr=0.1, seed=seed, **kw)
        run_simulation(model, data, cfg, attack_round + 1, trainer, tap=tap)
        view = views[0]
        observer = view.aggregators[0]
        targets = [k for k in view.clients if k != observer][:n_targets]
        comp = kw.get("compressor")
        d = view.x_t.numel()
        probe = mlp(64, seed, torch.float64, act="sigmoid")
        assign(probe, view.x_t)
        variants: list[tuple[str, RandK | None]] = [(name, None)]
        if name == "A=4":
            variants.append(("A=4 + rand-k 10% (no shift)", RandK(0.1)))
        for vname, extra in variants:
            vals, guess = [], []
            for j, k in enumerate(targets):
                mask = view.owner == 0
                msg = view.messages[k]
                if comp is not None:  # undo the known d/k rescaling of rand-k
                    mask = mask & view.support[k]
                    msg = msg * comp.k(d) / d
                if extra is not None:  # the same message through an unshifted rand-k
                    mask = mask & extra.support(d, generator(seed * 1000 + k))
                observed = -msg  # gradient mode: u_k = -g_k
                gen = generator(seed * 100 + j)
                res = dlg(probe, observed, mask, shape=(1, 64), iters=iters, lr=0.05, generator=gen)
                vals.append(psnr(res.x, data[k][0]))
                guess.append(
                    psnr(torch.rand(1, 64, generator=gen, dtype=torch.float64), data[k][0])
                )
            scores[vname] = sum(vals) / len(vals)
            if name == "full gradient (A=1)":
                scores["random guess"] = sum(guess) / len(guess)
    return scores
