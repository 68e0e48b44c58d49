"""Extra plot of bench/run.py: EP-Flow's learning curve (test Match@1 against training steps)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Match@1 at the end of the earlier full runs with the same protocol, model, lr 3e-3 and a
# cosine schedule over their own length (3 seeds; records made at commits 436e797 and 822bfb2).
EARLIER_RUNS = {1500: 0.297, 3000: 0.380}


def plot_curve(record: dict[str, Any], path: Path) -> None:
    """Match@1 (1 sample, delta 0.1) of EP-Flow during training, per seed and mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve = record["config"].get("curve", [])
    if not curve:
        return
    steps = [row["steps"] for row in curve]
    mean_key = "ep_flow match@1 (1 sample, mean of seeds)"
    per_seed = [[float(v) for v in row["per seed"].split(" / ")] for row in curve]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for j, seed in enumerate(record["seeds"]):
        ax.plot(steps, [p[j] for p in per_seed], "o-", alpha=0.35, lw=1, label=f"seed {seed}")
    ax.plot(steps, [row[mean_key] for row in curve], "o-", color="k", lw=2,
            label="mean of seeds (this run)")  # fmt: skip
    if not record["config"].get("quick"):
        ends = dict(EARLIER_RUNS)
        final = [r["mean"] for r in record["results"]
                 if r["method"] == "ep_flow" and r["metric"] == "match@1"]  # fmt: skip
        if final:
            ends[int(record["config"]["steps"])] = final[0]
        xs = sorted(ends)
        label = "end of run, 1st of 5 samples (earlier runs: own shorter schedule)"
        ax.plot(xs, [ends[x] for x in xs], "s--", color="tab:red", label=label)
    ax.axhline(0.60, color="gray", ls=":", label="claim: Match@1 >= 0.60")
    ax.set_xlabel("training steps (batch 32)")
    ax.set_ylabel("test Match@1, delta 0.1 (higher is better)")
    ax.set_title("EP-Flow learning curve (cosine schedule over the whole run)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.set_ylim(top=0.76)
    ax.legend(fontsize=7, loc="upper left", ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_scale_curve(record: dict[str, Any], path: Path) -> None:
    """Match@1 against steps: the spec-size model beside the width-32 record's curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = record["config"].get("curve", [])
    if not rows:
        return
    cfg = record["config"]
    seed = cfg["seed"]
    mean = "width 32 (mean of 3 seeds)"
    keys = [("spec size (w64, 4 layers, batch 64)", "o-", "k", f"width {cfg['width']}, "
             f"{cfg['layers']} layers, batch {cfg['batch']} (seed {seed})"),
            (f"width 32 (seed {seed})", "s--", "tab:blue", f"width 32, 2 layers, batch 32 "
             f"(seed {seed}, same split)"),
            (mean, "^:", "tab:gray", mean)]  # fmt: skip
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for key, style, color, label in keys:
        pts = [(r["steps"], r[key]) for r in rows if r[key] is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), style, color=color, label=label)
    ax.axhline(0.60, color="tab:red", ls=":", label="claim: Match@1 >= 0.60")
    ax.set_xlabel("training steps (same cosine learning-rate schedule for both sizes)")
    ax.set_ylabel("test Match@1, delta 0.1 (higher is better)")
    ax.set_title("EP-Flow: does model capacity move Match@1? (1 sample per formula)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
