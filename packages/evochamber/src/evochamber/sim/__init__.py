"""NicheWorld: a stochastic simulator of LLM agents -- no language model is involved."""

from evochamber.sim.world import LABEL, NicheWorld, NicheWorldConfig, make_stream

__all__ = ["LABEL", "NicheWorld", "NicheWorldConfig", "make_stream"]
