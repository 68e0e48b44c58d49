"""The benchmark's pieces (bench/quadratic.py, bench/lm.py): convex-quadratic rates, tiny LM."""

import math

import pytest
import torch
from ema_nesterov_bench_lm import Phases, TinyGPT, evaluate, stdlib_char_corpus, train_lm
from ema_nesterov_bench_quadratic import (
    BETA_GRID,
    diagonal_quadratic,
    iterations_to_tolerance,
    noisy_quadratic_floor,
)

from ema_nesterov import EMANesterov


def test_beta_grid_is_the_spec_grid():
    assert len(BETA_GRID) == 52
    assert BETA_GRID[:3] == (0.0, 0.02, 0.04)
    assert BETA_GRID[-3:] == (0.98, 0.99, 0.995)


def test_diagonal_quadratic_spectrum():
    lam = diagonal_quadratic(1e3, 100)
    assert lam.dtype == torch.float64
    assert float(lam.min()) == pytest.approx(1e-3)
    assert float(lam.max()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="kappa"):
        diagonal_quadratic(0.5)


@pytest.mark.slow
def test_quadratic_kappa_1e3_acceleration():
    ema = iterations_to_tolerance(1e3, 0.9)
    gd = iterations_to_tolerance(1e3, None, method="gd")
    assert ema.converged
    assert ema.iterations <= 450
    assert gd.iterations >= 2500


def test_gamma_zero_matches_torch_sgd_nesterov_count():
    ours = iterations_to_tolerance(1e2, 0.0)
    torch_nag = iterations_to_tolerance(1e2, None, method="sgd_nesterov")
    assert ours.iterations == 51
    assert abs(ours.iterations - torch_nag.iterations) <= 1  # same method, different variable


def test_noisy_floor_is_lower_with_the_ema():
    f0 = noisy_quadratic_floor(0.0, steps=600, tail=200, seeds=[0])
    f9 = noisy_quadratic_floor(0.9, steps=600, tail=200, seeds=[0])
    assert f9[0] < f0[0]
    with pytest.raises(ValueError, match="tail"):
        noisy_quadratic_floor(0.9, steps=10, tail=20)


def test_iterations_bad_method():
    with pytest.raises(ValueError, match="method"):
        iterations_to_tolerance(1e2, 0.9, method="adam")


def test_tinygpt_spec_size_and_split():
    model = TinyGPT()
    n = sum(p.numel() for p in model.parameters())
    assert 0.4e6 < n < 0.5e6
    hidden, rest = model.hidden_matrices()
    assert all(p.ndim == 2 for p in hidden)
    assert len(hidden) + len(rest) == len(list(model.parameters()))
    assert model(torch.zeros(2, 64, dtype=torch.long)).shape == (2, 64, 256)
    with pytest.raises(ValueError, match="n_head"):
        TinyGPT(d_model=30, n_head=4)


def test_corpus_split_and_uniform_loss():
    corpus = stdlib_char_corpus()
    assert len(corpus.val) == int(corpus.n_bytes * 0.1)
    assert len(corpus.train) + len(corpus.val) == corpus.n_bytes
    assert int(corpus.train.max()) < 256
    with pytest.raises(ValueError, match="val_fraction"):
        stdlib_char_corpus(val_fraction=1.0)
    model = TinyGPT(d_model=16, n_head=2, n_layer=1)
    torch.nn.init.zeros_(model.head.weight)  # uniform prediction
    assert evaluate(model, corpus.val, 64, max_windows=4) == pytest.approx(math.log(256))


def test_train_lm_short_run_improves():
    corpus = stdlib_char_corpus()

    def factory(model, phases):
        return EMANesterov(torch.optim.AdamW(model.parameters(), lr=3e-3), beta=1.0)

    res = train_lm(
        factory,
        corpus,
        steps=12,
        batch_size=4,
        warmup=2,
        eval_every=6,
        eval_windows=8,
        model_kwargs={"d_model": 32, "n_head": 2, "n_layer": 1},
    )
    assert not res.diverged
    assert res.final_val_loss < math.log(256)
    assert res.curve_steps == [0, 6, 12]
    assert res.state_bytes > 0
    assert Phases(100, 10, 20).lr_factor(0) == pytest.approx(0.1)
    assert Phases(100, 10, 20).lr_factor(90) == pytest.approx(0.5)


class _PoisonAfterFirstStep(torch.optim.SGD):
    """SGD that fills the weights with NaN on its first step: the next evaluation is NaN."""

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.data.fill_(float("nan"))


def test_diverged_run_keeps_only_finite_curve_points():
    # the records are strict JSON: a NaN evaluation must end the curve, not enter it
    res = train_lm(
        lambda model, phases: _PoisonAfterFirstStep(model.parameters(), lr=0.1),
        stdlib_char_corpus(),
        steps=6,
        batch_size=2,
        warmup=1,
        eval_every=1,
        eval_windows=4,
        model_kwargs={"d_model": 16, "n_head": 2, "n_layer": 1},
    )
    assert res.diverged
    assert res.curve_steps == [0]
    assert all(math.isfinite(v) for v in res.curve_val_loss)
