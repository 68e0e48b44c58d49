"""esensc: linear-cost, closed-form, axiomatic feature attributions that plug into shap.

ESENSC (Hiraki et al., arXiv:2603.00496, 2026) explains a prediction from 2n + 2 coalition
values per row: the midpoint of the Equal-Surplus and ENSC values, with null features set to
exactly zero. ``esensc.Explainer(model, background)(X)`` returns a ``shap.Explanation`` when
shap is installed.
"""

from importlib.metadata import version as _version
from typing import Any

from esensc import diagnostics, maskers, plots
from esensc._esensc import ESENSCExplainer, Explainer
from esensc._rules import RULES, esensc_values
from esensc.exact import exact_shapley, game_values, shapley_from_values
from esensc.explanation import explanation_class

__version__ = _version("esensc")


def __getattr__(name: str) -> Any:
    # built lazily: it subclasses shap.Explanation when shap is installed (a slow import)
    if name == "Explanation":
        return explanation_class()
    raise AttributeError(f"module 'esensc' has no attribute {name!r}")


__all__ = [
    "RULES",
    "ESENSCExplainer",
    "Explainer",
    "Explanation",
    "__version__",
    "diagnostics",
    "esensc_values",
    "exact_shapley",
    "game_values",
    "maskers",
    "plots",
    "shapley_from_values",
]
