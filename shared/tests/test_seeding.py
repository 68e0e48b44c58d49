import random
import subprocess
import sys

import numpy as np
import pytest

import methodkit


def test_seed_everything_makes_python_and_numpy_repeatable():
    g1 = methodkit.seed_everything(3)
    a = (random.random(), np.random.rand(), g1.normal())  # noqa: NPY002
    g2 = methodkit.seed_everything(3)
    b = (random.random(), np.random.rand(), g2.normal())  # noqa: NPY002
    assert a == b
    methodkit.seed_everything(4)
    assert random.random() != a[0]


def test_seed_everything_seeds_torch_when_imported():
    torch = pytest.importorskip("torch")
    methodkit.seed_everything(7)
    x = torch.rand(3)
    methodkit.seed_everything(7)
    torch.testing.assert_close(torch.rand(3), x)


@pytest.mark.parametrize(("bad", "err"), [(-1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_seed_everything_rejects_bad_seeds(bad, err):
    with pytest.raises(err, match="seed"):
        methodkit.seed_everything(bad)


def test_rng_accepts_seed_generator_none():
    g = np.random.default_rng(0)
    assert methodkit.rng(g) is g
    assert methodkit.rng(5).integers(1 << 30) == np.random.default_rng(5).integers(1 << 30)
    assert isinstance(methodkit.rng(None), np.random.Generator)


@pytest.mark.parametrize(("bad", "err"), [(-3, ValueError), ("1", TypeError), (1.0, TypeError)])
def test_rng_rejects_bad_input(bad, err):
    with pytest.raises(err, match="random_state"):
        methodkit.rng(bad)


def test_torch_generator_is_seeded():
    torch = pytest.importorskip("torch")
    from methodkit.torch import generator

    a = torch.rand(4, generator=generator(11))
    b = torch.rand(4, generator=generator(11))
    torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="seed"):
        generator(-1)


def test_import_is_light():
    code = (
        "import sys, methodkit, methodkit.bench, methodkit.data, methodkit.testing\n"
        "heavy = [m for m in ('torch', 'matplotlib', 'sklearn', 'pandas') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
