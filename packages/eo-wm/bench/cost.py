"""The eo-wm ``cost`` suite: seconds per ensemble member per forecast window, side by side.

EO-WM, the undifferentiated diffusion (same size) and ConvLSTM (one deterministic forecast =
one member) forecast the same windows in the same process; repetitions are interleaved in
rotating order after one untimed warm-up each; the statistic is the median
(``methodkit.bench.interleaved`` and ``cost_entry``, the record convention of the root README's
cost table). Weights are
untrained: the time of a forward pass does not depend on their values.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch

from eo_wm.baselines import ConvLSTMForecaster, predict_convlstm
from eo_wm.model import EOWMConfig, EOWorldModel
from eo_wm.train import sample_ensemble
from methodkit.bench import Outcome, ResultRow, check, cost_entry, interleaved

SPEC = {"hidden": 96, "depth": 4, "heads": 4, "patch": 4, "euler_steps": 30, "grid": 16}
QUICK = {"hidden": 16, "depth": 1, "heads": 2, "patch": 8, "euler_steps": 2, "grid": 16}


def windows(n: int, grid: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """``n`` random windows with every key the three models read (T_c = 8, T_f = 12)."""
    g = torch.Generator().manual_seed(seed)
    T = 20
    return {
        "context": torch.rand(n, 8, 4, grid, grid, generator=g) * 0.5,
        "context_mask": (torch.rand(n, 8, 1, grid, grid, generator=g) > 0.2).float(),
        "static": torch.rand(n, 3, grid, grid, generator=g),
        "weather": torch.randn(n, T, 3, generator=g),
        "baseline": torch.randn(n, T, 3, generator=g),
        "anomaly": torch.randn(n, T, 3, generator=g),
        "stress": torch.rand(n, T, 4, generator=g),
        "doy": torch.linspace(150, 250, T).expand(n, T).contiguous(),
    }


def measure(quick: bool, reps: int, n_windows: int) -> tuple[dict[str, Any], dict[str, list]]:
    """Seconds per member per window of each model over ``reps`` interleaved repetitions."""
    c = QUICK if quick else SPEC
    data = windows(n_windows, c["grid"])
    torch.manual_seed(0)
    models = {}
    for name, mode in (("eo_wm", "decomposed"), ("undiff_diffusion", "undifferentiated")):
        cfg = EOWMConfig(
            4,
            3,
            3,
            8,
            12,
            c["grid"],
            patch_size=c["patch"],
            hidden=c["hidden"],
            depth=c["depth"],
            heads=c["heads"],
            conditioning=mode,
        )
        models[name] = EOWorldModel(cfg).eval()
    lstm = ConvLSTMForecaster(4, 3, 3, 12, hidden=32).eval()

    def diffusion(name: str) -> Callable[[], Any]:
        def fn() -> Any:
            gen = torch.Generator().manual_seed(0)
            return sample_ensemble(
                models[name], data, 1, c["euler_steps"], batch_size=n_windows, generator=gen
            )

        return fn

    fns = {
        "eo_wm": diffusion("eo_wm"),
        "undiff_diffusion": diffusion("undiff_diffusion"),
        "convlstm": lambda: predict_convlstm(lstm, data, batch_size=n_windows),
    }
    secs = interleaved(fns, reps)
    per = {k: [v / n_windows for v in vals] for k, vals in secs.items()}
    config = {
        "model": c,
        "windows_per_call": n_windows,
        "members_per_call": 1,
        "reps": reps,
        "threads": torch.get_num_threads(),
        "note": "untrained weights (timing does not depend on values); one member = one "
        f"{c['euler_steps']}-step Euler sample (diffusion) or one forward pass (ConvLSTM)",
    }
    return config, per


def cost_suite(args: argparse.Namespace) -> Outcome:
    """Seconds per ensemble member per window: EO-WM vs ConvLSTM and undifferentiated diffusion."""
    reps, n_win = (5, 2) if args.quick else (7, 8)
    config, per = measure(args.quick, reps, n_win)
    axis, unit = "time per ensemble member per forecast window", "s/member/window"
    entries = [
        cost_entry(
            axis, unit, True, "EO-WM", per["eo_wm"], "ConvLSTM (one forecast)", per["convlstm"]
        ),
        cost_entry(
            axis,
            unit,
            True,
            "EO-WM",
            per["eo_wm"],
            "undifferentiated diffusion",
            per["undiff_diffusion"],
        ),
    ]
    results = [
        ResultRow.from_values(name, "s_per_member_window", vals, higher_is_better=False)
        for name, vals in per.items()
    ]
    claims_ = []
    for e in entries:
        r = sorted(e["ratio_reps"])
        q1, q3 = r[len(r) // 4], r[(3 * len(r)) // 4]
        claims_.append(
            check(
                f"the ratio to {e['peer']} is stable: IQR of per-rep ratios <= 25 % of median",
                q3 - q1 <= 0.25 * e["ratio"],
                f"{q3 - q1:.3g} vs {e['ratio']:.3g}",
                inputs=[q3 - q1, e["ratio"]],
            )
        )
    return Outcome(
        {**config, "cost": entries},
        results,
        claims_,
        units={"s_per_member_window": "s"},
        labels={"s_per_member_window": "time per ensemble member per window"},
    )
