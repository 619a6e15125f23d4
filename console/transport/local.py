"""This machine as a transport: subprocesses without a shell, files read and written directly."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from .base import (
    DEFAULT_TIMEOUT,
    CommandResult,
    ConnectionState,
    ConnectionStatus,
    StatusListener,
    TransportError,
    check_argv,
    check_env,
    clamp_range,
    decode,
)

T = TypeVar("T")

# How long a terminated process gets before it is killed.
TERMINATE_GRACE_S = 2.0


class LocalProcess:
    """A streaming subprocess of this machine."""

    def __init__(self, argv: tuple[str, ...], proc: asyncio.subprocess.Process) -> None:
        self.argv = argv
        self._proc = proc

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def read(self, n: int = 65536) -> bytes:
        assert self._proc.stdout is not None
        return await self._proc.stdout.read(n)

    async def readline(self) -> bytes:
        assert self._proc.stdout is not None
        return await self._proc.stdout.readline()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while line := await self.readline():
            yield line

    async def read_stderr(self, n: int = 65536) -> bytes:
        if self._proc.stderr is None:  # merged into stdout
            return b""
        return await self._proc.stderr.read(n)

    async def write(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(data)
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise TransportError(f"{shlex.join(self.argv)}: stdin closed: {exc}") from exc

    async def close_stdin(self) -> None:
        stdin = self._proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await stdin.wait_closed()

    def terminate(self) -> None:
        _signal_group(self._proc, signal.SIGTERM)

    async def wait(self, timeout: float | None = None) -> int:
        try:
            return await asyncio.wait_for(self._proc.wait(), timeout)
        except asyncio.TimeoutError:
            raise TransportError(f"{shlex.join(self.argv)} still running after {timeout:g} s") from None

    async def close(self) -> None:
        await self.close_stdin()
        if self._proc.returncode is None:
            self.terminate()
            try:
                await asyncio.wait_for(self._proc.wait(), TERMINATE_GRACE_S)
            except asyncio.TimeoutError:
                _signal_group(self._proc, signal.SIGKILL)
                await self._proc.wait()


class LocalTransport:
    """Runs commands on this machine; always "connected"."""

    def __init__(self, name: str = "local") -> None:
        self.name = name
        self._status = ConnectionStatus(ConnectionState.CONNECTED, "local")

    @property
    def status(self) -> ConnectionStatus:
        return self._status

    def add_status_listener(self, callback: StatusListener) -> Callable[[], None]:
        # The state never changes: nothing to report, nothing to remove.
        return lambda: None

    def _cwd(self, cwd: str | None) -> str | None:
        return None if cwd is None else os.path.expanduser(cwd)

    @staticmethod
    def _env(env: Mapping[str, str] | None) -> dict[str, str] | None:
        extra = check_env(env)
        return {**os.environ, **extra} if extra else None

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        input: bytes | None = None,  # noqa: A002 - the subprocess/asyncssh name
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
    ) -> CommandResult:
        args = check_argv(argv)
        try:
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=asyncio.subprocess.DEVNULL if input is None else asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self._cwd(cwd),
                env=self._env(env),
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            # Like a shell: an unknown program is exit 127, not an exception.
            return _checked(CommandResult(args, 127, "", f"{exc}\n"), check)
        try:
            stdout, stderr = await asyncio.wait_for(proc.communicate(input), timeout)
        except asyncio.TimeoutError:
            _signal_group(proc, signal.SIGKILL)
            await proc.wait()
            raise TransportError(f"timed out after {timeout:g} s: {shlex.join(args)}") from None
        except BaseException:
            _signal_group(proc, signal.SIGKILL)
            raise
        assert proc.returncode is not None
        return _checked(CommandResult(args, proc.returncode, decode(stdout), decode(stderr)), check)

    async def write_file(self, path: str, data: bytes, mode: int = 0o644, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        await self._file_op(asyncio.to_thread(_write_atomically, Path(os.path.expanduser(path)), data, mode), timeout)

    async def read_file(
        self, path: str, offset: int = 0, length: int | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> bytes:
        return await self._file_op(
            asyncio.to_thread(_read_range, Path(os.path.expanduser(path)), offset, length), timeout
        )

    @staticmethod
    async def _file_op(work: Awaitable[T], timeout: float) -> T:
        # A hung network filesystem must not hang the console.
        try:
            return await asyncio.wait_for(work, timeout)
        except asyncio.TimeoutError:
            raise TransportError(f"file operation timed out after {timeout:g} s") from None

    async def home(self, *, timeout: float = DEFAULT_TIMEOUT) -> str:
        return os.path.expanduser("~")

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        merge_stderr: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> LocalProcess:
        args = check_argv(argv)
        try:
            proc = await asyncio.wait_for(
                asyncio.create_subprocess_exec(
                    *args,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
                    cwd=self._cwd(cwd),
                    env=self._env(env),
                    start_new_session=True,
                ),
                timeout,
            )
        except asyncio.TimeoutError:
            raise TransportError(f"timed out after {timeout:g} s starting {shlex.join(args)}") from None
        return LocalProcess(args, proc)

    async def close(self) -> None:
        return None


def _signal_group(proc: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    """Signal the command and everything it started: each command runs in its own session, so that
    a timed-out ``sh -c 'sleep 600'`` leaves no orphan holding its pipes open."""
    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)


def _checked(result: CommandResult, check: bool) -> CommandResult:
    return result.check() if check else result


def _write_atomically(path: Path, data: bytes, mode: int) -> None:
    # Readers (the log follower, srtctl) never see a half-written file.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _read_range(path: Path, offset: int, length: int | None) -> bytes:
    with path.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        start, count = clamp_range(size, offset, length)
        handle.seek(start)
        return handle.read(count)
