"""Population evaluation over 2 loopback gloo ranks equals the single-process run bit for bit."""

import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("torch.distributed")


def _worker():
    sys.path.insert(0, str(Path(__file__).parent))  # spawned ranks import it by name
    try:
        import essam_dist_worker

        return essam_dist_worker
    finally:
        sys.path.remove(str(Path(__file__).parent))


@pytest.fixture(scope="module")
def two_ranks():
    """2 forked ranks (milliseconds to start), bounded by a 60 s timeout."""
    from essam.distributed import launch

    worker = _worker()
    return worker, launch(worker.all_jobs, 2, timeout=60, start_method="fork")


@pytest.mark.parametrize(
    ("variant", "n", "steps"), [("standard", 5, 3), ("accelerated", 5, 3), ("es", 4, 2)]
)
def test_update_equals_single_process_bit_for_bit(two_ranks, variant, n, steps):
    worker, ranks = two_ranks
    single_params, single_rewards = worker.toy_run(variant, n, steps, 11, False)
    for rank in ranks:
        params, rewards = rank[variant]
        assert rewards == single_rewards  # every member's reward, exchanged as float64
        for p, q in zip(params, single_params, strict=True):
            assert torch.equal(p, q)


def test_failing_member_raises_on_every_rank_without_hanging(two_ranks):
    _, ranks = two_ranks
    assert ranks[1]["failing"] == "RuntimeError: reward service down"
    assert ranks[0]["failing"] == ("ValueError: closure (population member 3) failed on rank 1")


def test_ranks_with_different_seeds_all_raise(two_ranks):
    _, ranks = two_ranks
    for rank in ranks:
        assert "the ranks disagree on the run: rank 0 has seed 5" in rank["seeds"]


@pytest.mark.slow
def test_spawned_ranks_match_single_process():
    """The default start method: each rank imports torch (~10 s on a busy core)."""
    from essam.distributed import launch

    worker = _worker()
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        ranks = launch(worker.toy_run, 2, "standard", 5, 2, 3, True, timeout=120)
    finally:
        sys.path.remove(str(Path(__file__).parent))
    single = worker.toy_run("standard", 5, 2, 3, False)
    for params, rewards in ranks:
        assert rewards == single[1]
        assert all(torch.equal(p, q) for p, q in zip(params, single[0], strict=True))


def test_population_needs_an_initialised_group():
    from essam.distributed import DistributedPopulation, launch

    with pytest.raises(RuntimeError, match="init_process_group"):
        DistributedPopulation()
    with pytest.raises(ValueError, match="world_size must be"):
        launch(print, 0)
    with pytest.raises(ValueError, match="start_method must be"):
        launch(print, 2, start_method="thread")


@pytest.mark.slow
def test_tiny_lm_update_on_two_ranks_is_bitwise_one_process():
    """The same on a causal LM (tiny SmolLM2 stand-in) whose reward goes through generation."""
    pytest.importorskip("transformers")
    from essam.distributed import launch
    from methodkit.smollm2 import tiny_smollm2

    worker = _worker()
    model, tok = tiny_smollm2(layers=2, hidden=24)
    before = [p.detach().clone() for p in model.parameters()]
    single, single_rewards = worker.lm_run(model, tok, False)
    assert all(torch.equal(p, q) for p, q in zip(before, model.parameters(), strict=True))
    ranks = launch(worker.lm_run, 2, model, tok, True, timeout=120, start_method="fork")
    trained = [p for m in (model.model.layers[-1], model.model.norm) for p in m.parameters()]
    assert any(not torch.equal(p, q) for p, q in zip(single, trained, strict=True))  # it moved
    for params, rewards in ranks:
        assert rewards == single_rewards
        assert all(torch.equal(p, q) for p, q in zip(params, single, strict=True))
