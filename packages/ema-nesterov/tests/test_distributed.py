"""EMANesterov under DDP and FSDP2 on 2 CPU processes (gloo, loopback), against one process.

One spawned run (``distributed_worker.py``, ~10-20 s) serves every test here; see its
docstring for the scenarios. Float tolerance: the ranks reduce gradients in another order
than one process sums them (the measured gap is ~1e-7 on parameters of order 1).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
TOL = {"rtol": 1e-5, "atol": 1e-6}
RANKS = (0, 1)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    pytest.importorskip("torch.distributed.fsdp")
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("torch built without gloo")
    out = tmp_path_factory.mktemp("dist")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    proc = subprocess.run(
        [sys.executable, str(HERE / "distributed_worker.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    ref = torch.load(out / "ref.pt")
    ranks = [torch.load(out / f"rank{r}.pt") for r in RANKS]
    return ref, ranks


def _close(got, want, **tol):
    assert set(got) == set(want)
    for name in want:
        assert torch.isfinite(got[name]).all(), name
        torch.testing.assert_close(got[name], want[name], **(tol or TOL), msg=name)


@pytest.mark.parametrize("case", ["ddp", "fsdp"])
@pytest.mark.parametrize("rank", RANKS)
def test_matches_single_process_run_of_the_global_batch(runs, case, rank):
    ref, ranks = runs
    got = ranks[rank][case]
    _close(got["y"], ref[case]["y"])
    _close(got["theta"], ref[case]["theta"])


@pytest.mark.parametrize("case", ["ddp", "fsdp", "dcp", "accum"])
@pytest.mark.parametrize("rank", RANKS)
def test_eval_train_swap_on_every_rank(runs, case, rank):
    """eval(): theta in the model (the eval loss is the reference's at theta); train(): y back."""
    ref, ranks = runs
    got = ranks[rank][case]
    want = ref["fsdp" if case == "dcp" else case]
    _close(got["theta"], want["theta"])
    moved = [not torch.equal(got["theta"][n], got["y"][n]) for n in got["y"]]
    assert all(moved), "theta must differ from the lookahead point (beta 0.5)"
    for name in got["y"]:
        assert torch.equal(got["y_after_train"][name], got["y"][name]), name
    assert got["eval_loss"] == pytest.approx(want["eval_loss"], rel=1e-5)


@pytest.mark.parametrize("case", ["ddp", "fsdp"])
def test_wrapper_state_sharded_like_the_base_state(runs, case):
    """m has the type, global and local shape and placements of AdamW's exp_avg."""
    _, ranks = runs
    for rank in RANKS:
        for entry in ranks[rank][case]["m_vs_base"]:
            assert entry["m"] == entry["exp_avg"]
            assert entry["m"]["shape"] == entry["p"]["shape"]
            assert entry["m"]["local_shape"] == entry["p"]["local_shape"]
            if case == "fsdp":
                assert entry["m"]["type"] == "DTensor"
                assert entry["m"]["placements"] == "(Shard(dim=0),)"
                assert entry["m"]["local_shape"][0] * len(RANKS) == entry["m"]["shape"][0]
            else:
                assert entry["m"]["local_shape"] == entry["m"]["shape"]


@pytest.mark.parametrize("rank", RANKS)
def test_dcp_resume_equals_uninterrupted_run(runs, rank):
    """3 steps, dcp.save, fresh objects, dcp.load, 3 steps == 6 uninterrupted steps, bitwise."""
    _, ranks = runs
    got, uninterrupted = ranks[rank]["dcp"], ranks[rank]["fsdp"]
    for key in ("y", "theta"):
        for name, value in uninterrupted[key].items():
            assert torch.equal(got[key][name], value), (key, name)


@pytest.mark.parametrize("rank", RANKS)
def test_accumulation_under_bf16_autocast(runs, rank):
    """DDP, 2 micro-batches per step (no_sync on the first), bf16 autocast: one process's run."""
    ref, ranks = runs
    got = ranks[rank]["accum"]
    assert got["autocast_dtype"] == "torch.bfloat16"
    _close(got["y"], ref["accum"]["y"])
    _close(got["theta"], ref["accum"]["theta"])


def test_ranks_agree(runs):
    _, ranks = runs
    for case in ("ddp", "fsdp", "dcp", "accum"):
        for name, value in ranks[0][case]["y"].items():
            assert torch.equal(ranks[1][case]["y"][name], value), (case, name)
