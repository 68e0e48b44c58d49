"""`import eo_wm` stays light: scikit-learn and scipy load only when a name needs them."""

import subprocess
import sys

CHECK = """
import sys
import eo_wm
heavy = sorted(m for m in ("sklearn", "scipy", "pandas", "xarray") if m in sys.modules)
assert not heavy, heavy
from eo_wm import WeatherDecomposer, cumulative_stress, select_guidance
assert "sklearn" in sys.modules
assert eo_wm.weather.WeatherDecomposer is WeatherDecomposer
assert {"WeatherDecomposer", "cumulative_stress", "weather"} <= set(dir(eo_wm))
assert set(eo_wm.__all__) <= set(dir(eo_wm))
try:
    eo_wm.no_such_name
except AttributeError as err:
    assert "no_such_name" in str(err)
else:
    raise AssertionError("no AttributeError")
print("ok")
"""


def test_import_leaves_sklearn_and_scipy_out_until_used():
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
