"""A run does not depend on Python's string-hash seed (set order), only on its own seed."""

import os
import subprocess
import sys

import pytest

CODE = """
from evochamber import EvoChamber, EvoConfig, NicheWorld, SimPolicy
world = NicheWorld()
engine = EvoChamber(SimPolicy(world), EvoConfig(), seed=0)
log = engine.run(world.make_stream(700, seed=0))
print(log.accuracy(300), sorted(a.agent_id for a in engine.population.agents))
"""


@pytest.mark.slow
def test_runs_under_two_hash_seeds_agree():
    outs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = subprocess.run(
            [sys.executable, "-c", CODE], env=env, capture_output=True, text=True, check=True
        )
        outs.append(run.stdout)
    assert outs[0] == outs[1]
