"""Programs, data and training through the public API (addition and a user program)."""

import numpy as np
import pytest
import torch

from em_nesy import (
    DigitMLP,
    EMNeSy,
    Enumeration,
    FunctionProgram,
    MultiDigitAddition,
    RejectionSampling,
    digit_accuracy,
    load_digit_images,
    make_addition_dataset,
)


@pytest.fixture(scope="module")
def splits():
    return load_digit_images()


def test_dataset_sums_and_determinism(splits):
    tr_x, tr_y, _, _ = splits
    for n in (1, 3, 50):
        ds = make_addition_dataset(tr_x, tr_y, n, 20, seed=3)
        assert ds.images.shape == (20, 2 * n, 8, 8)
        assert ds.sums.shape == (20, n + 1)
        again = make_addition_dataset(tr_x, tr_y, n, 20, seed=3)
        assert torch.equal(ds.images, again.images)
        assert torch.equal(ds.sums, again.sums)
        if n <= 3:
            d = ds.digits.numpy()
            a = (d[:, :n] * 10 ** np.arange(n)).sum(1)
            b = (d[:, n:] * 10 ** np.arange(n)).sum(1)
            s = (ds.sums.numpy() * 10 ** np.arange(n, -1, -1)).sum(1)
            assert np.array_equal(a + b, s)
    # N = 50: Python big ints check the MSB-first digits
    row_d, row_s = ds.digits[0].tolist(), ds.sums[0].tolist()
    a = sum(v * 10**i for i, v in enumerate(row_d[:50]))
    b = sum(v * 10**i for i, v in enumerate(row_d[50:]))
    assert int("".join(map(str, row_s))) == a + b
    other = make_addition_dataset(tr_x, tr_y, 2, 20, seed=4)
    assert not torch.equal(other.digits, make_addition_dataset(tr_x, tr_y, 2, 20, seed=3).digits)


@pytest.mark.slow
def test_multiplication_program_trains_through_sampling(splits):
    """A user program that is not addition, written for Python ints only, trains via sampling."""

    def product(z):
        if not all(type(v) is int for v in z):
            raise TypeError("this program only accepts Python ints")
        return z[0] * z[1]

    program = FunctionProgram(product, domains=(10, 10))
    tr_x, tr_y, te_x, te_y = splits
    gen = np.random.default_rng(0)
    torch.manual_seed(0)
    model = DigitMLP()
    em = EMNeSy(model, RejectionSampling(program, 64, generator=0),
                torch.optim.Adam(model.parameters(), lr=3e-3))  # fmt: skip
    for _ in range(80):
        idx = torch.from_numpy(gen.integers(0, len(tr_y), (32, 2)))
        y = (tr_y[idx[:, 0]] * tr_y[idx[:, 1]]).tolist()
        out = em.train_step(tr_x[idx], y)
        assert np.isfinite(out["loss"])
    acc = digit_accuracy(em.predict_symbols(te_x[:, None]).squeeze(1), te_y)
    assert acc > 0.6, acc
    # the same program also runs through exact enumeration
    post = Enumeration(program).posterior(torch.zeros(2, 2, 10), [0, 81])
    assert post.marginals[1, 0, 9] == 1.0
    assert post.valid.all()


def test_two_epochs_at_one_digit_learn_the_digits(splits):
    from em_nesy import AdditionDP

    tr_x, tr_y, te_x, te_y = splits
    program = MultiDigitAddition(1)
    torch.manual_seed(0)
    model = DigitMLP()
    em = EMNeSy(model, AdditionDP(program), torch.optim.Adam(model.parameters(), lr=1e-3))
    for epoch in range(2):
        ds = make_addition_dataset(tr_x, tr_y, 1, 3000, seed=epoch)
        for i in range(0, 3000, 32):
            em.train_step(ds.images[i : i + 32], ds.sums[i : i + 32])
    acc = digit_accuracy(em.predict_symbols(te_x[:, None]).squeeze(1), te_y)
    assert acc > 0.8, acc
