"""methodkit.zo: the seeded-perturbation contract shared by the zeroth-order packages."""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
from methodkit import zo  # noqa: E402
from methodkit.bench import ForwardCounter  # noqa: E402


def _params():
    torch.manual_seed(0)
    return [torch.randn(4, 3), torch.randn(4, 3), torch.randn(5), torch.randn(2, 2, 2)]


def test_equal_shaped_tensors_get_different_noise():
    a, b, *_ = _params()
    za = zo.sample(a, zo.tensor_generator(7, 0))
    zb = zo.sample(b, zo.tensor_generator(7, 1))
    assert not torch.equal(za, zb)
    ps = [torch.zeros(4, 3), torch.zeros(4, 3)]
    zo.perturb_(ps, seed=7, scale=1.0)
    assert not torch.equal(ps[0], ps[1])
    torch.testing.assert_close(ps[0], za, rtol=0, atol=0)


def test_noise_is_bitwise_deterministic_and_seed_dependent():
    p = torch.zeros(33, 17)
    z1 = zo.sample(p, zo.tensor_generator(123, 4))
    z2 = zo.sample(p, zo.tensor_generator(123, 4))
    assert torch.equal(z1, z2)
    assert not torch.equal(z1, zo.sample(p, zo.tensor_generator(124, 4)))
    assert not torch.equal(z1, zo.sample(p, zo.tensor_generator(123, 5)))
    # the stream does not depend on global RNG state
    torch.manual_seed(99)
    assert torch.equal(z1, zo.sample(p, zo.tensor_generator(123, 4)))


def test_gaussian_moments_and_rademacher_values():
    p = torch.zeros(200, 200)
    z = zo.sample(p, zo.tensor_generator(1, 0))
    assert abs(float(z.mean())) < 0.01
    assert abs(float(z.std()) - 1.0) < 0.01
    r = zo.sample(p, zo.tensor_generator(1, 0), kind="rademacher")
    assert set(torch.unique(r).tolist()) == {-1.0, 1.0}
    assert r.dtype == p.dtype


def test_sample_dtype_batch_and_sampler():
    p = torch.zeros(3, 4, dtype=torch.float64)
    assert zo.sample(p, zo.tensor_generator(0, 0)).dtype == torch.float64
    b = zo.sample(p, zo.tensor_generator(0, 0), batch=5)
    assert b.shape == (5, 3, 4)
    assert not torch.equal(b[0], b[1])

    def ones(param, gen):
        return torch.ones_like(param)

    assert torch.equal(
        zo.sample(p, zo.tensor_generator(0, 0), sampler=ones), torch.ones(3, 4).double()
    )
    with pytest.raises(ValueError, match="sampler returned shape"):
        zo.sample(p, zo.tensor_generator(0, 0), sampler=lambda q, g: torch.ones(2))
    with pytest.raises(ValueError, match="kind"):
        zo.sample(p, zo.tensor_generator(0, 0), kind="uniform")
    with pytest.raises(ValueError, match="batch"):
        zo.sample(p, zo.tensor_generator(0, 0), batch=0)


def test_tensor_generator_and_derive_seed_validation():
    with pytest.raises(ValueError, match="seed"):
        zo.tensor_generator(-1, 0)
    with pytest.raises(ValueError, match="index"):
        zo.tensor_generator(0, -1)
    with pytest.raises(TypeError, match="seed"):
        zo.tensor_generator(1.5, 0)
    assert zo.derive_seed(3, 0, 1) != zo.derive_seed(3, 1, 0)
    assert zo.derive_seed(3, 0, 1) == zo.derive_seed(3, 0, 1)
    assert 0 <= zo.derive_seed(2**64 - 1, 5) < 2**63


def test_param_list_order_ties_and_filters():
    emb = torch.nn.Embedding(10, 4)
    model = torch.nn.ModuleDict(
        {"emb": emb, "lin": torch.nn.Linear(4, 3), "out": torch.nn.Linear(4, 10)}
    )
    model["out"].weight = emb.weight  # tied
    model["lin"].bias.requires_grad_(False)
    names = [n for n, _ in zo.param_list(model)]
    assert names == ["emb.weight", "lin.weight", "out.bias"]
    assert [n for n, _ in zo.param_list(model, include="*.weight")] == ["emb.weight", "lin.weight"]
    assert [n for n, _ in zo.param_list(model, exclude=["emb"])] == ["lin.weight", "out.bias"]
    kept = zo.param_list(model, include=lambda n, p: p.dim() == 1)
    assert [n for n, _ in kept] == ["out.bias"]
    t = torch.zeros(2)
    assert [n for n, _ in zo.param_list([t, t, torch.ones(1)])] == ["0", "2"]
    groups = [{"params": [torch.zeros(1), torch.zeros(2)]}, {"params": [torch.zeros(3)]}]
    assert [n for n, _ in zo.param_list(groups)] == ["0", "1", "2"]
    with pytest.raises(ValueError, match="no parameter"):
        zo.param_list(model, include="nothing*")
    with pytest.raises(TypeError, match="tensors"):
        zo.param_list([1.0])


def test_perturb_then_negative_restores():
    ps = _params()
    ref = [p.clone() for p in ps]
    zo.perturb_(ps, 5, 1e-3)
    assert not torch.equal(ps[0], ref[0])
    zo.perturb_(ps, 5, -1e-3)
    for p, r in zip(ps, ref, strict=True):
        torch.testing.assert_close(p, r, rtol=0, atol=1e-6)


def test_perturb_accepts_named_params_and_per_tensor_scale():
    ps = _params()
    named = [(str(i), p) for i, p in enumerate(ps)]
    ref = [p.clone() for p in ps]
    zo.perturb_(named, 3, [1.0, 0.0, 2.0, 0.0])
    torch.testing.assert_close(ps[0] - ref[0], zo.sample(ps[0], zo.tensor_generator(3, 0)))
    assert torch.equal(ps[1], ref[1])
    torch.testing.assert_close(ps[2] - ref[2], 2 * zo.sample(ps[2], zo.tensor_generator(3, 2)))
    with pytest.raises(ValueError, match="entries"):
        zo.perturb_(ps, 3, [1.0])


def test_apply_combination_matches_float64_reference():
    ps = _params()
    ref = [p.double() for p in ps]
    seeds, coeffs = [11, 12, 13], [0.5, -1.25, 2e-3]
    zo.apply_combination_(ps, seeds, coeffs)
    for i, (p, r) in enumerate(zip(ps, ref, strict=True)):
        expect = r + sum(
            c * zo.sample(p, zo.tensor_generator(s, i)).double()
            for s, c in zip(seeds, coeffs, strict=True)
        )
        torch.testing.assert_close(p.double(), expect, rtol=0, atol=1e-6)
    sq = zo.combination_sq_norm(ps, seeds, coeffs)
    expect_sq = sum(
        float(
            (
                sum(
                    c * zo.sample(p, zo.tensor_generator(s, i)).double()
                    for s, c in zip(seeds, coeffs, strict=True)
                )
                ** 2
            ).sum()
        )
        for i, p in enumerate(ps)
    )
    assert sq == pytest.approx(expect_sq, rel=1e-6)
    with pytest.raises(ValueError, match="length"):
        zo.apply_combination_(ps, [1, 2], [1.0])


def test_apply_combination_accumulates_before_casting_low_precision():
    p = torch.ones(64, dtype=torch.bfloat16)
    seeds = list(range(20))
    coeffs = [1e-3] * 20
    zo.apply_combination_([p], seeds, coeffs)
    z = sum(1e-3 * zo.sample(p, zo.tensor_generator(s, 0)).float() for s in seeds)
    torch.testing.assert_close(p, (1 + z).to(torch.bfloat16), rtol=0, atol=0)


def test_perturbed_restores_after_exception():
    ps = _params()
    ref = [p.clone() for p in ps]
    moved = []

    def body():
        with zo.perturbed(ps, 9, 1e-2):
            moved.append(not torch.equal(ps[0], ref[0]))
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        body()
    assert moved == [True]
    for p, r in zip(ps, ref, strict=True):
        torch.testing.assert_close(p, r, rtol=0, atol=1e-6)


def test_two_point_value_and_restoration():
    g = torch.tensor([1.0, -2.0, 0.5])
    theta = torch.tensor([0.3, 0.1, -0.2])
    seen = []

    def loss():
        seen.append(theta.clone())
        assert not torch.is_grad_enabled()
        return (g * theta).sum() + 0.5 * (theta**2).sum()

    counter = ForwardCounter(loss)
    c, fp, fm = zo.two_point(counter, [theta], seed=4, eps=1e-3)
    z = zo.sample(theta, zo.tensor_generator(4, 0)).double()
    grad = g.double() + torch.tensor([0.3, 0.1, -0.2]).double()
    assert counter.count == 2
    assert c == pytest.approx(float(grad @ z), rel=1e-3)
    assert c == pytest.approx((fp - fm) / 2e-3)
    torch.testing.assert_close(
        seen[0].double(), torch.tensor([0.3, 0.1, -0.2]).double() + 1e-3 * z, atol=1e-6, rtol=0
    )
    torch.testing.assert_close(theta, torch.tensor([0.3, 0.1, -0.2]), atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("value", "err", "match"),
    [
        (float("nan"), ValueError, "non-finite"),
        (torch.ones(2), TypeError, "scalar"),
        ("x", TypeError, "float"),
    ],
)
def test_two_point_bad_closure_restores_first(value, err, match):
    theta = torch.tensor([0.3, 0.1, -0.2])
    calls = []

    def loss():
        calls.append(1)
        return 1.0 if len(calls) == 1 else value

    with pytest.raises(err, match=match):
        zo.two_point(loss, [theta], seed=1, eps=1e-2)
    torch.testing.assert_close(theta, torch.tensor([0.3, 0.1, -0.2]), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="eps"):
        zo.two_point(loss, [theta], seed=1, eps=0.0)


class _CountingSampler:
    """Counts live noise tensors created by perturb_ (by design one at a time)."""

    def __init__(self):
        self.live = 0
        self.max_live = 0

    def __call__(self, param, gen):
        z = torch.randn(param.shape, generator=gen)
        self.live += 1
        self.max_live = max(self.max_live, self.live)
        import weakref

        weakref.finalize(z, self._dead)
        return z

    def _dead(self):
        self.live -= 1


def test_perturb_holds_one_noise_tensor_at_a_time():
    ps = [torch.zeros(50, 40) for _ in range(6)]
    sampler = _CountingSampler()
    zo.perturb_(ps, 0, 1.0, sampler=sampler)
    assert sampler.max_live == 1
    assert sampler.live == 0


@pytest.mark.slow
def test_import_methodkit_does_not_import_torch():
    code = "import methodkit, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
