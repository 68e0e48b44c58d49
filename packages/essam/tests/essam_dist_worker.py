"""Runs a few ESSAM steps on a toy reward; the rank processes of test_distributed import it."""

import torch

from essam import ESSAM


def toy_run(variant: str, population_size: int, steps: int, seed: int, distributed: bool):
    """Final weights and every step's update rewards of a short run on a 3-tensor toy."""
    from essam.distributed import DistributedPopulation

    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in ((4, 6), (6, 5), (6,))]
    target = torch.randn(60, generator=g)

    def reward() -> float:
        v = torch.cat([p.reshape(-1) for p in params])
        return float(-((v - target) ** 2).sum() + torch.sin(3 * v).sum())

    opt = ESSAM(
        params,
        sigma=0.05,
        lr=0.05,
        rho=0.1,
        population_size=population_size,
        variant=variant,
        seed=seed,
        population=DistributedPopulation() if distributed else None,
    )
    rewards = [opt.step(reward).update_rewards for _ in range(steps)]
    return [p.detach().clone() for p in params], rewards


def failing_member(member: int):
    """The error message each rank sees when population member ``member``'s closure raises."""
    from essam.distributed import DistributedPopulation

    w = torch.nn.Parameter(torch.zeros(3))
    calls = []

    def reward() -> float:
        calls.append(1)
        if len(calls) == 1 + member // 2:  # 2 ranks: member m is this rank's (m // 2)-th call
            raise RuntimeError("reward service down")
        return float(w.sum())

    pop = DistributedPopulation()
    opt = ESSAM([w], sigma=0.1, lr=0.1, rho=0.0, population_size=6, population=pop)
    try:
        opt.step(reward if pop.rank == member % 2 else (lambda: float(w.sum())))
    except (RuntimeError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return "no error"


def all_jobs():
    """Every distributed check in one launch (each launch pays a torch import per rank)."""
    from essam.distributed import DistributedPopulation

    out = {
        "standard": toy_run("standard", 5, 3, 11, True),
        "accelerated": toy_run("accelerated", 5, 3, 11, True),
        "es": toy_run("es", 4, 2, 11, True),
        "failing": failing_member(3),
    }
    pop = DistributedPopulation()
    try:
        pop.check_agreement(seed=5 + pop.rank, step=0)
        out["seeds"] = "agreed"
    except ValueError as exc:
        out["seeds"] = str(exc)
    return out


def lm_run(model, tok, distributed: bool):
    """Two standard-ESSAM steps on a tiny causal LM's last layer and norm (weights restored).

    The reward reads the greedy completions, so it goes through generation on every rank.
    """
    from essam.distributed import DistributedPopulation
    from essam.rollout import generate

    for p in model.parameters():
        p.requires_grad_(False)
    params = [p for m in (model.model.layers[-1], model.model.norm) for p in m.parameters()]
    for p in params:
        p.requires_grad_(True)
    saved = [p.detach().clone() for p in params]
    prompts = ["1 + 2 =", "3 + 4 ="]

    def reward() -> float:
        texts = generate(model, tok, prompts, 3)
        return float(sum(sum(map(ord, t)) % 7 for t in texts))

    opt = ESSAM(
        params,
        sigma=0.05,
        lr=0.05,
        rho=0.1,
        population_size=4,
        seed=3,
        population=DistributedPopulation() if distributed else None,
    )
    rewards = [opt.step(reward).update_rewards for _ in range(2)]
    out = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p, s in zip(params, saved, strict=True):
            p.copy_(s)
    return out, rewards
