"""The follower: one agent process per transport, its records turned into events, offsets kept,
restarts with backoff."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import posixpath
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from console.backoff import Backoff
from console.follow.events import (
    AgentLost,
    AgentProtocolError,
    AgentState,
    AgentStatus,
    Candidate,
    CandidatesEvent,
    FileEvent,
    FileGoneEvent,
    FollowEvent,
    HeartbeatLost,
    LinesEvent,
    ResetEvent,
    ResultEvent,
    SkippedEvent,
)
from console.follow.protocol import (
    _ERRNO_EXC,
    BACKOFF_INITIAL_S,
    BACKOFF_MAX_S,
    CLOSE_TIMEOUT_S,
    EXIT_NOT_FOUND,
    HEALTHY_AFTER_S,
    HEARTBEAT_TIMEOUT_S,
    OFFSETS_INTERVAL_S,
    QUEUE_SIZE,
    READ_CHUNK,
    STDERR_KEEP,
    RecordReader,
    agent_argv,
    agent_source,
)
from console.follow.streams import _CLOSED, EventCallback, OffsetsCallback, _StreamState, _WatchState, take_lines
from console.follow.tailmode import _tail_head_tail, _TailMode
from console.tasks import cancel_and_wait
from console.transport.base import StreamingProcess, Transport, TransportError

log = logging.getLogger("console.follow")


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
        # With its dir, so that the agent keeps the read inside the followed dirs.
        _header, payload = await self._request(
            {"op": "read", "dir": directory, "file": path, "offset": offset, "length": length}, timeout
        )
        return payload or b""

    async def head_tail(
        self, directory: str, file: str, head: int = 16384, tail: int = 16384, *, timeout: float = 30.0
    ) -> ResultEvent:
        """A result file's head and tail bytes, read on demand."""
        path = file if posixpath.isabs(file) else posixpath.join(directory, file)
        if self._tail is not None:
            return await _tail_head_tail(self.transport, directory, file, path, head, tail, timeout)
        header, payload = await self._request(
            {"op": "head_tail", "dir": directory, "file": path, "head": head, "tail": tail}, timeout
        )
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
            await cancel_and_wait([task])
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
                if self._closed:
                    return  # closed while this read finished (its cancellation may have been lost)
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
        elif kind == "skipped":
            await self._emit(SkippedEvent(state.dir, name, str(header.get("reason") or "not read")))
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
