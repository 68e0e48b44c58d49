"""peak_memory and ForwardCounter: how every package measures memory and model calls."""

import functools

import pytest

from methodkit.bench import ForwardCounter, peak_memory


def test_forward_counter_counts_and_rejects_non_callables():
    counter = ForwardCounter(lambda: 1.0)
    assert [counter(), counter()] == [1.0, 1.0]
    assert counter.count == 2
    with pytest.raises(TypeError, match="callable"):
        ForwardCounter(3)


@pytest.mark.slow
def test_peak_memory_cpu_sees_a_large_allocation():
    torch = pytest.importorskip("torch")
    # a module-level, picklable callable (the child process is spawned)
    # 8M float32 = 30.5 MiB, measured above the RSS after `import torch` in the child
    big = peak_memory(functools.partial(torch.ones, 8_000_000))
    assert 30 * 2**20 < big < 40 * 2**20


def test_peak_memory_reports_a_failing_child():
    pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="child failed"):
        peak_memory(functools.partial(int, "not a number"))


def test_peak_memory_in_process_sees_a_large_allocation_and_nothing_else():
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")

    def touch(n: int) -> None:
        a = np.ones(n, dtype=np.float32)  # 8M float32 = 30.5 MiB, every page written
        del a

    big = peak_memory(touch, in_process=True, args=(8_000_000,))
    small = peak_memory(touch, in_process=True, args=(1000,))
    assert 30 * 2**20 < big < 40 * 2**20
    assert small < 4 * 2**20
