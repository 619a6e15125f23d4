"""A window onto one log file: the lines held in memory, paged from the file, spliced onto the live stream.

A :class:`FileWindow` holds at most ``max_lines`` lines of one file (``lines[i]`` is line
``first_line_no + i``, with the bytes each took, so that the byte offset of every held line is
known). A :class:`Pager` fills it through a range reader (the follower's, so a remote file is
read by its agent): first the file's end at the follower's position (line numbers exact), then
live lines continue it; older pages come in on demand, a line far above is reached by paging
back or by reading the file's start, whichever is nearer, and a window away from the tail pages
newer lines in until it meets the live stream again. So a gigabyte log costs a few megabytes.

Nothing here draws: a listener (the log widget) is told before and after every change. Lines
are kept as display text: escape and control characters removed, very long lines capped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from rich.cells import cell_len

from console.lines import decode_line, split_lines
from console.sanitize import clean_line

MAX_LINES = 20_000
"""Lines held per file; older ones are paged back in on demand."""
MAX_CHARS = 2000
"""A line is cut to this many characters for display (with a ``… [+N chars]`` marker)."""
TAIL_BYTES = 64 * 1024
"""How much of a file's end is read when it is first shown."""
WHOLE_BYTES = 4 << 20
"""A file whose stream position is unknown is read whole when it is smaller than this."""
PAGE_BYTES = 64 * 1024
"""How much older content one page-back reads."""
JUMP_BUDGET_PAGES = 64
"""Pages read back at most to reach a line (a finding) not in memory."""
HEAD_SCAN_BYTES = 16 << 20
"""How much of a file's start is read at most to reach a line far above the held ones."""
WINDOW_CONTEXT = 200
"""Lines held above a line reached from the start of the file."""
LONG_LINE_SCAN = 64 << 20
"""How far back the start of one very long line is looked for when paging."""
SCAN_STEP = 1 << 20
"""Bytes read at a time when scanning for a line's start or end."""

# Reads ``length`` bytes of ``file`` from ``offset`` (negative: from the end).
RangeReader = Callable[[str, int, int], Awaitable[bytes]]
# The follower's (byte offset, lines before it) of a file: where live lines continue.
PositionOf = Callable[[str], "tuple[int, int | None] | None"]


def display_line(raw: str) -> str:
    """A log line as inert text: no escape or control characters, at most MAX_CHARS (+ marker)."""
    if len(raw) <= MAX_CHARS and raw.isprintable():
        return raw
    return clean_line(raw, MAX_CHARS)


def _byte_size(line: str) -> int:
    return len(line) + 1 if line.isascii() else len(line.encode("utf-8", "surrogatepass")) + 1


class LineTooLong(Exception):
    """Paging stopped at a line longer than LONG_LINE_SCAN."""


class Change(Enum):
    EXTENDED = "extended"  # lines added at the end (``start``: the index of the first new one)
    TRIMMED = "trimmed"  # ``count`` lines dropped from the front (memory bound)
    LOADED = "loaded"  # the content was replaced
    PREPENDED = "prepended"  # ``count`` older lines added at the front


class WindowListener(Protocol):
    def window_changing(self, window: FileWindow, change: Change) -> None: ...

    def window_changed(self, window: FileWindow, change: Change, count: int) -> None: ...


class Live(Enum):
    """What became of live lines handed to :meth:`FileWindow.append_live`."""

    ADDED = "added"
    HELD = "held"  # the window is loading: added once it is loaded
    IGNORED = "ignored"  # not loaded yet (its end is read when first shown), or away from the tail
    RESTART = "restart"  # they do not continue what is held: the file started over or lines were missed


@dataclass
class FileWindow:
    """The lines of one file held in memory: ``lines[i]`` is line ``first_line_no + i``."""

    file: str
    max_lines: int = MAX_LINES
    lines: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # bytes each line took in the file (newline included)
    first_line_no: int = 1
    start_offset: int | None = None  # byte offset of lines[0] in the file, when known
    loaded: bool = False
    loading: bool = False
    detached: bool = False  # newest lines were dropped to page older ones in: live lines wait for a reload
    pending: list[tuple[int, list[str]]] = field(default_factory=list)  # live batches while loading
    width: int = 0  # characters of the widest held line
    dropped_live: int = 0
    listener: WindowListener | None = field(default=None, repr=False, compare=False)
    _settled: asyncio.Event | None = field(default=None, repr=False, compare=False)

    @property
    def last_line_no(self) -> int:
        return self.first_line_no + len(self.lines) - 1

    @property
    def end_offset(self) -> int | None:
        """Byte offset just after the last held line, when known."""
        return None if self.start_offset is None or self.start_offset < 0 else self.start_offset + sum(self.sizes)

    @property
    def at_start(self) -> bool:
        return self.first_line_no <= 1 or self.start_offset == 0

    def index_of(self, line_no: int) -> int | None:
        i = line_no - self.first_line_no
        return i if 0 <= i < len(self.lines) else None

    # --- waiting for a load ----------------------------------------------------------------

    def begin_loading(self) -> None:
        self.loading = True
        self.pending.clear()
        self._event().clear()

    def end_loading(self) -> None:
        self.loading = False
        self.loaded = True
        self._event().set()

    def _event(self) -> asyncio.Event:
        if self._settled is None:
            self._settled = asyncio.Event()
            if self.loaded and not self.loading:
                self._settled.set()
        return self._settled

    async def settled(self, timeout: float = 10.0) -> bool:
        """Wait until the window is loaded and not loading (False after ``timeout``)."""
        if self.loaded and not self.loading:
            return True
        try:
            await asyncio.wait_for(self._event().wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return self.loaded and not self.loading

    # --- changes ---------------------------------------------------------------------------

    def _changing(self, change: Change) -> None:
        if self.listener is not None:
            self.listener.window_changing(self, change)

    def _changed(self, change: Change, count: int) -> None:
        if self.listener is not None:
            self.listener.window_changed(self, change, count)

    def append_live(self, first_line_no: int, lines: list[str]) -> Live:
        """Live lines (raw text) from the follower: they continue the window, or say why not."""
        if not lines or (not self.loaded and not self.loading):
            return Live.IGNORED
        if self.loading:
            self.pending.append((first_line_no, lines))
            return Live.HELD
        if self.detached:
            self.dropped_live += len(lines)
            return Live.IGNORED
        held = self.index_of(first_line_no)
        if held is not None and self.lines[held] != display_line(lines[0]):
            return Live.RESTART  # the file started over (truncated or replaced)
        return Live.ADDED if self.extend(first_line_no, lines) else Live.RESTART

    def extend(self, first_line_no: int, lines: list[str], sizes: list[int] | None = None) -> bool:
        """Add lines after the last held; False when they do not continue it (a gap)."""
        expected = self.last_line_no + 1 if self.lines else first_line_no
        if not self.lines:
            self.first_line_no = first_line_no
        skip = expected - first_line_no
        if skip < 0:
            return False
        if skip >= len(lines):
            return True
        if skip:
            lines = lines[skip:]
            sizes = sizes[skip:] if sizes is not None else None
        if sizes is None:
            sizes = [_byte_size(x) for x in lines]
        shown = [display_line(line) for line in lines]
        self._changing(Change.EXTENDED)
        start = len(self.lines)
        self.lines.extend(shown)
        self.sizes.extend(sizes)
        self.width = max(self.width, _width(shown))
        self._changed(Change.EXTENDED, start)
        if len(self.lines) > self.max_lines + self.max_lines // 4:
            self.trim_front(len(self.lines) - self.max_lines)
        return True

    def trim_front(self, count: int) -> None:
        self._changing(Change.TRIMMED)
        removed_bytes = sum(self.sizes[:count])
        del self.lines[:count]
        del self.sizes[:count]
        self.first_line_no += count
        if self.start_offset is not None and self.start_offset >= 0:
            self.start_offset += removed_bytes
        self._changed(Change.TRIMMED, count)

    def load(self, first_line_no: int, raw: list[bytes], start_offset: int | None) -> None:
        """Replace the content with lines read from the file at ``start_offset`` (None: unknown)."""
        self._changing(Change.LOADED)
        listener, self.listener = self.listener, None  # one notice for the whole load
        try:
            self.lines.clear()
            self.sizes.clear()
            self.width = 0
            self.detached = False
            self.first_line_no = first_line_no
            self.start_offset = start_offset
            if raw:
                self.extend(first_line_no, [decode_line(r) for r in raw], [len(r) + 1 for r in raw])
        finally:
            self.listener = listener
        self.loaded = True
        self._changed(Change.LOADED, len(self.lines))

    def prepend(self, raw: list[bytes], start_offset: int, *, sizes: list[int] | None = None) -> int:
        """Older lines (those just before the first held) read from ``start_offset``; returns how many."""
        if not raw:
            self.start_offset = start_offset
            return 0
        if sizes is None:
            sizes = [len(r) + 1 for r in raw]
        if len(raw) >= self.first_line_no:  # never number a line below 1
            keep = self.first_line_no - 1
            raw, sizes = raw[len(raw) - keep :] if keep else [], sizes[len(sizes) - keep :] if keep else []
        self._changing(Change.PREPENDED)
        shown = [display_line(decode_line(r)) for r in raw]
        count = len(shown)
        self.lines[:0] = shown
        self.sizes[:0] = sizes
        self.first_line_no -= count
        self.start_offset = start_offset
        if shown:
            self.width = max(self.width, _width(shown))
        excess = len(self.lines) - self.max_lines
        if excess > 0:  # keep memory bounded: the newest lines go, and come back with the tail
            del self.lines[-excess:]
            del self.sizes[-excess:]
            self.detached = True
        self._changed(Change.PREPENDED, count)
        return count


def _width(lines: list[str]) -> int:
    """Cells the widest line takes (ASCII lines: their length, no per-character lookup)."""
    return max((len(s) if s.isascii() else cell_len(s) for s in lines), default=0)


class Pager:
    """Reads a file's lines into its window: the tail at the stream's position, pages older and
    newer, a line far above. Every read is a range read of at most a page (or a scan step)."""

    def __init__(
        self,
        read: RangeReader,
        position: PositionOf | None = None,
        lines_seen: Callable[[str], int] | None = None,
    ) -> None:
        self.read = read
        self.position = position
        self.lines_seen = lines_seen

    async def load_tail(self, win: FileWindow) -> None:
        """Read the end of the file (again) and continue with the live lines that came meanwhile.

        Call :meth:`FileWindow.begin_loading` first (live lines are held from then on). Raises
        what the read raises; the window is left loaded either way.
        """
        try:
            first_no, raw, start = await self._tail_lines(win)
            win.load(max(1, first_no), raw, start)
        finally:
            pending, win.pending = win.pending, []
            win.end_loading()
        for first, lines in pending:
            if not win.extend(first, lines):
                raise _Missed()

    async def _tail_lines(self, win: FileWindow) -> tuple[int, list[bytes], int | None]:
        file = win.file
        position = self.position(file) if self.position else None
        if position is not None and (known := position[1]) is not None:
            end, last_no = position[0], known
            start = max(0, end - TAIL_BYTES)
            data = await self.read(file, start, end - start) if end > start else b""
            raw = split_lines(data)
            if start > 0 and raw:
                start += len(raw[0]) + 1
                raw = raw[1:]
            return last_no - len(raw) + 1, raw, start
        # The stream's position is unknown (the file is not followed any more): a file of up to
        # WHOLE_BYTES is read whole (exact numbers and offsets), a bigger one's end is numbered
        # by the lines triage counted, and cannot be paged back.
        data = await self.read(file, 0, WHOLE_BYTES)
        if len(data) < WHOLE_BYTES:
            raw = split_lines(data)
            keep = raw[-win.max_lines :]
            start = sum(len(r) + 1 for r in raw[: len(raw) - len(keep)])
            return len(raw) - len(keep) + 1, keep, start
        data = await self.read(file, -TAIL_BYTES, TAIL_BYTES)
        raw = split_lines(data)[1:]
        seen = self.lines_seen(file) if self.lines_seen else 0
        return max(seen, len(raw)) - len(raw) + 1, raw, None

    async def page_older(self, win: FileWindow) -> int:
        """Read the page of bytes before the held lines and prepend its complete lines."""
        if win.at_start or win.start_offset is None or win.start_offset < 0:
            return 0
        end = win.start_offset
        start = max(0, end - PAGE_BYTES)
        data = await self.read(win.file, start, end - start)
        if data and not data.endswith(b"\n"):
            # Our idea of where the held lines start is off (a rewritten line): re-align on the last newline.
            cut = data.rfind(b"\n")
            end = start + cut + 1
            data = data[: cut + 1]
        raw = split_lines(data)
        if start > 0:
            if len(raw) <= 1:
                return await self._page_long_line(win, start, end)
            start += len(raw[0]) + 1
            raw = raw[1:]
        return win.prepend(raw, start)

    async def _page_long_line(self, win: FileWindow, before: int, end: int) -> int:
        """The line ending at ``end`` starts before ``before``: find its start, show its head (capped)."""
        pos = before
        line_start: int | None = None
        while pos > 0 and before - pos < LONG_LINE_SCAN:
            chunk_start = max(0, pos - SCAN_STEP)
            chunk = await self.read(win.file, chunk_start, pos - chunk_start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                line_start = chunk_start + newline + 1
                break
            pos = chunk_start
        if line_start is None and pos == 0:
            line_start = 0
        if line_start is None:
            raise LineTooLong(f"a line longer than {LONG_LINE_SCAN >> 20} MiB: older lines cannot be paged in")
        length = max(0, end - 1 - line_start)
        head = await self.read(win.file, line_start, min(length, MAX_CHARS * 4))
        return win.prepend([_capped(head, length)], line_start, sizes=[length + 1])

    async def page_newer(self, win: FileWindow) -> int:
        """Read the page after the held lines (of a window away from the tail) and append it;
        reaching the live stream's position attaches the window to the tail again."""
        end = win.end_offset
        if not win.detached or end is None:
            return 0
        live = self.position(win.file) if self.position else None
        data = await self.read(win.file, end, PAGE_BYTES)
        raw = split_lines(data)
        sizes = [len(r) + 1 for r in raw]
        if not raw and len(data) >= PAGE_BYTES:  # a line longer than a page
            length = await self._line_length(win, end)
            raw, sizes = [_capped(data, length)], [length + 1]
        if raw:
            win.extend(win.last_line_no + 1, [decode_line(r) for r in raw], sizes)
        if not data or (live is not None and end + sum(sizes) >= live[0]):
            win.detached = False
            win.dropped_live = 0
        return len(raw)

    async def _line_length(self, win: FileWindow, start: int) -> int:
        """Bytes of the line starting at ``start`` (without its newline)."""
        pos = start
        while pos - start < LONG_LINE_SCAN:
            chunk = await self.read(win.file, pos, SCAN_STEP)
            newline = chunk.find(b"\n")
            if newline >= 0:
                return pos + newline - start
            if len(chunk) < SCAN_STEP:
                return pos + len(chunk) - start
            pos += len(chunk)
        raise LineTooLong(f"a line longer than {LONG_LINE_SCAN >> 20} MiB: newer lines cannot be paged in")

    async def load_from_start(self, win: FileWindow, line_no: int) -> bool:
        """Hold a window of the file around ``line_no`` read from its start (numbered exactly)."""
        offset = 0
        seen = 0  # lines before offset
        while offset < HEAD_SCAN_BYTES:
            data = await self.read(win.file, offset, SCAN_STEP)
            lines = split_lines(data)
            if not lines:
                return False  # end of file, or a line longer than a step
            if seen + len(lines) >= line_no:
                lo = max(0, line_no - seen - 1 - WINDOW_CONTEXT)
                start = offset + sum(len(r) + 1 for r in lines[:lo])
                win.load(seen + lo + 1, lines[lo : lo + win.max_lines], start)
                win.detached = True
                return True
            seen += len(lines)
            offset += sum(len(r) + 1 for r in lines)
        return False

    async def reach_back(self, win: FileWindow, line_no: int) -> None:
        """Get ``line_no`` (above the held lines) into memory: page back when it is near, read
        the file's start when that is nearer."""
        average = sum(win.sizes) / len(win.sizes) if win.sizes else 100.0
        back = (win.first_line_no - line_no) * average
        ahead = line_no * average
        if ahead < back and ahead < HEAD_SCAN_BYTES and await self.load_from_start(win, line_no):
            return
        pages = 0
        while line_no < win.first_line_no and not win.at_start and pages < JUMP_BUDGET_PAGES:
            if await self.page_older(win) == 0:
                break
            pages += 1
        if line_no < win.first_line_no and not win.at_start:
            await self.load_from_start(win, line_no)


class _Missed(Exception):
    """Live lines that arrived during a load do not continue it: load again."""


LinesMissed = _Missed


def _capped(head: bytes, length: int) -> bytes:
    """One very long line as a capped head with the count of bytes left out."""
    shown = MAX_CHARS - 40
    return f"{display_line(decode_line(head[: MAX_CHARS * 4]))[:shown]}… [+{length - shown} bytes]".encode()


__all__ = [
    "MAX_CHARS",
    "MAX_LINES",
    "PAGE_BYTES",
    "TAIL_BYTES",
    "Change",
    "FileWindow",
    "LineTooLong",
    "LinesMissed",
    "Live",
    "Pager",
    "PositionOf",
    "RangeReader",
    "WindowListener",
    "display_line",
]
