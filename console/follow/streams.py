"""Per-file stream positions, and complete lines cut from arriving bytes (an incomplete last line carried over)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeAlias

from console.follow.events import FollowEvent, LinesEvent
from console.lines import decode_line

MAX_LINE_BYTES = 1 << 20  # a longer line is cut here (the rest of it is skipped, its offset counted)


@dataclass
class _StreamState:
    kind: str = "log"
    offset: int = 0  # bytes before it were delivered (as lines or as a triaged backlog)
    lines: int | None = 0  # complete lines before offset (None: not known yet)
    ino: int | None = None
    partial: bytearray = field(default_factory=bytearray)  # received after offset, no newline yet
    dropped: int = 0  # bytes of an overlong partial line not kept
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
    """A line without its CR (CRLF endings), cut at MAX_LINE_BYTES characters."""
    if line.endswith("\r"):
        line = line[:-1]
    return line[:MAX_LINE_BYTES]


def take_lines(directory: str, name: str, fs: _StreamState, data: bytes) -> LinesEvent | None:
    """Add bytes received after ``fs.expected`` and cut out the complete lines."""
    if fs.lines is None:
        fs.lines = 0
    if len(fs.partial) >= MAX_LINE_BYTES:  # inside an overlong line: skip to its end
        nl = data.find(b"\n")
        if nl < 0:
            fs.dropped += len(data)
            return None
        fs.dropped += nl
        data = data[nl:]
    last = data.rfind(b"\n")
    if last < 0:
        room = MAX_LINE_BYTES - len(fs.partial)
        fs.partial += data[:room]
        fs.dropped += max(0, len(data) - room)
        return LinesEvent(directory, name, fs.lines + 1, [], fs.offset, decode_line(bytes(fs.partial)))
    head = bytes(fs.partial) + data[: last + 1] if fs.partial else data[: last + 1]
    # One decode for the whole block: a newline is never part of a UTF-8 sequence, so this is
    # the same as decoding line by line.
    text = head[:-1].decode("utf-8", errors="replace")
    lines = text.split("\n")
    if "\r" in text or (len(head) > MAX_LINE_BYTES and max(map(len, lines)) > MAX_LINE_BYTES):
        lines = [_trim(line) for line in lines]
    fs.offset += len(head) + fs.dropped
    fs.dropped = 0
    first = fs.lines + 1
    fs.lines += len(lines)
    rest = data[last + 1 :]
    fs.partial = bytearray(rest[:MAX_LINE_BYTES])
    fs.dropped = max(0, len(rest) - MAX_LINE_BYTES)
    return LinesEvent(directory, name, first, lines, fs.offset, decode_line(bytes(fs.partial)))
