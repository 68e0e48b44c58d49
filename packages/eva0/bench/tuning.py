"""Hyperparameter selection on held-out streams (motion blur, never a test corruption).

Each method is tuned on its own grid, on the ``motion_blur`` streams at severities 3 and 5
(seed 0), by mean accuracy; the test corruptions are never looked at. The grids follow the
spec's axes for EVA-0 (step size, perturbation scale, anchor weight, sample-wise vs shared
directions); FOA's are its fitness weight and CMA-ES step size; Tent's and DeYO's the SGD
step size. Script helpers, not part of the wheel.
"""

from __future__ import annotations

import itertools
import statistics
from typing import Any

from tasks import run_stream

HELD_OUT = "motion_blur"


def _product(**axes: list) -> list[dict]:
    return [dict(zip(axes, v, strict=True)) for v in itertools.product(*axes.values())]


#: Full grids. EVA-0 is tuned as the plain method (no guard, no step clipping).
GRIDS: dict[str, list[dict]] = {
    "Tent": _product(lr=[1e-3, 1e-2, 3e-2]),
    "DeYO": _product(lr=[1e-3, 1e-2, 3e-2]),
    "FOA": _product(fitness_lambda=[0.2, 0.4], sigma0=[0.5, 1.0]),
    "ZOShared": _product(lr=[0.01, 0.05, 0.2], eps=[0.02, 0.05], guard=[None], max_step=[None]),
    "EVA-0": _product(
        lr=[0.01, 0.05, 0.2],
        eps=[0.02, 0.05],
        anchor_weight=[0.05, 0.2],
        per_sample=[True, False],
        guard=[None],
        max_step=[None],
    ),
}


def tune(
    model: Any, state: dict, src: Any, streams: list[list], quick: bool
) -> tuple[dict[str, dict], dict[str, list]]:
    """Best configuration per method on the held-out ``streams``, and every grid score.

    ``quick`` takes the first configuration of each grid without scoring it (a smoke run).
    """
    if quick:
        return {name: grid[0] for name, grid in GRIDS.items()}, {}
    best, scores = {}, {}
    for name, grid in GRIDS.items():
        accs = [
            statistics.fmean(
                run_stream(name, model, state, 0, src, s, cfg)["accuracy"] for s in streams
            )
            for cfg in grid
        ]
        i = max(range(len(grid)), key=accs.__getitem__)
        best[name], scores[name] = grid[i], [(cfg, a) for cfg, a in zip(grid, accs, strict=True)]
    return best, scores
