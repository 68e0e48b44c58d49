import math

import pytest
import torch

import reference
from eva0 import EVA0
from eva0.perturb import PerSampleNorm, per_sample_call
from methodkit import zo


def _x(B=16, seed=1, d=6):
    return torch.randn(B, d, generator=torch.Generator().manual_seed(seed))


def test_two_forward_passes_and_no_graph(counter, make_mlp):
    net = counter(make_mlp())
    a = EVA0(net)
    for t in range(3):
        out = a(_x(seed=t))
        assert net.count == 2 * (t + 1)
        assert not out.requires_grad
    assert net.grad_enabled == [False] * 6
    assert all(p.grad is None for p in net.parameters())
    assert a.stats.forward_passes == 6
    assert a.stats.updates == 3
    a.predict(_x())
    assert net.count == 8


def test_output_is_log_probability(make_mlp):
    out = EVA0(make_mlp())(_x())
    torch.testing.assert_close(out.exp().sum(1), torch.ones(16))


def test_tiny_eps_prediction_equals_unadapted_softmax(make_mlp):
    net = make_mlp()
    x = _x()
    ref = net(x).softmax(1)
    got = EVA0(net, eps=1e-6).predict(x).exp()
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=0)


def test_symmetric_average_closer_than_either_pass(make_mlp):
    net = make_mlp()
    x = _x(B=32)
    ref = net(x).softmax(1)
    a = EVA0(net, eps=0.05)
    with torch.no_grad():
        f_plus, f_minus, p_bar, _ = a._passes(x)
    d_bar = (p_bar - ref).abs().sum(1).mean()
    assert d_bar < (f_plus.softmax(1) - ref).abs().sum(1).mean()
    assert d_bar < (f_minus.softmax(1) - ref).abs().sum(1).mean()


def test_per_sample_norm_equals_loop():
    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(2, 4, 3, padding=1),
        torch.nn.GroupNorm(2, 4),
        torch.nn.BatchNorm2d(4),
        torch.nn.Flatten(2),
        torch.nn.LayerNorm(25),
        torch.nn.Flatten(1),
        torch.nn.Linear(100, 3),
    ).eval()
    with torch.no_grad():
        net[2].running_mean.normal_(generator=g)
        net[2].running_var.uniform_(0.5, 2, generator=g)
    x = torch.randn(5, 2, 5, 5, generator=g)
    names = ["1.weight", "1.bias", "2.weight", "2.bias", "4.weight", "4.bias"]
    params = dict(net.named_parameters())
    stacks = {n: params[n].detach() + torch.randn(5, *params[n].shape, generator=g) for n in names}
    psn = PerSampleNorm(net)
    assert psn.supports(names)
    with torch.no_grad(), psn.apply(stacks):
        batched = net(x)
    assert "forward" not in net[1].__dict__  # restored
    loop = reference.per_sample_forward(net, stacks, x)
    for i in range(5):
        torch.testing.assert_close(batched[i : i + 1], loop[i : i + 1], atol=1e-5, rtol=1e-5)


def test_vmap_path_equals_loop(make_mlp):
    net = make_mlp()
    g = torch.Generator().manual_seed(3)
    x = _x(B=4)
    params = dict(net.named_parameters())
    names = ["0.weight", "3.bias"]
    stacks = {n: params[n].detach() + torch.randn(4, *params[n].shape, generator=g) for n in names}
    with torch.no_grad():
        batched = per_sample_call(net, stacks, x)
    loop = reference.functional_per_sample_forward(net, stacks, x)
    for i in range(4):
        torch.testing.assert_close(batched[i : i + 1], loop[i : i + 1], atol=1e-5, rtol=1e-5)
    a = EVA0(net, params=names)
    assert a.mode == "vmap"


def test_estimator_matches_dense_formula():
    torch.manual_seed(0)
    head = torch.nn.Linear(4, 3).double()
    v = torch.tensor([0.3, -1.2, 0.7], dtype=torch.float64)
    loss = lambda logits: logits @ v  # linear in the logits; logits linear in the bias  # noqa: E731
    a = EVA0(head, params=["bias"], eps=0.02, lr=0.0, anchor_weight=0.0, loss=loss, seed=5)
    x = torch.randn(8, 4, dtype=torch.float64)
    z = a.directions(8)[0]  # (B, C), drawn as seed_t = derive_seed(5, 0)
    expected_z = zo.sample(head.bias, zo.tensor_generator(zo.derive_seed(5, 0), 0), batch=8)
    torch.testing.assert_close(z, expected_z, rtol=0, atol=0)
    a(x)
    dense = reference.dense_directional_gradient(loss, x, head.weight, head.bias, z)
    torch.testing.assert_close(a.last_gradient[0], dense, atol=1e-4, rtol=1e-4)


def test_shared_mode_estimator(make_mlp):
    net = make_mlp(dtype=torch.float64)
    a = EVA0(net, per_sample=False, lr=0.0, anchor_weight=0.0, loss="entropy")
    x = _x().double()
    before = [p.detach().clone() for p in a.params]
    a(x)
    assert a.mode == "shared"
    assert all(torch.equal(p, b) for p, b in zip(a.params, before, strict=True))  # restored
    z = zo.sample(a.params[0], zo.tensor_generator(zo.derive_seed(0, 0), 0))
    ratio = a.last_gradient[0] / z
    torch.testing.assert_close(ratio, ratio[0].expand_as(ratio))  # g is a multiple of z


def test_anchor_decays_geometrically(make_mlp):
    lam = 0.2
    net = make_mlp()
    a = EVA0(net, lr=0.0, anchor_weight=lam)
    with torch.no_grad():
        for p in a.params:
            p.add_(0.5)
    d0 = a.drift()
    for t in range(1, 5):
        a(_x(seed=t))
        assert a.drift() == pytest.approx(d0 * (1 - lam) ** t, rel=1e-5)


def test_ema_anchor_moves(make_mlp):
    a = EVA0(make_mlp(), anchor="ema", anchor_momentum=0.5, lr=0.5)
    a(_x())
    assert not torch.equal(a.anchor_values[0], a.source[0])


def test_reset_restores_bitwise(make_mlp):
    net = make_mlp()
    orig = {n: p.detach().clone() for n, p in net.named_parameters()}
    a = EVA0(net, lr=0.5)
    for t in range(3):
        a(_x(seed=t))
    assert a.drift() > 0
    a.reset()
    assert all(torch.equal(p, orig[n]) for n, p in net.named_parameters())
    out = a(_x(seed=9))
    net2 = make_mlp()
    fresh = EVA0(net2, lr=0.5)(_x(seed=9))
    assert torch.equal(out, fresh)


def test_scale_invariant_loss_sets_tau_from_first_batch(make_mlp):
    net = make_mlp()
    a = EVA0(net)
    x = _x()
    a(x)
    assert a.tau == pytest.approx(float(net(x).detach().norm(dim=1).mean()), rel=0.05)
    a.reset()
    assert a.tau is None
    assert EVA0(net, tau=3.0).tau == 3.0


def test_batchnorm_train_mode_falls_back_to_shared(make_mlp):
    net = make_mlp(norm="bn").train()
    with pytest.warns(UserWarning, match="BatchNorm in training mode"):
        a = EVA0(net)
    assert a.mode == "shared"
    a(_x())
    assert a.stats.forward_passes == 2


def test_max_step_clips(make_mlp):
    a = EVA0(make_mlp(), lr=10.0, anchor_weight=0.0, max_step=1e-3)
    a(_x())
    assert a.drift() == pytest.approx(1e-3, rel=1e-4)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"eps": 0.0}, "eps must be > 0"),
        ({"eps": None}, "eps must be > 0, got None"),
        ({"lr": -1.0}, "lr must be >= 0"),
        ({"lr": None}, "lr must be >= 0, got None"),
        ({"anchor_weight": 1.0}, r"anchor_weight must be in \[0, 1\)"),
        ({"anchor": "x"}, "anchor must be"),
        ({"noise": "x"}, "noise must be"),
        ({"weighting": "x"}, "weighting must be"),
        ({"loss": "x"}, "loss must be"),
        ({"tau": -1.0}, "tau must be > 0"),
        ({"params": "all"}, "params must be 'norm'"),
        ({"params": ["nope"]}, "not found"),
    ],
)
def test_bad_arguments(make_mlp, kw, match):
    with pytest.raises(ValueError, match=match):
        EVA0(make_mlp(), **kw)


def test_no_adaptable_parameters():
    with pytest.raises(ValueError, match="no adaptable parameters"):
        EVA0(torch.nn.Linear(3, 2))


def test_model_type_and_loss_type(make_mlp):
    with pytest.raises(TypeError, match=r"model must be an nn\.Module"):
        EVA0(lambda x: x)
    with pytest.raises(TypeError, match="loss must be"):
        EVA0(make_mlp(), loss=3)


def test_non_2d_logits_rejected():
    net = torch.nn.Sequential(
        torch.nn.Linear(6, 4), torch.nn.LayerNorm(4), torch.nn.Unflatten(1, (2, 2))
    )
    with pytest.raises(ValueError, match=r"\(B, C\) logits"):
        EVA0(net)(_x())
    with pytest.raises(TypeError, match=r"x must be a torch\.Tensor"):
        EVA0(net)([1, 2])


def test_non_finite_logits_skip_update(make_mlp):
    net = make_mlp()
    a = EVA0(net)
    before = [p.detach().clone() for p in a.params]
    x = _x()
    x[0, 0] = float("nan")
    with pytest.warns(UserWarning, match="non-finite logits"):
        a(x)
    assert all(torch.equal(p, b) for p, b in zip(a.params, before, strict=True))
    assert a.stats.skipped == 1
    assert a.stats.updates == 0


def test_eata_all_filtered_skips_without_failing(make_mlp):
    net = make_mlp()
    with torch.no_grad():
        net[3].weight.mul_(1e-4)  # near-uniform predictions: entropy ~ ln 5 > 0.4 ln 5
    a = EVA0(net, weighting="eata")
    out = a(_x(B=1))
    assert out.shape == (1, 5)
    assert a.stats.skipped == 1
    assert a.drift() == 0.0


def test_eata_weights(make_mlp):
    a = EVA0(make_mlp(), weighting="eata")
    p = torch.tensor([[0.97, 0.01, 0.01, 0.005, 0.005], [0.2] * 5])
    w = a._weights(p)
    h0 = -(p[0] * p[0].log()).sum()
    assert w[1] == 0
    assert w[0] == pytest.approx(math.exp(0.4 * math.log(5) - float(h0)))


def test_rademacher_and_determinism(make_mlp):
    outs = []
    for _ in range(2):
        a = EVA0(make_mlp(), noise="rademacher", seed=4)
        z = a.directions(3)[0]
        assert set(z.unique().tolist()) <= {-1.0, 1.0}
        outs.append(a(_x()))
    assert torch.equal(outs[0], outs[1])
