"""ERIS on Flower's deployment runtime: a SuperLink and SuperNodes started here, on loopback.

The test starts ``flower-superlink`` and two ``flower-supernode`` processes (free ports on
127.0.0.1, ``FLWR_HOME`` in ``tmp_path``), submits a Flower App with ``flwr run``, and checks
that the final model equals the simulator's, and that no plaintext shard passed through the
relay: neither through the ServerApp (every message it relayed) nor over the wire between the
SuperLink and the SuperNodes (a recording proxy sits on that path).
"""

import importlib.util
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from eris_fl import flatten, run_simulation

HAS_FLWR = importlib.util.find_spec("flwr") is not None
HERE = Path(__file__).resolve().parent

PYPROJECT = """\
[project]
name = "eris-deployment-test"
version = "1.0.0"
description = "ERIS on Flower"
license = "MIT"
dependencies = []

[tool.flwr.app]
publisher = "eris-fl"

[tool.flwr.app.components]
serverapp = "eris_app:server_app"
clientapp = "eris_app:client_app"

[tool.flwr.app.config]
eris-history = ""
"""  # the README's Flower App, less its comments


def _live_processes_with_home(home):
    """Processes (not zombies) whose environment has ``FLWR_HOME=home``."""
    marker = f"FLWR_HOME={home}".encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if marker in (proc / "environ").read_bytes().split(b"\0"):
                found.append((proc.name, (proc / "cmdline").read_bytes()[:120]))
        except OSError:
            continue
    return found


def _true_shards(app, data):
    """Every client's real shard of every round, as bytes a plaintext relay would carry."""
    views = []
    run_simulation(app.make_mlp(), data, app.CONFIG, app.ROUNDS, app.TRAINER, tap=views.append)
    return [
        view.messages[k][view.owner == a].numpy().tobytes()
        for view in views
        for k in view.clients
        for a in range(len(view.aggregators))
    ]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_FLWR, reason="needs the flower extra")
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="process checks need /proc")
def test_superlink_and_supernodes_on_loopback_equal_the_simulator_with_only_ciphertext_relayed(
    tmp_path,
):
    import _flower_app as app
    from _wire_tap import WireTap
    from eris_fl.distributed import free_port
    from eris_fl.flower_local import LocalFederation

    app_dir, home = tmp_path / "app", tmp_path / "flwr-home"
    app_dir.mkdir()
    (app_dir / "pyproject.toml").write_text(PYPROJECT)
    shutil.copy(HERE / "_flower_app.py", app_dir / "eris_app.py")
    user_flwr = Path.home() / ".flwr"
    before = sorted(user_flwr.iterdir()) if user_flwr.is_dir() else None

    port = free_port()
    tap = WireTap(port)
    try:
        relay = f"127.0.0.1:{tap.port}"
        with LocalFederation(home, app.NODES, port, relay, timeout_s=480) as fed:
            hist = fed.run(app_dir)
            wire = tap.streams()
    finally:
        tap.close()
    assert _live_processes_with_home(home) == []
    assert (sorted(user_flwr.iterdir()) if user_flwr.is_dir() else None) == before

    # (a) the deployment's final model is the simulator's
    data = [app.client_data(k) for k in range(app.NODES)]
    ref = run_simulation(app.make_mlp(), data, app.CONFIG, app.ROUNDS, app.TRAINER)
    torch.testing.assert_close(hist.params, ref.params, rtol=0, atol=1e-6)
    assert [row["round"] for row in hist.metrics] == [0.0, 1.0]

    # (b) no shard in the clear, neither in the ServerApp nor on the SuperLink's wire
    shards = _true_shards(app, data)
    assert len(shards) == app.ROUNDS * app.NODES * app.CONFIG.num_aggregators
    relayed = pickle.loads((home / app.RELAY_LOG).read_bytes())
    assert sum(len(blob) for blob in relayed) > sum(len(s) for s in shards)
    assert [s for s in shards if any(s in blob for blob in relayed)] == []
    # control: the capture sees array payloads in the clear (the public model x_0 is there)
    x0 = flatten(app.make_mlp(), app.CONFIG.trainable_only, app.CONFIG.include_buffers)
    assert any(x0.numpy().tobytes() in stream for stream in wire)
    assert [s for s in shards if any(s in stream for stream in wire)] == []
