"""EvoChamber: multi-agent test-time evolution with CoDream, team operators and lifecycle.

A pool of agents that share one frozen model evolves while it works through a task stream:
private archives and per-niche competence, niche-conditioned teams and structures, asymmetric
knowledge routing after failures (CoDream), fork / merge / prune / seed (arXiv 2605.11136).
"""

from importlib.metadata import version as _version

from evochamber import backends, baselines, metrics
from evochamber._evochamber import EvoChamber, EvoConfig, NicheTagger, RunLog, validate_stream
from evochamber.agent import Agent
from evochamber.backends import (
    ChatModel,
    ChatResult,
    HFChatModel,
    OpenAIChatModel,
    ScriptedChatModel,
)
from evochamber.codream import CoDream, CoDreamReport, RoutingPlan, plan_routing
from evochamber.lifecycle import Lifecycle, LifecycleEvent
from evochamber.memory import MemoryArchive
from evochamber.policies import SimPolicy, SolverPolicy, StepContext
from evochamber.policies.llm import LLMPolicy, parse_answer
from evochamber.policies.prompts import DefaultPrompts, SmallModelPrompts
from evochamber.population import Population
from evochamber.sim import NicheWorld, NicheWorldConfig, make_stream
from evochamber.stream import ExactMatch, NumericMatch, PythonTests, TaskStream
from evochamber.team import (
    AnchorChoiceSelector,
    FixedStructureSelector,
    NicheTeamAssembler,
    RandomTeamAssembler,
    ThompsonStructureSelector,
)
from evochamber.types import Experience, Insight, Reflection, Structure, Task, TeamOutcome

__version__ = _version("evochamber")

__all__ = [
    "Agent",
    "AnchorChoiceSelector",
    "ChatModel",
    "ChatResult",
    "CoDream",
    "CoDreamReport",
    "DefaultPrompts",
    "EvoChamber",
    "EvoConfig",
    "ExactMatch",
    "Experience",
    "FixedStructureSelector",
    "HFChatModel",
    "Insight",
    "LLMPolicy",
    "Lifecycle",
    "LifecycleEvent",
    "MemoryArchive",
    "NicheTagger",
    "NicheTeamAssembler",
    "NicheWorld",
    "NicheWorldConfig",
    "NumericMatch",
    "OpenAIChatModel",
    "Population",
    "PythonTests",
    "RandomTeamAssembler",
    "Reflection",
    "RoutingPlan",
    "RunLog",
    "ScriptedChatModel",
    "SimPolicy",
    "SmallModelPrompts",
    "SolverPolicy",
    "StepContext",
    "Structure",
    "Task",
    "TaskStream",
    "TeamOutcome",
    "ThompsonStructureSelector",
    "__version__",
    "backends",
    "baselines",
    "make_stream",
    "metrics",
    "parse_answer",
    "plan_routing",
    "validate_stream",
]
