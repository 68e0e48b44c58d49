"""ES / ESSAM / accelerated ESSAM against the dense float64 reference (tests/reference.py)."""

import pytest
import torch

import reference
from essam import ESSAM

CASES = [
    ("es", 0.0, 0),
    ("standard", 0.3, 0),
    ("standard", "auto", 0),
    ("accelerated", 0.3, 0),
    ("accelerated", 0.3, 2),
]


def _run_both(toy_cls, dtype, variant, rho, refresh, wd=0.0, steps=4):
    toy = toy_cls(dtype)
    theta0 = toy.flat()
    opt = ESSAM(
        toy.params,
        sigma=0.05,
        lr=0.02,
        rho=rho,
        population_size=6,
        variant=variant,
        sam_refresh=refresh,
        weight_decay=wd,
        seed=3,
    )
    got = []
    for _ in range(steps):
        opt.step(toy.closure)
        got.append(toy.flat())
    templates = [torch.zeros(s, dtype=dtype) for s in toy.shapes]
    ref = reference.reference_run(
        templates,
        theta0,
        toy.reward_flat,
        steps=steps,
        n=6,
        sigma=0.05,
        lr=0.02,
        rho=rho,
        variant=variant,
        seed=3,
        weight_decay=wd,
        sam_refresh=refresh,
    )
    return got, ref, theta0


@pytest.mark.parametrize(("variant", "rho", "refresh"), CASES)
def test_float64_matches_dense_reference(toy_cls, variant, rho, refresh):
    got, ref, theta0 = _run_both(toy_cls, torch.float64, variant, rho, refresh)
    for g, r in zip(got, ref, strict=False):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-10)
    assert not torch.allclose(got[-1], theta0)


@pytest.mark.parametrize(("variant", "rho", "refresh"), CASES)
def test_float32_matches_dense_reference(toy_cls, variant, rho, refresh):
    got, ref, _ = _run_both(toy_cls, torch.float32, variant, rho, refresh)
    for g, r in zip(got, ref, strict=False):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-6)


def test_weight_decay_matches_reference(toy_cls):
    got, ref, _ = _run_both(toy_cls, torch.float64, "standard", 0.3, 0, wd=0.5, steps=2)
    for g, r in zip(got, ref, strict=False):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-10)
