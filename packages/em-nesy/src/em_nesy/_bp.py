"""Belief propagation on batched factor graphs: exact two-pass on trees, damped loopy BP else."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from em_nesy._base import NEG_THRESHOLD, Logits, Posterior, log_probs
from em_nesy.factors import FactorGraph

# Node ids: ("v", i) for variable i, ("f", j) for factor j.
Node = tuple[str, int]


def _reduce(t: torch.Tensor, dims: Sequence[int], mode: str) -> torch.Tensor:
    if not dims:
        return t
    if mode == "sum":
        return torch.logsumexp(t, dim=tuple(dims))
    return t.amax(dim=tuple(dims))


class _Runner:
    """Message passing for one graph (tables already expanded to the batch)."""

    def __init__(self, graph: FactorGraph, batch: int, dtype: torch.dtype, mode: str) -> None:
        self.g = graph
        self.B = batch
        self.mode = mode
        self.tables = [f.log_table.to(dtype).expand(batch, *f.log_table.shape[-len(f.variables) :])
                       for f in graph.factors]  # fmt: skip
        self.var_factors: list[list[int]] = [[] for _ in graph.domains]
        for j, f in enumerate(graph.factors):
            for v in f.variables:
                self.var_factors[v].append(j)
        self.f2v: dict[tuple[int, int], torch.Tensor] = {}
        self.v2f: dict[tuple[int, int], torch.Tensor] = {}
        self.dtype = dtype

    def _zeros(self, v: int) -> torch.Tensor:
        return torch.zeros(self.B, self.g.domains[v], dtype=self.dtype)

    def var_to_factor(self, v: int, j: int) -> torch.Tensor:
        msg = self._zeros(v)
        for k in self.var_factors[v]:
            if k != j and (k, v) in self.f2v:
                msg = msg + self.f2v[(k, v)]
        return msg

    def factor_to_var(self, j: int, v: int) -> torch.Tensor:
        vars_ = self.g.factors[j].variables
        t = self.tables[j]
        k = len(vars_)
        for pos, u in enumerate(vars_):
            if u != v and (u, j) in self.v2f:
                shape = [self.B] + [1] * k
                shape[pos + 1] = self.g.domains[u]
                t = t + self.v2f[(u, j)].view(shape)
        keep = vars_.index(v) + 1
        return _reduce(t, [d for d in range(1, k + 1) if d != keep], self.mode)

    def beliefs(self, v: int) -> torch.Tensor:
        msg = self._zeros(v)
        for k in self.var_factors[v]:
            msg = msg + self.f2v[(k, v)]
        return msg


def _tree_schedule(graph: FactorGraph) -> tuple[list[tuple[Node, Node]], list[int]] | None:
    """Collect-then-distribute edge order if the graph is a forest, else None; and roots."""
    n_vars, n_f = len(graph.domains), len(graph.factors)
    adj: dict[Node, list[Node]] = {("v", i): [] for i in range(n_vars)}
    adj.update({("f", j): [] for j in range(n_f)})
    for j, f in enumerate(graph.factors):
        for v in f.variables:
            adj[("f", j)].append(("v", v))
            adj[("v", v)].append(("f", j))
    n_edges = sum(len(f.variables) for f in graph.factors)
    seen: set[Node] = set()
    up: list[tuple[Node, Node]] = []
    down: list[tuple[Node, Node]] = []
    roots = []
    components = 0
    for i in range(n_vars):
        root = ("v", i)
        if root in seen:
            continue
        components += 1
        roots.append(i)
        order, parent = [root], {root: root}
        seen.add(root)
        for node in order:
            for nb in adj[node]:
                if nb not in seen:
                    seen.add(nb)
                    parent[nb] = node
                    order.append(nb)
        up += [(node, parent[node]) for node in reversed(order) if node != root]
        down += [(parent[node], node) for node in order if node != root]
    components += sum(1 for j in range(n_f) if ("f", j) not in seen)
    if n_edges != n_vars + n_f - components:
        return None
    return up + down, roots


class BeliefPropagation:
    """Sum-product (or max-product) belief propagation as an E-step.

    The engine builds the label's factor graph, adds the network's log-probabilities as
    unary factors on variables ``0..n-1`` and passes messages. On a tree (e.g. the addition
    carry chain) one collect/distribute sweep gives exact marginals and ``log p(y | x)``; on a
    loopy graph it runs damped flooding updates for at most ``max_iters`` rounds.

    Args:
        model: An object with ``domains`` and ``to_factor_graph(y, dtype)`` (such as
            :class:`~em_nesy.programs.MultiDigitAddition`), or a callable ``y -> FactorGraph``
            together with ``domains``.
        domains: Domain sizes of the neural symbols when ``model`` is a plain callable.
        max_iters: Flooding rounds for loopy graphs (>= 1).
        damping: Weight of the old message in loopy updates, in [0, 1).
        tol: Convergence threshold on message changes (probability scale).

    Example:
        >>> from em_nesy import MultiDigitAddition
        >>> bp = BeliefPropagation(MultiDigitAddition(1))
        >>> post = bp.posterior(torch.zeros(1, 2, 10), torch.tensor([[1, 8]]))
        >>> round(post.marginals[0, 1, 9].item(), 6)
        1.0
    """

    def __init__(
        self,
        model: Any,
        domains: Sequence[int] | None = None,
        max_iters: int = 100,
        damping: float = 0.5,
        tol: float = 1e-8,
    ) -> None:
        if hasattr(model, "to_factor_graph"):
            self._build: Callable[[Any, torch.dtype], FactorGraph] = model.to_factor_graph
            self.domains = tuple(model.domains if domains is None else domains)
        elif callable(model):
            if domains is None:
                raise ValueError("domains is required when model is a plain callable")
            self._build = lambda y, dtype: model(y)
            self.domains = tuple(int(d) for d in domains)
        else:
            raise TypeError(f"model must provide to_factor_graph or be callable, got {model!r}")
        if max_iters < 1:
            raise ValueError(f"max_iters must be >= 1, got {max_iters}")
        if not 0.0 <= damping < 1.0:
            raise ValueError(f"damping must be in [0, 1), got {damping}")
        self.max_iters, self.damping, self.tol = int(max_iters), float(damping), float(tol)
        self._schedules: dict[Any, Any] = {}

    def _run(self, logits: Logits, y: Any, mode: str) -> tuple[_Runner, torch.Tensor, dict]:
        lp = log_probs(logits, self.domains)
        B = lp.shape[0]
        built = self._build(y, lp.dtype)
        if not isinstance(built, FactorGraph):
            raise TypeError(f"the factor-graph builder returned {type(built).__name__}")
        graph = FactorGraph(built.domains)  # copy: the unary factors must not leak into `built`
        graph.factors, graph.batch_size = list(built.factors), built.batch_size
        if graph.batch_size not in (None, B):
            raise ValueError(f"factor graph has batch {graph.batch_size}, logits have {B}")
        if len(graph.domains) < len(self.domains):
            raise ValueError(
                f"factor graph has {len(graph.domains)} variables, need >= {len(self.domains)}"
            )
        for i, d in enumerate(self.domains):
            if graph.domains[i] != d:
                raise ValueError(f"graph variable {i} has domain {graph.domains[i]}, logits {d}")
            graph.add_factor((i,), lp[:, i, :d], log=True)
        key = graph.structure()
        if key not in self._schedules:
            self._schedules[key] = _tree_schedule(graph)
        sched = self._schedules[key]
        run = _Runner(graph, B, lp.dtype, mode)
        if sched is not None:
            edges, roots = sched
            for src, dst in edges:
                if src[0] == "v":
                    run.v2f[(src[1], dst[1])] = run.var_to_factor(src[1], dst[1])
                else:
                    run.f2v[(src[1], dst[1])] = run.factor_to_var(src[1], dst[1])
            log_z = torch.zeros(B, dtype=lp.dtype, device=lp.device)  # one tree per root
            for r in roots:
                log_z = log_z + _reduce(run.beliefs(r), [1], mode)
            valid = log_z > NEG_THRESHOLD
            return run, valid, {"tree": 1.0, "iterations": 1.0, "log_z": log_z}
        return self._loopy(run, graph, B)

    def _loopy(
        self, run: _Runner, graph: FactorGraph, B: int
    ) -> tuple[_Runner, torch.Tensor, dict]:
        dead = torch.zeros(B, dtype=torch.bool)
        pairs = [(j, v) for j, f in enumerate(graph.factors) for v in f.variables]
        log_d, log_1md = math.log(max(self.damping, 1e-300)), math.log1p(-self.damping)
        it = 0
        for it in range(1, self.max_iters + 1):  # noqa: B007 - reported below
            run.v2f = {(v, j): run.var_to_factor(v, j) for j, v in pairs}
            delta = 0.0
            new = {}
            for j, v in pairs:
                m = run.factor_to_var(j, v)
                lse = torch.logsumexp(m, dim=1, keepdim=True)
                dead |= lse[:, 0] < NEG_THRESHOLD
                m = m - lse
                old = run.f2v.get((j, v))
                if old is not None and self.damping > 0:
                    m = torch.logaddexp(m + log_1md, old + log_d)
                if old is not None:
                    delta = max(delta, float((m.exp() - old.exp()).abs().max()))
                else:
                    delta = math.inf
                new[(j, v)] = m
            run.f2v = new
            if delta < self.tol:
                break
        return run, ~dead, {"tree": 0.0, "iterations": float(it), "log_z": None}

    @torch.no_grad()
    def posterior(self, logits: Logits, y: Any) -> Posterior:
        """BP marginals of the neural symbols (exact on trees) and ``log p(y | x)`` on trees."""
        run, valid, info = self._run(logits, y, "sum")
        kmax = max(self.domains)
        marg = torch.stack(
            [torch.nn.functional.pad(run.beliefs(i).softmax(-1), (0, kmax - d))
             for i, d in enumerate(self.domains)], dim=1)  # fmt: skip
        marg = torch.where(valid[:, None, None], marg, torch.full_like(marg, 1.0 / kmax))
        stats = {"valid_frac": float(valid.float().mean()), "tree": info["tree"],
                 "iterations": info["iterations"]}  # fmt: skip
        return Posterior(marg, valid, info["log_z"], stats)

    @torch.no_grad()
    def map_state(self, logits: Logits, y: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Max-product decoding: argmax of each symbol's max-marginal (MAP on trees)."""
        run, valid, _ = self._run(logits, y, "max")
        z = torch.stack([run.beliefs(i).argmax(-1) for i in range(len(self.domains))], dim=1)
        return z, valid
