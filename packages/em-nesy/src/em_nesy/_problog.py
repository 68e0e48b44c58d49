"""Exact E-step for a user ProbLog program (knowledge compilation to SDDs via PySDD).

Needs the ``problog`` extra: ``pip install "em-nesy[problog]"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from em_nesy._base import Logits, Posterior, log_probs


def _import_problog() -> tuple[Any, Any, Any, Any]:
    try:
        from problog import get_evaluatable
        from problog.errors import InconsistentEvidenceError
        from problog.logic import Term
        from problog.program import PrologString
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            "ProbLogEngine needs problog (and pysdd for SDD compilation): "
            'pip install "em-nesy[problog]"'
        ) from exc
    return get_evaluatable, InconsistentEvidenceError, Term, PrologString


class ProbLogEngine:
    """Posterior marginals from a ProbLog program with neural annotated disjunctions.

    For every example the engine writes the network's distribution of symbol ``i`` as the
    annotated disjunction ``p_0::symbols[i][0]; ...; p_{K-1}::symbols[i][K-1].``, appends
    ``rules``, ``evidence(e).`` for each atom ``e`` of ``evidence(y_b)`` and one query per symbol
    atom, and evaluates it with knowledge compilation (``knowledge="sdd"`` uses PySDD).
    Inconsistent evidence marks the example invalid. One compilation per example: meant
    for small programs and cross-checks, not for large batches.

    Args:
        rules: ProbLog clauses defining the label predicate from the symbol atoms.
        symbols: ``symbols[i][k]`` is the ground atom meaning ``z_i = k``.
        evidence: Maps one example's label to the atom(s) that must hold.
        knowledge: ProbLog evaluatable (``"sdd"``, ``"ddnnf"``, ...).

    Example:
        >>> eng = ProbLogEngine(
        ...     "sum(S) :- d(a, A), d(b, B), S is A + B.",
        ...     [[f"d(a, {k})" for k in range(2)], [f"d(b, {k})" for k in range(2)]],
        ...     evidence=lambda y: f"sum({int(y)})",
        ... )
        >>> eng.posterior(torch.zeros(1, 2, 2), torch.tensor([2])).marginals[0, 0].tolist()
        [0.0, 1.0]
    """

    def __init__(
        self,
        rules: str,
        symbols: Sequence[Sequence[str]],
        evidence: Callable[[Any], str | Sequence[str]],
        knowledge: str = "sdd",
    ) -> None:
        _get_evaluatable, _, Term, _ = _import_problog()
        if not isinstance(rules, str):
            raise TypeError(f"rules must be a str, got {type(rules).__name__}")
        if not symbols or any(len(s) < 1 for s in symbols):
            raise ValueError("symbols must list at least one atom per symbol")
        if not callable(evidence):
            raise TypeError("evidence must be callable: label -> atom(s)")
        self.rules = rules
        self.symbols = [list(s) for s in symbols]
        self.domains = tuple(len(s) for s in self.symbols)
        self.evidence = evidence
        self.knowledge = knowledge
        self._keys = [[str(Term.from_string(a)) for a in s] for s in self.symbols]

    def _program(self, probs: np.ndarray, label: Any) -> str:
        lines = []
        for atoms, p in zip(self.symbols, probs, strict=True):
            p = p[: len(atoms)] / p[: len(atoms)].sum()
            lines.append("; ".join(f"{v:.17g}::{a}" for v, a in zip(p, atoms, strict=True)) + ".")
        lines.append(self.rules)
        ev = self.evidence(label)
        for atom in [ev] if isinstance(ev, str) else ev:
            lines.append(f"evidence({atom}).")
        lines += [f"query({a})." for atoms in self.symbols for a in atoms]
        return "\n".join(lines)

    @torch.no_grad()
    def posterior(self, logits: Logits, y: Any) -> Posterior:
        """Exact marginals by compiling and evaluating one ProbLog program per example."""
        get_evaluatable, Inconsistent, _, PrologString = _import_problog()
        lp = log_probs(logits, self.domains)
        probs = lp.double().exp().numpy()
        if hasattr(y, "detach"):
            y = y.detach().cpu().numpy()
        labels = list(y)
        if len(labels) != lp.shape[0]:
            raise ValueError(f"got {len(labels)} labels for a batch of {lp.shape[0]} examples")
        marg = torch.full(lp.shape, 0.0, dtype=torch.float64)
        valid = torch.zeros(lp.shape[0], dtype=torch.bool)
        for b, label in enumerate(labels):
            text = self._program(probs[b], label)
            try:
                res = get_evaluatable(self.knowledge).create_from(PrologString(text)).evaluate()
            except Inconsistent:
                marg[b] = 1.0 / lp.shape[2]
                continue
            got = {str(k): float(v) for k, v in res.items()}
            for i, keys in enumerate(self._keys):
                marg[b, i, : len(keys)] = torch.tensor([got[k] for k in keys], dtype=torch.float64)
            valid[b] = True
        stats = {"valid_frac": float(valid.float().mean())}
        return Posterior(marg.to(lp.dtype), valid, None, stats)
