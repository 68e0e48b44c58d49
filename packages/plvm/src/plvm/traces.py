"""Process traces: the event schema, :class:`TraceSet`, truncation and featurisation.

An event is one action of a person in a task, recorded as the row
``(step, zone, progress_before, progress_after, switched, distance, dt)``
(:data:`EVENT_COLUMNS`); extra numeric columns may follow and become extra features.
``featurize`` maps each event to the task-agnostic process features :data:`FEATURES`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from methodkit.checks import check_int
from plvm._validation import check_finite, check_fraction, check_progress

EVENT_COLUMNS = (
    "step",
    "zone",
    "progress_before",
    "progress_after",
    "switched",
    "distance",
    "dt",
)
STEP, ZONE, PBEFORE, PAFTER, SWITCHED, DIST, DT = range(7)

#: The per-event process features phi(e) (in this order, then any extra columns).
FEATURES = (
    "switched",  # entered a new zone with this event (0/1)
    "left_unfinished",  # the switch left the previous zone unfinished (0/1)
    "progress",  # zone progress after the event
    "gain",  # progress gain of the event
    "progress_at_leave",  # progress of the zone left (0 if no switch)
    "log_dt",  # log(1e-3 + inter-event time)
    "distance",  # move distance d normalised as d / (1 + d)
)
N_FEATURES = len(FEATURES)


@dataclass
class TraceSet:
    """Time-ordered event logs of persons in tasks.

    Attributes:
        person_ids: One id per person, shape ``(N,)``.
        tasks: Task names.
        events: ``{task: [array (L_i, 7 + n_extra) or None, ...]}`` aligned with
            ``person_ids``; ``None`` (or zero rows) means the person has no trace in that task.
        extra_columns: Names of the extra event columns (after :data:`EVENT_COLUMNS`).
    """

    person_ids: np.ndarray
    tasks: list[str]
    events: dict[str, list[np.ndarray | None]]
    extra_columns: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        self.person_ids = np.asarray(self.person_ids)
        if self.person_ids.ndim != 1:
            raise ValueError(
                f"person_ids must be 1-D (one id per person), got shape {self.person_ids.shape}"
            )
        self.tasks = list(self.tasks)
        if not isinstance(self.events, Mapping):
            raise TypeError(
                "events must be a dict {task: [trace per person]}, got "
                f"{type(self.events).__name__}"
            )
        n = len(self.person_ids)
        width = len(EVENT_COLUMNS) + len(self.extra_columns)
        for t in self.tasks:
            if t not in self.events:
                raise ValueError(f"events has no entry for task {t!r}")
            if len(self.events[t]) != n:
                raise ValueError(
                    f"events[{t!r}] has {len(self.events[t])} traces but there are {n} persons"
                )
            for i, tr in enumerate(self.events[t]):
                if tr is not None and len(tr):
                    check_trace(tr, width, f"events[{t!r}][{i}]")

    def __len__(self) -> int:
        return len(self.person_ids)

    @property
    def shape(self) -> tuple[int]:
        """``(n_persons,)``: lets scikit-learn count and index persons like array rows."""
        return (len(self.person_ids),)

    def __getitem__(self, key: Any) -> TraceSet:
        """The persons ``key`` as a TraceSet: an int, a slice, integer indices or a boolean mask.

        This is how scikit-learn's splitters and ``cross_val_score`` take folds of persons
        (``_safe_indexing`` calls ``traces[indices, ...]``). An int keeps a one-person TraceSet.
        Select tasks with :meth:`select_tasks`.
        """
        if isinstance(key, tuple):  # numpy-style row indexing: traces[rows, ...]
            if len(key) == 2 and key[1] is Ellipsis:
                key = key[0]
            else:
                raise TypeError(
                    f"a TraceSet is indexed by persons only (traces[rows]), got the key {key!r}"
                )
        if isinstance(key, str):
            raise TypeError(
                f"a TraceSet is indexed by persons, got the string {key!r}; use "
                "select_tasks([...]) to choose tasks"
            )
        if isinstance(key, slice):
            return self.subset(np.arange(len(self))[key])
        if isinstance(key, int | np.integer) and not isinstance(key, bool):
            return self.subset([int(key)])
        return self.subset(key)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dataframe(
        cls,
        df: Any,
        person_col: str = "person",
        task_col: str = "task",
        time_col: str = "time",
        zone_col: str = "zone",
        progress_col: str = "progress",
        extra_cols: Sequence[str] | None = None,
        zone_positions: Mapping[Any, float] | None = None,
    ) -> TraceSet:
        """Build a TraceSet from a long DataFrame with one row per event.

        Rows must be in time order within each (person, task) trace. ``progress_col`` is the
        zone's progress after the event in ``[0, 1]``. Move distance is ``|pos(i) - pos(j)|``
        with ``zone_positions`` (default: the zone id itself if numeric, else 1 per switch).

        Raises:
            TypeError: If ``df`` is not a DataFrame or a time, progress or extra column is
                not numeric.
            ValueError: On an empty DataFrame, missing columns (all listed), missing ids or
                zones, NaN/inf times or extra values, timestamps that decrease within a trace,
                or progress outside ``[0, 1]``.
        """
        extra = list(extra_cols or [])
        required = [person_col, task_col, time_col, zone_col, progress_col, *extra]
        check_frame(df, required)
        for c in (time_col, *extra):
            numeric_column(df, c)
        numeric_column(df, progress_col, finite=False)  # checked per trace against [0, 1]
        persons = list(dict.fromkeys(df[person_col].tolist()))
        tasks = [str(t) for t in dict.fromkeys(df[task_col].tolist())]
        index = {p: i for i, p in enumerate(persons)}
        events: dict[str, list[np.ndarray | None]] = {t: [None] * len(persons) for t in tasks}
        for (p, t), g in df.groupby([person_col, task_col], sort=False):
            time = g[time_col].to_numpy(dtype=np.float64)
            if np.any(np.diff(time) < 0):
                raise ValueError(
                    f"timestamps in {time_col!r} are not monotone within the trace of person "
                    f"{p!r} in task {t!r}"
                )
            prog = g[progress_col].to_numpy(dtype=np.float64)
            check_progress(prog, f"{progress_col!r} (person {p!r}, task {t!r})")
            zones = g[zone_col].tolist()
            x = np.zeros((len(g), 7 + len(extra)))
            last: dict[Any, float] = {}
            for k, zn in enumerate(zones):
                x[k, STEP] = k
                x[k, PBEFORE] = last.get(zn, 0.0)
                x[k, PAFTER] = prog[k]
                last[zn] = prog[k]
                if k and zn != zones[k - 1]:
                    x[k, SWITCHED] = 1.0
                    x[k, DIST] = _distance(zones[k - 1], zn, zone_positions)
                x[k, DT] = time[k] - time[k - 1] if k else 0.0
            x[:, ZONE] = _zone_codes(zones)
            for j, c in enumerate(extra):
                x[:, 7 + j] = g[c].to_numpy(dtype=np.float64)
            events[str(t)][index[p]] = x
        return cls(np.asarray(persons), tasks, events, tuple(extra))

    # ------------------------------------------------------------------ views
    def subset(self, idx: Sequence[int] | np.ndarray) -> TraceSet:
        """The persons ``idx`` (indices or a boolean mask), same tasks.

        Raises:
            TypeError: If ``idx`` is neither integers nor booleans.
            IndexError: If an index is out of range or a mask has the wrong length.
        """
        key = np.asarray(idx)
        n = len(self)
        if key.dtype == bool:
            if key.shape != (n,):
                raise IndexError(
                    f"a boolean mask of persons must have shape ({n},), got {key.shape}"
                )
            rows = np.flatnonzero(key)
        elif key.size == 0:
            rows = np.zeros(0, dtype=int)
        elif key.dtype.kind in "iu":
            rows = key.ravel().astype(np.int64)
            if key.ndim > 1:
                raise IndexError(f"person indices must be 1-D, got shape {key.shape}")
            bad = (rows < -n) | (rows >= n)
            if bad.any():
                raise IndexError(
                    f"person index {int(rows[bad][0])} is out of range for {n} persons"
                )
            rows = np.where(rows < 0, rows + n, rows)
        else:
            raise TypeError(
                f"persons are selected by integer indices or a boolean mask, got dtype {key.dtype}"
            )
        ev = {t: [self.events[t][i] for i in rows] for t in self.tasks}
        return TraceSet(self.person_ids[rows], self.tasks, ev, self.extra_columns)

    def select_tasks(self, tasks: Sequence[str]) -> TraceSet:
        """Only ``tasks`` (unknown names raise)."""
        self.check_tasks(tasks)
        return TraceSet(
            self.person_ids, list(tasks), {t: self.events[t] for t in tasks}, self.extra_columns
        )

    def check_tasks(self, tasks: Sequence[str]) -> None:
        """Raise a ValueError naming any task not in this TraceSet."""
        unknown = [t for t in tasks if t not in self.tasks]
        if unknown:
            raise ValueError(f"unknown task(s) {unknown}; this TraceSet has {self.tasks}")

    def present(self, task: str) -> np.ndarray:
        """Boolean ``(N,)``: who has at least one event in ``task``."""
        self.check_tasks([task])
        return np.array([tr is not None and len(tr) > 0 for tr in self.events[task]])

    def lengths(self, task: str) -> np.ndarray:
        """Events per person in ``task`` (0 where missing)."""
        return np.array([0 if tr is None else len(tr) for tr in self.events[task]])

    def truncate(
        self,
        frac: float | None = None,
        seconds: float | None = None,
        n_events: int | None = None,
    ) -> TraceSet:
        """Keep the first part of every trace: exactly one of the three limits.

        ``frac`` keeps the first ``max(2, ceil(frac * L))`` events (at most ``L``);
        ``seconds`` the events up to that elapsed time (at least the first event);
        ``n_events`` the first ``n_events``.

        Raises:
            ValueError: If not exactly one limit is given, ``frac`` is not in ``(0, 1]``,
                ``seconds`` is not positive or ``n_events < 1``.
        """
        given = [v is not None for v in (frac, seconds, n_events)]
        if sum(given) != 1:
            raise ValueError("truncate takes exactly one of frac=, seconds=, n_events=")
        if frac is not None:
            check_fraction(frac, "frac")
        if seconds is not None and not seconds > 0:
            raise ValueError(f"seconds must be > 0, got {seconds}")
        if n_events is not None and (int(n_events) != n_events or n_events < 1):
            raise ValueError(f"n_events must be an integer >= 1, got {n_events}")

        def keep(tr: np.ndarray | None) -> np.ndarray | None:
            if tr is None or len(tr) == 0:
                return tr
            L = len(tr)
            if frac is not None:
                k = min(L, max(2, math.ceil(frac * L - 1e-9)))
            elif seconds is not None:
                k = max(1, int(np.searchsorted(np.cumsum(tr[:, DT]), seconds, side="right")))
            else:
                assert n_events is not None  # exactly one of the three is given (checked above)
                k = min(L, int(n_events))
            return tr[:k]

        ev = {t: [keep(tr) for tr in self.events[t]] for t in self.tasks}
        return TraceSet(self.person_ids, self.tasks, ev, self.extra_columns)

    def featurize(self, task: str, max_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Padded process features of ``task``: ``X (N, L, F)`` float32 and ``mask (N, L)``.

        Padding is zero and masked out; a trace longer than ``max_len`` keeps its first
        ``max_len`` events. ``F = 7 +`` the number of extra columns (see :data:`FEATURES`).
        """
        self.check_tasks([task])
        if max_len is not None:
            check_int("max_len", max_len, low=1)
        n_extra = len(self.extra_columns)
        lengths = self.lengths(task)
        L = int(lengths.max()) if len(lengths) else 0
        if max_len is not None:
            L = min(L, int(max_len))
        L = max(L, 1)
        X = np.zeros((len(self), L, N_FEATURES + n_extra), dtype=np.float32)
        mask = np.zeros((len(self), L), dtype=bool)
        for i, tr in enumerate(self.events[task]):
            if tr is None or len(tr) == 0:
                continue
            tr = tr[:L]
            X[i, : len(tr)] = event_features(tr)
            mask[i, : len(tr)] = True
        return X, mask


def check_frame(df: Any, required: Sequence[str]) -> None:
    """``df`` must be a non-empty DataFrame with ``required`` columns and no missing ids."""
    if not (hasattr(df, "columns") and hasattr(df, "groupby")):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"DataFrame is missing required columns: {missing}")
    if len(df) == 0:
        raise ValueError("df has no rows: a TraceSet needs at least one event")
    for c in [*required[:2], *required[3:4]]:  # person, task and zone ids
        n_missing = int(df[c].isna().sum())
        if n_missing:
            raise ValueError(f"column {c!r} has {n_missing} missing value(s) (NaN/None)")


def numeric_column(df: Any, col: str, finite: bool = True) -> np.ndarray:
    """Column ``col`` as finite float64 (TypeError if not numeric, ValueError on NaN/inf)."""
    try:
        x = df[col].to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"column {col!r} must be numeric, got dtype {df[col].dtype}") from e
    if finite:
        check_finite(x, f"column {col!r}")
    return x


def check_trace(tr: Any, width: int, name: str) -> None:
    """One trace: a numeric ``(L, width)`` array, finite, progress in ``[0, 1]``."""
    a = np.asarray(tr)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric array, got dtype {a.dtype}")
    if a.ndim != 2 or a.shape[1] != width:
        raise ValueError(
            f"{name} must have shape (L, {width}) (the columns {EVENT_COLUMNS} plus the extra "
            f"columns), got {a.shape}"
        )
    check_finite(a, name)
    check_progress(a[:, PBEFORE], f"progress_before of {name}")
    check_progress(a[:, PAFTER], f"progress_after of {name}")


def event_features(tr: np.ndarray) -> np.ndarray:
    """phi(e) for every event of one trace ``(L, 7 + n_extra)`` -> ``(L, 7 + n_extra)``."""
    sw = tr[:, SWITCHED]
    prev_after = np.concatenate([[0.0], tr[:-1, PAFTER]])
    at_leave = np.where(sw > 0, prev_after, 0.0)
    out = np.empty((len(tr), N_FEATURES + tr.shape[1] - 7))
    out[:, 0] = sw
    out[:, 1] = (sw > 0) & (at_leave < 1.0)
    out[:, 2] = tr[:, PAFTER]
    out[:, 3] = tr[:, PAFTER] - tr[:, PBEFORE]
    out[:, 4] = at_leave
    out[:, 5] = np.log(1e-3 + tr[:, DT])
    out[:, 6] = tr[:, DIST] / (1.0 + tr[:, DIST])
    out[:, N_FEATURES:] = tr[:, 7:]
    return out


def process_statistics(traces: TraceSet, task: str) -> np.ndarray:
    """The four reference statistics per person (NaN rows where the task is missing).

    Columns: switch rate, mean progress of the zone at leave events (1 if none), fraction of
    leaves with the zone unfinished (0 if none), mean move distance of switches (0 if none).
    """
    out = np.full((len(traces), 4), np.nan)
    for i, tr in enumerate(traces.events[task]):
        if tr is None or len(tr) == 0:
            continue
        f = event_features(tr)
        leaves = f[:, 0] > 0
        out[i, 0] = f[:, 0].mean()
        out[i, 1] = f[leaves, 4].mean() if leaves.any() else 1.0
        out[i, 2] = f[leaves, 1].mean() if leaves.any() else 0.0
        out[i, 3] = tr[leaves, DIST].mean() if leaves.any() else 0.0
    return out


def outcome_summaries(traces: TraceSet, task: str) -> np.ndarray:
    """Aggregate outcomes per person: actions, total time, completion step, total progress.

    Completion step is the step of the last event if every visited zone is finished, else
    the number of events (the trace ran to its horizon). NaN rows where the task is missing.
    """
    out = np.full((len(traces), 4), np.nan)
    for i, tr in enumerate(traces.events[task]):
        if tr is None or len(tr) == 0:
            continue
        final: dict[float, float] = {}
        for zn, p in zip(tr[:, ZONE], tr[:, PAFTER], strict=True):
            final[zn] = p
        total = float(sum(final.values()))
        done = all(v >= 1.0 for v in final.values())
        out[i] = [len(tr), tr[:, DT].sum(), tr[-1, STEP] if done else len(tr), total]
    return out


def _zone_codes(zones: list[Any]) -> list[float]:
    """Numeric zone ids as they are; other ids numbered in order of first visit."""
    try:
        return [float(zn) for zn in zones]
    except (TypeError, ValueError):
        order = {zn: float(j) for j, zn in enumerate(dict.fromkeys(zones))}
        return [order[zn] for zn in zones]


def _distance(a: Any, b: Any, pos: Mapping[Any, float] | None) -> float:
    if pos is not None:
        return abs(float(pos[a]) - float(pos[b]))
    try:
        return abs(float(a) - float(b))
    except (TypeError, ValueError):
        return 1.0
