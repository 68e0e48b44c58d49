"""Team-level operators: niche-conditioned team assembly and online structure selection."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from evochamber.agent import Agent
from evochamber.population import Population
from evochamber.types import Structure
from methodkit.checks import check_real


def _argmax_ties(scores: np.ndarray, rng: np.random.Generator) -> int:
    """Index of the maximum; exact ties broken by a seeded uniform draw."""
    best = np.flatnonzero(scores >= scores.max() - 1e-12)
    return int(best[0]) if len(best) == 1 else int(rng.choice(best))


def cosine(u: Sequence[float], v: Sequence[float]) -> float:
    """Cosine similarity (0 when a vector is zero)."""
    a, b = np.asarray(u, float), np.asarray(v, float)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else 0.0


def check_team_size(size: int, population_size: int | None = None) -> None:
    """Raise ValueError unless ``1 <= size <= 5`` (and ``<= population_size``)."""
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 5:
        raise ValueError(f"team size must be an integer in 1..5, got {size!r}")
    if population_size is not None and size > population_size:
        raise ValueError(f"team size {size} exceeds the population size {population_size}")


class NicheTeamAssembler:
    """Anchor, supplement(s) and scout for a niche-k task.

    * anchor = argmax_a c[a,k] + beta * sqrt(log(1+t) / (1+n[a,k]))   (UCB; seeded ties)
    * supplement = argmax_{a != anchor} c[a,k] - gamma * cos(prof_a, prof_anchor)
    * scout = uniform among the rest with n[a,k] <= the pool median of n[., k]

    Sizes 4 and 5 add supplements before the scout. Roles from the paper; formulas inferred.

    Args:
        beta: UCB exploration weight.
        gamma: Diversity weight of the supplement (profile = niche histogram of the archive).
        size: Team size in 1..5.
    """

    def __init__(self, beta: float = 0.3, gamma: float = 0.2, size: int = 3) -> None:
        check_team_size(size)
        self.beta = check_real("beta", beta, 0.0)
        self.gamma = check_real("gamma", gamma, 0.0)
        self.size = size

    def anchor_scores(self, agents: Sequence[Agent], niche: str, t: int) -> np.ndarray:
        """``c[a,k] + beta * sqrt(log(1+t) / (1+n[a,k]))`` for each agent."""
        c = np.array([a.c(niche) for a in agents])
        n = np.array([a.n(niche) for a in agents], dtype=float)
        return c + self.beta * np.sqrt(math.log1p(t) / (1.0 + n))

    def assemble(
        self, population: Population, niche: str, t: int, rng: np.random.Generator
    ) -> list[Agent]:
        """The team, anchor first, scout last."""
        agents = list(population.agents)
        check_team_size(self.size, len(agents))
        anchor = agents[_argmax_ties(self.anchor_scores(agents, niche, t), rng)]
        team = [anchor]
        prof_anchor = anchor.archive.profile(population.niches)
        n_supp = self.size - 1 if self.size < 3 else self.size - 2
        for _ in range(n_supp):
            rest = [a for a in agents if a not in team]
            s = np.array(
                [
                    a.c(niche)
                    - self.gamma * cosine(a.archive.profile(population.niches), prof_anchor)
                    for a in rest
                ]
            )
            team.append(rest[_argmax_ties(s, rng)])
        if self.size >= 3:
            rest = [a for a in agents if a not in team]
            med = float(np.median([a.n(niche) for a in agents]))
            pool = [a for a in rest if a.n(niche) <= med] or rest
            team.append(pool[int(rng.integers(len(pool)))])
        return team


class RandomTeamAssembler:
    """Ablation: a uniformly random team; the first drawn member is the anchor."""

    def __init__(self, size: int = 3) -> None:
        check_team_size(size)
        self.size = size

    def assemble(
        self, population: Population, niche: str, t: int, rng: np.random.Generator
    ) -> list[Agent]:
        """The team for a niche-``niche`` task, anchor first."""
        check_team_size(self.size, len(population))
        idx = rng.choice(len(population), size=self.size, replace=False)
        return [population.agents[int(i)] for i in idx]


class ThompsonStructureSelector:
    """Per-niche Beta-Bernoulli Thompson sampling over structure success, prior Beta(1, 1).

    ``select`` draws ``p_s ~ Beta(a_s, b_s)`` for each structure and returns the argmax;
    ``update`` adds the outcome (success -> a += 1, failure -> b += 1; unknown is skipped).
    """

    def __init__(
        self,
        structures: Sequence[Structure | str] | None = None,
        prior: tuple[float, float] = (1.0, 1.0),
    ) -> None:
        self.structures = [Structure.parse(s) for s in (structures or list(Structure))]
        if not self.structures:
            raise ValueError("structures must name at least one structure")
        if len(prior) != 2:
            raise ValueError(f"prior must be a pair (a, b), got {prior!r}")
        self.prior = (
            check_real("prior a", prior[0], 0.0, low_open=True),
            check_real("prior b", prior[1], 0.0, low_open=True),
        )
        self.stats: dict[str, dict[str, list[float]]] = {}

    def posterior(self, niche: str) -> dict[str, list[float]]:
        """``{structure name: [a, b]}`` for ``niche``."""
        return self.stats.setdefault(niche, {s.name: list(self.prior) for s in self.structures})

    def select(self, niche: str, team: Sequence[Agent], rng: np.random.Generator) -> Structure:
        """The structure for this task."""
        post = self.posterior(niche)
        draws = np.array([rng.beta(post[s.name][0], post[s.name][1]) for s in self.structures])
        return self.structures[int(np.argmax(draws))]

    def update(self, niche: str, structure: Structure, success: bool | None) -> None:
        """Record the outcome of ``structure`` on ``niche``."""
        if success is None:
            return
        ab = self.posterior(niche)[structure.name]
        ab[0 if success else 1] += 1.0

    def state(self) -> dict[str, Any]:
        """JSON-serialisable state."""
        return {"stats": self.stats}

    def load_state(self, d: Mapping[str, Any]) -> None:
        """Restore :meth:`state`'s output."""
        self.stats = {k: {s: list(v) for s, v in d.items()} for k, d in d["stats"].items()}


class FixedStructureSelector(ThompsonStructureSelector):
    """Ablation: always the same structure (statistics still recorded)."""

    def __init__(self, structure: Structure | str) -> None:
        super().__init__([structure])


class AnchorChoiceSelector(ThompsonStructureSelector):
    """LLM mode: the anchor picks the structure from a summary of the Thompson statistics.

    Args:
        choose: ``choose(anchor, summary) -> str``, e.g. one chat call of the anchor; a
            reply naming no structure falls back to Thompson sampling.
    """

    def __init__(
        self,
        choose: Callable[[Agent, str], str],
        structures: Sequence[Structure | str] | None = None,
    ) -> None:
        super().__init__(structures)
        self.choose = choose

    def summary(self, niche: str) -> str:
        """Text summary of the niche's statistics (what the anchor is shown)."""
        post = self.posterior(niche)
        lines = [
            f"{name}: {a - 1:.0f} successes, {b - 1:.0f} failures" for name, (a, b) in post.items()
        ]
        return f"Niche {niche}. Past results per collaboration structure:\n" + "\n".join(lines)

    def select(self, niche: str, team: Sequence[Agent], rng: np.random.Generator) -> Structure:
        """The structure for this task."""
        reply = self.choose(team[0], self.summary(niche)).upper()
        for s in self.structures:
            if s.name in reply:
                return s
        return super().select(niche, team, rng)
