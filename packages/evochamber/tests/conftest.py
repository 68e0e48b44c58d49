import numpy as np
import pytest

from evochamber import Agent, MemoryArchive, Population


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _make_population(C, N, capacity=8, n_min=1, n_max=None):
    """Agents a00.. with competence matrix C (agents x niches n0..) and counts N."""
    niches = [f"n{j}" for j in range(len(C[0]))]
    agents = []
    for i, (row, cnt) in enumerate(zip(C, N, strict=True)):
        comp = {k: float(c) for k, c, n in zip(niches, row, cnt, strict=True) if n >= 1}
        counts = {k: int(n) for k, n in zip(niches, cnt, strict=True) if n >= 1}
        agents.append(Agent(f"a{i:02d}", archive=MemoryArchive(capacity), competence=comp,
                            counts=counts))  # fmt: skip
    pop = Population(agents, n_min=n_min, n_max=n_max or len(agents) + 10)
    for k in niches:
        pop.see(k)
    return pop


@pytest.fixture
def make_pop():
    return _make_population
