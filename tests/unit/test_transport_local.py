"""LocalTransport: commands without a shell, timeouts, atomic writes, range reads, streaming processes."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from console.transport import (
    CommandFailed,
    ConnectionState,
    LocalTransport,
    StreamingProcess,
    Transport,
    TransportError,
)
from console.transport.base import clamp_range

NASTY_NAME = 'dir with space/it\'s "q"; $(touch CANARY) `touch CANARY2`'


@pytest.fixture
def transport() -> LocalTransport:
    return LocalTransport()


def test_it_is_a_transport(transport: LocalTransport) -> None:
    assert isinstance(transport, Transport)
    assert transport.status.state is ConnectionState.CONNECTED
    remove = transport.add_status_listener(lambda status: None)
    remove()


async def test_run_captures_output_exit_code_cwd_env_and_input(transport: LocalTransport, tmp_path: Path) -> None:
    result = await transport.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert not result.ok

    result = await transport.run(
        [
            sys.executable,
            "-c",
            "import os,sys; print(os.getcwd()); print(os.environ['SRT_X']); print(sys.stdin.read())",
        ],
        cwd=str(tmp_path),
        env={"SRT_X": "a,b c"},
        input=b"from stdin",
    )
    assert result.stdout.splitlines() == [str(tmp_path), "a,b c", "from stdin"]
    assert result.argv[0] == sys.executable


async def test_run_has_no_shell(transport: LocalTransport, tmp_path: Path) -> None:
    canary = tmp_path / "CANARY"
    result = await transport.run(["echo", f"$(touch {canary}); `touch {canary}`"])
    assert result.stdout == f"$(touch {canary}); `touch {canary}`\n"
    assert not canary.exists()
    with pytest.raises(TypeError):
        await transport.run("echo hi")  # type: ignore[arg-type]


async def test_run_decodes_bad_utf8_with_replacement(transport: LocalTransport) -> None:
    result = await transport.run(["printf", "ok \\377\\376 end"])
    assert result.stdout == "ok \ufffd\ufffd end"


async def test_run_check_raises_command_failed_not_transport_error(transport: LocalTransport) -> None:
    with pytest.raises(CommandFailed, match="exited with 2") as info:
        await transport.run(["sh", "-c", "echo nope >&2; exit 2"], check=True)
    assert not isinstance(info.value, TransportError)
    assert info.value.result.stderr == "nope\n"
    assert (await transport.run(["true"], check=True)).ok


async def test_missing_program_is_exit_127(transport: LocalTransport) -> None:
    result = await transport.run(["/nonexistent/program-xyz"])
    assert result.returncode == 127
    assert "program-xyz" in result.stderr


async def test_timeout_raises_transport_error_naming_the_command_and_kills_it(
    transport: LocalTransport, tmp_path: Path
) -> None:
    marker = tmp_path / "still-running"
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TransportError, match=r"timed out after 0\.3 s: sh -c") as info:
        await transport.run(["sh", "-c", f"sleep 5; touch {marker}"], timeout=0.3)
    assert "sleep 5" in str(info.value)
    assert loop.time() - started < 3
    assert not marker.exists()


async def test_write_and_read_files(transport: LocalTransport, tmp_path: Path) -> None:
    directory = tmp_path / NASTY_NAME
    directory.mkdir(parents=True)
    path = directory / "file; $(touch CANARY).txt"
    data = bytes(range(256)) * 4
    await transport.write_file(str(path), data, mode=0o600)
    assert path.read_bytes() == data
    assert (path.stat().st_mode & 0o777) == 0o600
    assert sorted(os.listdir(directory)) == [path.name]  # no temporary file left behind
    assert not (directory / "CANARY").exists() and not (tmp_path / "CANARY").exists()

    assert await transport.read_file(str(path)) == data
    assert await transport.read_file(str(path), 10, 5) == data[10:15]
    assert await transport.read_file(str(path), -4) == data[-4:]
    assert await transport.read_file(str(path), 5000) == b""  # past the end: clamped
    assert await transport.read_file(str(path), -5000, 3) == data[:3]  # before the start: clamped
    assert await transport.read_file(str(path), 1020, 100) == data[1020:]

    await transport.write_file(str(path), b"replaced")
    assert await transport.read_file(str(path)) == b"replaced"
    with pytest.raises(FileNotFoundError):
        await transport.read_file(str(directory / "missing"))


def test_clamp_range() -> None:
    assert clamp_range(10, 0, None) == (0, 10)
    assert clamp_range(10, 4, 3) == (4, 3)
    assert clamp_range(10, 8, 30) == (8, 2)
    assert clamp_range(10, 30, None) == (10, 0)
    assert clamp_range(10, -3, None) == (7, 3)
    assert clamp_range(10, -30, 2) == (0, 2)
    assert clamp_range(0, 0, None) == (0, 0)
    assert clamp_range(10, 2, -1) == (2, 0)


async def test_home(transport: LocalTransport) -> None:
    assert await transport.home() == os.path.expanduser("~")


async def test_start_streams_lines_and_takes_stdin(transport: LocalTransport) -> None:
    script = "import sys\nfor line in sys.stdin:\n    print('got', line.strip(), flush=True)\n"
    proc = await transport.start([sys.executable, "-u", "-c", script])
    assert isinstance(proc, StreamingProcess)
    try:
        await proc.write(b"one\n")
        assert await asyncio.wait_for(proc.readline(), 10) == b"got one\n"
        await proc.write(b"two\nthree\n")
        await proc.close_stdin()
        lines = [line async for line in proc]
        assert lines == [b"got two\n", b"got three\n"]
        assert await proc.wait(10) == 0
        assert proc.returncode == 0
    finally:
        await proc.close()


async def test_start_terminate_and_close_stop_a_running_process(transport: LocalTransport) -> None:
    proc = await transport.start(["sh", "-c", "echo ready; exec sleep 60"])
    assert await asyncio.wait_for(proc.readline(), 10) == b"ready\n"
    with pytest.raises(TransportError, match="still running"):
        await proc.wait(0.05)
    await proc.close()
    assert proc.returncode is not None and proc.returncode < 0  # ended by a signal


async def test_start_merge_stderr_and_read_stderr(transport: LocalTransport) -> None:
    merged = await transport.start(["sh", "-c", "echo a; echo b >&2"], merge_stderr=True)
    assert sorted([line async for line in merged]) == [b"a\n", b"b\n"]
    assert await merged.read_stderr() == b""
    await merged.close()

    separate = await transport.start(["sh", "-c", "echo a; echo b >&2"])
    assert await separate.read() == b"a\n"
    assert await separate.read_stderr() == b"b\n"
    assert await separate.wait(10) == 0
    await separate.close()
