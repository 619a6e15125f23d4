"""What the console needs of "a machine to run commands on": this one, or a cluster's login node over SSH.

Commands are argv lists, never shell strings: remote ones are joined with ``shlex.join`` so a path
with spaces, quotes, ``;`` or ``$(...)`` stays one literal argument. Every command has a timeout.
A transport failure (connection lost, refused, timed out) is a ``TransportError`` and never a
statement about a job.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, runtime_checkable

DEFAULT_TIMEOUT = 30.0

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TransportError(Exception):
    """The command could not be run or its outcome is unknown: connection lost, refused or timed out."""


class HostKeyError(TransportError):
    """The server's host key is unknown or changed: refused, never accepted silently.

    ``known_hosts`` names the files the profile uses (the first one is where the advice adds a
    key); ``changed`` is True when those files hold another key for this host: a possible
    man-in-the-middle, and said so."""

    def __init__(self, host: str, port: int, known_hosts: str, detail: str = "", *, changed: bool = False) -> None:
        self.host = host
        self.port = port
        self.known_hosts = known_hosts
        self.changed = changed
        where = f"{host} port {port}"
        first = known_hosts.split(", ")[0]
        entry = host if port == 22 else f"[{host}]:{port}"
        found = f" ({detail})" if detail else ""
        if changed:
            message = (
                f"host key of {where} has CHANGED since it was recorded in {known_hosts}{found}: someone may be "
                "intercepting the connection (a man-in-the-middle attack), or the server was reinstalled. "
                "Nothing was sent. Ask the cluster admins whether its key changed and compare fingerprints; "
                f"only then remove the old entry (`ssh-keygen -R '{entry}' -f {first}`) and trust the new one "
                f"(`ssh-keyscan -p {port} {host} >> {first}`)."
            )
        else:
            message = (
                f"host key of {where} is unknown: not in {known_hosts}{found}. If this is a new server: check "
                f"its fingerprint with the cluster admins, then trust it with `ssh-keyscan -p {port} {host} "
                f">> {first}` (or run `ssh -p {port} {host}` once and accept it), or set `known_hosts` in the "
                "cluster profile."
            )
        super().__init__(message)


class CommandFailed(Exception):
    """``run(check=True)`` and the command exited non-zero (the command's failure, not the transport's)."""

    def __init__(self, result: CommandResult) -> None:
        self.result = result
        detail = result.stderr.strip() or result.stdout.strip()
        super().__init__(
            f"{shlex.join(result.argv)} exited with {result.returncode}" + (f": {detail[-2000:]}" if detail else "")
        )


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int  # negative: killed by that signal
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def check(self) -> CommandResult:
        if self.returncode != 0:
            raise CommandFailed(self)
        return self


def decode(data: bytes | str | None) -> str:
    """Command output is untrusted bytes: invalid UTF-8 is replaced, never an exception."""
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")


class ConnectionState(str, Enum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    RETRYING = "retrying"
    FAILED = "failed"  # needs the operator (host key, authentication); retried only on the next command


@dataclass(frozen=True)
class ConnectionStatus:
    state: ConnectionState
    message: str = ""
    since: float = field(default_factory=time.time)

    def __str__(self) -> str:
        return self.message or self.state.value


StatusListener = Callable[[ConnectionStatus], None]


@runtime_checkable
class StreamingProcess(Protocol):
    """A long-running command (a log follower): bytes in, bytes out, stopped on request."""

    argv: tuple[str, ...]

    @property
    def returncode(self) -> int | None: ...

    async def read(self, n: int = 65536) -> bytes:
        """Up to n bytes of stdout; b"" at end of output."""

    async def readline(self) -> bytes:
        """One stdout line with its newline; b"" at end of output."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def read_stderr(self, n: int = 65536) -> bytes: ...

    async def write(self, data: bytes) -> None:
        """Write to stdin and wait until it is taken (flow control)."""

    async def close_stdin(self) -> None: ...

    def terminate(self) -> None: ...

    async def wait(self, timeout: float | None = None) -> int:
        """The exit code; TransportError when the connection dropped before it was known."""

    async def close(self) -> None:
        """Stop the process (if still running) and release its resources."""


@runtime_checkable
class Transport(Protocol):
    name: str

    @property
    def status(self) -> ConnectionStatus: ...

    def add_status_listener(self, callback: StatusListener) -> Callable[[], None]:
        """Call ``callback`` on every state change; returns a function that removes it."""

    async def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        input: bytes | None = None,  # noqa: A002 - the subprocess/asyncssh name
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = False,
    ) -> CommandResult: ...

    async def write_file(self, path: str, data: bytes, mode: int = 0o644, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Replace ``path`` atomically; ``~/`` is the transport's home."""

    async def read_file(
        self, path: str, offset: int = 0, length: int | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> bytes:
        """Bytes of ``path`` from ``offset`` (negative: from the end; clamped to the file) up to ``length``.

        A missing file is FileNotFoundError, an unreadable one PermissionError.
        """

    async def home(self, *, timeout: float = DEFAULT_TIMEOUT) -> str:
        """The login user's home directory (asked once, then remembered)."""

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        merge_stderr: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> StreamingProcess:
        """Start a streaming process; ``timeout`` bounds only the start, not its run."""

    async def close(self) -> None: ...


def check_argv(argv: Sequence[str]) -> tuple[str, ...]:
    if isinstance(argv, (str, bytes)):
        raise TypeError("argv must be a sequence of arguments, not a string")
    args = tuple(argv)
    if not args:
        raise ValueError("empty argv")
    for arg in args:
        if not isinstance(arg, str):
            raise TypeError(f"argv elements must be str, got {type(arg).__name__}: {arg!r}")
        if "\0" in arg:
            raise ValueError(f"NUL byte in argument {arg!r}")
    return args


def check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    result: dict[str, str] = {}
    for key, value in (env or {}).items():
        if not _ENV_NAME.match(key):
            raise ValueError(f"not an environment variable name: {key!r}")
        if "\0" in value:
            raise ValueError(f"NUL byte in the value of {key}")
        result[key] = value
    return result


def command_line(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The one string a remote login shell parses: every element quoted, nothing interpolated."""
    parts: list[str] = []
    if cwd is not None:
        parts += ["cd", "--", shlex.quote(cwd), "&&"]
    variables = check_env(env)
    if variables:
        parts += ["env", *(shlex.quote(f"{key}={value}") for key, value in variables.items())]
    parts.append(shlex.join(check_argv(argv)))
    return " ".join(parts)


def expand_home(path: str, home: str) -> str:
    """``~`` and ``~/x`` relative to the transport's home (profiles say ``~/srt-console``)."""
    if path == "~":
        return home
    if path.startswith("~/"):
        return home.rstrip("/") + path[1:]
    return path


def clamp_range(size: int, offset: int, length: int | None) -> tuple[int, int]:
    """(start, count) within a file of ``size`` bytes; a negative offset counts from the end."""
    start = size + offset if offset < 0 else offset
    start = min(max(start, 0), size)
    count = size - start if length is None else min(max(length, 0), size - start)
    return start, count
