"""Float64 references the tests compare the wrappers with, written from the equations."""

import copy
from collections.abc import Iterator

import numpy as np
import torch


def nag_iterates(
    lam: np.ndarray, lr: float, beta: float, steps: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Nesterov's accelerated gradient on ``f = 1/2 sum lam x^2`` from ``x_0 = 1``.

    Yields ``(x_{t+1}, y_{t+1})`` after every step, where ``y = x + beta (x - x_prev)`` is the
    point the next gradient is taken at.
    """
    x_prev = x = np.ones_like(lam)
    for _ in range(steps):
        y = x + beta * (x - x_prev)
        x_prev, x = x, y - lr * lam * y
        yield x, x + beta * (x - x_prev)


def lookahead_iterates(
    lam: torch.Tensor, lr: float, k: int, alpha: float, steps: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Lookahead (Zhang et al. 2019) around gradient descent on ``1/2 sum lam x^2``, ``x_0 = 1``.

    Yields ``(fast, slow)`` after every step: every ``k`` fast steps the slow weights move
    ``alpha`` of the way to the fast ones and the fast weights restart from there.
    """
    fast = torch.ones_like(lam)
    slow = fast.clone()
    for t in range(1, steps + 1):
        fast = fast - lr * lam * fast
        if t % k == 0:
            slow = slow + alpha * (fast - slow)
            fast = slow.clone()
        yield fast, slow


def base_step_from(
    params: list[torch.nn.Parameter], base: torch.optim.Optimizer
) -> list[torch.Tensor]:
    """The base optimizer's next point from the parameters' current values and gradients.

    Steps a deep copy of ``base`` (and of its parameters), so the original is untouched: the
    black box ``A_t(y_t)`` of the EMA-Nesterov definition.
    """
    ref_params, ref_base = copy.deepcopy((params, base))
    for rp, p in zip(ref_params, params, strict=True):
        rp.grad = p.grad.clone()
    ref_base.step()
    return [rp.detach() for rp in ref_params]


def one_step_exact(
    y_t: torch.Tensor,
    m_t: torch.Tensor,
    theta_next: torch.Tensor,
    gamma: float,
    beta: float,
    beta_next: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One EMA-Nesterov step in float64 from the float32 inputs: ``(p_{t+1}, theta_{t+1})``.

    ``y_t`` and ``m_t`` are the parameter and EMA before the step, ``theta_next`` the base
    optimizer's output from ``y_t``; the increment is ``theta_{t+1} - (y_t - beta m_t)``.
    """
    y, m, th = y_t.double(), m_t.double(), theta_next.double()
    m_next = gamma * m + (1 - gamma) * (th - (y - beta * m))
    return th + beta_next * m_next, th
