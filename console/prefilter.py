"""Which lines of a chunk of log bytes need triage's full treatment.

A :class:`LineFilter` is built from literals (the catalog's keywords, a file's stage keywords,
what opens a traceback) and gives the start offsets of the lines of a chunk that hold one of
them (ASCII letters in any case), that hold any byte other than printable ASCII and the newline
(control characters, tabs, ``\\r``, escape sequences, any non-ASCII text: cleaning or
lowercasing may change those), or that are long (every line of 2 × :data:`LONG_LINE` bytes or
more: cut and marked when read). Every other line is printable ASCII text, short, with none of the literals:
triage only counts it and keeps it as the context that dates a later finding.

Hyperscan (PyPI ``hyperscan``) finds the literals when it is installed; without it the regex
prefilter of :mod:`console.agent` runs over the lowercased chunk.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import os
import platform
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from console.agent import keyword_gates

__all__ = ["LONG_LINE", "LineFilter", "engine"]

LONG_LINE: Final[int] = 2048
"""One look for a newline every LONG_LINE bytes: a line holding a run of LONG_LINE + 1 bytes from
such a point on is taken, so every line of 2 × LONG_LINE bytes or more is."""

_SPECIAL: Final = re.compile(rb"[^\n\x20-\x7e]")
_PLAIN: Final = bytes(range(0x20, 0x7F)) + b"\n"

_hs: Any
try:  # an optional engine
    import hyperscan as _hs
except ImportError:  # pragma: no cover - depends on what is installed
    _hs = None


def engine() -> str:
    """The literal search in use: ``hyperscan`` or ``re``."""
    return "hyperscan" if _hs is not None else "re"


class LineFilter:
    """The lines of a chunk that need the full treatment (see the module's doc)."""

    def __init__(
        self, literals: Iterable[str], *, line_starts: Iterable[bytes] = (), use_hyperscan: bool = True
    ) -> None:
        words = {w.lower() for w in literals if w}
        # A non-ASCII literal can only be in a line holding non-ASCII bytes: taken anyway.
        words = {w for w in words if w.isascii()}
        self.words: tuple[str, ...] = _minimal(words)
        # Regexes that take a line when it starts with them (ASCII, matched in any case by the fallback).
        self.line_starts: tuple[bytes, ...] = tuple(line_starts)
        self._dbs: tuple[Any, ...] = ()
        self._lock = threading.Lock()  # a database's scratch space serves one scan at a time
        self._gates: list[re.Pattern[bytes]] = []
        if use_hyperscan and _hs is not None:
            self._dbs = _compile_hyperscan(self.words, self.line_starts)
        else:
            self._gates = keyword_gates(list(self.words))
            self._gates += [re.compile(rb"(?m)^(?:" + source + rb")", re.IGNORECASE) for source in self.line_starts]

    @property
    def engine(self) -> str:
        return "hyperscan" if self._dbs else "re"

    def lines(self, data: bytes, start: int = 0, stop: int | None = None) -> list[int]:
        """Sorted start offsets of the lines to take among the whole lines of ``data[start:stop]``
        (``start`` is a line's start, ``stop`` a line's end past its newline, or the end)."""
        stop = len(data) if stop is None else stop
        inside: list[int] = []  # an offset inside (or at the end of) each line to take
        if self._dbs:
            add = inside.append

            def on_match(_id: int, _start: int, end: int, _flags: int, _context: object) -> None:
                add(end - 1)

            with self._lock:
                for db in self._dbs:
                    db.scan(data, match_event_handler=on_match)
        else:
            low = data.lower()
            for gate in self._gates:
                _find_lines(gate, low, start, inside)
            if not data.isascii() or data.translate(None, _PLAIN):
                _find_lines(_SPECIAL, data, start, inside)
        find = data.find
        for pos in range(start, stop, LONG_LINE):
            if pos + LONG_LINE < stop and find(b"\n", pos, pos + LONG_LINE + 1) < 0:
                inside.append(pos)
        if stop > start and data[stop - 1] != 0x0A:
            inside.append(stop - 1)  # a last line without its newline: taken whole
        starts: list[int] = []
        line_end = start - 1  # the newline ending the last line taken
        rfind = data.rfind
        for pos in sorted(inside):
            if pos <= line_end or pos >= stop:
                continue
            first = max(start, rfind(b"\n", 0, pos) + 1)
            starts.append(first)
            end = find(b"\n", pos, stop)
            line_end = stop if end < 0 else end
        return starts


def _find_lines(pattern: re.Pattern[bytes], data: bytes, pos: int, inside: list[int]) -> None:
    """An offset in each line from ``pos`` on where ``pattern`` is found, one search per line at most."""
    search = pattern.search
    find = data.find
    while True:
        m = search(data, pos)
        if m is None:
            return
        inside.append(m.start())
        end = find(b"\n", m.start())
        if end < 0:
            return
        pos = end + 1


def _minimal(words: set[str]) -> tuple[str, ...]:
    """The words that contain no other one (a literal that contains another adds nothing), sorted:
    each word is looked for once in all of them, joined."""
    ordered = sorted(w for w in words if "\n" not in w)  # no line holds a newline
    text = "\n".join(ordered)
    starts = []
    at = 0
    for word in ordered:
        starts.append(at)
        at += len(word) + 1
    redundant: set[int] = set()
    for word in ordered:
        pos = text.find(word)
        while pos >= 0:
            holder = bisect.bisect_right(starts, pos) - 1
            if ordered[holder] != word:
                redundant.add(holder)
            pos = text.find(word, pos + 1)
    return tuple(word for i, word in enumerate(ordered) if i not in redundant)


_CACHE_MAGIC: Final = b"srt-console prefilter 1\n"


_CACHE_FILES: Final = 16  # databases kept at most (an operator's catalog edits each make one)


def _cache_path(words: tuple[str, ...], line_starts: tuple[bytes, ...]) -> Path | None:
    """Where the compiled databases of these literals are kept: in the user's cache folder,
    named by what they were built from (and the hyperscan release that built them); None
    without a home."""
    assert _hs is not None
    # A database is built for one CPU: a home shared by hosts of another kind gets its own file.
    built_by = (getattr(_hs, "__version__", ""), platform.machine())
    digest = hashlib.sha256(repr((built_by, words, line_starts)).encode()).hexdigest()[:32]
    try:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except RuntimeError:  # no $HOME and no passwd entry
        return None
    return Path(base) / "srt-console" / "prefilter" / f"{digest}.hsdb"


def _load_databases(path: Path) -> tuple[Any, ...] | None:
    """The databases saved at ``path``, or None (missing, truncated, from another build)."""
    assert _hs is not None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data.startswith(_CACHE_MAGIC):
        return None
    pos = len(_CACHE_MAGIC)
    databases = []
    try:
        while pos < len(data):
            size = int.from_bytes(data[pos : pos + 8], "big")
            blob = data[pos + 8 : pos + 8 + size]
            if size == 0 or len(blob) != size:
                return None
            db = _hs.loadb(blob, _hs.HS_MODE_BLOCK)
            db.scratch = _hs.Scratch(db)
            databases.append(db)
            pos += 8 + size
    except Exception:  # whatever a damaged file (or another release's) makes hyperscan say: build again
        return None
    return tuple(databases) or None


def _save_databases(path: Path, databases: tuple[Any, ...]) -> None:
    """Keep the databases for the next run; a cache that cannot be written is only slower."""
    assert _hs is not None
    data = _CACHE_MAGIC + b"".join(len(b).to_bytes(8, "big") + b for b in (_hs.dumpb(db) for db in databases))
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)  # whole or not at all, for a reader at the same time
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return
    with contextlib.suppress(OSError):  # the oldest go
        kept = sorted(path.parent.glob("*.hsdb"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in kept[_CACHE_FILES:]:
            old.unlink()


def _compile_hyperscan(words: tuple[str, ...], line_starts: tuple[bytes, ...]) -> tuple[Any, ...]:
    """The databases for these literals: read from the cache when an earlier run built them
    (building takes longer than scanning 20 MB), else built and kept there."""
    path = _cache_path(words, line_starts)
    databases = _load_databases(path) if path is not None else None
    if databases is None:
        databases = _build_hyperscan(words, line_starts)
        if path is not None:
            _save_databases(path, databases)
    return databases


def _build_hyperscan(words: tuple[str, ...], line_starts: tuple[bytes, ...]) -> tuple[Any, ...]:
    """One database for the literals (and the line starts), one for the bytes that are not plain
    text: built apart, they compile in a fraction of the time they take together."""
    assert _hs is not None
    databases = []
    literals = [(re.escape(w).encode("ascii"), _hs.HS_FLAG_CASELESS) for w in words]
    starts = [(b"^(?:" + source + b")", _hs.HS_FLAG_MULTILINE) for source in line_starts]
    for group in (literals + starts, [(rb"[^\n\x20-\x7e]", 0)]):
        if not group:
            continue
        db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
        db.compile(
            expressions=[expression for expression, _ in group],
            ids=list(range(len(group))),
            elements=len(group),
            flags=[flag for _, flag in group],
        )
        databases.append(db)
    return tuple(databases)
