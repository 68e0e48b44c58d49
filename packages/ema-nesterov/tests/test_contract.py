"""The shared optimizer contract (methodkit.testing, CONTRIBUTING.md §5) for every wrapper here."""

import torch

from ema_nesterov import EMANesterov, Lookahead, NesterovLookahead
from methodkit.testing import OptimizerContract


class TestEMANesterovAdamWContract(OptimizerContract):
    def make_optimizer(self, params):
        # beta 0.5: on the contract's deterministic quadratic, beta 1 on top of Adam's own
        # momentum is under-damped and still oscillates after 100 steps (see README Limitations)
        return EMANesterov(torch.optim.AdamW(params, lr=0.02), gamma=0.9, beta=0.5)


class TestEMANesterovSGDMemoryEfficientContract(OptimizerContract):
    def make_optimizer(self, params):
        base = torch.optim.SGD(params, lr=0.05, momentum=0.5)
        return EMANesterov(base, gamma=0.9, beta=1.0, memory_efficient=True)


class TestNesterovLookaheadContract(OptimizerContract):
    def make_optimizer(self, params):
        return NesterovLookahead(torch.optim.SGD(params, lr=0.05), beta=0.8)


class TestLookaheadContract(OptimizerContract):
    def make_optimizer(self, params):
        return Lookahead(torch.optim.Adam(params, lr=0.02), k=5, alpha=0.5)
