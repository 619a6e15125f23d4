"""The one route by which an attempt's result files are read, wherever they are.

:class:`LocalFiles` reads this machine's files with seeks; :class:`RemoteFiles` a cluster's
through its transport (one listing, then each file's head and tail as byte ranges). Either way
the same rules pick the files (:mod:`console.results.names`), the same scanner turns their
bytes into points, and the same parser reads the running concurrency from benchmark.out's tail.
A file is never read whole.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from console.results.names import discover_results, parse_result_name, remote_kind
from console.results.points import PointResult, point_from_bytes
from console.results.progress import running_concurrency
from console.results.scan import DEFAULT_HEAD_BYTES, DEFAULT_TAIL_BYTES, HeadTail, read_head_tail

if TYPE_CHECKING:
    from console.transport.base import Transport

BENCHMARK_OUT_TAIL = 64 * 1024


@dataclass(frozen=True)
class AttemptPoints:
    """The results of one attempt as read now, and the point it is measuring (live attempts)."""

    points: list[PointResult]
    running: int | None = None
    bytes_read: int = 0


class ResultFiles(Protocol):
    """Where one attempt's result files are: a listing, head/tail windows, and a file's tail."""

    async def listing(self, job_dir: str, results_dir: str | None) -> list[tuple[str, int]]:
        """(path, size) of the per-concurrency result files, by the shared rules (no rollup)."""
        ...

    async def head_tail(self, path: str, size: int, head: int, tail: int) -> HeadTail: ...

    async def tail(self, path: str, length: int) -> bytes: ...


class LocalFiles:
    """This machine's files, read with seeks."""

    async def listing(self, job_dir: str, results_dir: str | None) -> list[tuple[str, int]]:
        found = discover_results(Path(job_dir), results_dir=Path(results_dir) if results_dir else None)
        listed: list[tuple[str, int]] = []
        for rf in found:
            if rf.kind == "rollup":
                continue
            try:
                listed.append((str(rf.path), rf.path.stat().st_size))
            except OSError:
                listed.append((str(rf.path), 0))
        return listed

    async def head_tail(self, path: str, size: int, head: int, tail: int) -> HeadTail:
        return read_head_tail(path, head_bytes=head, tail_bytes=tail)

    async def tail(self, path: str, length: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - length))
            return f.read()


# Lists every JSON file of the job dir (to logs/<sub>/) and of the results dir (to fixed-seq/).
_FIND = (
    'j=$1; r=$2; [ -d "$j" ] && find "$j" -maxdepth 3 -type f -name "*.json" -printf "%s\\t%p\\n"; '
    '[ -n "$r" ] && [ -d "$r" ] && find "$r" -maxdepth 2 -type f -name "*.json" -printf "%s\\t%p\\n"; true'
)


class RemoteFiles:
    """A cluster's files through its transport: one listing, then byte ranges."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def listing(self, job_dir: str, results_dir: str | None) -> list[tuple[str, int]]:
        listed = await self.transport.run(["sh", "-c", _FIND, "sh", job_dir, results_dir or ""], timeout=60)
        found: dict[str, int] = {}  # a results dir inside the job dir is listed twice
        for line in listed.stdout.splitlines():
            size_text, _, path = line.partition("\t")
            if not path or not size_text.isdigit():
                continue
            kind = remote_kind(path, job_dir, results_dir)
            if kind is not None and kind != "rollup":
                found[path] = int(size_text)
        return list(found.items())

    async def head_tail(self, path: str, size: int, head: int, tail: int) -> HeadTail:
        # A file no larger than both windows is read in one range, a larger one as two.
        if size <= head + tail:
            data = await self.transport.read_file(path, 0, head + tail)
            return HeadTail(data, b"", max(size, len(data)), True, len(data))
        first = await self.transport.read_file(path, 0, head)
        last = await self.transport.read_file(path, -tail)
        return HeadTail(first, last, max(size, len(first)), False, len(first) + len(last))

    async def tail(self, path: str, length: int) -> bytes:
        return await self.transport.read_file(path, -length)


def _order(item: tuple[str, int]) -> tuple[int, str]:
    parsed = parse_result_name(posixpath.basename(item[0]))
    return (parsed.concurrency or 0 if parsed else 0, item[0])


async def read_attempt_points(
    files: ResultFiles,
    job_dir: str,
    *,
    results_dir: str | None = None,
    gpus: int | None = None,
    running: bool = False,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
) -> AttemptPoints:
    """Every result of one job: its points, the bytes read, and (``running``) the point being measured."""
    points: list[PointResult] = []
    total = 0
    for path, size in sorted(await files.listing(job_dir, results_dir), key=_order):
        try:
            ht = await files.head_tail(path, size, head_bytes, tail_bytes)
        except FileNotFoundError:
            continue  # gone since the listing
        except OSError as exc:
            parsed = parse_result_name(posixpath.basename(path))
            conc = parsed.concurrency or 0 if parsed else 0
            reason = f"cannot read file: {exc.strerror or exc}"
            points.append(PointResult(conc, "invalid", file=path, gpus=gpus, invalid_reason=reason))
            continue
        total += ht.bytes_read
        point = point_from_bytes(path, ht.head, ht.tail, ht.size, head_is_whole=ht.head_is_whole, gpus=gpus)
        points.append(replace(point, bytes_read=ht.bytes_read))
    conc_running = None
    if running:
        try:
            text = await files.tail(posixpath.join(job_dir, "logs", "benchmark.out"), BENCHMARK_OUT_TAIL)
            conc_running = running_concurrency(text.decode("utf-8", "replace"))
        except OSError:
            conc_running = None
    return AttemptPoints(points, conc_running, total)


async def read_remote_points(
    transport: Transport,
    job_dir: str,
    *,
    results_dir: str | None = None,
    gpus: int | None = None,
    running: bool = False,
    head_bytes: int = DEFAULT_HEAD_BYTES,
    tail_bytes: int = DEFAULT_TAIL_BYTES,
) -> AttemptPoints:
    """:func:`read_attempt_points` of a job on a remote machine."""
    return await read_attempt_points(
        RemoteFiles(transport),
        job_dir,
        results_dir=results_dir,
        gpus=gpus,
        running=running,
        head_bytes=head_bytes,
        tail_bytes=tail_bytes,
    )


def read_local_points(
    job_dir: str, *, results_dir: str | None = None, gpus: int | None = None, running: bool = False
) -> AttemptPoints:
    """:func:`read_attempt_points` of a job on this machine (no event loop needed: local reads never wait)."""
    coro = read_attempt_points(LocalFiles(), job_dir, results_dir=results_dir, gpus=gpus, running=running)
    try:
        coro.send(None)
    except StopIteration as done:
        result: AttemptPoints = done.value
        return result
    coro.close()
    raise RuntimeError("a local read awaited")  # pragma: no cover - LocalFiles never suspends


__all__: Sequence[str] = (
    "BENCHMARK_OUT_TAIL",
    "AttemptPoints",
    "LocalFiles",
    "RemoteFiles",
    "ResultFiles",
    "read_attempt_points",
    "read_local_points",
    "read_remote_points",
)
