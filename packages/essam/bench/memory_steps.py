"""Peak memory of one training step (ESSAM, MinimalGRPO) and of pure inference, each measured
in a spawned process by ``methodkit.bench.peak_memory``; every child builds its own model."""

from __future__ import annotations

from arith import COMPACT, build_model, log, make_closure
from smollm2_bench import peak_above_resident

from essam import ESSAM
from essam.baselines import MinimalGRPO
from essam.rollout import generate
from essam.tasks import arithmetic as ar
from methodkit.bench import Claim, ResultRow, check, peak_memory

CLAIM = (
    "(4) peak training-step memory: ESSAM <= 1/4 of MinimalGRPO (beta > 0) and "
    "<= 1.3x pure inference on the same batch"
)


def setup(mcfg: dict, batch: int) -> tuple:
    import torch

    torch.set_num_threads(1)
    tok = ar.CharTokenizer()
    model = build_model(tok, **mcfg)
    model.eval()
    rows = ar.make_problems(batch, "rl_train", 0, templates=COMPACT)
    return tok, model, rows


def mem_setup_only(mcfg: dict, batch: int, max_new: int) -> None:
    setup(mcfg, batch)  # import transformers + build the model: the constant part


def mem_inference(mcfg: dict, batch: int, max_new: int) -> None:
    tok, model, rows = setup(mcfg, batch)
    generate(model, tok, [r["prompt"] for r in rows], max_new)


def mem_essam(mcfg: dict, batch: int, max_new: int) -> None:
    tok, model, rows = setup(mcfg, batch)
    opt = ESSAM(model.parameters(), sigma=1e-3, lr=1e-3, rho=1e-3, population_size=2)
    opt.step(make_closure(model, tok, rows, max_new, [0]))


def mem_grpo(mcfg: dict, batch: int, max_new: int) -> None:
    tok, model, rows = setup(mcfg, batch)
    g = 8
    grpo = MinimalGRPO(
        model, tok, ar.partial_reward, num_generations=g, beta=0.04, max_completion_length=max_new
    )
    grpo.step(rows[: max(1, batch // g)])


JOBS = (
    ("setup only", mem_setup_only),
    ("inference", mem_inference),
    ("ESSAM", mem_essam),
    ("GRPO", mem_grpo),
)


def measure(
    mcfg: dict, batch: int, max_new: int, quick: bool
) -> tuple[list[ResultRow], Claim, dict]:
    """Rows, claim (4) and config; a quick run's tiny model cannot test the claim.

    A quick run measures in its own process (RSS high-water mark above the resident set, no
    "setup only" job): each spawned child pays ~20 s of imports on a busy core, and the smoke
    run has to stay under 30 s; its numbers do not test the claim.
    """
    where = (
        "in process, RSS above resident" if quick else "spawned processes, RSS above import torch"
    )
    log(f"peak memory of one training step ({where}):")
    mem = {}
    for name, fn in JOBS:
        if quick and name == "setup only":
            continue
        if quick:
            mem[name] = peak_above_resident(lambda fn=fn: fn(mcfg, batch, max_new))
        else:
            mem[name] = peak_memory(fn, "cpu", args=(mcfg, batch, max_new)) / 2**20
        log(f"  peak {name}: {mem[name]:.1f} MiB")
    ess, grpo, inf = mem["ESSAM"], mem["GRPO"], mem["inference"]
    setup_mib = mem.get("setup only")
    context = (
        ""
        if setup_mib is None
        else f"; not thresholded: above the {setup_mib:.1f} MiB of importing transformers and "
        f"building the model, ESSAM +{ess - setup_mib:.1f}, GRPO +{grpo - setup_mib:.1f}, "
        f"inference +{inf - setup_mib:.1f} MiB"
    )
    note = f"; quick run: model {mcfg}, not the claim's" if quick else ""
    claim = check(
        CLAIM,
        ess <= grpo / 4 and ess <= 1.3 * inf,
        f"ESSAM {ess:.1f} MiB, GRPO {grpo:.1f} MiB (ratio {grpo / max(ess, 1e-9):.1f}x), "
        f"inference {inf:.1f} MiB (ESSAM/inference {ess / inf:.2f}){context}{note}",
        inputs=[ess, grpo, inf],
        degenerate=quick,
    )
    results = [ResultRow.from_values(k, "peak_MiB", [v], False) for k, v in mem.items()]
    if setup_mib is not None:
        results += [
            ResultRow.from_values(k, "peak_MiB_above_setup", [v - setup_mib], False)
            for k, v in mem.items()
            if k != "setup only"
        ]
    config = {
        "model": mcfg,
        "batch": batch,
        "max_new_tokens": max_new,
        "essam_population_size": 2,
        "grpo_G": 8,
        "grpo_beta": 0.04,
        "method": "in-process RSS high-water mark (quick)"
        if quick
        else "methodkit.bench.peak_memory (CPU RSS of a spawned process)",
    }
    return results, claim, config
