import numpy as np
import pytest
import torch

from plvm import moe_moments, moe_sample, poe
from reference import poe_numeric, poe_reference


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


@pytest.mark.parametrize(("m", "v"), [([1.0, -2.0], [0.5, 2.0]), ([3.0, 0.2], [0.1, 10.0])])
def test_poe_matches_closed_form_and_numerical_product(m, v):
    mu, lv = poe(_t(m).view(2, 1, 1), _t(np.log(v)).view(2, 1, 1))
    ref_m, ref_v = poe_reference(m, v)
    num_m, num_v = poe_numeric(m, v)
    assert float(mu) == pytest.approx(ref_m, abs=1e-12)
    assert float(lv.exp()) == pytest.approx(ref_v, abs=1e-12)
    assert float(mu) == pytest.approx(num_m, abs=1e-6)
    assert float(lv.exp()) == pytest.approx(num_v, abs=1e-6)


def test_infinite_variance_expert_equals_other_expert_with_prior():
    mu, lv = poe(_t([[[0.7]], [[5.0]]]), _t([[[np.log(0.3)]], [[np.inf]]]))
    ref_m, ref_v = poe_reference([0.7], [0.3])
    assert float(mu) == pytest.approx(ref_m, abs=1e-12)
    assert float(lv.exp()) == pytest.approx(ref_v, abs=1e-12)


def test_poe_is_order_invariant_and_absent_experts_drop_out():
    g = torch.Generator().manual_seed(0)
    mus = torch.randn(3, 5, 2, generator=g, dtype=torch.float64)
    lvs = torch.randn(3, 5, 2, generator=g, dtype=torch.float64)
    pres = torch.tensor([[1, 1, 0, 1, 0], [1, 0, 0, 1, 1], [1, 1, 0, 0, 1]], dtype=torch.bool)
    a = poe(mus, lvs, pres)
    perm = [2, 0, 1]
    b = poe(mus[perm], lvs[perm], pres[perm])
    torch.testing.assert_close(a[0], b[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(a[1], b[1], rtol=0, atol=1e-12)
    # person 3 has experts 0 and 1 only: same as fusing those two
    c = poe(mus[:2, 3:4], lvs[:2, 3:4])
    torch.testing.assert_close(a[0][3:4], c[0], rtol=0, atol=1e-12)
    # person 2 has none: the prior
    assert torch.equal(a[0][2], torch.zeros(2, dtype=torch.float64))
    assert torch.equal(a[1][2], torch.zeros(2, dtype=torch.float64))


def test_moe_moments_and_samples():
    mus = _t([[[1.0]], [[-1.0]]])
    lvs = _t([[[np.log(0.5)]], [[np.log(0.5)]]])
    mean, var = moe_moments(mus, lvs)
    assert float(mean) == pytest.approx(0.0)
    assert float(var) == pytest.approx(1.5)
    mean, var = moe_moments(mus, lvs, torch.tensor([[False], [False]]))
    assert float(mean) == 0.0
    assert float(var) == 1.0
    g = torch.Generator().manual_seed(0)
    big_mu = mus.expand(2, 20000, 1).contiguous()
    big_lv = lvs.expand(2, 20000, 1).contiguous()
    pres = torch.ones(2, 20000, dtype=torch.bool)
    pres[1, :10000] = False  # first half: only expert 0
    z = moe_sample(big_mu, big_lv, pres, g)
    se = (0.5 / 10000) ** 0.5
    assert float(z[:10000].mean()) == pytest.approx(1.0, abs=5 * se)
    assert float(z[10000:].var()) == pytest.approx(1.5, abs=0.05)
