"""The benchmark's per-seed cache: a seed is reused only under the configuration that made it."""

import json

import seed_cache


def _cells(value: float) -> dict:
    return {"weather": {"eo_wm": {"es_dae": value, "ndvi_mae": float("nan")}}}


def test_a_seed_is_computed_once_and_read_back_exactly(tmp_path):
    calls = []

    def run():
        calls.append(1)
        return _cells(0.1 + 0.2)

    _first, reused_first = seed_cache.load_or_run(tmp_path, {"steps": 4000}, 3, run)
    again, reused_again = seed_cache.load_or_run(tmp_path, {"steps": 4000}, 3, run)
    assert (reused_first, reused_again, len(calls)) == (False, True, 1)
    assert again["weather"]["eo_wm"]["es_dae"] == 0.1 + 0.2  # bit for bit through JSON
    assert json.loads((tmp_path / "seed_3.json").read_text())["seed"] == 3


def test_another_configuration_or_seed_is_recomputed(tmp_path):
    seed_cache.load_or_run(tmp_path, {"steps": 4000, "lr": 1e-3}, 0, lambda: _cells(1.0))
    other_cfg, reused = seed_cache.load_or_run(
        tmp_path, {"lr": 1e-3, "steps": 800}, 0, lambda: _cells(2.0)
    )
    assert not reused
    assert other_cfg["weather"]["eo_wm"]["es_dae"] == 2.0
    other_seed, reused = seed_cache.load_or_run(
        tmp_path, {"lr": 1e-3, "steps": 800}, 1, lambda: _cells(3.0)
    )
    assert not reused
    assert other_seed["weather"]["eo_wm"]["es_dae"] == 3.0


def test_the_digest_ignores_key_order():
    assert seed_cache.config_digest({"a": 1, "b": [1, 2]}) == seed_cache.config_digest(
        {"b": [1, 2], "a": 1}
    )
