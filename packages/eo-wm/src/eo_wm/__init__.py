"""eo-wm: a weather-conditioned video diffusion world model for Earth-observation forecasting.

EO-WM (NeurIPS 2026) forecasts multispectral frames as an ensemble from context frames, static
maps and known forcing, which it decomposes into a climatological baseline (adaLN path), a
standardised anomaly and cumulative heat/drought stress (cross-attention path). The package
ships the decomposer, the video DiT, baselines, an offline land-surface simulator and the
Extreme Summer and Seasonal Matched-Pair diagnostics.
"""

from importlib.metadata import version as _version

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
from eo_wm.weather import WeatherDecomposer, cumulative_stress

__version__ = _version("eo-wm")

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
]
