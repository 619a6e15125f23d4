"""Faults: a console killed mid-launch, a cancel while a sweep is being submitted, a local
runner killed, a full disk, a store locked, read-only or empty, hosts that refuse or present
an unknown or changed key. Nothing is lost, every cause is named, no traceback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from console import store as store_module
from console.cli import main
from console.clusters import local_profile
from console.demo.localsched import LocalScheduler, process_alive, read_job
from console.engine import Engine, new_marker
from console.events import AttemptChanged
from console.recipes import load_recipe
from console.scheduler import Submission
from console.store import SUBMITTING, Store, StoreError
from console.transport.base import HostKeyError, TransportError
from console.transport.ssh import SshTransport
from tests.conftest import RECIPES, ROOT

QUICK = RECIPES / "demo" / "quick.yaml"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SRT_DEMO_SPEED", "8")
    return tmp_path / "data"


def engine_for(data_dir: Path) -> Engine:
    return Engine(Store(data_dir / "console.sqlite3"), {"local": local_profile(data_dir)}, data_dir)


def wait_for(condition: object, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# --------------------------------------------------------------------------- nothing lost


def test_a_console_killed_during_a_launch_leaves_every_job_known(data_dir: Path, tmp_path: Path) -> None:
    """SIGKILL of `launch` right after its first job is on the scheduler: the next command finds
    that job by its marker and no attempt stays SUBMITTING."""
    folder = tmp_path / "six"
    folder.mkdir()
    text = QUICK.read_text()
    for i in range(6):
        (folder / f"q{i}.yaml").write_text(text.replace("name: demo-quick", f"name: demo-quick-{i}"))
    env = {**os.environ, "SRT_CONSOLE_DATA": str(data_dir)}
    launch = subprocess.Popen([sys.executable, "-m", "console", "launch", str(folder), "--yes"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    scheduler = LocalScheduler(data_dir / "local-jobs")
    try:
        wait_for(lambda: scheduler.job_ids() or launch.poll() is not None, "the first job")
    finally:
        launch.send_signal(signal.SIGKILL)
        launch.wait()
    jobs = scheduler.job_ids()
    assert jobs
    assert main(["status", "--json"]) == 0
    store = Store(data_dir / "console.sqlite3")
    attempts = store.attempts()
    assert not [a for a in attempts if a.state == SUBMITTING]
    known = {a.job_id for a in attempts if a.job_id}
    assert set(scheduler.job_ids()) <= known
    asyncio.run(engine_for(data_dir).cancel(store.attempts(live=True)))


def test_reconcile_finds_the_job_of_a_dead_submitter_by_its_marker(data_dir: Path) -> None:
    store = Store(data_dir / "console.sqlite3")
    sweep = store.add_sweep("s", "local", ["x.yaml"])
    arm = store.add_arm(sweep, "a", "x.yaml", None, None, "{}", {})
    marker = new_marker()
    submitted = store.add_attempt(arm, "local", "demo", "{}", [1], marker=marker)
    lost = store.add_attempt(arm, "local", "demo", "{}", [1], marker=new_marker())
    # Their submitter died: a pid no process has.
    with store._tx() as db:
        db.execute("UPDATE attempts SET submitter = ?", (f"{socket.gethostname()}:999999999:1",))
    script = data_dir / "job.sh"
    script.write_text("#!/bin/sh\nsleep 30\n")
    scheduler = LocalScheduler(data_dir / "local-jobs")
    job_id = asyncio.run(scheduler.submit(Submission(str(script), "a", workdir=str(data_dir), comment=marker)))
    engine = engine_for(data_dir)

    async def scenario() -> None:
        await engine.poll_once()
        await engine.cancel(engine.store.attempts(live=True))
        await engine.close()

    asyncio.run(scenario())
    found, failed = store.attempt(submitted.id), store.attempt(lost.id)
    assert found.job_id == job_id and found.output_dir
    assert failed.state == "SUBMIT_FAILED" and "stopped before" in (failed.error or "")


def test_cancelling_a_sweep_while_it_is_submitted_stops_the_rest(data_dir: Path) -> None:
    """Another console cancels the sweep after its first arm was submitted: that job is cancelled,
    no later arm is submitted."""
    recipe = load_recipe(QUICK)
    arms = [recipe.arms[0]] * 4
    engine = engine_for(data_dir)
    other = engine_for(data_dir)  # the other console: its own store connection
    cancelled: list[int] = []

    async def scenario() -> int:
        async def cancel_from_elsewhere(sweep_id: int) -> None:
            attempts = [a for arm in other.store.arms(sweep_id) for a in other.store.attempts(arm.id)]
            await other.cancel(attempts, sweep_id=sweep_id)

        def listener(event: object) -> None:
            if isinstance(event, AttemptChanged) and event.attempt.job_id and not cancelled:
                arm = engine.store.arm(event.attempt.arm_id)
                assert arm is not None
                cancelled.append(arm.sweep_id)
                asyncio.get_running_loop().create_task(cancel_from_elsewhere(arm.sweep_id))

        engine.subscribe(listener)
        sweep = await engine.launch([str(QUICK)], "local", planned=([recipe], arms))
        ids = [a.id for arm in engine.store.arms(sweep) for a in engine.store.attempts(arm.id)]
        await engine.wait(ids, 0.2)
        await engine.close()
        await other.close()
        return sweep

    sweep = asyncio.run(scenario())
    attempts = [a for arm in engine.store.arms(sweep) for a in engine.store.attempts(arm.id)]
    submitted = [a for a in attempts if a.job_id]
    assert len(attempts) == 4
    assert all(a.state == "CANCELLED" and a.cancelled_by_operator for a in attempts), [a.state for a in attempts]
    # At most the one under way when the cancel came was submitted besides the first.
    assert 1 <= len(submitted) <= 2
    assert len(LocalScheduler(data_dir / "local-jobs").job_ids()) == len(submitted)


def test_killing_the_local_runner_takes_the_jobs_processes_with_it(tmp_path: Path) -> None:
    scheduler = LocalScheduler(tmp_path / "jobs")
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\nsleep 300 &\nsleep 300\n")
    job_id = asyncio.run(scheduler.submit(Submission(str(script), "j", workdir=str(tmp_path))))
    wait_for(lambda: (read_job(scheduler.state_dir, job_id) or {}).get("script_pid"), "the script")
    job = read_job(scheduler.state_dir, job_id) or {}
    pgid = int(job["script_pid"])
    os.kill(int(job["runner_pid"]), signal.SIGKILL)
    wait_for(lambda: not process_alive(int(job["runner_pid"]), job.get("runner_start")), "the runner to die")
    assert scheduler.status(job_id).state.value == "NODE_FAIL"

    def group_gone() -> bool:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        # Zombies of the killed group are reaped by init; they count as gone.
        alive = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, text=True).stdout
        return all(s.startswith("Z") for s in alive.split())

    wait_for(group_gone, "the job's processes to end")


# --------------------------------------------------------------------------- the store


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (root only): a disk that can be filled to 0 bytes free."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        reason = f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Write until the disk has 0 bytes free."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (65536, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * chunk)
    finally:
        os.close(fd)


def test_a_full_disk_is_named_writes_nothing_half_way_and_cancel_still_works(
    small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = small_disk / "data"
    data.mkdir()
    jobs = tmp_path / "jobs"  # the local scheduler's own state lives elsewhere
    jobs.mkdir()
    (data / "local-jobs").symlink_to(jobs)
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(data))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    config = tmp_path / "xdg" / "srt-console" / "config.yaml"
    config.parent.mkdir(parents=True)
    # The job's outputs live elsewhere too: only the store's disk is full.
    config.write_text(f"clusters:\n  local:\n    outputs: {tmp_path / 'outputs'}\n    workdir: {tmp_path / 'work'}\n")
    script = tmp_path / "long.yaml"
    script.write_text(QUICK.read_text().replace("point_seconds: 2", "point_seconds: 600"))
    assert main(["launch", str(script), "--yes"]) == 0
    capsys.readouterr()
    fill(small_disk)
    assert main(["launch", str(QUICK), "--yes"]) == 1
    err = capsys.readouterr().err
    assert "no space left" in err and str(data) in err and "Traceback" not in err
    assert main(["status"]) == 0
    assert main(["cancel", "s1", "--yes"]) == 1
    out = capsys.readouterr()
    assert "cancel sent to job 1" in out.out and "not recorded" in out.err and "no space left" in out.err
    wait_for(lambda: (read_job(jobs, "1") or {}).get("state") == "CANCELLED", "the job to be cancelled")
    (small_disk / "filler").unlink()
    store = Store(data / "console.sqlite3")
    assert [s.name for s in store.sweeps()] == ["long"]  # the refused launch left nothing behind
    assert len(store.arms()) == 1


def test_a_store_locked_for_long_is_waited_for_then_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "console.sqlite3"
    Store(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3,sys; db=sqlite3.connect(sys.argv[1], isolation_level=None); "
         "db.execute('BEGIN IMMEDIATE'); print('locked', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        monkeypatch.setattr(store_module, "LOCK_WAIT_S", 1.0)
        monkeypatch.setattr(store_module, "LOCK_NOTICE_S", 0.2)
        told: list[str] = []
        store = Store(path, on_wait=told.append)
        assert store.sweeps() == []  # reading is never blocked
        with pytest.raises(StoreError, match="another process has held the store's lock"):
            store.add_sweep("x", "local", [])
        assert len(told) == 1 and "waiting" in told[0]
    finally:
        holder.kill()
        holder.wait()
    assert store.add_sweep("x", "local", []) == 1  # once it is free, writing works


def test_a_read_only_store_and_an_empty_one_are_named(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    Store(data / "console.sqlite3").close()
    env = {**os.environ, "SRT_CONSOLE_DATA": str(data), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    # Root writes through permissions: a read-only bind mount makes the folder read-only for it too.
    read_only = ["mount", "--bind", "-o", "ro", str(data), str(data)]
    if os.getuid() == 0 and subprocess.run(read_only, capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount a folder read-only here")
    if os.getuid() != 0:
        data.chmod(0o555)
    try:
        done = subprocess.run([sys.executable, "-m", "console", "launch", str(QUICK), "--yes"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip
    finally:
        if os.getuid() == 0:
            subprocess.run(["umount", str(data)], check=False)
        data.chmod(0o755)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "read-only" in done.stderr, done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "console.sqlite3").write_bytes(b"")
    done = subprocess.run([sys.executable, "-m", "console", "status"], cwd=ROOT, capture_output=True, text=True,
                          env={**env, "SRT_CONSOLE_DATA": str(empty)}, timeout=60)  # fmt: skip
    assert done.returncode == 0 and "is empty (0 bytes)" in done.stderr


# --------------------------------------------------------------------------- SSH


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_closed_port_is_refused_quickly(tmp_path: Path) -> None:
    known = tmp_path / "known_hosts"
    known.write_text("")
    transport = SshTransport({"host": "127.0.0.1", "port": _closed_port(), "known_hosts": str(known)}, name="c")
    started = time.monotonic()
    try:
        with pytest.raises(TransportError, match=r"refused|Connect call failed"):
            await transport.run(["true"], timeout=30)
    finally:
        await transport.close()
    assert time.monotonic() - started < 5


class _Server(asyncssh.SSHServer):
    def begin_auth(self, username: str) -> bool:
        return True


async def _host_key_error(tmp_path: Path, known_text: str) -> tuple[HostKeyError, Path]:
    """A real SSH server on loopback, and the error a client with ``known_text`` as its known_hosts gets."""
    key = asyncssh.generate_private_key("ssh-ed25519")
    server = await asyncssh.create_server(_Server, "127.0.0.1", 0, server_host_keys=[key])
    port = server.sockets[0].getsockname()[1]
    known = tmp_path / "profile_known_hosts"
    known.write_text(known_text.replace("PORT", str(port)))
    transport = SshTransport({"host": "127.0.0.1", "port": port, "known_hosts": str(known)}, name="k")
    try:
        with pytest.raises(HostKeyError) as info:
            await transport.run(["true"], timeout=20)
    finally:
        await transport.close()
        server.close()
    return info.value, known


async def test_an_unknown_host_key_and_the_profiles_file(tmp_path: Path) -> None:
    error, known = await _host_key_error(tmp_path, "")
    message = str(error)
    assert not error.changed and "is unknown" in message and "man-in-the-middle" not in message
    assert f">> {known}" in message and "~/.ssh/known_hosts" not in message


async def test_a_changed_host_key_says_man_in_the_middle(tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    error, known = await _host_key_error(tmp_path, f"[127.0.0.1]:PORT {other}\n")
    message = str(error)
    assert error.changed and "CHANGED" in message and "man-in-the-middle" in message
    assert f"-f {known}" in message and "~/.ssh/known_hosts" not in message


def test_the_marker_is_in_the_uploaded_srtctl_recipe() -> None:
    from console.launchers import srtctl_recipe

    config = load_recipe(QUICK).arms[0].config
    marker = new_marker()
    assert srtctl_recipe(config, None, marker)["sbatch_directives"]["comment"] == marker
    mine = {**config, "sbatch_directives": {"comment": "team-a"}}
    assert srtctl_recipe(mine, None, marker)["sbatch_directives"]["comment"] == f"team-a {marker}"
    assert json.dumps(srtctl_recipe(config, None, None)).count("srt-console:") == 0
