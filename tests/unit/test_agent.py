"""The log agent and its follower over the local transport: discovery, exact offsets, restarts,
truncation and rotation, result files by head/tail, triage of big backlogs."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import itertools
import json
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from console import agent as agent_module
from console.follow import (
    BOOTSTRAP,
    AgentProtocolError,
    AgentState,
    AgentStatus,
    CandidatesEvent,
    FileEvent,
    FileGoneEvent,
    Follower,
    FollowEvent,
    LinesEvent,
    RecordReader,
    ResetEvent,
    ResultEvent,
    SkippedEvent,
    _StreamState,
    agent_argv,
    agent_source,
    take_lines,
)
from console.signatures import default_matcher
from console.store import Store
from console.transport.local import LocalProcess, LocalTransport

DEADLINE_S = 20.0
PYTHON36 = Path(os.path.expanduser("~/.pyenv/versions/3.6.15/bin/python3"))


class Collector:
    """Consumes a follower's events in the background; tests await conditions on them."""

    def __init__(self, follower: Follower) -> None:
        self.follower = follower
        self.events: list[FollowEvent] = []
        self._changed = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for event in self.follower.events():
            self.events.append(event)
            self._changed.set()

    async def until(self, predicate: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            remaining = deadline - loop.time()
            if remaining <= 0:
                tail = self.events[-5:]
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; last events: {tail!r}")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.5))

    def lines(self, file: str) -> list[tuple[int, str]]:
        """(line_no, text) of every delivered line of ``file``, in delivery order."""
        out: list[tuple[int, str]] = []
        for event in self.events:
            if isinstance(event, LinesEvent) and event.file == file:
                out.extend((event.first_line_no + i, line) for i, line in enumerate(event.lines))
            if isinstance(event, ResetEvent) and event.file == file:
                out.append((0, f"<{event.reason}>"))
        return out

    def of(self, kind: type) -> list:  # type: ignore[type-arg]
        return [e for e in self.events if isinstance(e, kind)]

    def statuses(self) -> list[AgentState]:
        return [e.state for e in self.events if isinstance(e, AgentStatus)]

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def job_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "outputs" / "12345"
    (directory / "logs").mkdir(parents=True)
    return directory


def append(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def agent_pid(collector: Collector) -> int:
    return int(collector.follower.agent_info["pid"])


# --------------------------------------------------------------------------- the script itself


def test_agent_source_is_python36_grammar() -> None:
    source = agent_source().decode()
    ast.parse(source, feature_version=(3, 6))
    # No imports of the console package: the script runs alone on a login node.
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert not any(n.startswith("console") for n in names), names


def test_bootstrap_is_one_small_argument() -> None:
    argv = agent_argv("python3")
    assert argv[:2] == ["python3", "-c"] and argv[2] == BOOTSTRAP
    assert len(BOOTSTRAP) < 200 and "\n" not in BOOTSTRAP


async def test_agent_exits_when_stdin_closes() -> None:
    transport = LocalTransport()
    proc = await transport.start(agent_argv("python3"))
    source = agent_source()
    await proc.write(f"{len(source)}\n".encode() + source)
    await proc.write(b'{"op": "ping", "id": 7}\n')
    reader = RecordReader()
    seen: list[dict[str, object]] = []
    while not any(h.get("t") == "reply" for h in seen):
        data = await asyncio.wait_for(proc.read(), DEADLINE_S)
        assert data, "agent ended early"
        seen.extend(h for h, _ in reader.feed(data))
    assert seen[0]["t"] == "hello" and seen[0]["protocol"] == agent_module.PROTOCOL
    await proc.close_stdin()
    assert await proc.wait(timeout=10) == 0


async def test_agent_answers_bad_commands_without_dying(tmp_path: Path) -> None:
    transport = LocalTransport()
    proc = await transport.start(["python3", str(Path(agent_module.__file__))])
    await proc.write(b"not json\n")
    await proc.write(b'{"op": "nope", "id": 1}\n')
    await proc.write(
        json.dumps({"op": "read", "id": 2, "file": str(tmp_path / "missing"), "offset": 0}).encode() + b"\n"
    )
    await proc.write(b'{"op": "ping", "id": 3}\n')
    reader = RecordReader()
    seen: list[dict[str, object]] = []
    while not any(h.get("id") == 3 for h in seen):
        data = await asyncio.wait_for(proc.read(), DEADLINE_S)
        assert data
        seen.extend(h for h, _ in reader.feed(data))
    errors = [h for h in seen if h.get("t") == "error"]
    assert len(errors) == 2
    missing = next(h for h in seen if h.get("id") == 2)
    assert missing["errno"] == 2
    await proc.close()


@pytest.mark.skipif(not PYTHON36.exists(), reason="no Python 3.6 interpreter (pyenv 3.6.15) here")
async def test_agent_runs_on_python36(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "sweep_12345.log"
    log.write_bytes(b"one\ntwo\n")
    async with Follower(LocalTransport(), agent_python=str(PYTHON36)) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: len(collector.lines("logs/sweep_12345.log")) == 2, "lines via Python 3.6")
        assert follower.agent_info["python"].startswith("3.6")
        await collector.stop()


# --------------------------------------------------------------------------- framing and lines


def test_record_reader_splits_anywhere_and_detects_lost_step() -> None:
    stream = b'{"t":"hb","time":1}\n{"t":"data","dir":"d","file":"f","offset":0,"len":5}\nab\ncd\n{"t":"hb"}\n'
    for cut in range(1, len(stream)):
        reader = RecordReader()
        records = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        assert [h["t"] for h, _ in records] == ["hb", "data", "hb"]
        assert records[1][1] == b"ab\ncd"
    with pytest.raises(AgentProtocolError):
        RecordReader().feed(b'{"t":"data","len":2}\nabc\n')
    with pytest.raises(AgentProtocolError):
        RecordReader().feed(b"garbage\n")


def test_take_lines_keeps_partial_lines_and_exact_offsets() -> None:
    fs = _StreamState(offset=100, lines=10)
    event = take_lines("d", "f", fs, b"abc")
    assert event is not None and event.lines == [] and event.partial == "abc" and fs.offset == 100
    event = take_lines("d", "f", fs, b"def\r\nghi\n\xffj")
    assert event is not None
    assert event.lines == ["abcdef", "ghi"] and event.first_line_no == 11 and event.end_offset == 100 + 12
    assert event.partial == "\ufffdj"
    assert fs.expected == 100 + 14


def test_take_lines_keeps_an_overlong_lines_head_and_tail_and_counts_its_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("console.follow.streams.MAX_LINE_BYTES", 8)
    fs = _StreamState()
    take_lines("d", "f", fs, b"0123456789")
    take_lines("d", "f", fs, b"abcdef")
    assert fs.expected == 16
    event = take_lines("d", "f", fs, b"xyz\nnext\n")
    # Its end (where a process writes what killed it) reaches triage, not only its start.
    assert event is not None and event.lines == ["0123 … [+11 bytes] … fxyz", "next"]
    assert event.end_offset == 10 + 6 + 9 and fs.lines == 2 and fs.expected == event.end_offset
    # A whole overlong line inside one block, and an overlong rest carried over.
    event = take_lines("d", "f", fs, b"ABCDEFGHIJKLMNOP\nshort\n0123456789abc")
    assert event is not None and event.lines == ["ABCD … [+8 chars] … MNOP", "short"]
    assert fs.expected == event.end_offset + 13 and event.partial == "0123 … [+5 bytes] … 9abc"


# --------------------------------------------------------------------------- following


async def test_discovers_files_and_streams_appends_with_exact_offsets(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    logs = directory / "logs"
    sweep = logs / "sweep_12345.log"
    sweep.write_bytes(b"first\nsecond\nthi")
    async with Follower(LocalTransport()) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: len(collector.lines("logs/sweep_12345.log")) == 2, "existing lines")
        append(sweep, b"rd\n")
        worker = logs / "node1_prefill_w0.out"
        append(worker, b"loading\n")
        frontend = logs / "node1_frontend_0.out"
        append(frontend, b"listening\n")
        bench = logs / "benchmark.out"
        append(bench, b"SA-Bench Config: endpoint=x\n")
        (logs / "notes.txt").write_text("not a log\n")
        files = {"logs/node1_prefill_w0.out", "logs/node1_frontend_0.out", "logs/benchmark.out"}
        await collector.until(lambda: all(collector.lines(f) for f in files), "new files")
        for i in range(50):
            append(worker, f"line {i}\n".encode())
        await collector.until(lambda: len(collector.lines("logs/node1_prefill_w0.out")) == 51, "appends")

        assert collector.lines("logs/sweep_12345.log") == [(1, "first"), (2, "second"), (3, "third")]
        worker_lines = collector.lines("logs/node1_prefill_w0.out")
        assert worker_lines == [(1, "loading")] + [(i + 2, f"line {i}") for i in range(50)]
        found = {e.file for e in collector.of(FileEvent)}
        assert "logs/notes.txt" not in found and files <= found
        # Every event's end offset is a line boundary of the file, and the last one is its size.
        content = worker.read_bytes()
        ends = [e.end_offset for e in collector.of(LinesEvent) if e.file == "logs/node1_prefill_w0.out" and e.lines]
        assert all(content[end - 1 : end] == b"\n" for end in ends)
        assert ends[-1] == len(content)
        assert follower.offsets(str(directory))["logs/node1_prefill_w0.out"] == len(content)
        await collector.stop()


async def test_restart_from_stored_offsets_loses_and_repeats_nothing(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "node2_decode_w0.out"
    log.write_bytes(b"".join(f"seq {i}\n".encode() for i in range(100)))
    store = Store(tmp_path / "store.sqlite3")
    attempt_id = _attempt(store)

    def save(_dir: str, offsets: dict[str, int]) -> None:
        store.set_offsets(attempt_id, offsets)

    async with Follower(LocalTransport(), on_offsets=save) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: len(collector.lines("logs/node2_decode_w0.out")) == 100, "first 100")
        append(log, b"seq 100\nseq 10")  # a partial line at the end: not delivered, not stored
        await collector.until(lambda: len(collector.lines("logs/node2_decode_w0.out")) == 101, "line 100")
        await collector.stop()
        first = collector.lines("logs/node2_decode_w0.out")
    assert store.get_offsets(attempt_id) == {
        "logs/node2_decode_w0.out": len(b"".join(f"seq {i}\n".encode() for i in range(101)))
    }

    append(log, b"1\n" + b"".join(f"seq {i}\n".encode() for i in range(102, 150)))
    # A new console: offsets from the store, no line counts (the agent counts them).
    async with Follower(LocalTransport()) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory), offsets=store.get_offsets(attempt_id))
        await collector.until(lambda: len(collector.lines("logs/node2_decode_w0.out")) == 49, "the rest")
        second = collector.lines("logs/node2_decode_w0.out")
        await collector.stop()
    assert first + second == [(i + 1, f"seq {i}") for i in range(150)]
    store.close()


async def test_killed_agent_is_restarted_and_resumes_exactly(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "node3_agg_w0.out"
    log.write_bytes(b"")
    rollup = directory / "logs" / "benchmark-rollup.json"
    rollup.write_bytes(b'{"benchmark_type": "sa-bench", "runs": []}')
    total = 3000

    async def writer() -> None:
        for i in range(total):
            append(log, f"seq {i:06d}\n".encode())
            if i % 50 == 0:
                await asyncio.sleep(0.01)

    async with Follower(LocalTransport(), backoff_initial=0.05, backoff_max=0.2) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: bool(follower.agent_info), "agent up")
        task = asyncio.create_task(writer())
        for _ in range(3):
            pid = agent_pid(collector)
            await collector.until(lambda: len(collector.lines("logs/node3_agg_w0.out")) > 0, "some lines")
            os.kill(pid, signal.SIGKILL)
            await collector.until(lambda p=pid: follower.agent_info.get("pid") != p, "agent restarted")  # type: ignore[misc]
        await task
        await collector.until(lambda: len(collector.lines("logs/node3_agg_w0.out")) >= total, "all lines")
        lines = collector.lines("logs/node3_agg_w0.out")
        await collector.stop()
    assert lines == [(i + 1, f"seq {i:06d}") for i in range(total)]
    assert follower.restarts >= 3
    assert AgentState.RESTARTING in collector.statuses()
    # Files and unchanged results are not announced again by a restarted agent.
    assert sorted(e.file for e in collector.of(FileEvent)) == ["logs/benchmark-rollup.json", "logs/node3_agg_w0.out"]
    assert len(collector.of(ResultEvent)) == 1


async def test_lost_heartbeat_restarts_the_agent(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "sweep_12345.log"
    log.write_bytes(b"a\n")
    async with Follower(LocalTransport(), heartbeat_timeout=2.5, backoff_initial=0.05) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: len(collector.lines("logs/sweep_12345.log")) == 1, "first line")
        pid = agent_pid(collector)
        os.kill(pid, signal.SIGSTOP)  # alive but silent, like a hung connection
        try:
            append(log, b"b\n")
            await collector.until(lambda: AgentState.HEARTBEAT_LOST in collector.statuses(), "heartbeat lost")
            await collector.until(lambda: len(collector.lines("logs/sweep_12345.log")) == 2, "line after restart")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert collector.lines("logs/sweep_12345.log") == [(1, "a"), (2, "b")]
        await collector.stop()


async def test_truncation_and_rotation_are_noticed(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "sweep_12345.log"
    name = "logs/sweep_12345.log"
    log.write_bytes(b"one\ntwo\nthree\n")
    async with Follower(LocalTransport()) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: len(collector.lines(name)) == 3, "first lines")
        log.write_bytes(b"new\n")  # truncated and rewritten shorter
        await collector.until(lambda: (1, "new") in collector.lines(name), "after truncation")
        rotated = log.with_name("sweep_12345.log.1")
        append(log, b"old tail\n")
        os.rename(log, rotated)
        log.write_bytes(b"fresh 1\nfresh 2\n")
        await collector.until(lambda: (2, "fresh 2") in collector.lines(name), "after rotation")
        lines = collector.lines(name)
        resets = [e.reason for e in collector.of(ResetEvent)]
        await collector.stop()
    assert resets[0] == "truncated" and "rotated" in resets
    assert lines[:5] == [(1, "one"), (2, "two"), (3, "three"), (0, "<truncated>"), (1, "new")]
    # The old file's last line was read before switching to the new one.
    assert lines[5:] == [(2, "old tail"), (0, "<rotated>"), (1, "fresh 1"), (2, "fresh 2")]
    assert follower.offsets(str(directory))[name] == len(b"fresh 1\nfresh 2\n")


async def test_rotation_while_not_following_is_noticed_from_the_inode(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "sweep_12345.log"
    log.write_bytes(b"one\ntwo\n")
    async with Follower(LocalTransport(), backoff_initial=0.05) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: len(collector.lines("logs/sweep_12345.log")) == 2, "first lines")
        pid = agent_pid(collector)
        os.kill(pid, signal.SIGSTOP)
        try:
            os.rename(log, log.with_name("old.1"))
            log.write_bytes(b"replaced line one\nreplaced line two\n")  # longer than the old offset
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await collector.until(lambda: (2, "replaced line two") in collector.lines("logs/sweep_12345.log"), "new")
        assert collector.lines("logs/sweep_12345.log")[2] == (0, "<rotated>")
        await collector.stop()


async def test_gone_files_are_reported(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "etcd.log"
    log.write_bytes(b"x\n")
    async with Follower(LocalTransport()) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: bool(collector.lines("logs/etcd.log")), "line")
        log.unlink()
        await collector.until(lambda: bool(collector.of(FileGoneEvent)), "gone")
        await collector.stop()


async def test_paths_under_the_home_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    directory = job_dir(tmp_path)
    (directory / "logs" / "sweep_12345.log").write_bytes(b"at home\n")
    async with Follower(LocalTransport()) as follower:
        collector = Collector(follower)
        await follower.watch("~/outputs/12345")
        await collector.until(lambda: collector.lines("logs/sweep_12345.log") == [(1, "at home")], "line")
        assert await follower.read_range("~/outputs/12345", "logs/sweep_12345.log", 3, 4) == b"home"
        assert collector.of(LinesEvent)[0].dir == "~/outputs/12345"
        await collector.stop()


HOSTILE = [
    b"\x1b[31mred\x1b[0m \x1b]0;owned title\x07 \x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\",
    b"[bold red]x[/] [link=https://evil.example]click[/link]",
    b"nul\x00byte \xff\xfe invalid \xc3",
]


async def test_hostile_content_arrives_intact_and_cleans_to_inert_text(tmp_path: Path) -> None:
    from console.sanitize import clean_line

    directory = job_dir(tmp_path)
    log = directory / "logs" / "node6_prefill_w0.out"
    huge = b"ERROR " + b"A" * (10 << 20)
    # Existing content (triaged: it is over 4 MiB), then the same appended live (streamed).
    content = b"\n".join([*HOSTILE, huge, b"after"]) + b"\n"
    log.write_bytes(content)
    name = "logs/node6_prefill_w0.out"
    async with Follower(LocalTransport(), keywords=["error", "evil"]) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: collector.lines(name) == [(5, "after")], "the line after the huge one")
        append(log, content)
        await collector.until(lambda: len(collector.lines(name)) == 6, "streamed hostile lines")
        streamed = collector.lines(name)
        candidates = [c for e in collector.of(CandidatesEvent) for c in e.candidates]
        await collector.stop()
    assert [c.line_no for c in candidates] == [1, 2, 4]
    assert candidates[2].text.startswith("ERROR AAA") and len(candidates[2].text) <= 4096
    assert [n for n, _ in streamed] == [5, 6, 7, 8, 9, 10]
    assert [text for _, text in streamed[1:4]] == [line.decode("utf-8", "replace") for line in HOSTILE]
    huge_line = streamed[4][1]
    assert huge_line.startswith("ERROR AAA") and huge_line.endswith("AAA") and len(huge_line) <= (1 << 20) + 64
    assert streamed[5] == (10, "after")
    assert follower.offsets(str(directory))[name] == 2 * len(content)
    cleaned = [clean_line(text) for _, text in streamed]
    assert cleaned[1] == "red  link"
    assert cleaned[2] == "[bold red]x[/] [link=https://evil.example]click[/link]"
    assert cleaned[3] == "nulbyte \ufffd\ufffd invalid \ufffd"
    assert cleaned[4].endswith(" chars]") and len(cleaned[4]) < 2100
    assert all("\x1b" not in line and "\x00" not in line for line in cleaned)


# --------------------------------------------------------------------------- results


def _result_json(concurrency: int, filler_bytes: int) -> bytes:
    head = json.dumps(
        {
            "date": "20260101-000000",
            "backend": "sglang",
            "max_concurrency": concurrency,
            "completed": 8,
            "total_input_tokens": 8192,
            "total_output_tokens": 8192,
            "request_throughput": 1.5,
            "output_throughput": 1234.5,
            "total_token_throughput": 2469.0,
        }
    )[:-1]
    lens = ", ".join(["1024"] * (filler_bytes // 6))
    tail = ', "mean_ttft_ms": 100.0, "median_ttft_ms": 90.0, "p99_ttft_ms": 200.0, "mean_tpot_ms": 10.0}'
    return (head + ', "input_lens": [' + lens + "]" + tail).encode()


async def test_result_files_are_reported_by_head_and_tail_only(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    sa_bench = directory / "logs" / "sa-bench_isl_1024_osl_1024"
    sa_bench.mkdir()
    big = sa_bench / "results_concurrency_64_gpus_16_ctx_8_gen_8.json"
    big.write_bytes(_result_json(64, 50 << 20))
    (sa_bench / "results_concurrency_64_gpus_16_ctx_8_gen_8.pytorch.json").write_bytes(b"{}")
    results = tmp_path / "results" / "12345"
    (results / "fixed-seq").mkdir(parents=True)
    small = results / "fixed-seq" / "dsv4-disagg-isl1024-osl1024-c4.json"
    small.write_bytes(_result_json(4, 100))
    async with Follower(LocalTransport()) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory), results=str(results))
        await collector.until(lambda: len(collector.of(ResultEvent)) >= 2, "two results")
        await collector.stop()
    by_file = {e.file: e for e in collector.of(ResultEvent)}
    assert set(by_file) == {
        "logs/sa-bench_isl_1024_osl_1024/results_concurrency_64_gpus_16_ctx_8_gen_8.json",
        "../../results/12345/fixed-seq/dsv4-disagg-isl1024-osl1024-c4.json",
    }
    whole = by_file["../../results/12345/fixed-seq/dsv4-disagg-isl1024-osl1024-c4.json"]
    assert whole.head_is_whole and whole.head == small.read_bytes() and whole.tail == b""
    event = by_file["logs/sa-bench_isl_1024_osl_1024/results_concurrency_64_gpus_16_ctx_8_gen_8.json"]
    assert event.size == big.stat().st_size > 50 << 20 and not event.head_is_whole
    assert b'"output_throughput": 1234.5' in event.head and event.tail.endswith(b'"mean_tpot_ms": 10.0}')
    assert follower.bytes_received < 100_000, follower.bytes_received
    from console.results import point_from_bytes

    point = point_from_bytes(event.file, event.head, event.tail, event.size, head_is_whole=False)
    assert point.concurrency == 64


def test_result_file_rewritten_while_it_is_read_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A benchmark that rewrites its result file: the agent's stat sees the full file, its read
    # finds it truncated, and the rewrite keeps the size and the mtime tick. The next poll must
    # still report the full file.
    directory = job_dir(tmp_path)
    result = directory / "logs" / "benchmark-rollup.json"
    full = b'{"benchmark_type": "sa-bench", "runs": []}'
    result.write_bytes(full)
    stamp = result.stat().st_mtime_ns
    real = agent_module.head_tail
    calls = []

    def rewritten(path: str, *args: object, **kwargs: object) -> object:
        calls.append(path)
        if len(calls) == 1:
            result.write_bytes(b"")  # the read lands between the truncation and the write
            got = real(path, *args, **kwargs)  # type: ignore[arg-type]
            result.write_bytes(full)
            os.utime(result, ns=(stamp, stamp))
            return got
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(agent_module, "head_tail", rewritten)
    out = io.BytesIO()
    agent = agent_module.Agent(io.BytesIO(), out)
    watch = agent_module.Watch(agent, {"dir": str(directory)})
    watch.discover(0.0)
    (tracked,) = [t for t in watch.files.values() if t.kind == "result"]
    assert watch.poll_result(tracked, 100.0)
    assert watch.poll_result(tracked, 100.0 + agent_module.RESULT_MIN_INTERVAL_S + 1)
    payloads = [line for line in out.getvalue().split(b"\n") if line.startswith(b"{") and b'"t":' not in line]
    assert payloads[-1] == full and len(calls) == 2


async def test_growing_result_file_is_reported_again(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    result = directory / "logs" / "benchmark-rollup.json"
    result.write_bytes(b'{"benchmark_type": "sa-be')
    async with Follower(LocalTransport()) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: len(collector.of(ResultEvent)) == 1, "first report")
        append(result, b'nch", "runs": []}')
        await collector.until(lambda: len(collector.of(ResultEvent)) == 2, "second report")
        assert collector.of(ResultEvent)[-1].head == result.read_bytes()
        await collector.stop()


# --------------------------------------------------------------------------- big backlogs


def _write_big_log(path: Path, size: int, failures: dict[int, bytes]) -> dict[int, tuple[int, bytes]]:
    """A realistic worker log of about ``size`` bytes with failure lines at the given line numbers.

    Returns {line_no: (offset, line)} for the failure lines."""
    ordinary = [
        b"[2026-08-21 10:00:01 DP0 TP0] Decode batch. #running-req: 64, #token: 81234, token usage: 0.41, "
        b"gen throughput (token/s): 2345.67, #queue-req: 0\n",
        b"[2026-08-21 10:00:01 DP1 TP1] Prefill batch. #new-seq: 2, #new-token: 16384, #cached-token: 0, "
        b"token usage: 0.40, #running-req: 63, #queue-req: 0\n",
        b'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n',
    ]
    block = b"".join(ordinary) * 2000
    lines_per_block = block.count(b"\n")
    found: dict[int, tuple[int, bytes]] = {}
    with path.open("wb") as handle:
        line_no = 0
        offset = 0
        pending = sorted(failures.items())
        while offset < size:
            if pending and pending[0][0] <= line_no + lines_per_block:
                target, text = pending.pop(0)
                before = target - line_no - 1
                chunk = b"".join(ordinary[i % 3] for i in range(before))
                handle.write(chunk)
                offset += len(chunk)
                line_no += before
                found[target] = (offset, text)
                handle.write(text + b"\n")
                offset += len(text) + 1
                line_no += 1
                continue
            handle.write(block)
            offset += len(block)
            line_no += lines_per_block
    return found


async def test_big_backlog_is_triaged_not_transferred(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "node4_prefill_w1.out"
    failures = {
        10: b"[2026-08-21 10:00:00 DP1] zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:5557')",
        500_000: b"RuntimeError: CUDA error: out of memory \xff\xfe",
    }
    expected = _write_big_log(log, 100 << 20, failures)
    size = log.stat().st_size
    total_lines = log.read_bytes().count(b"\n")
    started = time.monotonic()
    async with Follower(LocalTransport(), keywords=default_matcher().keywords) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        name = "logs/node4_prefill_w1.out"

        def caught_up() -> bool:
            lines = collector.lines(name)
            return bool(lines) and lines[-1][0] == total_lines

        await collector.until(caught_up, "triage and tail", timeout=60)
        elapsed = time.monotonic() - started
        candidates = [c for e in collector.of(CandidatesEvent) for c in e.candidates]
        await collector.stop()
    assert follower.bytes_received < size // 20, (follower.bytes_received, size)
    by_line = {c.line_no: c for c in candidates}
    for line_no, (offset, text) in expected.items():
        assert line_no in by_line, f"line {line_no} not a candidate"
        assert by_line[line_no].offset == offset
        assert by_line[line_no].text == text.decode("utf-8", "replace")
    # Triaged regions and streamed lines join up exactly.
    triaged = collector.of(CandidatesEvent)
    assert triaged[0].start_offset == 0
    assert all(a.end_offset == b.start_offset for a, b in itertools.pairwise(triaged))
    first_streamed = next(e for e in collector.of(LinesEvent) if e.lines)
    assert first_streamed.first_line_no == triaged[-1].line_count + 1
    assert size - triaged[-1].end_offset <= 256 << 10
    assert follower.offsets(str(directory))[name] == size
    assert elapsed < 60


async def test_a_backlog_full_of_keywords_is_triaged_in_bounded_records(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "node5_decode_w0.out"
    line = b"ERROR retrying request \x1b[31m" + b"\x01" * 40 + b"\n"
    count = (12 << 20) // len(line)
    log.write_bytes(line * count)
    name = "logs/node5_decode_w0.out"
    async with Follower(LocalTransport(), keywords=["error"]) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))

        def caught_up() -> bool:
            lines = collector.lines(name)
            return bool(lines) and lines[-1][0] == count

        await collector.until(caught_up, "triage of a keyword-dense backlog", timeout=60)
        await collector.stop()
    triaged = collector.of(CandidatesEvent)
    assert len(triaged) > 10 and all(len(e.candidates) <= agent_module.MAX_HITS for e in triaged)
    numbers = [c.line_no for e in triaged for c in e.candidates]
    assert numbers == list(range(1, len(numbers) + 1))
    streamed = collector.lines(name)
    assert streamed[0][0] == len(numbers) + 1 and len(numbers) + len(streamed) == count
    assert AgentState.RESTARTING not in collector.statuses()


# --------------------------------------------------------------------------- paging


async def test_read_range_and_head_tail(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "sweep_12345.log"
    log.write_bytes(b"0123456789" * 10)
    async with Follower(LocalTransport()) as follower:
        await follower.start()
        assert await follower.read_range(str(directory), "logs/sweep_12345.log", 5, 10) == b"5678901234"
        assert await follower.read_range(str(directory), "logs/sweep_12345.log", -3, 10) == b"789"
        assert await follower.read_range(str(directory), str(log), 95, 100) == b"56789"
        assert await follower.read_range(str(directory), str(log), 10, 0) == b""
        with pytest.raises(FileNotFoundError):
            await follower.read_range(str(directory), "logs/missing.out", 0, 10)
        result = await follower.head_tail(str(directory), "logs/sweep_12345.log", head=10, tail=10)
        assert result.head == b"0123456789" and result.tail == b"0123456789" and result.size == 100


async def test_tail_mode_follows_without_the_agent(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "sweep_12345.log"
    log.write_bytes(b"a\nb\n")
    async with Follower(LocalTransport(), mode="auto", agent_python="no-such-python3") as follower:
        collector = Collector(follower)
        await follower.watch(str(directory), offsets={"logs/sweep_12345.log": 2}, lines={"logs/sweep_12345.log": 1})
        await collector.until(lambda: bool(collector.lines("logs/sweep_12345.log")), "line via tail")
        append(log, b"c\n")
        await collector.until(lambda: len(collector.lines("logs/sweep_12345.log")) == 2, "appended via tail")
        assert collector.lines("logs/sweep_12345.log") == [(2, "b"), (3, "c")]
        assert follower.mode == "tail"
        await collector.stop()


class _Recording(LocalTransport):
    """The machine's transport, keeping every process it started."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[LocalProcess] = []

    async def start(self, argv: Sequence[str], **kwargs: Any) -> LocalProcess:
        proc = await super().start(argv, **kwargs)
        self.started.append(proc)
        return proc


async def test_tail_mode_ends_its_tails_when_the_follower_closes(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    for name in ("sweep_12345.log", "node1_decode_w0.out"):
        (directory / "logs" / name).write_bytes(b"x\n")
    transport = _Recording()
    async with Follower(transport, mode="tail", tail_poll_s=0.1) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: len(collector.lines("logs/node1_decode_w0.out")) == 1, "line via tail")
        await collector.until(lambda: len(collector.lines("logs/sweep_12345.log")) == 1, "line via tail")
        await collector.stop()
    tails = [proc for proc in transport.started if proc.argv[0] == "tail"]
    assert len(tails) == 2 and all(proc.returncode is not None for proc in tails)


async def test_explicit_tail_mode_never_starts_the_agent(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "node1_decode_w0.out"
    log.write_bytes(b"x\n")
    async with Follower(LocalTransport(), mode="tail", agent_python="no-such-python3", tail_poll_s=0.1) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: collector.lines("logs/node1_decode_w0.out") == [(1, "x")], "line via tail")
        assert AgentState.STARTING not in collector.statuses() and not follower.agent_info
        await collector.stop()


async def test_callbacks_instead_of_the_iterator(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    (directory / "logs" / "sweep_12345.log").write_bytes(b"a\nb\n")
    events: list[FollowEvent] = []
    saved: list[dict[str, int]] = []
    follower = Follower(LocalTransport(), on_event=events.append, on_offsets=lambda _d, o: saved.append(o))
    await follower.start()
    await follower.watch(str(directory))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not any(isinstance(e, LinesEvent) and e.lines for e in events):
        assert loop.time() < deadline, events
        await asyncio.sleep(0.02)
    await follower.close()
    lines = [line for e in events if isinstance(e, LinesEvent) for line in e.lines]
    assert lines == ["a", "b"]
    assert saved[-1] == {"logs/sweep_12345.log": 4}


async def test_garbage_from_the_agent_restarts_it(tmp_path: Path) -> None:
    fake = tmp_path / "fake-python"
    fake.write_text("#!/bin/sh\necho 'this is not a record'\nexec sleep 30\n")
    fake.chmod(0o755)
    async with Follower(LocalTransport(), agent_python=str(fake), backoff_initial=0.05) as follower:
        collector = Collector(follower)
        await collector.until(lambda: follower.restarts >= 2, "restarts after protocol errors")
        restarting = [e for e in collector.of(AgentStatus) if e.state is AgentState.RESTARTING]
        assert "not a record header" in restarting[0].message
        await collector.stop()


def test_store_offsets_round_trip(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    attempt_id = _attempt(store)
    assert store.get_offsets(attempt_id) == {}
    store.set_offsets(attempt_id, {"logs/a.out": 10, "logs/b.out": 20})
    store.set_offsets(attempt_id, {"logs/a.out": 15})
    assert store.get_offsets(attempt_id) == {"logs/a.out": 15, "logs/b.out": 20}
    store.close()


def _attempt(store: Store) -> int:
    sweep = store.add_sweep("s", "local", ["r.yaml"])
    arm = store.add_arm(sweep, "arm", "r.yaml", None, None, "a: 1\n", {})
    return store.add_attempt(arm, "local", "demo", "a: 1\n", [4]).id


def test_the_matchers_prefilter_is_the_agents() -> None:
    """One keyword prefilter: the agent's, compiled for bytes there and for text by the matcher."""
    agent = agent_module
    matcher = default_matcher()
    sources = agent.prefilter_sources(list(matcher.keywords))
    assert sources and [g.pattern for g in matcher._gates] == sources
    assert [g.pattern for g in agent.keyword_gates(list(matcher.keywords))] == [s.encode() for s in sources]
    line = "2024-01-01 12:00:00 RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert matcher.match_line(line) is not None
    assert any(g.search(line.lower().encode()) for g in agent.keyword_gates(list(matcher.keywords)))


# --------------------------------------------------------------------------- long lines, live


def _triage(collector: Collector, name: str) -> list[tuple[int, str]]:
    """Feed what the follower delivered to a triage as the monitor does: (line, signature) found."""
    from console.triage import Triage

    triage = Triage()
    for event in collector.events:
        if isinstance(event, LinesEvent) and event.file == name:
            triage.feed(name, event.lines, first_line_no=event.first_line_no)
        elif isinstance(event, CandidatesEvent) and event.file == name:
            for candidate in event.candidates:
                triage.feed(name, [candidate.text], first_line_no=candidate.line_no)
    return sorted({(o.line_no, o.id) for o in triage.findings})


OOM = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
ZMQ = b"zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:5557')"


def _bar(count: int) -> bytes:
    return b"".join(b"Capturing batches (bs=%d): %d%%|####      | %d/512 [00:%02d<00:10]\r" % (i, i % 100, i, i % 60)
                    for i in range(count))  # fmt: skip


async def test_a_failure_at_the_end_of_a_long_line_is_found_in_a_triaged_backlog(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "node7_decode_w0.out"
    filler = b'{"event": "metrics", "values": [' + b"0.5, " * 40_000 + b"1]} "  # 200 kB, no keyword
    lines = [
        b"ordinary start",
        filler + OOM,  # the end of a long line
        _bar(2_000) + ZMQ + b"\r" + _bar(2_000),  # a redraw in the middle of a progress bar
        b"x" * (9 << 20) + b" " + OOM,  # longer than the agent's scan chunk
        b"the end",
    ]
    log.write_bytes(b"\n".join(lines) + b"\n" + b"padding line\n" * 400_000)  # > BIG_BYTES: triaged
    name = "logs/node7_decode_w0.out"
    total = log.read_bytes().count(b"\n")
    async with Follower(LocalTransport(), keywords=list(default_matcher().keywords)) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: bool(collector.lines(name)) and collector.lines(name)[-1][0] == total,
                              "the backlog triaged and its tail streamed", timeout=60)  # fmt: skip
        candidates = [c for e in collector.of(CandidatesEvent) for c in e.candidates]
        await collector.stop()
    assert {c.line_no for c in candidates} == {2, 3, 4}
    assert all(len(c.text.encode()) <= agent_module.CANDIDATE_BYTES for c in candidates)
    assert _triage(collector, name) == [(2, "gpu-oom"), (3, "zmq-bind-in-use"), (4, "gpu-oom")]


async def test_a_failure_at_the_end_of_a_long_line_is_found_live(tmp_path: Path) -> None:
    directory = job_dir(tmp_path)
    log = directory / "logs" / "node8_prefill_w0.out"
    log.write_bytes(b"started\n")
    name = "logs/node8_prefill_w0.out"
    async with Follower(LocalTransport(), keywords=list(default_matcher().keywords)) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        await collector.until(lambda: collector.lines(name) == [(1, "started")], "the first line")
        # Appended live (streamed, not triaged remotely): a 10 MB line ending in an OOM, and
        # a progress bar whose late redraw says the port is taken.
        append(log, b"y" * (10 << 20) + b" " + OOM + b"\n")
        append(log, _bar(30_000) + ZMQ + b"\r" + _bar(500) + b"\n")
        await collector.until(lambda: len(collector.lines(name)) == 3, "the long lines")
        await collector.stop()
    assert follower.offsets(str(directory))[name] == log.stat().st_size
    assert _triage(collector, name) == [(2, "gpu-oom"), (3, "zmq-bind-in-use")]


# --------------------------------------------------------------------------- staying inside the dirs


def _hostile_job_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A job dir whose logs/ holds a link out (to a secret), a link loop, a FIFO, a link that
    stays inside, and one honest log; returns (job dir, the secret outside it)."""
    directory = job_dir(tmp_path)
    logs = directory / "logs"
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"root:SECRET-HASH:19000:0:99999:7:::\n")
    (logs / "x.out").symlink_to(secret)
    (logs / "loop.out").symlink_to(logs / "loop.out")
    os.mkfifo(logs / "pipe.out")
    (logs / "real.out").write_bytes(b"honest line\n")
    (logs / "alias.log").symlink_to(logs / "real.out")
    return directory, secret


async def test_agent_never_follows_a_link_out_of_the_job_dir(tmp_path: Path) -> None:
    directory, secret = _hostile_job_dir(tmp_path)
    async with Follower(LocalTransport()) as follower:
        collector = Collector(follower)
        await follower.watch(str(directory))
        skipped = lambda: {e.file for e in collector.of(SkippedEvent)}  # noqa: E731
        await collector.until(
            lambda: (
                {"logs/x.out", "logs/loop.out", "logs/pipe.out"} <= skipped()
                and collector.lines("logs/real.out")
                and collector.lines("logs/alias.log")
            ),
            "the honest logs and a report of every skipped entry",
        )
        reasons = {e.file: e.reason for e in collector.of(SkippedEvent)}
        assert "out of" in reasons["logs/x.out"]
        streamed = [line for e in collector.of(LinesEvent) for line in e.lines]
        assert not any("SECRET" in line for line in streamed)
        assert collector.lines("logs/real.out") == [(1, "honest line")]
        # Range reads stay inside the watched dirs too, by relative or absolute name.
        with pytest.raises(PermissionError):
            await follower.read_range(str(directory), "logs/x.out", 0, 100)
        with pytest.raises(PermissionError):
            await follower.read_range(str(directory), str(secret), 0, 100)
        with pytest.raises(PermissionError):
            await follower.head_tail(str(directory), "logs/x.out")
        with pytest.raises(OSError, match="not a regular file"):
            await asyncio.wait_for(follower.read_range(str(directory), "logs/pipe.out", 0, 10), 10)
        assert await follower.read_range(str(directory), "logs/alias.log", 0, 6) == b"honest"
        await collector.stop()


def test_listing_skips_bad_entries_and_keeps_the_rest(tmp_path: Path) -> None:
    directory, _secret = _hostile_job_dir(tmp_path)
    skipped: list[tuple[str, str]] = []
    found = agent_module.listing(str(directory), "logs", 2, skipped)
    names = sorted(name for name, _path, _parts in found)
    assert names == ["alias.log", "real.out"]
    assert sorted(os.path.basename(p) for p, _ in skipped) == ["loop.out", "pipe.out", "x.out"]
