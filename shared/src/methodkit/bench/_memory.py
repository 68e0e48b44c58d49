"""Measuring what benchmarks report: peak memory of a step, and forward-pass counts.

Every memory claim in the repository is measured by :func:`peak_memory`, so that "MiB" means
the same thing in every package: on CPU the peak resident set of a fresh spawned process
above its RSS after ``import torch``; on CUDA ``torch.cuda.max_memory_allocated``.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import resource
from collections.abc import Callable
from typing import Any


class ForwardCounter:
    """Wrap a closure and count its calls in ``count``.

    Example:
        >>> f = ForwardCounter(lambda: 1.0)
        >>> _ = f(), f()
        >>> f.count
        2
    """

    def __init__(self, closure: Callable[[], Any]) -> None:
        if not callable(closure):
            raise TypeError(f"closure must be callable, got {type(closure).__name__}")
        self.closure = closure
        self.count = 0

    def __call__(self) -> Any:
        """Call the wrapped closure and count it."""
        self.count += 1
        return self.closure()


def _rss_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_high_water_mark() -> bool:
    """Reset VmHWM to the current RSS (Linux ``/proc/self/clear_refs``); False if unavailable."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def _peak_rss_above_now(fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
    """Bytes of peak RSS during ``fn(*args)`` above the RSS just before it."""
    _reset_high_water_mark()
    base = _rss_kib("VmRSS")
    if base is None:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn(*args)
    peak = _rss_kib("VmHWM")
    if peak is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (peak - base) * 1024


def _child(fn: Callable[..., Any], args: tuple[Any, ...], queue: Any) -> None:
    try:
        import torch as _torch  # noqa: F401  (the baseline includes torch)

        queue.put(("ok", _peak_rss_above_now(fn, args)))
    except BaseException as exc:  # report any failure to the parent
        queue.put(("error", f"{type(exc).__name__}: {exc}"))


def _in_process(fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
    """Peak RSS of ``fn(*args)`` in this process, above its resident set just before it."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand freed heap back so the baseline is low
    if not _reset_high_water_mark():
        raise RuntimeError("in-process peak memory needs Linux /proc/self/clear_refs")
    return _peak_rss_above_now(fn, args)


def peak_memory(
    fn: Callable[..., Any],
    device: Any = "cpu",
    args: tuple[Any, ...] = (),
    timeout: float = 600.0,
    in_process: bool = False,
) -> int:
    """Peak memory in bytes used by ``fn(*args)``.

    CUDA: resets the peak statistics of ``device``, runs ``fn`` here and returns
    ``torch.cuda.max_memory_allocated``. CPU: runs ``fn`` in a fresh *spawned* process and
    returns its peak RSS minus the RSS after ``import torch`` in that process (Linux resets
    the high-water mark through ``/proc/self/clear_refs``). On CPU ``fn`` and ``args`` must be
    picklable (a module-level function), and ``fn`` should build its own model.

    ``in_process=True`` (CPU) runs ``fn`` here instead and returns its peak RSS above this
    process's resident set just before it: no ~10-20 s child start-up, but memory the process
    freed earlier can be reused without raising RSS, so the figure is a lower bound. Meant for
    ``--quick`` smoke runs, whose memory claims are not verdicts.

    Raises:
        RuntimeError: If the child process fails or times out, or ``in_process`` is asked
            where the high-water mark cannot be reset.
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        fn(*args)
        torch.cuda.synchronize(dev)
        return int(torch.cuda.max_memory_allocated(dev))
    if in_process:
        return _in_process(fn, args)
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, args, queue))
    proc.start()
    try:
        status, value = queue.get(timeout=timeout)
    except Exception as exc:
        proc.kill()
        raise RuntimeError(f"peak_memory child produced no result ({exc!r})") from exc
    finally:
        proc.join(timeout=30)
    if status != "ok":
        raise RuntimeError(f"peak_memory child failed: {value}")
    return int(value)
