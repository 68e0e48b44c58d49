"""EvoChamber: the solve-evolve loop over a task stream (individual, team, population levels).

The engine is model-agnostic: the same loop runs over an LLM policy
(:class:`~evochamber.policies.llm.LLMPolicy`) and the NicheWorld simulator
(:class:`~evochamber.policies.sim.SimPolicy`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from evochamber._validation import check_bool
from evochamber.agent import Agent
from evochamber.codream import ROUTINGS, SCOPES, TRIGGERS, CoDream, check_choice
from evochamber.lifecycle import Lifecycle
from evochamber.memory import MemoryArchive
from evochamber.policies.base import StepContext
from evochamber.population import Population
from evochamber.team import (
    FixedStructureSelector,
    NicheTeamAssembler,
    RandomTeamAssembler,
    ThompsonStructureSelector,
    check_team_size,
)
from evochamber.types import Experience, Structure, Task, TeamOutcome
from methodkit.checks import check_int, check_real

TEAMS = ("niche", "random")


@dataclass
class EvoConfig:
    """Every switch of the method (defaults: the spec; (paper) or inferred as documented).

    Individual level: ``lam`` (EWMA rate), ``capacity`` C and ``tau`` of the archives.
    Team level: ``teams`` ("niche" or the "random" ablation), ``team_size``, ``beta``,
    ``gamma``, ``structure`` ("thompson" or a fixed :class:`Structure` name).
    CoDream: ``routing``, ``route_scope``, ``trigger``, ``max_insights``, ``specialist_guard``,
    ``active_window``. Population: ``lifecycle`` and each operator, ``n_min``/``n_max``.
    ``memory=False`` writes nothing to any archive (memoryless baselines);
    ``shared_memory=True`` gives every agent one common archive (broadcast-pool baseline).
    ``credit_idle_members=True`` also updates members that gave no answer (SOLO_VERIFY's
    supplement and scout) with the team outcome: the spec's literal step 4, an ablation here.
    """

    n_agents: int = 20
    team_size: int = 3
    capacity: int = 8
    tau: float = 300.0
    lam: float = 0.15
    beta: float = 0.3
    gamma: float = 0.2
    teams: str = "niche"
    structure: str = "thompson"
    routing: str = "asymmetric"
    route_scope: str = "team"
    trigger: str = "failure"
    max_insights: int = 2
    specialist_guard: float = 0.7
    active_window: int = 100
    donor_notes: bool = True
    lifecycle: bool = True
    period: int = 50
    prune: bool = True
    merge: bool = True
    fork: bool = True
    seed_agents: bool = True
    prime_seeds: bool = True
    n_min: int = 18
    n_max: int = 26
    prune_q: float = 0.25
    merge_cos: float = 0.9
    fork_c: float = 0.7
    cover_c: float = 0.5
    min_age: int = 100
    fork_cooldown: int = 0
    retrieve_r: int = 4
    memory: bool = True
    shared_memory: bool = False
    credit_idle_members: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError / TypeError on a bad or inconsistent configuration.

        Raises:
            TypeError: A count that is not an integer, a switch that is not a bool, a rate or
                threshold that is not a real number.
            ValueError: A non-finite number, ``tau <= 0``, ``beta < 0``, ``gamma < 0``,
                ``lam`` outside (0, 1], a threshold (``specialist_guard``, ``prune_q``,
                ``merge_cos``, ``fork_c``, ``cover_c``) outside [0, 1], a count below its
                minimum, ``n_min > n_max``, ``n_min`` below the team size, a team size outside
                1..5 or above ``n_agents``, an unknown ``teams``, ``structure``, ``routing``,
                ``route_scope`` or ``trigger``.
        """
        check_int("n_agents", self.n_agents, 1)
        check_team_size(self.team_size, self.n_agents)
        for name, low in (("capacity", 1), ("max_insights", 1), ("active_window", 1),
                          ("period", 1), ("n_min", 1), ("n_max", 1), ("min_age", 0),
                          ("fork_cooldown", 0), ("retrieve_r", 0)):  # fmt: skip
            check_int(name, getattr(self, name), low)
        check_real("tau", self.tau, 0.0, low_open=True)
        check_real("lam", self.lam, 0.0, 1.0, low_open=True)
        for name in ("beta", "gamma"):
            check_real(name, getattr(self, name), 0.0)
        for name in ("specialist_guard", "prune_q", "merge_cos", "fork_c", "cover_c"):
            check_real(name, getattr(self, name), 0.0, 1.0)
        for name in ("donor_notes", "lifecycle", "prune", "merge", "fork", "seed_agents",
                     "prime_seeds", "memory", "shared_memory", "credit_idle_members"):  # fmt: skip
            check_bool(name, getattr(self, name))
        if self.n_min > self.n_max:
            raise ValueError(f"n_min ({self.n_min}) must be <= n_max ({self.n_max})")
        if self.lifecycle and self.n_min < self.team_size:
            raise ValueError(f"n_min ({self.n_min}) must be >= the team size ({self.team_size})")
        check_choice("teams", self.teams, TEAMS)
        check_choice("routing", self.routing, ROUTINGS)
        check_choice("route_scope", self.route_scope, SCOPES)
        check_choice("trigger", self.trigger, TRIGGERS)
        if self.structure != "thompson":
            Structure.parse(self.structure)


class NicheTagger:
    """Fallback niche labels: the first niche whose keyword occurs in the prompt.

    Args:
        keywords: ``{niche: [keyword, ...]}``.
        default: Niche of a prompt that matches nothing.
    """

    def __init__(self, keywords: Mapping[str, Iterable[str]], default: str = "general") -> None:
        self.keywords = {k: [w.lower() for w in ws] for k, ws in keywords.items()}
        self.default = default

    def __call__(self, task: Task) -> str:
        text = task.prompt.lower()
        for k, ws in self.keywords.items():
            if any(w in text for w in ws):
                return k
        return self.default


@dataclass
class RunLog:
    """One record per step, plus the lifecycle events; JSON-serialisable."""

    steps: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def successes(self) -> list[bool | None]:
        return [s["success"] for s in self.steps]

    def accuracy(self, last: int | None = None) -> float:
        """Share of checked steps that succeeded (over the last ``last`` steps)."""
        rows = self.steps[-last:] if last else self.steps
        known = [s["success"] for s in rows if s["success"] is not None]
        return float(np.mean(known)) if known else math.nan

    def cost(self, last: int | None = None) -> dict[str, float]:
        """Calls and tokens per task (solve + CoDream)."""
        rows = self.steps[-last:] if last else self.steps
        n = max(1, len(rows))
        return {
            "calls_per_task": sum(s["calls"] for s in rows) / n,
            "codream_calls_per_task": sum(s["codream_calls"] for s in rows) / n,
            "tokens_per_task": sum(s["tokens"] for s in rows) / n,
            "codream_rate": sum(s["codream"] for s in rows) / n,
        }

    def to_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "events": self.events}

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the log (seeded runs must agree)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def validate_stream(stream: Iterable[Task], tagger: Callable[[Task], str] | None) -> list[Task]:
    """The stream as a list; ValueError when it is empty, has duplicate ids or unlabelled tasks."""
    tasks = list(stream)
    if not tasks:
        raise ValueError("the task stream is empty")
    seen: set[str] = set()
    for task in tasks:
        if not isinstance(task, Task):
            raise TypeError(f"stream items must be Task, got {type(task).__name__}")
        if task.task_id in seen:
            raise ValueError(f"duplicate task id {task.task_id!r} in the stream")
        seen.add(task.task_id)
        if task.niche is None and tagger is None:
            raise ValueError(f"task {task.task_id!r} has no niche and no NicheTagger was given")
    return tasks


def policy_state(policy: Any) -> dict[str, Any]:
    """What a resumed run needs of the policy: its own ``state()`` or its call/token counters."""
    if callable(getattr(policy, "state", None)):
        return dict(policy.state())
    return {"calls": int(getattr(policy, "calls", 0)), "tokens": int(getattr(policy, "tokens", 0))}


def load_policy_state(policy: Any, d: Mapping[str, Any]) -> None:
    """Restore :func:`policy_state`'s output into ``policy``."""
    if callable(getattr(policy, "load_state", None)):
        policy.load_state(dict(d))
        return
    for name in ("calls", "tokens"):
        if name in d and hasattr(policy, name):
            setattr(policy, name, int(d[name]))


class EvoChamber:
    """Multi-agent test-time evolution over a task stream.

    Per task x_t of niche k (the spec's algorithm box):

    1. team = anchor (UCB on c[a,k]), supplement (competence minus profile similarity), scout;
    2. structure ~ per-niche Thompson sampling over {SOLO_VERIFY, VOTE, DEBATE, PIPELINE};
    3. the policy solves; success = task.check(answer), disagreement = members differ;
    4. each answering member: c[a,k] <- (1 - lam) c[a,k] + lam s_a, n[a,k] += 1, experience;
    5. CoDream on failure: reflect, cross-examine, distill <= m insights, route strong -> weak;
    6. every P tasks the lifecycle prunes, merges, forks and seeds agents.

    Args:
        policy: A :class:`~evochamber.policies.base.SolverPolicy`.
        config: :class:`EvoConfig`.
        seed: Seeds the engine's one generator (team ties, Thompson draws, the simulator).
        tagger: Labels tasks that come without a niche.

    References:
        Zhang, Xu, Dai, Shao, Wu, Wang. EvoChamber: multi-agent test-time evolution with
        collaborative dreaming. arXiv 2605.11136, 2026.

    Example:
        >>> from evochamber import EvoChamber, EvoConfig, NicheWorld, SimPolicy
        >>> world = NicheWorld()
        >>> log = EvoChamber(SimPolicy(world), EvoConfig(), seed=0).run(world.make_stream(60))
        >>> len(log.steps)
        60
    """

    def __init__(
        self,
        policy: Any,
        config: EvoConfig | None = None,
        seed: int = 0,
        tagger: Callable[[Task], str] | None = None,
    ) -> None:
        self.policy = policy
        self.config = config or EvoConfig()
        self.config.validate()
        self.seed = int(seed)
        self.tagger = tagger
        self.rng = np.random.default_rng(seed)
        self.t = 0
        self.log = RunLog()
        self._recent: deque[tuple[str, tuple[str, ...]]] = deque(maxlen=self.config.active_window)
        self._build()

    def _build(self) -> None:
        cfg = self.config
        n_max = max(cfg.n_max, cfg.n_agents)
        self.population = Population.blank(
            cfg.n_agents, cfg.capacity, cfg.tau, n_min=min(cfg.n_min, cfg.n_agents), n_max=n_max
        )
        if cfg.shared_memory:
            shared = MemoryArchive(cfg.capacity, cfg.tau)
            for a in self.population:
                a.archive = shared
        if cfg.teams == "niche":
            self.assembler: Any = NicheTeamAssembler(cfg.beta, cfg.gamma, cfg.team_size)
        else:
            self.assembler = RandomTeamAssembler(cfg.team_size)
        if cfg.structure == "thompson":
            self.selector: Any = ThompsonStructureSelector()
        else:
            self.selector = FixedStructureSelector(cfg.structure)
        self.codream = CoDream(
            self.policy,
            cfg.max_insights,
            cfg.routing,
            cfg.route_scope,
            cfg.trigger,
            cfg.specialist_guard,
            cfg.active_window,
            cfg.donor_notes,
        )
        self.lifecycle = Lifecycle(
            period=cfg.period,
            prune_q=cfg.prune_q,
            merge_cos=cfg.merge_cos,
            fork_c=cfg.fork_c,
            cover_c=cfg.cover_c,
            min_age=cfg.min_age,
            prune=cfg.prune,
            merge=cfg.merge,
            fork=cfg.fork,
            seed=cfg.seed_agents,
            prime=cfg.prime_seeds,
            spec_c=cfg.fork_c,
            fork_cooldown=cfg.fork_cooldown,
        )

    def run(self, stream: Iterable[Task], progress: bool | None = None) -> RunLog:
        """Solve and evolve over the whole stream; returns the log.

        Args:
            stream: The tasks, in order.
            progress: Progress bar over the tasks (``None``: on a terminal only; ``True``
                always; ``False`` never; ``TQDM_DISABLE=1`` silences it).

        Raises:
            ValueError: If the stream is empty, has duplicate task ids, or a task without a
                niche when no tagger was given.
            TypeError: If an item of the stream is not a :class:`Task`.
        """
        from methodkit import progress as progress_bar

        tasks = validate_stream(stream, self.tagger)
        bar = progress_bar(tasks, enabled=progress, desc="EvoChamber tasks", total=len(tasks))
        for task in bar:
            self.step(task)
        return self.log

    def step(self, task: Task) -> dict[str, Any]:
        """One solve-evolve step; returns its log record."""
        if task.niche is None:
            if self.tagger is None:
                raise ValueError(f"task {task.task_id!r} has no niche and no NicheTagger")
            task.niche = self.tagger(task)
        cfg, t, k = self.config, self.t, task.niche
        self.population.see(k)
        ctx = StepContext(t, self.rng, cfg.retrieve_r)
        team = self.assembler.assemble(self.population, k, t, self.rng)  # 1
        structure = self.selector.select(k, team, self.rng)  # 2
        tokens0 = self.policy.tokens
        outcome = self.policy.solve(team, structure, task, ctx)  # 3
        self.selector.update(k, structure, outcome.success)
        self._individual(team, task, outcome, structure, ctx)  # 4
        report = self._reflect(team, task, outcome, ctx)  # 5
        self._recent.append((k, tuple(a.agent_id for a in team)))
        events = []
        if cfg.lifecycle:
            self.lifecycle.observe(k)
            if self.lifecycle.due(t):  # 6
                events = [e.to_dict() for e in self.lifecycle.step(self.population, t)]
                self.log.events.extend(events)
        record = {
            "t": t,
            "task_id": task.task_id,
            "niche": k,
            "team": [a.agent_id for a in team],
            "anchor": team[0].agent_id,
            "structure": structure.name,
            "answer": outcome.answer,
            "success": outcome.success,
            "disagreement": outcome.disagreement,
            "calls": outcome.cost + report["calls"],
            "codream_calls": report["calls"],
            "tokens": self.policy.tokens - tokens0,
            "codream": report["fired"],
            "insights": report["insights"],
            "recipients": report["recipients"],
            "population": len(self.population),
            "events": len(events),
        }
        self.log.steps.append(record)
        self.t += 1
        return record

    def _individual(
        self,
        team: list[Agent],
        task: Task,
        outcome: TeamOutcome,
        structure: Structure,
        ctx: StepContext,
    ) -> None:
        """EWMA competence, counts, experience, learning by doing (step 4).

        Each member that answered is updated with s_a = its own answer's correctness when
        known, else the team outcome. Members that gave no answer (the supplement and scout of
        SOLO_VERIFY) are updated with the team outcome only with ``credit_idle_members=True``
        (the spec's literal "for each member"; measured to cost accuracy, see the README).
        """
        k = task.niche or ""
        for a in team:
            answered = a.agent_id in outcome.member_answers
            if not answered and not self.config.credit_idle_members:
                continue
            own = outcome.member_correct.get(a.agent_id) if answered else None
            s = own if own is not None else outcome.success  # spec: else the team outcome
            if s is not None:
                a.update_competence(k, float(s), self.config.lam)
            else:
                a.counts[k] = a.n(k) + 1
            answer = outcome.member_answers.get(a.agent_id, outcome.answer)
            a.archive.experiences.append(
                Experience(task.task_id, k, answer, s, ctx.t, structure.name)
            )
            if self.config.memory and answered:  # learning by doing: the solvers only
                for ins in self.policy.learn(a, task, s, ctx):
                    a.archive.add(ins, ctx.t, protect=a.top_niche())

    def _reflect(
        self, team: list[Agent], task: Task, outcome: TeamOutcome, ctx: StepContext
    ) -> dict[str, Any]:
        """CoDream, or private reflection when routing is "off" (step 5)."""
        out = {"calls": 0, "fired": False, "insights": 0, "recipients": []}
        if not self.config.memory:
            return out
        if self.config.routing == "off":
            if outcome.success is False:
                calls0 = self.policy.calls
                for a in team:
                    for ins in self.policy.self_reflect(a, task, outcome, ctx):
                        a.archive.add(ins, ctx.t, protect=a.top_niche())
                out["calls"] = self.policy.calls - calls0
            return out
        active = {aid for niche, ids in self._recent if niche == task.niche for aid in ids}
        rep = self.codream.run(team, task, outcome, self.population, ctx.t, ctx, active)
        out.update(
            calls=rep.calls,
            fired=rep.fired,
            insights=len(rep.insights),
            recipients=rep.recipients,
        )
        return out

    # ---- persistence -------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The full JSON state (population, selector, lifecycle, generator, log)."""
        return {
            "format": "evochamber-state-1",
            "config": asdict(self.config),
            "seed": self.seed,
            "t": self.t,
            "population": self.population.to_dict(),
            "selector": self.selector.state(),
            "lifecycle": self.lifecycle.state(),
            "recent": [[k, list(ids)] for k, ids in self._recent],
            "rng": self.rng.bit_generator.state,
            "policy": policy_state(self.policy),
            "log": self.log.to_dict(),
        }

    def save(self, path: str | os.PathLike[str], tasks: Iterable[Task] = ()) -> None:
        """Write the state as JSON (``tasks``: optional, saved for audit with their meta).

        Raises:
            ValueError: If a task's meta is not JSON-serialisable.
        """
        state = self.state()
        state["tasks"] = []
        for task in tasks:
            try:
                json.dumps(task.meta)
            except (TypeError, ValueError) as exc:
                raise ValueError(
                    f"task {task.task_id!r} has meta that is not JSON-serialisable: {exc}"
                ) from exc
            state["tasks"].append(
                {
                    "task_id": task.task_id,
                    "niche": task.niche,
                    "prompt": task.prompt,
                    "meta": task.meta,
                }
            )
        with open(path, "w", encoding="utf-8") as f:
            json.dump(state, f)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        policy: Any,
        tagger: Callable[[Task], str] | None = None,
    ) -> EvoChamber:
        """Resume from :meth:`save`'s JSON with ``policy``."""
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        if state.get("format") != "evochamber-state-1":
            raise ValueError(f"{path} is not an evochamber state file")
        eng = cls(policy, EvoConfig(**state["config"]), state["seed"], tagger)
        eng.t = int(state["t"])
        eng.population = Population.from_dict(state["population"])
        if eng.config.shared_memory and eng.population.agents:
            shared = eng.population.agents[0].archive
            for a in eng.population:
                a.archive = shared
        eng.selector.load_state(state["selector"])
        eng.lifecycle.load_state(state["lifecycle"])
        eng._recent.extend((k, tuple(ids)) for k, ids in state["recent"])
        eng.rng.bit_generator.state = state["rng"]
        load_policy_state(policy, state.get("policy", {}))
        eng.log = RunLog(state["log"]["steps"], state["log"]["events"])
        return eng
