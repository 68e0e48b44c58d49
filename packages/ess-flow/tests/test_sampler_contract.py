"""ESS-Flow keeps methodkit's sampler contract (issue 50): seeded
draws repeat bit for bit, another seed changes them, draws are finite, global RNGs untouched."""

import warnings

import torch

from ess_flow import ESSFlow, GaussianLikelihood, MixingWarning, elliptical_slice_step
from methodkit.testing import SamplerContract

TARGET = torch.tensor([1.0, -0.5, 0.2])


def _generator(z):
    return 1.5 * z + 0.3 * torch.sin(z)


def _likelihood():
    return GaussianLikelihood(None, TARGET, 0.4)


class TestESSFlowRun(SamplerContract):
    def draw(self, generator):
        sampler = ESSFlow(_generator, _likelihood(), (3,), dtype=torch.float64)
        with warnings.catch_warnings():  # a deliberately short run: its mixing is not the point
            warnings.simplefilter("ignore", MixingWarning)
            return sampler.run(8, 12, burn_in=2, generator=generator)


class TestEllipticalSliceStep(SamplerContract):
    def draw(self, generator):
        w = torch.zeros(6, 3, dtype=torch.float64)
        ell = -((w - 1.0) ** 2).sum(-1)
        return elliptical_slice_step(
            w, ell, lambda v: -((v - 1.0) ** 2).sum(-1), generator=generator
        )
