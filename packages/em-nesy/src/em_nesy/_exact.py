"""Exact E-step engines: brute-force enumeration and the carry-chain DP for addition."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from em_nesy._base import NEG, NEG_THRESHOLD, Logits, Posterior, log_probs
from em_nesy._tables import addition_indicator
from em_nesy._validation import check_program
from em_nesy.programs import MultiDigitAddition, SymbolicProgram


class Enumeration:
    """Exact posterior by listing every assignment (small symbol spaces only).

    Args:
        program: Any :class:`~em_nesy.programs.SymbolicProgram`.
        max_states: Largest number of joint assignments allowed (inclusive).

    Raises:
        ValueError: If the program has more than ``max_states`` assignments.

    Example:
        >>> from em_nesy import MultiDigitAddition
        >>> eng = Enumeration(MultiDigitAddition(1))
        >>> post = eng.posterior(torch.zeros(1, 2, 10), torch.tensor([[1, 8]]))
        >>> post.marginals[0, 0, 9].item()  # 18 = 9 + 9
        1.0
    """

    def __init__(self, program: SymbolicProgram, max_states: int = 1_000_000) -> None:
        check_program(program)
        if max_states < 1:
            raise ValueError(f"max_states must be >= 1, got {max_states}")
        n_states = math.prod(program.domains)
        if n_states > max_states:
            raise ValueError(
                f"Enumeration over {n_states} assignments exceeds max_states={max_states}; use "
                "AdditionDP / BeliefPropagation (exact, structured) or a sampling engine"
            )
        self.program = program
        self.max_states = int(max_states)
        grids = np.meshgrid(*[np.arange(d) for d in program.domains], indexing="ij")
        self.states = np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)  # (S, n)
        self._states_t = torch.from_numpy(self.states)

    def _masked_logw(self, lp: torch.Tensor, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``log p(z | x)`` of every state, NEG where ``c(z, y) = 0``; and the mask."""
        mask = torch.from_numpy(np.asarray(self.program.consistent(self.states, y), dtype=bool))
        if mask.shape != (lp.shape[0], self.states.shape[0]):
            raise ValueError(f"got {mask.shape[0]} labels for a batch of {lp.shape[0]} examples")
        st = self._states_t
        logw = torch.zeros(lp.shape[0], st.shape[0], dtype=lp.dtype, device=lp.device)
        for i in range(st.shape[1]):
            logw = logw + lp[:, i, st[:, i]]
        return torch.where(mask, logw, torch.full_like(logw, NEG)), mask

    def log_likelihood(self, logits: Logits, y: Any) -> torch.Tensor:
        """Differentiable ``log p(y | x)`` (``(B,)``) by summing over consistent states."""
        log_probs(logits, self.program.domains)  # validation only
        if isinstance(logits, torch.Tensor):
            lp = logits.log_softmax(-1)
        else:
            kmax = max(self.program.domains)
            lp = torch.stack(
                [torch.nn.functional.pad(t.log_softmax(-1), (0, kmax - t.shape[1]), value=NEG)
                 for t in logits], dim=1)  # fmt: skip
        logw, _ = self._masked_logw(lp, y)
        return torch.logsumexp(logw, dim=1)

    @torch.no_grad()
    def posterior(self, logits: Logits, y: Any) -> Posterior:
        """Exact marginals, validity and ``log p(y | x)``."""
        lp = log_probs(logits, self.program.domains)
        logw, mask = self._masked_logw(lp, y)
        log_z = torch.logsumexp(logw, dim=1)
        valid = mask.any(dim=1)
        w = torch.softmax(logw, dim=1) * valid[:, None]
        B, n, K = lp.shape
        marg = torch.zeros(B, n, K, dtype=lp.dtype)
        for i in range(n):
            marg[:, i].index_add_(1, self._states_t[:, i], w)
        return Posterior(marg, valid, log_z, {"valid_frac": float(valid.float().mean())})

    @torch.no_grad()
    def map_state(self, logits: Logits, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Most probable consistent assignment ``(B, n)`` and validity ``(B,)``."""
        lp = log_probs(logits, self.program.domains)
        logw, mask = self._masked_logw(lp, y)
        return self._states_t[logw.argmax(dim=1)], mask.any(dim=1)

    @torch.no_grad()
    def sample(
        self, logits: Logits, y: Any, n: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` exact posterior samples ``(B, n, vars)`` and validity ``(B,)``."""
        lp = log_probs(logits, self.program.domains)
        logw, mask = self._masked_logw(lp, y)
        valid = mask.any(dim=1)
        probs = torch.softmax(logw, dim=1)
        probs[~valid] = 1.0
        idx = torch.multinomial(probs, n, replacement=True, generator=generator)
        return self._states_t[idx], valid


def _addition_tables(
    lp: torch.Tensor, program: MultiDigitAddition, y: Any
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-position joint log-tables ``L[b, i, c, c', a, b]``, LSB-first labels and validity."""
    n = program.n_digits
    arr = program.split_labels(y)
    if arr.shape[0] != lp.shape[0]:
        raise ValueError(f"got {arr.shape[0]} labels for a batch of {lp.shape[0]} examples")
    possible = torch.from_numpy(program.label_possible(arr))
    s = torch.from_numpy(np.clip(arr[:, ::-1], 0, 9).copy())  # (B, N+1), LSB first
    ind = addition_indicator()
    log_ind = torch.where(ind > 0, 0.0, NEG).to(lp.dtype)  # (10, 2, 2, 10, 10)
    la, lb = lp[:, :n], lp[:, n:]
    L = log_ind[s[:, :n]] + la[:, :, None, None, :, None] + lb[:, :, None, None, None, :]
    return L, s, possible


def _labels(program: MultiDigitAddition, y: Any, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    arr = program.split_labels(y)
    if arr.shape[0] != batch:
        raise ValueError(f"got {arr.shape[0]} labels for a batch of {batch} examples")
    possible = torch.from_numpy(program.label_possible(arr))
    return torch.from_numpy(np.clip(arr[:, ::-1], 0, 9).copy()), possible  # LSB first


# _DIAG[t, a] indexes b = t - a in a 28-wide padded row (9 NEG | b = 0..9 | 9 NEG), t = 0..18
_DIAG = torch.arange(19)[:, None] - torch.arange(10)[None, :] + 9
# _PAIR[a, b] = a + b + 1: index of the digit sum in a 21-wide row (t = -1..19)
_PAIR = (torch.arange(10)[:, None] + torch.arange(10)[None, :] + 1).flatten()
# carry pair (c, c') -> offset of t = s + 10 c' - c (+1 for the padded row)
_OFFSET = torch.tensor([[0, 10], [-1, 9]]).flatten() + 1


def _carry_tables(lp: torch.Tensor, n: int, s: torch.Tensor) -> torch.Tensor:
    """``log T_i(c, c') = log P(a_i + b_i = s_i + 10 c' - c)``, shape ``(B, N, 2, 2)``.

    The distribution of the digit sum is a log-space convolution over anti-diagonals, so
    only the 19 reachable sums are formed instead of all 400 ``(c, c', a, b)`` entries.
    """
    la, lb = lp[:, :n], lp[:, n:]
    lb_pad = torch.nn.functional.pad(lb, (9, 9), value=NEG)  # (B, N, 28)
    lsum = torch.logsumexp(lb_pad[:, :, _DIAG] + la[:, :, None, :], dim=-1)  # (B, N, 19)
    lsum = torch.nn.functional.pad(lsum, (1, 2), value=NEG)  # t = -1..20 -> 22 wide
    idx = s[:, :n, None] + _OFFSET  # (B, N, 4)
    return lsum.gather(2, idx).view(*idx.shape[:2], 2, 2)


def _forward(log_t: torch.Tensor) -> list[torch.Tensor]:
    """Forward messages ``log alpha_i(c)`` for i = 0..N (``c_0 = 0``)."""
    B, N = log_t.shape[:2]
    alpha = [torch.tensor([0.0, NEG], dtype=log_t.dtype).expand(B, 2)]
    for i in range(N):
        alpha.append(torch.logsumexp(alpha[-1][:, :, None] + log_t[:, i], dim=1))
    return alpha


def _final(alpha_n: torch.Tensor, s_n: torch.Tensor) -> torch.Tensor:
    """``log p(y | x)`` from the last forward message and the final carry ``s_N``."""
    last = torch.where(s_n.clamp(0, 1)[:, None] == torch.arange(2), 0.0, NEG).to(alpha_n.dtype)
    return torch.logsumexp(alpha_n + last, dim=1)


def _pair_marginals(
    w_ab: torch.Tensor, la: torch.Tensor, lb: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pair marginals ``q(a) ∝ p(a) sum_b p(b) w(a + b)`` and ``q(b)`` likewise.

    Computed as float64 mat-vec products with max-shifts; a logsumexp fallback covers rows
    that would underflow.
    """
    w64, la64, lb64 = w_ab.double(), la.double(), lb.double()
    W = (w64 - w64.amax(dim=(-2, -1), keepdim=True)).exp()
    Pa = (la64 - la64.amax(-1, keepdim=True)).exp()
    Pb = (lb64 - lb64.amax(-1, keepdim=True)).exp()
    qa = la64 + (W @ Pb[..., None])[..., 0].log()
    qb = lb64 + (W.transpose(-1, -2) @ Pa[..., None])[..., 0].log()
    bad = ~(torch.isfinite(qa.amax(-1)) & torch.isfinite(qb.amax(-1)))
    if bool(bad.any()):
        qa[bad] = (torch.logsumexp(w64 + lb64[..., None, :], dim=-1) + la64)[bad]
        qb[bad] = (torch.logsumexp(w64 + la64[..., :, None], dim=-2) + lb64)[bad]
    return qa.softmax(-1), qb.softmax(-1)


class AdditionDP:
    r"""Exact E-step for multi-digit addition: forward-backward over the carries.

    With ``c_0 = 0``, ``a_i + b_i + c_i = s_i + 10 c_{i+1}`` and ``s_N = c_N``:

    .. math::
        \\alpha_{i+1}(c') = \\sum_c \\alpha_i(c) \\sum_{a,b} p(a_i{=}a) p(b_i{=}b)
        [a + b + c = s_i + 10 c'],

    backward messages ``beta`` likewise, and the pair posterior at position ``i`` is
    ``alpha_i(c) p(a) p(b) [..] beta_{i+1}(c')`` summed over the carries. Everything runs in
    log-space, batched, in ``O(N * 2 * 2 * 100)`` per example, exact for any ``N``.

    Args:
        program: The :class:`~em_nesy.programs.MultiDigitAddition` instance.

    Example:
        >>> from em_nesy import MultiDigitAddition
        >>> eng = AdditionDP(MultiDigitAddition(2))
        >>> post = eng.posterior(torch.zeros(1, 4, 10), torch.tensor([[1, 9, 8]]))
        >>> round(post.marginals[0, 1, 9].item(), 6)  # 198 = 99 + 99
        1.0
    """

    def __init__(self, program: MultiDigitAddition) -> None:
        if not isinstance(program, MultiDigitAddition):
            raise TypeError(f"AdditionDP needs a MultiDigitAddition, got {type(program).__name__}")
        self.program = program

    def log_likelihood(self, logits: torch.Tensor, y: Any) -> torch.Tensor:
        """Differentiable ``log p(y | x)`` (``(B,)``), the exact-gradient objective."""
        log_probs(logits, self.program.domains)  # validation only
        s, _ = _labels(self.program, y, logits.shape[0])
        log_t = _carry_tables(logits.log_softmax(-1), self.program.n_digits, s)
        return _final(_forward(log_t)[-1], s[:, -1])

    @torch.no_grad()
    def posterior(self, logits: Logits, y: Any) -> Posterior:
        """Exact marginals of all 2N digits, validity and ``log p(y | x)``."""
        lp = log_probs(logits, self.program.domains)
        N = self.program.n_digits
        s, possible = _labels(self.program, y, lp.shape[0])
        log_t = _carry_tables(lp, N, s)
        alpha = _forward(log_t)
        beta = [torch.where(s[:, N, None].clamp(0, 1) == torch.arange(2), 0.0, NEG).to(lp.dtype)]
        for i in range(N - 1, -1, -1):
            beta.insert(0, torch.logsumexp(log_t[:, i] + beta[0][:, None, :], dim=2))
        log_z = torch.logsumexp(alpha[N] + beta[N], dim=1)
        A = torch.stack(alpha[:N], dim=1)  # (B, N, 2)
        Bt = torch.stack(beta[1:], dim=1)  # (B, N, 2)
        # log w(t): posterior weight of the digit sum t = s + 10 c' - c (four distinct t)
        w_cc = (A[:, :, :, None] + Bt[:, :, None, :] - log_z[:, None, None, None]).flatten(2)
        w = torch.full((*A.shape[:2], 22), NEG, dtype=lp.dtype)
        w.scatter_(2, s[:, :N, None] + _OFFSET, w_cc)
        w_ab = w[:, :, _PAIR].view(*A.shape[:2], 10, 10)  # (B, N, a, b)
        marg = torch.cat(_pair_marginals(w_ab, lp[:, :N], lp[:, N:]), dim=1).to(lp.dtype)
        valid = possible & (log_z > NEG_THRESHOLD)
        marg = torch.where(valid[:, None, None], marg, torch.full_like(marg, 0.1))
        return Posterior(marg, valid, log_z, {"valid_frac": float(valid.float().mean())})

    @torch.no_grad()
    def map_state(self, logits: Logits, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Most probable consistent digits ``(B, 2N)`` by max-product (Viterbi) over carries."""
        lp = log_probs(logits, self.program.domains)
        L, s, possible = _addition_tables(lp, self.program, y)
        B, N = L.shape[:2]
        best, arg = L.flatten(-2).max(dim=-1)  # (B, N, 2, 2): best (a, b) per carry pair
        delta = torch.tensor([0.0, NEG], dtype=lp.dtype).expand(B, 2)
        back = []
        for i in range(N):
            cand = delta[:, :, None] + best[:, i]  # (B, c, c')
            delta, bp = cand.max(dim=1)
            back.append(bp)
        c_next = s[:, N].clamp(0, 1)
        score = delta.gather(1, c_next[:, None])[:, 0]
        z = torch.zeros(B, 2 * N, dtype=torch.long)
        rows = torch.arange(B)
        for i in range(N - 1, -1, -1):
            c = back[i][rows, c_next]
            ab = arg[rows, i, c, c_next]
            z[:, i], z[:, N + i] = ab // 10, ab % 10
            c_next = c
        return z, possible & (score > NEG_THRESHOLD)

    @torch.no_grad()
    def sample(
        self, logits: Logits, y: Any, n: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` exact posterior samples ``(B, n, 2N)`` by forward filtering, backward sampling."""
        lp = log_probs(logits, self.program.domains)
        L, s, possible = _addition_tables(lp, self.program, y)
        B, N = L.shape[:2]
        alpha = _forward(torch.logsumexp(L.flatten(-2), dim=-1))
        valid = possible & (_final(alpha[N], s[:, N]) > NEG_THRESHOLD)
        z = torch.zeros(B, n, 2 * N, dtype=torch.long)
        c_next = s[:, N].clamp(0, 1)[:, None].expand(B, n)  # (B, n)
        for i in range(N - 1, -1, -1):
            # joint over (c, a, b) given c_{i+1}: alpha_i(c) + L_i(c, c_{i+1}, a, b)
            Li = L[:, i].permute(0, 2, 1, 3, 4)  # (B, c', c, a, b)
            tab = Li[torch.arange(B)[:, None], c_next] + alpha[i][:, None, :, None, None]
            probs = torch.softmax(tab.reshape(B * n, 200), dim=-1)
            idx = torch.multinomial(probs, 1, generator=generator).view(B, n)
            c_next = idx // 100
            z[:, :, i], z[:, :, N + i] = (idx % 100) // 10, idx % 10
        return z, valid
