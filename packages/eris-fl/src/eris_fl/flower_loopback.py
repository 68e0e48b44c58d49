"""Flower's ``Grid`` served in one process: run a ServerApp and ClientApps without a network.

:class:`LoopbackGrid` delivers each message of the ServerApp to the ClientApp of its node
(each node with its own ``Context``, as a SuperNode keeps it) and keeps a copy of every
message both ways: what a relay sees. :func:`run_loopback` is the offline way to run
:class:`~eris_fl.flower.FlowerERIS` end to end (tests, the README's quickstart).
"""

from __future__ import annotations

import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import uuid4

from eris_fl.flower import FlowerERIS, require_flwr
from eris_fl.simulation import History

FIRST_NODE_ID = 101
SUPERLINK_ID = 1


def _grid_base() -> type:
    require_flwr()
    from flwr.serverapp import Grid

    return Grid


def loopback_grid(client_app: Any, num_nodes: int) -> Any:
    """A Flower ``Grid`` whose nodes ``0..num_nodes-1`` run ``client_app`` in this process."""
    from flwr.app import Context, Error, Message, RecordDict

    class LoopbackGrid(_grid_base()):  # type: ignore[misc]  # flwr's Grid, imported on demand
        """Routes ServerApp messages to in-process ClientApps; records all traffic."""

        def __init__(self) -> None:
            self.contexts = {
                FIRST_NODE_ID + k: Context(
                    run_id=SUPERLINK_ID,
                    node_id=FIRST_NODE_ID + k,
                    node_config={"partition-id": k, "num-partitions": num_nodes},
                    state=RecordDict(),
                    run_config={},
                )
                for k in range(num_nodes)
            }
            self.seen: list[Any] = []
            self._replies: dict[str, Any] = {}
            self._run: Any = None

        def set_run(self, run: Any) -> None:
            self._run = run

        @property
        def run(self) -> Any:
            return self._run

        def create_message(
            self, content: Any, message_type: str, dst_node_id: int, group_id: str, ttl: Any = None
        ) -> Any:
            return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

        def get_node_ids(self) -> Iterable[int]:
            return list(self.contexts)

        def push_messages(self, messages: Iterable[Any]) -> Iterable[str]:
            ids = []
            for msg in messages:
                msg.metadata.__dict__["_message_id"] = str(uuid4())
                self.seen.append(msg)
                try:
                    reply = client_app(msg, self.contexts[msg.metadata.dst_node_id])
                except Exception as exc:  # as a SuperNode does: the error goes back as a reply
                    reason = "".join(traceback.format_exception_only(type(exc), exc)).strip()
                    reply = Message(Error(code=0, reason=reason), reply_to=msg)
                self.seen.append(reply)
                self._replies[msg.metadata.message_id] = reply
                ids.append(msg.metadata.message_id)
            return ids

        def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Any]:
            return [self._replies.pop(i) for i in message_ids if i in self._replies]

        def send_and_receive(self, messages: Iterable[Any], *, timeout: Any = None) -> Any:
            return self.pull_messages(self.push_messages(messages))

    return LoopbackGrid()


@contextmanager
def _server_identity() -> Iterator[None]:
    """Flower stamps new messages with the process's task identity; set it, then restore it."""
    from flwr.supercore.task_identity import TaskIdentity

    names = ("run_id", "node_id", "task_id")
    before = {n: vars(TaskIdentity).get(f"_{n}") for n in names}
    for name in names:
        setattr(TaskIdentity, name, SUPERLINK_ID)
    try:
        yield
    finally:
        for name, value in before.items():
            setattr(TaskIdentity, name, value)


def run_loopback(
    eris: FlowerERIS, grid: Any = None, run_config: dict[str, Any] | None = None
) -> tuple[History, Any]:
    """Run ``eris``'s ServerApp and ``num_clients`` ClientApps in this process.

    Args:
        eris: Both apps' settings.
        grid: The grid to run over (default: a new :func:`loopback_grid` of ``eris``'s apps).
        run_config: The ServerApp's run config, as ``flwr run -c`` would set it.

    Returns:
        The run's :class:`~eris_fl.History` and the grid (``grid.seen``: all traffic).
    """
    from flwr.app import Context, RecordDict

    grid = grid if grid is not None else loopback_grid(eris.client_app(), eris.num_clients)
    context = Context(
        run_id=SUPERLINK_ID,
        node_id=SUPERLINK_ID,
        node_config={},
        state=RecordDict(),
        run_config=dict(run_config or {}),
    )
    with _server_identity():
        eris.server_app()(grid, context)
    if eris.history is None:  # run_server sets it when the ServerApp runs to its end
        raise RuntimeError("the ServerApp returned without a History")
    return eris.history, grid
