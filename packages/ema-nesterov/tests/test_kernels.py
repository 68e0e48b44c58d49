"""The fused one-pass updates against the foreach ones, and the one-buffer default's accuracy."""

import pytest
import torch

from ema_nesterov import EMANesterov
from ema_nesterov._kernels import CHUNK, backwards, ema_update, fold_in, fold_out, fusable
from reference import one_step_exact

SHAPES = [(64, 33), (7,), (5, 4, 3), (128, 64)]


def _lists(dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    ps = [torch.randn(s, generator=gen, dtype=dtype) for s in SHAPES]
    ys = [p + 1e-3 * torch.randn(p.shape, generator=gen, dtype=dtype) for p in ps]
    ms = [1e-3 * torch.randn(p.shape, generator=gen, dtype=dtype) for p in ps]
    return ps, ys, ms


def _clone(*lists):
    return [[t.clone() for t in ts] for ts in lists]


def _assert_same(fused, foreach, shapes):
    """Bit for bit on whole vector blocks; the kernel's scalar tail may differ by 1 ulp."""
    for a, b, shape in zip(fused, foreach, shapes * 2, strict=True):
        if torch.Size(shape).numel() % 64 == 0:
            assert torch.equal(a, b)
        else:
            torch.testing.assert_close(a, b, rtol=torch.finfo(a.dtype).eps, atol=0)


@pytest.mark.parametrize("b_next", [0.0, 1.0, 2.5])
def test_fused_ema_update_is_the_foreach_one_in_float32(b_next):
    ps, ys, ms = _lists(torch.float32, 0)
    assert fusable(ps, ys, ms)
    (p1, y1, m1), (p2, y2, m2) = _clone(ps, ys, ms), _clone(ps, ys, ms)
    ema_update(p1, y1, m1, 0.9, 1.3, b_next, fused=True)
    ema_update(p2, y2, m2, 0.9, 1.3, b_next, fused=False)
    _assert_same(p1 + m1, p2 + m2, SHAPES)
    assert not torch.equal(m1[0], ms[0])  # the update moved m: the comparison can fail


@pytest.mark.parametrize("scale", [1.0, 1.1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fused_fold_out_is_the_foreach_one(dtype, scale):
    ps, _, ms = _lists(dtype, 1)
    (p1, m1), (p2, m2) = _clone(ps, ms), _clone(ps, ms)
    fold_out(p1, m1, 0.9, 1.7, scale, fused=True)
    fold_out(p2, m2, 0.9, 1.7, scale, fused=False)
    _assert_same(p1 + m1, p2 + m2, SHAPES)


def test_fused_paths_match_foreach_to_rounding_in_float64():
    ps, ys, ms = _lists(torch.float64, 2)
    (p1, y1, m1), (p2, y2, m2) = _clone(ps, ys, ms), _clone(ps, ys, ms)
    ema_update(p1, y1, m1, 0.9, 1.3, 1.1, fused=True)  # 1 - (1 + a) is not -a in binary
    ema_update(p2, y2, m2, 0.9, 1.3, 1.1, fused=False)
    for a, b in zip(p1 + m1, p2 + m2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-15, atol=1e-17)


@pytest.mark.parametrize(("gamma", "beta"), [(0.9, 1.0), (0.7, 0.4), (0.5, 4.0), (0.0, 0.0)])
def test_fold_in_then_out_is_the_ema_step_as_written(gamma, beta):
    """The scaled fold (m - (a / c) y, times c after the step) is the update to rounding."""
    ys, thetas, ms = _lists(torch.float64, 3)  # y_t, the base's output theta_{t+1}, m_t
    ps, fms = _clone(ys, ms)
    scale = fold_in(ps, fms, gamma, beta)
    assert scale == (1.0 if gamma == beta == 0.0 else gamma + (1 - gamma) * beta)
    for p, theta in zip(ps, thetas, strict=True):
        p.copy_(theta)  # the base step moves the parameters to theta_{t+1}
    fold_out(ps, fms, gamma, 1.3, scale)
    for p, m, y, theta, m_t in zip(ps, fms, ys, thetas, ms, strict=True):
        m_ref = gamma * m_t + (1 - gamma) * (theta - (y - beta * m_t))
        torch.testing.assert_close(m, m_ref, rtol=0, atol=1e-14)  # a wrong formula: ~1e-3
        torch.testing.assert_close(p, theta + 1.3 * m_ref, rtol=0, atol=1e-14)


def test_backwards_pairs_the_same_elements_and_covers_each_once():
    big = torch.arange(2 * CHUNK + 100, dtype=torch.float64)
    small, strided = torch.arange(5.0, dtype=torch.float64), torch.zeros(4, CHUNK + 1).t()
    firsts, seconds = backwards([big, small, strided], [-big, -small, -strided])
    assert [t.numel() for t in firsts] == [4 * (CHUNK + 1), 5, 100, CHUNK, CHUNK]  # last first
    for a, b in zip(firsts, seconds, strict=True):
        assert torch.equal(a, -b)  # position i of each list holds the same elements
    assert torch.equal(torch.cat([t.reshape(-1) for t in firsts[:0:-1]]), torch.cat([big, small]))
    firsts[-1].add_(1.0)  # views: writing a chunk writes the tensor
    assert big[0] == 1.0


@pytest.mark.parametrize(("gamma", "beta"), [(0.9, 1.0), (0.5, 2.0), (0.0, 0.9)])
@pytest.mark.parametrize("memory_efficient", [None, False])
def test_chunked_fast_path_is_the_float64_step(gamma, beta, memory_efficient):
    """A parameter over CHUNK elements (cut into chunks) gets the reference update, every step."""
    gen = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in [(700, 400), (33,)]]
    assert len(backwards(params[:1])[0]) == 2  # the fast path cuts the big one
    base = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, fused=True)
    opt = EMANesterov(base, gamma, beta, memory_efficient=memory_efficient)
    got = {}
    base.register_step_post_hook(lambda *_: got.update(theta=[p.detach().clone() for p in params]))
    for step in range(4):
        before = [(p.detach().clone(), opt.state[p]["m"].clone()) for p in params if opt.state[p]]
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen)
        opt.step()
        for p, (y_t, m_t), theta in zip(params, before, got["theta"], strict=(step > 0)):
            p_ref, theta_ref = one_step_exact(y_t, m_t, theta, gamma, beta, beta)
            scale = theta_ref.abs() + (p_ref - theta_ref).abs() + y_t.double().abs()
            ulp = torch.finfo(torch.float32).eps * scale
            assert float(((p.detach().double() - p_ref).abs() / ulp).max()) <= 2.0
            theta_now = p.detach().double() - beta * opt.state[p]["m"].double()
            assert float(((theta_now - theta_ref).abs() / ulp).max()) <= 2.0


def test_default_keeps_one_buffer_in_float32_and_two_in_bfloat16(h):
    for dtype, keys in [(torch.float32, {"m"}), (torch.bfloat16, {"m", "y"})]:
        w = torch.nn.Parameter(torch.ones(4, dtype=dtype))
        opt = EMANesterov(torch.optim.SGD([w], lr=0.1, momentum=0.9))
        w.grad = torch.ones_like(w)
        opt.step()
        assert set(opt.state[w]) == keys


def _local_errors(model, opt, data, beta):
    """Per-step error of (p, theta) against the step recomputed in float64, in ulps of p."""
    params = list(model.parameters())
    base = opt.base_optimizers[0]
    got = {}
    base.register_step_post_hook(lambda *_: got.update(theta=[p.detach().clone() for p in params]))
    worst_p = worst_theta = 0.0
    for x, y in data:
        before = [(p.detach().clone(), opt.state[p]["m"].clone()) for p in params if opt.state[p]]
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
        if len(before) < len(params):
            continue  # first step: m starts at 0 in both modes
        for p, (y_t, m_t), theta in zip(params, before, got["theta"], strict=True):
            p_ref, theta_ref = one_step_exact(y_t, m_t, theta, 0.9, beta, beta)
            # the rounding scale of p = theta + beta m (and of the fold's y - theta)
            scale = theta_ref.abs() + (p_ref - theta_ref).abs() + y_t.double().abs()
            ulp = torch.finfo(p.dtype).eps * scale
            p_err = (p.detach().double() - p_ref).abs() / ulp
            theta_now = p.detach().double() - beta * opt.state[p]["m"].double()
            theta_err = (theta_now - theta_ref).abs() / ulp
            worst_p = max(worst_p, float(p_err.max()))
            worst_theta = max(worst_theta, float(theta_err.max()))
    return worst_p, worst_theta


@pytest.mark.parametrize("base", ["sgd_momentum", "adamw"])
def test_one_buffer_default_is_as_exact_as_two_buffers_against_float64(base, h):
    """Each step's p and theta are within the float32 rounding of the exact step, both modes."""
    make = {
        "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
        "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    }[base]
    data = h.batches(30)
    errors = {}
    for mode in (None, False):
        model = h.make_mlp()
        opt = EMANesterov(make(list(model.parameters())), 0.9, 1.0, memory_efficient=mode)
        errors[mode] = _local_errors(model, opt, data, 1.0)
    (fold_p, fold_theta), (two_p, two_theta) = errors[None], errors[False]
    # both within one float32 rounding of the operands' scale (measured: ~0.5 for both)
    assert max(two_p, two_theta) <= 1.0
    assert max(fold_p, fold_theta) <= 1.0
    assert fold_p > 0.0  # the comparison is not vacuous
