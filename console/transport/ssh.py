"""A cluster's login node over SSH (asyncssh): one connection, verified host key, reconnect with backoff.

- The target is a Host alias (``~/.ssh/config`` gives HostName, Port, User, IdentityFile, ProxyJump,
  ServerAlive*) or an explicit mapping ``{host, port, user, identity_file, known_hosts}``.
- Host keys are checked against known_hosts; an unknown or changed key is a ``HostKeyError`` and the
  connection is refused. Verification is never turned off, even if a config file says so.
- One connection, opened on first use. When it drops it is reopened at once and then with capped
  exponential backoff; listeners see disconnected / retrying / connected.
- Exec channels are budgeted with a semaphore below OpenSSH's MaxSessions (10 by default); the one
  SFTP channel comes on top of that budget.
- A command that could not be started because the connection was down waits for the reconnect
  (within its timeout) and is then started; a command that was running when the connection dropped
  is not repeated (its outcome is unknown): TransportError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import posixpath
import secrets
import shlex
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import asyncssh
from asyncssh.constants import OPEN_REQUEST_SESSION_FAILED

from console.backoff import Backoff
from console.tasks import cancel_and_wait

from .base import (
    DEFAULT_TIMEOUT,
    CommandResult,
    ConnectionState,
    ConnectionStatus,
    HostKeyError,
    StatusListener,
    TransportError,
    check_argv,
    clamp_range,
    command_line,
    decode,
    expand_home,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_MAX_CHANNELS = 8
DEFAULT_KEEPALIVE_INTERVAL = 15.0
DEFAULT_KEEPALIVE_COUNT_MAX = 3
DEFAULT_CONNECT_TIMEOUT = 15.0
BACKOFF_INITIAL_S = 0.5
BACKOFF_MAX_S = 30.0
# A connection that lived this long was healthy: the next drop reconnects at once.
STABLE_CONNECTION_S = 10.0
# A refused channel on a live connection is back-pressure (MaxSessions), not a failure.
CHANNEL_RETRY_S = 0.1
TERMINATE_GRACE_S = 2.0

_TRANSIENT = (OSError, asyncssh.Error, asyncio.TimeoutError, EOFError)
# Nothing listens, or no route: a first connection fails after this many quick tries
# (a connection that worked before keeps retrying: the server may be restarting).
_UNREACHABLE = (ConnectionRefusedError, socket.gaierror)
UNREACHABLE_TRIES = 2
_LOST = (asyncssh.ConnectionLost, asyncssh.SFTPConnectionLost, BrokenPipeError, ConnectionResetError)


@dataclass(frozen=True)
class SshTarget:
    """Where to connect. Unset fields come from ssh_config (or asyncssh's defaults)."""

    host: str  # a Host alias or an address
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    known_hosts: str | None = None
    ssh_config: tuple[str, ...] | None = None  # None: ~/.ssh/config when readable

    @classmethod
    def from_profile(cls, profile: str | Mapping[str, Any] | SshTarget) -> SshTarget:
        """A profile's ``ssh:`` value: a Host alias, or a mapping with host/port/user/identity_file/known_hosts."""
        if isinstance(profile, SshTarget):
            return profile
        if isinstance(profile, str):
            if not profile.strip():
                raise ValueError("ssh: empty host")
            return cls(host=profile.strip())
        known = {"host", "port", "user", "identity_file", "known_hosts", "ssh_config"}
        unknown = set(profile) - known
        if unknown:
            raise ValueError(f"ssh: unknown keys {sorted(unknown)} (known: {sorted(known)})")
        host = profile.get("host")
        if not isinstance(host, str) or not host.strip():
            raise ValueError("ssh: `host` is required")
        port = profile.get("port")
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
            raise ValueError(f"ssh: `port` must be a TCP port number, got {port!r}")

        def text(key: str) -> str | None:
            value = profile.get(key)
            if value is None:
                return None
            if not isinstance(value, (str, os.PathLike)):
                raise ValueError(f"ssh: `{key}` must be a string, got {value!r}")
            return os.path.expanduser(os.fspath(value))

        config = profile.get("ssh_config")
        configs: tuple[str, ...] | None
        if config is None:
            configs = None
        elif isinstance(config, (str, os.PathLike)):
            configs = (os.path.expanduser(os.fspath(config)),)
        else:
            configs = tuple(os.path.expanduser(os.fspath(c)) for c in config)
        return cls(
            host=host.strip(),
            port=port,
            user=text("user"),
            identity_file=text("identity_file"),
            known_hosts=text("known_hosts"),
            ssh_config=configs,
        )

    def __str__(self) -> str:
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"{user}{self.host}{port}"


def _host_known(files: str, host: str, port: int) -> bool:
    """Whether the known_hosts files (", "-joined) hold any key for ``host`` at ``port``."""
    for name in files.split(", "):
        try:
            keys = asyncssh.match_known_hosts(os.path.expanduser(name), host, host, port)[0]
        except (OSError, ValueError, asyncssh.Error):
            continue
        if keys:
            return True
    return False


def _as_bytes(data: bytes | str | None) -> bytes:
    """asyncssh types its data as str-or-bytes; with encoding=None it is bytes."""
    if data is None:
        return b""
    return data.encode() if isinstance(data, str) else bytes(data)


class _Client(asyncssh.SSHClient):
    """Reports the end of its connection to the transport."""

    def __init__(self, on_lost: Callable[[asyncssh.SSHClientConnection, Exception | None], None]) -> None:
        self._on_lost = on_lost
        self._conn: asyncssh.SSHClientConnection | None = None

    def connection_made(self, conn: asyncssh.SSHClientConnection) -> None:
        self._conn = conn

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._on_lost(self._conn, exc)


class SshProcess:
    """A streaming remote process; holds one channel of the budget until closed."""

    def __init__(self, argv: tuple[str, ...], proc: asyncssh.SSHClientProcess[bytes], release: Callable[[], None]):
        self.argv = argv
        self._proc = proc
        self._release = release

    @property
    def returncode(self) -> int | None:
        code = self._proc.returncode
        return None if code is None else int(code)

    async def _io(self, what: Awaitable[T]) -> T:
        try:
            return await what
        except (asyncssh.Error, OSError) as exc:
            raise TransportError(f"{shlex.join(self.argv)}: connection lost: {exc}") from exc

    async def read(self, n: int = 65536) -> bytes:
        return bytes(await self._io(self._proc.stdout.read(n)))

    async def readline(self) -> bytes:
        return bytes(await self._io(self._proc.stdout.readline()))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while line := await self.readline():
            yield line

    async def read_stderr(self, n: int = 65536) -> bytes:
        return bytes(await self._io(self._proc.stderr.read(n)))

    async def write(self, data: bytes) -> None:
        try:
            self._proc.stdin.write(data)
        except (asyncssh.Error, OSError) as exc:
            raise TransportError(f"{shlex.join(self.argv)}: stdin closed: {exc}") from exc
        await self._io(self._proc.stdin.drain())

    async def close_stdin(self) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            self._proc.stdin.write_eof()

    def terminate(self) -> None:
        with contextlib.suppress(asyncssh.Error, OSError):
            self._proc.terminate()

    async def wait(self, timeout: float | None = None) -> int:
        try:
            await asyncio.wait_for(self._proc.wait_closed(), timeout)
        except asyncio.TimeoutError:
            raise TransportError(f"{shlex.join(self.argv)} still running after {timeout:g} s") from None
        finally:
            if self._proc.returncode is not None:
                self._release()
        code = self.returncode
        if code is None:
            self._release()
            raise TransportError(f"{shlex.join(self.argv)}: connection lost before the exit status was known")
        return code

    async def close(self) -> None:
        try:
            if self._proc.returncode is None:
                self.terminate()
                self._proc.close()
                with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error, OSError):
                    await asyncio.wait_for(self._proc.wait_closed(), TERMINATE_GRACE_S)
        finally:
            self._release()


class _Phase:
    """Where a command was when its timeout struck (for the error message)."""

    def __init__(self) -> None:
        self.value = "connecting"


class SshTransport:
    """Commands and files on one SSH target, over one lazily opened, self-healing connection."""

    def __init__(
        self,
        profile: str | Mapping[str, Any] | SshTarget,
        *,
        name: str | None = None,
        max_channels: int = DEFAULT_MAX_CHANNELS,
        keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
        keepalive_count_max: int = DEFAULT_KEEPALIVE_COUNT_MAX,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        backoff_initial: float = BACKOFF_INITIAL_S,
        backoff_max: float = BACKOFF_MAX_S,
        use_sftp: bool = True,
    ) -> None:
        if max_channels < 1:
            raise ValueError("max_channels must be at least 1")
        self.target = SshTarget.from_profile(profile)
        self.name = name or self.target.host
        self.max_channels = max_channels
        self._keepalive_interval = keepalive_interval
        self._keepalive_count_max = keepalive_count_max
        self._connect_timeout = connect_timeout
        self._backoff = Backoff(backoff_initial, backoff_max, STABLE_CONNECTION_S)
        self._use_sftp = use_sftp

        self._channels = asyncio.Semaphore(max_channels)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._connect_task: asyncio.Task[asyncssh.SSHClientConnection] | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._sftp_lock = asyncio.Lock()
        self._home: str | None = None
        self._options: dict[str, Any] | None = None
        self._endpoint: tuple[str, int, str] | None = None  # resolved host, port, known_hosts files
        self._processes: set[SshProcess] = set()
        self._listeners: list[StatusListener] = []
        self._status = ConnectionStatus(ConnectionState.DISCONNECTED, "not connected yet")
        self._closed = False
        self._quick_drops = 0  # drops in a row of connections younger than STABLE_CONNECTION_S
        self.connects = 0  # successful connections, reconnects included

    # -- status -------------------------------------------------------------------------------

    @property
    def status(self) -> ConnectionStatus:
        return self._status

    def add_status_listener(self, callback: StatusListener) -> Callable[[], None]:
        self._listeners.append(callback)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(callback)

        return remove

    def _set_status(self, state: ConnectionState, message: str) -> None:
        self._status = ConnectionStatus(state, message)
        for listener in list(self._listeners):
            try:
                listener(self._status)
            except Exception:  # a broken listener must not break the connection
                log.exception("connection status listener failed")

    @property
    def keepalive(self) -> tuple[float, int]:
        """(interval s, count max) in use: ssh_config's ServerAlive* where set (known once connected)."""
        return self._keepalive_interval, self._keepalive_count_max

    @property
    def endpoint(self) -> tuple[str, int] | None:
        """The address and port really dialled (after ssh_config's HostName/Port), once known."""
        return None if self._endpoint is None else (self._endpoint[0], self._endpoint[1])

    @property
    def local_address(self) -> tuple[str, int] | None:
        """This end of the live connection (host, port), e.g. to find its sshd session."""
        conn = self._conn
        if conn is None or conn.is_closed():
            return None
        sockname = conn.get_extra_info("sockname")
        return (str(sockname[0]), int(sockname[1])) if sockname else None

    # -- connection ---------------------------------------------------------------------------

    async def _connect_options(self) -> dict[str, Any]:
        """asyncssh.connect keyword arguments: ssh_config first, our defaults only where it is silent."""
        if self._options is not None:
            return self._options
        target = self.target
        options: dict[str, Any] = {
            "config": list(target.ssh_config) if target.ssh_config is not None else (),
            "client_factory": lambda: _Client(self._connection_lost),
        }
        if target.port is not None:
            options["port"] = target.port
        if target.user is not None:
            options["username"] = target.user
        if target.identity_file is not None:
            options["client_keys"] = [target.identity_file]
        if target.known_hosts is not None:
            options["known_hosts"] = target.known_hosts
        resolved = await asyncssh.SSHClientConnectionOptions.construct(None, host=target.host, **options)
        if not resolved.keepalive_interval:  # no ServerAliveInterval in ssh_config
            options["keepalive_interval"] = self._keepalive_interval
            options["keepalive_count_max"] = self._keepalive_count_max
        else:
            self._keepalive_interval = float(resolved.keepalive_interval)
            self._keepalive_count_max = int(resolved.keepalive_count_max)
        if resolved.connect_timeout is None:  # no ConnectTimeout in ssh_config
            options["connect_timeout"] = self._connect_timeout
        default = str(Path("~", ".ssh", "known_hosts").expanduser())
        known_hosts = resolved.known_hosts
        if known_hosts is None:
            # `UserKnownHostsFile none` would switch verification off: use the default file instead.
            options["known_hosts"] = default
            files = default
        elif not known_hosts:
            files = default
        else:
            files = known_hosts if isinstance(known_hosts, str) else ", ".join(str(k) for k in known_hosts)
        if target.known_hosts is not None and not os.path.isfile(target.known_hosts):
            raise HostKeyError(str(resolved.host), int(resolved.port), target.known_hosts, "file not found")
        self._endpoint = (str(resolved.host), int(resolved.port), files)
        self._options = options
        return options

    def _connection_lost(self, conn: asyncssh.SSHClientConnection, exc: Exception | None) -> None:
        if conn is not self._conn:
            return
        self._conn = None
        self._sftp = None
        young = not self._backoff.lived_long()
        self._quick_drops = self._quick_drops + 1 if young else 0
        for process in list(self._processes):
            process._release()  # their channels died with the connection
        if self._closed:
            return
        self._set_status(ConnectionState.DISCONNECTED, f"disconnected: {exc or 'connection closed by the server'}")
        self._spawn_connect()

    def _spawn_connect(self) -> asyncio.Task[asyncssh.SSHClientConnection]:
        task = self._connect_task
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._connect_loop(), name=f"ssh-connect {self.name}")
            # Nobody may be waiting (a background reconnect): read the outcome so it is never "unretrieved".
            task.add_done_callback(lambda t: t.cancelled() or t.exception())
            self._connect_task = task
        return task

    async def _connect_loop(self) -> asyncssh.SSHClientConnection:
        # The first attempt after a drop is immediate, unless connections keep dying young
        # (a server that accepts and then drops us): then the backoff carries on growing.
        attempt = max(0, self._quick_drops - 1)
        if attempt:
            delay = self._backoff.delay(attempt - 1)
            self._set_status(ConnectionState.RETRYING, f"disconnected, retrying in {delay:.1f} s: {self._status}")
            await asyncio.sleep(delay)
        while True:
            if self._closed:
                raise TransportError(f"{self.name}: transport closed")
            self._set_status(ConnectionState.CONNECTING, f"connecting to {self.target}")
            try:
                options = await self._connect_options()
            except HostKeyError as exc:
                self._set_status(ConnectionState.FAILED, str(exc))
                raise
            except Exception as exc:  # bad config or key file: retrying will not help
                self._set_status(ConnectionState.FAILED, f"cannot connect to {self.target}: {exc}")
                raise TransportError(f"{self.name}: cannot connect to {self.target}: {exc}") from exc
            assert self._endpoint is not None
            host, port, known_hosts = self._endpoint
            try:
                conn = await asyncssh.connect(self.target.host, **options)
            except asyncssh.HostKeyNotVerifiable as exc:
                error = HostKeyError(host, port, known_hosts, str(exc), changed=_host_known(known_hosts, host, port))
                self._set_status(ConnectionState.FAILED, str(error))
                raise error from exc
            except asyncssh.PermissionDenied as exc:
                message = f"{self.name}: authentication to {self.target} ({host} port {port}) refused: {exc}"
                self._set_status(ConnectionState.FAILED, message)
                raise TransportError(message) from exc
            except _TRANSIENT as exc:
                reason = str(exc) or type(exc).__name__
                if self.connects == 0 and isinstance(exc, _UNREACHABLE) and attempt + 1 >= UNREACHABLE_TRIES:
                    # Never connected, and nothing listens there: say so now rather than retry
                    # until the caller's timeout. A later command tries again.
                    message = f"{self.name}: cannot connect to {self.target} ({host} port {port}): {reason}"
                    self._set_status(ConnectionState.FAILED, message)
                    raise TransportError(message) from exc
                delay = self._backoff.delay(attempt)
                attempt += 1
                self._set_status(ConnectionState.RETRYING, f"disconnected, retrying in {delay:.1f} s: {reason}")
                await asyncio.sleep(delay)
                continue
            except Exception as exc:  # anything else is not going to heal by itself
                message = f"{self.name}: cannot connect to {self.target} ({host} port {port}): {exc!r}"
                self._set_status(ConnectionState.FAILED, message)
                raise TransportError(message) from exc
            if self._closed:
                conn.close()
                raise TransportError(f"{self.name}: transport closed")
            self._conn = conn
            self._sftp = None
            self._backoff.began()
            self.connects += 1
            self._set_status(ConnectionState.CONNECTED, f"connected to {self.target}")
            return conn

    async def _connection(self) -> asyncssh.SSHClientConnection:
        """The live connection, waiting for a (re)connect as long as the caller's timeout allows."""
        while True:
            if self._closed:
                raise TransportError(f"{self.name}: transport closed")
            conn = self._conn
            if conn is not None:
                if not conn.is_closed():
                    return conn
                self._connection_lost(conn, None)  # noticed before asyncssh's callback ran
            await asyncio.shield(self._spawn_connect())

    async def connect(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Open the connection now (it is otherwise opened by the first command)."""
        try:
            await asyncio.wait_for(self._connection(), timeout)
        except asyncio.TimeoutError:
            raise TransportError(f"{self.name}: not connected within {timeout:g} s ({self._status})") from None

    async def close(self) -> None:
        self._closed = True
        task, self._connect_task = self._connect_task, None
        if task is not None:
            await cancel_and_wait([task])
        for process in list(self._processes):
            await process.close()
        conn, self._conn = self._conn, None
        self._sftp = None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await conn.wait_closed()
        self._set_status(ConnectionState.DISCONNECTED, "closed")

    # -- commands -----------------------------------------------------------------------------

    async def _with_deadline(self, work: Callable[[_Phase], Awaitable[T]], timeout: float, what: str) -> T:
        phase = _Phase()
        try:
            return await asyncio.wait_for(work(phase), timeout)
        except asyncio.TimeoutError:
            if phase.value == "connecting":
                raise TransportError(
                    f"{self.name}: not connected within {timeout:g} s ({self._status}); not run: {what}"
                ) from None
            if phase.value == "running":
                raise TransportError(f"{self.name}: timed out after {timeout:g} s: {what}") from None
            raise TransportError(f"{self.name}: timed out after {timeout:g} s while {phase.value}: {what}") from None

    async def _open_process(
        self, command: str, phase: _Phase, **kwargs: Any
    ) -> tuple[asyncssh.SSHClientConnection, asyncssh.SSHClientProcess[bytes]]:
        """Open an exec channel (the caller holds a channel slot); retried while nothing has run yet."""
        while True:
            phase.value = "connecting"
            conn = await self._connection()
            phase.value = "opening a channel"
            try:
                proc = await conn.create_process(command, encoding=None, **kwargs)
            except asyncssh.ChannelOpenError as exc:
                if conn.is_closed():
                    continue
                if exc.code == OPEN_REQUEST_SESSION_FAILED:  # the channel opened, the exec request was refused
                    raise TransportError(f"{self.name}: the server refused to run {command}: {exc}") from exc
                phase.value = f"opening a channel (refused: {exc.reason}; retrying)"
                await asyncio.sleep(CHANNEL_RETRY_S)
                continue
            except _TRANSIENT as exc:
                if conn.is_closed():
                    continue  # the command never started: safe to start it on the new connection
                raise TransportError(f"{self.name}: cannot start {command}: {exc}") from exc
            return conn, proc

    async def _exec(
        self, argv: tuple[str, ...], command: str, stdin_data: bytes | None, phase: _Phase
    ) -> tuple[int, bytes, bytes]:
        phase.value = "waiting for a channel"
        async with self._channels:
            _conn, proc = await self._open_process(command, phase)
            phase.value = "running"
            try:
                if stdin_data:
                    proc.stdin.write(stdin_data)
                proc.stdin.write_eof()
                completed = await proc.wait()
            except (asyncssh.Error, OSError) as exc:
                raise TransportError(f"{self.name}: connection lost while running {command}: {exc}") from exc
            finally:
                if proc.returncode is None:
                    with contextlib.suppress(asyncssh.Error, OSError):
                        proc.terminate()
                    proc.close()
            if completed.returncode is None:
                raise TransportError(f"{self.name}: connection lost while running {command} (no exit status)")
            return int(completed.returncode), _as_bytes(completed.stdout), _as_bytes(completed.stderr)

    async def _run_bytes(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        stdin_data: bytes | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[tuple[str, ...], int, bytes, bytes]:
        args = check_argv(argv)
        if cwd is not None and cwd.startswith("~"):
            cwd = expand_home(cwd, await self.home(timeout=timeout))
        command = command_line(args, cwd=cwd, env=env)
        code, out, err = await self._with_deadline(
            lambda phase: self._exec(args, command, stdin_data, phase), timeout, command
        )
        return args, code, out, err

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
        args, code, out, err = await self._run_bytes(argv, timeout=timeout, stdin_data=input, cwd=cwd, env=env)
        result = CommandResult(args, code, decode(out), decode(err))
        return result.check() if check else result

    async def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        merge_stderr: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> SshProcess:
        args = check_argv(argv)
        if cwd is not None and cwd.startswith("~"):
            cwd = expand_home(cwd, await self.home(timeout=timeout))
        command = command_line(args, cwd=cwd, env=env)
        kwargs: dict[str, Any] = {"stderr": asyncssh.STDOUT} if merge_stderr else {}

        async def open_it(phase: _Phase) -> SshProcess:
            phase.value = "waiting for a channel"
            await self._channels.acquire()
            released = False

            def release() -> None:
                nonlocal released
                if not released:
                    released = True
                    self._channels.release()
                    self._processes.discard(handle)

            try:
                _conn, proc = await self._open_process(command, phase, **kwargs)
            except BaseException:
                self._channels.release()
                raise
            handle = SshProcess(args, proc, release)
            self._processes.add(handle)
            return handle

        return await self._with_deadline(open_it, timeout, command)

    async def home(self, *, timeout: float = DEFAULT_TIMEOUT) -> str:
        if self._home is None:
            result = await self.run(["printenv", "HOME"], timeout=timeout)
            lines = result.stdout.strip().splitlines()  # a chatty login script may print first
            home = lines[-1].strip() if lines else ""
            if result.returncode != 0 or not home.startswith("/"):
                raise TransportError(f"{self.name}: cannot tell the home directory: {result.stderr.strip()}")
            self._home = home
        return self._home

    # -- files --------------------------------------------------------------------------------

    async def _sftp_client(self) -> asyncssh.SFTPClient | None:
        """The one SFTP session of this connection, or None where the server has no SFTP."""
        if not self._use_sftp:
            return None
        async with self._sftp_lock:
            conn = await self._connection()
            if self._sftp is None:
                try:
                    self._sftp = await conn.start_sftp_client()
                except (asyncssh.Error, OSError) as exc:
                    session_refused = (
                        isinstance(exc, asyncssh.ChannelOpenError) and exc.code == OPEN_REQUEST_SESSION_FAILED
                    )
                    if conn.is_closed() or (isinstance(exc, asyncssh.ChannelOpenError) and not session_refused):
                        raise
                    log.info("%s: no SFTP (%s); files go through cat/tail", self.name, exc)
                    self._use_sftp = False
                    return None
            return self._sftp

    async def _file_op(self, work: Callable[[], Awaitable[T]], timeout: float, what: str) -> T:
        """File operations are idempotent, so a dropped connection means: reconnect and do it again."""

        async def attempt(phase: _Phase) -> T:
            while True:
                phase.value = "connecting"
                await self._connection()
                phase.value = "running"
                try:
                    return await work()
                except asyncssh.SFTPNoSuchFile as exc:
                    raise FileNotFoundError(2, f"{self.name}: no such file", what) from exc
                except asyncssh.SFTPPermissionDenied as exc:
                    raise PermissionError(13, f"{self.name}: permission denied", what) from exc
                except (FileNotFoundError, PermissionError):
                    raise
                except asyncssh.ChannelOpenError as exc:
                    conn = self._conn
                    if conn is not None and conn.is_closed():
                        self._connection_lost(conn, None)
                    else:  # back-pressure (MaxSessions): try again shortly
                        phase.value = f"opening a channel (refused: {exc.reason}; retrying)"
                        await asyncio.sleep(CHANNEL_RETRY_S)
                except (asyncssh.Error, OSError) as exc:
                    conn = self._conn
                    lost = conn is None or conn.is_closed() or isinstance(exc, _LOST)
                    if not lost:
                        raise OSError(f"{self.name}: {what}: {exc}") from exc
                    if conn is not None and conn.is_closed():
                        self._connection_lost(conn, None)
                    self._sftp = None  # reconnect (or reopen SFTP) and do it again

        return await self._with_deadline(attempt, timeout, what)

    async def _path(self, path: str, timeout: float) -> str:
        return expand_home(path, await self.home(timeout=timeout)) if path.startswith("~") else path

    async def write_file(self, path: str, data: bytes, mode: int = 0o644, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Write atomically (temporary file + rename) so a reader never sees half a file."""
        path = await self._path(path, timeout)
        directory, base = posixpath.split(path)
        tmp = posixpath.join(directory, f".{base}.{secrets.token_hex(6)}.tmp")

        async def work() -> None:
            sftp = await self._sftp_client()
            if sftp is None:
                await self._write_with_cat(path, tmp, data, mode, timeout)
                return
            try:
                async with sftp.open(tmp, "wb") as handle:
                    await handle.write(data)
                await sftp.chmod(tmp, mode)
                try:
                    await sftp.posix_rename(tmp, path)
                except asyncssh.SFTPOpUnsupported:
                    with contextlib.suppress(asyncssh.SFTPNoSuchFile):
                        await sftp.remove(path)
                    await sftp.rename(tmp, path)
            except BaseException:
                with contextlib.suppress(Exception):
                    await sftp.remove(tmp)
                raise

        await self._file_op(work, timeout, f"write {path}")

    async def _write_with_cat(self, path: str, tmp: str, data: bytes, mode: int, timeout: float) -> None:
        script = 'cat > "$1" && chmod "$2" "$1" && mv -f -- "$1" "$3" || { rm -f -- "$1"; exit 1; }'
        _args, code, _out, err = await self._run_bytes(
            ["sh", "-c", script, "sh", tmp, f"{mode:o}", path], timeout=timeout, stdin_data=data
        )
        if code != 0:
            raise OSError(f"{self.name}: cannot write {path}: {decode(err).strip()}")

    async def read_file(
        self, path: str, offset: int = 0, length: int | None = None, *, timeout: float = DEFAULT_TIMEOUT
    ) -> bytes:
        path = await self._path(path, timeout)

        async def work() -> bytes:
            sftp = await self._sftp_client()
            if sftp is None:
                return await self._read_with_tail(path, offset, length, timeout)
            async with sftp.open(path, "rb") as handle:
                size = int((await handle.stat()).size or 0)
                start, count = clamp_range(size, offset, length)
                if count == 0:
                    return b""
                return _as_bytes(await handle.read(count, start))

        return await self._file_op(work, timeout, f"read {path}")

    async def _read_with_tail(self, path: str, offset: int, length: int | None, timeout: float) -> bytes:
        _args, code, out, err = await self._run_bytes(["stat", "-L", "-c", "%s", "--", path], timeout=timeout)
        if code != 0:
            message = decode(err).strip()
            if "No such file" in message:
                raise FileNotFoundError(2, f"{self.name}: no such file", path)
            raise OSError(f"{self.name}: cannot read {path}: {message}")
        start, count = clamp_range(int(out.strip() or 0), offset, length)
        if count == 0:
            return b""
        script = 'tail -c +"$2" -- "$1" | head -c "$3"'
        _args, code, out, err = await self._run_bytes(
            ["sh", "-c", script, "sh", path, str(start + 1), str(count)], timeout=timeout
        )
        if code != 0:
            raise OSError(f"{self.name}: cannot read {path}: {decode(err).strip()}")
        return out
