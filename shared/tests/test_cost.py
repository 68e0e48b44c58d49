"""The cost-suite helpers: rotating interleaved timing, paired ratios, the stability check."""

import math

from methodkit.bench import cost_entry, interleaved, stable_ratio


def test_interleaved_warms_up_then_rotates_the_order():
    calls: list[str] = []
    fns = {k: (lambda k=k: calls.append(k)) for k in "abc"}
    times = interleaved(fns, reps=3)
    assert calls == list("abc") + list("abc") + list("bca") + list("cab")
    assert all(len(v) == 3 and all(t >= 0 for t in v) for v in times.values())


def test_cost_entry_pairs_reps_and_falls_back_to_the_ratio_of_medians():
    paired = cost_entry("time", "s", True, "m", [1.0, 3.0, 10.0], "p", [1.0, 1.0, 2.0])
    assert paired["ratio_reps"] == [1.0, 3.0, 5.0]
    assert paired["ratio"] == 3.0
    assert (paired["value"], paired["peer_value"], paired["reps"]) == (3.0, 1.0, 3)
    unpaired = cost_entry("calls", "n", True, "m", [4.0], "p", [1.0, 3.0], "one run")
    assert unpaired["ratio"] == 2.0
    assert unpaired["statistic"] == "one run"
    zero_peer = cost_entry("time", "s", True, "m", [1.0], "p", [0.0])
    assert zero_peer["ratio"] is None
    assert zero_peer["ratio_reps"] == []


def _entry(ratios):
    return {"method": "m", "peer": "p", "axis": "time", "ratio_reps": ratios, "load_avg": None}


def test_stable_ratio_holds_fails_and_refuses_too_few_reps():
    assert stable_ratio(_entry([1.0, 1.01, 0.99, 1.0, 1.02])).passed is True
    assert stable_ratio(_entry([0.5, 1.0, 2.0, 4.0, 1.0])).passed is False
    assert stable_ratio(_entry([1.0, 1.0])).passed is None  # too few reps: not measured
    assert stable_ratio(_entry([math.nan] * 5)).passed is None  # NaN never holds
