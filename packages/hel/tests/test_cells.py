import torch

from hel import HopfieldOscillatorCell, RateEchoCell, leapfrog_step


def test_force_is_minus_autograd_grad_of_potential():
    g = torch.Generator().manual_seed(0)
    cell = HopfieldOscillatorCell(2, 6, generator=g).double()
    with torch.no_grad():
        cell.b.normal_(generator=g)
    phi = torch.randn(4, 6, dtype=torch.float64, generator=g, requires_grad=True)
    u = torch.randn(4, 2, dtype=torch.float64, generator=g)
    (grad,) = torch.autograd.grad(cell.potential(phi, u).sum(), phi)
    torch.testing.assert_close(cell.force(phi, u), -grad, rtol=1e-12, atol=1e-12)


def test_analytic_param_stats_and_jacobian_diagonal_match_autograd():
    g = torch.Generator().manual_seed(1)
    for act in ("tanh", "sigmoid", "sin"):
        cell = HopfieldOscillatorCell(3, 5, activation=act, generator=g).double()
        phi = torch.randn(4, 5, dtype=torch.float64, generator=g)
        u = torch.randn(4, 3, dtype=torch.float64, generator=g)
        w = torch.rand(4, dtype=torch.float64, generator=g)
        analytic = cell.potential_param_grad(phi, u, w)
        auto = torch.autograd.grad((w * cell.potential(phi, u)).sum(), list(cell.parameters()))
        for a, b in zip(analytic, auto, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
        J = cell.jacobian(phi, u)
        torch.testing.assert_close(
            cell.jacobian_diagonal(phi, u),
            torch.diagonal(J, dim1=-2, dim2=-1),
            rtol=1e-12,
            atol=1e-12,
        )
        torch.testing.assert_close(J, J.transpose(1, 2), rtol=1e-12, atol=1e-12)  # conservative


def test_rate_cell_jacobian_matches_autograd():
    g = torch.Generator().manual_seed(2)
    cell = RateEchoCell(2, 4, generator=g).double()
    phi = torch.randn(3, 4, dtype=torch.float64, generator=g)
    u = torch.randn(3, 2, dtype=torch.float64, generator=g)
    auto = torch.func.vmap(torch.func.jacrev(lambda p, uu: cell.force(p[None], uu[None])[0]))(
        phi, u
    )
    torch.testing.assert_close(cell.jacobian(phi, u), auto, rtol=1e-12, atol=1e-12)


def test_leapfrog_is_time_reversible_over_500_steps():
    g = torch.Generator().manual_seed(3)
    cell = HopfieldOscillatorCell(2, 8, generator=g).double()
    x = torch.randn(2, 500, 2, dtype=torch.float64, generator=g)
    phi0 = torch.randn(2, 8, dtype=torch.float64, generator=g)
    pi0 = torch.randn(2, 8, dtype=torch.float64, generator=g)
    phi, pi = phi0, pi0
    with torch.no_grad():
        for t in range(500):
            phi, pi, _ = leapfrog_step(cell, phi, pi, x[:, t])
        pi = -pi
        for t in range(499, -1, -1):
            phi, pi, _ = leapfrog_step(cell, phi, pi, x[:, t])
    torch.testing.assert_close(phi, phi0, rtol=0, atol=1e-10)
    torch.testing.assert_close(-pi, pi0, rtol=0, atol=1e-10)


def test_free_echo_statistics_equal_forward_statistics():
    g = torch.Generator().manual_seed(4)
    cell = HopfieldOscillatorCell(2, 6, generator=g).double()
    x = torch.randn(3, 100, 2, dtype=torch.float64, generator=g)
    phi = pi = torch.zeros(3, 6, dtype=torch.float64)
    fwd = [torch.zeros_like(p) for p in cell.parameters()]
    with torch.no_grad():
        for t in range(100):
            phi, pi, half = leapfrog_step(cell, phi, pi, x[:, t])
            for a, s in zip(fwd, cell.potential_param_grad(half, x[:, t]), strict=True):
                a += s
        echo = [torch.zeros_like(p) for p in cell.parameters()]
        pi = -pi
        for t in range(99, -1, -1):
            phi, pi, half = leapfrog_step(cell, phi, pi, x[:, t])
            for a, s in zip(echo, cell.potential_param_grad(half, x[:, t]), strict=True):
                a += s
    for a, b in zip(fwd, echo, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
