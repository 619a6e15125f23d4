"""The local Slurm cluster (tests/cluster/*.sh) as pytest fixtures.

``slurm_cluster`` installs the packages if needed and brings the cluster up once
per test session (a quick health check when it is already up). It stays up after
the session so reruns are fast; set ``SRT_CLUSTER_DOWN_AFTER=1`` to stop it at the
end. Without root or apt-get the cluster tests are skipped, except under ``CI``,
where that is an error.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from console.clusters import load_profiles
from console.config import load_config
from console.engine import Engine
from console.store import Store

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_DIR = ROOT / "tests" / "cluster"
DEFAULT_BASE = Path("/var/lib/srt-console-cluster")

INSTALL_TIMEOUT_S = 900
UP_TIMEOUT_S = 240
STACK_TIMEOUT_S = 1200  # the first time: srtctl's and Dynamo's dependencies from PyPI
DOWN_TIMEOUT_S = 120


@dataclass(frozen=True)
class ClusterInfo:
    """How to reach the local cluster over SSH (values from cluster.env)."""

    host: str
    port: int
    user: str
    identity_file: Path
    known_hosts: Path
    nodes: int
    partition: str
    workdir: str
    """A directory on the cluster owned by ``user`` (its home)."""
    log_dir: Path | None = None
    """Daemon logs (slurmctld.log, slurmd-nodeN.log, sshd.log, ...)."""


def cluster_base() -> Path:
    return Path(os.environ.get("SRT_CLUSTER_BASE") or DEFAULT_BASE)


def read_env_file(path: Path) -> dict[str, str]:
    """Parse the KEY=VALUE lines up.sh writes (values may be shell-quoted)."""
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        if len(words) != 1 or "=" not in words[0]:
            raise ValueError(f"{path}: not a KEY=VALUE line: {raw!r}")
        key, _, value = words[0].partition("=")
        values[key] = value
    return values


def cluster_info_from_env(values: dict[str, str]) -> ClusterInfo:
    log_dir = values.get("SRT_CLUSTER_LOG_DIR")
    return ClusterInfo(
        host=values["SRT_CLUSTER_SSH_HOST"],
        port=int(values["SRT_CLUSTER_SSH_PORT"]),
        user=values["SRT_CLUSTER_SSH_USER"],
        identity_file=Path(values["SRT_CLUSTER_SSH_IDENTITY"]),
        known_hosts=Path(values["SRT_CLUSTER_SSH_KNOWN_HOSTS"]),
        nodes=int(values["SRT_CLUSTER_NODES"]),
        partition=values["SRT_CLUSTER_PARTITION"],
        workdir=values["SRT_CLUSTER_WORKDIR"],
        log_dir=Path(log_dir) if log_dir else None,
    )


def _unsupported_reason() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root and apt-get to run the local Slurm cluster (not running as root)"
    if shutil.which("apt-get") is None:
        return "needs root and apt-get to run the local Slurm cluster (apt-get not found)"
    return None


def _run_script(name: str, timeout: float) -> None:
    script = CLUSTER_DIR / name
    try:
        proc = subprocess.run(
            ["bash", str(script)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{script} did not finish within {timeout:.0f} s\n{exc.stdout or ''}{exc.stderr or ''}")
    if proc.returncode != 0:
        pytest.fail(
            f"{script} exited with {proc.returncode}\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        )


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[ClusterInfo]:
    """Bring the local cluster up (once per session) and return its SSH coordinates."""
    reason = _unsupported_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, so the cluster tests must run here", pytrace=False)
        pytest.skip(reason)

    _run_script("install.sh", INSTALL_TIMEOUT_S)
    _run_script("up.sh", UP_TIMEOUT_S)
    _run_script("stack.sh", STACK_TIMEOUT_S)
    env_file = cluster_base() / "cluster.env"
    info = cluster_info_from_env(read_env_file(env_file))
    try:
        yield info
    finally:
        if os.environ.get("SRT_CLUSTER_DOWN_AFTER") == "1":
            _run_script("down.sh", DOWN_TIMEOUT_S)


async def connect_cluster(
    cluster: ClusterInfo, *, known_hosts: Path | None = None, **kwargs: Any
) -> asyncssh.SSHClientConnection:
    """Open an SSH connection to the cluster as its test user, verifying the host key.

    The user's ~/.ssh/config and any ssh-agent are ignored so only the
    cluster's key material is used.
    """
    return await asyncssh.connect(
        cluster.host,
        port=cluster.port,
        username=cluster.user,
        client_keys=[str(cluster.identity_file)],
        known_hosts=str(known_hosts or cluster.known_hosts),
        agent_path=None,
        config=[],
        connect_timeout=15,
        **kwargs,
    )


ConnectFn = Callable[..., Awaitable[asyncssh.SSHClientConnection]]


@pytest.fixture
def cluster_connect(slurm_cluster: ClusterInfo) -> ConnectFn:
    """``await cluster_connect(known_hosts=..., **asyncssh_options)`` opens a new connection."""

    async def connect(**kwargs: Any) -> asyncssh.SSHClientConnection:
        return await connect_cluster(slurm_cluster, **kwargs)

    return connect


@pytest.fixture
async def cluster_ssh(slurm_cluster: ClusterInfo) -> AsyncIterator[asyncssh.SSHClientConnection]:
    """An SSH connection to the cluster as the test user, closed after the test."""
    conn = await connect_cluster(slurm_cluster)
    try:
        yield conn
    finally:
        conn.close()
        await conn.wait_closed()


# --- launching on the cluster -------------------------------------------------------


def _chown_tree(path: Path, user: str) -> None:
    shutil.chown(path, user, user)
    for p in path.rglob("*"):
        shutil.chown(p, user, user)


@pytest.fixture
def site(slurm_cluster: ClusterInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A config and a data dir for launching on the test cluster: profiles `testcluster` (demo
    launcher, the default), `real` (the real srtctl in the checkout stack.sh installed, as an
    operator would configure it), `testsrtctl` (the srtctl stand-in, for the fork's recipes the
    real srtctl cannot run) and `badkey` (a known_hosts without the cluster's key)."""
    run_root = Path(slurm_cluster.workdir) / f"it-{uuid.uuid4().hex[:8]}"
    checkout = run_root / "srt-slurm"
    lib = checkout / "lib"
    lib.mkdir(parents=True)
    shutil.copytree(ROOT / "console", lib / "console", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "tests" / "fakes" / "srtctl_standin.py", lib / "srtctl_standin.py")
    (checkout / "srtctl").write_text(
        "#!/usr/bin/python3\nimport os, sys\n"
        "sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))\n"
        "from srtctl_standin import main\nsys.exit(main())\n"
    )
    (checkout / "srtctl").chmod(0o755)
    (checkout / "srtslurm.yaml").write_text(
        f"output_dir: {checkout / 'outputs'}\nresults_dir: {checkout / 'results'}\n"
        f"default_partition: {slurm_cluster.partition}\npython: /usr/bin/python3\n"
    )
    _chown_tree(run_root, slurm_cluster.user)
    ssh = {
        "host": slurm_cluster.host,
        "port": slurm_cluster.port,
        "user": slurm_cluster.user,
        "identity_file": str(slurm_cluster.identity_file),
        "known_hosts": str(slurm_cluster.known_hosts),
    }
    config = {
        "clusters": {
            "testcluster": {
                "ssh": ssh, "launcher": "demo", "workdir": str(run_root / "console"),
                "partition": slurm_cluster.partition, "python": "/usr/bin/python3", "demo_speed": 2,
            },
            "testsrtctl": {
                "ssh": ssh, "launcher": "srtctl", "srt_slurm": str(checkout), "srtctl": "./srtctl",
                "workdir": str(run_root / "console-srtctl"), "results": str(checkout / "results"),
                "srtctl_flavour": "fork",
            },
            "real": {
                "ssh": ssh, "launcher": "srtctl", "srt_slurm": "~/srt-slurm", "srtctl": ".venv/bin/srtctl",
                "workdir": str(run_root / "console-real"), "partition": slurm_cluster.partition,
                "time_limit": "00:20:00", "srtctl_flavour": "upstream",
            },
            "badkey": {"ssh": {**ssh, "known_hosts": str(tmp_path / "empty_known_hosts")}},
        },
        "default_cluster": "testcluster",
    }  # fmt: skip
    (tmp_path / "empty_known_hosts").write_text("")
    config_path = tmp_path / "config.yaml"
    config_path.write_text(json.dumps(config))  # JSON is YAML
    monkeypatch.setenv("SRT_CONSOLE_CONFIG", str(config_path))
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    yield tmp_path


@pytest.fixture(scope="session")
def serving(slurm_cluster: ClusterInfo) -> Any:
    """The real serving stack (real srtctl checkout, Dynamo image, a tokenizer-only model)."""
    from tests.integration.serving import stack_for

    return stack_for(slurm_cluster)


def engine_for(site: Path) -> Engine:
    data = site / "data"
    profiles, problems = load_profiles(load_config(site / "config.yaml"), data)
    assert problems == []
    return Engine(Store(data / "console.sqlite3"), profiles, data)
