"""Bitwise regression of ``ESSFlow.run``: fingerprints recorded before ``run`` was split.

Each scenario exercises one path of ``run`` (plain, thinning and burn-in; tempering with a
Cholesky source and ``init="search"``; multi-fidelity with per-chain likelihoods, no stored
``x`` and a callback; an explicit ``init`` tensor with a ``max_shrink`` cap). The SHA-256 of
every returned tensor (and the cost counters) were recorded on this repository's CPU build
with the code before the refactor into named steps; any change of the random stream, the
order of generator calls or the arithmetic changes a hash.

The scenarios run in a child process with ``MKL_CBWR=COMPATIBLE``: MKL otherwise picks its
code path by the CPU's instruction set, and on an AVX-512 machine two scenarios' float64 hashes
differ from the recorded ones (same counts, last-bit differences), while in MKL's compatible
mode they match on AVX2 and AVX-512 machines alike.
"""

import hashlib
import json
import os
import subprocess
import sys
import warnings

import pytest
import torch

from ess_flow import ESSFlow, GaussianLikelihood, IndicatorLikelihood


def _digest(t: torch.Tensor | None) -> str:
    if t is None:
        return "none"
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()[:16]


def _fingerprint(res, calls: list[int]) -> dict:
    return {
        "z": _digest(res.z),
        "x": _digest(res.x),
        "log_lik": _digest(res.log_lik),
        "calls_per_iter": _digest(res.calls_per_iter),
        "counts": [res.n_generator_calls, res.n_evaluations, res.n_max_shrink, res.warmup_iters],
        "callback": calls[:1] + calls[-1:],
    }


def _gen(z):
    return 1.5 * z + 0.3 * torch.sin(z)


def _scenario_plain():
    lik = GaussianLikelihood(None, torch.tensor([1.0, -0.5, 0.2]), 0.4)
    s = ESSFlow(_gen, lik, (3,), dtype=torch.float64)
    return s.run(16, 30, burn_in=5, thin=2, seed=0), []


def _scenario_tempered_cholesky_search():
    L = torch.tensor([[1.0, 0.0], [0.4, 0.7]], dtype=torch.float64)
    lik = IndicatorLikelihood(lambda x: x[:, 0] > 1.2)
    s = ESSFlow(
        _gen,
        lik,
        (2,),
        prior_mean=torch.tensor([0.2, -0.1]),
        prior_scale_tril=L,
        dtype=torch.float64,
    )
    return s.run(12, 20, burn_in=4, init="search", anneal_iters=5, seed=3), []


def _scenario_multifidelity_indexed():
    y = torch.linspace(-1, 1, 10)[:, None].repeat(1, 2)

    def lik(x, idx):
        return -0.5 * ((x - y[idx]) ** 2).sum(-1) / 0.3**2

    calls: list[int] = []
    s = ESSFlow(_gen, lik, (2,), low_fidelity_generator=lambda z: 1.4 * z, chain_indexed=True)
    res = s.run(
        10,
        25,
        low_fidelity_iters=6,
        anneal_iters=3,
        return_x=False,
        seed=5,
        callback=lambda it, z, ell: calls.append(it),
    )
    return res, calls


def _scenario_init_tensor_capped():
    lik = GaussianLikelihood(None, torch.full((4,), 2.0), 0.05)
    s = ESSFlow(_gen, lik, (4,), max_shrink=3)
    init = torch.linspace(-1, 1, 32).reshape(8, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = s.run(8, 15, init=init, generator=torch.Generator().manual_seed(11))
    return res, []


SCENARIOS = {
    "plain": _scenario_plain,
    "tempered_cholesky_search": _scenario_tempered_cholesky_search,
    "multifidelity_indexed": _scenario_multifidelity_indexed,
    "init_tensor_capped": _scenario_init_tensor_capped,
}

# Recorded with the pre-refactor ``ESSFlow.run`` (commit of this test).
EXPECTED: dict[str, dict] = {
    "init_tensor_capped": {
        "z": "9f4e62b86feecaa7",
        "x": "762b7ff60027b773",
        "log_lik": "64d519674d5c38c5",
        "calls_per_iter": "d30f23b9653ac693",
        "counts": [46, 328, 79, 0],
        "callback": [],
    },
    "multifidelity_indexed": {
        "z": "985fd594ba0b6bd5",
        "x": "none",
        "log_lik": "8139e07247f88c71",
        "calls_per_iter": "bdc7b6ba01b8f56f",
        "counts": [320, 1566, 0, 9],
        "callback": [0, 33],
    },
    "plain": {
        "z": "8fc9ca0595321a39",
        "x": "8e2dc1c984cc939f",
        "log_lik": "87b693306549d5fb",
        "calls_per_iter": "c0c061d638bf46e2",
        "counts": [309, 2321, 0, 0],
        "callback": [],
    },
    "tempered_cholesky_search": {
        "z": "36f9df264ac55960",
        "x": "06db64f24e834ae9",
        "log_lik": "80422bc3d307b4a2",
        "calls_per_iter": "49cd34ffdde9011b",
        "counts": [145, 758, 0, 5],
        "callback": [],
    },
}


def _all_fingerprints() -> dict[str, dict]:
    return {name: _fingerprint(*scenario()) for name, scenario in SCENARIOS.items()}


@pytest.fixture(scope="module")
def fingerprints() -> dict[str, dict]:
    """Every scenario's fingerprint, computed in a child process in MKL's compatible mode."""
    env = {**os.environ, "MKL_CBWR": "COMPATIBLE"}
    out = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_run_is_bit_identical_to_the_recorded_fingerprint(name, fingerprints):
    assert fingerprints[name] == EXPECTED[name]


if __name__ == "__main__":
    sys.stdout.write(json.dumps(_all_fingerprints()) + "\n")
