import hashlib
import platform
import warnings

import numpy as np
import pytest

from methodkit.data import (
    PINNED_SHA256,
    load_digits_arrays,
    load_stdlib_text,
    split_digits,
)


def test_stdlib_text_hash_is_the_content_hash():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        corpus = load_stdlib_text()
    assert len(corpus.text) > 400_000
    assert corpus.sha256 == hashlib.sha256(corpus.text.encode()).hexdigest()
    assert corpus.python_version == platform.python_version()
    assert corpus.pinned == (PINNED_SHA256.get(corpus.python_version) == corpus.sha256)


def test_stdlib_text_strict_mode_raises_on_unpinned(monkeypatch):
    monkeypatch.setattr("methodkit.data._text.PINNED_SHA256", {})
    with pytest.raises(RuntimeError, match="pinned: none"):
        load_stdlib_text(strict=True)
    with pytest.warns(UserWarning, match="sha256"):
        assert not load_stdlib_text().pinned


def test_digits_arrays():
    pytest.importorskip("sklearn")
    X, y = load_digits_arrays()
    assert X.shape == (1797, 64)
    assert X.dtype == np.float32
    assert X.min() >= 0.0
    assert X.max() <= 1.0
    assert set(np.unique(y)) == set(range(10))


def test_split_is_stratified_disjoint_and_seeded():
    pytest.importorskip("sklearn")
    _, Xte, ytr, yte = split_digits(0.2, random_state=1)
    assert len(ytr) + len(yte) == 1797
    np.testing.assert_allclose(
        np.bincount(yte) / np.bincount(load_digits_arrays()[1]), 0.2, atol=0.01
    )
    again = split_digits(0.2, random_state=1)
    np.testing.assert_array_equal(again[1], Xte)
    other = split_digits(0.2, random_state=2)
    assert not np.array_equal(other[3], yte) or not np.array_equal(other[1], Xte)
    with pytest.raises(ValueError, match="test_fraction"):
        split_digits(1.0)
