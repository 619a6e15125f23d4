"""Per-file stream positions, and complete lines cut from arriving bytes (an incomplete last line carried over)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from console.follow.events import FollowEvent, LinesEvent
from console.lines import decode_line

MAX_LINE_BYTES = 1 << 20
"""A longer line is kept as its first and its last half of this (the bytes between are counted):
an error written at the end of a 10 MB line still reaches triage."""


@dataclass
class _StreamState:
    kind: str = "log"
    offset: int = 0  # bytes before it were delivered (as lines or as a triaged backlog)
    lines: int | None = 0  # complete lines before offset (None: not known yet)
    ino: int | None = None
    partial: bytearray = field(default_factory=bytearray)  # received after offset, no newline yet
    dropped: int = 0  # bytes of an overlong partial line between its kept head and tail
    announced: bool = False  # a FileEvent was emitted (not repeated after an agent restart)
    seen: list[float] | None = None  # result files: [size, mtime] last reported

    @property
    def expected(self) -> int:
        return self.offset + len(self.partial) + self.dropped


@dataclass
class _WatchState:
    dir: str
    results: str | None
    files: dict[str, _StreamState] = field(default_factory=dict)
    committed: dict[str, tuple[int, int | None]] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    last_persist: float = 0.0


_CLOSED = object()

OffsetsCallback: TypeAlias = Callable[[str, dict[str, int]], None]
EventCallback: TypeAlias = Callable[[FollowEvent], None]


def _trim(line: str) -> str:
    """A line without its CR (CRLF endings); a longer one than MAX_LINE_BYTES characters as its
    head and tail."""
    if line.endswith("\r"):
        line = line[:-1]
    if len(line) <= MAX_LINE_BYTES:
        return line
    head = MAX_LINE_BYTES // 2
    omitted = len(line) - MAX_LINE_BYTES
    return f"{line[:head]} … [+{omitted} chars] … {line[-(MAX_LINE_BYTES - head) :]}"


def _keep(fs: _StreamState, piece: bytes) -> None:
    """Add bytes of the line being received: past MAX_LINE_BYTES the partial is its head and its
    last bytes, and ``dropped`` counts those in between (``expected`` stays exact)."""
    fs.partial += piece
    over = len(fs.partial) - MAX_LINE_BYTES
    if over > 0:
        head = MAX_LINE_BYTES // 2
        del fs.partial[head : head + over]
        fs.dropped += over


def _partial_text(fs: _StreamState) -> str:
    """The line received so far, as text (head and tail of an overlong one)."""
    if not fs.dropped:
        return decode_line(bytes(fs.partial))
    half = MAX_LINE_BYTES // 2
    head = bytes(fs.partial[:half]).decode("utf-8", errors="replace")
    tail = decode_line(bytes(fs.partial[half:]))
    return f"{head} … [+{fs.dropped} bytes] … {tail}"


def _cut(block: bytes) -> list[str]:
    """The lines of a block of complete lines (it ends with a newline)."""
    # One decode for the whole block: a newline is never part of a UTF-8 sequence, so this is
    # the same as decoding line by line.
    text = block[:-1].decode("utf-8", errors="replace")
    lines = text.split("\n")
    if "\r" in text or (len(block) > MAX_LINE_BYTES and max(map(len, lines)) > MAX_LINE_BYTES):
        lines = [_trim(line) for line in lines]
    return lines


def take_lines(directory: str, name: str, fs: _StreamState, data: bytes) -> LinesEvent | None:
    """Add bytes received after ``fs.expected`` and cut out the complete lines."""
    if fs.lines is None:
        fs.lines = 0
    last = data.rfind(b"\n")
    if last < 0:
        _keep(fs, data)
        return LinesEvent(directory, name, fs.lines + 1, [], fs.offset, _partial_text(fs))
    first = fs.lines + 1
    lines: list[str] = []
    start = 0
    if fs.partial or fs.dropped:
        nl = data.find(b"\n")
        if fs.dropped or len(fs.partial) + nl > MAX_LINE_BYTES:
            # The end of an overlong line: its head and tail, counted whole.
            _keep(fs, data[:nl])
            lines.append(_partial_text(fs))
            fs.offset += len(fs.partial) + fs.dropped + 1
            fs.partial = bytearray()
            fs.dropped = 0
            start = nl + 1
        else:
            data = bytes(fs.partial) + data
            last += len(fs.partial)
            fs.partial = bytearray()
    if start <= last:
        lines += _cut(data[start : last + 1])
        fs.offset += last + 1 - start
    fs.lines += len(lines)
    rest = data[last + 1 :]
    fs.partial = bytearray()
    fs.dropped = 0
    _keep(fs, rest)
    return LinesEvent(directory, name, first, lines, fs.offset, _partial_text(fs))
