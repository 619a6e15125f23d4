"""Following without the agent (no python3 on the login node): ``tail -c +N -F`` per log, range reads for the rest."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
import re
from typing import TYPE_CHECKING

from console.follow.events import FileEvent, ResultEvent
from console.follow.protocol import CLOSE_TIMEOUT_S, READ_CHUNK
from console.follow.streams import _StreamState, _WatchState, take_lines
from console.results.names import remote_kind
from console.tasks import cancel_and_wait
from console.transport.base import Transport, TransportError

if TYPE_CHECKING:
    from console.follow.follower import Follower

log = logging.getLogger("console.follow")


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
        await cancel_and_wait(tasks)

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
            # (awaited: each follower's `finally` closes its `tail`, which would outlive an
            # event loop that ends before those cancellations are delivered)
            await cancel_and_wait(followers.values())

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
