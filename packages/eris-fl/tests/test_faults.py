"""A failing rank is named first with its own error; a dropped or hung rank is named as such."""

import time

import pytest

from _eris_helpers import (
    DropOut,
    dist_data,
    dist_data_crash,
    dist_data_empty_on_rank1,
    dist_model,
)
from eris_fl import ERISConfig
from eris_fl.distributed import launch_local
from eris_fl.faults import RankFailureError, RankOutcome, describe_failure, describe_timeout

CFG = ERISConfig(num_aggregators=2)
PEER = "RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4"


def _outcome(rank, error=None, t=None, exitcode=1, finished=False, last=0, stage="done"):
    return RankOutcome(rank, exitcode, error, t, finished, last, stage)


def test_report_puts_the_cause_before_the_lost_connections():
    outcomes = [
        _outcome(0, PEER * 5, t=1.0),
        _outcome(1, "ValueError: client 1 has an empty dataset", t=2.0),
        _outcome(2, PEER, t=0.5),
    ]
    msg = describe_failure(outcomes)
    assert msg.startswith("rank 1 failed: ValueError: client 1 has an empty dataset; then ")
    assert "ranks 2, 0 lost the connection to a peer" in msg
    assert len(msg) < 300  # the peers' noise is cut to one line


def test_report_names_a_dropped_and_a_hung_rank():
    dropped = describe_failure([_outcome(0, PEER, 1.0), _outcome(1, None, exitcode=-9, last=2)])
    assert dropped.startswith("rank 1 dropped out in round 3 (killed by SIGKILL, no error raised)")
    hung = describe_failure([_outcome(0, PEER, 1.0), _outcome(1, None, exitcode=None)])
    assert hung.startswith("rank 1 stopped answering")
    late = describe_timeout(
        [_outcome(0, exitcode=None, stage="exchange"), _outcome(1, exitcode=None, stage="train")]
    )
    assert late == "rank 1 still in local training (round 0) while rank 0 waited for their shards"


@pytest.mark.slow
def test_crashed_rank_is_named_first_with_its_error():
    start = time.monotonic()
    with pytest.raises(RankFailureError, match=r"^rank 1 failed: RuntimeError: rank 1 crashed on"):
        launch_local(3, dist_model, dist_data_crash, CFG, 2, timeout_s=30)
    assert time.monotonic() - start < 30


@pytest.mark.slow
def test_empty_dataset_names_its_own_rank():
    with pytest.raises(
        RankFailureError, match=r"^rank 1 failed: ValueError: client 1 has an empty"
    ):
        launch_local(3, dist_model, dist_data_empty_on_rank1, CFG, 2, timeout_s=30)


@pytest.mark.slow
def test_rank_killed_mid_run_is_named_as_dropped():
    start = time.monotonic()
    with pytest.raises(RankFailureError, match=r"^rank 2 dropped out in round 1 \(exit code 7"):
        launch_local(3, dist_model, dist_data, CFG, 3, DropOut(rank=2, round=1), timeout_s=30)
    assert time.monotonic() - start < 30


@pytest.mark.slow
def test_hung_rank_is_named_within_the_timeout():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"rank 2 still in local training \(round 0\)"):
        launch_local(3, dist_model, dist_data, CFG, 3, DropOut(2, 0, hang=True), timeout_s=4)
    assert time.monotonic() - start < 15
