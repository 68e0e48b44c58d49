import io
import sys

import methodkit
from methodkit import progress_wanted


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_disabled_returns_the_iterable_itself():
    items = [1, 2, 3]
    assert methodkit.progress(items) is items


def test_progress_enabled_wraps_and_yields_everything(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    wrapped = methodkit.progress(range(5), enabled=True, desc="x")
    assert wrapped is not range(5)
    assert list(wrapped) == [0, 1, 2, 3, 4]
    assert "x" in sys.stderr.getvalue()


def test_auto_shows_on_a_terminal_only(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert not progress_wanted(None)
    monkeypatch.setattr(sys, "stderr", _Tty())
    assert progress_wanted(None)


def test_tqdm_disable_wins_over_everything(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Tty())
    monkeypatch.setenv("TQDM_DISABLE", "1")
    assert not progress_wanted(None)
    assert not progress_wanted(True)
    items = [1, 2]
    assert methodkit.progress(items, enabled=True) is items
    monkeypatch.setenv("TQDM_DISABLE", "0")
    assert progress_wanted(True)
