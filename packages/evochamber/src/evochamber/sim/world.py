"""NicheWorld: a calibrated STOCHASTIC SIMULATOR of LLM agents. No language model is involved.

K niches x S subskills; a task needs one subskill (70 %) or two from its niche (30 %),
difficulty d ~ U(0, 1). An agent succeeds with p_hi(d) = 0.9 - 0.2 d when its archive holds
every required subskill (as an insight of quality >= 0.5), else p_lo(d) = 0.45 - 0.35 d,
minus 0.1 x the off-niche share of its archive. Wrong answers cluster on the task's attractor
with probability 0.3 + 0.6 d. All constants are the spec's; the simulator itself is a design
of this package, not the paper's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from evochamber.types import Task

LABEL = "NicheWorld: stochastic simulator of LLM agents, no language model"


@dataclass(frozen=True)
class NicheWorldConfig:
    """Constants of the simulator (defaults: the spec's calibration)."""

    n_niches: int = 6
    n_subskills: int = 4
    shares: tuple[float, ...] = (0.25, 0.20, 0.18, 0.15, 0.12, 0.10)
    p_composite: float = 0.3
    p_hi: tuple[float, float] = (0.9, 0.2)  # p_hi(d) = a - b d
    p_lo: tuple[float, float] = (0.45, 0.35)
    pollution: float = 0.1
    attractor: tuple[float, float] = (0.3, 0.6)  # P(attractor | wrong) = a + b d
    q: tuple[float, float] = (0.02, 0.08)  # q_a = a + b c
    cross_exam: float = 2.0
    pool_cap: float = 0.95
    learn_p: float = 0.1
    quality: tuple[float, float, float] = (0.4, 0.5, 0.1)  # a + b c_best + s eps
    helpful_q: float = 0.5
    verify_catch: float = 0.2
    debate_convert: float = 0.7

    def __post_init__(self) -> None:
        if len(self.shares) != self.n_niches:
            raise ValueError(
                f"shares has {len(self.shares)} entries but n_niches is {self.n_niches}"
            )
        if self.n_niches < 1 or self.n_subskills < 1:
            raise ValueError("n_niches and n_subskills must be >= 1")
        if min(self.shares) < 0 or sum(self.shares) <= 0:
            raise ValueError(f"shares must be non-negative with a positive sum: {self.shares}")

    @classmethod
    def noise_off(cls) -> NicheWorldConfig:
        """p_lo = p_hi = 1 and no pollution: every agent always right."""
        return cls(p_hi=(1.0, 0.0), p_lo=(1.0, 0.0), pollution=0.0)


@dataclass
class NicheWorld:
    """The simulator's world: niches, subskills and the task stream.

    Example:
        >>> w = NicheWorld()
        >>> stream = w.make_stream(5, seed=0)
        >>> stream[0].niche, len(stream)
        ('n3', 5)
    """

    config: NicheWorldConfig = field(default_factory=NicheWorldConfig)

    label = LABEL

    @property
    def niches(self) -> list[str]:
        """Niche labels ``n0 .. n{K-1}``."""
        return [f"n{k}" for k in range(self.config.n_niches)]

    def subskill(self, k: int, j: int) -> str:
        """Id of subskill ``j`` of niche ``k``."""
        return f"n{k}.s{j}"

    def make_stream(self, n_tasks: int, seed: int = 0) -> list[Task]:
        """``n_tasks`` seeded tasks; each carries its latent state in ``meta``."""
        if n_tasks < 1:
            raise ValueError(f"n_tasks must be >= 1, got {n_tasks}")
        cfg = self.config
        rng = np.random.default_rng(seed)
        shares = np.asarray(cfg.shares, float) / sum(cfg.shares)
        tasks = []
        for i in range(n_tasks):
            k = int(rng.choice(cfg.n_niches, p=shares))
            m = 2 if (cfg.n_subskills >= 2 and rng.random() < cfg.p_composite) else 1
            subs = sorted(int(j) for j in rng.choice(cfg.n_subskills, size=m, replace=False))
            d = float(rng.random())
            answer = f"A{i}"
            tasks.append(
                Task(
                    task_id=f"t{i:05d}",
                    niche=f"n{k}",
                    prompt=f"[simulated task {i}: niche n{k}, subskills {subs}, d={d:.2f}]",
                    check=_Check(answer),
                    meta={
                        "subskills": [self.subskill(k, j) for j in subs],
                        "difficulty": d,
                        "answer": answer,
                        "attractor": f"W{i}",
                        "simulated": True,
                    },
                )
            )
        return tasks

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        return {"label": LABEL, **asdict(self.config)}


class _Check:
    """Exact match on the simulated answer (a class so that tasks stay picklable)."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def __call__(self, answer: str) -> bool:
        return answer == self.answer


def make_stream(n_tasks: int, seed: int = 0, config: NicheWorldConfig | None = None) -> list[Task]:
    """``NicheWorld(config).make_stream(n_tasks, seed)``."""
    return NicheWorld(config or NicheWorldConfig()).make_stream(n_tasks, seed)
