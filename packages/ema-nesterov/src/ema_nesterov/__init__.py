"""EMA-Nesterov: an EMA-stabilised Nesterov lookahead that wraps any PyTorch optimizer.

The wrapper :class:`EMANesterov` extrapolates along an exponential moving average of past
parameter increments and lets any base optimizer (SGD, Adam/AdamW, Muon, SOAP, ...) step from
the extrapolated point.
"""

from importlib.metadata import version as _version

from ema_nesterov._ema_nesterov import EMANesterov
from ema_nesterov.baselines import Lookahead, NesterovLookahead
from ema_nesterov.momentum_rule import momentum_gain, momentum_matched_beta
from ema_nesterov.schedules import BetaScheduler, constant_schedule, wsd_lookahead_schedule

__version__ = _version("ema-nesterov")

__all__ = [
    "BetaScheduler",
    "EMANesterov",
    "Lookahead",
    "NesterovLookahead",
    "__version__",
    "constant_schedule",
    "momentum_gain",
    "momentum_matched_beta",
    "wsd_lookahead_schedule",
]
