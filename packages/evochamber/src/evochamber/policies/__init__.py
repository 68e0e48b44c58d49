"""Policies the engine runs over: the LLM policy and the NicheWorld simulator's policy."""

from evochamber.policies.base import BasePolicy, SolverPolicy, StepContext
from evochamber.policies.sim import SimPolicy

__all__ = ["BasePolicy", "SimPolicy", "SolverPolicy", "StepContext"]
