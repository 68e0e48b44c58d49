"""A controlled behavioural simulator with known latent types (inferred from the abstract).

Person: latent type ``c`` in {0, 1, 2, 3} = {low, high persistence} x {low, high
thoroughness}; ``z = sep * (+-1, +-1)_c + noise * N(0, I)``; a nuisance skill
``s ~ N(0, 1)`` drives speed and outcomes but not strategy. In a task, zones lie on a line;
each step cleans the current zone by ``(1 + 0.3 s) Gamma(4, 0.25) / work_j``, then the person
leaves if the zone is done, or (prob 0.8) if its progress reached the "good-enough" threshold
``sigmoid(alpha + beta z_2)``, or impulsively with prob ``sigmoid(a - b z_1)``. The next zone
is the nearest unfinished one with prob 0.7, else a uniformly random unfinished one.
``dt ~ Exp(rate e^{0.3 s})`` plus ``0.2 * distance`` on switches. A trace ends when every
zone is clean or at the horizon.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from methodkit.checks import check_int, check_real
from plvm.labels import run_length_labels
from plvm.traces import TraceSet, outcome_summaries

__all__ = [
    "PRESETS",
    "SimulatedStudy",
    "TaskSpec",
    "preset",
    "simulate_population",
    "simulate_task",
]


@dataclass(frozen=True)
class TaskSpec:
    """One task of the simulator.

    Attributes:
        n_zones: Zones on a line (distance ``|i - j|``).
        zone_work: Mean actions to finish a zone (each zone +-30 %, uniform).
        a: Impulsive-hop logit intercept (``a - b z_1``).
        b: Impulsive-hop slope on ``z_1`` (persistence).
        alpha: Good-enough threshold logit intercept (``sigmoid(alpha + beta z_2)``).
        beta: Threshold slope on ``z_2`` (thoroughness).
        horizon: Maximum number of events.
        p_nearest: Probability that the next zone is the nearest unfinished one.
        p_good_enough: Probability of leaving once progress reached the threshold.
    """

    n_zones: int
    zone_work: float
    a: float
    b: float
    alpha: float
    beta: float
    horizon: int
    p_nearest: float = 0.7
    p_good_enough: float = 0.8


SPEC_A = TaskSpec(12, 4.0, -1.5, 1.5, 0.0, 0.0, 120)  # reveals z_1 (persistence)
SPEC_B = TaskSpec(6, 12.0, -4.0, 0.0, 0.5, 2.0, 120)  # reveals z_2 (thoroughness)
SPEC_T = TaskSpec(10, 8.0, -1.5, 1.2, 0.5, 1.5, 200)  # target: depends on both
SPEC_T_IRRELEVANT = TaskSpec(10, 8.0, -1.5, 0.0, 0.5, 0.0, 200)

#: name -> (source specs {task: spec}, target spec)
PRESETS: dict[str, tuple[dict[str, TaskSpec], TaskSpec]] = {
    "complementary": ({"A": SPEC_A, "B": SPEC_B}, SPEC_T),
    "redundant": ({"A": SPEC_A, "B": SPEC_A}, SPEC_T),
    "irrelevant": ({"A": SPEC_A, "B": SPEC_B}, SPEC_T_IRRELEVANT),
}


def preset(name: str) -> tuple[dict[str, TaskSpec], TaskSpec]:
    """The source specs and target spec of a preset scenario."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {list(PRESETS)}")
    return PRESETS[name]


@dataclass
class SimulatedStudy:
    """A simulated population.

    Attributes:
        traces: Full traces of every person in the source tasks and the target task ``"T"``.
        outcomes: ``{task: (N, 4)}`` aggregate outcomes of the full traces (actions, total
            time, completion step, total progress).
        z: True latent ``(N, 2)``.
        types: Latent type ``(N,)`` in 0..3 (``2 * persistence + thoroughness``).
        skill: Nuisance skill ``(N,)``.
        y: Target label ``(N,)``, 1 = Zone Planner.
        source_tasks: Names of the source tasks.
        target_task: Name of the target task.
    """

    traces: TraceSet
    outcomes: dict[str, np.ndarray]
    z: np.ndarray
    types: np.ndarray
    skill: np.ndarray
    y: np.ndarray
    source_tasks: list[str]
    target_task: str = "T"


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def simulate_task(
    spec: TaskSpec, z: np.ndarray, skill: np.ndarray, rng: np.random.Generator
) -> list[np.ndarray]:
    """Traces of ``len(z)`` persons in one task, vectorised over persons.

    Returns:
        One array ``(L_i, 7)`` of event rows per person (see :data:`plvm.traces.EVENT_COLUMNS`).
    """
    n, Z, H = len(z), spec.n_zones, spec.horizon
    work = spec.zone_work * rng.uniform(0.7, 1.3, size=(n, Z))
    prog = np.zeros((n, Z))
    cur = rng.integers(0, Z, size=n)
    p_hop = _sigmoid(spec.a - spec.b * z[:, 0])
    thr = _sigmoid(spec.alpha + spec.beta * z[:, 1])
    speed = np.clip(1.0 + 0.3 * skill, 0.1, None)
    rate = np.exp(0.3 * skill)
    rec = np.zeros((H, n, 7))
    alive = np.ones(n, dtype=bool)
    length = np.zeros(n, dtype=int)
    switched = np.zeros(n)
    dist = np.zeros(n)
    rows = np.arange(n)
    pos = np.arange(Z)
    for step in range(H):
        before = prog[rows, cur]
        gain = speed * rng.gamma(4.0, 0.25, size=n) / work[rows, cur]
        after = np.minimum(1.0, before + gain)
        prog[rows, cur] = np.where(alive, after, before)
        dt = rng.exponential(1.0, size=n) / rate + 0.2 * dist * switched
        rec[step] = np.stack([np.full(n, step), cur, before, after, switched, dist, dt], 1)
        length += alive
        unfinished = prog < 1.0
        alive &= unfinished.any(1)
        # leave decision after the action
        u1, u2 = rng.random(n), rng.random(n)
        done = after >= 1.0
        leave = done | ((after >= thr) & (u1 < spec.p_good_enough)) | (u2 < p_hop)
        others = unfinished.copy()
        others[rows, cur] = False
        leave &= others.any(1)  # nowhere else to go: stay
        d = np.abs(pos[None, :] - cur[:, None]).astype(float)
        d_masked = np.where(others, d + 1e-6 * rng.random((n, Z)), np.inf)
        nearest = d_masked.argmin(1)
        w = others / np.maximum(others.sum(1, keepdims=True), 1)
        rnd = (rng.random(n)[:, None] < np.cumsum(w, 1)).argmax(1)
        nxt = np.where(rng.random(n) < spec.p_nearest, nearest, rnd)
        new = np.where(leave, nxt, cur)
        switched = leave.astype(float)
        dist = np.abs(new - cur).astype(float)
        cur = new
        if not alive.any():
            break
    return [rec[: length[i], i].copy() for i in range(n)]


def simulate_population(
    n: int,
    source_specs: dict[str, TaskSpec] | str = "complementary",
    target_spec: TaskSpec | None = None,
    seed: int = 0,
    *,
    sep: float = 1.2,
    noise: float = 0.5,
) -> SimulatedStudy:
    """Simulate ``n`` persons in the source tasks and the target task ``"T"``.

    Args:
        n: Number of persons (>= 2).
        source_specs: ``{task: TaskSpec}``, or a preset name ("complementary", "redundant",
            "irrelevant"), in which case ``target_spec`` defaults to the preset's.
        target_spec: The target task.
        seed: Seed of the NumPy generator; the same seed gives the same study.
        sep: Distance of the type centres from the origin per axis.
        noise: Within-type standard deviation of ``z``.

    Returns:
        The :class:`SimulatedStudy`; ``y`` is 1 (Zone Planner) iff the mean run length of the
        full target trace exceeds the population median.

    Example:
        >>> study = simulate_population(50, "complementary", seed=0)
        >>> study.traces.tasks, study.y.shape
        (['A', 'B', 'T'], (50,))
    """
    if isinstance(source_specs, str):
        src, tgt = preset(source_specs)
        target_spec = target_spec or tgt
        source_specs = src
    if target_spec is None:
        raise ValueError("target_spec is required when source_specs is not a preset name")
    check_int("n", n, low=2)
    check_real("sep", sep)
    check_real("noise", noise, low=0.0)
    if "T" in source_specs:
        raise ValueError("'T' is the target task's name; rename the source task")
    rng = np.random.default_rng(seed)
    types = rng.integers(0, 4, size=n)
    centres = np.stack([np.where(types >= 2, 1.0, -1.0), np.where(types % 2, 1.0, -1.0)], 1)
    z = sep * centres + noise * rng.standard_normal((n, 2))
    skill = rng.standard_normal(n)
    events: dict[str, list[np.ndarray | None]] = {
        t: list(simulate_task(s, z, skill, rng)) for t, s in source_specs.items()
    }
    events["T"] = list(simulate_task(target_spec, z, skill, rng))
    traces = TraceSet(np.arange(n), [*source_specs, "T"], events)
    outcomes = {t: outcome_summaries(traces, t) for t in traces.tasks}
    y = run_length_labels(traces, "T")
    return SimulatedStudy(traces, outcomes, z, types, skill, y, list(source_specs), "T")
