"""srt-console's log agent: runs next to the logs (a cluster's login node, or this machine).

Standalone and stdlib-only; it must run on the login node's own ``python3`` (3.6 or newer), so
it keeps to 3.6 syntax and imports nothing from ``console``. The console starts it as
``python3 -c <bootstrap>`` and writes ``<length>\\n<this source>`` to its stdin, followed by
commands; ``python3 agent.py`` also works (commands only). It exits when stdin closes.

Commands (stdin), one JSON object per line:

- ``{"op": "watch", "dir": D, "results": R?, "offsets": {file: offset}?, "lines": {file: n}?,
  "inodes": {file: ino}?, "seen": {file: [size, mtime]}?, "keywords": [..]?, "big": bytes?,
  "tail": bytes?}``: follow job dir
  ``D`` (and a results dir ``R``, the one holding ``fixed-seq/``). ``file`` keys are paths relative
  to ``D`` (``logs/sweep_1.log``; files of ``R`` too, e.g. ``../../results/1/fixed-seq/x-c4.json``).
  ``offsets`` say where streaming resumes, ``lines`` how many lines precede each offset (counted
  here when missing), ``inodes`` which file the offsets belong to (a different inode: rotated),
  ``seen`` which result files were already reported (not reported again unless they changed).
  ``~`` in paths is this machine's home.
  Watching a dir again updates its settings; files already followed keep their positions.
- ``{"op": "unwatch", "dir": D}``
- ``{"op": "read", "id": N, "dir": D?, "file": F, "offset": O, "length": L}``: a range of a file
  (``F`` relative to ``D``, or absolute). Negative ``O`` counts from the end. With ``D``, the
  file must resolve inside ``D`` (or the results dir of a watch of ``D``).
- ``{"op": "head_tail", "id": N, "dir": D?, "file": F, "head": H, "tail": T}``
- ``{"op": "ping", "id": N}``

Records (stdout): a JSON header line; when it has ``"len"``, exactly that many raw bytes and a
newline follow (a reader that does not find the newline is out of step and must restart).

- ``hello {protocol, pid, python, host}`` once at start.
- ``hb {time, watching}`` every ``HEARTBEAT_S`` seconds, whatever else is going on.
- ``file {dir, file, kind: log|result, size, offset, line_count, ino}``: a file was found (for
  logs, ``offset`` is where streaming starts and ``line_count`` the number of lines before it).
- ``data {dir, file, offset, len}`` + bytes: the bytes of a log from ``offset``. Offsets are exact
  and contiguous per file until a ``truncated``/``rotated`` record.
- ``candidates {dir, file, from, to, line_count, lines: [[offset, line_no, text], ...]}``: a backlog
  ``[from, to)`` was triaged instead of sent: only lines holding a keyword, with their byte offset
  and 1-based line number; ``line_count`` is the number of lines before ``to``. Data resumes at ``to``.
  A line longer than ``CANDIDATE_BYTES`` (or made of ``\r`` redraws) comes as several entries of
  the same line number: the text around each keyword, within its redraw (the first keyword's and
  the last ones, ``CANDIDATE_WINDOWS`` at most), so a failure at the end of a long line is there.
  One record holds at most ``MAX_HITS`` lines (``MAX_HIT_BYTES`` of text); a backlog takes several.
- ``truncated|rotated {dir, file, size, ino}``: the file shrank or was replaced; it restarts at 0.
- ``gone {dir, file}``: the file disappeared.
- ``skipped {dir, file, reason}``: a file that is not read (a symbolic link out of the watched dirs,
  a loop, a special file), once per file.
- ``result {dir, file, size, head_len, head_is_whole, seen, len}`` + head bytes then tail bytes:
  a result file appeared or changed (at most once a second). Result files are never streamed.
- ``reply {id, ...}`` (+ bytes) for read/head_tail/ping; ``reply {id, error, errno}`` on failure.
- ``error {msg}``: a command could not be understood.
"""
# ruff: noqa: UP006, UP035, UP045

import contextlib
import errno
import json
import os
import platform
import re
import socket
import stat
import sys
import threading
import time
from typing import IO, Any, Dict, List, Optional, Pattern, Set, Tuple

try:
    import queue
except ImportError:  # pragma: no cover - Python 2 is not supported; this keeps the error clear
    raise SystemExit("srt-console agent: needs Python 3.6 or newer") from None

PROTOCOL = 1

POLL_S = 0.05  # how often a changing file is checked (the agent's share of write -> finding)
# The main loop sleeps POLL_S between rounds; a file is due again a little earlier, so that
# every round looks at it (and not every other one).
POLL_SLACK = 0.5
IDLE_POLL_S = 1.0  # how often a file that has not changed for IDLE_AFTER_S is checked
IDLE_AFTER_S = 30.0
REVALIDATE_S = 1.0  # how often a log is reopened rather than stat()ed (network filesystems)
DISCOVER_S = 0.5  # how often a watched dir is listed for new files
HEARTBEAT_S = 2.0

DATA_CHUNK = 1 << 20  # payload of one data record at most
FILE_ROUND_BYTES = 4 << 20  # bytes streamed per file per round (others get their turn)
ROUND_BYTES = 16 << 20  # bytes streamed per round over all files
SCAN_CHUNK = 8 << 20  # triage reads this much at a time
SCAN_ROUND_BYTES = 32 << 20  # triage work per round (heartbeats keep flowing)
COUNT_ROUND_BYTES = 32 << 20  # line counting work per round (a slow filesystem must not stop heartbeats)
LONG_LINE_SEARCH = 64 << 20  # a line longer than this ends triage (the rest is streamed)

BIG_BYTES = 4 << 20  # a backlog over this is triaged (candidates + the last TAIL_BYTES)
TAIL_BYTES = 256 << 10
CANDIDATE_BYTES = 4096  # text of one candidate line at most (a longer line: one window per keyword)
CANDIDATE_WINDOWS = 8  # windows of one long line at most: its first keyword's and its last ones
MAX_HITS = 2000  # candidate lines in one record at most
MAX_HIT_BYTES = 1 << 20  # candidate text in one record at most
MAX_READ = 16 << 20  # one range read at most
RESULT_HEAD = 16 << 10
RESULT_TAIL = 16 << 10
RESULT_MIN_INTERVAL_S = 1.0  # a growing result file is reported at most this often
HEAD_MARKER = b'"input_lens"'
MIN_SUFFIX = 4

LOG_SUFFIXES = (".out", ".log", ".err")

# Result files: the one set of name and place rules, the console's too (console.results.names).
# A name says the layout and the numbers encoded in it; a place says which layouts count there.
_GPUS_CTX_GEN = r"(?:_gpus_(?P<gpus>\d+))?(?:_ctx_(?P<ctx>\d+)_gen_(?P<gen>\d+))?"
RESULT_NAMES = (  # most specific first: a fixed-seq ``-c<N>.json`` suffix is the loosest pattern
    ("sa-bench", re.compile(r"^results_concurrency_(?P<c>\d+)" + _GPUS_CTX_GEN + r"\.json$")),
    ("legacy", re.compile(r"concurrency_(?P<c>\d+)_req_rate_(?P<rate>[^_/]+?)" + _GPUS_CTX_GEN + r"\.json$")),
    # Files renamed by InferenceX's collectors: ``..._conc<N>_gpus_<T>[_ctx_<P>_gen_<D>].json``.
    ("collected", re.compile(r"_conc(?P<c>\d+)" + _GPUS_CTX_GEN + r"\.json$")),
    ("fixed-seq", re.compile(r"-c(?P<c>\d+)\.json$")),
)
ROLLUP_NAME = "benchmark-rollup.json"
# Places, relative to the job dir (``job``, ``logs``, ``logs/*`` for any subdir, ``logs/fixed-seq``)
# or to the results dir (``results``, ``results/fixed-seq``).
RESULT_PLACES = {
    "job": ("legacy",),
    "logs": ("sa-bench", "legacy", "rollup"),
    "logs/*": ("sa-bench", "legacy"),
    "logs/fixed-seq": ("sa-bench", "legacy", "fixed-seq", "collected"),
    "results": ("rollup",),
    "results/fixed-seq": ("fixed-seq", "collected"),
}


def parse_result_name(name: str) -> Optional[Tuple[str, Optional[int], Dict[str, Optional[int]]]]:
    """(kind, concurrency, {gpus, ctx, gen}) of a result file's base name; None when it is not one.
    ``*.pytorch.json`` companions match the same patterns but are not results."""
    name = name.rsplit("/", 1)[-1]
    if not name.endswith(".json") or name.endswith(".pytorch.json"):
        return None
    if name == ROLLUP_NAME:
        return "rollup", None, {}
    for kind, pattern in RESULT_NAMES:
        m = pattern.search(name)
        if m is not None:
            groups = m.groupdict()
            numbers = dict((k, int(groups[k]) if groups.get(k) else None) for k in ("gpus", "ctx", "gen"))
            return kind, int(m.group("c")), numbers
    return None


def result_place(parts: List[str], in_results: bool) -> Optional[str]:
    """The place of a file from the dirs between the watched dir and it (``["logs", "x"]``)."""
    if in_results:
        return {0: "results", 1: "results/fixed-seq" if parts[:1] == ["fixed-seq"] else None}.get(len(parts))
    if not parts:
        return "job"
    if parts[0] != "logs" or len(parts) > 2:
        return None
    if len(parts) == 1:
        return "logs"
    return "logs/fixed-seq" if parts[1] == "fixed-seq" else "logs/*"


def result_kind(name: str, place: Optional[str]) -> Optional[str]:
    """The kind of result file ``name`` is at ``place``, or None when it does not count there."""
    parsed = parse_result_name(name)
    if parsed is None or place is None or parsed[0] not in RESULT_PLACES.get(place, ()):
        return None
    return parsed[0]


# The keyword prefilter, also the console's (console.signatures compiles these sources for text;
# here they are compiled for bytes). Every keyword is searched from one of a few "lead"
# characters on: one regex per lead character, each a trie of keyword suffixes starting with
# it, so the regex engine runs its fast single-character scan and tries the trie only where
# that character occurs. Few lead characters (most keywords hold an "e") keep a line's cost at
# a handful of fast scans.


def literal_union(words: List[str]) -> str:
    """A regex source matching any of ``words``, factored as a trie: where the first character
    is shared, the engine scans for it and tries at most one branch per next character."""
    trie: Dict[str, Any] = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: Dict[str, Any]) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        if "" in node:
            return "(?:" + "|".join(branches) + ")?"
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return build(trie)


def prefilter_sources(keywords: List[str]) -> List[str]:
    """Regex sources that together find every (lowercased) text holding a keyword."""
    remaining = set(k.lower() for k in keywords if k)
    # A keyword that contains another one adds nothing to a union.
    remaining = set(k for k in remaining if not any(o != k and o in k for o in remaining))
    if not remaining:
        return []

    def lead_position(keyword: str, ch: str) -> int:
        need = min(len(keyword), MIN_SUFFIX)
        return keyword.find(ch, 0, len(keyword) - need + 1)

    # Lead characters chosen greedily (the one that covers most keywords first) ...
    leads: List[str] = []
    uncovered = set(remaining)
    while uncovered:
        counts: Dict[str, int] = {}
        for keyword in uncovered:
            for ch in set(keyword):
                if lead_position(keyword, ch) >= 0:
                    counts[ch] = counts.get(ch, 0) + 1
        lead = max(sorted(counts), key=lambda c: counts[c])
        leads.append(lead)
        uncovered = set(k for k in uncovered if lead_position(k, lead) < 0)
    # ... then each keyword searched from its earliest lead character: the longest suffix is
    # the most selective one.
    groups: Dict[str, Set[str]] = dict((lead, set()) for lead in leads)
    for keyword in remaining:
        start = min(p for p in (lead_position(keyword, lead) for lead in leads) if p >= 0)
        groups[keyword[start]].add(keyword[start:])
    return [literal_union(sorted(words)) for words in groups.values() if words]


def keyword_gates(keywords: List[str]) -> List[Pattern[bytes]]:
    """The prefilter compiled for the bytes of a log."""
    return [re.compile(source.encode("utf-8")) for source in prefilter_sources(keywords)]


def keyword_windows(data: bytes, low: bytes, start: int, end: int, gates: List[Pattern[bytes]]) -> List[bytes]:
    """What of the line ``data[start:end]`` to triage: the line when it is short; else the text
    around each keyword (``CANDIDATE_BYTES`` at most, within its ``\\r`` redraw), the first
    keyword's and the last ones. ``low`` is ``data`` lowercased."""
    if end > start and data[end - 1 : end] == b"\r":
        end -= 1  # a CRLF ending
    if end - start <= CANDIDATE_BYTES and data.find(b"\r", start, end) < 0:
        return [data[start:end]]
    windows = hit_windows(data, low, start, end, gates, start)
    if len(windows) > CANDIDATE_WINDOWS:
        windows = windows[:1] + windows[-(CANDIDATE_WINDOWS - 1) :]
    return windows


def hit_windows(data: bytes, low: bytes, start: int, end: int, gates: List[Pattern[bytes]], since: int) -> List[bytes]:
    """The text around each keyword found in ``data[since:end]``, within ``[start, end)`` and
    within its ``\\r`` redraw, in order; a keyword inside the previous window adds none."""
    found = []
    for gate in gates:
        pos = since
        while pos < end:
            m = gate.search(low, pos, end)
            if m is None:
                break
            found.append(m.start())
            pos = m.end()
    half = CANDIDATE_BYTES // 2
    spans = []  # type: List[Tuple[int, int]]
    for hit in sorted(found):
        if spans and hit < spans[-1][1]:
            continue
        lo = max(start, hit - half)
        hi = min(end, lo + CANDIDATE_BYTES)
        cr = data.rfind(b"\r", lo, hit)
        if cr >= 0:
            lo = cr + 1
        cr = data.find(b"\r", hit, hi)
        if cr >= 0:
            hi = cr
        spans.append((lo, hi))
    return [data[lo:hi] for lo, hi in spans]


class Output:
    """Framed records on stdout."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.lock = threading.Lock()

    def send(self, header: Dict[str, Any], payload: Optional[bytes] = None) -> None:
        if payload is not None:
            header["len"] = len(payload)
        line = json.dumps(header, separators=(",", ":")).encode("utf-8") + b"\n"
        with self.lock:
            self.stream.write(line)
            if payload is not None:
                self.stream.write(payload)
                self.stream.write(b"\n")

    def flush(self) -> None:
        with self.lock:
            self.stream.flush()


class Tracked:
    """One file of a watched dir."""

    def __init__(self, rel: str, path: str, kind: str) -> None:
        self.rel = rel
        self.path = path
        self.kind = kind
        self.fd = -1
        self.ino: Optional[Tuple[int, int]] = None
        self.offset = 0
        self.lines: Optional[int] = None
        self.phase = "new"  # new -> count -> scan -> stream
        self.count_pos = 0
        self.count_lines = 0
        self.scan_end = 0
        self.missing = False
        self.last_change = time.monotonic()
        self.next_poll = 0.0
        self.next_revalidate = 0.0
        self.result_size = -1
        self.result_mtime = -1.0
        self.result_sent = -RESULT_MIN_INTERVAL_S

    def close(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1


class Watch:
    """A job dir being followed."""

    def __init__(self, agent: "Agent", cmd: Dict[str, Any]) -> None:
        self.agent = agent
        self.dir = str(cmd["dir"])  # as the console names it (records carry this)
        self.root = os.path.expanduser(self.dir)  # where it is
        self.files: Dict[str, Tracked] = {}
        self.skipped: Set[str] = set()  # reported once each
        self.next_discover = 0.0
        self.update(cmd)

    def roots(self) -> List[str]:
        """Where this watch's files may be: the job dir and the results dir."""
        return [self.root] + ([self.results] if self.results else [])

    def update(self, cmd: Dict[str, Any]) -> None:
        results = cmd.get("results")
        self.results = os.path.expanduser(str(results)) if results else None
        self.offsets = dict((str(k), int(v)) for k, v in (cmd.get("offsets") or {}).items())
        self.line_counts = dict((str(k), int(v)) for k, v in (cmd.get("lines") or {}).items())
        self.inodes = dict((str(k), int(v)) for k, v in (cmd.get("inodes") or {}).items())
        self.seen = dict((str(k), v) for k, v in (cmd.get("seen") or {}).items() if isinstance(v, list) and len(v) == 2)
        keywords = cmd.get("keywords")
        if keywords is not None:
            self.gates = keyword_gates([str(k) for k in keywords])
        elif not hasattr(self, "gates"):
            self.gates = []
        self.big = int(cmd.get("big") or BIG_BYTES)
        self.tail = int(cmd.get("tail") or TAIL_BYTES)
        self.next_discover = 0.0

    def close(self) -> None:
        for tracked in self.files.values():
            tracked.close()
        self.files.clear()

    # -- discovery ----------------------------------------------------------------------------

    def discover(self, now: float) -> None:
        if now < self.next_discover:
            return
        self.next_discover = now + DISCOVER_S
        skipped: List[Tuple[str, str]] = []
        for name, path, parts in listing(self.root, "logs", 2, skipped):
            if parts and name.endswith(LOG_SUFFIXES):
                self.add(path, "log")
            elif result_kind(name, result_place(parts, False)) is not None:
                self.add(path, "result")
        if self.results:
            for name, path, parts in listing(self.results, "fixed-seq", 1, skipped):
                if result_kind(name, result_place(parts, True)) is not None:
                    self.add(path, "result")
        for path, reason in skipped:
            rel = os.path.relpath(path, self.root)
            if rel not in self.skipped:
                self.skipped.add(rel)
                self.agent.out.send({"t": "skipped", "dir": self.dir, "file": rel, "reason": reason})

    def add(self, path: str, kind: str) -> None:
        rel = os.path.relpath(path, self.root)
        if rel in self.files:
            return
        tracked = Tracked(rel, path, kind)
        self.files[rel] = tracked
        if kind == "result" and rel in self.seen:  # reported to this console before
            tracked.result_size, tracked.result_mtime = int(self.seen[rel][0]), float(self.seen[rel][1])
            tracked.result_sent = -RESULT_MIN_INTERVAL_S
        if kind == "log":
            tracked.offset = max(0, self.offsets.get(rel, 0))
            tracked.lines = self.line_counts.get(rel)
            if tracked.offset == 0:
                tracked.lines = 0

    # -- logs ---------------------------------------------------------------------------------

    def open_log(self, t: Tracked) -> Optional[os.stat_result]:
        """Open the file; None when it is gone or unreadable (reported once)."""
        t.close()
        try:
            t.fd = open_regular(t.path, self.roots())
            st = os.fstat(t.fd)
        except OSError as exc:
            t.close()
            if not t.missing and exc.errno != errno.ENOENT:
                self.agent.out.send({"t": "error", "dir": self.dir, "file": t.rel, "msg": str(exc)})
            t.missing = True
            return None
        t.missing = False
        t.ino = (st.st_dev, st.st_ino)
        return st

    def start_log(self, t: Tracked) -> bool:
        """First sight of a log: check the resume point, decide how to catch up."""
        st = self.open_log(t)
        if st is None:
            return False
        out = self.agent.out
        known = self.inodes.get(t.rel)
        if t.offset > 0 and known is not None and known != st.st_ino:
            out.send({"t": "rotated", "dir": self.dir, "file": t.rel, "size": st.st_size, "ino": st.st_ino})
            t.offset, t.lines = 0, 0
        elif t.offset > st.st_size:
            out.send({"t": "truncated", "dir": self.dir, "file": t.rel, "size": st.st_size, "ino": st.st_ino})
            t.offset, t.lines = 0, 0
        t.count_pos, t.count_lines = 0, 0
        t.phase = "count" if t.lines is None else "ready"
        return True

    def announce(self, t: Tracked, size: int) -> None:
        ino = t.ino[1] if t.ino else None
        self.agent.out.send(
            {
                "t": "file",
                "dir": self.dir,
                "file": t.rel,
                "kind": "log",
                "size": size,
                "offset": t.offset,
                "line_count": t.lines,
                "ino": ino,
            }
        )

    def poll_log(self, t: Tracked, now: float, budget: List[int]) -> bool:
        """One look at a log; True when it did work (so the next round comes at once)."""
        if t.phase == "new":
            if now < t.next_poll:
                return False
            if not self.start_log(t):
                t.next_poll = now + IDLE_POLL_S
                return False
        if t.phase == "count":
            return self.count_step(t)
        if t.phase == "ready":
            size = os.fstat(t.fd).st_size
            self.announce(t, size)
            if size - t.offset > self.big:
                t.phase = "scan"
                t.scan_end = size - self.tail
            else:
                t.phase = "stream"
        if t.phase == "scan":
            return self.scan_step(t, budget)
        if now < t.next_poll:
            return False
        return self.stream_step(t, now, budget)

    def count_step(self, t: Tracked) -> bool:
        """Count the lines before the resume offset (when the console did not say)."""
        end = t.offset
        work = 0
        while t.count_pos < end and work < COUNT_ROUND_BYTES:
            data = os.pread(t.fd, min(SCAN_CHUNK, end - t.count_pos), t.count_pos)
            if not data:
                break
            t.count_lines += data.count(b"\n")
            t.count_pos += len(data)
            work += len(data)
        if t.count_pos >= end or work == 0:
            t.lines = t.count_lines
            t.phase = "ready"
        return True

    def scan_step(self, t: Tracked, budget: List[int]) -> bool:
        """Triage part of a big backlog: send its candidate lines instead of its bytes."""
        work = 0
        hits: List[List[Any]] = []
        start = t.offset
        while work < SCAN_ROUND_BYTES and t.offset < t.scan_end:
            data = os.pread(t.fd, SCAN_CHUNK, t.offset)
            work += len(data)
            last = data.rfind(b"\n")
            if last < 0:
                if not self.skip_long_line(t, data, hits):
                    t.phase = "stream"
                    break
                continue
            block = data[: last + 1]
            if t.offset + len(block) > t.scan_end:
                # Stop at the first line end at or after scan_end.
                cut = block.find(b"\n", max(0, t.scan_end - t.offset - 1))
                block = block[: cut + 1]
            if not self.scan_block(t, block, hits):
                break
        if t.offset >= t.scan_end:
            t.phase = "stream"
        if t.offset > start or hits:
            self.agent.out.send(
                {
                    "t": "candidates",
                    "dir": self.dir,
                    "file": t.rel,
                    "from": start,
                    "to": t.offset,
                    "line_count": t.lines,
                    "lines": hits,
                }
            )
        budget[0] -= work // 8  # reading is cheaper than sending, but not free
        return True

    def scan_block(self, t: Tracked, block: bytes, hits: List[List[Any]]) -> bool:
        """Triage whole lines of ``block`` (at ``t.offset``); False when the record is full and
        the block was cut short (the rest is triaged in the next record)."""
        base_lines = t.lines or 0
        low = block.lower()
        starts = set()
        for gate in self.gates:
            pos = 0
            while True:
                m = gate.search(low, pos)
                if m is None:
                    break
                s = low.rfind(b"\n", 0, m.start()) + 1
                starts.add(s)
                e = low.find(b"\n", m.end())
                pos = len(low) if e < 0 else e + 1
        counted, line_no = 0, base_lines
        text_bytes = sum(len(h[2]) for h in hits)
        for s in sorted(starts):
            if hits and (len(hits) >= MAX_HITS or text_bytes >= MAX_HIT_BYTES):
                block = block[:s]
                t.lines = base_lines + block.count(b"\n")
                t.offset += len(block)
                return False
            line_no += block.count(b"\n", counted, s)
            counted = s
            e = block.find(b"\n", s)
            for text in keyword_windows(block, low, s, e, self.gates):
                hits.append([t.offset + s, line_no + 1, text.decode("utf-8", "replace")])
                text_bytes += len(text)
        t.lines = base_lines + block.count(b"\n")
        t.offset += len(block)
        return True

    def skip_long_line(self, t: Tracked, first: bytes, hits: List[List[Any]]) -> bool:
        """A line longer than a scan chunk: find its end, keeping the text around its keywords
        (its first keyword's and its last ones). False: no end found."""
        first_window = None  # type: Optional[bytes]
        last_windows = []  # type: List[bytes]
        carry = b""  # the end of the previous chunk: the text before a keyword at a chunk's start
        data = first
        pos = t.offset
        limit = t.offset + LONG_LINE_SEARCH
        while True:
            nl = data.find(b"\n")
            buf = carry + (data if nl < 0 else data[:nl])
            for window in hit_windows(buf, buf.lower(), 0, len(buf), self.gates, len(carry)):
                if first_window is None:
                    first_window = window
                else:
                    last_windows.append(window)
                    del last_windows[: -(CANDIDATE_WINDOWS - 1)]
            if nl >= 0:
                windows = ([first_window] if first_window is not None else []) + last_windows
                for text in windows:
                    hits.append([t.offset, (t.lines or 0) + 1, text.rstrip(b"\r").decode("utf-8", "replace")])
                t.lines = (t.lines or 0) + 1
                t.offset = pos + nl + 1
                return True
            carry = buf[-CANDIDATE_BYTES:]
            pos += len(data)
            if pos >= limit:
                return False
            data = os.pread(t.fd, SCAN_CHUNK, pos)
            if not data:
                return False

    def stream_step(self, t: Tracked, now: float, budget: List[int]) -> bool:
        out = self.agent.out
        try:
            if now >= t.next_revalidate:
                # stat() may answer from a network filesystem's attribute cache (NFS: seconds);
                # opening the file makes the client ask the server (close-to-open consistency).
                t.next_revalidate = now + REVALIDATE_S
                fd = open_regular(t.path, self.roots())
                try:
                    st: Optional[os.stat_result] = os.fstat(fd)
                finally:
                    os.close(fd)
            else:
                st = os.stat(t.path)
        except OSError:
            st = None
        if st is None:
            if not t.missing:
                t.missing = True
                self.drain(t, budget, limit=False)
                out.send({"t": "gone", "dir": self.dir, "file": t.rel})
            t.next_poll = now + IDLE_POLL_S
            return False
        if t.missing or (st.st_dev, st.st_ino) != t.ino:
            # Replaced: finish the old file (when still open), then start the new one from 0.
            if not t.missing:
                self.drain(t, budget, limit=False)
            t.missing = False
            out.send({"t": "rotated", "dir": self.dir, "file": t.rel, "size": st.st_size, "ino": st.st_ino})
            t.offset, t.lines = 0, 0
            t.phase = "new"
            t.last_change = now
            return True
        if st.st_size < t.offset:
            out.send({"t": "truncated", "dir": self.dir, "file": t.rel, "size": st.st_size, "ino": st.st_ino})
            t.offset, t.lines = 0, 0
            t.phase = "ready"
            t.last_change = now
            return True
        if st.st_size == t.offset:
            idle = now - t.last_change > IDLE_AFTER_S
            t.next_poll = now + (IDLE_POLL_S if idle else POLL_SLACK * POLL_S)
            return False
        t.last_change = now
        busy = self.drain(t, budget, limit=True)
        # More than a round's share waiting: come back in the next round, not after a pause.
        t.next_poll = now if t.offset < st.st_size else now + POLL_SLACK * POLL_S
        return busy

    def drain(self, t: Tracked, budget: List[int], limit: bool) -> bool:
        """Send bytes from the offset: up to the round's budget, or (limit=False) to EOF."""
        sent = 0
        while not limit or (sent < FILE_ROUND_BYTES and budget[0] > 0):
            try:
                data = os.pread(t.fd, DATA_CHUNK, t.offset)
            except OSError as exc:
                self.agent.out.send({"t": "error", "dir": self.dir, "file": t.rel, "msg": str(exc)})
                return False
            if not data:
                break
            self.agent.out.send({"t": "data", "dir": self.dir, "file": t.rel, "offset": t.offset}, data)
            t.offset += len(data)
            sent += len(data)
            budget[0] -= len(data)
        return sent > 0

    # -- results ------------------------------------------------------------------------------

    def poll_result(self, t: Tracked, now: float) -> bool:
        if now < t.next_poll:
            return False
        t.next_poll = now + POLL_S * 2
        try:
            st = os.stat(t.path)
        except OSError:
            if not t.missing:
                t.missing = True
                self.agent.out.send({"t": "gone", "dir": self.dir, "file": t.rel})
            return False
        t.missing = False
        if st.st_size == t.result_size and st.st_mtime == t.result_mtime:
            return False
        if now - t.result_sent < RESULT_MIN_INTERVAL_S:
            t.next_poll = t.result_sent + RESULT_MIN_INTERVAL_S
            return False
        try:
            head, tail, size, whole = head_tail(t.path, RESULT_HEAD, RESULT_TAIL, self.roots())
        except OSError:
            return False
        if t.result_size < 0:
            self.agent.out.send({"t": "file", "dir": self.dir, "file": t.rel, "kind": "result", "size": size})
        # A file rewritten between the stat and the read (truncated, then written again within
        # the same mtime tick) is not what the stat describes: what was read is recorded, and a
        # size the stat did not see makes the next poll read it again.
        mtime = st.st_mtime if size == st.st_size else -1.0
        t.result_size, t.result_mtime, t.result_sent = size, mtime, now
        header: Dict[str, Any] = {
            "t": "result",
            "dir": self.dir,
            "file": t.rel,
            "size": size,
            "head_len": len(head),
            "head_is_whole": whole,
            "seen": [size, mtime],
        }
        self.agent.out.send(header, head + tail)
        return True

    def poll(self, now: float, budget: List[int]) -> bool:
        self.discover(now)
        busy = False
        for t in list(self.files.values()):
            if budget[0] <= 0:
                return True
            try:
                did = self.poll_log(t, now, budget) if t.kind == "log" else self.poll_result(t, now)
                busy = did or busy
            except OSError as exc:
                t.close()
                t.phase = "new"
                t.next_poll = now + IDLE_POLL_S
                self.agent.out.send({"t": "error", "dir": self.dir, "file": t.rel, "msg": str(exc)})
        return busy


def inside(path: str, roots: List[str]) -> bool:
    """Whether ``path`` (already resolved) is one of ``roots`` (resolved) or below one."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def open_regular(path: str, roots: Optional[List[str]] = None) -> int:
    """A read-only descriptor of the regular file ``path``; OSError for anything else.

    The path is resolved first and, with ``roots``, must stay inside one of them (a symbolic
    link out of a job's dir is refused); the resolved path is then opened without following a
    link (one swapped in meanwhile is refused) and without blocking (a FIFO never hangs us)."""
    real = os.path.realpath(path)
    if roots is not None and not inside(real, [os.path.realpath(r) for r in roots]):
        raise OSError(errno.EACCES, "outside the watched dirs (a symbolic link to " + real + ")", path)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(real, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def listing(
    root: str, into: str, depth: int, skipped: Optional[List[Tuple[str, str]]] = None
) -> List[Tuple[str, str, List[str]]]:
    """(name, path, dirs below ``root``) of the regular files in ``root`` and in its subdir
    ``into`` down to ``depth`` levels below ``root``: where logs and result files live.

    Nothing outside ``root`` is listed: a symbolic link is followed only when it resolves
    inside ``root``. An entry that cannot be listed (a loop, a link out, a special file) is
    left out and, with ``skipped``, reported there as (path, reason); the rest is listed."""
    found: List[Tuple[str, str, List[str]]] = []
    real_root = os.path.realpath(root)

    def skip(path: str, reason: str) -> None:
        if skipped is not None:
            skipped.append((path, reason))

    def scan(directory: str, parts: List[str]) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            try:
                if entry.is_symlink():
                    real = os.path.realpath(entry.path)
                    if not inside(real, [real_root]):
                        skip(entry.path, "a symbolic link out of " + root)
                        continue
                    st = os.stat(entry.path)
                    is_file, is_dir = stat.S_ISREG(st.st_mode), stat.S_ISDIR(st.st_mode)
                else:
                    is_file, is_dir = entry.is_file(follow_symlinks=False), entry.is_dir(follow_symlinks=False)
                if is_file:
                    found.append((entry.name, entry.path, parts))
                elif is_dir and (entry.name == into if not parts else len(parts) < depth):
                    scan(entry.path, [*parts, entry.name])
                elif not is_dir and entry.name.endswith((*LOG_SUFFIXES, ".json")):
                    skip(entry.path, "not a regular file")
            except OSError as exc:
                skip(entry.path, exc.strerror or str(exc))

    scan(root, [])
    return found


def head_tail(
    path: str, head_bytes: int, tail_bytes: int, roots: Optional[List[str]] = None
) -> Tuple[bytes, bytes, int, bool]:
    """(head, tail, size, head_is_whole): the head stops early after the ``"input_lens"`` key."""
    fd = open_regular(path, roots)
    try:
        head = b""
        while len(head) < head_bytes:
            chunk = os.pread(fd, min(4096, head_bytes - len(head)), len(head))
            if not chunk:
                return head, b"", len(head), True
            start = max(0, len(head) - len(HEAD_MARKER))
            head += chunk
            if head.find(HEAD_MARKER, start) >= 0:
                break
        size = os.fstat(fd).st_size
        tail_start = max(len(head), size - tail_bytes)
        tail = os.pread(fd, size - tail_start, tail_start) if tail_start < size else b""
        if tail_start == len(head):
            whole = head + tail
            return whole, b"", max(size, len(whole)), True
        return head, tail, size, False
    finally:
        os.close(fd)


class Agent:
    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.stdin = stdin
        self.out = Output(stdout)
        self.watches: Dict[str, Watch] = {}
        self.commands: queue.Queue[Optional[bytes]] = queue.Queue()
        self.next_hb = 0.0

    def read_commands(self) -> None:
        try:
            for line in iter(self.stdin.readline, b""):
                if line.strip():
                    self.commands.put(line)
        except (OSError, ValueError):
            pass
        self.commands.put(None)

    def path_of(self, cmd: Dict[str, Any]) -> Tuple[str, Optional[List[str]]]:
        """The file a command names, and the dirs it must stay in (None: any, no ``dir`` given)."""
        path = os.path.expanduser(str(cmd["file"]))
        directory = cmd.get("dir")
        if not directory:
            return path, None
        root = os.path.expanduser(str(directory))
        if not os.path.isabs(path):
            path = os.path.join(root, path)
        watch = self.watches.get(str(directory))
        return path, watch.roots() if watch is not None else [root]

    def handle(self, raw: bytes) -> None:
        try:
            cmd = json.loads(raw.decode("utf-8"))
            if not isinstance(cmd, dict):
                raise ValueError("not an object")
            op = cmd.get("op")
        except ValueError as exc:
            self.out.send({"t": "error", "msg": f"bad command: {exc}"})
            return
        rid = cmd.get("id")
        try:
            if op == "watch":
                directory = str(cmd["dir"])
                if directory in self.watches:
                    self.watches[directory].update(cmd)
                else:
                    self.watches[directory] = Watch(self, cmd)
            elif op == "unwatch":
                watch = self.watches.pop(str(cmd["dir"]), None)
                if watch is not None:
                    watch.close()
            elif op == "read":
                length = cmd.get("length")
                path, roots = self.path_of(cmd)
                self.read(rid, path, roots, int(cmd.get("offset") or 0), MAX_READ if length is None else int(length))
            elif op == "head_tail":
                path, roots = self.path_of(cmd)
                head, tail, size, whole = head_tail(
                    path, int(cmd.get("head") or RESULT_HEAD), int(cmd.get("tail") or RESULT_TAIL), roots
                )
                header: Dict[str, Any] = {
                    "t": "reply",
                    "id": rid,
                    "size": size,
                    "head_len": len(head),
                    "head_is_whole": whole,
                }
                self.out.send(header, head + tail)
            elif op == "ping":
                self.out.send({"t": "reply", "id": rid, "time": time.time()})
            else:
                self.out.send({"t": "error", "id": rid, "msg": f"unknown op {op!r}"})
        except (KeyError, TypeError, ValueError) as exc:
            message = f"bad command: {exc!r}"
            self.out.send({"t": "reply" if rid is not None else "error", "id": rid, "error": message, "msg": message})
        except OSError as exc:
            self.out.send({"t": "reply", "id": rid, "error": exc.strerror or str(exc), "errno": exc.errno or 0})

    def read(self, rid: Any, path: str, roots: Optional[List[str]], offset: int, length: int) -> None:
        fd = open_regular(path, roots)
        try:
            size = os.fstat(fd).st_size
            start = size + offset if offset < 0 else offset
            start = min(max(start, 0), size)
            count = min(max(length, 0), MAX_READ, size - start)
            data = os.pread(fd, count, start) if count else b""
        finally:
            os.close(fd)
        self.out.send({"t": "reply", "id": rid, "offset": start, "size": size}, data)

    def run(self) -> int:
        reader = threading.Thread(target=self.read_commands, name="commands")
        reader.daemon = True
        reader.start()
        self.out.send(
            {
                "t": "hello",
                "protocol": PROTOCOL,
                "pid": os.getpid(),
                "python": platform.python_version(),
                "host": socket.gethostname(),
            }
        )
        self.out.flush()
        wait = 0.0
        while True:
            try:
                raw = self.commands.get(timeout=wait) if wait > 0 else self.commands.get_nowait()
            except queue.Empty:
                raw = b""
            while raw is not None:
                if raw:
                    self.handle(raw)
                try:
                    raw = self.commands.get_nowait()
                except queue.Empty:
                    break
            if raw is None:  # stdin closed: the console is gone
                self.out.flush()
                return 0
            now = time.monotonic()
            budget = [ROUND_BYTES]
            busy = False
            for watch in list(self.watches.values()):
                busy = watch.poll(now, budget) or busy
            if now >= self.next_hb:
                self.out.send({"t": "hb", "time": time.time(), "watching": len(self.watches)})
                self.next_hb = now + HEARTBEAT_S
            self.out.flush()
            wait = 0.0 if busy else min(POLL_S, max(0.0, self.next_hb - time.monotonic()))


def main() -> int:
    stdin = sys.stdin.buffer
    stdout = sys.stdout.buffer
    try:
        return Agent(stdin, stdout).run()
    except BrokenPipeError:  # the console went away
        return 0
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    try:
        code = main()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
    os._exit(code)
