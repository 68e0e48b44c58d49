"""Offline multi-domain corpus (no downloads), a byte tokenizer, packing and a hash split.

Four domains, equal byte budgets, documents separated by EOS when packed:

* ``code``  -- Python standard-library source files (sorted, tests excluded), chunked at line
  boundaries into documents of at most 4 KB;
* ``prose`` -- docstrings of >= 200 characters extracted with ``ast`` from the same files, plus
  the ``pydoc_data`` topic texts;
* ``math``  -- generated arithmetic and algebra drills with worked steps;
* ``data``  -- generated CSV and JSON records (inventories, logs).

The standard library differs between Python versions, so the corpus carries a content hash:
compare numbers only within one environment.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import math
import random
import sysconfig
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

__all__ = [
    "DOMAINS",
    "ByteTokenizer",
    "OfflineCorpus",
    "build_offline_corpus",
    "pack_documents",
    "split_documents",
]

DOMAINS = ("code", "prose", "math", "data")
_MAX_DOC = 4096


class ByteTokenizer:
    """UTF-8 bytes ``0..255`` plus ``EOS = 256`` and ``PAD = 257`` (vocabulary 258)."""

    eos_id = 256
    pad_id = 257
    vocab_size = 258

    def encode(self, text: str, add_eos: bool = False) -> list[int]:
        """Bytes of ``text`` (and EOS)."""
        ids = list(text.encode("utf-8"))
        return [*ids, self.eos_id] if add_eos else ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; EOS and PAD are dropped, invalid UTF-8 replaced."""
        return bytes(int(i) for i in ids if int(i) < 256).decode("utf-8", errors="replace")


@dataclass
class OfflineCorpus:
    """Documents per domain and the SHA-256 of their content (domain order, then document)."""

    documents: dict[str, list[str]]
    content_hash: str
    bytes_per_domain: int
    seed: int
    sizes: dict[str, int] = field(default_factory=dict)


@functools.lru_cache(maxsize=1)
def _stdlib_files() -> tuple[Path, ...]:
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}
    files = []
    for p in sorted(root.rglob("*.py")):
        parts = p.relative_to(root).parts
        if skip & set(parts) or p.name.startswith("test_") or "tests" in p.name:
            continue
        files.append(p)
    return tuple(files)


def _chunk_lines(text: str, limit: int = _MAX_DOC) -> list[str]:
    docs: list[str] = []
    cur: list[str] = []
    size = 0
    for line in text.splitlines(keepends=True):
        n = len(line.encode("utf-8"))
        if n > limit:  # a single huge line: cut it
            line, n = line.encode("utf-8")[:limit].decode("utf-8", "ignore"), limit
        if size + n > limit and cur:
            docs.append("".join(cur))
            cur, size = [], 0
        cur.append(line)
        size += n
    if cur and "".join(cur).strip():
        docs.append("".join(cur))
    return docs


def _take(docs: Iterable[str], budget: int) -> list[str]:
    out, used = [], 0
    for d in docs:
        if used >= budget:
            break
        d = (
            d.encode("utf-8")[: budget - used].decode("utf-8", "ignore")
            if used + len(d.encode("utf-8")) > budget
            else d
        )
        out.append(d)
        used += len(d.encode("utf-8"))
    return out


def _code_docs() -> Iterator[str]:
    for p in _stdlib_files():
        try:
            text = p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        yield from _chunk_lines(text)


def _prose_docs() -> Iterator[str]:
    try:
        from pydoc_data.topics import topics

        for key in sorted(topics):
            if len(topics[key]) >= 200:
                yield from _chunk_lines(topics[key])
    except ImportError:  # pragma: no cover - some distributions strip pydoc_data
        pass
    for p in _stdlib_files():
        try:
            tree = ast.parse(p.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= 200:
                    yield from _chunk_lines(doc)


def _math_doc(r: random.Random) -> str:
    lines = []
    for _ in range(r.randint(4, 10)):
        kind = r.choice(["add", "sub", "mul", "div", "frac", "lin"])
        a, b = r.randint(10, 99999), r.randint(10, 9999)
        if kind == "add":
            lines.append(f"Compute {a} + {b}.\nAnswer: {a} + {b} = {a + b}.")
        elif kind == "sub":
            lines.append(f"Compute {a} - {b}.\nAnswer: {a} - {b} = {a - b}.")
        elif kind == "mul":
            b = r.randint(2, 999)
            parts = [
                f"{a} x {int(c) * 10**i} = {a * int(c) * 10**i}"
                for i, c in enumerate(reversed(str(b)))
            ]
            lines.append(f"Compute {a} x {b}.\nSteps: " + "; ".join(parts) + f".\nAnswer: {a * b}.")
        elif kind == "div":
            b = r.randint(2, 99)
            q, rem = divmod(a, b)
            lines.append(
                f"Divide {a} by {b}.\n{b} x {q} = {b * q}, remainder {a} - {b * q} = "
                f"{rem}.\nAnswer: {q} remainder {rem}."
            )
        elif kind == "frac":
            p, q, s, t = (r.randint(1, 12) for _ in range(4))
            num, den = p * t + s * q, q * t
            lines.append(
                f"Add {p}/{q} + {s}/{t}.\nCommon denominator {den}: {p * t}/{den} + "
                f"{s * q}/{den} = {num}/{den}."
            )
        else:
            x, m, c = r.randint(-50, 50), r.randint(2, 19), r.randint(-99, 99)
            lines.append(
                f"Solve {m}x + {c} = {m * x + c}.\nSubtract {c}: {m}x = {m * x}. "
                f"Divide by {m}: x = {x}."
            )
    return "\n\n".join(lines) + "\n"


_ITEMS = ["bolt", "washer", "gear", "spring", "valve", "cable", "sensor", "relay", "fuse", "pump"]
_LEVELS = ["INFO", "WARN", "ERROR", "DEBUG"]


def _data_doc(r: random.Random) -> str:
    n = r.randint(8, 30)
    if r.random() < 0.5:
        if r.random() < 0.5:
            rows = ["sku,item,qty,price,warehouse"]
            rows += [
                f"{r.randint(10000, 99999)},{r.choice(_ITEMS)},{r.randint(0, 500)},"
                f"{r.uniform(0.1, 99):.2f},W{r.randint(1, 9)}"
                for _ in range(n)
            ]
        else:
            rows = ["timestamp,level,service,latency_ms"]
            rows += [
                f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:"
                f"{r.randint(0, 59):02d}:{r.randint(0, 59):02d},{r.choice(_LEVELS)},"
                f"svc-{r.randint(1, 20)},{r.randint(1, 2000)}"
                for _ in range(n)
            ]
        return "\n".join(rows) + "\n"
    recs = [
        {
            "id": r.randint(1, 10**6),
            "item": r.choice(_ITEMS),
            "qty": r.randint(0, 500),
            "price": round(r.uniform(0.1, 99), 2),
            "tags": r.sample(_LEVELS, 2),
        }
        for _ in range(n)
    ]
    return json.dumps(recs, indent=1) + "\n"


def _generated(make: Callable[[random.Random], str], seed: int, budget: int) -> list[str]:
    r = random.Random(seed)
    out, used = [], 0
    while used < budget:
        d = make(r)
        out.append(d)
        used += len(d.encode("utf-8"))
    return _take(out, budget)


def build_offline_corpus(seed: int = 0, bytes_per_domain: int = 2_000_000) -> OfflineCorpus:
    """Build the four-domain corpus with ``bytes_per_domain`` UTF-8 bytes per domain.

    Raises:
        ValueError: If ``bytes_per_domain`` is below 4096.
    """
    if bytes_per_domain < 4096:
        raise ValueError(f"bytes_per_domain must be >= 4096, got {bytes_per_domain}")
    docs = {
        "code": _take(_code_docs(), bytes_per_domain),
        "prose": _take(_prose_docs(), bytes_per_domain),
        "math": _generated(_math_doc, seed * 2 + 1, bytes_per_domain),
        "data": _generated(_data_doc, seed * 2 + 2, bytes_per_domain),
    }
    h = hashlib.sha256()
    for dom in DOMAINS:
        for d in docs[dom]:
            h.update(dom.encode() + b"\0" + d.encode("utf-8") + b"\0")
    sizes = {dom: sum(len(d.encode("utf-8")) for d in docs[dom]) for dom in DOMAINS}
    return OfflineCorpus(docs, h.hexdigest(), bytes_per_domain, seed, sizes)


def split_documents(
    documents: Sequence[str], fractions: tuple[float, float, float] = (0.9, 0.05, 0.05)
) -> tuple[list[str], list[str], list[str]]:
    """Deterministic train / validation / test split by a hash of each document's text.

    Raises:
        ValueError: If ``fractions`` are not three non-negative numbers summing to 1.
    """
    if (
        len(fractions) != 3
        or not all(math.isfinite(f) for f in fractions)
        or min(fractions) < 0
        or abs(sum(fractions) - 1.0) > 1e-9
    ):
        raise ValueError(f"fractions must be 3 non-negative numbers summing to 1, got {fractions}")
    cut1, cut2 = fractions[0], fractions[0] + fractions[1]
    parts: tuple[list[str], list[str], list[str]] = ([], [], [])
    for d in documents:
        u = int.from_bytes(hashlib.sha256(d.encode("utf-8")).digest()[:8], "big") / 2**64
        parts[0 if u < cut1 else 1 if u < cut2 else 2].append(d)
    return parts


def pack_documents(
    documents: Sequence[str],
    seq_len: int,
    tokenizer: ByteTokenizer | None = None,
    drop_last: bool = True,
) -> torch.Tensor:
    """Concatenate documents (each followed by EOS) and cut the stream into rows of ``seq_len``.

    With ``drop_last=False`` the last row is padded with PAD. Returns a ``(N, seq_len)`` long
    tensor. Documents are cut at row boundaries (document ids stay contiguous per row).

    Raises:
        TypeError: If a document is not a string.
        ValueError: If ``seq_len < 2`` or there is nothing to pack.
    """
    if seq_len < 2:
        raise ValueError(f"seq_len must be >= 2, got {seq_len}")
    tok = tokenizer or ByteTokenizer()
    stream: list[int] = []
    bad = next((d for d in documents if not isinstance(d, str)), None)
    if bad is not None:
        raise TypeError(f"documents must be strings, got a {type(bad).__name__}")
    for d in documents:
        stream.extend(tok.encode(d, add_eos=True))
    n = len(stream) // seq_len if drop_last else -(-len(stream) // seq_len)
    if n == 0:
        raise ValueError(f"{len(stream)} tokens do not fill one row of seq_len={seq_len}")
    stream = stream[: n * seq_len] + [tok.pad_id] * max(0, n * seq_len - len(stream))
    return torch.tensor(stream, dtype=torch.long).view(n, seq_len)
