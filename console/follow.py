"""The console side of log following: starts the agent next to the logs and turns its records into events.

One :class:`Follower` per cluster (per transport). It starts ``console/agent.py`` with a tiny
bootstrap (``python3 -c <bootstrap>``; the agent source and then the commands go to its stdin),
tells it which job dirs to watch from which offsets, and delivers:

- :class:`FileEvent` when a file is found, :class:`FileGoneEvent` when it disappears;
- :class:`LinesEvent` with complete lines (decoded, invalid UTF-8 replaced; not sanitized: use
  :mod:`console.sanitize` before display), 1-based line numbers and the exact byte offset after
  them; an incomplete last line is carried over (and shown in ``partial``), never delivered twice;
- :class:`CandidatesEvent` for a big backlog the agent triaged instead of sending: the lines
  holding a prefilter keyword, with their offsets and line numbers;
- :class:`ResultEvent` with a result file's head and tail bytes (never the whole file);
- :class:`ResetEvent` when a file was truncated or replaced (it is followed again from 0);
- :class:`AgentStatus` when the agent starts, is lost (transport dropped, exited, heartbeats
  stopped) and is restarted.

Use::

    follower = Follower(transport, keywords=default_matcher().keywords,
                        on_offsets=lambda d, offsets: store.set_offsets(attempt_id, offsets))
    await follower.start()
    await follower.watch(output_dir, results=results_dir, offsets=store.get_offsets(attempt_id))
    async for event in follower.events():   # or Follower(..., on_event=callback)
        ...
    older = await follower.read_range(output_dir, "logs/sweep_1.log", offset, length)
    await follower.close()

Events wait in a bounded queue: a consumer that stops reading stops the agent's output too
(flow control, not a lost heartbeat).

Offsets: every event moves a per-file position (offset and line count). Positions of events
already handed to the consumer are reported through ``on_offsets(dir, {file: offset})`` (for the
store) and can be passed back to :meth:`Follower.watch` after a console restart (the agent then
counts the lines before each offset, so line numbers stay right). When the agent is lost, it is
restarted with backoff from the positions received so far: nothing is lost and nothing is
delivered twice. Files are named relative to the watched dir (``logs/sweep_1.log``).

Fallback for login nodes without ``python3``: ``mode="tail"`` (or ``"auto"``, which switches to it
when the agent's interpreter is missing) follows each log with ``tail -c +<offset+1> -F`` (one
channel per file, at most ``max_tails`` at once) and polls the others with range reads; new files
are found with ``find``. It moves plain bytes with exact offsets, like the agent, but has no
triage of big backlogs, does not notice truncation or rotation (``tail -F`` reopens the file and
starts it over, so offsets drift), and reports result files by reading their head and tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import posixpath
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, TypeAlias

from console.backoff import Backoff
from console.lines import decode_line
from console.results.names import remote_kind
from console.transport.base import StreamingProcess, Transport, TransportError

log = logging.getLogger(__name__)

BOOTSTRAP = (
    "import sys;b=sys.stdin.buffer;n=int(b.readline());"
    "exec(compile(b.read(n),'srt-console-agent','exec'),{'__name__':'__main__'})"
)

HEARTBEAT_TIMEOUT_S = 6.0
BACKOFF_INITIAL_S = 0.5
BACKOFF_MAX_S = 30.0
HEALTHY_AFTER_S = 10.0  # an agent that ran this long resets the backoff
OFFSETS_INTERVAL_S = 0.5  # on_offsets is called at most this often per dir
MAX_LINE_BYTES = 1 << 20  # a longer line is cut here (the rest of it is skipped, its offset counted)
MAX_HEADER_BYTES = 16 << 20
READ_CHUNK = 1 << 16
QUEUE_SIZE = 4096
STDERR_KEEP = 8192
CLOSE_TIMEOUT_S = 3.0
EXIT_NOT_FOUND = 127

_ERRNO_EXC: dict[int, type[OSError]] = {2: FileNotFoundError, 13: PermissionError, 21: IsADirectoryError}


def agent_source() -> bytes:
    """The agent script, as sent to the remote interpreter."""
    return Path(__file__).with_name("agent.py").read_bytes()


def agent_argv(python: str = "python3") -> list[str]:
    """How the agent is started: the interpreter with the bootstrap; source and commands follow on stdin."""
    return [python, "-c", BOOTSTRAP]


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class FileEvent:
    dir: str
    file: str  # relative to dir
    kind: str  # "log" | "result"
    size: int


@dataclass(frozen=True)
class FileGoneEvent:
    dir: str
    file: str


@dataclass(frozen=True)
class LinesEvent:
    dir: str
    file: str
    first_line_no: int  # 1-based number of lines[0]
    lines: list[str]
    end_offset: int  # byte offset just after the last line
    partial: str = ""  # the incomplete line after end_offset, for display only

    @property
    def last_line_no(self) -> int:
        return self.first_line_no + len(self.lines) - 1


@dataclass(frozen=True)
class Candidate:
    offset: int
    line_no: int  # 1-based
    text: str


@dataclass(frozen=True)
class CandidatesEvent:
    """A backlog ``[start_offset, end_offset)`` triaged remotely: only its keyword lines came over."""

    dir: str
    file: str
    start_offset: int
    end_offset: int
    line_count: int  # lines before end_offset
    candidates: list[Candidate]


@dataclass(frozen=True)
class ResultEvent:
    dir: str
    file: str
    head: bytes
    tail: bytes
    size: int
    head_is_whole: bool


@dataclass(frozen=True)
class ResetEvent:
    dir: str
    file: str
    reason: str  # "truncated" | "rotated"
    size: int


class AgentState(str, Enum):
    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    HEARTBEAT_LOST = "heartbeat lost"
    STOPPED = "stopped"


@dataclass(frozen=True)
class AgentStatus:
    state: AgentState
    message: str = ""
    restarts: int = 0
    mode: str = "agent"
    since: float = field(default_factory=time.time)

    @property
    def summary(self) -> str:
        """The log stream's state as an operator reads it: following, or lost and why."""
        if self.state is AgentState.RUNNING:
            return "following" if self.mode == "agent" else "following (tail -F)"
        return f"{self.state.value}: {self.message}" if self.message else self.state.value


FollowEvent: TypeAlias = (
    FileEvent | FileGoneEvent | LinesEvent | CandidatesEvent | ResultEvent | ResetEvent | AgentStatus
)


class AgentProtocolError(Exception):
    """The agent's output is not what the protocol says: the agent is restarted."""


class AgentLost(TransportError):
    """The agent went away while a request was pending."""


class HeartbeatLost(TransportError):
    """Nothing came from the agent for too long."""


# --------------------------------------------------------------------------- framing


class RecordReader:
    """Splits the agent's stdout into (header, payload) records."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._header: dict[str, Any] | None = None

    def feed(self, data: bytes) -> list[tuple[dict[str, Any], bytes | None]]:
        buf = self._buf
        buf += data
        records: list[tuple[dict[str, Any], bytes | None]] = []
        while True:
            if self._header is None:
                nl = buf.find(b"\n", self._pos)
                if nl < 0:
                    if len(buf) - self._pos > MAX_HEADER_BYTES:
                        raise AgentProtocolError("record header too long")
                    break
                raw = bytes(buf[self._pos : nl])
                self._pos = nl + 1
                try:
                    header = json.loads(raw)
                except ValueError as exc:
                    raise AgentProtocolError(f"not a record header: {raw[:200]!r}") from exc
                if not isinstance(header, dict):
                    raise AgentProtocolError(f"not a record header: {raw[:200]!r}")
                if "len" not in header:
                    records.append((header, None))
                    continue
                self._header = header
            length = self._header.get("len")
            if not isinstance(length, int) or length < 0:
                raise AgentProtocolError(f"bad payload length in {self._header!r}")
            if len(buf) - self._pos < length + 1:
                break
            end = self._pos + length
            if buf[end] != 0x0A:
                raise AgentProtocolError("payload not followed by a newline (out of step)")
            records.append((self._header, bytes(buf[self._pos : end])))
            self._pos = end + 1
            self._header = None
        if self._pos:
            del buf[: self._pos]
            self._pos = 0
        return records


# --------------------------------------------------------------------------- state


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


class Follower:
    """Follows job dirs on one transport through one agent process."""

    def __init__(
        self,
        transport: Transport,
        agent_python: str = "python3",
        *,
        keywords: Iterable[str] = (),
        on_offsets: OffsetsCallback | None = None,
        on_event: EventCallback | None = None,
        mode: str = "agent",
        heartbeat_timeout: float = HEARTBEAT_TIMEOUT_S,
        backoff_initial: float = BACKOFF_INITIAL_S,
        backoff_max: float = BACKOFF_MAX_S,
        big_bytes: int | None = None,
        tail_bytes: int | None = None,
        max_tails: int = 4,
        tail_poll_s: float = 1.0,
    ) -> None:
        if mode not in ("agent", "tail", "auto"):
            raise ValueError(f"mode must be agent, tail or auto, not {mode!r}")
        self.transport = transport
        self.agent_python = agent_python
        self.keywords = tuple(dict.fromkeys(k.lower() for k in keywords if k))
        self.mode = "agent" if mode == "auto" else mode
        self._auto = mode == "auto"
        self._on_offsets = on_offsets
        self._on_event = on_event
        self.heartbeat_timeout = heartbeat_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.big_bytes = big_bytes
        self.tail_bytes = tail_bytes
        self.max_tails = max_tails
        self.tail_poll_s = tail_poll_s

        self._watches: dict[str, _WatchState] = {}
        self._queue: asyncio.Queue[object] = asyncio.Queue(QUEUE_SIZE)
        self._proc: StreamingProcess | None = None
        self._send_lock = asyncio.Lock()
        self._running = asyncio.Event()
        self._pending: dict[int, asyncio.Future[tuple[dict[str, Any], bytes | None]]] = {}
        self._next_id = 1
        self._task: asyncio.Task[None] | None = None
        self._tail: _TailMode | None = None
        self._closed = False
        self._stderr = bytearray()
        self.status = AgentStatus(AgentState.STOPPED, "not started", mode=self.mode)
        self.agent_info: dict[str, Any] = {}
        # Figures for benchmarks and diagnostics.
        self.bytes_received = 0
        self.records = 0
        self.restarts = 0

    # -- public API ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the agent (in the background; its status arrives as AgentStatus events)."""
        if self._task is not None or self._tail is not None:
            return
        self._closed = False
        if self.mode == "tail":
            await self._switch_to_tail("tail mode")
            return
        self._task = asyncio.create_task(self._run(), name=f"follow:{self.transport.name}")

    async def __aenter__(self) -> Follower:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def watch(
        self,
        directory: str,
        *,
        results: str | None = None,
        offsets: Mapping[str, int] | None = None,
        lines: Mapping[str, int] | None = None,
    ) -> None:
        """Follow a job output dir (and its results dir), resuming at ``offsets`` (e.g. from the store).

        ``lines`` gives the line count before each offset where known; the agent counts the others.
        """
        state = self._watches.get(directory)
        if state is None:
            state = _WatchState(directory, results)
            for name, offset in (offsets or {}).items():
                count = (lines or {}).get(name)
                if offset == 0:
                    count = 0
                state.files[name] = _StreamState(offset=max(0, int(offset)), lines=count)
                state.committed[name] = (max(0, int(offset)), count)
            self._watches[directory] = state
        else:
            state.results = results
        if self._tail is not None:
            self._tail.watch(state)
            return
        async with self._send_lock:
            if self._proc is not None:
                await self._write(self._proc, self._watch_command(state))

    async def unwatch(self, directory: str) -> None:
        state = self._watches.pop(directory, None)
        if state is None:
            return
        self._persist(state, force=True)
        if self._tail is not None:
            self._tail.unwatch(directory)
            return
        async with self._send_lock:
            if self._proc is not None:
                await self._write(self._proc, {"op": "unwatch", "dir": directory})

    def positions(self, directory: str) -> dict[str, tuple[int, int | None]]:
        """(offset, lines before it) per file, as of the events already handed out."""
        state = self._watches.get(directory)
        return dict(state.committed) if state else {}

    def offsets(self, directory: str) -> dict[str, int]:
        return {name: pos[0] for name, pos in self.positions(directory).items()}

    async def events(self) -> AsyncIterator[FollowEvent]:
        """Events as they come; a position counts as delivered once the consumer asks for the next event."""
        while True:
            item = await self._queue.get()
            if item is _CLOSED:
                return
            event: FollowEvent = item  # type: ignore[assignment]
            yield event
            self._commit(event)

    def __aiter__(self) -> AsyncIterator[FollowEvent]:
        return self.events()

    async def read_range(self, directory: str, file: str, offset: int, length: int, *, timeout: float = 30.0) -> bytes:
        """Bytes of a followed dir's file (to page older content); negative offset: from the end."""
        path = file if posixpath.isabs(file) else posixpath.join(directory, file)
        if self._tail is not None:
            return await self.transport.read_file(path, offset, length, timeout=timeout)
        _header, payload = await self._request(
            {"op": "read", "file": path, "offset": offset, "length": length}, timeout
        )
        return payload or b""

    async def head_tail(
        self, directory: str, file: str, head: int = 16384, tail: int = 16384, *, timeout: float = 30.0
    ) -> ResultEvent:
        """A result file's head and tail bytes, read on demand."""
        path = file if posixpath.isabs(file) else posixpath.join(directory, file)
        if self._tail is not None:
            return await _tail_head_tail(self.transport, directory, file, path, head, tail, timeout)
        header, payload = await self._request({"op": "head_tail", "file": path, "head": head, "tail": tail}, timeout)
        data = payload or b""
        head_len = int(header.get("head_len", len(data)))
        return ResultEvent(
            directory,
            file,
            data[:head_len],
            data[head_len:],
            int(header.get("size", 0)),
            bool(header.get("head_is_whole")),
        )

    async def flush_offsets(self) -> None:
        for state in list(self._watches.values()):
            self._persist(state, force=True)

    async def close(self) -> None:
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._tail is not None:
            await self._tail.close()
        await self._stop_proc()
        for state in self._watches.values():
            self._persist(state, force=True)
        self._set_status(AgentState.STOPPED, "closed")
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(_CLOSED)

    # -- delivery -----------------------------------------------------------------------------

    async def _emit(self, event: FollowEvent) -> None:
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                log.exception("follow event callback failed")
            self._commit(event)
            return
        if self._queue.full():
            await self._queue.put(event)
        else:
            self._queue.put_nowait(event)

    def _commit(self, event: FollowEvent) -> None:
        position: tuple[int, int | None]
        if isinstance(event, LinesEvent) and event.lines:
            position = (event.end_offset, event.last_line_no)
        elif isinstance(event, CandidatesEvent):
            position = (event.end_offset, event.line_count)
        elif isinstance(event, ResetEvent):
            position = (0, 0)
        else:
            return
        state = self._watches.get(event.dir)
        if state is None:
            return
        if state.committed.get(event.file) != position:
            state.committed[event.file] = position
            state.dirty.add(event.file)
        self._persist(state)

    def _persist(self, state: _WatchState, force: bool = False) -> None:
        if not state.dirty or self._on_offsets is None:
            return
        now = time.monotonic()
        if not force and now - state.last_persist < OFFSETS_INTERVAL_S:
            return
        changed = {name: state.committed[name][0] for name in state.dirty if name in state.committed}
        state.dirty.clear()
        state.last_persist = now
        try:
            self._on_offsets(state.dir, changed)
        except Exception:
            log.exception("saving follow offsets failed")

    def _set_status(self, state: AgentState, message: str = "") -> AgentStatus:
        self.status = AgentStatus(state, message, self.restarts, self.mode)
        return self.status

    async def _emit_status(self, state: AgentState, message: str = "") -> None:
        await self._emit(self._set_status(state, message))

    # -- the agent process --------------------------------------------------------------------

    def _watch_command(self, state: _WatchState) -> dict[str, Any]:
        offsets: dict[str, int] = {}
        lines: dict[str, int] = {}
        inodes: dict[str, int] = {}
        seen: dict[str, list[float]] = {}
        for name, fs in state.files.items():
            if fs.kind != "log":
                if fs.seen is not None:
                    seen[name] = fs.seen
                continue
            offsets[name] = fs.offset
            if fs.lines is not None:
                lines[name] = fs.lines
            if fs.ino is not None:
                inodes[name] = fs.ino
        command: dict[str, Any] = {
            "op": "watch",
            "dir": state.dir,
            "offsets": offsets,
            "lines": lines,
            "inodes": inodes,
            "seen": seen,
            "keywords": list(self.keywords),
        }
        if state.results:
            command["results"] = state.results
        if self.big_bytes is not None:
            command["big"] = self.big_bytes
        if self.tail_bytes is not None:
            command["tail"] = self.tail_bytes
        return command

    @staticmethod
    async def _write(proc: StreamingProcess, command: Mapping[str, Any]) -> None:
        await proc.write(json.dumps(command, separators=(",", ":")).encode() + b"\n")

    async def _request(self, command: dict[str, Any], timeout: float) -> tuple[dict[str, Any], bytes | None]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TransportError(f"{self.transport.name}: no answer from the agent within {timeout:g} s")
            try:
                await asyncio.wait_for(self._running.wait(), remaining)
            except asyncio.TimeoutError:
                raise TransportError(f"{self.transport.name}: agent not running ({self.status.message})") from None
            rid = self._next_id
            self._next_id += 1
            future: asyncio.Future[tuple[dict[str, Any], bytes | None]] = loop.create_future()
            self._pending[rid] = future
            try:
                async with self._send_lock:
                    proc = self._proc
                    if proc is None:
                        continue
                    await self._write(proc, {**command, "id": rid})
                header, payload = await asyncio.wait_for(future, max(0.001, deadline - loop.time()))
            except AgentLost:
                continue  # idempotent: ask the restarted agent
            except asyncio.TimeoutError:
                raise TransportError(f"{self.transport.name}: no answer from the agent within {timeout:g} s") from None
            except TransportError:
                continue
            finally:
                self._pending.pop(rid, None)
            error = header.get("error")
            if error:
                code = int(header.get("errno") or 0)
                raise _ERRNO_EXC.get(code, OSError)(code, str(error), str(command.get("file", "")))
            return header, payload

    async def _run(self) -> None:
        backoff = Backoff(self.backoff_initial, self.backoff_max, HEALTHY_AFTER_S)
        try:
            while not self._closed:
                backoff.began()
                reason = ""
                try:
                    await self._session()
                    reason = "agent exited"
                except _InterpreterMissing as exc:
                    if self._auto:
                        await self._switch_to_tail(str(exc))
                        return
                    reason = str(exc)
                except HeartbeatLost as exc:
                    reason = str(exc)
                    await self._emit_status(AgentState.HEARTBEAT_LOST, reason)
                except (TransportError, AgentProtocolError, OSError, EOFError) as exc:
                    reason = str(exc) or type(exc).__name__
                except Exception as exc:  # a bug must not end following for good
                    log.exception("log follower: unexpected error; restarting the agent")
                    reason = f"unexpected error: {exc!r}"
                finally:
                    await self._end_session()
                if self._closed:
                    break
                delay = backoff.next_delay()
                self.restarts += 1
                await self._emit_status(AgentState.RESTARTING, f"{reason}; restarting in {delay:.1f} s")
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("log follower stopped")
            raise

    async def _session(self) -> None:
        await self._emit_status(AgentState.STARTING, f"starting the agent with {self.agent_python}")
        try:
            proc = await self.transport.start(agent_argv(self.agent_python))
        except FileNotFoundError as exc:  # a local interpreter that does not exist
            raise _InterpreterMissing(f"{self.agent_python} not found: {exc}") from exc
        self._stderr.clear()
        stderr_task = asyncio.create_task(self._drain_stderr(proc))
        try:
            source = agent_source()
            async with self._send_lock:
                self._proc = proc
                await proc.write(f"{len(source)}\n".encode() + source)
                for state in self._watches.values():
                    await self._write(proc, self._watch_command(state))
            reader = RecordReader()
            hello = False
            while True:
                try:
                    data = await asyncio.wait_for(proc.read(READ_CHUNK), self.heartbeat_timeout)
                except asyncio.TimeoutError:
                    raise HeartbeatLost(f"no heartbeat from the agent for {self.heartbeat_timeout:g} s") from None
                if not data:
                    code: int | None
                    try:
                        code = await proc.wait(CLOSE_TIMEOUT_S)
                    except TransportError:
                        code = None
                    await asyncio.sleep(0)  # let the stderr reader catch up
                    detail = bytes(self._stderr[-2000:]).decode("utf-8", "replace").strip()
                    if not hello and code == EXIT_NOT_FOUND:
                        raise _InterpreterMissing(f"{self.agent_python} not found: {detail}")
                    raise TransportError(
                        f"agent ended (exit {code if code is not None else 'unknown'})"
                        + (f": {detail}" if detail else "")
                    )
                self.bytes_received += len(data)
                for header, payload in reader.feed(data):
                    self.records += 1
                    if header.get("t") == "hello":
                        hello = True
                        self.agent_info = header
                        self._running.set()
                        await self._emit_status(
                            AgentState.RUNNING, f"agent running (python {header.get('python')}, {header.get('host')})"
                        )
                    try:
                        await self._handle(header, payload)
                    except (KeyError, ValueError, TypeError, IndexError) as exc:
                        raise AgentProtocolError(f"bad record {header!r:.300}: {exc!r}") from exc
                self._persist_all()
        finally:
            stderr_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await stderr_task

    def _persist_all(self) -> None:
        for state in self._watches.values():
            if state.dirty:
                self._persist(state)

    async def _drain_stderr(self, proc: StreamingProcess) -> None:
        with contextlib.suppress(TransportError, OSError):
            while True:
                data = await proc.read_stderr()
                if not data:
                    return
                self._stderr += data
                if len(self._stderr) > STDERR_KEEP:
                    del self._stderr[:-STDERR_KEEP]
                for line in data.decode("utf-8", "replace").splitlines():
                    log.info("agent: %s", line)

    async def _end_session(self) -> None:
        self._running.clear()
        await self._stop_proc()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(AgentLost("agent lost"))
        for state in self._watches.values():
            for fs in state.files.values():
                fs.partial.clear()
                fs.dropped = 0

    async def _stop_proc(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.close_stdin(), CLOSE_TIMEOUT_S)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.close(), CLOSE_TIMEOUT_S)

    # -- records ------------------------------------------------------------------------------

    def _file(self, header: Mapping[str, Any]) -> tuple[_WatchState, str, _StreamState] | None:
        state = self._watches.get(str(header.get("dir")))
        if state is None:
            return None  # unwatched meanwhile
        name = str(header.get("file"))
        fs = state.files.get(name)
        if fs is None:
            fs = state.files[name] = _StreamState()
        return state, name, fs

    async def _handle(self, header: dict[str, Any], payload: bytes | None) -> None:
        kind = header.get("t")
        if kind == "reply":
            future = self._pending.get(int(header.get("id") or 0))
            if future is not None and not future.done():
                future.set_result((header, payload))
            return
        if kind in ("hello", "hb"):
            return
        if kind == "error":
            log.warning("agent: %s", header.get("msg"))
            return
        found = self._file(header)
        if found is None:
            return
        state, name, fs = found
        if kind == "data":
            await self._on_data(state, name, fs, int(header["offset"]), payload or b"")
        elif kind == "file":
            fs.kind = str(header.get("kind", "log"))
            if fs.kind == "log":
                fs.offset = int(header.get("offset") or 0)
                count = header.get("line_count")
                fs.lines = int(count) if count is not None else fs.lines
                fs.ino = header.get("ino")
                fs.partial.clear()
                fs.dropped = 0
                if name not in state.committed or state.committed[name][1] is None:
                    state.committed[name] = (fs.offset, fs.lines)
            if not fs.announced:
                fs.announced = True
                await self._emit(FileEvent(state.dir, name, fs.kind, int(header.get("size") or 0)))
        elif kind == "candidates":
            hits = [Candidate(int(h[0]), int(h[1]), str(h[2])) for h in header.get("lines") or ()]
            fs.offset = int(header["to"])
            fs.lines = int(header["line_count"])
            fs.partial.clear()
            fs.dropped = 0
            await self._emit(CandidatesEvent(state.dir, name, int(header["from"]), fs.offset, fs.lines, hits))
        elif kind in ("truncated", "rotated"):
            fs.offset, fs.lines = 0, 0
            fs.ino = header.get("ino")
            fs.partial.clear()
            fs.dropped = 0
            await self._emit(ResetEvent(state.dir, name, str(kind), int(header.get("size") or 0)))
        elif kind == "gone":
            fs.announced = False
            fs.seen = None
            await self._emit(FileGoneEvent(state.dir, name))
        elif kind == "result":
            fs.kind = "result"
            seen = header.get("seen")
            fs.seen = list(seen) if isinstance(seen, list) else None
            data = payload or b""
            head_len = int(header.get("head_len", len(data)))
            await self._emit(
                ResultEvent(
                    state.dir,
                    name,
                    data[:head_len],
                    data[head_len:],
                    int(header.get("size") or 0),
                    bool(header.get("head_is_whole")),
                )
            )

    async def _on_data(self, state: _WatchState, name: str, fs: _StreamState, offset: int, data: bytes) -> None:
        expected = fs.expected
        if offset < expected:  # already have some of it
            data = data[expected - offset :]
            if not data:
                return
        elif offset > expected:
            log.warning("%s/%s: gap in the stream (%d..%d); resuming there", state.dir, name, expected, offset)
            fs.partial.clear()
            fs.dropped = 0
            fs.offset = offset
        event = take_lines(state.dir, name, fs, data)
        if event is not None:
            await self._emit(event)

    # -- tail fallback ------------------------------------------------------------------------

    async def _switch_to_tail(self, reason: str) -> None:
        self.mode = "tail"
        self._tail = _TailMode(self)
        await self._emit_status(AgentState.RUNNING, f"{reason}; following with tail -F instead")
        for state in self._watches.values():
            self._tail.watch(state)


class _InterpreterMissing(TransportError):
    pass


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


# --------------------------------------------------------------------------- tail fallback

_LOG_NAME = re.compile(r"\.(out|log|err)$")


async def _tail_head_tail(
    transport: Transport, directory: str, file: str, path: str, head: int, tail: int, timeout: float
) -> ResultEvent:
    first = await transport.read_file(path, 0, head, timeout=timeout)
    if len(first) < head:
        return ResultEvent(directory, file, first, b"", len(first), True)
    last = await transport.read_file(path, -tail, tail, timeout=timeout)
    return ResultEvent(directory, file, first, last, -1, False)


class _TailMode:
    """Follows logs without the agent: ``tail -c +N -F`` per file (up to max_tails), range reads for the rest."""

    def __init__(self, follower: Follower) -> None:
        self.f = follower
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.slots = asyncio.Semaphore(max(0, follower.max_tails))
        self.closed = False

    def watch(self, state: _WatchState) -> None:
        if state.dir not in self.tasks:
            self.tasks[state.dir] = asyncio.create_task(self._watch(state))

    def unwatch(self, directory: str) -> None:
        task = self.tasks.pop(directory, None)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        self.closed = True
        tasks = list(self.tasks.values())
        self.tasks.clear()
        # Cancelled again until done: asyncio.wait_for (Python < 3.12) can swallow a cancellation
        # that arrives as its command finishes, and the loop would then run on.
        while tasks:
            for task in tasks:
                task.cancel()
            _done, pending = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_S / 10)
            tasks = list(pending)

    async def _list(self, state: _WatchState) -> list[tuple[str, str]]:
        # The agent's places: logs under logs/ (to one subdir down), result files by the shared rules.
        script = 'find "$1" -maxdepth 3 -type f; [ -n "$2" ] && [ -d "$2" ] && find "$2" -maxdepth 2 -type f; true'
        result = await self.f.transport.run(["sh", "-c", script, "sh", state.dir, state.results or ""], timeout=30)
        found: dict[str, str] = {}
        logs = posixpath.join(state.dir.rstrip("/"), "logs") + "/"
        for path in result.stdout.splitlines():
            rel = posixpath.relpath(path, state.dir)
            if path.startswith(logs) and _LOG_NAME.search(path):
                found[rel] = "log"
            elif remote_kind(path, state.dir, state.results) is not None:
                found[rel] = "result"
        return list(found.items())

    async def _watch(self, state: _WatchState) -> None:
        followers: dict[str, asyncio.Task[None]] = {}
        seen_results: dict[str, int] = {}
        try:
            while not self.closed:
                try:
                    files = await self._list(state)
                except (TransportError, OSError) as exc:
                    log.info("tail mode: listing %s failed: %s", state.dir, exc)
                    files = []
                for rel, kind in files:
                    if kind == "log" and rel not in followers:
                        fs = state.files.setdefault(rel, _StreamState())
                        if fs.lines is None:
                            fs.lines = 0 if fs.offset == 0 else None
                        await self.f._emit(FileEvent(state.dir, rel, "log", -1))
                        followers[rel] = asyncio.create_task(self._follow(state, rel, fs))
                    elif kind == "result":
                        path = posixpath.join(state.dir, rel)
                        try:
                            event = await _tail_head_tail(self.f.transport, state.dir, rel, path, 16384, 16384, 30)
                        except (TransportError, OSError):
                            continue
                        size = len(event.head) + len(event.tail)
                        if seen_results.get(rel) != size:
                            seen_results[rel] = size
                            await self.f._emit(event)
                await asyncio.sleep(max(self.f.tail_poll_s, 1.0))
        finally:
            for task in followers.values():
                task.cancel()

    async def _follow(self, state: _WatchState, rel: str, fs: _StreamState) -> None:
        path = posixpath.join(state.dir, rel)
        while True:
            fs.partial.clear()
            fs.dropped = 0
            try:
                if self.slots.locked():
                    await self._poll_once(state, rel, fs, path)
                    await asyncio.sleep(self.f.tail_poll_s)
                    continue
                async with self.slots:
                    await self._tail(state, rel, fs, path)
            except (TransportError, OSError) as exc:
                log.info("tail mode: %s: %s", path, exc)
                await asyncio.sleep(self.f.tail_poll_s)

    async def _poll_once(self, state: _WatchState, rel: str, fs: _StreamState, path: str) -> None:
        data = await self.f.transport.read_file(path, fs.offset, 4 << 20)
        event = take_lines(state.dir, rel, fs, data)
        fs.partial.clear()  # re-read from the line start next time
        fs.dropped = 0
        if event is not None and event.lines:
            await self.f._emit(event)

    async def _tail(self, state: _WatchState, rel: str, fs: _StreamState, path: str) -> None:
        proc = await self.f.transport.start(["tail", "-c", f"+{fs.offset + 1}", "-F", "--", path])
        try:
            while True:
                data = await proc.read(READ_CHUNK)
                if not data:
                    return
                self.f.bytes_received += len(data)
                event = take_lines(state.dir, rel, fs, data)
                if event is not None:
                    await self.f._emit(event)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.close(), CLOSE_TIMEOUT_S)


__all__ = [
    "BOOTSTRAP",
    "AgentProtocolError",
    "AgentState",
    "AgentStatus",
    "Candidate",
    "CandidatesEvent",
    "FileEvent",
    "FileGoneEvent",
    "FollowEvent",
    "Follower",
    "LinesEvent",
    "RecordReader",
    "ResetEvent",
    "ResultEvent",
    "agent_argv",
    "agent_source",
    "take_lines",
]
