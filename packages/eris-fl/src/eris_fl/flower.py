"""ERIS on Flower's runtime: a ServerApp that relays sealed shards, a ClientApp per client.

Flower routes every message ServerApp <-> ClientApp, so shards cannot go from client to
client directly: they go through the server, **sealed end to end** for their aggregator
(:mod:`eris_fl.sealing`, X25519 + AES-GCM), so the relay sees only ciphertext. A round:

1. the ServerApp plans the round (:func:`eris_fl._eris.plan_round`) and sends every
   participant ``x_t``, the roles, and the aggregators' public keys (``train.eris``);
2. each ClientApp computes its message ``c_k`` (DSC shift kept in ``context.state``), cuts it
   by the shared-seed partition and seals shard ``a`` for aggregator ``a``;
3. the ServerApp forwards the sealed shards of ``a`` to aggregator ``a``
   (``query.eris_aggregate``), which opens them and returns ``v^(a)`` (public, like the
   model); the ServerApp applies ``x_{t+1} = x_t + lambda v``, evaluates and logs.

The ServerApp's :class:`~eris_fl.History` stays in its process (:attr:`FlowerERIS.history`);
in a deployment, where the ServerApp is a subprocess of the SuperLink, declare
``eris-history = ""`` in the app's ``[tool.flwr.app.config]`` and pass a path
(``flwr run . -c 'eris-history="out.pt"'``) to have it saved there (:func:`load_history`).

Before the first round, ``query.eris_hello`` collects each client's id
(``node_config["partition-id"]``), size and public key; the private key never leaves the
node. Needs ``flwr`` (``pip install 'eris-fl[flower]'``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from eris_fl._checks import EvalFn, as_update_fn, check_datasets, evaluate
from eris_fl._eris import (
    RoundPlan,
    aggregate_shard,
    apply_update,
    client_message,
    local_update,
    plan_round,
)
from eris_fl.client import LocalTrainer, UpdateFn
from eris_fl.config import ERISConfig
from eris_fl.dsc import ShiftState, resolve_alpha
from eris_fl.params import assign, flatten
from eris_fl.partition import ShardPartitioner
from eris_fl.sealing import KeyPair, open_shard, seal_shard, shard_label
from eris_fl.simulation import History

if TYPE_CHECKING:
    from flwr.app.typing import ConfigRecordValues

logger = logging.getLogger(__name__)

HELLO, TRAIN, AGGREGATE = "query.eris_hello", "train.eris", "query.eris_aggregate"
HISTORY_KEY = "eris-history"  # run-config key: where the ServerApp saves the History


def require_flwr() -> ModuleType:
    """Import and return ``flwr``.

    Raises:
        ImportError: If Flower is not installed, naming the extra to install.
    """
    try:
        import flwr
    except ImportError as exc:
        raise ImportError("ERIS on Flower needs Flower: pip install 'eris-fl[flower]'") from exc
    return flwr


def _tensor(record: Any, key: str) -> torch.Tensor:
    return torch.from_numpy(np.array(record[key].numpy(), copy=True))


def _arrays(**tensors: torch.Tensor) -> Any:
    from flwr.app import Array, ArrayRecord

    return ArrayRecord(
        {k: Array(v.detach().cpu().contiguous().numpy()) for k, v in tensors.items()}
    )


class FlowerERIS:
    """Both halves of ERIS on Flower, built from the same settings on every side.

    Args:
        model_fn: Zero-argument model builder (the ServerApp's gives ``x_0``).
        dataset_fn: ``f(client_id) -> data`` (tensors, a dataset, a ``DataLoader`` or a
            batch callable); the id is the node's ``node_config["partition-id"]``.
        config: :class:`~eris_fl.config.ERISConfig`.
        rounds: Number of rounds.
        num_clients: Nodes the ServerApp waits for before the first round.
        trainer: Local work, as in :func:`~eris_fl.run_simulation`.
        eval_fn: ``f(model) -> dict | float`` on the ServerApp after each round (logged).
        timeout_s: How long the ServerApp waits for the nodes and for each round's replies.

    After the ServerApp has run, :attr:`history` holds the metrics and the final state.
    """

    def __init__(
        self,
        model_fn: Callable[[], nn.Module],
        dataset_fn: Callable[[int], Any],
        config: ERISConfig,
        rounds: int,
        num_clients: int,
        trainer: LocalTrainer | UpdateFn | None = None,
        eval_fn: EvalFn | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        if not isinstance(config, ERISConfig):
            raise TypeError(f"config must be an ERISConfig, got {type(config).__name__}")
        if config.num_aggregators > num_clients:
            raise ValueError(
                f"num_aggregators={config.num_aggregators} must be <= num_clients={num_clients}"
            )
        self.model_fn, self.dataset_fn, self.config = model_fn, dataset_fn, config
        self.rounds, self.num_clients = rounds, num_clients
        self.update_fn = as_update_fn(trainer, config)
        self.eval_fn, self.timeout_s = eval_fn, timeout_s
        self.partitioner = ShardPartitioner(config.num_aggregators, config.partition, config.seed)
        self.history: History | None = None
        self._local: dict[int, tuple[nn.Module, Any]] = {}

    # ------------------------------------------------------------------ the apps
    def server_app(self) -> Any:
        """A ``flwr.serverapp.ServerApp`` whose main function runs the rounds."""
        require_flwr()
        from flwr.serverapp import ServerApp

        app = ServerApp()
        app.main()(self._serve)
        return app

    def _serve(self, grid: Any, context: Any) -> None:
        history = self.run_server(grid)
        if path := context.run_config.get(HISTORY_KEY):
            save_history(history, str(path))

    def client_app(self) -> Any:
        """A ``flwr.clientapp.ClientApp`` answering the hello, train and aggregate messages."""
        require_flwr()
        from flwr.clientapp import ClientApp

        app = ClientApp()
        app.query("eris_hello")(self.hello)
        app.train("eris")(self.train)
        app.query("eris_aggregate")(self.aggregate)
        return app

    # ------------------------------------------------------------------ server side
    def run_server(self, grid: Any) -> History:
        """The ServerApp's main: hello, then ``rounds`` rounds over ``grid``."""
        from flwr.app import ConfigRecord, Message, RecordDict

        cfg = self.config
        nodes = self._wait_for_nodes(grid)
        hello = self._ask(grid, [Message(RecordDict(), n, HELLO) for n in nodes], "the hello")
        ids = {n: int(c["eris"]["client"]) for n, c in hello.items()}
        if sorted(ids.values()) != list(range(len(ids))):
            raise ValueError(
                f"partition-ids of the nodes must be 0..K-1, got {sorted(ids.values())}"
            )
        node_of = {k: n for n, k in ids.items()}
        sizes = [int(hello[node_of[k]]["eris"]["num_examples"]) for k in range(len(ids))]
        keys = [bytes(hello[node_of[k]]["eris"]["public_key"]) for k in range(len(ids))]
        model = self.model_fn()
        x = flatten(model, cfg.trainable_only, cfg.include_buffers).cpu()
        d, dtype = x.numel(), str(x.dtype).removeprefix("torch.")
        public = None
        if cfg.compressor is not None:
            public = ShiftState(d, resolve_alpha(cfg.shift_alpha, cfg.compressor, d), dtype=x.dtype)
        history = History()
        for t in range(self.rounds):
            plan = plan_round(cfg, sizes, t, d, self.partitioner)
            roles = ConfigRecord(
                {
                    "round": t,
                    "clients": plan.clients,
                    "aggregators": plan.aggregators,
                    "weights": plan.weights,
                    "keys": [keys[j] for j in plan.aggregators],
                }
            )
            out = [
                Message(
                    RecordDict({"roles": roles, "x": _arrays(x=x)}),
                    node_of[k],
                    TRAIN,
                    group_id=str(t),
                )
                for k in plan.clients
            ]
            sealed = self._ask(grid, out, f"round {t} (training)", ids)
            out = []
            for a, j in enumerate(plan.aggregators):
                shards = ConfigRecord(
                    {
                        "round": t,
                        "shard": a,
                        "dtype": dtype,
                        "senders": plan.clients,
                        "weights": plan.weights,
                        "sender_keys": [keys[k] for k in plan.clients],
                        "sealed": [
                            bytes(sealed[node_of[k]]["sealed"][f"shard{a}"]) for k in plan.clients
                        ],
                    }
                )
                content = RecordDict({"shards": shards})
                if public is not None:
                    content["shift"] = _arrays(s=public.shift[plan.shards[a]])
                out.append(Message(content, node_of[j], AGGREGATE, group_id=str(t)))
            segments = self._ask(grid, out, f"round {t} (aggregation)", ids)
            v = torch.zeros_like(x)
            for a, j in enumerate(plan.aggregators):
                v[plan.shards[a]] = _tensor(segments[node_of[j]]["v"], "v")
            x = apply_update(x, v, cfg.server_lr, public)
            assign(model, x, cfg.trainable_only, cfg.include_buffers)
            history.metrics.append(evaluate(self.eval_fn, model, t))
            logger.info("ERIS round %d (Flower, %d nodes): %s", t, len(nodes), history.metrics[-1])
        history.params = x
        self.history = history
        return history

    def _wait_for_nodes(self, grid: Any) -> list[int]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            nodes = sorted(grid.get_node_ids())
            if len(nodes) >= self.num_clients:
                return nodes
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"only {len(nodes)} of {self.num_clients} Flower nodes connected "
                    f"within {self.timeout_s} s"
                )
            time.sleep(0.2)

    def _ask(
        self, grid: Any, messages: list[Any], what: str, ids: dict[int, int] | None = None
    ) -> dict[int, Any]:
        """Send, wait for every reply, and name the client that failed or did not answer."""
        dst = [m.metadata.dst_node_id for m in messages]

        def name(node: int) -> str:
            return f"node {node}" if ids is None else f"client {ids[node]} (node {node})"

        replies = list(grid.send_and_receive(messages, timeout=self.timeout_s))
        got: dict[int, Any] = {}
        for reply in replies:
            node = reply.metadata.src_node_id
            if reply.has_error():
                raise RuntimeError(f"{name(node)} failed in {what}: {reply.error.reason}")
            got[node] = reply.content
        missing = [n for n in dst if n not in got]
        if missing:
            raise RuntimeError(
                f"{', '.join(name(n) for n in missing)} dropped: no reply in {what} "
                f"within {self.timeout_s} s"
            )
        return got

    # ------------------------------------------------------------------ client side
    def _client(self, context: Any) -> tuple[int, KeyPair]:
        from flwr.app import ConfigRecord

        k = int(context.node_config["partition-id"])
        if "eris_keys" not in context.state:
            pair = KeyPair.generate()
            context.state["eris_keys"] = ConfigRecord(
                {"private": pair.private, "public": pair.public}
            )
        rec = context.state["eris_keys"]
        return k, KeyPair(bytes(rec["private"]), bytes(rec["public"]))

    def _model_and_data(self, k: int) -> tuple[nn.Module, Any]:
        if k not in self._local:
            self._local[k] = (self.model_fn(), self.dataset_fn(k))
        return self._local[k]

    def hello(self, msg: Any, context: Any) -> Any:
        """``query.eris_hello``: this client's id, number of examples and public key."""
        from flwr.app import ConfigRecord, Message, RecordDict

        k, pair = self._client(context)
        n = check_datasets([self._model_and_data(k)[1]], client_ids=[k])[0]
        rec = ConfigRecord({"client": k, "num_examples": n, "public_key": pair.public})
        return Message(RecordDict({"eris": rec}), reply_to=msg)

    def train(self, msg: Any, context: Any) -> Any:
        """``train.eris``: local work, DSC, and one sealed shard per aggregator."""
        from flwr.app import ConfigRecord, Message, RecordDict

        cfg = self.config
        k, pair = self._client(context)
        model, data = self._model_and_data(k)
        roles, x = msg.content["roles"], _tensor(msg.content["x"], "x")
        t, aggs = int(roles["round"]), [int(j) for j in roles["aggregators"]]
        owner = self.partitioner.owner(t, x.numel())
        plan = RoundPlan(t, [int(c) for c in roles["clients"]], aggs, list(roles["weights"]), owner)
        u = local_update(self.update_fn, model, x, data, cfg.seed, plan, k).cpu()
        shift = None
        if cfg.compressor is not None:
            shift = ShiftState(
                x.numel(), resolve_alpha(cfg.shift_alpha, cfg.compressor, x.numel()), dtype=x.dtype
            )
            if "eris_shift" in context.state:
                shift.shift = _tensor(context.state["eris_shift"], "h")
        c = client_message(u, cfg.compressor, shift, cfg.seed, plan, k)
        if shift is not None:
            context.state["eris_shift"] = _arrays(h=shift.shift)
        sealed: dict[str, ConfigRecordValues] = {
            f"shard{a}": seal_shard(c[idx], pair.private, bytes(key), shard_label(t, k, j, a))
            for a, (j, idx, key) in enumerate(zip(aggs, plan.shards, roles["keys"], strict=True))
        }
        return Message(RecordDict({"sealed": ConfigRecord(sealed)}), reply_to=msg)

    def aggregate(self, msg: Any, context: Any) -> Any:
        """``query.eris_aggregate``: open this node's shard from every client and sum it."""
        from flwr.app import Message, RecordDict

        j, pair = self._client(context)
        rec = msg.content["shards"]
        t, a, dtype = int(rec["round"]), int(rec["shard"]), getattr(torch, str(rec["dtype"]))
        shards = [
            open_shard(bytes(blob), pair.private, bytes(key), shard_label(t, int(k), j, a), dtype)
            for k, key, blob in zip(rec["senders"], rec["sender_keys"], rec["sealed"], strict=True)
        ]
        s_seg = _tensor(msg.content["shift"], "s") if "shift" in msg.content else None
        v = aggregate_shard(shards, list(rec["weights"]), s_seg)
        return Message(RecordDict({"v": _arrays(v=v)}), reply_to=msg)


def save_history(history: History, path: str) -> None:
    """Write ``history``'s metrics and final state to ``path`` (read with :func:`load_history`)."""
    torch.save({"metrics": history.metrics, "params": history.params}, path)


def load_history(path: str) -> History:
    """The :class:`~eris_fl.History` a ServerApp saved with :func:`save_history`."""
    saved = torch.load(path, weights_only=True)
    return History(metrics=saved["metrics"], params=saved["params"])


def relay_payloads(messages: Iterable[Any]) -> list[bytes]:
    """Every byte string a relay saw in ``messages``: array buffers and bytes config values."""
    blobs: list[bytes] = []
    for msg in messages:
        if msg.has_error():
            continue
        for record in msg.content.values():
            if hasattr(record, "values"):
                for value in record.values():
                    if hasattr(value, "data") and isinstance(value.data, bytes):
                        blobs.append(value.data)
                    elif isinstance(value, bytes):
                        blobs.append(value)
                    elif isinstance(value, list):
                        blobs += [b for b in value if isinstance(b, bytes)]
    return blobs
