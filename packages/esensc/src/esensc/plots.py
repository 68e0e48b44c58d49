"""``esensc.plots``: shap's plots, re-exported (needs ``esensc[shap]``).

An ESENSC :class:`esensc.Explanation` subclasses ``shap.Explanation`` when shap is installed,
so shap's plots take it unchanged; this module only forwards to them, so that
``esensc.plots.beeswarm(e)`` reads like ``shap.plots.beeswarm(e)`` and fails with an
``ImportError`` naming the extra when shap is missing. Every name is looked up in
``shap.plots`` on use (``bar``, ``beeswarm``, ``waterfall``, ``scatter``, ``heatmap``,
``violin``, ``force``, ``decision``, ...).
"""

from __future__ import annotations

from typing import Any

_HINT = "esensc.plots draws with shap's plots: pip install 'esensc[shap]'"


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:  # optional dependency: esensc[shap]
        import shap
    except ImportError as exc:
        raise ImportError(_HINT) from exc
    try:
        return getattr(shap.plots, name)
    except AttributeError:
        raise AttributeError(f"shap.plots has no plot called {name!r}") from None
