import io
import sys

from easylens import EasyBank, ZeroShotDetector

POS = ["chest scan with a round lesion in the left lung"]
NEG = ["normal chest scan with no lesion"]


def _build(tiny, scans, progress):
    return EasyBank.build(
        tiny[1], scans["normal"].images, scans["lesion"].images, layer=1, progress=progress
    )


def test_progress_true_writes_a_bar(tiny, scans, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    _build(tiny, scans, True)
    ZeroShotDetector(tiny[1], POS, NEG, progress=True).decision_function(scans["subtle"].images)
    text = err.getvalue()
    assert "EasyBank tokens (layer 1)" in text
    assert "ZeroShotDetector" in text


def test_default_is_silent_under_tqdm_disable(tiny, scans, monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    _build(tiny, scans, None)
    _build(tiny, scans, True)  # TQDM_DISABLE wins over progress=True
    ZeroShotDetector(tiny[1], POS, NEG).decision_function(scans["subtle"].images)
    assert err.getvalue() == ""


def test_default_is_silent_off_a_terminal(tiny, scans, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    err = io.StringIO()  # not a terminal
    monkeypatch.setattr(sys, "stderr", err)
    _build(tiny, scans, None)
    assert err.getvalue() == ""
