"""The gloo engine on 127.0.0.1 gives the simulator's parameters; failures never hang."""

import socket
import time

import pytest
import torch

from _eris_helpers import FixedInit, dist_data, dist_data_crash, dist_model
from eris_fl import ERISConfig, LocalTrainer, RandK, assign, flatten, run_simulation
from eris_fl.distributed import config_from_toml, launch_local, main

WORLD, ROUNDS = 3, 3


def _simulate(x0, config):
    model = dist_model()
    assign(model, x0)
    data = [dist_data(r) for r in range(WORLD)]
    return run_simulation(model, data, config, ROUNDS, LocalTrainer(batch_size=4)).params


@pytest.mark.slow
@pytest.mark.parametrize("comm", ["p2p", "collective"])
@pytest.mark.parametrize("dsc", [False, True])
def test_launch_local_equals_simulation(comm, dsc):
    torch.manual_seed(0)
    x0 = flatten(dist_model())
    cfg = ERISConfig(num_aggregators=2, compressor=RandK(0.3) if dsc else None, seed=4)
    got = launch_local(
        WORLD,
        FixedInit(x0),
        dist_data,
        cfg,
        ROUNDS,
        LocalTrainer(batch_size=4),
        comm=comm,
        timeout_s=120,
    )
    torch.testing.assert_close(got, _simulate(x0, cfg), rtol=0, atol=1e-5)


@pytest.mark.slow
def test_crashed_rank_fails_fast_instead_of_hanging():
    cfg = ERISConfig(num_aggregators=2)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="rank 1 crashed on purpose"):
        launch_local(WORLD, dist_model, dist_data_crash, cfg, ROUNDS, timeout_s=60)
    assert time.monotonic() - start < 60


def test_port_in_use_suggests_auto_pick():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(ValueError, match="pass port=0 to auto-pick"):
            launch_local(WORLD, dist_model, dist_data, ERISConfig(num_aggregators=2), 1, port=port)


def test_launch_local_argument_errors():
    with pytest.raises(ValueError, match="world_size must be an int >= 1"):
        launch_local(0, dist_model, dist_data, ERISConfig(num_aggregators=1), 1)
    with pytest.raises(ValueError, match="num_aggregators=4 must be <= the participating"):
        launch_local(WORLD, dist_model, dist_data, ERISConfig(num_aggregators=4), 1)
    with pytest.raises(ValueError, match="comm must be one of"):
        launch_local(WORLD, dist_model, dist_data, ERISConfig(num_aggregators=1), 1, comm="mpi")
    with pytest.raises(ValueError, match="start_method must be 'fork', 'spawn' or 'forkserver'"):
        launch_local(
            WORLD, dist_model, dist_data, ERISConfig(num_aggregators=1), 1, start_method="thread"
        )


@pytest.mark.parametrize("shell", [False, True])
def test_wait_for_port_names_the_program_that_exited(shell):
    """A command given as one string is named whole (it used to be its first character)."""
    import re
    import subprocess
    import sys

    from eris_fl.distributed import free_port
    from eris_fl.flower_local import wait_for_port

    args = [sys.executable, "-c", "raise SystemExit(3)"]
    cmd = subprocess.list2cmdline(args) if shell else args
    proc = subprocess.Popen(cmd, shell=shell)
    proc.wait()
    name = cmd if shell else sys.executable
    with pytest.raises(RuntimeError, match=re.escape(f"{name} exited with code 3")):
        wait_for_port(free_port(), 5.0, proc)


def test_torchrun_entry_point_single_process(tmp_path, monkeypatch):
    """`python -m eris_fl.distributed` reads torchrun's env:// variables (world of one here)."""
    from eris_fl.distributed import free_port

    cfg_path = tmp_path / "cfg.toml"
    out = tmp_path / "final.pt"
    cfg_path.write_text(
        'model = "_eris_helpers:dist_model"\n'
        'data = "_eris_helpers:dist_data"\n'
        f'rounds = 2\nout = "{out}"\n'
        "[eris]\nnum_aggregators = 1\ncompressor = {randk = 0.5}\n"
        "[trainer]\nlr = 0.05\nbatch_size = 4\n"
    )
    spec = config_from_toml(cfg_path)
    assert isinstance(spec["config"].compressor, RandK)
    for key, val in {
        "RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }.items():
        monkeypatch.setenv(key, val)
    assert main(["--config", str(cfg_path)]) == 0
    assert out.is_file()
    assert torch.load(out).numel() == flatten(dist_model()).numel()


def test_world_size_mismatch_is_reported():
    import torch.distributed as dist

    from eris_fl.distributed import free_port, run_worker

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
    try:
        with pytest.raises(ValueError, match="world_size/rank mismatch"):
            run_worker(0, 2, dist_model, dist_data, ERISConfig(num_aggregators=1), 1)
    finally:
        dist.destroy_process_group()
