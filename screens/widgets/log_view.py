"""A fast view of one attempt's log files, one file at a time.

What is held of each file, and how it is paged from the file and spliced onto the live stream,
is the headless :mod:`console.logwindow` (a ``FileWindow`` per file, one ``Pager``); this
module draws. :class:`LogBody` is a ``ScrollView`` on Textual's Line API: it renders only the
rows on screen and keeps rendered rows in an LRU cache of strips. Live lines arrive in batches
and are coalesced: a lone line is shown at once, a burst by one refresh per ``FLUSH_S``. Older
content is paged in on demand (``o``, or scrolling to the top); a window away from the tail
pages newer lines in when scrolled to its bottom.

Log text is untrusted: every held line went through :func:`console.sanitize.clean_line` and is
drawn with ``rich.text.Text`` (never markup), so escape sequences are removed, ``[bold red]``
stays literal text and a very long line is capped.

:class:`LogView` wraps it with a file selector, a search/filter prompt and a status line.
"""

from __future__ import annotations

import asyncio
import bisect
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from itertools import accumulate
from pathlib import PurePosixPath
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Static

from console.logwindow import (
    MAX_LINES,
    Change,
    FileWindow,
    LinesMissed,
    Live,
    Pager,
    PositionOf,
    RangeReader,
)
from console.stages import SWEEP_LOG_RE, WORKER_FILE_RE
from screens.messages import ReportsWorkerErrors

FLUSH_S = 0.05
"""At most one refresh for arriving lines per this interval."""
STRIP_CACHE = 400
"""Rendered rows kept for reuse."""
LOAD_WAIT_S = 10.0
"""How long a jump waits for the file's end to be read."""

_SEVERITY_RANK = {"fatal": 3, "error": 2, "warning": 1}


def file_label(file: str) -> str:
    return PurePosixPath(file).name


def file_order(file: str) -> tuple[int, str]:
    """Sweep log first, then worker logs, then benchmark output, then anything else."""
    name = file_label(file)
    if SWEEP_LOG_RE.match(name):
        return (0, name)
    m = WORKER_FILE_RE.match(name)
    if m is not None:
        rank = {"prefill": 1, "decode": 2, "agg": 3}.get(m.group("mode"), 4)
        return (rank, f"{m.group('mode')}{int(m.group('idx')):04d}{m.group('node')}")
    if name.startswith("benchmark"):
        return (5, name)
    return (6, name)


class LogBody(ScrollView, can_focus=True):
    """The scrolling body: rows of the current file (filtered or not), drawn line by line."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "log-lines--gutter",
        "log-lines--fatal",
        "log-lines--error",
        "log-lines--warning",
        "log-lines--match",
        "log-lines--cursor",
    }
    DEFAULT_CSS = """
    LogBody {
        background: $surface;
        scrollbar-size-vertical: 1;
    }
    LogBody > .log-lines--gutter { color: $text-muted; }
    LogBody > .log-lines--fatal { color: $error; text-style: bold; }
    LogBody > .log-lines--error { color: $error; }
    LogBody > .log-lines--warning { color: $warning; }
    LogBody > .log-lines--match { background: $warning 60%; }
    LogBody > .log-lines--cursor { background: $accent 30%; }
    """

    follow: reactive[bool] = reactive(True, init=False)

    class FollowChanged(Message):
        def __init__(self, follow: bool) -> None:
            super().__init__()
            self.follow = follow

    class AtTop(Message):
        """The operator scrolled to the first held row while older content exists."""

    class AtBottom(Message):
        """The operator scrolled to the last held row while newer content exists."""

    class Restarted(Message):
        """Live lines do not continue what is held (the file was rewritten, or lines were missed)."""

        def __init__(self, file: str) -> None:
            super().__init__()
            self.file = file

    class Flushed(Message):
        """New rows were shown (one per flush, however many lines arrived)."""

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, LogBody.Flushed)

    def __init__(self, *, max_lines: int = MAX_LINES, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.buffers: dict[str, FileWindow] = {}
        self._max_lines = max_lines
        self.current: str | None = None
        self.marks: dict[str, dict[int, str]] = {}
        self.finding_lines: dict[str, list[int]] = {}
        self.search = ""
        self.search_error: str | None = None
        self.filter_text = ""
        self.findings_only = False
        self.cursor_line_no: int | None = None
        self._rows: list[int] | None = None  # visible row -> buffer index; None: every line
        self._pattern: re.Pattern[str] | None = None
        # A few screens of rows: each Strip holds its own caches (and the strips made from it),
        # tens of objects the cyclic collector walks in every full collection.
        self._cache: LRUCache[tuple[object, ...], Strip] = LRUCache(maxsize=STRIP_CACHE)
        self._flush_pending = False
        self._dirty = False
        self._last_flush = 0.0
        self.paging = False  # an older page is being read
        self.flushes = 0  # refreshes caused by arriving lines (for tests and figures)
        self._programmatic_scroll = False
        self._anchor: int | None = None  # the top line while older lines are prepended
        self._rows_before = 0  # rows before the window's front was trimmed
        self._end_check = False
        self.wrap = False
        # Wrapping on: row -> its first wrapped row, and a last entry, the count of wrapped rows.
        # It grows with the appended rows; anything else that changes the rows starts it over.
        self._wrap_first: list[int] | None = None
        self._wrap_width = 0

    # ------------------------------------------------------------------ data in

    @property
    def max_lines(self) -> int:
        """Lines held per file (each file's window keeps to it)."""
        return self._max_lines

    @max_lines.setter
    def max_lines(self, value: int) -> None:
        self._max_lines = value
        for window in self.buffers.values():
            window.max_lines = value

    def buffer(self, file: str) -> FileWindow:
        buf = self.buffers.get(file)
        if buf is None:
            buf = self.buffers[file] = FileWindow(file, max_lines=self.max_lines, listener=self)
        return buf

    def append(self, file: str, first_line_no: int, lines: list[str]) -> None:
        """Live lines of ``file`` (raw text); shown at the next flush when it is the current file."""
        buf = self.buffers.get(file)
        if buf is not None and buf.append_live(first_line_no, lines) is Live.RESTART:
            # The file started over (truncated or replaced), or lines were missed: read its end again.
            self.post_message(self.Restarted(file))

    # The window's changes, as they happen (console.logwindow calls these).

    def window_changing(self, window: FileWindow, change: Change) -> None:
        if window.file != self.current:
            return
        if change is Change.PREPENDED:
            self._anchor = self.top_line_no()
        elif change is Change.TRIMMED:
            self._rows_before = self.row_count

    def window_changed(self, window: FileWindow, change: Change, count: int) -> None:
        if window.file != self.current:
            return
        if change is Change.EXTENDED:
            if self._rows is not None:
                self._rows.extend(i for i in range(count, len(window.lines)) if self._visible(window, i))
            self._schedule_flush()
        elif change is Change.TRIMMED:
            self._recompute_rows()
            if not self.follow:
                self._scroll_rows(self.row_count - self._rows_before)
        elif change is Change.LOADED:
            self._recompute_rows()
            self._update_size()
            self._schedule_flush()
        elif change is Change.PREPENDED:
            self._recompute_rows()
            self._update_size()
            # The row that was on top stays on top: older rows appear above it.
            row = self.row_of(self._anchor) if self._anchor is not None else None
            if row is None:  # it was dropped to keep memory bounded: show the newest rows held
                row = max(0, self.row_count - self.size.height)
            self._scroll_rows(row - round(self.scroll_y))
            self.refresh()

    def _schedule_flush(self) -> None:
        """Show new lines soon: after the messages already queued (a burst becomes one refresh),
        and at most once every FLUSH_S."""
        self._dirty = True
        if not self._flush_pending:
            self._flush_pending = True
            wait = FLUSH_S - (time.monotonic() - self._last_flush)
            if wait > 0:
                # Not Textual's set_timer: a one-shot timer that starts later than its delay is
                # skipped, never fired, and the view would stop following for good.
                asyncio.get_running_loop().call_later(wait, self.call_later, self._flush)
            else:
                self.call_later(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if not self._dirty:
            return
        self._dirty = False
        self._last_flush = time.monotonic()
        self.flushes += 1
        self._update_size()
        if self.follow:
            self._scroll_to_end()
        self.refresh()
        self.post_message(self.Flushed())

    def flush_now(self) -> None:
        """Show what has arrived without waiting for the flush timer."""
        self._dirty = True
        self._flush()

    def add_marks(self, file: str, marks: Iterable[tuple[int, str]]) -> None:
        """Finding lines of ``file``: (line number, severity)."""
        per_file = self.marks.setdefault(file, {})
        lines = self.finding_lines.setdefault(file, [])
        changed = False
        for line_no, severity in marks:
            old = per_file.get(line_no)
            if old is None:
                bisect.insort(lines, line_no)
            if old is None or _SEVERITY_RANK.get(severity, 0) > _SEVERITY_RANK.get(old, 0):
                per_file[line_no] = severity
                changed = True
        if changed and file == self.current:
            if self.findings_only:
                self._recompute_rows()
                self._update_size()
            self.refresh()

    # ------------------------------------------------------------------ what is shown

    @property
    def current_buffer(self) -> FileWindow | None:
        return self.buffers.get(self.current) if self.current else None

    @property
    def row_count(self) -> int:
        if self._wrap_first is not None:
            return self._wrap_first[-1]
        return self._base_count()

    def _base_count(self) -> int:
        """Rows before wrapping: one per held line that passes the filter."""
        buf = self.current_buffer
        if buf is None:
            return 0
        return len(buf.lines) if self._rows is None else len(self._rows)

    # --- wrapping (`w`): a long line takes as many rows as it needs, no sideways scrolling ---

    def set_wrap(self, wrap: bool) -> None:
        anchor = self.cursor_line_no if self.cursor_line_no is not None else self.top_line_no()
        self.wrap = wrap
        self._cache.clear()
        self._update_size()
        if self.follow:
            self._scroll_to_end()
        elif anchor is not None:
            self.scroll_to_line(anchor, center=False)
        self.refresh()

    def _text_width(self) -> int:
        return max(10, self.size.width - self._gutter_width() - 2)

    def _rewrap(self) -> None:
        """Bring the wrapped rows up to date: only the rows appended since the last call are
        measured (a followed log under load is re-wrapped a few lines at a time, not whole)."""
        buf = self.current_buffer
        if not self.wrap or buf is None:
            self._wrap_first = None
            return
        width = self._text_width()
        count = self._base_count()
        first = self._wrap_first
        if first is None or width != self._wrap_width or len(first) - 1 > count:
            first = self._wrap_first = [0]
            self._wrap_width = width
        done = len(first) - 1
        if done < count:
            lines = buf.lines
            indices = range(done, count) if self._rows is None else self._rows[done:count]
            sums = accumulate((-(-len(lines[i]) // width) or 1 for i in indices), initial=first[-1])
            next(sums)
            first.extend(sums)

    def _unwrap_row(self, row: int) -> tuple[int, int]:
        """A wrapped row as (row, piece of its line)."""
        first = self._wrap_first
        assert first is not None
        base = bisect.bisect_right(first, row) - 1
        return base, row - first[base]

    def show(self, file: str) -> None:
        if file == self.current:
            return
        self.current = file
        self.buffer(file)
        self.cursor_line_no = None
        self._recompute_rows()
        self._update_size()
        self.follow = True
        self._scroll_to_end()
        self.refresh()

    def _visible(self, buf: FileWindow, i: int) -> bool:
        if self.findings_only and buf.first_line_no + i not in self.marks.get(buf.file, {}):
            return False
        return not self.filter_text or self.filter_text in buf.lines[i].lower()

    def _recompute_rows(self) -> None:
        self._wrap_first = None  # the rows change: wrapped again at the next size update
        buf = self.current_buffer
        if buf is None or not (self.filter_text or self.findings_only):
            self._rows = None
            return
        if self.findings_only and not self.filter_text:
            marks = self.marks.get(buf.file, {})
            first = buf.first_line_no
            self._rows = [n - first for n in sorted(marks) if 0 <= n - first < len(buf.lines)]
            return
        self._rows = [i for i in range(len(buf.lines)) if self._visible(buf, i)]

    def _update_size(self) -> None:
        buf = self.current_buffer
        self._rewrap()
        width = (self._gutter_width() + 2 + buf.width) if buf else 0
        if self.wrap:
            width = min(width, self.size.width)
        size = Size(width, self.row_count)
        old = self.virtual_size
        if size == old:
            return
        height = self.scrollable_content_region.height
        if size.width == old.width and min(size.height, old.height) > height and self.show_vertical_scrollbar:
            # More rows below a scrollbar already shown: nothing else on the screen moves, so no
            # layout pass (the reactive's own) for each new frame of lines; the scrollbar and the
            # scroll limits are updated as Textual's ScrollView does on a resize.
            self.set_reactive(LogBody.virtual_size, size)
            self._scroll_update(size)
            self.refresh()
            return
        self.virtual_size = size

    def _gutter_width(self) -> int:
        buf = self.current_buffer
        last = buf.last_line_no if buf and buf.lines else 1
        return max(6, len(str(last)))

    def set_filter(self, text: str, findings_only: bool | None = None) -> None:
        self.filter_text = text.lower()
        if findings_only is not None:
            self.findings_only = findings_only
        anchor = self.cursor_line_no if self.cursor_line_no is not None else self.top_line_no()
        self._recompute_rows()
        self._update_size()
        if anchor is not None and not self.follow:
            self.scroll_to_line(anchor, center=True)
        elif self.follow:
            self._scroll_to_end()
        self.refresh()

    def set_search(self, text: str) -> str | None:
        """Search for a regular expression (case-insensitive); text that is not one is searched
        as it is, and the reason is returned."""
        self.search = text
        self.search_error = None
        if not text:
            self._pattern = None
        else:
            try:
                self._pattern = re.compile(text, re.IGNORECASE)
            except re.error as exc:
                self.search_error = f"not a regex ({exc}): searching the text as it is"
                self._pattern = re.compile(re.escape(text), re.IGNORECASE)
        self._cache.clear()
        self.refresh()
        return self.search_error

    def visible_line_numbers(self) -> list[int]:
        """Line numbers of every row that passes the filter (all held lines when none)."""
        buf = self.current_buffer
        if buf is None:
            return []
        if self._rows is None:
            return list(range(buf.first_line_no, buf.first_line_no + len(buf.lines)))
        return [buf.first_line_no + i for i in self._rows]

    def match_line_numbers(self) -> list[int]:
        """Line numbers of held, visible rows (those the filter keeps) that match the search."""
        buf = self.current_buffer
        pattern = self._pattern
        if buf is None or pattern is None:
            return []
        indices = range(len(buf.lines)) if self._rows is None else self._rows
        return [buf.first_line_no + i for i in indices if pattern.search(buf.lines[i])]

    # ------------------------------------------------------------------ navigation

    def row_of(self, line_no: int) -> int | None:
        row = self._base_row_of(line_no)
        if row is None or self._wrap_first is None:
            return row
        return self._wrap_first[row] if row < len(self._wrap_first) - 1 else None

    def _base_row_of(self, line_no: int) -> int | None:
        buf = self.current_buffer
        if buf is None:
            return None
        i = buf.index_of(line_no)
        if i is None:
            return None
        if self._rows is None:
            return i
        pos = bisect.bisect_left(self._rows, i)
        return pos if pos < len(self._rows) and self._rows[pos] == i else None

    def line_at_row(self, row: int) -> int | None:
        buf = self.current_buffer
        if buf is None or not 0 <= row < self.row_count:
            return None
        if self._wrap_first is not None:
            row = self._unwrap_row(row)[0]
        i = row if self._rows is None else self._rows[row]
        return buf.first_line_no + i

    def top_line_no(self) -> int | None:
        return self.line_at_row(round(self.scroll_y))

    def scroll_to_line(self, line_no: int, *, center: bool = True) -> bool:
        row = self.row_of(line_no)
        if row is None:
            return False
        self.set_follow(False)
        target = max(0, row - self.size.height // 2) if center else row
        self._programmatic_scroll = True
        self.scroll_to(y=target, animate=False, immediate=True, force=True)
        self._programmatic_scroll = False
        return True

    def set_cursor(self, line_no: int | None) -> None:
        self.cursor_line_no = line_no
        self.refresh()

    def set_follow(self, follow: bool) -> None:
        if self.follow != follow:
            self.follow = follow

    def watch_follow(self, follow: bool) -> None:
        self.post_message(self.FollowChanged(follow))

    def _scroll_to_end(self) -> None:
        # To the last row as laid out: a horizontal scrollbar that appears for a long line takes
        # a row of the height, and the newest line must stay above it.
        self._programmatic_scroll = True
        self.scroll_to(y=max(0, self.row_count - self.scrollable_content_region.height), animate=False,
                       immediate=True, force=True)  # fmt: skip
        self._programmatic_scroll = False
        if not self._end_check:
            self._end_check = True
            self.call_after_refresh(self._still_at_end)

    def _still_at_end(self) -> None:
        self._end_check = False
        if self.follow and round(self.scroll_y) < self.max_scroll_y:
            self._programmatic_scroll = True
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)
            self._programmatic_scroll = False

    def _scroll_rows(self, delta: int) -> None:
        if delta:
            self._programmatic_scroll = True
            self.scroll_to(y=max(0, self.scroll_y + delta), animate=False, immediate=True, force=True)
            self._programmatic_scroll = False

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._programmatic_scroll:
            return
        if new_value >= self.max_scroll_y:
            buf = self.current_buffer
            if buf is not None and buf.detached:
                # The end of what is held, not of the file: read the next page.
                if new_value > old_value and not self.paging:
                    self.paging = True
                    self.post_message(self.AtBottom())
            else:
                # At the end (where the operator scrolled, or where a view that shrank was clamped).
                self.set_follow(True)
        elif new_value < old_value:
            self.set_follow(False)
            buf = self.current_buffer
            reached_top = round(old_value) > 0 and round(new_value) == 0
            if reached_top and buf is not None and buf.loaded and not buf.at_start and not self.paging:
                self.paging = True  # one page at a time, however many scroll steps reach the top
                self.post_message(self.AtTop())

    def on_resize(self, event: events.Resize) -> None:
        if self.wrap:
            self._cache.clear()
            self._update_size()
        if self.follow:
            self._scroll_to_end()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    # ------------------------------------------------------------------ rendering

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        line_no = self.line_at_row(scroll_y + y)
        buf = self.current_buffer
        if line_no is None or buf is None:
            return Strip.blank(width, base)
        piece = self._unwrap_row(scroll_y + y)[1] if self._wrap_first is not None else None
        strip = self._line_strip(buf, line_no, base, piece)
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_offsets(scroll_x, scroll_y + y)

    def _line_strip(self, buf: FileWindow, line_no: int, base: Style, piece: int | None = None) -> Strip:
        mark = self.marks.get(buf.file, {}).get(line_no)
        cursor = line_no == self.cursor_line_no
        gutter = self._gutter_width()
        text = buf.lines[line_no - buf.first_line_no]
        key = (buf.file, line_no, mark, cursor, self.search, gutter, text, piece, self._wrap_width)
        strip = self._cache.get(key)
        if strip is not None:
            return strip
        if piece is not None:  # one row of a wrapped line: its slice, the number on the first row only
            text = text[piece * self._wrap_width : (piece + 1) * self._wrap_width]
        row = Text(no_wrap=True, end="")
        number = f"{line_no:>{gutter}} " if not piece else " " * (gutter + 1)
        row.append(number, self.get_component_rich_style("log-lines--gutter", partial=True))
        if mark is not None:
            style = self.get_component_rich_style(f"log-lines--{mark}", partial=True)
            row.append("▌ ", style)
            body = Text(text, style=style)
        else:
            row.append("  ")
            body = Text(text)
        if self._pattern is not None:
            body.highlight_regex(self._pattern, self.get_component_rich_style("log-lines--match", partial=True))
        row.append_text(body)
        if cursor:
            row.stylize(self.get_component_rich_style("log-lines--cursor", partial=True))
        row.stylize_before(base)
        strip = Strip(list(row.render(self.app.console)), row.cell_len)
        self._cache[key] = strip
        return strip

    def rendered_text(self) -> list[str]:
        """The text of the rows on screen, as drawn (for tests)."""
        return [self.render_line(y).text for y in range(self.size.height)]


class _Prompt(Input):
    """The search / filter prompt; escape closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close", show=False)]

    def action_close(self) -> None:
        view = next((a for a in self.ancestors if isinstance(a, LogView)), None)
        if view is not None:
            view.close_prompt()


class LogView(ReportsWorkerErrors, Vertical):
    """File selector, prompt, the log body and its status line."""

    ALLOW_MAXIMIZE = True  # `z` fills the screen with it

    DEFAULT_CSS = """
    LogView { height: 1fr; }
    LogView #log-files { height: 1; padding: 0 1; }
    LogView #log-prompt { display: none; height: 3; }
    LogView #log-prompt.-open { display: block; }
    LogView LogBody { height: 1fr; }
    LogView #log-status { height: 1; padding: 0 1; color: $text-muted; }
    """

    def __init__(self, *, max_lines: int = MAX_LINES, id: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id)
        self.files: list[str] = []
        self.body = LogBody(max_lines=max_lines, id="log-lines")
        self._pager: Pager | None = None
        self._prompt_mode: str | None = None  # "search" | "filter"
        self._status = ""  # the status line shown
        self.notice = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="log-files")
        yield _Prompt(id="log-prompt")
        yield self.body
        yield Static("", id="log-status")

    def on_mount(self) -> None:
        self._show_files()
        self._show_status()

    def connect(self, read: RangeReader, position: PositionOf, lines_seen: Callable[[str], int] | None = None) -> None:
        """Where older bytes come from, and where each file's live stream stands."""
        self._pager = Pager(read, position, lines_seen)

    # ------------------------------------------------------------------ files

    @property
    def current(self) -> str | None:
        return self.body.current

    def add_files(self, files: Iterable[str]) -> None:
        new = [f for f in files if f not in self.files]
        if not new:
            return
        self.files = sorted([*self.files, *new], key=file_order)
        self._show_files()
        if self.current is None:
            self.show_file(self.files[0])

    def show_file(self, file: str) -> None:
        if file not in self.files:
            self.add_files([file])
        self.body.show(file)
        buf = self.body.buffer(file)
        if not buf.loaded and not buf.loading:
            self.load_tail(file)
        self._show_files()
        self._show_status()

    def cycle_file(self, step: int) -> None:
        if not self.files:
            return
        i = self.files.index(self.current) if self.current in self.files else -1
        self.show_file(self.files[(i + step) % len(self.files)])

    def show_index(self, index: int) -> None:
        if 0 <= index < len(self.files):
            self.show_file(self.files[index])

    def _show_files(self) -> None:
        if not self.is_mounted:
            return
        text = Text(no_wrap=True, overflow="ellipsis")
        for i, file in enumerate(self.files):
            if i:
                text.append(" │ ", "dim")
            label = f"{i + 1} {file_label(file)}" if i < 9 else file_label(file)
            count = len(self.body.finding_lines.get(file, ()))
            style = "bold reverse" if file == self.current else ""
            text.append(label, style)
            if count:
                text.append(f" ▌{count}", self.body.get_component_rich_style("log-lines--error", partial=True))
        # One row, always: no layout pass for it (a new frame of lines comes 20 times a second).
        self.query_one("#log-files", Static).update(text, layout=False)

    # ------------------------------------------------------------------ live data

    def append(self, file: str, first_line_no: int, lines: list[str]) -> None:
        if file not in self.files:
            self.add_files([file])
        self.body.append(file, first_line_no, lines)

    def add_findings(self, findings: Iterable[tuple[str, int, str]]) -> None:
        """(file, line number, severity) of findings."""
        per_file: dict[str, list[tuple[int, str]]] = {}
        for file, line_no, severity in findings:
            per_file.setdefault(file, []).append((line_no, severity))
        for file, marks in per_file.items():
            self.body.add_marks(file, marks)
        if per_file:
            self.add_files(per_file)
            self._show_files()

    @on(LogBody.Flushed)
    @on(LogBody.FollowChanged)
    def _refresh_status(self) -> None:
        self._show_status()

    @on(LogBody.Restarted)
    def _restarted(self, message: LogBody.Restarted) -> None:
        buf = self.body.buffer(message.file)
        if not buf.loading:
            self.notice = f"{file_label(message.file)} started over: reading its end again"
            self.load_tail(message.file)

    @on(LogBody.AtTop)
    def _at_top(self) -> None:
        self.load_older()

    @on(LogBody.AtBottom)
    def _at_bottom(self) -> None:
        self.load_newer()

    # ------------------------------------------------------------------ paging

    def load_tail(self, file: str) -> None:
        """Read the end of ``file`` (again) and continue with its live lines."""
        self.body.buffer(file).begin_loading()
        self._load_tail(file)

    @work(group="log-load", exit_on_error=False)
    async def _load_tail(self, file: str) -> None:
        """Read the end of ``file`` and continue with its live lines."""
        buf = self.body.buffer(file)
        if self._pager is None:
            buf.loading = False
            return
        try:
            await self._pager.load_tail(buf)
            self.notice = ""
        except LinesMissed:
            buf.loaded = False
            self.notice = "lines were missed: reloading"
            self.load_tail(file)
        except Exception as exc:
            self.notice = f"cannot read {file_label(file)}: {exc}"
        self._show_status()

    @work(group="log-newer", exclusive=True, exit_on_error=False)
    async def load_newer(self) -> None:
        """Page newer content of a window away from the tail in (scrolling to its bottom)."""

        async def page(pager: Pager, buf: FileWindow) -> str:
            count = await pager.page_newer(buf)
            return f"{count} newer lines read" if count else ""

        await self._paging(page, "newer")

    @work(group="log-older", exclusive=True, exit_on_error=False)
    async def load_older(self) -> None:
        """Page older content of the current file in (``o``, or scrolling to the top)."""

        async def page(pager: Pager, buf: FileWindow) -> str:
            if buf.at_start:
                return "start of file"
            if buf.start_offset is None:
                return "older lines of this file cannot be paged in (its position is unknown)"
            count = await pager.page_older(buf)
            return f"{count} older lines read" if count else "start of file"

        await self._paging(page, "older")

    async def _paging(self, page: Callable[[Pager, FileWindow], Awaitable[str]], what: str) -> None:
        """Run one page read of the current buffer, flagged as paging, and report the outcome."""
        buf = self.body.current_buffer
        if buf is None or buf.loading or self._pager is None:
            self.body.paging = False
            return
        self.body.paging = True
        try:
            self.notice = await page(self._pager, buf)
        except Exception as exc:
            self.notice = f"cannot read {what} lines: {exc}"
        finally:
            self.body.paging = False
        self._show_status()

    @work(group="log-jump", exclusive=True, exit_on_error=False)
    async def jump_to(self, file: str, line_no: int) -> None:
        """Show ``file`` at ``line_no`` (paging older content in, or the tail back, as needed)."""
        if file != self.current:
            self.show_file(file)
        buf = self.body.buffer(file)
        await buf.settled(LOAD_WAIT_S)  # the file's end being read
        if buf.loaded and buf.detached and line_no > buf.last_line_no:
            self.load_tail(file)
            await buf.settled(LOAD_WAIT_S)
        try:
            if self._pager is not None and buf.lines and line_no < buf.first_line_no and not buf.at_start:
                await self._pager.reach_back(buf, line_no)
        except Exception as exc:
            self.notice = f"cannot read older lines: {exc}"
        self.body.flush_now()
        if self.body.row_of(line_no) is None and (self.body.filter_text or self.body.findings_only):
            self.body.set_filter("", findings_only=False)
        self.body.set_cursor(line_no)
        if not self.body.scroll_to_line(line_no):
            self.notice = f"line {line_no} is not in memory"
        self._show_status()

    # ------------------------------------------------------------------ keys

    def next_finding(self, step: int) -> tuple[str, int] | None:
        """Jump to the next (step 1) or previous (-1) finding line, across files in selector order."""
        order = [f for f in self.files if self.body.finding_lines.get(f)]
        if not order:
            self.notice = "no findings"
            self._show_status()
            return None
        current = self.current or order[0]
        here = self.body.cursor_line_no
        if here is None:
            here = 0 if step > 0 else (1 << 62)
        lines = self.body.finding_lines.get(current, [])
        if step > 0:
            i = bisect.bisect_right(lines, here)
            target = (current, lines[i]) if i < len(lines) else None
        else:
            i = bisect.bisect_left(lines, here)
            target = (current, lines[i - 1]) if i > 0 else None
        if target is None:
            pos = order.index(current) if current in order else (-1 if step > 0 else 0)
            nxt = order[(pos + step) % len(order)]
            nxt_lines = self.body.finding_lines[nxt]
            target = (nxt, nxt_lines[0] if step > 0 else nxt_lines[-1])
        self.jump_to(*target)
        return target

    def next_match(self, step: int) -> int | None:
        matches = self.body.match_line_numbers()
        if not matches:
            self.notice = f"no match for {self.body.search!r}" if self.body.search else "no search"
            self._show_status()
            return None
        here = self.body.cursor_line_no
        if here is None:
            here = self.body.top_line_no() or 0
            here -= 1 if step > 0 else -1
        if step > 0:
            i = bisect.bisect_right(matches, here)
            target = matches[i % len(matches)]
        else:
            i = bisect.bisect_left(matches, here)
            target = matches[(i - 1) % len(matches)]
        self.body.set_cursor(target)
        self.body.scroll_to_line(target)
        self.notice = f"match {matches.index(target) + 1}/{len(matches)}"
        self._show_status()
        return target

    def open_prompt(self, mode: str) -> None:
        """The prompt for ``mode``: search (a regex), filter (lines containing), line (jump to a number)."""
        prompt = self.query_one(_Prompt)
        self._prompt_mode = mode
        prompt.placeholder = {
            "search": "search: a regular expression, case-insensitive (enter: next match)",
            "filter": "filter: show lines containing…",
            "line": "jump to line number (enter)",
        }[mode]
        prompt.value = {"search": self.body.search, "filter": self.body.filter_text}.get(mode, "")
        prompt.add_class("-open")
        # Focused now, not after the queued messages (what `focus()` does): keys typed ahead
        # of the prompt (one terminal read, a busy screen) are its text, not the log's bindings.
        self.screen.set_focus(prompt)

    def close_prompt(self) -> None:
        self.query_one(_Prompt).remove_class("-open")
        self._prompt_mode = None
        self.screen.set_focus(self.body)

    @on(Input.Changed, "#log-prompt")
    def _prompt_changed(self, event: Input.Changed) -> None:
        if self._prompt_mode == "search":
            self.body.set_search(event.value)
        elif self._prompt_mode == "filter":
            self.body.set_filter(event.value)
        else:
            return
        self.notice = ""  # "match 3/7" said of the old rows would be wrong now
        self._show_status()

    @on(Input.Submitted, "#log-prompt")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        if self._prompt_mode == "search":
            self.next_match(1)
        elif self._prompt_mode == "line":
            self.close_prompt()
            self.go_to_line(event.value)
        else:
            self.close_prompt()

    def go_to_line(self, text: str) -> None:
        """Jump to a line number of the current file (paging older lines in when needed)."""
        number = text.strip().lstrip(":")
        if not number.isdigit() or int(number) < 1 or self.current is None:
            self.notice = f"not a line number: {text.strip()!r}" if self.current else "no log yet"
            self._show_status()
            return
        self.jump_to(self.current, int(number))

    def toggle_wrap(self) -> None:
        self.body.set_wrap(not self.body.wrap)
        self._show_status()

    def cursor_line(self) -> tuple[int, str] | None:
        """The line under the cursor, else the top line on screen: (number, text as shown)."""
        body = self.body
        buf = body.current_buffer
        line_no = body.cursor_line_no if body.cursor_line_no is not None else body.top_line_no()
        if buf is None or line_no is None:
            return None
        i = buf.index_of(line_no)
        return (line_no, buf.lines[i]) if i is not None else None

    def held_lines(self) -> list[str]:
        """Every line of the current file held in memory (for a pager when the file is remote)."""
        buf = self.body.current_buffer
        return list(buf.lines) if buf is not None else []

    def toggle_findings_only(self) -> None:
        self.body.set_filter(self.body.filter_text, findings_only=not self.body.findings_only)
        self._show_status()

    def follow_tail(self) -> None:
        buf = self.body.current_buffer
        self.body.set_cursor(None)
        if buf is not None and buf.detached and self.current:
            buf.loaded = False
            self.load_tail(self.current)
        self.body.set_follow(True)
        self.body._scroll_to_end()
        self._show_status()

    # ------------------------------------------------------------------ status

    def _show_status(self) -> None:
        if not self.is_mounted:
            return
        body = self.body
        buf = body.current_buffer
        parts: list[str] = []
        if buf is None:
            parts.append("no log yet")
        elif buf.loading:
            parts.append(f"{file_label(buf.file)}: reading…")
        else:
            if buf.lines:
                parts.append(f"lines {buf.first_line_no}–{buf.last_line_no}")
            else:
                parts.append("empty")
            if not buf.at_start and buf.lines and buf.start_offset is not None:
                parts.append("older: o")
        parts.append("following" if body.follow else "paused (end: follow)")
        if body.wrap:
            parts.append("wrap")
        filtered = bool(body.filter_text or body.findings_only)
        if filtered:
            what = "findings" if body.findings_only else "lines"
            if body.filter_text:
                what = f"{what} containing {body.filter_text!r}"
            parts.append(f"filter: {what} → {body._base_count()} of {len(buf.lines) if buf else 0} lines")
        if body.search:
            # Counted in the same rows the filter shows, so the two numbers always agree.
            where = " of them" if filtered else ""
            parts.append(f"search /{body.search}/: {len(body.match_line_numbers())} match{where}")
            if body.search_error:
                parts.append(body.search_error)
        if buf is not None and buf.detached:
            parts.append("newer lines: scroll down, t: back to the tail")
        if self.notice:
            parts.append(self.notice)
        status = " · ".join(parts)
        if status != self._status:
            self._status = status
            self.query_one("#log-status", Static).update(Text(status, no_wrap=True, overflow="ellipsis"), layout=False)
