import copy
import json

import pytest
import torch

import reference
from engine_zo import LOZO, Engine, LowRankSampler, MeZO, SubspaceSampler
from engine_zo._history import FineHistory
from methodkit import zo
from methodkit.bench import ForwardCounter


def _mlp(seed=0):
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    x = torch.randn(32, 8, generator=g)
    y = torch.randn(32, 3, generator=g)
    return model, (lambda: torch.nn.functional.mse_loss(model(x), y))


def _run(opt, loss, steps):
    return [float(opt.step(loss)) for _ in range(steps)]


def _walk(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _walk(v)
    elif isinstance(obj, list | tuple):
        for v in obj:
            yield from _walk(v)
    else:
        yield obj


def test_two_forward_passes_per_step_and_counter():
    model, loss = _mlp()
    counter = ForwardCounter(loss)
    opt = Engine(model.parameters(), lr=1e-2, ranks=(2,))
    for k in range(1, 13):
        opt.step(counter)
        assert counter.count == 2 * k == opt.forward_passes
    assert opt.steps == 12


def test_reduces_to_mezo_bitwise_with_the_spec_arguments_alone():
    m1, l1 = _mlp()
    m2, l2 = _mlp()
    e = Engine(m1.parameters(), lr=1e-2, ranks=(), pre_smooth=1, post_smooth=0, inject=0, seed=5)
    assert e.cycle_length == 1
    m = MeZO(m2.parameters(), lr=1e-2, seed=5)
    assert _run(e, l1, 25) == _run(m, l2, 25)
    for a, b in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(a, b)


def test_reduces_to_lozo_bitwise():
    m1, l1 = _mlp()
    m2, l2 = _mlp()
    e = Engine(
        m1.parameters(),
        lr=1e-2,
        ranks=(2,),
        coarse_steps=(8,),
        pre_smooth=0,
        post_smooth=0,
        inject=0.0,
        seed=2,
    )
    lz = LOZO(m2.parameters(), lr=1e-2, rank=2, lazy_interval=8, seed=2)
    assert _run(e, l1, 20) == _run(lz, l2, 20)
    for a, b in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("fine_buffer", [False, True])
def test_dense_exactness_of_a_coarse_step_with_history(toy, recorder, fine_buffer):
    eps, lr, gamma = 1e-3, 0.05, 0.5
    opt = Engine(
        toy.parameters(),
        lr=lr,
        eps=eps,
        ranks=(2,),
        coarse_steps=(3,),
        pre_smooth=2,
        post_smooth=0,
        inject=gamma,
        seed=3,
        fine_buffer=fine_buffer,
    )
    opt.step(toy.loss)
    opt.step(toy.loss)
    assert opt.level == 1
    assert len(opt.state_dict()["zo"]["buffer_seeds"]) == 2
    theta0 = [p.detach().double().clone() for p in toy.parameters()]
    xi, _ = reference.engine_direction(opt, toy, 2, gamma, eps)
    rec = recorder(toy.parameters(), toy.loss)
    opt.step(rec)
    for point, sign in ((rec.points[0], 1), (rec.points[1], -1)):
        for p, t0, x in zip(point, theta0, xi, strict=True):
            torch.testing.assert_close(p.double(), t0 + sign * eps * x, atol=1e-6, rtol=0)
    c = (rec.values[0] - rec.values[1]) / (2 * eps)
    for p, t0, x in zip(toy.parameters(), theta0, xi, strict=True):
        torch.testing.assert_close(p.detach().double(), t0 - lr * c * x, atol=1e-6, rtol=0)


def _coarse_perturbation(toy, recorder, inject):
    # eps = 0.5 so float32 rounding of theta +- eps xi does not blur the structure
    opt = Engine(
        toy.parameters(),
        lr=0.05,
        eps=0.5,
        ranks=(2,),
        coarse_steps=(3,),
        pre_smooth=2,
        post_smooth=0,
        inject=inject,
        seed=1,
    )
    opt.step(toy.loss)
    opt.step(toy.loss)
    W0 = toy.weight.detach().double().clone()
    h = reference.engine_direction(opt, toy, 2, 0.5, 0.5)[1][0]
    rec = recorder(toy.parameters(), toy.loss)
    opt.step(rec)
    V = torch.randn((5, 2), generator=zo.tensor_generator(zo.derive_seed(1, 1, 0), 0)).double()
    return (rec.points[0][0].double() - W0) / 0.5, V, h


def test_structure_without_injection_is_rank_r(toy, recorder):
    delta, _, _ = _coarse_perturbation(toy, recorder, 0.0)
    s = torch.linalg.svdvals(delta)
    assert int((s > 1e-4 * s[0]).sum()) <= 2


def test_structure_with_injection_lies_in_subspace_plus_h(toy, recorder):
    delta, V, h = _coarse_perturbation(toy, recorder, 0.5)
    # delta = A V^T + beta h  for some A (6x2) and scalar beta
    cols = [
        torch.kron(torch.eye(6, dtype=torch.float64)[:, i : i + 1], V[:, k : k + 1].T).reshape(-1)
        for i in range(6)
        for k in range(2)
    ]
    basis = torch.stack([*cols, h.reshape(-1)], dim=1)
    coef = torch.linalg.lstsq(basis, delta.reshape(-1, 1)).solution
    resid = (basis @ coef).reshape(6, 5) - delta
    assert float(resid.norm() / delta.norm()) < 1e-5
    # without the h column the fit is poor: the injected direction leaves the subspace
    coef_sub = torch.linalg.lstsq(basis[:, :-1], delta.reshape(-1, 1)).solution
    resid_sub = (basis[:, :-1] @ coef_sub).reshape(6, 5) - delta
    assert float(resid_sub.norm() / delta.norm()) > 0.05


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fine", "lowrank", "subzero"])
def test_samplers_are_unbiased(kind):
    G = torch.linspace(-1.0, 2.0, 12).reshape(4, 3)
    p = torch.zeros(4, 3)
    n = 20_000
    acc = torch.zeros(4, 3, dtype=torch.float64)
    for k in range(n):
        gen = zo.tensor_generator(k, 0)
        if kind == "fine":
            xi = zo.sample(p, gen)
        elif kind == "lowrank":
            xi = zo.sample(p, gen, sampler=LowRankSampler(2, 10_000 + k, [(0, p)]))
        else:
            xi = zo.sample(p, gen, sampler=SubspaceSampler(2, 10_000 + k, [(0, p)]))
        c = float((G * xi).sum())
        acc += c * xi.double()
    est = acc / n
    assert float((est - G).norm() / G.norm()) < 0.05


def test_restores_parameters_when_the_estimate_is_zero():
    model, _ = _mlp()
    before = [p.detach().clone() for p in model.parameters()]
    opt = Engine(model.parameters(), lr=1.0, ranks=(2,), seed=4)
    for _ in range(12):
        opt.step(lambda: 1.0)  # constant loss: c = 0, every step only perturbs and restores
    for p, b in zip(model.parameters(), before, strict=True):
        torch.testing.assert_close(p.detach(), b, atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("bad", "err", "match"),
    [
        (float("nan"), ValueError, "non-finite"),
        (float("inf"), ValueError, "non-finite"),
        (torch.ones(3), TypeError, "scalar"),
        (None, TypeError, "float or 0-dim"),
        (RuntimeError("boom"), RuntimeError, "boom"),
    ],
)
def test_bad_closure_raises_after_restoring(bad, err, match):
    model, loss = _mlp()
    opt = Engine(model.parameters(), lr=0.1, ranks=(2,), pre_smooth=0, seed=1)
    opt.step(loss)  # coarse
    before = [p.detach().clone() for p in model.parameters()]
    calls = []

    def closure():
        calls.append(1)
        if len(calls) == 2:
            if isinstance(bad, Exception):
                raise bad
            return bad
        return loss()

    with pytest.raises(err, match=match):
        opt.step(closure)
    for p, b in zip(model.parameters(), before, strict=True):
        assert torch.equal(p.detach(), b)


def _plain_inverse_is_inexact(params, step_seed, eps):
    """The old restore, fl(fl(fl(theta + d) - 2d) + d), misses theta somewhere (fine noise)."""
    for i, p in enumerate(params):
        d = torch.randn(p.shape, generator=zo.tensor_generator(step_seed, i)) * eps
        if not torch.equal(((p + d) - 2 * d) + d, p):
            return True
    return False


@pytest.mark.parametrize("fine_buffer", [False, True])
@pytest.mark.parametrize("failing_call", [1, 2])
@pytest.mark.parametrize("step", [0, 1, 9])  # fine, coarse with injection, post-smoothing
def test_restore_after_a_failing_closure_is_bitwise(fine_buffer, failing_call, step):
    model, loss = _mlp()
    eps = 0.05
    opt = Engine(model.parameters(), lr=1e-2, eps=eps, ranks=(2,), fine_buffer=fine_buffer)
    _run(opt, loss, 10 + step)  # a full cycle first: the ring buffer is not empty
    params = list(model.parameters())
    before = [p.detach().clone() for p in params]
    if opt.level == 0:  # the remedy is needed: a plain inverse would not give theta back
        assert _plain_inverse_is_inexact(before, zo.derive_seed(opt.seed, 0, opt.steps), eps)
    calls = []

    def closure():
        calls.append(1)
        if len(calls) == failing_call:
            raise RuntimeError("out of memory")
        return loss()

    with pytest.raises(RuntimeError, match="out of memory"):
        opt.step(closure)
    for p, b in zip(params, before, strict=True):
        assert torch.equal(p.detach(), b)
    assert opt.steps == 10 + step  # the failed step did not count


def test_step_requires_a_closure():
    model, _ = _mlp()
    opt = Engine(model.parameters(), lr=0.1)
    with pytest.raises(TypeError, match="closure"):
        opt.step()
    with pytest.raises(TypeError, match="callable"):
        opt.step(3)


def test_state_has_no_tensor_and_round_trips_the_trajectory():
    m1, l1 = _mlp()
    opt = Engine(m1.parameters(), lr=2e-2, ranks=(3, 2), coarse_steps=(3, 2), seed=7)
    _run(opt, l1, 13)
    assert len(opt.state) == 0
    sd = copy.deepcopy(opt.state_dict())
    assert not [v for v in _walk(sd) if isinstance(v, torch.Tensor)]
    json.dumps(sd)  # ints, floats, None, strings only
    snapshot = [p.detach().clone() for p in m1.parameters()]
    rest_a = _run(opt, l1, 12)

    m2, l2 = _mlp()
    with torch.no_grad():
        for p, s in zip(m2.parameters(), snapshot, strict=True):
            p.copy_(s)
    opt2 = Engine(m2.parameters(), lr=2e-2, ranks=(3, 2), coarse_steps=(3, 2), seed=0)
    opt2.load_state_dict(json.loads(json.dumps(sd)))
    assert opt2.forward_passes == 26
    assert opt2.seed == 7
    assert _run(opt2, l2, 12) == rest_a
    for a, b in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(a, b)


def test_same_seed_same_weights_different_seed_differs():
    outs = []
    for seed in (0, 0, 1):
        model, loss = _mlp()
        _run(Engine(model.parameters(), lr=1e-2, ranks=(2,), seed=seed), loss, 15)
        outs.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    assert torch.equal(outs[0], outs[1])
    assert not torch.equal(outs[0], outs[2])


def test_param_group_with_zero_lr_never_changes():
    model, loss = _mlp()
    first, second = list(model[0].parameters()), list(model[2].parameters())
    frozen = [p.detach().clone() for p in first]
    moved = [p.detach().clone() for p in second]
    opt = Engine([{"params": first, "lr": 0.0}, {"params": second}], lr=5e-2, ranks=(2,))
    _run(opt, loss, 12)
    for p, b in zip(first, frozen, strict=True):
        assert torch.equal(p, b)
    assert any(not torch.equal(p, b) for p, b in zip(second, moved, strict=True))


def test_schedule_levels_and_fine_lr():
    model, loss = _mlp()
    opt = Engine(
        model.parameters(),
        lr=1e-2,
        ranks=(3, 2),
        coarse_steps=(2, 1),
        pre_smooth=1,
        post_smooth=2,
        fine_lr=0.0,
    )
    levels = []
    for _ in range(12):
        levels.append(opt.level)
        opt.step(loss)
    assert levels == [0, 1, 1, 2, 0, 0] * 2
    assert opt.cycle_length == 6
    assert opt.cycle == 2


def test_fine_lr_zero_freezes_fine_steps(recorder):
    model, loss = _mlp()
    opt = Engine(
        model.parameters(),
        lr=1e-2,
        ranks=(2,),
        coarse_steps=(1,),
        pre_smooth=1,
        post_smooth=0,
        fine_lr=0.0,
    )
    before = [p.detach().clone() for p in model.parameters()]
    opt.step(loss)  # fine step with lr 0: only probe + restore
    for p, b in zip(model.parameters(), before, strict=True):
        torch.testing.assert_close(p.detach(), b, atol=1e-6, rtol=0)


def test_weight_decay_is_decoupled():
    p = torch.nn.Parameter(torch.full((4,), 2.0))
    opt = Engine(
        [p], lr=0.1, weight_decay=0.5, ranks=(), coarse_steps=(), post_smooth=0, inject=0.0
    )
    opt.step(lambda: 1.0)
    torch.testing.assert_close(p.detach(), torch.full((4,), 2.0 * (1 - 0.05)), atol=1e-6, rtol=0)


def test_lowrank_embeddings_false_uses_full_noise(recorder):
    emb = torch.nn.Embedding(10, 6)
    lin = torch.nn.Linear(6, 6)
    idx = torch.arange(10)

    def loss():
        return lin(emb(idx)).pow(2).mean()

    groups = [{"params": [emb.weight], "embedding": True}, {"params": list(lin.parameters())}]
    opt = Engine(groups, lr=1e-3, ranks=(2,), pre_smooth=0, inject=0.0, lowrank_embeddings=False)
    before = [emb.weight.detach().clone(), lin.weight.detach().clone()]
    rec = recorder([emb.weight, lin.weight], loss)
    opt.step(rec)
    ranks = [
        int(torch.linalg.matrix_rank(rec.points[0][i] - before[i], atol=1e-6)) for i in range(2)
    ]
    assert ranks == [6, 2]


def test_warns_when_rank_exceeds_every_matrix():
    with pytest.warns(UserWarning, match="full-space noise"):
        Engine(torch.nn.Linear(3, 3).parameters(), lr=0.1, ranks=(4,))


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"lr": 0.0}, ValueError, "lr must be > 0"),
        ({"lr": -1.0}, ValueError, "lr"),
        ({"eps": 0.0}, ValueError, "eps"),
        ({"eps": float("inf")}, ValueError, "eps must be finite"),
        ({"eps": float("nan")}, ValueError, "eps must be finite"),
        ({"lr": float("inf")}, ValueError, "lr must be finite"),
        ({"fine_lr": float("inf")}, ValueError, "fine_lr must be finite"),
        ({"weight_decay": float("inf")}, ValueError, "weight_decay must be finite"),
        ({"fine_buffer": 1}, TypeError, "fine_buffer must be a bool"),
        ({"ranks": (0,)}, ValueError, "ranks"),
        ({"ranks": (2, 4), "coarse_steps": (1, 1)}, ValueError, "decreasing"),
        ({"ranks": (4,), "coarse_steps": (1, 2)}, ValueError, "same length"),
        ({"inject": 1.0}, ValueError, "inject"),
        ({"inject": -0.1}, ValueError, "inject"),
        ({"history": 0}, ValueError, "history"),
        ({"history_decay": 0.0}, ValueError, "history_decay"),
        ({"noise": "uniform"}, ValueError, "noise"),
        ({"pre_smooth": -1}, ValueError, "pre_smooth"),
        (
            {"ranks": (), "coarse_steps": (), "pre_smooth": 0, "post_smooth": 0},
            ValueError,
            "at least one",
        ),
        ({"seed": -3}, ValueError, "seed"),
        ({"weight_decay": -1.0}, ValueError, "weight_decay"),
    ],
)
def test_bad_arguments(kwargs, err, match):
    model, _ = _mlp()
    args = {"lr": 1e-3, **kwargs}
    with pytest.raises(err, match=match):
        Engine(model.parameters(), **args)


def test_rejects_integer_parameters_requiring_grad():
    Engine([torch.nn.Parameter(torch.zeros(3))], lr=1e-3, ranks=(), coarse_steps=())
    bad = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(TypeError, match="floating point"):
        Engine([bad], lr=1e-3, ranks=(), coarse_steps=())


def test_history_zero_allowed_without_injection():
    model, loss = _mlp()
    opt = Engine(model.parameters(), lr=1e-2, ranks=(2,), inject=0.0, history=0)
    _run(opt, loss, 12)
    assert opt.state_dict()["zo"]["buffer_seeds"] == []


@pytest.mark.slow
def test_quadratic_sanity_injection_helps_at_small_lr():
    a = torch.linspace(1.0, 100.0, 400).reshape(20, 20)
    finals = {"engine": [], "mezo": [], "engine0": []}
    for seed in range(3):
        for name in finals:
            W = torch.nn.Parameter(torch.ones(20, 20))
            if name == "mezo":
                opt = MeZO([W], lr=3e-6, eps=1e-3, seed=seed)
            else:
                opt = Engine(
                    [W], lr=3e-6, eps=1e-3, inject=0.5 if name == "engine" else 0.0, seed=seed
                )

            def loss(W=W):
                return 0.5 * (a * W**2).sum()

            while opt.forward_passes < 3000:
                opt.step(loss)
            finals[name].append(float(loss().detach()))
    mean = {k: sum(v) / 3 for k, v in finals.items()}
    assert mean["engine"] <= 0.8 * mean["mezo"], mean
    assert mean["engine"] <= 0.8 * mean["engine0"], mean


def test_default_coarse_steps_follow_the_ranks():
    model, _ = _mlp()
    assert Engine(model.parameters(), lr=1e-3, ranks=(3, 2)).coarse_steps == (8, 8)
    assert Engine(model.parameters(), lr=1e-3, ranks=()).cycle_length == 2


def _losses_and_weights(fine_buffer, steps, history=3, decay=0.9):
    model, _ = _mlp()
    model.double()  # float64: the two modes differ by rounding only, so they agree to ~1e-12
    g = torch.Generator().manual_seed(5)
    x, y = torch.randn(32, 8, generator=g).double(), torch.randn(32, 3, generator=g).double()

    def loss():
        return torch.nn.functional.mse_loss(model(x), y)

    opt = Engine(
        model.parameters(),
        lr=2e-2,
        ranks=(3, 2),
        coarse_steps=(3, 2),
        history=history,
        history_decay=decay,
        fine_buffer=fine_buffer,
        seed=11,
    )
    losses = _run(opt, loss, steps)
    return opt, losses, torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def test_fine_buffer_follows_the_streamed_trajectory():
    # 49 steps = 7 cycles: the 3-slot ring wraps around (evictions, decay 0.9) several times
    _, la, wa = _losses_and_weights(False, 49)
    opt, lb, wb = _losses_and_weights(True, 49)
    torch.testing.assert_close(torch.tensor(lb), torch.tensor(la), rtol=1e-10, atol=0)
    torch.testing.assert_close(wb, wa, rtol=0, atol=1e-10)
    assert not torch.equal(wb, wa)  # two computations, not one
    assert len(opt.state) == 0  # the accumulators are no optimizer state
    sd = opt.state_dict()
    assert not [v for v in _walk(sd) if isinstance(v, torch.Tensor)]
    assert len(sd["zo"]["buffer_seeds"]) == 3


def test_fine_buffer_resumes_from_seeds_alone():
    m1, l1 = _mlp()
    kwargs = {"lr": 2e-2, "ranks": (2,), "coarse_steps": (4,), "history": 3, "seed": 3}
    opt = Engine(m1.parameters(), fine_buffer=True, **kwargs)
    _run(opt, l1, 15)
    sd = json.loads(json.dumps(opt.state_dict()))
    snapshot = [p.detach().clone() for p in m1.parameters()]
    rest_a = _run(opt, l1, 12)
    m2, l2 = _mlp()
    with torch.no_grad():
        for p, s in zip(m2.parameters(), snapshot, strict=True):
            p.copy_(s)
    opt2 = Engine(m2.parameters(), fine_buffer=True, **kwargs)
    opt2.load_state_dict(sd)  # accumulators rebuilt from the seeds: same maths, new rounding
    torch.testing.assert_close(
        torch.tensor(_run(opt2, l2, 12)), torch.tensor(rest_a), rtol=1e-5, atol=0
    )


def _draws_per_coarse_step(history, fine_buffer, monkeypatch):
    model, loss = _mlp()
    opt = Engine(model.parameters(), lr=1e-2, ranks=(2,), history=history, fine_buffer=fine_buffer)
    _run(opt, loss, 10 * history + 3)  # ring full, inside a coarse phase
    assert opt.level == 1
    count = []
    real = zo.tensor_generator
    monkeypatch.setattr(zo, "tensor_generator", lambda *a: count.append(1) or real(*a))
    opt.step(loss)
    monkeypatch.setattr(zo, "tensor_generator", real)
    return len(count)


def test_buffered_coarse_steps_do_not_regenerate_the_ring(monkeypatch):
    buffered = [_draws_per_coarse_step(k, True, monkeypatch) for k in (2, 8)]
    streamed = [_draws_per_coarse_step(k, False, monkeypatch) for k in (2, 8)]
    assert buffered[0] == buffered[1]  # independent of the ring size
    # streamed: every pass redraws the ring for each of the 4 tensors (3 passes per step)
    assert streamed[1] - streamed[0] == 3 * 4 * (8 - 2)


def _generator_calls_per_step(opt, loss, steps, monkeypatch):
    real, counts = zo.tensor_generator, []
    for _ in range(steps):
        calls = []
        monkeypatch.setattr(zo, "tensor_generator", lambda *a, c=calls: c.append(1) or real(*a))
        opt.step(loss)
        counts.append(len(calls))
    monkeypatch.setattr(zo, "tensor_generator", real)
    return counts


def test_fine_direction_norm_is_taken_once_per_coarse_phase(monkeypatch):
    # ||h|| is constant while the ring does not change: only a phase's first coarse step
    # regenerates the ring for it (K draws per tensor), the others only for their 3 passes
    model, loss = _mlp()
    k, n_tensors = 3, 4
    opt = Engine(model.parameters(), lr=1e-2, ranks=(2,), coarse_steps=(4,), history=k)
    _run(opt, loss, 2 * opt.cycle_length + 1)  # ring full, at the first coarse step of a phase
    assert opt.level == 1
    counts = _generator_calls_per_step(opt, loss, 4, monkeypatch)
    assert counts[1] == counts[2] == counts[3]
    # the first step also draws the cycle's basis V_c of the 2 matrices
    assert counts[0] - counts[1] == k * n_tensors + 2


def test_fine_direction_build_matches_a_zero_started_sum_bitwise():
    # h's first term is written in place of ``0 + c z`` (one pass less): the very same bits
    history = FineHistory(3, 0.9, "gaussian")
    history.load([(11, 0.37), (12, -2.5e-3), (13, 1.3e4)])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        p = torch.zeros(33, 17, dtype=dtype)
        acc_dtype = torch.float64 if dtype == torch.float64 else torch.float32
        expected = torch.zeros(p.shape, dtype=acc_dtype)
        for s, coef in history.terms():
            z = zo.sample(p, zo.tensor_generator(s, 5))
            expected.add_(z.to(acc_dtype), alpha=coef / 1e-3)
        got = history.tensor(5, p, 1e-3)
        assert got.dtype == acc_dtype
        assert torch.equal(got.view(-1).view(torch.uint8), expected.view(-1).view(torch.uint8))
    empty = FineHistory(3, 1.0, "gaussian")
    assert torch.equal(empty.tensor(0, torch.ones(4), 1e-3), torch.zeros(4))
