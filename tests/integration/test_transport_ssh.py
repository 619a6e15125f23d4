"""SshTransport against the local cluster's real OpenSSH server (tests/cluster/up.sh)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncssh
import pytest

from console.transport import (
    ConnectionState,
    ConnectionStatus,
    HostKeyError,
    SshTarget,
    SshTransport,
    StreamingProcess,
    TransportError,
)

if TYPE_CHECKING:
    from .conftest import ClusterInfo

pytestmark = pytest.mark.cluster

DEADLINE_S = 20.0
POLL_S = 0.05
NASTY = 'dir with space/it\'s "q"; $(touch CANARY) `touch CANARY`'


def profile(cluster: ClusterInfo, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "host": cluster.host,
        "port": cluster.port,
        "user": cluster.user,
        "identity_file": str(cluster.identity_file),
        "known_hosts": str(cluster.known_hosts),
        # The machine's own ~/.ssh/config must not change what these tests connect to.
        "ssh_config": [],
    }
    values.update(overrides)
    return values


async def eventually(probe: Callable[[], Awaitable[bool]], what: str, timeout: float = DEADLINE_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await probe():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(POLL_S)


@pytest.fixture
async def transport(slurm_cluster: ClusterInfo) -> AsyncIterator[SshTransport]:
    t = SshTransport(profile(slurm_cluster), name="test-cluster")
    try:
        yield t
    finally:
        await t.close()


@pytest.fixture
async def remote_dir(slurm_cluster: ClusterInfo, cluster_ssh: asyncssh.SSHClientConnection) -> AsyncIterator[str]:
    path = f"{slurm_cluster.workdir}/pytest-transport-{uuid.uuid4().hex[:12]}"
    await cluster_ssh.run(f"mkdir -p {shlex.quote(path)}", check=True, timeout=30)
    try:
        yield path
    finally:
        await cluster_ssh.run(f"rm -rf {shlex.quote(path)}", check=False, timeout=30)


async def remote_exists(conn: asyncssh.SSHClientConnection, path: str) -> bool:
    result = await conn.run(shlex.join(["test", "-e", path]), check=False, timeout=30)
    return result.exit_status == 0


async def find_canaries(conn: asyncssh.SSHClientConnection, root: str) -> list[str]:
    result = await conn.run(shlex.join(["find", root, "-name", "CANARY*"]), check=True, timeout=30)
    return str(result.stdout).split()


async def test_connect_and_run_with_verified_host_key(
    slurm_cluster: ClusterInfo, transport: SshTransport, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[ConnectionStatus] = []
    transport.add_status_listener(seen.append)
    started = time.perf_counter()
    await transport.connect()
    connect_s = time.perf_counter() - started
    assert transport.status.state is ConnectionState.CONNECTED
    assert [s.state for s in seen] == [ConnectionState.CONNECTING, ConnectionState.CONNECTED]

    result = await transport.run(["id", "-un"])
    assert (result.returncode, result.stdout.strip()) == (0, slurm_cluster.user)
    assert await transport.home() == slurm_cluster.workdir
    assert transport.endpoint == (slurm_cluster.host, slurm_cluster.port)
    assert transport.keepalive == (15.0, 3)  # keepalive on although no ssh_config asked for it

    result = await transport.run(
        ["sh", "-c", 'echo "$0" "$PWD" "$SRT_V"; exit 4', "arg0"], cwd="~", env={"SRT_V": "x y"}
    )
    assert result.returncode == 4
    assert result.stdout == f"arg0 {slurm_cluster.workdir} x y\n"
    result = await transport.run(["cat"], input=b"to stdin")
    assert result.stdout == "to stdin"
    with capsys.disabled():
        print(f"\n[figure] ssh connect + auth: {connect_s * 1000:.0f} ms")


async def _refused(
    cluster: ClusterInfo, known_hosts: Path, cluster_ssh: asyncssh.SSHClientConnection, *, changed: bool
) -> None:
    canary = f"{cluster.workdir}/CANARY-hostkey-{uuid.uuid4().hex[:8]}"
    transport = SshTransport(profile(cluster, known_hosts=str(known_hosts)))
    seen: list[ConnectionStatus] = []
    transport.add_status_listener(seen.append)
    try:
        with pytest.raises(HostKeyError) as info:
            await transport.run(["touch", canary], timeout=10)
        message = str(info.value)
        assert "127.0.0.1 port 2222" in message
        # The advice names the file this profile uses, not a default one.
        assert f"ssh-keyscan -p 2222 127.0.0.1 >> {known_hosts}" in message
        assert ("CHANGED" in message and "man-in-the-middle" in message) is changed
        assert ("unknown" in message) is not changed
        assert transport.status.state is ConnectionState.FAILED
        assert seen[-1].state is ConnectionState.FAILED
        # Refused, not retried in the background: the operator has to act.
        with pytest.raises(HostKeyError):
            await transport.write_file(canary, b"x", timeout=10)
    finally:
        await transport.close()
    assert not await remote_exists(cluster_ssh, canary)


async def test_unknown_host_key_is_refused_with_advice(
    slurm_cluster: ClusterInfo, cluster_ssh: asyncssh.SSHClientConnection, tmp_path: Path
) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    await _refused(slurm_cluster, empty, cluster_ssh, changed=False)


async def test_changed_host_key_is_refused_with_advice(
    slurm_cluster: ClusterInfo, cluster_ssh: asyncssh.SSHClientConnection, tmp_path: Path
) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    changed = tmp_path / "known_hosts"
    changed.write_text(f"[{slurm_cluster.host}]:{slurm_cluster.port} {other}\n")
    await _refused(slurm_cluster, changed, cluster_ssh, changed=True)


async def test_missing_known_hosts_file_is_refused(slurm_cluster: ClusterInfo, tmp_path: Path) -> None:
    transport = SshTransport(profile(slurm_cluster, known_hosts=str(tmp_path / "nope")))
    try:
        with pytest.raises(HostKeyError, match=r"127\.0\.0\.1 port 2222"):
            await transport.run(["true"], timeout=10)
    finally:
        await transport.close()


@pytest.mark.parametrize("use_sftp", [True, False], ids=["sftp", "cat"])
async def test_nasty_paths_stay_literal(
    transport: SshTransport,
    slurm_cluster: ClusterInfo,
    cluster_ssh: asyncssh.SSHClientConnection,
    remote_dir: str,
    use_sftp: bool,
) -> None:
    if not use_sftp:
        transport = SshTransport(profile(slurm_cluster), use_sftp=False)
    try:
        directory = f"{remote_dir}/{NASTY}"
        path = f"{directory}/file; $(touch CANARY).txt"
        await transport.run(["mkdir", "-p", directory], check=True)
        data = b"line one\n" + bytes(range(256)) + b"\nend $(touch CANARY)\n"
        await transport.write_file(path, data, mode=0o600)
        assert await transport.read_file(path) == data
        assert await transport.read_file(path, 5, 3) == data[5:8]
        assert await transport.read_file(path, -4) == data[-4:]
        assert await transport.read_file(path, 10_000) == b""
        assert await transport.read_file(path, -10_000, 4) == data[:4]

        listing = await transport.run(["ls", "-A"], cwd=directory, check=True)
        assert listing.stdout.splitlines() == ["file; $(touch CANARY).txt"]  # no temporary file left
        mode = await transport.run(["stat", "-c", "%a", path], check=True)
        assert mode.stdout.strip() == "600"
        echoed = await transport.run(["printf", "%s", path], env={"X": NASTY})
        assert echoed.stdout == path
        with pytest.raises(FileNotFoundError):
            await transport.read_file(f"{directory}/missing $(touch CANARY)")

        assert await find_canaries(cluster_ssh, slurm_cluster.workdir) == []
    finally:
        if not use_sftp:
            await transport.close()


def session_pids(local_port: int) -> list[int]:
    """sshd processes that hold this very connection (never another engineer's session)."""
    out = subprocess.run(
        ["ss", "-Htnp", "state", "established", f"( sport = :2222 and dport = :{local_port} )"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pids = {int(part.split("=", 1)[1]) for part in out.replace(",", " ").replace(")", " ").split() if "pid=" in part}
    return sorted(pids)


async def kill_session(transport: SshTransport) -> None:
    """SIGKILL this transport's sshd session and wait until the server side is really gone.

    Waiting matters on a busy machine: a command started in the instant before the kill takes
    effect is lost with the connection, and its outcome is then unknown (a TransportError).
    Killing is repeated because sshd may fork the session's post-auth child just after the
    first look, and that child holds the connection too.
    """
    address = transport.local_address
    assert address is not None
    assert session_pids(address[1]), "no sshd process found for this connection"

    async def gone() -> bool:
        pids = session_pids(address[1])
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return not pids

    await eventually(gone, "the killed sshd session to disappear")


async def test_reconnects_after_the_session_is_killed(
    transport: SshTransport, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[ConnectionStatus] = []
    await transport.connect()
    transport.add_status_listener(seen.append)
    address = transport.local_address
    killed = time.perf_counter()
    await kill_session(transport)

    result = await transport.run(["echo", "back"], timeout=20)
    reconnect_s = time.perf_counter() - killed
    assert result.stdout == "back\n"
    states = [s.state for s in seen]
    assert ConnectionState.DISCONNECTED in states
    assert states[-1] is ConnectionState.CONNECTED
    assert states.index(ConnectionState.DISCONNECTED) < len(states) - 1
    assert transport.connects == 2
    assert transport.local_address != address
    with capsys.disabled():
        print(f"\n[figure] reconnect after the sshd session was killed: {reconnect_s * 1000:.0f} ms")


async def test_connections_that_keep_dying_young_back_off(transport: SshTransport) -> None:
    await transport.connect()
    seen: list[ConnectionStatus] = []
    transport.add_status_listener(seen.append)
    for _ in range(2):
        await kill_session(transport)
        assert (await transport.run(["true"], timeout=20)).ok
    states = [s.state for s in seen]
    # The first drop reconnects at once; the second one, seconds later, waits a backoff first.
    first_connected = states.index(ConnectionState.CONNECTED)
    assert ConnectionState.RETRYING not in states[:first_connected]
    assert ConnectionState.RETRYING in states[first_connected:]
    assert states[-1] is ConnectionState.CONNECTED
    assert transport.connects == 3


async def test_a_dropped_connection_ends_a_streaming_process_with_transport_error(transport: SshTransport) -> None:
    proc = await transport.start(["sh", "-c", "echo ready; exec sleep 60"])
    assert await asyncio.wait_for(proc.readline(), 10) == b"ready\n"
    await kill_session(transport)
    with pytest.raises(TransportError):
        while await asyncio.wait_for(proc.read(), 10):
            pass
        await proc.wait(10)
    await proc.close()
    assert (await transport.run(["true"], timeout=20)).ok


async def test_command_timeout_raises_and_stops_the_remote_command(
    transport: SshTransport, cluster_ssh: asyncssh.SSHClientConnection
) -> None:
    marker = f"sleep {uuid.uuid4().int % 1000 + 100}.{uuid.uuid4().int % 1000:03d}"
    with pytest.raises(TransportError, match=r"timed out after 0\.5 s: sh -c") as info:
        await transport.run(["sh", "-c", f"exec {marker}"], timeout=0.5)
    assert marker in str(info.value)

    async def gone() -> bool:
        result = await cluster_ssh.run(shlex.join(["pgrep", "-f", marker]), check=False, timeout=30)
        return result.exit_status == 1

    await eventually(gone, f"the remote {marker!r} to be stopped")
    assert (await transport.run(["true"])).ok  # the connection survived


async def test_a_closed_port_is_said_at_once_with_its_cause() -> None:
    # Nothing listens on port 1: a transport that never connected says so within seconds, in
    # the system's words, instead of retrying until the command's timeout.
    transport = SshTransport({"host": "127.0.0.1", "port": 1, "ssh_config": []}, backoff_initial=0.05)
    seen: list[ConnectionStatus] = []
    transport.add_status_listener(seen.append)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        with pytest.raises(TransportError, match=r"cannot connect to 127\.0\.0\.1:1 .*(?:refused|failed)") as info:
            await transport.run(["touch", "x"], timeout=30)
        assert not isinstance(info.value, HostKeyError)
        assert loop.time() - started < 5
        assert any(s.state is ConnectionState.FAILED for s in seen), seen
    finally:
        await transport.close()
    assert transport.status.state is ConnectionState.DISCONNECTED


async def test_streaming_process(transport: SshTransport) -> None:
    proc = await transport.start(["sh", "-c", 'echo "start $0"; while read -r l; do echo "got $l"; done', "x y"])
    assert isinstance(proc, StreamingProcess)
    try:
        assert await asyncio.wait_for(proc.readline(), 10) == b"start x y\n"
        await proc.write(b"one\n")
        assert await asyncio.wait_for(proc.readline(), 10) == b"got one\n"
        await proc.write(b"two\n")
        await proc.close_stdin()
        assert [line async for line in proc] == [b"got two\n"]
        assert await proc.wait(10) == 0
    finally:
        await proc.close()

    stopped = await transport.start(["sh", "-c", "echo err >&2; echo ready; exec sleep 60"], merge_stderr=True)
    assert sorted([await stopped.readline(), await stopped.readline()]) == [b"err\n", b"ready\n"]
    await stopped.close()
    assert stopped.returncode is not None


async def test_channel_budget_holds_many_concurrent_commands_on_one_connection(slurm_cluster: ClusterInfo) -> None:
    transport = SshTransport(profile(slurm_cluster), max_channels=3)
    try:
        results = await asyncio.gather(*(transport.run(["sh", "-c", f"sleep 0.05; echo {i}"]) for i in range(25)))
        assert [r.stdout.strip() for r in results] == [str(i) for i in range(25)]
        assert transport.connects == 1
        # A long-lived process holds one of the three channels; commands still go through the other two.
        proc = await transport.start(["sleep", "60"])
        try:
            assert (await transport.run(["true"])).ok
        finally:
            await proc.close()
    finally:
        await transport.close()


def write_ssh_config(path: Path, cluster: ClusterInfo) -> None:
    path.write_text(
        f"""\
Host srt-test-alias
    HostName {cluster.host}
    Port {cluster.port}
    User {cluster.user}
    IdentityFile {cluster.identity_file}
    IdentitiesOnly yes
    UserKnownHostsFile {cluster.known_hosts}
    ServerAliveInterval 7
    ServerAliveCountMax 2

Host srt-test-jump
    HostName {cluster.host}
    Port {cluster.port}
    User {cluster.user}
    IdentityFile {cluster.identity_file}
    IdentitiesOnly yes
    UserKnownHostsFile {cluster.known_hosts}
    ProxyJump srt-test-alias
"""
    )


async def test_ssh_config_host_alias(slurm_cluster: ClusterInfo, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    write_ssh_config(config, slurm_cluster)
    transport = SshTransport(SshTarget(host="srt-test-alias", ssh_config=(str(config),)))
    try:
        result = await transport.run(["id", "-un"])
        assert result.stdout.strip() == slurm_cluster.user
        assert transport.name == "srt-test-alias"
        assert transport.endpoint == (slurm_cluster.host, slurm_cluster.port)
        assert transport.keepalive == (7.0, 2)  # ServerAlive* from the config win
    finally:
        await transport.close()


async def test_ssh_config_proxy_jump(slurm_cluster: ClusterInfo, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    write_ssh_config(config, slurm_cluster)
    transport = SshTransport({"host": "srt-test-jump", "ssh_config": str(config)})
    try:
        result = await transport.run(["id", "-un"])
        assert result.stdout.strip() == slurm_cluster.user
        assert transport.endpoint == (slurm_cluster.host, slurm_cluster.port)
    finally:
        await transport.close()


def test_profiles_alias_or_mapping(tmp_path: Path) -> None:
    assert SshTarget.from_profile(" mi355x-login ") == SshTarget(host="mi355x-login")
    target = SshTarget.from_profile(
        {"host": "127.0.0.1", "port": 2222, "user": "u", "identity_file": "~/k", "known_hosts": str(tmp_path)}
    )
    assert (target.host, target.port, target.user) == ("127.0.0.1", 2222, "u")
    assert target.identity_file == os.path.expanduser("~/k")
    assert str(target) == "u@127.0.0.1:2222"
    for bad in [
        {"port": 22},
        {"host": ""},
        {"host": "h", "port": "22"},
        {"host": "h", "port": 70000},
        {"host": "h", "x": 1},
    ]:
        with pytest.raises(ValueError):
            SshTarget.from_profile(bad)
    with pytest.raises(ValueError):
        SshTarget.from_profile("")
