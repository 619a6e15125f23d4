"""The demo engine as a real multi-node Slurm job on the local test cluster.

Both seed twins are submitted with real ``sbatch`` (as the cluster's test user, jobs run under
the system ``/usr/bin/python3``): the 1P1D job delivers its six fixed-seq points, the 2P1D DPA
job dies at startup with pyzmq's bind error in every worker, its workers spread over three
Slurm nodes by ``srun``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from console.demo.bundle import engine_script
from console.demo.sbatch import render_batch_script, sweep_log_path, write_arm_config
from console.model import Arm
from console.recipes import load_recipe
from console.results import read_points
from console.signatures import default_matcher
from tests.conftest import RECIPES

if TYPE_CHECKING:
    from .conftest import ClusterInfo

pytestmark = pytest.mark.cluster

SYSTEM_PYTHON = "/usr/bin/python3"
JOB_DEADLINE_S = 240.0  # the cluster is shared with other tests: allow for queueing
SPEED = 4.0
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}


def as_user(user: str, argv: list[str]) -> list[str]:
    """Run a command as the cluster's test user (jobs then run as that user too)."""
    if os.geteuid() == 0 and shutil.which("runuser"):
        return ["runuser", "-u", user, "--", *argv]
    return argv


def sh(argv: list[str], timeout: float = 30) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{shlex.join(argv)} exited {proc.returncode}: {proc.stdout}{proc.stderr}"
    return proc.stdout


def job_fields(job_id: str) -> dict[str, str]:
    out = sh(["scontrol", "-o", "show", "job", job_id])
    return dict(m.groups() for m in re.finditer(r"(\w+)=(\S*)", out))


def wait_finished(job_id: str) -> dict[str, str]:
    deadline = time.monotonic() + JOB_DEADLINE_S
    while True:
        fields = job_fields(job_id)
        if fields.get("JobState") in FINISHED:
            return fields
        assert time.monotonic() < deadline, f"job {job_id} still {fields.get('JobState')} ({fields.get('Reason')})"
        time.sleep(0.2)


class DemoJob:
    def __init__(self, job_id: str, base: Path) -> None:
        self.job_id = job_id
        self.job_dir = base / "outputs" / job_id
        self.logs = self.job_dir / "logs"


def submit(arm: Arm, base: Path, user: str, partition: str, submitted: list[str]) -> DemoJob:
    """What the demo launcher does: upload engine and plan, render, sbatch held, make the
    output dir (Slurm does not create it), release."""
    engine = base / "engine.pyz"
    if not engine.exists():
        shutil.copy(engine_script(), engine)
    plan = write_arm_config(arm, base / "plans")
    template = str(base / "outputs" / "%j")
    script = base / f"{arm.name}.sh"
    script.write_text(
        render_batch_script(
            arm,
            job_dir_template=template,
            engine_path=str(engine),
            config_path=str(plan),
            python=SYSTEM_PYTHON,
            results_root=str(base / "results"),
            partition=partition,
            time_limit="10",
            speed=SPEED,
        ),
        encoding="utf-8",
    )
    sh(["chown", "-R", f"{user}:", str(base)]) if os.geteuid() == 0 else None
    job_id = sh(as_user(user, ["sbatch", "--parsable", "--hold", "--chdir", str(base), str(script)])).strip()
    job_id = job_id.split(";")[0]
    assert job_id.isdigit(), job_id
    submitted.append(job_id)
    logs = base / "outputs" / job_id / "logs"
    sh(as_user(user, ["mkdir", "-p", str(logs)]))
    assert sweep_log_path(template).replace("%j", job_id) == str(logs / f"sweep_{job_id}.log")
    sh(as_user(user, ["scontrol", "release", job_id]))
    return DemoJob(job_id, base)


@pytest.fixture
def demo_base(slurm_cluster: ClusterInfo) -> Path:
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import zmq"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.fail(f"{SYSTEM_PYTHON} cannot import zmq (apt-get install python3-zmq): {probe.stderr.strip()}")
    base = Path(slurm_cluster.workdir) / "srt-demo-it" / uuid.uuid4().hex[:10]
    base.mkdir(parents=True)
    for folder in (base.parent, base):
        folder.chmod(0o755)
    return base


def test_seed_twins_on_slurm(slurm_cluster: ClusterInfo, demo_base: Path) -> None:
    user, partition = slurm_cluster.user, slurm_cluster.partition
    one = load_recipe(RECIPES / "demo" / "mi355x-1p1d-tp8.yaml").arms[0]
    two = load_recipe(RECIPES / "demo" / "mi355x-2p1d-dpa-tp8.yaml").arms[0]
    submitted: list[str] = []
    try:
        ok = submit(one, demo_base, user, partition, submitted)
        bad = submit(two, demo_base, user, partition, submitted)
        bad_fields = wait_finished(bad.job_id)
        ok_fields = wait_finished(ok.job_id)
    finally:
        # Never leave a held or running job behind on the shared cluster.
        for job_id in submitted:
            if job_fields(job_id).get("JobState") not in FINISHED:
                subprocess.run(["scancel", job_id], capture_output=True, check=False)
    sweep_bad = (bad.logs / f"sweep_{bad.job_id}.log").read_text(encoding="utf-8")
    sweep_ok = (ok.logs / f"sweep_{ok.job_id}.log").read_text(encoding="utf-8")

    # 1P1D: delivers all six points.
    assert (ok_fields["JobState"], ok_fields["ExitCode"]) == ("COMPLETED", "0:0"), sweep_ok
    fixed = demo_base / "results" / ok.job_id / "fixed-seq"
    assert len(list(fixed.glob("*-c*.json"))) == 6
    points = read_points(ok.job_dir, results_root=demo_base / "results", job_id=ok.job_id)
    assert [(p.concurrency, p.status) for p in points] == [(c, "done") for c in (4, 8, 16, 32, 64, 128)]
    assert "✓ Sweep completed successfully" in sweep_ok

    # 2P1D DPA: fails at startup, the ZMQ bind error in every worker, on three real nodes.
    assert bad_fields["JobState"] == "FAILED", sweep_bad
    assert bad_fields["ExitCode"] == "1:0"
    workers = sorted(bad.logs.glob("*_w*.out"))
    roles = {re.sub(r"^.+?_(prefill|decode)_(w\d+)\.out$", r"\1_\2", p.name) for p in workers}
    assert roles == {"prefill_w0", "prefill_w1", "decode_w0"}, [p.name for p in workers]
    nodes = {p.name.split("_", 1)[0] for p in workers}
    assert len(nodes) == 3, nodes
    allocated = sh(["scontrol", "show", "hostnames", bad_fields["NodeList"]]).split()
    assert nodes == set(allocated)
    matcher = default_matcher()
    for path in workers:
        text = path.read_text(encoding="utf-8")
        assert "zmq.error.ZMQError: Address already in use" in text, path.name
        ids = {f.signature_id for f in map(matcher.match_line, text.splitlines()) if f is not None}
        assert "zmq-bind-in-use" in ids, path.name
    # As on hardware: the workers stay up unregistered until the health check gives up.
    assert "[ERROR] Model did not get healthy in" in sweep_bad
    assert "✗ Sweep failed (exit code: 1)" in sweep_bad
    assert read_points(bad.job_dir, results_root=demo_base / "results", job_id=bad.job_id) == []
