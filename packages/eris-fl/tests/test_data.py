import numpy as np
import pytest

from eris_fl.data import dirichlet_split, load_digits_federated


def test_dirichlet_split_is_a_partition_and_skewed():
    y = np.repeat(np.arange(10), 50)
    parts = dirichlet_split(y, 8, alpha=0.3, seed=0)
    allidx = np.concatenate(parts)
    assert np.array_equal(np.sort(allidx), np.arange(y.size))
    skew = [np.bincount(y[p], minlength=10).max() / len(p) for p in parts]
    assert np.mean(skew) > 0.3  # far from the IID 0.1
    assert [p.tolist() for p in dirichlet_split(y, 8, 0.3, seed=0)] == [p.tolist() for p in parts]


def test_dirichlet_split_errors():
    with pytest.raises(ValueError, match="alpha must be > 0"):
        dirichlet_split([0, 1], 2, 0.0)
    with pytest.raises(ValueError, match="exceeds the 2 examples"):
        dirichlet_split([0, 1], 2, 1.0, min_size=2)


def test_load_digits_federated():
    fd = load_digits_federated(10, alpha=0.5, seed=0)
    assert len(fd.clients) == 10
    n_train = sum(len(y) for _, y in fd.clients)
    assert n_train + len(fd.test[1]) == 1797
    assert fd.clients[0][0].shape[1] == 64
    assert min(len(y) for _, y in fd.clients) >= 2
