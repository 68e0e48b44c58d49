"""A Flower deployment on this machine: a SuperLink and N SuperNodes on 127.0.0.1, offline.

:class:`LocalFederation` starts ``flower-superlink --insecure`` and one
``flower-supernode --insecure --node-config "partition-id=<k> num-partitions=<N>"`` per
client as subprocesses, on free loopback ports, with ``FLWR_HOME`` (Flower's config, installed
apps and logs) in a folder of the caller's choosing, with runtime dependency installation
off (the apps run in this environment) and Flower's telemetry and update check off: nothing
leaves 127.0.0.1. :meth:`LocalFederation.run` submits
a Flower App with ``flwr run`` and returns the :class:`~eris_fl.History` its ServerApp saved
(:data:`eris_fl.flower.HISTORY_KEY`). Leaving the ``with`` block stops every process it
started, with their children (SuperExec, ServerApp and ClientApp processes). This is Flower's
own deployment runtime, each ClientApp message handled in a fresh process; it needs no Ray.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from eris_fl.distributed import free_port
from eris_fl.flower import HISTORY_KEY, load_history, require_flwr
from eris_fl.simulation import History

HOST = "127.0.0.1"
CONNECTION = "eris-local"  # the SuperLink connection written to FLWR_HOME/config.toml
# Flower's processes otherwise phone home (telemetry events, a background update check)
OFFLINE = {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1"}


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux ``/proc``; elsewhere none are found)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def wait_for_port(port: int, timeout_s: float, proc: subprocess.Popen[Any] | None = None) -> None:
    """Wait until something accepts TCP connections on ``HOST:port``.

    Raises:
        RuntimeError: If ``proc`` exits first.
        TimeoutError: If nothing listens within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            cmd = proc.args  # a sequence of arguments, or one command string
            prog = cmd if isinstance(cmd, str | bytes | os.PathLike) else cmd[0]
            raise RuntimeError(f"{os.fsdecode(prog)} exited with code {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on {HOST}:{port} after {timeout_s} s")


class LocalFederation:
    """A SuperLink and ``num_supernodes`` SuperNodes on loopback, for ``with`` blocks.

    Args:
        home: Folder for ``FLWR_HOME`` and the processes' logs (``home/logs``).
        num_supernodes: SuperNodes to start; node ``k`` gets ``partition-id=k``.
        port: The SuperLink's HTTP port (Fleet, Control and Runtime APIs); ``0``: a free one.
        supernode_target: ``host:port`` the SuperNodes dial (default the SuperLink itself;
            tests put a recording proxy there).
        timeout_s: Limit for the SuperLink to come up and for each :meth:`run`.
    """

    def __init__(
        self,
        home: str | Path,
        num_supernodes: int,
        port: int = 0,
        supernode_target: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        if num_supernodes < 1:
            raise ValueError(f"num_supernodes must be >= 1, got {num_supernodes}")
        require_flwr()
        self.home = Path(home).resolve()
        self.num_supernodes, self.timeout_s = num_supernodes, timeout_s
        self.port = port or free_port(HOST)
        self.supernode_target = supernode_target or f"{HOST}:{self.port}"
        self.logs = self.home / "logs"
        self._procs: list[subprocess.Popen[bytes]] = []
        self._files: list[IO[bytes]] = []
        bin_dir = Path(sys.executable).parent  # flower-* spawn flower-superexec by name
        self.env = {
            **os.environ,
            "FLWR_HOME": str(self.home),
            **OFFLINE,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self._bin = bin_dir

    def _start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("wb")
        self._files.append(log)
        cmd = [str(self._bin / args[0]), *args[1:]]
        proc = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self._procs.append(proc)
        return proc

    def __enter__(self) -> LocalFederation:
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = "{HOST}:{self.port}"\ninsecure = true\n'
        )
        try:
            superlink = self._start(
                "superlink",
                "flower-superlink",
                "--insecure",
                "--disable-runtime-dependency-installation",
                "--host",
                HOST,
                "--port",
                str(self.port),
            )
            for k in range(self.num_supernodes):
                config = f"partition-id={k} num-partitions={self.num_supernodes}"
                self._start(
                    f"supernode{k}",
                    "flower-supernode",
                    "--insecure",
                    "--superlink",
                    self.supernode_target,
                    "--port",
                    str(free_port(HOST)),
                    "--node-config",
                    config,
                )
            wait_for_port(self.port, self.timeout_s, superlink)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def run(self, app_dir: str | Path, run_config: dict[str, str] | None = None) -> History:
        """``flwr run`` the Flower App in ``app_dir``; the :class:`~eris_fl.History` it saved.

        The app declares ``eris-history = ""`` in ``[tool.flwr.app.config]``; ``run_config``
        overrides other keys (string values are quoted for TOML here).

        Raises:
            RuntimeError: If the run saved no history (the ServerApp failed), with its log.
            subprocess.TimeoutExpired: If ``flwr run`` takes longer than ``timeout_s``.
        """
        out = self.home / f"history-{time.monotonic_ns()}.pt"
        overrides = {**(run_config or {}), HISTORY_KEY: str(out)}
        cmd = [str(self._bin / "flwr"), "run", str(Path(app_dir).resolve()), CONNECTION, "--stream"]
        for key, value in overrides.items():
            cmd += ["--run-config", f'{key}="{value}"']
        done = subprocess.run(
            cmd, env=self.env, capture_output=True, text=True, timeout=self.timeout_s, check=False
        )
        (self.logs / f"{out.stem}.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0 or not out.is_file():
            tail = (done.stdout + done.stderr)[-3000:]
            raise RuntimeError(
                f"the Flower run saved no history (flwr run exit {done.returncode}):\n{tail}"
            )
        return load_history(str(out))

    def close(self, grace_s: float = 5.0) -> None:
        """Stop every process started here and their descendants: SIGTERM, then SIGKILL."""
        pids = [pid for proc in self._procs for pid in _descendants(proc.pid)]
        _signal(pids + [proc.pid for proc in self._procs], signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        pids += [pid for proc in self._procs for pid in _descendants(proc.pid)]
        _signal(pids + [proc.pid for proc in self._procs if proc.poll() is None], signal.SIGKILL)
        for proc in self._procs:
            proc.wait()
        for log in self._files:
            log.close()
        self._procs, self._files = [], []
