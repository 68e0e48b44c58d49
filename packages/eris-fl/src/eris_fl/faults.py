"""Naming what went wrong in a multi-process run: the failing rank first, with its own error.

When one rank fails, the others soon fail too, with gloo's "connection closed by peer". The
report puts the rank that raised first (by the time it wrote its error) or that dropped out
(died without raising) before those consequences, which it shortens to one line.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import dataclass

#: Substrings of the errors a rank raises when a peer has gone away or stopped answering
#: (consequences, not causes).
PEER_ERRORS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "connection refused",
    "econnreset",
    "timed out",
    "timeout",
)


@dataclass(frozen=True)
class RankOutcome:
    """How one rank ended: its exit code, its own error (if it raised one), where it was.

    ``round`` and ``stage`` are the last it reported: ``"train"`` (local work of that round),
    ``"exchange"`` (its shards sent, waiting for the others) or ``"done"`` (round applied).
    """

    rank: int
    exitcode: int | None
    error: str | None
    error_time: float | None
    finished: bool
    round: int
    stage: str = "done"

    @property
    def lost_peer(self) -> bool:
        """Whether its error only says that a peer went away."""
        return self.error is not None and any(p in self.error.lower() for p in PEER_ERRORS)

    @property
    def dropped(self) -> bool:
        """Whether it ended without finishing and without raising (killed, or ``os._exit``)."""
        return self.exitcode is not None and self.error is None and not self.finished


class RankFailureError(RuntimeError):
    """A rank of a distributed run failed or dropped out; ``outcomes`` has every rank's end."""

    def __init__(self, message: str, outcomes: Sequence[RankOutcome]) -> None:
        super().__init__(message)
        self.outcomes = list(outcomes)


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _ranks(outcomes: Sequence[RankOutcome]) -> str:
    nums = ", ".join(str(o.rank) for o in outcomes)
    return f"rank {nums}" if len(outcomes) == 1 else f"ranks {nums}"


def describe_failure(outcomes: Sequence[RankOutcome], width: int = 160) -> str:
    """One message: failing ranks with their errors, then dropped ranks, then the rest."""
    raised = sorted(
        (o for o in outcomes if o.error is not None and not o.lost_peer),
        key=lambda o: o.error_time or 0.0,
    )
    dropped = [o for o in outcomes if o.dropped]
    lost = sorted((o for o in outcomes if o.lost_peer), key=lambda o: o.error_time or 0.0)
    stopped = [o for o in outcomes if o.exitcode is None]
    parts = [f"rank {o.rank} failed: {o.error}" for o in raised]
    if stopped and not raised and not dropped:  # the others waited for it: it hung
        parts.append(f"{_ranks(stopped)} stopped answering (still running when stopped)")
        stopped = []
    parts += [
        f"rank {o.rank} dropped out in round {o.round + (o.stage == 'done')} "
        f"({_exit_text(o.exitcode or 0)}, no error raised)"
        for o in dropped
    ]
    if lost:
        first = lost[0].error or ""
        short = first if len(first) <= width else first[: width - 3] + "..."
        lead = "then " if parts else ""
        parts.append(f"{lead}{_ranks(lost)} lost the connection to a peer ({short})")
    if stopped:
        parts.append(f"{_ranks(stopped)} were still running and were stopped")
    return "; ".join(parts) or "a rank ended without a result and without an error"


def describe_timeout(outcomes: Sequence[RankOutcome]) -> str:
    """Who held the run up: ranks still in their local work while others wait for them."""
    running = [o for o in outcomes if o.exitcode is None]
    behind = [o for o in running if o.stage == "train"]
    waiting = [o for o in running if o.stage != "train"]
    if behind and waiting:
        return (
            f"{_ranks(behind)} still in local training (round {behind[0].round}) while "
            f"{_ranks(waiting)} waited for their shards"
        )
    if running:
        return f"{_ranks(running)} still running (round {running[0].round}, {running[0].stage})"
    return describe_failure(outcomes)
