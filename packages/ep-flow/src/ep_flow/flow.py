"""Public home of the flow model (the implementation lives in the method module)."""

from ep_flow._ep_flow import EPFlow, EPFlowConfig, train_flow, wrap

__all__ = ["EPFlow", "EPFlowConfig", "train_flow", "wrap"]
