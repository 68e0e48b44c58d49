"""The eo-wm benchmark's claims, judged on the mean over seeds of ``tasks.run_seed``'s cells."""

from __future__ import annotations

import tasks

from methodkit.bench import Claim, check, compare


def _at_least(text: str, value: float, floor: float) -> Claim:
    """A floor claim on one measured value (unmeasured when the value is NaN)."""
    return check(text, value >= floor, f"{value:.3f}", inputs=[value])


def weather_claims(ps: list) -> list:
    """The spec's claims on the mean over seeds of ``tasks.run_seed(...)["weather"]``."""
    m = lambda name, met: tasks.mean(ps, name, met)  # noqa: E731
    gain = {
        k: 1 - m("eo_wm", f"es_dae_{k}") / m("undiff_diffusion", f"es_dae_{k}")
        for k in ("low", "high")
    }
    best_px = min(m(b, "pixel_mae") for b in ("undiff_diffusion", "convlstm", "persistence"))
    best_nd = min(
        m(b, "ndvi_mae") for b in ("undiff_diffusion", "convlstm", "persistence", "climatology")
    )
    ss = m("eo_wm", "spread_skill")
    return [
        compare(
            "Extreme Summer DAE: EO-WM <= 0.9 x undifferentiated diffusion",
            m("eo_wm", "es_dae"),
            "<=",
            m("undiff_diffusion", "es_dae"),
            scale=0.9,
        ),
        compare(
            "Extreme Summer DAE: EO-WM <= 0.9 x ConvLSTM",
            m("eo_wm", "es_dae"),
            "<=",
            m("convlstm", "es_dae"),
            scale=0.9,
        ),
        compare(
            "relative DAE gain vs undifferentiated: high tercile > low tercile",
            gain["high"],
            ">",
            gain["low"],
        ),
        compare(
            "Seasonal pairs DHR: EO-WM >= undifferentiated + 0.03",
            m("eo_wm", "sp_dhr"),
            ">=",
            m("undiff_diffusion", "sp_dhr"),
            margin=0.03,
        ),
        _at_least(
            "counterfactual pairs DHR: EO-WM >= 0.75",
            m("eo_wm", "cf_dhr"),
            0.75,
        ),
        compare(
            "pixel MAE: EO-WM <= 1.1 x best baseline",
            m("eo_wm", "pixel_mae"),
            "<=",
            best_px,
            scale=1.1,
        ),
        compare(
            "NDVI MAE: EO-WM <= 1.1 x best baseline",
            m("eo_wm", "ndvi_mae"),
            "<=",
            best_nd,
            scale=1.1,
        ),
        compare(
            "NDVI CRPS: EO-WM < ConvLSTM MAE (CRPS of a point forecast)",
            m("eo_wm", "ndvi_crps"),
            "<",
            m("convlstm", "ndvi_crps"),
        ),
        check(
            "spread-skill of EO-WM NDVI trajectories in [0.5, 1.5]",
            0.5 <= ss <= 1.5,
            f"{ss:.3f}",
            inputs=[ss],
        ),
    ]


def sensitivity_claims(ps: list) -> list:
    """Swap and dose claims on the mean over seeds of the ``"sensitivity"`` cells."""
    m = lambda name, met: tasks.mean(ps, name, met)  # noqa: E731
    return [
        _at_least(
            "swap: EO-WM's forecast moves >= 0.5 x the true NDVI change when the future "
            "weather is swapped (counterfactual pairs)",
            m("eo_wm", "swap_ratio"),
            0.5,
        ),
        _at_least(
            "dose: EO-WM's trough falls with the scaled anomaly at >= 0.5 x the simulator's rate",
            m("eo_wm", "dose_ratio"),
            0.5,
        ),
        _at_least(
            "dose: doubling the anomaly lowers EO-WM's trough in >= 90 % of event windows",
            m("eo_wm", "dose_lower_share"),
            0.9,
        ),
        compare(
            "swap: EO-WM follows the weather at least as much as the undifferentiated diffusion",
            m("eo_wm", "swap_ratio"),
            ">=",
            m("undiff_diffusion", "swap_ratio"),
        ),
    ]
