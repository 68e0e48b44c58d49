"""eo-wm: a weather-conditioned video diffusion world model for Earth-observation forecasting.

EO-WM (NeurIPS 2026) forecasts multispectral frames as an ensemble from context frames, static
maps and known forcing, which it decomposes into a climatological baseline (adaLN path), a
standardised anomaly and cumulative heat/drought stress (cross-attention path). The package
ships the decomposer, the video DiT, baselines, an offline land-surface simulator and the
Extreme Summer and Seasonal Matched-Pair diagnostics.
"""

from importlib import import_module
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

from eo_wm import baselines, guidance, metrics, simulator
from eo_wm.baselines import ConvLSTMForecaster, climatology_forecast, persistence_forecast
from eo_wm.guidance import GuidanceChoice, select_guidance
from eo_wm.model import EOWMConfig, EOWorldModel, LatentAutoencoderWrapper
from eo_wm.simulator import (
    LandSurfaceSimulator,
    make_counterfactual_pairs,
    make_dataset,
    make_extreme_summer,
    make_seasonal_pairs,
)
from eo_wm.train import flow_matching_loss, sample_ensemble, train_model

if TYPE_CHECKING:
    from eo_wm import weather
    from eo_wm.weather import WeatherDecomposer, cumulative_stress

__version__ = _version("eo-wm")

# Exported lazily: eo_wm.weather subclasses scikit-learn's BaseEstimator, whose import pulls
# scipy (seconds); `import eo_wm` stays light until one of these names is used.
_LAZY = {"WeatherDecomposer": "eo_wm.weather", "cumulative_stress": "eo_wm.weather"}
_LAZY_MODULES = {"weather": "eo_wm.weather"}


def __getattr__(name: str) -> Any:
    """Import the scikit-learn-backed names on first use (``from eo_wm import X`` works)."""
    if name in _LAZY_MODULES:
        value = import_module(_LAZY_MODULES[name])
    elif name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
    else:
        raise AttributeError(f"module 'eo_wm' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "ConvLSTMForecaster",
    "EOWMConfig",
    "EOWorldModel",
    "GuidanceChoice",
    "LandSurfaceSimulator",
    "LatentAutoencoderWrapper",
    "WeatherDecomposer",
    "__version__",
    "baselines",
    "climatology_forecast",
    "cumulative_stress",
    "flow_matching_loss",
    "guidance",
    "make_counterfactual_pairs",
    "make_dataset",
    "make_extreme_summer",
    "make_seasonal_pairs",
    "metrics",
    "persistence_forecast",
    "sample_ensemble",
    "select_guidance",
    "simulator",
    "train_model",
    "weather",
]
