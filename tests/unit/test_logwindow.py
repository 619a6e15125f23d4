"""The log window, headless: a file's tail at the stream's position, live lines spliced on,
paging older and newer, lines far above, very long lines, and the memory bound."""

from __future__ import annotations

import asyncio

import pytest

from console import logwindow
from console.logwindow import FileWindow, LinesMissed, LineTooLong, Live, Pager


class File:
    """A growing file in memory, read by ranges as the follower's reader does (the stand-in for
    the agent's range reads); counts the bytes read."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = data
        self.bytes_read = 0

    async def read(self, _file: str, offset: int, length: int) -> bytes:
        start = len(self.data) + offset if offset < 0 else offset
        start = min(max(start, 0), len(self.data))
        chunk = self.data[start : start + max(0, length)]
        self.bytes_read += len(chunk)
        return chunk

    def position(self) -> tuple[int, int]:
        return len(self.data), self.data.count(b"\n")


def numbered(first: int, last: int, word: str = "line") -> bytes:
    return b"".join(f"{word} {i}\n".encode() for i in range(first, last + 1))


def pager(file: File, *, followed: bool = True, seen: int = 0) -> Pager:
    return Pager(file.read, (lambda _f: file.position()) if followed else None, lambda _f: seen)


def loaded(file: File, **kw: object) -> FileWindow:
    win = FileWindow("logs/x.log", **kw)  # type: ignore[arg-type]
    win.begin_loading()
    asyncio.run(pager(file).load_tail(win))
    return win


def test_the_tail_is_read_at_the_streams_position_and_numbered_exactly() -> None:
    file = File(numbered(1, 50_000))
    win = loaded(file)
    assert win.last_line_no == 50_000 and win.lines[-1] == "line 50000"
    assert win.lines[0] == f"line {win.first_line_no}"
    assert file.bytes_read <= logwindow.TAIL_BYTES
    start = win.start_offset
    assert start is not None and file.data[start:].startswith(b"line %d\n" % win.first_line_no)


def test_live_lines_continue_the_window_and_never_twice() -> None:
    file = File(numbered(1, 10))
    win = loaded(file)
    assert win.append_live(9, ["line 9", "line 10", "line 11"]) is Live.ADDED  # overlap skipped
    assert win.lines[-3:] == ["line 9", "line 10", "line 11"] and win.last_line_no == 11
    assert win.append_live(20, ["line 20"]) is Live.RESTART  # a gap: lines were missed
    assert win.append_live(5, ["rewritten 5"]) is Live.RESTART  # the file started over
    assert win.last_line_no == 11


def test_lines_that_arrive_while_loading_are_held_then_spliced() -> None:
    file = File(numbered(1, 100))
    win = FileWindow("f")
    win.begin_loading()
    assert win.append_live(101, ["line 101"]) is Live.HELD
    asyncio.run(pager(file).load_tail(win))
    assert win.last_line_no == 101 and not win.pending and win.loaded and not win.loading

    win.begin_loading()
    win.append_live(150, ["line 150"])  # does not continue line 100: a reload is needed
    with pytest.raises(LinesMissed):
        asyncio.run(pager(file).load_tail(win))
    assert win.loaded and not win.loading  # never left half-loaded


def test_paging_back_reaches_line_one_exactly_and_stops() -> None:
    file = File(numbered(1, 20_000))
    win = loaded(file)
    p = pager(file)
    while not win.at_start:
        before = win.first_line_no
        assert asyncio.run(p.page_older(win)) > 0
        assert win.first_line_no < before
    assert win.first_line_no == 1 and win.lines[0] == "line 1" and win.start_offset == 0
    assert asyncio.run(p.page_older(win)) == 0


def test_a_page_back_realigns_when_the_held_start_is_not_a_line_start() -> None:
    file = File(numbered(1, 1000))
    win = loaded(file)
    assert win.start_offset is not None
    win.start_offset -= 3  # a rewritten line moved the file under us
    asyncio.run(pager(file).page_older(win))
    assert all(line.startswith("line ") for line in win.lines)


def test_a_line_longer_than_a_page_is_one_capped_line_numbered_right(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logwindow, "PAGE_BYTES", 4096)
    monkeypatch.setattr(logwindow, "SCAN_STEP", 4096)
    monkeypatch.setattr(logwindow, "TAIL_BYTES", 2048)
    long = b"x" * 50_000
    file = File(numbered(1, 3) + long + b"\n" + numbered(5, 40))
    win = loaded(file)
    p = pager(file)
    while not win.at_start:
        asyncio.run(p.page_older(win))
    assert win.lines[:3] == ["line 1", "line 2", "line 3"]
    assert win.lines[3].startswith("xxx") and win.lines[3].endswith(f"[+{50_000 - (logwindow.MAX_CHARS - 40)} bytes]")
    assert win.lines[4] == "line 5" and win.first_line_no == 1
    assert win.sizes[3] == 50_001 and win.start_offset == 0


def test_a_line_longer_than_the_scan_limit_stops_paging(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logwindow, "PAGE_BYTES", 1024)
    monkeypatch.setattr(logwindow, "SCAN_STEP", 1024)
    monkeypatch.setattr(logwindow, "LONG_LINE_SCAN", 8192)
    monkeypatch.setattr(logwindow, "TAIL_BYTES", 1024)
    file = File(b"a\n" + b"y" * 100_000 + b"\n" + numbered(3, 30))
    win = loaded(file)
    p = pager(file)
    with pytest.raises(LineTooLong):
        for _ in range(10):
            asyncio.run(p.page_older(win))
    assert win.lines[0] == f"line {win.first_line_no}"  # what was held is untouched


def test_memory_stays_bounded_and_newer_pages_rejoin_the_stream() -> None:
    file = File(numbered(1, 5000))
    win = loaded(file, max_lines=300)
    p = pager(file)
    for _ in range(4):
        asyncio.run(p.page_older(win))
    assert len(win.lines) <= 300 and win.detached  # the newest lines went
    assert win.append_live(5001, ["line 5001"]) is Live.IGNORED and win.dropped_live == 1
    while win.detached:
        assert asyncio.run(p.page_newer(win)) > 0 or not win.detached
        assert win.lines[-1] == f"line {win.last_line_no}"
    assert win.last_line_no == 5000 and win.dropped_live == 0


def test_a_line_far_above_is_read_from_the_files_start() -> None:
    file = File(numbered(1, 100_000))
    win = loaded(file)
    reads_before = file.bytes_read
    asyncio.run(pager(file).reach_back(win, 120))
    assert win.index_of(120) is not None and win.lines[win.index_of(120) or 0] == "line 120"
    assert win.detached and win.first_line_no == 1  # WINDOW_CONTEXT lines above it: from line 1
    assert file.bytes_read - reads_before <= logwindow.SCAN_STEP


def test_a_line_near_the_window_is_reached_by_paging_back() -> None:
    file = File(numbered(1, 100_000))
    win = loaded(file)
    target = win.first_line_no - 500
    asyncio.run(pager(file).reach_back(win, target))
    assert win.lines[win.index_of(target) or 0] == f"line {target}" and not win.detached


def test_an_unfollowed_file_is_read_whole_when_small_else_numbered_by_triage() -> None:
    small = File(numbered(1, 1000))
    win = FileWindow("f")
    win.begin_loading()
    asyncio.run(pager(small, followed=False).load_tail(win))
    assert (win.first_line_no, win.last_line_no, win.start_offset) == (1, 1000, 0)

    big = File(numbered(1, 400_000))
    assert len(big.data) > logwindow.WHOLE_BYTES
    win = FileWindow("f")
    win.begin_loading()
    asyncio.run(pager(big, followed=False, seen=400_000).load_tail(win))
    assert win.last_line_no == 400_000 and win.lines[-1] == "line 400000"
    assert win.start_offset is None  # where the held lines start is not known: no paging back
    assert asyncio.run(pager(big, followed=False).page_older(win)) == 0


async def test_a_jump_waits_for_the_load_without_polling() -> None:
    win = FileWindow("f")
    win.begin_loading()
    waiter = asyncio.create_task(win.settled(5.0))
    await asyncio.sleep(0)
    assert not waiter.done()
    win.load(1, [b"a", b"b"], 0)
    win.end_loading()
    assert await waiter is True
    stuck = FileWindow("g")
    stuck.begin_loading()
    assert await stuck.settled(0.01) is False
