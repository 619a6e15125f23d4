"""The console against the real srtctl and a real serving pipeline on the test cluster, over SSH.

Every job here is submitted by the console through the real upstream srtctl (installed by
tests/cluster/stack.sh) and runs srtctl's own orchestrator: NATS and etcd, Dynamo's mocker
engine as the inference workers, Dynamo's frontend, sa-bench as the benchmark client, real
result files. Only the container runtime is a stand-in (tests/cluster/container/).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from console.diagnosis import Diagnosis
from console.engine import Engine
from console.monitor import Monitor, MonitorEvent, PointArrived, Triaged
from console.results import read_points
from console.stages import Stage
from console.store import AttemptRow
from tests.integration.conftest import engine_for
from tests.integration.serving import Stack, mocker_recipe

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

JOB_TIMEOUT_S = 240


@dataclass
class Watched:
    """What the console showed of one attempt while it ran, in order, with when it was seen."""

    stages: list[tuple[float, str]] = field(default_factory=list)
    readiness: list[tuple[float, str]] = field(default_factory=list)
    points: dict[int, tuple[float, Any]] = field(default_factory=dict)
    diagnoses: list[tuple[float, Diagnosis, str | None]] = field(default_factory=list)  # (at, diagnosis, state)
    workers_ready: float | None = None

    def stage_sequence(self) -> list[str]:
        out: list[str] = []
        for _, stage in self.stages:
            if not out or out[-1] != stage:
                out.append(stage)
        return out


class Run:
    """Launch through the console and drive its poll loop and log following until a condition."""

    def __init__(self, site: Path) -> None:
        self.engine: Engine = engine_for(site)
        self.monitor = Monitor(self.engine)
        self.watched: dict[int, Watched] = {}
        self.monitor.subscribe(self._on_event)

    def _on_event(self, event: MonitorEvent) -> None:
        now = time.time()
        if isinstance(event, Triaged):
            w = self.watched.setdefault(event.attempt_id, Watched())
            snap = event.snapshot
            w.stages.append((now, snap.stage.value))
            if snap.readiness.label:
                w.readiness.append((now, snap.readiness.label + (" ready" if snap.readiness.ready else "")))
            if w.workers_ready is None and any(x.ready for x in snap.workers.values()):
                w.workers_ready = now
            state = self.engine.store.attempt(event.attempt_id).state
            w.diagnoses.append((now, event.diagnosis, state))
        elif isinstance(event, PointArrived):
            w = self.watched.setdefault(event.attempt_id, Watched())
            # When the point first showed, and what its file says now: a file seen while the
            # benchmark was still writing it arrives again once it is whole.
            first = w.points.get(event.point.concurrency, (now, event.point))[0]
            w.points[event.point.concurrency] = (first, event.point)

    async def launch(self, recipe: Path, cluster: str = "real") -> AttemptRow:
        sweep = await self.engine.launch([str(recipe)], cluster)
        (attempt,) = [a for arm in self.engine.store.arms(sweep) for a in self.engine.store.attempts(arm.id)]
        return attempt

    async def until(self, condition: Callable[[], bool], what: str, timeout: float = JOB_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                states = {a.id: (a.job_id, a.state, a.error) for a in self.engine.store.attempts()}
                pytest.fail(f"not within {timeout:.0f}s: {what}; attempts {states}; clusters "
                            f"{self.engine.cluster_statuses()}")  # fmt: skip
            await self.engine.poll_once()
            await self.monitor.sync()
            await asyncio.sleep(0.2)

    async def finish(self, attempt_id: int) -> AttemptRow:
        await self.until(lambda: not self.engine.store.attempt(attempt_id).live, f"attempt {attempt_id} to end")
        # The last lines and result files after the job left the queue.
        await self.until(lambda: self._settled(attempt_id), f"attempt {attempt_id}'s last logs", timeout=30)
        return self.engine.store.attempt(attempt_id)

    def _settled(self, attempt_id: int) -> bool:
        view = self.monitor.views.get(attempt_id)
        state = self.engine.store.attempt(attempt_id).state
        return view is not None and view.diagnosis is not None and view.triage.snapshot(state).stage.terminal

    def diagnosis(self, attempt_id: int) -> Diagnosis:
        view = self.monitor.views[attempt_id]
        return view.triage.diagnose(self.engine.store.attempt(attempt_id).state,
                                    cancelled=self.engine.store.attempt(attempt_id).cancelled_by_operator)  # fmt: skip

    async def close(self) -> None:
        await asyncio.wait_for(self.monitor.close(), 30)
        await asyncio.wait_for(self.engine.close(), 30)


def write(site: Path, name: str, text: str) -> Path:
    path = site / f"{name}.yaml"
    path.write_text(text)
    return path


def sacct(job_id: str, fields: str) -> list[str]:
    out = subprocess.run(["sacct", "-X", "-n", "-P", "-j", job_id, "-o", fields], capture_output=True, text=True,
                         check=True, timeout=30).stdout  # fmt: skip
    return out.strip().splitlines()[0].split("|")


# --- a whole job, aggregated and disaggregated -------------------------------------------------


@pytest.mark.parametrize("topology", ["agg", "1p1d"])
def test_mocker_job_runs_to_completed_and_the_console_follows_it(site: Path, serving: Stack, topology: str) -> None:
    grid = [1, 2, 4]
    recipe = write(site, f"mocker-{topology}", mocker_recipe(serving, f"mocker-{topology}", topology=topology,
                                                             concurrencies=grid))  # fmt: skip

    async def scenario() -> None:
        run = Run(site)
        attempt = await run.launch(recipe)
        assert attempt.job_id, attempt.error
        # srtctl's own answer names the job dir: srtslurm.yaml's output_dir (the checkout's outputs).
        assert attempt.output_dir == f"{serving.checkout}/outputs/{attempt.job_id}"
        final = await run.finish(attempt.id)
        assert final.state == "COMPLETED", final
        w = run.watched[attempt.id]
        stages = w.stage_sequence()
        # srtctl's real stages, in order, as they were seen (live: never a stage out of order).
        order = [s.value for s in Stage]
        assert stages == sorted(stages, key=order.index), stages
        assert stages[-1] == "Completed"
        assert {"Awaiting Workers", "Benchmarking"} <= set(stages), stages
        expected_ready = "1/1D ready" if topology == "agg" else "1/1P 1/1D ready"
        assert expected_ready in [label for _, label in w.readiness], w.readiness
        # Every point as its file landed, with the file's own numbers.
        assert sorted(w.points) == grid
        logs = Path(final.output_dir or "") / "logs"
        for conc in grid:
            (path,) = logs.glob(f"sa-bench_*/results_concurrency_{conc}_gpus_*.json")
            doc = json.loads(path.read_text())
            point = w.points[conc][1]
            assert point.status == "done", point
            assert point.output_tok_s == pytest.approx(doc["output_throughput"])
            assert point.total_tok_s == pytest.approx(doc["total_token_throughput"])
            assert point.ttft.median == pytest.approx(doc["median_ttft_ms"])
            assert point.completed == doc["completed"]
        diagnosis = run.diagnosis(attempt.id)
        assert diagnosis.verdict == "healthy", diagnosis.to_json()
        # No healthy-run diagnosis was ever called doomed or failed on the way.
        assert not [d.verdict for _, d, _ in w.diagnoses if d.verdict in ("doomed", "failed")]
        # The profile's scheduling values reached the job.
        partition, limit = sacct(final.job_id or "", "Partition,Timelimit")
        assert (partition, limit) == ("debug", "00:20:00")
        await run.close()

    asyncio.run(scenario())


# --- submissions that fail: srtctl's and sbatch's own words -----------------------------------


def test_rejected_config_keeps_srtctls_message(site: Path, serving: Stack) -> None:
    text = mocker_recipe(serving, "mocker-bad").replace("type: mocker", "type: mocker\n  no_such_key: 1")
    recipe = write(site, "mocker-bad", text)

    async def scenario() -> None:
        run = Run(site)
        attempt = await run.launch(recipe)
        assert attempt.state == "SUBMIT_FAILED" and attempt.job_id is None
        assert "no_such_key" in (attempt.error or ""), attempt.error
        await run.close()

    asyncio.run(scenario())


def test_sbatch_refusal_keeps_sbatchs_reason(site: Path, serving: Stack) -> None:
    config = json.loads((site / "config.yaml").read_text())
    config["clusters"]["real"]["partition"] = "nosuch"
    (site / "config.yaml").write_text(json.dumps(config))
    recipe = write(site, "mocker-agg", mocker_recipe(serving, "mocker-agg"))

    async def scenario() -> None:
        run = Run(site)
        attempt = await run.launch(recipe)
        assert attempt.state == "SUBMIT_FAILED", attempt
        assert "invalid partition specified: nosuch" in (attempt.error or ""), attempt.error
        await run.close()

    asyncio.run(scenario())


def test_preflight_failure_then_no_preflight_and_images_that_cannot_be_used(site: Path, serving: Stack) -> None:
    missing = str(serving.model.parent / "no-such-image.sqsh")
    recipe = write(site, "mocker-noimage", mocker_recipe(serving, "mocker-noimage", container=missing))
    # A docker URI passes preflight (pyxis pulls it on the node), and cannot be imported offline.
    uri = write(site, "mocker-uri", mocker_recipe(serving, "mocker-uri", container="nvcr.io#nvidia/ai-dynamo/dynamo:1"))

    async def scenario() -> None:
        run = Run(site)
        refused = await run.launch(recipe)
        assert refused.state == "SUBMIT_FAILED"
        assert "Preflight failed" in (refused.error or "") and "model.container" in (refused.error or ""), refused.error
        await run.close()

        # With preflight off (a cluster whose paths exist only on compute nodes) srtctl submits,
        # and its orchestrator refuses the missing image as the job starts: the recipe's fault.
        config = json.loads((site / "config.yaml").read_text())
        config["clusters"]["real"]["preflight"] = False
        (site / "config.yaml").write_text(json.dumps(config))
        run = Run(site)
        attempt = await run.launch(recipe)
        assert attempt.job_id, attempt.error
        final = await run.finish(attempt.id)
        assert final.state == "FAILED"
        diagnosis = run.diagnosis(attempt.id)
        root = diagnosis.root_cause
        assert root is not None and root.id == "srtctl-config-error", diagnosis.to_json()
        assert missing in root.first.text and diagnosis.deterministic
        assert "one-off" not in diagnosis.advice

        # The container runtime cannot import the URI on the node: srtctl would wait 300 s for
        # NATS; the console says so while the job runs.
        attempt = await run.launch(uri)
        assert attempt.job_id, attempt.error

        def doomed() -> bool:
            w = run.watched.get(attempt.id)
            return w is not None and any(d.root_cause is not None and d.root_cause.id == "pyxis-image-import-failed"
                                         and d.verdict == "doomed" for _, d, _ in w.diagnoses)  # fmt: skip

        await run.until(doomed, "the image import failure as a doomed root cause", timeout=120)
        await run.engine.cancel([run.engine.store.attempt(attempt.id)])
        await run.finish(attempt.id)
        await run.close()

    asyncio.run(scenario())


# --- dry-run, the clusters check ---------------------------------------------------------------


def test_dry_run_shows_srtctls_header_beside_the_plan(site: Path, serving: Stack) -> None:
    recipe = write(site, "mocker-1p1d", mocker_recipe(serving, "mocker-1p1d", topology="1p1d"))
    env = {**os.environ}
    proc = subprocess.run([sys.executable, "-m", "console", "launch", str(recipe), "--cluster", "real", "--dry-run"],
                          env=env, capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "DRY-RUN" in proc.stdout
    assert "--nodes=2" in proc.stdout and "--partition=debug" in proc.stdout and "--time=00:20:00" in proc.stdout
    assert "agrees with the console's plan" in proc.stdout
    engine = engine_for(site)
    assert engine.store.attempts() == []


def test_clusters_calls_the_real_profile_usable(site: Path, serving: Stack) -> None:
    proc = subprocess.run([sys.executable, "-m", "console", "clusters", "--json"], env={**os.environ},
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    reports = {r["name"]: r for r in json.loads(proc.stdout)["clusters"]}
    real = reports["real"]
    assert real["ok"], real
    checks = {c["check"]: c for c in real["checks"]}
    assert {"checkout", "srtctl runs", "srtslurm.yaml", "make setup"} <= set(checks)
    assert real["facts"]["version"] == "0.3.0" and real["facts"]["flavour"] == "upstream"


# --- cancel, a failure diagnosed while it runs, a missing point rerun --------------------------


def test_cancel_is_cancelled_by_you(site: Path, serving: Stack) -> None:
    recipe = write(site, "mocker-long", mocker_recipe(serving, "mocker-long", concurrencies=[8, 16, 32, 64],
                                                      osl=256, speedup=0.5))  # fmt: skip

    async def scenario() -> None:
        run = Run(site)
        attempt = await run.launch(recipe)
        w = lambda: run.watched.get(attempt.id)  # noqa: E731
        await run.until(lambda: (x := w()) is not None and "Benchmarking" in x.stage_sequence(), "benchmarking")
        await run.engine.cancel([run.engine.store.attempt(attempt.id)])
        final = await run.finish(attempt.id)
        assert final.state == "CANCELLED" and final.cancelled_by_operator
        diagnosis = run.diagnosis(attempt.id)
        assert diagnosis.verdict == "cancelled" and "cancelled by you" in diagnosis.advice, diagnosis.to_json()
        await run.close()

    asyncio.run(scenario())


def test_an_engine_flag_the_mocker_rejects_is_the_root_cause(site: Path, serving: Stack) -> None:
    recipe = write(site, "mocker-badflag", mocker_recipe(serving, "mocker-badflag", mode_args={"no-such-flag": "1"}))

    async def scenario() -> None:
        run = Run(site)
        attempt = await run.launch(recipe)

        def found() -> bool:
            x = run.watched.get(attempt.id)
            return x is not None and any(d.root_cause is not None and d.root_cause.id == "engine-bad-argument"
                                         for _, d, _ in x.diagnoses)  # fmt: skip

        await run.until(found, "the rejected flag as the root cause")
        first = next(state for _, d, state in run.watched[attempt.id].diagnoses
                     if d.root_cause is not None and d.root_cause.id == "engine-bad-argument")  # fmt: skip
        assert first == "RUNNING", f"first diagnosed when the job was {first}"  # while srtctl still runs the job
        final = await run.finish(attempt.id)
        assert final.state == "FAILED"
        diagnosis = run.diagnosis(attempt.id)
        assert diagnosis.root_cause is not None and diagnosis.root_cause.id == "engine-bad-argument"
        assert "no-such-flag" in diagnosis.root_cause.first.text
        assert diagnosis.verdict == "failed"
        await run.close()

    asyncio.run(scenario())


def test_a_point_killed_mid_run_is_missing_and_rerun_missing_completes_the_arm(site: Path, serving: Stack) -> None:
    grid = [1, 2, 4]
    recipe = write(site, "mocker-kill", mocker_recipe(serving, "mocker-kill", concurrencies=grid, osl=256,
                                                      speedup=1.0))  # fmt: skip

    async def scenario() -> None:
        run = Run(site)
        attempt = await run.launch(recipe)
        await run.until(lambda: 2 in run.watched.get(attempt.id, Watched()).points, "the c=2 point")
        # The benchmark client of c=4 is killed as it runs (as an OOM killer or a crash would).
        deadline = time.monotonic() + 60
        while True:
            pids = subprocess.run(["pgrep", "-f", r"benchmark_serving\.py.*--max-concurrency 4 .*--save-result"],
                                  capture_output=True, text=True, check=False).stdout.split()  # fmt: skip
            if pids:
                break
            assert time.monotonic() < deadline, "the c=4 run never started"
            await asyncio.sleep(0.1)
        for pid in pids:
            os.kill(int(pid), signal.SIGKILL)
        final = await run.finish(attempt.id)
        assert final.state == "FAILED"
        points = {p.concurrency: p.status for p in read_points(Path(final.output_dir or ""))}
        assert points.get(1) == points.get(2) == "done" and points.get(4) != "done", points
        await run.close()

        argv = [sys.executable, "-m", "console", "rerun", f"a{final.arm_id}", "--missing", "--yes"]
        rerun_cli = subprocess.run(argv, env={**os.environ}, capture_output=True, text=True, timeout=300, check=False)
        assert rerun_cli.returncode == 0, rerun_cli.stdout + rerun_cli.stderr
        run = Run(site)
        (rerun,) = [a for a in run.engine.store.attempts(final.arm_id) if a.number == 2]
        assert rerun.concurrencies == [4]
        done = await run.finish(rerun.id)
        assert done.state == "COMPLETED", done
        argv = [sys.executable, "-m", "console", "results", f"a{final.arm_id}", "--json"]
        merged = subprocess.run(argv, env={**os.environ}, capture_output=True, text=True, timeout=120, check=False)
        rows = {r["concurrency"]: r for r in json.loads(merged.stdout)["points"]}
        assert all(rows[c]["status"] == "done" for c in grid), rows
        await run.close()

    asyncio.run(scenario())


def test_a_missing_container_plugin_is_a_specific_root_cause_while_the_job_runs(site: Path, serving: Stack) -> None:
    # The job sees the cluster as a site without pyxis (the container stand-in then registers no
    # options, tests/cluster/container/spank_container.c).
    extra = 'sbatch_directives:\n  export: "ALL,SRT_CLUSTER_NO_CONTAINERS=1"\n'
    recipe = write(site, "mocker-nopyxis", mocker_recipe(serving, "mocker-nopyxis", extra=extra))

    async def scenario() -> None:
        run = Run(site)
        submitted = time.time()
        attempt = await run.launch(recipe)
        assert attempt.job_id, attempt.error

        def doomed() -> bool:
            x = run.watched.get(attempt.id)
            return x is not None and any(
                d.root_cause is not None and d.root_cause.id == "srtctl-container-plugin-missing"
                and d.verdict == "doomed" and d.deterministic and state == "RUNNING"
                for _, d, state in x.diagnoses
            )  # fmt: skip

        await run.until(doomed, "the missing container plugin as a doomed, deterministic root cause", timeout=90)
        seen = next(at for at, d, _ in run.watched[attempt.id].diagnoses
                    if d.root_cause is not None and d.root_cause.id == "srtctl-container-plugin-missing")  # fmt: skip
        print(f"[figure] submit -> specific root cause (no container plugin): {seen - submitted:.1f} s")
        assert run.engine.store.attempt(attempt.id).state == "RUNNING"  # srtctl would wait 300 s for NATS
        d = next(d for _, d, _ in reversed(run.watched[attempt.id].diagnoses) if d.verdict == "doomed")
        assert "cancel" in d.advice and "pyxis" in (d.hint or "")
        await run.engine.cancel([run.engine.store.attempt(attempt.id)])
        final = await run.finish(attempt.id)
        assert final.state == "CANCELLED"
        await run.close()

    asyncio.run(scenario())


# --- the stand-in srtctl (kept for the fork's atom/atomesh recipes) speaks the real contract ------


def test_the_srtctl_stand_in_speaks_the_real_contract(site: Path, serving: Stack) -> None:
    """On what both handle, the stand-in answers as the real srtctl does: one JSON line per job
    with the same keys, the job dir laid out the same at submit time, an error as one JSON line
    with exit 1, prose only on stderr, a dry-run with the generated #SBATCH header."""
    config = json.loads((site / "config.yaml").read_text())["clusters"]
    ssh = config["real"]["ssh"]
    where = serving.model.parent.parent / f"contract-{os.getpid()}"  # readable by the cluster's user
    where.mkdir(exist_ok=True)
    good = write(where, "contract-good", mocker_recipe(serving, "contract-good", time_limit="00:05:00"))
    bad = write(where, "contract-bad", mocker_recipe(serving, "contract-bad").replace("type: mocker", "type: nosuch"))
    for path in (where, good, bad):
        shutil.chown(path, serving.user, serving.user)
    checkouts = {"real": (str(serving.checkout), ".venv/bin/srtctl"),
                 "stand-in": (config["testsrtctl"]["srt_slurm"], "./srtctl")}  # fmt: skip

    def srtctl(which: str, *args: str) -> subprocess.CompletedProcess[str]:
        checkout, command = checkouts[which]
        remote = f"cd {shlex.quote(checkout)} && {command} " + " ".join(shlex.quote(a) for a in args)
        argv = ["ssh", "-F", "/dev/null", "-p", str(ssh["port"]), "-i", ssh["identity_file"],
                "-o", f"UserKnownHostsFile={ssh['known_hosts']}", "-o", "BatchMode=yes",
                f"{ssh['user']}@{ssh['host']}", remote]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)

    answers: dict[str, dict[str, Any]] = {}
    for which in checkouts:
        ok = srtctl(which, "apply", "--json", "-f", str(good))
        assert ok.returncode == 0, (which, ok.stderr[-2000:])
        (line,) = ok.stdout.strip().splitlines()  # prose goes to stderr
        doc = json.loads(line)
        job_dir = Path(doc["output_dir"])
        layout = {p for p in ("config.yaml", "{id}.json", "logs/sweep_{id}.log")
                  if (job_dir / p.format(id=doc["slurm_job_id"])).exists()}  # fmt: skip
        subprocess.run(["scancel", doc["slurm_job_id"]], check=False, timeout=30)
        refused = srtctl(which, "apply", "--json", "-f", str(bad))
        (err_line,) = refused.stdout.strip().splitlines()
        err = json.loads(err_line)
        dry = srtctl(which, "dry-run", "-f", str(good))
        answers[which] = {
            "keys": set(doc), "status": doc["status"], "job_name": doc["job_name"],
            "dir_is_id": job_dir.name == doc["slurm_job_id"], "layout": layout,
            "refused": (refused.returncode, set(err), err["status"], "nosuch" in err["error"]),
            "dry_run": (dry.returncode, "Generated sbatch Script" in dry.stdout, "--time=00:05:00" in dry.stdout),
        }  # fmt: skip
    assert answers["stand-in"] == answers["real"], answers


def test_cancel_adopts_a_job_the_console_did_not_launch(site: Path, serving: Stack) -> None:
    """`cancel job:<id>` on a job submitted by hand with srtctl: adopted, followed, cancelled by you;
    and the console's dry-runs leave no uploads behind."""
    config = json.loads((site / "config.yaml").read_text())["clusters"]["real"]
    where = serving.model.parent.parent / f"adopt-{os.getpid()}"
    where.mkdir(exist_ok=True)
    recipe = write(where, "by-hand", mocker_recipe(serving, "by-hand", concurrencies=[8, 16, 32], osl=256,
                                                   speedup=0.5))  # fmt: skip
    for path in (where, recipe):
        shutil.chown(path, serving.user, serving.user)
    ssh = config["ssh"]
    remote = f"cd {shlex.quote(str(serving.checkout))} && .venv/bin/srtctl apply --json -f {shlex.quote(str(recipe))}"
    argv = ["ssh", "-F", "/dev/null", "-p", str(ssh["port"]), "-i", ssh["identity_file"],
            "-o", f"UserKnownHostsFile={ssh['known_hosts']}", "-o", "BatchMode=yes", f"{ssh['user']}@{ssh['host']}",
            remote]  # fmt: skip
    by_hand = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=True)
    job_id = json.loads(by_hand.stdout.strip().splitlines()[-1])["slurm_job_id"]
    cancel = subprocess.run([sys.executable, "-m", "console", "cancel", f"job:{job_id}", "--cluster", "real",
                             "--yes", "--json"], env={**os.environ}, capture_output=True, text=True, timeout=180,
                            check=False)  # fmt: skip
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    (doc,) = json.loads(cancel.stdout)["cancelled"]
    assert doc["job_id"] == job_id and doc["cancelled_by_you"]
    assert doc["output_dir"] == f"{serving.checkout}/outputs/{job_id}" and doc["arm"] == "by-hand"

    async def scenario() -> None:
        run = Run(site)
        (attempt,) = [a for a in run.engine.store.attempts() if a.job_id == job_id]
        assert attempt.concurrencies == [8, 16, 32]  # from the job dir's config.yaml
        # Looked at, as the attempt screen does: the job may have ended longer ago than the monitor
        # follows an ended attempt unasked (a loaded machine took that long to get here).
        run.monitor.pin(attempt.id)
        final = await run.finish(attempt.id)
        assert final.state == "CANCELLED"
        assert run.diagnosis(attempt.id).verdict == "cancelled"
        await run.close()

    asyncio.run(scenario())
    # Dry-runs upload the recipe to the workdir and remove it afterwards.
    previews = Path(config["workdir"]) / "previews"
    dry = subprocess.run([sys.executable, "-m", "console", "launch", str(recipe), "--cluster", "real", "--dry-run"],
                         env={**os.environ}, capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert not previews.exists() or not any(previews.iterdir()), list(previews.iterdir())
