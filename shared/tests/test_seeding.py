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


def test_torch_generator_keys_give_derived_independent_streams():
    torch = pytest.importorskip("torch")
    from methodkit.torch import generator

    plain = torch.Generator().manual_seed(5)
    torch.testing.assert_close(
        torch.rand(3, generator=generator(5)), torch.rand(3, generator=plain)
    )
    derived = torch.Generator().manual_seed(methodkit.derive_seed(5, 1, 2))
    torch.testing.assert_close(
        torch.rand(3, generator=generator(5, 1, 2)), torch.rand(3, generator=derived)
    )
    streams = [torch.rand(3, generator=generator(5, k)) for k in range(3)]
    assert not torch.equal(streams[0], streams[1])
    assert not torch.equal(streams[1], streams[2])
    with pytest.raises(ValueError, match="need a seed"):
        generator(None, 1)
    with pytest.raises(TypeError, match="key"):
        generator(5, 1.5)


def test_derive_seed_is_a_pure_deterministic_mix():
    a = methodkit.derive_seed(3, 0, 7)
    assert a == methodkit.derive_seed(3, 0, 7)
    assert 0 <= a < 2**63
    assert len({methodkit.derive_seed(3, k) for k in range(100)}) == 100
    assert methodkit.derive_seed(3, 1, 2) != methodkit.derive_seed(3, 2, 1)
    with pytest.raises(ValueError, match="key"):
        methodkit.derive_seed(3, -1)


def test_import_is_light():
    code = (
        "import sys, methodkit, methodkit.bench, methodkit.data, methodkit.testing\n"
        "heavy = [m for m in ('torch', 'matplotlib', 'sklearn', 'pandas') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
