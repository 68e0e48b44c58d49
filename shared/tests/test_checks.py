"""methodkit.checks: scalar boundary checks shared by the packages."""

import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from methodkit.checks import check_int, check_real

# ---------------------------------------------------------------- check_int


@pytest.mark.parametrize("value", [0, 7, -3, np.int64(7), np.int8(-3), np.uint16(5)])
def test_check_int_accepts_ints_and_numpy_integers(value):
    out = check_int("n", value)
    assert out == int(value)
    assert type(out) is int


def test_check_int_bounds_are_inclusive():
    assert check_int("n", 1, low=1, high=3) == 1
    assert check_int("n", 3, low=1, high=3) == 3


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, r"True of type bool \(a bool is not accepted\)"),
        (np.bool_(False), r"np\.False_ of type bool \(a bool is not accepted\)"),
        (2.0, r"2\.0 of type float"),
        (np.float32(2.0), r"np\.float32\(2\.0\) of type float32"),
        ("3", r"'3' of type str"),
        (None, r"None of type NoneType"),
        (Fraction(3, 1), r"Fraction\(3, 1\) of type Fraction"),
    ],
)
def test_check_int_type_error_names_argument_and_value(value, shown):
    with pytest.raises(TypeError, match=rf"^steps must be an int, got {shown}$"):
        check_int("steps", value)


@pytest.mark.parametrize(
    ("value", "low", "high", "interval", "shown"),
    [
        (0, 1, None, r"\[1, inf\)", "0"),
        (np.int64(-1), 0, None, r"\[0, inf\)", r"np\.int64\(-1\)"),
        (11, None, 10, r"\(-inf, 10\]", "11"),
        (5, 1, 4, r"\[1, 4\]", "5"),
        (0, 1, 4, r"\[1, 4\]", "0"),
    ],
)
def test_check_int_value_error_gives_interval_and_value(value, low, high, interval, shown):
    with pytest.raises(ValueError, match=rf"^n_seeds must be an int in {interval}, got {shown}$"):
        check_int("n_seeds", value, low=low, high=high)


# ---------------------------------------------------------------- check_real


@pytest.mark.parametrize(
    "value",
    [0.25, 1, np.float32(0.25), np.float64(0.25), np.float16(0.25), np.int64(1), Fraction(1, 4)],
)
def test_check_real_accepts_reals_and_numpy_scalars(value):
    out = check_real("x", value, 0.0, 1.0)
    assert out == float(value)
    assert type(out) is float


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (True, r"True of type bool \(a bool is not accepted\)"),
        (np.bool_(True), r"np\.True_ of type bool \(a bool is not accepted\)"),
        ("0.5", r"'0\.5' of type str"),
        (1j, r"1j of type complex"),
        (np.array([0.5]), r"array\(\[0\.5\]\) of type ndarray"),
        (None, r"None of type NoneType"),
    ],
)
def test_check_real_type_error_names_argument_and_value(value, shown):
    with pytest.raises(TypeError, match=rf"^lr must be a real number, got {shown}$"):
        check_real("lr", value)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (math.nan, "nan"),
        (np.float32("nan"), r"np\.float32\(nan\)"),
        (math.inf, "inf"),
        (-math.inf, "-inf"),
        (np.float64("-inf"), r"np\.float64\(-inf\)"),
    ],
)
def test_check_real_refuses_nan_and_inf_even_without_bounds(value, shown):
    with pytest.raises(
        ValueError, match=rf"^noise must be finite and in \(-inf, inf\), got {shown}$"
    ):
        check_real("noise", value)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_check_real_nan_is_refused_before_the_range(value):
    # NaN fails every comparison, so a range check alone would let it through; the message
    # says "finite" (the problem), then the allowed interval.
    with pytest.raises(ValueError, match=r"^tau must be finite and in \(0\.0, 1\.0\], got "):
        check_real("tau", value, 0.0, 1.0, low_open=True)


def test_check_real_int_too_large_for_a_float_is_not_finite():
    with pytest.raises(ValueError, match=r"^x must be finite and in \[0\.0, inf\), got 1000"):
        check_real("x", 10**400, low=0.0)


@pytest.mark.parametrize(
    ("value", "kwargs", "interval", "shown"),
    [
        (-0.5, {"low": 0.0}, r"\[0\.0, inf\)", r"-0\.5"),
        (0.0, {"low": 0.0, "low_open": True}, r"\(0\.0, inf\)", r"0\.0"),
        (0, {"low": 0, "low_open": True}, r"\(0\.0, inf\)", "0"),
        (1.0, {"low": 0.0, "high": 1.0, "high_open": True}, r"\[0\.0, 1\.0\)", r"1\.0"),
        (1.5, {"low": 0.0, "high": 1.0}, r"\[0\.0, 1\.0\]", r"1\.5"),
        (2.0, {"high": 1.0}, r"\(-inf, 1\.0\]", r"2\.0"),
        (np.float32(-1), {"low": 0.0}, r"\[0\.0, inf\)", r"np\.float32\(-1\.0\)"),
        (1e-3, {"low": 1e-2}, r"\[0\.01, inf\)", r"0\.001"),
    ],
)
def test_check_real_value_error_gives_interval_and_value(value, kwargs, interval, shown):
    with pytest.raises(ValueError, match=rf"^weight must be in {interval}, got {shown}$"):
        check_real("weight", value, **kwargs)


def test_check_real_open_bounds_admit_the_inside():
    assert check_real("x", 1e-12, 0.0, 1.0, low_open=True, high_open=True) == 1e-12
    assert check_real("x", 1 - 1e-12, 0.0, 1.0, low_open=True, high_open=True) == 1 - 1e-12
    assert check_real("x", 0.0, 0.0, 1.0) == 0.0  # closed bounds are inclusive
    assert check_real("x", 1.0, 0.0, 1.0) == 1.0


def test_check_real_infinite_bounds_mean_unbounded():
    assert check_real("x", -1e300, low=-math.inf, high=math.inf) == -1e300
    with pytest.raises(ValueError, match=r"^x must be finite and in \(-inf, inf\), got inf$"):
        check_real("x", math.inf, low=-math.inf, high=math.inf)


def test_importing_checks_keeps_the_core_light():
    code = (
        "import sys, methodkit, methodkit.checks\n"
        "heavy = {'torch', 'matplotlib', 'sklearn', 'pandas'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
