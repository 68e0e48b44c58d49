"""ERIS reproduction on sklearn digits: utility + communication, and two leakage protocols.

    uv run python packages/eris-fl/bench/run.py --threads 1            # full (3 seeds)
    uv run python packages/eris-fl/bench/run.py --quick --seeds 0      # smoke run

Writes ``digits_utility``, ``leakage_mia`` and ``leakage_dlg`` records (JSON + PNG).
"""

from __future__ import annotations

import itertools
import math
import sys
import time
from pathlib import Path
from typing import Any

from methodkit.bench import (
    BenchRecord,
    Claim,
    ResultRow,
    bench_parser,
    environment,
    finish,
    plot_results,
    save_record,
    set_threads,
)

PKG = "eris-fl"
Bench = tuple[dict[str, Any], list[ResultRow], list[Claim]]


def _mlp(hidden: int, seed: int, dtype: Any, act: str = "relu") -> Any:
    import torch

    gen = torch.Generator().manual_seed(seed)
    layers = [torch.nn.Linear(64, hidden), torch.nn.ReLU() if act == "relu" else torch.nn.Sigmoid()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(hidden, 10)).to(dtype)
    with torch.no_grad():  # default init, but drawn from our own generator
        for mod in model:
            if isinstance(mod, torch.nn.Linear):
                bound = 1 / math.sqrt(mod.in_features)
                mod.weight.uniform_(-bound, bound, generator=gen)
                mod.bias.uniform_(-bound, bound, generator=gen)
    return model


# ----------------------------------------------------------------------------- utility
def bench_utility(seeds: list[int], quick: bool, threads: int) -> Bench:
    import torch

    from eris_fl import (
        ERISConfig,
        FedAvgConfig,
        LocalTrainer,
        RandK,
        TopK,
        run_fedavg,
        run_simulation,
    )
    from eris_fl.data import load_digits_federated
    from eris_fl.params import num_state

    K, A = 10, 4
    rounds = 3 if quick else 60
    exact_rounds = 2 if quick else 60
    exact_As = [1, 4] if quick else [1, 2, 4, 10]
    trainer = LocalTrainer(
        optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1), local_epochs=1, batch_size=16
    )
    methods = {
        "fedavg": FedAvgConfig,
        "eris_A4": lambda s: ERISConfig(num_aggregators=A, seed=s),
        "eris_A4_balanced": lambda s: ERISConfig(num_aggregators=A, partition="balanced", seed=s),
        "randk10_noshift": lambda s: FedAvgConfig(compressor=RandK(0.1), seed=s),
        "topk10_noshift": lambda s: FedAvgConfig(compressor=TopK(0.1), seed=s),
        "eris_dsc_randk10": lambda s: ERISConfig(num_aggregators=A, compressor=RandK(0.1), seed=s),
        "eris_dsc_randk3": lambda s: ERISConfig(num_aggregators=A, compressor=RandK(0.03), seed=s),
    }
    if quick:
        methods = {m: methods[m] for m in ("fedavg", "eris_A4", "eris_dsc_randk10")}
    acc = {m: [] for m in methods}
    uplink = {m: [] for m in methods}
    inbound = {m: [] for m in methods}
    exact_err = []
    d = None
    for seed in seeds:
        fd = load_digits_federated(K, alpha=0.5, test_fraction=0.3, seed=seed)
        X_te, y_te = fd.test

        def evaluate(model: Any, X_te: Any = X_te, y_te: Any = y_te) -> dict[str, float]:
            return {"acc": float((model(X_te).argmax(1) == y_te).float().mean())}

        for name, make in methods.items():
            model = _mlp(64, seed, torch.float32)
            d = num_state(model)
            cfg = FedAvgConfig(seed=seed) if name == "fedavg" else make(seed)
            run = run_fedavg if isinstance(cfg, FedAvgConfig) else run_simulation
            hist = run(model, fd.clients, cfg, rounds, trainer, evaluate)
            acc[name].append(hist.last("acc"))
            led = hist.ledger
            up = [sum(led.client_uplink(r).values()) / K for r in led.rounds]
            inb = [led.max_inbound(r, kind="shard") for r in led.rounds]
            fedavg_client = 4 * d  # FedAvg: every client sends its full update
            fedavg_server_over_A = K * 4 * d / A
            uplink[name].append(sum(up) / len(up) / fedavg_client)
            inbound[name].append(max(inb) / fedavg_server_over_A)
        # exactness in float64: ERIS without DSC vs FedAvg, same random streams
        data64 = [(X.double(), y) for X, y in fd.clients]
        ref = run_fedavg(
            _mlp(64, seed, torch.float64), data64, FedAvgConfig(seed=seed), exact_rounds, trainer
        ).params
        for a in exact_As:
            got = run_simulation(
                _mlp(64, seed, torch.float64),
                data64,
                ERISConfig(num_aggregators=a, seed=seed),
                exact_rounds,
                trainer,
            ).params
            exact_err.append(float((got - ref).abs().max()))
        print(f"[utility] seed {seed} done", file=sys.stderr)
    results = []
    for name in methods:
        results.append(ResultRow.from_values(name, "test_accuracy", acc[name], True))
    for name in methods:
        results.append(ResultRow.from_values(name, "client_uplink_vs_fedavg", uplink[name], False))
    for name in methods:
        results.append(
            ResultRow.from_values(name, "max_inbound_vs_fedavg_server_over_A", inbound[name], False)
        )
    mean = {m: sum(v) / len(v) for m, v in acc.items()}
    gap = 100 * (mean["fedavg"] - mean["eris_dsc_randk10"])
    up_dsc = max(uplink["eris_dsc_randk10"])
    inb_rand = max(inbound["eris_A4"])
    inb_dsc = max(inbound["eris_dsc_randk10"])
    claims = [
        Claim(
            "ERIS+DSC (rand-k 10%, A=4) mean accuracy within 1.5 points of FedAvg",
            gap <= 1.5,
            f"FedAvg {mean['fedavg']:.4f}, ERIS+DSC {mean['eris_dsc_randk10']:.4f} "
            f"(gap {gap:.2f} points)",
        ),
        Claim(
            f"ERIS without DSC equals FedAvg to 1e-6 after {exact_rounds} rounds (float64), "
            f"A in {exact_As}",
            max(exact_err) <= 1e-6,
            f"max |x_ERIS - x_FedAvg| = {max(exact_err):.3g}",
        ),
        Claim(
            "ERIS+DSC client uplink <= 12% of FedAvg bytes",
            up_dsc <= 0.12,
            f"{100 * up_dsc:.2f}%",
        ),
        Claim(
            "max node inbound load <= 1.1 x FedAvg server load / A (ERIS A=4 and ERIS+DSC)",
            inb_rand <= 1.1 and inb_dsc <= 1.1,
            f"random partition {inb_rand:.3f}, ERIS+DSC {inb_dsc:.3f}",
        ),
    ]
    if "eris_A4_balanced" in inbound:
        bal = max(inbound["eris_A4_balanced"])
        expected = K * 4 * math.ceil(d / A) / (K * 4 * d / A)
        claims.append(
            Claim(
                "balanced partition: max inbound is exactly K*ceil(d/A) values",
                abs(bal - expected) < 1e-12,
                f"{bal:.6f} vs {expected:.6f}",
            )
        )
    config = {
        "data": "sklearn digits, 70/30 stratified split, Dirichlet(0.5) over 10 clients",
        "model": "MLP 64-64-10 (ReLU), 4810 params",
        "local": "SGD lr 0.1, batch 16, 1 epoch",
        "rounds": rounds,
        "num_aggregators": A,
        "exactness_rounds": exact_rounds,
        "exactness_A": exact_As,
        "quick": quick,
    }
    return config, results, claims


# ----------------------------------------------------------------------------- MIA
def bench_mia(seeds: list[int], quick: bool, threads: int) -> Bench:
    import torch

    from eris_fl import ERISConfig, ERISSimulator, LocalTrainer, RandK
    from eris_fl.attacks import loss_threshold_mia, observer_model_estimate
    from eris_fl.data import load_digits_federated

    K = 10
    warmup = 2 if quick else 5
    epochs = 5 if quick else 30
    variants = {
        "server (A=1)": dict(num_aggregators=1),
        "A=2": dict(num_aggregators=2),
        "A=4": dict(num_aggregators=4),
        "A=8": dict(num_aggregators=8),
        "A=4 + DSC rand-k 10%": dict(num_aggregators=4, compressor=RandK(0.1)),
    }
    if quick:
        variants = {k: variants[k] for k in ("server (A=1)", "A=4", "A=4 + DSC rand-k 10%")}
    warm_tr = LocalTrainer(optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1), batch_size=16)
    over_tr = LocalTrainer(
        optimizer_factory=lambda p: torch.optim.SGD(p, lr=0.1), local_epochs=epochs, batch_size=8
    )
    aucs = {v: [] for v in [*variants, "global model only"]}
    for seed in seeds:
        fd = load_digits_federated(K, alpha=1.0, test_fraction=0.5, seed=seed)
        X_out, y_out = fd.test
        gen = torch.Generator().manual_seed(seed)
        for name, kw in variants.items():
            model = _mlp(256, seed, torch.float32)
            sim = ERISSimulator(model, fd.clients, ERISConfig(seed=seed, **kw), warm_tr)
            for _ in range(warmup):
                sim.step()
            views = []
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
            aucs[name].append(sum(per_client) / len(per_client))
            if global_only:
                aucs["global model only"].append(sum(global_only) / len(global_only))
        print(f"[mia] seed {seed} done", file=sys.stderr)
    results = [ResultRow.from_values(v, "mia_auc", vals, False) for v, vals in aucs.items()]
    mean = {v: sum(x) / len(x) for v, x in aucs.items()}
    As = [v for v in ("server (A=1)", "A=2", "A=4", "A=8") if v in mean]
    falls = all(mean[a] > mean[b] for a, b in itertools.pairwise(As))
    claims = [
        Claim(
            "membership-inference AUC falls with A and with DSC",
            falls and mean["A=4 + DSC rand-k 10%"] < mean["A=4"],
            ", ".join(f"{v} {mean[v]:.3f}" for v in mean),
        )
    ]
    config = {
        "protocol": "spec protocol A: MLP 64-256-10, 50/50 split, Dirichlet(1) over 10 clients, "
        f"{warmup} warm-up rounds (1 epoch, batch 16), then {epochs} local epochs (batch 8); "
        "observer = aggregator 0 attacks every other client's real message; score = -loss",
        "quick": quick,
    }
    return config, results, claims


# ----------------------------------------------------------------------------- DLG
def bench_dlg(seeds: list[int], quick: bool, threads: int) -> Bench:
    import torch

    from eris_fl import ERISConfig, LocalTrainer, RandK, assign, run_simulation
    from eris_fl.attacks import dlg, psnr
    from methodkit.data import load_digits_arrays

    K = 16
    n_targets = 1 if quick else 8
    iters = 60 if quick else 300
    attack_round = 3
    X_all, y_all = load_digits_arrays()
    X_all = torch.as_tensor(X_all, dtype=torch.float64)
    y_all = torch.as_tensor(y_all)
    trainer = LocalTrainer(update="gradient", batch_size=1)
    runs = {
        "full gradient (A=1)": dict(num_aggregators=1),
        "A=4": dict(num_aggregators=4),
        "A=16": dict(num_aggregators=16),
        "A=4 + DSC rand-k 10%": dict(num_aggregators=4, compressor=RandK(0.1)),
    }
    names = [*runs, "A=4 + rand-k 10% (no shift)", "random guess"]
    scores = {n: [] for n in names}
    for seed in seeds:
        pick = torch.randperm(len(y_all), generator=torch.Generator().manual_seed(seed))[:K]
        data = [(X_all[i : i + 1], y_all[i : i + 1]) for i in pick.tolist()]
        for name, kw in runs.items():
            views = []

            def tap(view: Any, views: list[Any] = views) -> None:
                if view.round == attack_round:
                    views.append(view)

            model = _mlp(64, seed, torch.float64, act="sigmoid")
            run_simulation(
                model,
                data,
                ERISConfig(server_lr=0.1, seed=seed, **kw),
                attack_round + 1,
                trainer,
                tap=tap,
            )
            view = views[0]
            observer = view.aggregators[0]
            targets = [k for k in view.clients if k != observer][:n_targets]
            comp = kw.get("compressor")
            d = view.x_t.numel()
            probe = _mlp(64, seed, torch.float64, act="sigmoid")
            assign(probe, view.x_t)
            variants = [(name, None)]
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
                        g = torch.Generator().manual_seed(seed * 1000 + k)
                        mask = mask & extra.support(d, g)
                    observed = -msg  # gradient mode: u_k = -g_k
                    gen = torch.Generator().manual_seed(seed * 100 + j)
                    res = dlg(
                        probe, observed, mask, shape=(1, 64), iters=iters, lr=0.05, generator=gen
                    )
                    vals.append(psnr(res.x, data[k][0]))
                    guess.append(
                        psnr(torch.rand(1, 64, generator=gen, dtype=torch.float64), data[k][0])
                    )
                scores[vname].append(sum(vals) / len(vals))
                if name == "full gradient (A=1)":
                    scores["random guess"].append(sum(guess) / len(guess))
        print(f"[dlg] seed {seed} done", file=sys.stderr)
    results = [ResultRow.from_values(n, "dlg_psnr_db", v, False) for n, v in scores.items()]
    m = {n: sum(v) / len(v) for n, v in scores.items()}
    claims = [
        Claim(
            "DLG PSNR falls with A (1 > 4 > 16) and with DSC (A=4+DSC < A=4)",
            m["full gradient (A=1)"] > m["A=4"] > m["A=16"]
            and m["A=4 + DSC rand-k 10%"] < m["A=4"],
            ", ".join(f"{n} {v:.1f} dB" for n, v in m.items()),
        )
    ]
    config = {
        "protocol": "spec protocol B: sigmoid MLP 64-64-10, 16 clients with one digit each, "
        "update = one gradient (u=-g), server lr 0.1; observer = aggregator 0 attacks the real "
        f"messages of round {attack_round} of each run (DSC shifts learned over 3 rounds); "
        f"DLG with iDLG label inference, Adam lr 0.05, {iters} steps",
        "targets_per_seed": n_targets,
        "quick": quick,
    }
    return config, results, claims


def main() -> int:
    parser = bench_parser(__doc__.splitlines()[0])
    args = parser.parse_args()
    set_threads(args.threads)
    import torch

    import methodkit

    torch.set_num_threads(args.threads)
    methodkit.seed_everything(args.seeds[0])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    benches = {
        "digits_utility": (bench_utility, {"test_accuracy": "fraction"}),
        "leakage_mia": (bench_mia, {"mia_auc": "AUC"}),
        "leakage_dlg": (bench_dlg, {"dlg_psnr_db": "dB"}),
    }
    for name, (fn, units) in benches.items():
        start = time.perf_counter()
        config, results, claims = fn(args.seeds, args.quick, args.threads)
        rec = BenchRecord(
            package=PKG,
            benchmark=name,
            config=config,
            seeds=list(args.seeds),
            results=results,
            claim=claims[0],
            claims=claims,
            wall_time_s=time.perf_counter() - start,
            environment=environment(args.threads),
        )
        save_record(rec, out)
        data = rec.to_dict()
        plot_results(data, out / f"{name}.png", units=units)
        records.append(data)
    return finish(records, args.quick)


if __name__ == "__main__":
    raise SystemExit(main())
