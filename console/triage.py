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
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePath
from typing import Any, BinaryIO, Final

from console.agent import inside, open_regular
from console.diagnosis import Diagnosis, FindingGroup, Observation, diagnose_groups
from console.sanitize import clean_line
from console.signatures import Finding, Matcher, MatchStream, default_matcher
from console.stages import SWEEP_LOG_RE, WORKER_FILE_RE, Stage, StageChange, StageSnapshot, StageTracker

__all__ = [
    "MAX_FINDINGS",
    "MAX_TEXT_CHARS",
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
    on ``\\r`` and each redraw is given as a line of its own.
    """
    assembler = _LineAssembler(max_chars)
    read = handle.read
    while True:
        data = read(block)
        if not data:
            break
        yield from assembler.feed(data)
    yield from assembler.finish()


class _LineAssembler:
    """Bytes in, lines out (see :func:`read_lines`)."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.limit = max_chars * 4
        self.current = bytearray()  # the line so far; past the limit, only its last bytes
        self.head = b""  # an over-long line's first bytes
        self.hidden = 0  # bytes of an over-long line neither in head nor in current
        self.redrawn = False  # an over-long line with \r in it: split on \r

    def feed(self, data: bytes) -> Iterator[str]:
        start = 0
        while True:
            nl = data.find(b"\n", start)
            yield from self._add(data[start:] if nl < 0 else data[start:nl])
            if nl < 0:
                return
            yield from self._end_line()
            start = nl + 1

    def finish(self) -> Iterator[str]:
        if self.current or self.head:
            yield from self._end_line()

    def _add(self, piece: bytes) -> Iterator[str]:
        if not self.redrawn and b"\r" in piece and (self.head or len(self.current) + len(piece) > self.limit):
            # An over-long line that redraws itself: from here on, \r ends a line.
            self.redrawn = True
        if self.redrawn:
            first, *rest = piece.split(b"\r")
            self._append(first)
            for part in rest:
                yield self._take()
                self._append(part)
            return
        self._append(piece)

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

    def _end_line(self) -> Iterator[str]:
        yield self._take()
        self.redrawn = False


@dataclass
class TriageUpdate:
    """What one :meth:`Triage.feed` call found."""

    findings: list[Observation] = field(default_factory=list)
    changes: list[StageChange] = field(default_factory=list)


@dataclass
class _FileTriage:
    lines: int = 0
    node: str | None = None
    worker: str | None = None
    mode: str | None = None
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=_LOOKBACK))
    last_date: float | None = None  # epoch of the last midnight seen with a date
    sweep: bool = False  # the orchestrator log (its FAILURE DETAILS block quotes worker logs)
    quote_process: str | None = None  # `--- Process: <name> ---` of the block being read
    quoting: bool = False  # inside the quoted `Last 50 lines of log:`
    failed: bool = False  # the tracker was told this worker failed
    stream: MatchStream | None = None  # this file's matcher (a traceback is one event)
    last_stamp: tuple[float, bool] | None = None  # the last time a finding of this file was given
    awaiting_time: bool = False  # a finding had no time: the next dated line gives one
    next_stamp: tuple[float, bool] | None = None  # that next dated line's time


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
    """Findings, stages and diagnosis of one attempt, kept as its lines arrive."""

    def __init__(self, matcher: Matcher | None = None, *, max_findings: int = MAX_FINDINGS) -> None:
        self.matcher = matcher or default_matcher()
        self.tracker = StageTracker()
        self._files: dict[str, _FileTriage] = {}
        self._findings: list[Observation] = []
        self._groups: dict[tuple[str, str | None, str | None, str | None], list[Any]] = {}
        self._dropped = 0
        self._max = max_findings
        self._order = 0

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
        cleaned = [line if len(line) <= cap and line.isprintable() else _clean(line) for line in raw_lines]
        update = TriageUpdate()
        update.changes.extend(self.tracker.feed(file, cleaned, first_line_no=start))
        if state.stream is None:
            state.stream = self.matcher.stream()
        match = state.stream.match
        recent = state.recent
        line_no = start - 1
        sweep = state.sweep
        for raw, text in zip(raw_lines, cleaned, strict=True):
            line_no += 1
            if state.awaiting_time:
                found = line_time(text)
                if found is not None:
                    state.awaiting_time = False
                    state.next_stamp = state.last_stamp = self._normalise(state, found)
            quoted = sweep and self._quote(state, text)
            # The raw line is matched (both ends of a long line, every segment of a redrawn
            # one); the clean text is what is shown.
            finding = match(raw) if raw else None
            if finding is not None:
                if raw is not text:
                    text = _shown_text(raw, text, finding)
                observation = self._observe(file, state, line_no, text, finding, quoted)
                update.findings.append(observation)
                if observation.severity == "fatal" and state.worker is not None and not state.failed:
                    state.failed = True
                    update.changes.extend(
                        self.tracker.mark_worker_failed(file, observation.id, line_no, consequence=observation.wrapper)
                    )
            recent.append(text)
        state.lines = line_no
        return update

    def diagnose(self, state: str | None = None, *, cancelled: bool = False) -> Diagnosis:
        """The diagnosis now; ``state`` is the scheduler's state when known, ``cancelled`` says the
        operator cancelled the attempt."""
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
        )

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
            for previous in reversed(state.recent):
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


# --------------------------------------------------------------------------- files on this machine

LOG_SUFFIXES = (".out", ".log", ".err")
_FEED_BATCH = 4096


def feed_file(triage: Triage, path: Path) -> None:
    """Feed a whole log file on this machine, line by line in batches; ``OSError`` when it cannot be read."""
    name = str(path)
    # A regular file only, opened without following a last link or blocking on a FIFO.
    with os.fdopen(open_regular(name), "rb") as fh:
        batch: list[str] = []
        for line in read_lines(fh):
            batch.append(line)
            if len(batch) >= _FEED_BATCH:
                triage.feed(name, batch)
                batch = []
        triage.feed(name, batch)


def within(path: Path, root: Path) -> bool:
    """Whether ``path`` resolves inside ``root`` (a symbolic link out of a job's dir does not)."""
    return inside(os.path.realpath(path), [os.path.realpath(root)])


def diagnose_output_dir(output_dir: str | Path, state: str | None = None) -> Diagnosis | None:
    """The diagnosis of a job from its logs on this machine; None when there are none."""
    triage = triage_output_dir(output_dir)
    return triage.diagnose(state) if triage is not None else None


def triage_output_dir(output_dir: str | Path) -> Triage | None:
    """Every log of a job dir on this machine read into one triage; None when there are none."""
    logs = Path(output_dir) / "logs"
    try:
        files = sorted(p for p in logs.iterdir() if p.is_file() and p.name.endswith(LOG_SUFFIXES) and within(p, logs))
    except OSError:
        return None
    if not files:
        return None
    triage = Triage()
    for path in files:
        try:
            feed_file(triage, path)
        except OSError:
            continue
    return triage
