"""Bad input raises clear errors (or is flagged invalid, as documented)."""

import numpy as np
import pytest
import torch

from em_nesy import (
    ABCSampling,
    AdditionDP,
    BeliefPropagation,
    DigitMLP,
    EMNeSy,
    Enumeration,
    FactorGraph,
    FunctionProgram,
    MultiDigitAddition,
    RejectionSampling,
    e_step,
    make_addition_dataset,
)


def test_logit_shapes_and_domains():
    program = MultiDigitAddition(2)
    y = torch.tensor([[0, 1, 2]])
    with pytest.raises(ValueError, match="3 symbols, the program has 4"):
        AdditionDP(program).posterior(torch.zeros(1, 3, 10), y)
    with pytest.raises(ValueError, match="9 classes per symbol"):
        AdditionDP(program).posterior(torch.zeros(1, 4, 9), y)
    with pytest.raises(ValueError, match=r"shape \(B, n, K\)"):
        AdditionDP(program).posterior(torch.zeros(4, 10), y)
    prog = FunctionProgram(lambda z: z[0], domains=(3, 2))
    with pytest.raises(ValueError, match=r"logits\[1\] must have shape \(B, 2\)"):
        Enumeration(prog).posterior([torch.zeros(1, 3), torch.zeros(1, 3)], [0])


def test_non_finite_logits():
    program = MultiDigitAddition(1)
    logits = torch.zeros(1, 2, 10)
    logits[0, 0, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf"):
        AdditionDP(program).posterior(logits, torch.tensor([[0, 1]]))


def test_label_errors_and_impossible_sums():
    program = MultiDigitAddition(2)
    with pytest.raises(ValueError, match=r"y must have shape \(B, 3\)"):
        AdditionDP(program).posterior(torch.zeros(1, 4, 10), torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="2 labels for a batch of 1"):
        AdditionDP(program).posterior(torch.zeros(1, 4, 10), torch.tensor([[0, 1, 2]] * 2))
    y = torch.tensor([[1, 9, 9], [0, 12, 3], [2, 0, 0], [0, 4, 2]])  # 199, non-digit, 200, ok
    for engine in (AdditionDP(program), BeliefPropagation(program), Enumeration(program)):
        post = engine.posterior(torch.zeros(4, 4, 10), y)
        assert post.valid.tolist() == [False, False, False, True]
        assert torch.isfinite(post.marginals).all()
    with pytest.warns(UserWarning, match="no example in the batch"):
        e_step(torch.zeros(3, 4, 10), y[:3], AdditionDP(program))


def test_parameter_ranges():
    with pytest.raises(ValueError, match="n_digits must be >= 1"):
        MultiDigitAddition(0)
    with pytest.raises(ValueError, match="exceeds max_states=1000000"):
        Enumeration(MultiDigitAddition(4))
    Enumeration(FunctionProgram(lambda z: 0, domains=(10,) * 6))  # 1e6 states: inclusive
    with pytest.raises(ValueError, match="n_samples"):
        RejectionSampling(MultiDigitAddition(1), n_samples=0)
    with pytest.raises(ValueError, match="tau must be > 0"):
        ABCSampling(MultiDigitAddition(1), tau=0.0)
    model = DigitMLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="m_steps must be an int >= 1"):
        EMNeSy(model, AdditionDP(MultiDigitAddition(1)), opt, m_steps=0)
    with pytest.raises(ValueError, match="n_examples must be >= 1"):
        make_addition_dataset(torch.zeros(5, 8, 8), np.arange(5), 1, 0)


def test_factor_tables_must_match_variables():
    g = FactorGraph([2, 3])
    with pytest.raises(ValueError, match="disagrees with variables"):
        g.add_factor((0, 1), torch.ones(3, 2))
    with pytest.raises(ValueError, match="non-negative"):
        g.add_factor((0,), torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="out of range"):
        g.add_factor((2,), torch.ones(2))


def test_probabilities_instead_of_logits_warn():
    program = MultiDigitAddition(1)
    probs = torch.full((2, 2, 10), 0.1)
    with pytest.warns(UserWarning, match="look like probabilities"):
        AdditionDP(program).posterior(probs, torch.tensor([[0, 5], [1, 0]]))


def test_loopy_bp_runs_and_flags_impossible_graphs():
    # 3 binary symbols in a cycle of agreement factors (loopy); y = 1 also forbids both values
    # of symbol 0, a local contradiction that loopy BP detects.
    def graph(y):
        g = FactorGraph([2, 2, 2])
        for a, b in ((0, 1), (1, 2), (2, 0)):
            g.add_factor((a, b), torch.eye(2))
        g.add_factor((0,), torch.stack([torch.ones(2) * (1 - int(v)) for v in y]))
        return g

    bp = BeliefPropagation(graph, domains=(2, 2, 2), max_iters=50)
    logits = torch.tensor([[[2.0, 0.0], [0.0, 0.5], [0.0, 0.0]]] * 2)
    post = bp.posterior(logits, [0, 1])
    assert post.stats["tree"] == 0.0
    assert post.valid.tolist() == [True, False]
    assert post.marginals[0, :, 0].min() > 0.8  # agreement pulls all three towards value 0
