import logging

import pytest

import methodkit


def test_progress_disabled_returns_the_iterable_itself():
    items = [1, 2, 3]
    assert methodkit.progress(items) is items


def test_progress_enabled_wraps_and_yields_everything(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    wrapped = methodkit.progress(range(5), enabled=True, desc="x")
    assert wrapped is not None
    assert list(wrapped) == [0, 1, 2, 3, 4]


def test_logging_helpers():
    assert methodkit.get_logger("a.b") is logging.getLogger("a.b")
    root = logging.getLogger()
    saved = (root.level, list(root.handlers))
    try:
        methodkit.setup_logging("debug")
        assert root.level == logging.DEBUG
        with pytest.raises(ValueError, match="unknown logging level"):
            methodkit.setup_logging("loud")
    finally:
        root.handlers[:] = saved[1]
        root.setLevel(saved[0])
