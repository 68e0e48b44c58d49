"""Every em-nesy sampler keeps methodkit's sampler contract (issue 50): seeded draws repeat bit
for bit, another seed changes them, draws are finite, global RNGs are untouched."""

import numpy as np
import torch

from em_nesy import ABCSampling, AdditionDP, Enumeration, MultiDigitAddition, RejectionSampling
from methodkit.testing import SamplerContract

PROGRAM = MultiDigitAddition(2)
LOGITS = torch.randn(3, 4, 10, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
LABELS = torch.from_numpy(PROGRAM.sum_digits(np.random.default_rng(0).integers(0, 10, (3, 4))))


class TestRejectionSamplingPosterior(SamplerContract):
    def draw(self, generator):
        post = RejectionSampling(PROGRAM, n_samples=256, generator=generator)
        return post.posterior(LOGITS, LABELS)


class TestABCSamplingPosterior(SamplerContract):
    def draw(self, generator):
        return ABCSampling(PROGRAM, n_samples=256, tau=0.5, generator=generator).posterior(
            LOGITS, LABELS
        )


class TestEnumerationSample(SamplerContract):
    def draw(self, generator):
        return Enumeration(PROGRAM).sample(LOGITS, LABELS, 16, generator=generator)


class TestAdditionDPSample(SamplerContract):
    def draw(self, generator):
        return AdditionDP(PROGRAM).sample(LOGITS, LABELS, 16, generator=generator)
