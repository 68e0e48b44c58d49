"""Which output of a model is explained: shap's default for each model kind, or the user's pick.

``shap.Explainer(model, background)`` picks an algorithm from the model, and with it the output
it explains (shap 0.50, ``shap/explainers/_explainer.py``): models with ``coef_`` and
``intercept_`` go to ``LinearExplainer`` (the linear margin ``x @ coef.T + intercept``:
log-odds for a logistic regression), tree ensembles to ``TreeExplainer`` with
``model_output="raw"`` (the margin of XGBoost / LightGBM / CatBoost and of scikit-learn's
gradient boosting, the class probabilities of scikit-learn's forests and single trees), and
callables are explained as they are. shap rejects other estimators (an ``MLPClassifier``, a
``Pipeline``) and torch modules fed numpy rows; for those the default here is what shap's users
pass instead: ``predict_proba`` for classifiers, ``predict`` otherwise, and the module's own
output. The classes are recognised by name, so none of these libraries is imported here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

MODEL_OUTPUTS = ("auto", "margin", "probability", "predict")

ModelFn = Callable[[Any], Any]

# scikit-learn tree models whose raw TreeExplainer output is the class probability
_SKLEARN_PROBA_TREES = {
    "RandomForestClassifier",
    "ExtraTreesClassifier",
    "DecisionTreeClassifier",
    "ExtraTreeClassifier",
    "BalancedRandomForestClassifier",
}
# ... whose raw output is the decision function (log-odds)
_SKLEARN_MARGIN_TREES = {"GradientBoostingClassifier", "HistGradientBoostingClassifier"}
_SKLEARN_REGRESSION_TREES = {
    "RandomForestRegressor",
    "ExtraTreesRegressor",
    "DecisionTreeRegressor",
    "ExtraTreeRegressor",
    "GradientBoostingRegressor",
    "HistGradientBoostingRegressor",
}


def _type_names(model: Any) -> set[str]:
    """``module.Class`` of every class in the model's MRO (like shap's ``safe_isinstance``)."""
    return {f"{c.__module__}.{c.__qualname__}" for c in type(model).__mro__}


def _torch_function(module: Any) -> ModelFn:
    import torch

    try:
        param = next(module.parameters())
        device, dtype = param.device, param.dtype
    except StopIteration:
        device, dtype = torch.device("cpu"), torch.get_default_dtype()

    def f(Z: Any) -> NDArray[np.float64]:
        arr = np.asarray(Z)
        # esensc hands its masked rows read-only (one reused buffer): copy those, share others
        to_tensor = torch.as_tensor if arr.flags.writeable else torch.tensor
        with torch.no_grad():
            out = module(to_tensor(arr, dtype=dtype, device=device))
        return out.detach().cpu().double().numpy()

    return f


def _linear_margin(model: Any) -> ModelFn:
    """``x @ coef.T + intercept``, with shap's ``LinearExplainer._parse_model`` squeeze."""
    coef, intercept = np.asarray(model.coef_, dtype=np.float64), model.intercept_
    if coef.ndim > 1 and coef.shape[0] == 1:
        coef = coef[0]
        intercept = np.ravel(intercept)[0] if np.ndim(intercept) else intercept
    b = np.asarray(intercept, dtype=np.float64)
    return lambda Z: np.asarray(Z, dtype=np.float64) @ coef.T + b


def _is_classifier(model: Any) -> bool:
    if getattr(model, "_estimator_type", None) == "classifier":
        return True
    tags = getattr(model, "__sklearn_tags__", None)
    try:
        return tags is not None and tags().estimator_type == "classifier"
    except Exception:  # a foreign object with an unrelated __sklearn_tags__
        return False


def _kind(model: Any) -> str:
    """The model kind that decides shap's default output."""
    names = _type_names(model)
    short = {n.rsplit(".", 1)[-1] for n in names}
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        return "torch"
    if hasattr(model, "coef_") and hasattr(model, "intercept_"):
        return "linear"  # shap tries LinearExplainer first
    if "xgboost.core.Booster" in names:
        return "xgboost_booster"
    if any(n.startswith("xgboost.sklearn.") for n in names):
        return "xgboost"
    if "lightgbm.basic.Booster" in names or any(n.startswith("lightgbm.sklearn.") for n in names):
        return "lightgbm"
    if any(n.startswith("catboost.") for n in names) and hasattr(model, "predict"):
        return "catboost"
    if short & _SKLEARN_PROBA_TREES:
        return "tree_probability"
    if short & _SKLEARN_MARGIN_TREES:
        return "tree_margin"
    if short & _SKLEARN_REGRESSION_TREES:
        return "tree_regression"
    if callable(model):
        return "callable"
    if _is_classifier(model) and hasattr(model, "predict_proba"):
        return "classifier"
    if hasattr(model, "predict"):
        return "regressor"
    return "unknown"


def _margin(model: Any, kind: str) -> ModelFn:
    if kind == "linear":
        return _linear_margin(model)
    if kind == "xgboost_booster":
        return lambda Z: model.inplace_predict(Z, predict_type="margin")
    if kind == "xgboost":
        return lambda Z: model.predict(Z, output_margin=True)
    if kind == "lightgbm":
        return lambda Z: model.predict(Z, raw_score=True)
    if kind == "catboost":
        return lambda Z: model.predict(Z, prediction_type="RawFormulaVal")
    if hasattr(model, "decision_function"):
        return model.decision_function
    raise ValueError(
        f"model_output='margin': {type(model).__name__} has no margin (no decision_function); "
        "use model_output='probability' or 'predict'"
    )


_AUTO = {
    "linear": "margin",
    "xgboost_booster": "margin",
    "xgboost": "margin",
    "lightgbm": "margin",
    "catboost": "margin",
    "tree_margin": "margin",
    "tree_probability": "probability",
    "tree_regression": "predict",
    "classifier": "probability",
    "regressor": "predict",
}


def validate_model_output(model_output: str) -> str:
    """Return ``model_output`` if known, else raise ValueError."""
    if not isinstance(model_output, str) or model_output not in MODEL_OUTPUTS:
        raise ValueError(f"model_output must be one of {MODEL_OUTPUTS}, got {model_output!r}")
    return model_output


def model_function(model: Any, model_output: str = "auto") -> tuple[ModelFn, str]:
    """The callable ``f(Z) -> array`` that is explained, and the output it gives.

    ``"auto"`` gives what ``shap.Explainer(model, background)`` explains by default (see the
    module docstring); ``"margin"``, ``"probability"`` and ``"predict"`` pick the margin (raw
    score, decision function, linear predictor), ``predict_proba`` or ``predict`` of an
    estimator. Callables and torch modules are explained as they are (``"auto"`` only).

    Returns:
        ``(f, output)`` with ``output`` one of ``"margin"``, ``"probability"``, ``"predict"``,
        ``"callable"`` or ``"torch"``.

    Raises:
        ValueError: For an unknown ``model_output``, one the model does not have, or a
            non-``"auto"`` choice for a callable or torch module.
        TypeError: If ``model`` is neither callable, an estimator nor a torch module.
    """
    model_output = validate_model_output(model_output)
    kind = _kind(model)
    if kind == "unknown":
        raise TypeError(
            "model must be a callable mapping an (m, n) array to (m,) or (m, k) outputs, an "
            f"estimator with predict/predict_proba, or a torch nn.Module; got "
            f"{type(model).__name__}"
        )
    if kind in ("torch", "callable"):
        if model_output != "auto":
            raise ValueError(
                f"model_output={model_output!r} applies to estimators; a {kind} model is "
                "explained as it is: pass the function you want explained"
            )
        return (_torch_function(model) if kind == "torch" else model), kind
    output = _AUTO[kind] if model_output == "auto" else model_output
    if output == "margin":
        return _margin(model, kind), output
    if kind == "xgboost_booster" and output == "predict":  # Booster.predict wants a DMatrix
        return (lambda Z: model.inplace_predict(Z, predict_type="value")), output
    method = "predict_proba" if output == "probability" else "predict"
    if not hasattr(model, method):
        raise ValueError(f"model_output={output!r}: {type(model).__name__} has no {method}()")
    return getattr(model, method), output
