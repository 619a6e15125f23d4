"""Triage of one attempt's logs: matching, stages and diagnosis together.

:class:`Triage` takes lines per file, as a live follower or an offline scan delivers them,
cleans them (escape sequences and control characters out, long lines capped), matches
them against the signature catalog, keeps the stage tracker up to date and collects
located findings::

    triage = Triage()
    update = triage.feed("logs/nodeA_prefill_w0.out", lines)   # new findings, stage changes
    diagnosis = triage.diagnose(state="RUNNING")

:func:`read_lines` reads a file line by line with bounded memory, whatever its line
lengths, and :func:`looks_binary` tells a log from a binary file.
"""

from __future__ import annotations

import calendar
import os
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path, PurePath
from typing import Any, BinaryIO, Final

from console.agent import inside, open_regular
from console.diagnosis import (
    CATEGORY_RANK,
    Diagnosis,
    FindingGroup,
    Observation,
    Stall,
    after_stop,
    diagnose_groups,
    leaves_broken,
    outlived,
    same_failure,
)
from console.prefilter import LineFilter
from console.sanitize import clean_line
from console.signatures import FRAME_OPENER, TRACEBACK_OPENER, Finding, Matcher, MatchStream, default_matcher
from console.stages import SWEEP_LOG_RE, WORKER_FILE_RE, Stage, StageChange, StageSnapshot, StageTracker
from console.templates import ERROR_HINT_LINE_STARTS, ERROR_HINT_LITERALS, is_error_level, line_template

__all__ = [
    "DEFAULT_HEALTH_CHECK",
    "MAX_FINDINGS",
    "MAX_TEMPLATES",
    "MAX_TEXT_CHARS",
    "HealthCheck",
    "Triage",
    "TriageUpdate",
    "clean_text",
    "line_time",
    "looks_binary",
    "read_lines",
]

MAX_TEXT_CHARS: Final[int] = 4096
"""A line is cut to this many characters before it is matched or shown."""
MAX_FINDINGS: Final[int] = 20_000
"""Located findings kept per attempt; later ones are still counted in the diagnosis groups."""
MAX_TEMPLATES: Final[int] = 5000
"""Error-level line templates kept per attempt (what a later attempt is compared with)."""
_MAX_STARTS: Final[int] = 4  # the startup failures of a log kept to tell what they left broken
STALL_AFTER_S: Final[float] = 600.0
"""No worker output for this long (or a third of srtctl's health-check window when that is
shorter, but not under a minute) while srtctl waits for health is a stall."""
_MARKER_ROOM: Final[int] = 32  # room for clean_line's "… [+N chars]" within MAX_TEXT_CHARS
_LOOKBACK: Final[int] = 200  # lines kept per file to date an undated line (a traceback)
# The attempt's stages before its servers are healthy.
_STARTING_STAGES: Final = frozenset(
    {
        Stage.INITIALIZING,
        Stage.STARTING,
        Stage.STARTING_INFRA,
        Stage.HEAD_READY,
        Stage.STARTING_WORKERS,
        Stage.STARTING_FRONTEND,
        Stage.AWAITING_WORKERS,
    }
)

_FULL_TIME_RE: Final = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})[ T_](\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(?!\d)")
_DAY_TIME_RE: Final = re.compile(r"(?<![\d:.])(\d{2}):(\d{2}):(\d{2})(?:[.,](\d{1,9}))?(?![\d:])")
_TIME_PREFIX_CHARS: Final[int] = 80
_RANK_KEYS: Final = (("rank", ""), ("dp_rank", "DP"), ("tp_rank", "TP"), ("ep_rank", "EP"))
_PROCESS_RE: Final = re.compile(r"^(?P<mode>prefill|decode|agg)_(?P<idx>\d+)_(?P<node>.+)$")
# srtctl's FAILURE DETAILS block: per dead process a header, facts, then its last log lines
# indented (possibly behind the logger's own `<date> <time> [LEVEL] ` prefix).
_LOG_PREFIX_RE: Final = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)? \[[A-Z]+\] ")
_QUOTE_HEADER_RE: Final = re.compile(r"^--- Process: (?P<name>\S{1,200}) ---\s*$")
_QUOTE_START_RE: Final = re.compile(r"^Last \d+ lines of log:\s*$")


def clean_text(line: str) -> str:
    """The line as inert plain text (:func:`console.sanitize.clean_line`), at most about
    MAX_TEXT_CHARS characters."""
    if len(line) <= MAX_TEXT_CHARS and line.isprintable():  # the common case: nothing to do
        return line
    return clean_line(line, MAX_TEXT_CHARS)


def _clean(line: str) -> str:
    """Clean text of at most MAX_TEXT_CHARS characters, the cut marker included."""
    if len(line) <= MAX_TEXT_CHARS:
        return clean_line(line, MAX_TEXT_CHARS)
    return clean_line(line, MAX_TEXT_CHARS - _MARKER_ROOM)


def _shown_text(raw: str, cleaned: str, finding: Finding) -> str:
    """The clean text to show for a finding: the line's clean text, or - when the match is
    not in it (past the cap of a long line, in an earlier segment of a redrawn line) - the
    part of the raw line around the match."""
    start, end = finding.span
    matched = clean_line(raw[start:end], MAX_TEXT_CHARS)
    if matched and matched in cleaned:
        return cleaned
    segment_start = raw.rfind("\r", 0, start) + 1
    segment_end = raw.find("\r", end)
    lo = max(segment_start, start - MAX_TEXT_CHARS // 4)
    hi = min(segment_end if segment_end >= 0 else len(raw), end + MAX_TEXT_CHARS // 4)
    excerpt = clean_line(raw[lo:hi], MAX_TEXT_CHARS - _MARKER_ROOM)
    return ("…" if lo > 0 else "") + excerpt


def line_time(line: str) -> tuple[float, bool] | None:
    """``(seconds, has_date)`` of a timestamp near the start of the line, or None.

    With a date the seconds are a (timezone-naive, read as UTC) epoch, else the time of day.
    """
    head = line[:_TIME_PREFIX_CHARS]
    m = _FULL_TIME_RE.search(head)
    if m is not None:
        year, month, day, hh, mm, ss = (int(g) for g in m.groups()[:6])
        frac = float("0." + m.group(7)) if m.group(7) else 0.0
        try:
            return calendar.timegm((year, month, day, hh, mm, ss, 0, 0, 0)) + frac, True
        except (ValueError, OverflowError):
            return None
    m = _DAY_TIME_RE.search(head)
    if m is not None:
        hh, mm, ss = int(m.group(1)), int(m.group(2)), int(m.group(3))
        if hh < 24 and mm < 60 and ss < 61:
            frac = float("0." + m.group(4)) if m.group(4) else 0.0
            return hh * 3600 + mm * 60 + ss + frac, False
    return None


def looks_binary(head: bytes) -> bool:
    """Whether the first bytes of a file say it is not a text log."""
    if not head:
        return False
    if head.startswith((b"\x1f\x8b", b"PK\x03\x04", b"\x7fELF", b"\x89PNG", b"BZh", b"\xfd7zXZ", b"(\xb5/\xfd")):
        return True
    if head.count(0) > max(8, len(head) // 100):
        return True
    odd = sum(1 for b in head if b < 9 or 13 < b < 27 or 27 < b < 32)
    return odd > len(head) // 10


def read_lines(handle: BinaryIO, *, max_chars: int = MAX_TEXT_CHARS, block: int = 1 << 20) -> Iterator[str]:
    """The lines of a binary handle as text (invalid UTF-8 replaced).

    Reads blocks of ``block`` bytes with bounded memory whatever the line lengths. A line of
    at most ``max_chars * 4`` bytes is given whole (less a CRLF's CR). A longer one is given as
    its first and its last ``max_chars`` characters joined by a ``… [+N bytes] …`` marker, so
    an error written at the end of a 10 MB line is still there to be matched - unless it is
    made of ``\\r``-separated redraws (progress bars written to a file): such a line is split
    on ``\\r`` and given as its redraws that say something new, still ``\\r``-separated (the
    matcher takes each on its own), so that it stays one line and the lines after it keep the
    file's numbers. Of a run of redraws alike but for their numbers and bar (`45%|████▌ |
    45/100`), the last is kept; past ``max_chars * 4`` characters, redraws are left out from the
    middle.
    """
    assembler = _LineAssembler(max_chars)
    read = handle.read
    while True:
        data = read(block)
        if not data:
            break
        yield from assembler.feed(data)
    yield from assembler.finish()


_NOT_LETTERS: Final = re.compile(r"[^A-Za-z]+")


class _LineAssembler:
    """Bytes in, lines out (see :func:`read_lines`)."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.limit = max_chars * 4
        self.current = bytearray()  # the line so far; past the limit, only its last bytes
        self.head = b""  # an over-long line's first bytes
        self.hidden = 0  # bytes of an over-long line neither in head nor in current
        self.redrawn = False  # an over-long line with \r in it: kept as its redraws
        self.redraws: list[tuple[str, str]] = []  # its redraws kept so far, with their letters
        self.redraws_chars = 0
        self.redraws_left_out = 0

    def feed(self, data: bytes) -> Iterator[str]:
        start = 0
        while True:
            nl = data.find(b"\n", start)
            self._add(data[start:] if nl < 0 else data[start:nl])
            if nl < 0:
                return
            yield self._end_line()
            start = nl + 1

    def finish(self) -> Iterator[str]:
        if self.current or self.head or self.redraws:
            yield self._end_line()

    def _add(self, piece: bytes) -> None:
        if not self.redrawn and b"\r" in piece and (self.head or len(self.current) + len(piece) > self.limit):
            # An over-long line that redraws itself: from here on, \r ends a line.
            self.redrawn = True
        if self.redrawn:
            first, *rest = piece.split(b"\r")
            self._append(first)
            for part in rest:
                self._keep_redraw(self._take())
                self._append(part)
            return
        self._append(piece)

    def _keep_redraw(self, text: str) -> None:
        """One redraw of an over-long redrawn line: kept unless it only redraws the last one
        kept (then it replaces it), the middle ones left out past the limit."""
        letters = _NOT_LETTERS.sub("", text)
        if self.redraws and self.redraws[-1][1] == letters:
            self.redraws_chars -= len(self.redraws[-1][0])
            self.redraws[-1] = (text, letters)
        else:
            self.redraws.append((text, letters))
        self.redraws_chars += len(text)
        while self.redraws_chars > self.limit and len(self.redraws) > 2:
            self.redraws_chars -= len(self.redraws.pop(1)[0])
            self.redraws_left_out += 1

    def _append(self, piece: bytes) -> None:
        self.current += piece
        if len(self.current) > self.limit * 2:
            if not self.head:
                self.head = bytes(self.current[: self.limit])
                del self.current[: self.limit]
            cut = len(self.current) - self.limit
            self.hidden += cut
            del self.current[:cut]

    def _take(self) -> str:
        """The line (or redraw) assembled so far, as text; the assembler is emptied."""
        current = bytes(self.current)
        if current.endswith(b"\r"):
            current = current[:-1]
        if not self.head and len(current) <= self.limit * 2:
            text = current.decode("utf-8", "replace")
            if len(text) > 2 * self.max_chars:
                omitted = len(text) - 2 * self.max_chars
                text = f"{text[: self.max_chars]} … [+{omitted} chars] … {text[-self.max_chars :]}"
        else:
            total = len(self.head) + self.hidden + len(current)
            head = (self.head or current).decode("utf-8", "replace")[: self.max_chars]
            tail = current.decode("utf-8", "replace")[-self.max_chars :]
            omitted = total - len(head.encode()) - len(tail.encode())
            text = f"{head} … [+{omitted} bytes] … {tail}"
        self.current = bytearray()
        self.head = b""
        self.hidden = 0
        return text

    def _end_line(self) -> str:
        if not self.redrawn:
            return self._take()
        self._keep_redraw(self._take())
        kept = [text for text, _ in self.redraws]
        if self.redraws_left_out:
            kept.insert(1, f"… [+{self.redraws_left_out} redraws] …")
        self.redrawn = False
        self.redraws = []
        self.redraws_chars = 0
        self.redraws_left_out = 0
        return "\r".join(kept)


@dataclass(frozen=True)
class HealthCheck:
    """srtctl's health wait: ``max_attempts`` polls ``interval_s`` apart (its recipe's
    ``health_check``)."""

    max_attempts: int = 180
    interval_s: float = 10.0

    @property
    def timeout_s(self) -> float:
        return self.max_attempts * self.interval_s

    @classmethod
    def of_config(cls, config: object) -> HealthCheck:
        """The recipe's ``health_check`` (srtctl's defaults for what it leaves out)."""
        section = config.get("health_check") if isinstance(config, dict) else None
        if not isinstance(section, dict):
            return DEFAULT_HEALTH_CHECK
        attempts = section.get("max_attempts", DEFAULT_HEALTH_CHECK.max_attempts)
        interval = section.get("interval_seconds", DEFAULT_HEALTH_CHECK.interval_s)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            attempts = DEFAULT_HEALTH_CHECK.max_attempts
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
            interval = DEFAULT_HEALTH_CHECK.interval_s
        return cls(attempts, float(interval))


DEFAULT_HEALTH_CHECK: Final = HealthCheck()


@dataclass
class TriageUpdate:
    """What one :meth:`Triage.feed` call found."""

    findings: list[Observation] = field(default_factory=list)
    changes: list[StageChange] = field(default_factory=list)


class _Recent:
    """The last _LOOKBACK lines of a file (clean text), to date an undated line. A run of lines
    the fast reader passed over is kept as its bytes and decoded only when looked at."""

    def __init__(self) -> None:
        self._items: deque[str | tuple[bytes, int, int, int]] = deque()
        self._count = 0

    def append(self, text: str) -> None:
        self._items.append(text)
        self._count += 1
        self._trim()

    def skip(self, data: bytes, start: int, end: int, count: int) -> None:
        """``count`` lines of plain ASCII text, ``data[start:end]``, each ending with a newline."""
        if count:
            self._items.append((data, start, end, count))
            self._count += count
            self._trim()

    def latest(self) -> Iterator[str]:
        """The lines, the last one first (at most _LOOKBACK)."""
        left = _LOOKBACK
        for item in reversed(self._items):
            if isinstance(item, str):
                yield item
                left -= 1
            else:
                data, start, end, count = item
                pos = end - 1  # the newline ending the run's last line
                for _ in range(min(count, left)):
                    before = data.rfind(b"\n", start, pos)
                    first = before + 1 if before >= 0 else start
                    yield data[first:pos].decode("utf-8", "replace")
                    pos = before
                left -= min(count, left)
            if left <= 0:
                return

    def _trim(self) -> None:
        items = self._items
        while items:
            first = items[0]
            size = 1 if isinstance(first, str) else first[3]
            if self._count - size < _LOOKBACK:
                return
            items.popleft()
            self._count -= size


# A script saying it stops a process (`[online] Shutting down server (PID 51)...`, `Killing server
# 4211`): bash's `line 504:    51 Killed   python3 -m sglang.launch_server ...` just below is that stop
# carried out, not the kernel's OOM killer.
_KILL_ANNOUNCED: Final[str] = (
    r"(?i)\b(?:shutting down|stopping|killing|kill(?: -9| -KILL| -TERM)?|terminating)\b[^\n]{{0,80}}?\b{pid}\b"
)
_ANNOUNCED_WITHIN: Final[int] = 5


def _killed_as_announced(line: str, finding: Finding, recent: _Recent) -> bool:
    """Whether ``finding`` reports a kill (its matched text says `Killed`) of a process that one of
    the last lines of the file announced stopping."""
    pid = finding.captures.get("pid")
    if pid is None or "kill" not in line[finding.span[0] : finding.span[1]].lower():
        return False
    pattern = re.compile(_KILL_ANNOUNCED.format(pid=re.escape(pid)))
    return any(pattern.search(text) is not None for text in islice(recent.latest(), _ANNOUNCED_WITHIN))


@dataclass
class _FileTriage:
    lines: int = 0
    node: str | None = None
    worker: str | None = None
    mode: str | None = None
    recent: _Recent = field(default_factory=lambda: _Recent())
    last_date: float | None = None  # epoch of the last midnight seen with a date
    sweep: bool = False  # the orchestrator log (its FAILURE DETAILS block quotes worker logs)
    quote_process: str | None = None  # `--- Process: <name> ---` of the block being read
    quoting: bool = False  # inside the quoted `Last 50 lines of log:`
    stream: MatchStream | None = None  # this file's matcher (a traceback is one event)
    last_stamp: tuple[float, bool] | None = None  # the last time a finding of this file was given
    awaiting_time: bool = False  # a finding had no time: the next dated line gives one
    next_stamp: tuple[float, bool] | None = None  # that next dated line's time
    failure: Observation | None = None  # the finding that failed this worker (its label)
    starts: list[Observation] = field(default_factory=list)  # its first fatal startup findings
    broken: Observation | None = None  # an outlived start that left its component broken
    stopped_at: int | None = None  # the line where the worker was told to stop (a SIGTERM it received)


def _after(mark: tuple[str, int, str] | None) -> Callable[[Observation], bool] | None:
    """Whether a finding of a run that succeeded belongs to its teardown: a wrapper (its cleanup is
    what cancels steps and kills processes), or a line below the orchestrator's cleanup line in
    the sweep log, or later than it by the clock."""
    if mark is None:
        return None
    file, line_no, text = mark
    stamp = line_time(text)

    def after(o: Observation) -> bool:
        if o.wrapper:
            return True  # cancelled, killed, refused: in a run that succeeded, that is its cleanup
        if o.file == file:
            return o.line_no > line_no
        if stamp is not None and o.time is not None and o.time_has_date == stamp[1]:
            return o.time >= stamp[0] - 1.0
        return False

    return after


class Triage:
    """Findings, stages and diagnosis of one attempt, kept as its lines arrive.

    What the attempt is compared with comes from its arm: ``earlier`` (the root causes of its
    earlier attempts, ``(attempt ref, root key)``), ``baseline`` (the error-level line
    templates of a healthy attempt of the arm or engine: a template outside it is novel) and
    ``health_check`` (srtctl's health wait, for a stall). ``clock`` gives the wall time at
    which lines arrive (a stall is measured in it).
    """

    def __init__(
        self,
        matcher: Matcher | None = None,
        *,
        max_findings: int = MAX_FINDINGS,
        earlier: Sequence[tuple[str, str]] = (),
        baseline: frozenset[str] | None = None,
        health_check: HealthCheck = DEFAULT_HEALTH_CHECK,
        clock: Callable[[], float] = time.time,
        sparse: bool = True,
    ) -> None:
        self.matcher = matcher or default_matcher()
        self.tracker = StageTracker()
        # Batches of a worker log's lines go through the prefilter (see _feed_sparse).
        self.sparse = sparse
        self.earlier = tuple(earlier)
        self.baseline = baseline
        self.health_check = health_check
        self._clock = clock
        self._files: dict[str, _FileTriage] = {}
        self._findings: list[Observation] = []
        self._groups: dict[tuple[str, str | None, str | None, str | None], list[Any]] = {}
        self._dropped = 0
        self._max = max_findings
        self._order = 0
        self._templates: set[str] = set()
        self._novel: set[str] = set()
        self._worker_output_at: float | None = None  # when a worker log last got a line
        self._awaiting_since: float | None = None  # when srtctl began to wait for health (our clock)

    @property
    def templates(self) -> frozenset[str]:
        """The error-level line templates seen so far (at most MAX_TEMPLATES)."""
        return frozenset(self._templates)

    @property
    def findings(self) -> list[Observation]:
        """Located findings in arrival order (the first ``max_findings``)."""
        return self._findings

    @property
    def dropped(self) -> int:
        """Findings beyond ``max_findings``: counted in the groups, not kept."""
        return self._dropped

    @property
    def groups(self) -> list[FindingGroup]:
        """Findings deduplicated by (signature, node, worker, rank), in arrival order."""
        groups = []
        for first, count, last in self._groups.values():
            if first.time is None:
                # Written before the first dated line of its file: just before that line.
                after = self._files[first.file].next_stamp
                if after is not None:
                    first = replace(first, time=after[0] - 0.001, time_has_date=after[1])
            groups.append(FindingGroup(first=first, count=count, last_line_no=last))
        return groups

    def files(self) -> list[str]:
        return list(self._files)

    def lines_seen(self, file: str) -> int:
        state = self._files.get(file)
        return state.lines if state else 0

    def feed(self, file: str, lines: Iterable[str], *, first_line_no: int | None = None) -> TriageUpdate:
        """Take the next lines of ``file`` (raw text); return new findings and stage changes."""
        state = self._file(file)
        if first_line_no is not None:
            state.lines = first_line_no - 1
        start = state.lines + 1
        cap = MAX_TEXT_CHARS
        raw_lines = list(lines)
        if self.sparse and len(raw_lines) >= _SPARSE_MIN_LINES:
            line_filter = _line_filter(self, file)
            if line_filter is not None:
                data = "\n".join(raw_lines).encode("utf-8", "replace") + b"\n"
                if data.count(b"\n") == len(raw_lines):  # no line holds a newline of its own
                    return self._feed_sparse(file, state, raw_lines, data, line_filter)
        cleaned = [line if len(line) <= cap and line.isprintable() else _clean(line) for line in raw_lines]
        update = TriageUpdate()
        changes = self.tracker.feed(file, cleaned, first_line_no=start)
        update.changes.extend(changes)
        now = self._fed(state, bool(raw_lines))
        # (Only the sweep log, which the fast reader leaves to this path, sets the stage.)
        if sweep_awaits := [c for c in changes if c.subject == "stage" and c.new == Stage.AWAITING_WORKERS.value]:
            self._awaiting_since = now - _written_ago(cleaned, sweep_awaits[-1].line_no - start)
        line_no = start - 1
        for raw, text in zip(raw_lines, cleaned, strict=True):
            line_no += 1
            self._line(file, state, line_no, raw, text, update, None)
        state.lines = line_no
        return update

    def _feed_sparse(
        self, file: str, state: _FileTriage, raw_lines: list[str], data: bytes, line_filter: LineFilter
    ) -> TriageUpdate:
        """:meth:`feed` of a worker log's batch, the full treatment only for the lines the
        prefilter takes (and every line while a traceback is open or a finding waits for its
        time); the rest are counted and kept as context. What feed line by line gives: a live
        log at thousands of lines a second is mostly lines that match nothing."""
        start = state.lines + 1
        cap = MAX_TEXT_CHARS
        starts = line_filter.lines(data)
        taken: list[tuple[int, int]] = []  # (index, byte offset) of each line the filter takes
        index, pos = 0, 0
        for offset in starts:
            index += data.count(b"\n", pos, offset)
            taken.append((index, offset))
            pos = offset
        texts = {i: (raw_lines[i] if len(raw_lines[i]) <= cap and raw_lines[i].isprintable() else _clean(raw_lines[i]))
                 for i, _ in taken}  # fmt: skip
        update = TriageUpdate()
        tracker = self.tracker
        changes = update.changes
        changes.extend(tracker.feed(file, (), first_line_no=start))  # the worker is known from its file
        for i, _ in taken:  # the stage rules of the whole batch first, as feed applies them
            changes.extend(tracker.feed(file, (texts[i],), first_line_no=start + i))
        changes.extend(tracker.feed(file, (), first_line_no=start + len(raw_lines)))
        self._fed(state, True)
        if state.stream is None:
            state.stream = self.matcher.stream()
        stream = state.stream
        i, pos, k = 0, 0, 0  # the next line, its byte offset, the next taken line
        count = len(raw_lines)
        while i < count:
            if not state.awaiting_time and not stream.inside:
                while k < len(taken) and taken[k][0] < i:
                    k += 1
                if k == len(taken):
                    break
                j, offset = taken[k]
                if j > i:
                    state.recent.skip(data, pos, offset, j - i)
                    i, pos = j, offset
            raw = raw_lines[i]
            text = texts.get(i)
            if text is None:
                text = raw if len(raw) <= cap and raw.isprintable() else _clean(raw)
            self._line(file, state, start + i, raw, text, update, None)
            pos = data.find(b"\n", pos) + 1
            i += 1
        if i < count:
            state.recent.skip(data, pos, len(data), count - i)
        state.lines = start + count - 1
        return update

    def _fed(self, state: _FileTriage, lines: bool) -> float:
        """A batch of a file's lines arrived (the clock is read once a batch): a worker's lines
        are its output, what a stall is measured against."""
        now = self._clock()
        if state.worker is not None and lines:
            self._worker_output_at = now
        return now

    def _line(
        self,
        file: str,
        state: _FileTriage,
        line_no: int,
        raw: str,
        text: str,
        update: TriageUpdate,
        failures: list[Observation] | None,
    ) -> None:
        """Match one line (its stage rules already applied). A fatal or error finding of a worker
        is told to the tracker now, or added to ``failures`` to be told after the rest of its batch."""
        if state.stream is None:
            state.stream = self.matcher.stream()
        if state.awaiting_time:
            found = line_time(text)
            if found is not None:
                state.awaiting_time = False
                state.next_stamp = state.last_stamp = self._normalise(state, found)
        quoted = state.sweep and self._quote(state, text)
        # The raw line is matched (both ends of a long line, every segment of a redrawn
        # one); the clean text is what is shown.
        finding = state.stream.match(raw) if raw else None
        if finding is not None and _killed_as_announced(raw, finding, state.recent):
            finding = None  # the log's own script stopping what it started (`Shutting down server (PID 51)...`)
        novel = self.matcher.novel_signature
        if finding is None and novel is not None and not quoted and is_error_level(text):
            finding = self._novel_finding(text, novel)
        if finding is not None:
            if raw is not text:
                text = _shown_text(raw, text, finding)
            observation = self._observe(file, state, line_no, text, finding, quoted)
            update.findings.append(observation)
            if observation.stop and state.stopped_at is None:
                state.stopped_at = line_no
            # A worker told to stop that reports its engine dead as it goes has not failed.
            torn = after_stop(observation, state.stopped_at)
            # (an error too: it may show what an outlived startup failure left broken)
            if observation.severity in ("fatal", "error") and state.worker is not None and not torn:
                if failures is None:
                    update.changes.extend(self._worker_failed(file, state, observation))
                else:
                    failures.append(observation)
        state.recent.append(text)

    def _novel_finding(self, text: str, novel: Any) -> Finding | None:
        """A finding for an error-level line whose template the healthy baseline lacks; the
        template is kept either way (this attempt may become a baseline)."""
        template = line_template(text)
        if not template:
            return None
        if len(self._templates) < MAX_TEMPLATES:
            self._templates.add(template)
        if self.baseline is None or template in self.baseline:
            return None
        self._novel.add(template)
        return self.matcher.framed_finding(novel, text, 0, {"template": template})

    def _worker_failed(self, file: str, state: _FileTriage, observation: Observation) -> list[StageChange]:
        """Mark the worker failed by its first fatal finding (an error is told too, for what an
        outlived start left broken); a narrower signature of the same failure (the graph capture
        an OOM broke) renames it, so the workers table names the failure as the diagnosis does,
        at the same line (``failure_at``)."""
        ready = self.tracker.ready_lines
        changes = self._left_broken(file, state, observation, ready)
        if observation.severity != "fatal":
            return changes

        def gone(o: Observation) -> bool:
            return o is not state.broken and outlived(o, ready)

        label = observation.id
        startup = observation.category == "startup"
        if startup and not observation.wrapper and len(state.starts) < _MAX_STARTS:
            state.starts.append(observation)
        if gone(observation):
            return changes
        current = state.failure
        if current is not None and gone(current):
            current = state.failure = None
        if current is None:
            state.failure = observation
            return changes + self.tracker.mark_worker_failed(
                file, label, observation.line_no, consequence=observation.wrapper, outlivable=startup
            )
        if observation.wrapper:
            return changes
        if current.wrapper or (same_failure(current, observation) and _narrower(observation, current)):
            state.failure = observation
            return changes + self.tracker.mark_worker_failed(
                file, label, observation.line_no, rename=True, outlivable=startup
            )
        return changes

    def _left_broken(
        self, file: str, state: _FileTriage, observation: Observation, ready: Mapping[str, int]
    ) -> list[StageChange]:
        """Fail the worker again by a startup failure its server outlived, once a later finding
        shows what it left broken (:func:`leaves_broken`): the diagnosis names that start as the
        root cause, and the workers table says so too."""
        if state.broken is not None:
            return []
        start = next((s for s in state.starts if outlived(s, ready) and leaves_broken(s, observation)), None)
        if start is None:
            return []
        state.broken = state.failure = start
        return self.tracker.mark_worker_failed(file, start.id, start.line_no)

    def diagnose(self, state: str | None = None, *, cancelled: bool = False, now: float | None = None) -> Diagnosis:
        """The diagnosis now; ``state`` is the scheduler's state when known, ``cancelled`` says the
        operator cancelled the attempt, ``now`` is the time for a stall (the clock's by default)."""
        snapshot = self.tracker.snapshot(state)
        roles: dict[str, set[str]] = {}
        for worker in snapshot.workers.values():
            roles.setdefault(worker.mode, set()).add(worker.worker)
        return diagnose_groups(
            self.groups,
            state=state,
            job_id=snapshot.job_id,
            nodes=snapshot.nodes,
            workers=roles or None,
            ending=snapshot.stage.terminal or snapshot.stage is Stage.FINALIZING,
            starting=self.tracker.has_sweep_log and snapshot.stage in _STARTING_STAGES,
            matcher=self.matcher,
            succeeded=snapshot.succeeded,
            teardown=_after(snapshot.cleanup),
            cancelled=cancelled,
            failing=snapshot.failing,
            earlier=self.earlier,
            stall=self._stall(snapshot, now),
            ready=self.tracker.ready_lines,
        )

    def _stall(self, snapshot: StageSnapshot, now: float | None) -> Stall | None:
        """No worker output for long while srtctl waits for health."""
        since = self._awaiting_since
        if snapshot.stage is not Stage.AWAITING_WORKERS or since is None:
            return None
        now = self._clock() if now is None else now
        check = self.health_check
        idle = now - max(since, self._worker_output_at or since)
        if idle < max(60.0, min(STALL_AFTER_S, check.timeout_s / 3)):
            return None
        left = since + check.timeout_s - now
        # Whole ten seconds: a diagnosis changes when a figure an operator reads changes.
        return Stall(idle_s=idle // 10 * 10, left_s=left // 10 * 10, max_attempts=check.max_attempts,
                     interval_s=check.interval_s)  # fmt: skip

    def snapshot(self, state: str | None = None) -> StageSnapshot:
        return self.tracker.snapshot(state)

    # ------------------------------------------------------------------ internals

    def _file(self, file: str) -> _FileTriage:
        state = self._files.get(file)
        if state is None:
            state = _FileTriage()
            name = PurePath(file).name
            m = WORKER_FILE_RE.match(name)
            if m is not None:
                state.node = m.group("node")
                state.mode = m.group("mode")
                state.worker = f"{m.group('mode')}_w{int(m.group('idx'))}"
            state.sweep = SWEEP_LOG_RE.match(name) is not None
            self._files[file] = state
        return state

    @staticmethod
    def _quote(state: _FileTriage, text: str) -> bool:
        """Whether this sweep-log line quotes a worker's log (FAILURE DETAILS)."""
        body = text
        if body[:1].isdigit():
            m = _LOG_PREFIX_RE.match(body)
            if m is not None:
                body = body[m.end() :]
        if state.quoting:
            if not body or body[:1].isspace():
                return True
            state.quoting = False
        if body.startswith("--- Process:"):
            header = _QUOTE_HEADER_RE.match(body)
            state.quote_process = header.group("name") if header else None
        elif body.startswith("Last ") and state.quote_process and _QUOTE_START_RE.match(body):
            state.quoting = True
        return False

    def _observe(
        self, file: str, state: _FileTriage, line_no: int, text: str, finding: Finding, quoted: bool = False
    ) -> Observation:
        captures = finding.captures
        node, worker, mode = state.node, state.worker, state.mode
        name = captures.get("name") or captures.get("process")
        if quoted and state.quote_process:
            name = state.quote_process
        if worker is None and name:
            pm = _PROCESS_RE.match(name)
            if pm is not None:
                mode, node = pm.group("mode"), pm.group("node")
                worker = f"{mode}_w{int(pm.group('idx'))}"
        if node is None and captures.get("node"):
            node = captures["node"]
        rank = None
        for key, label in _RANK_KEYS:
            value = captures.get(key)
            if value:
                rank = f"{label}{value}"
                break
        stamp = self._time(state, text)
        self._order += 1
        observation = Observation(
            finding=finding,
            file=file,
            line_no=line_no,
            text=text,
            order=self._order,
            node=node,
            worker=worker,
            mode=mode,
            rank=rank,
            time=stamp[0] if stamp else None,
            time_has_date=stamp[1] if stamp else False,
            quoted=quoted,
        )
        group = self._groups.get(observation.key)
        if group is None:
            self._groups[observation.key] = [observation, 1, line_no]
        else:
            if group[0].quoted and not quoted:
                group[0] = observation  # the worker's own line beats srtctl's quote of it
            group[1] += 1
            group[2] = max(group[2], line_no)
        if len(self._findings) < self._max:
            self._findings.append(observation)
        else:
            self._dropped += 1
        return observation

    def _time(self, state: _FileTriage, text: str) -> tuple[float, bool] | None:
        found = line_time(text)
        if found is None:
            # An undated line (a traceback) takes the time of the last dated line above it.
            for previous in state.recent.latest():
                found = line_time(previous)
                if found is not None:
                    break
        if found is None:
            if state.last_stamp is not None:
                return state.last_stamp
            # Nothing dated above it yet: the next dated line of the file bounds it.
            state.awaiting_time = True
            return None
        stamp = self._normalise(state, found)
        last = state.last_stamp
        if last is not None:
            # A file is written in order: a line stamped to the second (`[... 10:48:27 TP7]`)
            # after one stamped to the microsecond (`E0605 10:48:27.885119`) is not earlier.
            same = last[1] == stamp[1]
            ahead = last[0] - stamp[0] if same else last[0] % 86400.0 - stamp[0] % 86400.0
            if 0.0 < ahead < 1.0:
                stamp = (stamp[0] + ahead + 1e-6, stamp[1])  # just after, whatever the rounding
        state.last_stamp = stamp
        return stamp

    @staticmethod
    def _normalise(state: _FileTriage, found: tuple[float, bool]) -> tuple[float, bool]:
        seconds, has_date = found
        if has_date:
            state.last_date = seconds - seconds % 86400.0
            return found
        if state.last_date is not None:
            return state.last_date + seconds, True
        return found


def _narrower(new: Observation, current: Observation) -> bool:
    """Whether ``new`` names a failure more narrowly than ``current`` (the diagnosis' order:
    startup before infra before runtime, then the higher priority)."""
    if current.generic != new.generic:
        return current.generic
    if current.finding.family != new.finding.family:
        return current.finding.family  # a regex-found cause over a family or resemblance match
    return (CATEGORY_RANK.get(new.category, 9), -new.finding.priority) < (
        CATEGORY_RANK.get(current.category, 9),
        -current.finding.priority,
    )


def _written_ago(lines: list[str], index: int) -> float:
    """How long before the last dated line of ``lines`` the line at ``index`` was written (by
    the log's own clock; 0 when either has no time)."""
    at = line_time(lines[index]) if 0 <= index < len(lines) else None
    if at is None:
        return 0.0
    for line in reversed(lines[index:]):
        last = line_time(line)
        if last is not None and last[1] == at[1]:
            return max(0.0, last[0] - at[0])
    return 0.0


# --------------------------------------------------------------------------- files on this machine

LOG_SUFFIXES = (".out", ".log", ".err")
_FEED_BATCH = 4096
_SPARSE_MIN_LINES = 8  # a smaller batch is fed line by line (the prefilter's set-up would cost more)


_BLOCK = 1 << 20  # read_lines' block: a long line's pieces end where its blocks do
_CHUNK = 8 * _BLOCK  # the fast reader's chunk (a multiple of _BLOCK)
_MAX_CARRY = 4 * _CHUNK  # a line still without its end after this many bytes: read as read_lines does


def feed_file(triage: Triage, path: Path, *, fast: bool = True) -> None:
    """Feed a whole log file on this machine, line by line in batches; ``OSError`` when it cannot be read.

    With ``fast`` (and a catalog whose every signature has keywords), the lines of a file other
    than the sweep log are found in big chunks: only those a :class:`~console.prefilter.LineFilter`
    takes (and those after them while a traceback is open or a finding waits for its time) get
    the full treatment; the findings, stages and diagnosis are the same as line by line."""
    name = str(path)
    # A regular file only, opened without following a last link or blocking on a FIFO.
    with os.fdopen(open_regular(name), "rb") as fh:
        line_filter = _line_filter(triage, name) if fast else None
        if line_filter is not None:
            _SparseReader(triage, name, line_filter).read(fh)
            return
        batch: list[str] = []
        for line in read_lines(fh):
            batch.append(line)
            if len(batch) >= _FEED_BATCH:
                triage.feed(name, batch)
                batch = []
        triage.feed(name, batch)


def _line_filter(triage: Triage, name: str) -> LineFilter | None:
    stage_keywords = triage.tracker.line_keywords(name)
    if stage_keywords is None or not triage.matcher.keyed_only:
        return None
    # With a novel-line signature every error-level line is a template to keep (and maybe a
    # finding): what is_error_level looks for first is taken too.
    novel = triage.matcher.novel_signature is not None
    key = (triage.matcher, stage_keywords, novel)
    found = _FILTERS.get(key)
    if found is None:
        hints = ERROR_HINT_LITERALS if novel else ()
        found = LineFilter(
            (*triage.matcher.keywords, *stage_keywords, TRACEBACK_OPENER, FRAME_OPENER, *hints),
            line_starts=ERROR_HINT_LINE_STARTS if novel else (),
        )
        _FILTERS[key] = found
    return found


_FILTERS: dict[tuple[Matcher, tuple[str, ...], bool], LineFilter] = {}


class _SparseReader:
    """One file read in chunks, its lines fed to the triage as :func:`feed_file` line by line would:
    the same line numbers, the stage rules of a batch applied before the worker failures its
    findings tell, the clock read once a batch, the same lines to date an undated finding."""

    def __init__(self, triage: Triage, name: str, line_filter: LineFilter) -> None:
        self.triage = triage
        self.name = name
        self.filter = line_filter
        self.state = triage._file(name)
        if self.state.stream is None:
            self.state.stream = triage.matcher.stream()
        self.line_no = self.state.lines  # lines fed so far, as read_lines gives them
        self.batch_end = self.line_no + _FEED_BATCH
        self.failures: list[Observation] = []  # the fatal and error findings of a worker in this batch
        self.update = TriageUpdate()

    def read(self, fh: BinaryIO) -> None:
        # A worker is known from its file, lines or not.
        self.triage.tracker.feed(self.name, (), first_line_no=self.line_no + 1)
        at = 0  # the file offset of data
        carry = b""  # the start of a line still without its end (the bytes before data)
        while True:
            data = fh.read(_CHUNK)
            if not data:
                break
            first = 0
            if carry:
                first = data.find(b"\n") + 1
                if not first:
                    carry += data
                    at += len(data)
                    if len(carry) > _MAX_CARRY:
                        self._read_rest(fh, carry, at - len(carry))
                        carry = b""
                        break
                    continue
                bridge = carry + data[:first]
                self._region(bridge, 0, len(bridge), at - len(carry))
            last = data.rfind(b"\n") + 1
            if last > first:
                self._region(data, first, last, at)
            carry = data[max(first, last) :]
            at += len(data)
        if carry:
            for raw in self._exact(carry, 0, len(carry), at - len(carry), final=True):
                self._take(raw)
        while self.line_no >= self.batch_end:
            self._end_batch(lines=True)
        self._end_batch(lines=self.line_no > self.batch_end - _FEED_BATCH)  # the last (maybe empty) batch
        self.state.lines = self.line_no
        self.triage.tracker.feed(self.name, (), first_line_no=self.line_no + 1)

    def _quiet(self) -> bool:
        stream = self.state.stream
        return not self.state.awaiting_time and not (stream is not None and stream.inside)

    def _region(self, region: bytes, pos: int, end: int, offset: int) -> None:
        """The whole lines ``region[pos:end]`` (``end`` past a newline); ``offset`` is the file
        offset of ``region``."""
        starts = self.filter.lines(region, pos, end)
        i = 0
        while True:
            if self._quiet():
                while i < len(starts) and starts[i] < pos:
                    i += 1
                if i == len(starts):
                    break
                start = starts[i]
            elif pos < end:
                start = pos  # a traceback is open or a finding waits for a time: every line counts
            else:
                break
            if start > pos:
                self._skip(region, pos, start)
            stop = region.find(b"\n", start) + 1
            for raw in self._exact(region, start, stop, offset):
                self._take(raw)
            pos = stop
        if pos < end:
            self._skip(region, pos, end)

    def _skip(self, region: bytes, start: int, end: int) -> None:
        count = region.count(b"\n", start, end)
        self.state.recent.skip(region, start, end, count)
        self.line_no += count

    @staticmethod
    def _exact(data: bytes, start: int, stop: int, offset: int, *, final: bool = False) -> list[str]:
        """The lines read_lines gives for ``data[start:stop]`` (whole lines at file offset
        ``offset + start``): fed in the pieces its blocks make."""
        if not final and stop - start <= 2 * MAX_TEXT_CHARS:
            # One line too short to be cut or split on its redraws: as _LineAssembler gives it.
            piece = data[start : stop - 1]
            return [(piece[:-1] if piece.endswith(b"\r") else piece).decode("utf-8", "replace")]
        assembler = _LineAssembler(MAX_TEXT_CHARS)
        out: list[str] = []
        pos = start
        while pos < stop:
            boundary = ((offset + pos) // _BLOCK + 1) * _BLOCK - offset
            cut = min(stop, boundary)
            out.extend(assembler.feed(data[pos:cut]))
            pos = cut
        if final:
            out.extend(assembler.finish())
        return out

    def _read_rest(self, fh: BinaryIO, buf: bytes, offset: int) -> None:
        """A line with no end in sight: the rest of the file as read_lines reads it."""
        assembler = _LineAssembler(MAX_TEXT_CHARS)
        pos = 0
        while pos < len(buf):
            cut = min(len(buf), ((offset + pos) // _BLOCK + 1) * _BLOCK - offset)
            for raw in assembler.feed(buf[pos:cut]):
                self._take(raw)
            pos = cut
        while True:
            data = fh.read(_BLOCK)
            if not data:
                break
            for raw in assembler.feed(data):
                self._take(raw)
        for raw in assembler.finish():
            self._take(raw)

    def _take(self, raw: str) -> None:
        """One line, fully: its stage rules, then its match."""
        self.line_no += 1
        while self.line_no > self.batch_end:
            self._end_batch(lines=True)
        text = raw if len(raw) <= MAX_TEXT_CHARS and raw.isprintable() else _clean(raw)
        triage = self.triage
        triage.tracker.feed(self.name, (text,), first_line_no=self.line_no)
        triage._line(self.name, self.state, self.line_no, raw, text, self.update, self.failures)
        self.update.findings.clear()

    def _end_batch(self, *, lines: bool) -> None:
        """The end of a batch line by line would feed: its worker failures told, the clock read
        once for it (a worker's output, for a stall)."""
        for observation in self.failures:
            self.triage._worker_failed(self.name, self.state, observation)
        self.failures.clear()
        self.triage._fed(self.state, lines)
        self.batch_end += _FEED_BATCH


def within(path: Path, root: Path) -> bool:
    """Whether ``path`` resolves inside ``root`` (a symbolic link out of a job's dir does not)."""
    return inside(os.path.realpath(path), [os.path.realpath(root)])


def diagnose_output_dir(
    output_dir: str | Path, state: str | None = None, *, earlier: Sequence[tuple[str, str]] = ()
) -> Diagnosis | None:
    """The diagnosis of a job from its logs on this machine (``earlier``: the arm's earlier
    attempts' root causes, see :class:`Triage`); None when there are none."""
    triage = triage_output_dir(output_dir, Triage(earlier=earlier))
    return triage.diagnose(state) if triage is not None else None


def triage_output_dir(output_dir: str | Path, triage: Triage | None = None) -> Triage | None:
    """Every log of a job dir on this machine read into one triage (``triage``: one that knows
    the attempt's history, else a fresh one); None when there are none."""
    logs = Path(output_dir) / "logs"
    try:
        files = sorted(p for p in logs.iterdir() if p.is_file() and p.name.endswith(LOG_SUFFIXES) and within(p, logs))
    except OSError:
        return None
    if not files:
        return None
    triage = triage if triage is not None else Triage()
    for path in files:
        try:
            feed_file(triage, path)
        except OSError:
            continue
    return triage
