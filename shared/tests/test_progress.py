import methodkit


def test_progress_disabled_returns_the_iterable_itself():
    items = [1, 2, 3]
    assert methodkit.progress(items) is items


def test_progress_enabled_wraps_and_yields_everything(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    wrapped = methodkit.progress(range(5), enabled=True, desc="x")
    assert wrapped is not None
    assert list(wrapped) == [0, 1, 2, 3, 4]
