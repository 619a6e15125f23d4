"""The demo engine run through the local scheduler: srtctl's layout and lines, results, faults."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from console.demo import engine
from console.demo.bundle import engine_name, engine_script, engine_sources, engine_zipapp
from console.demo.engine.util import StopFlag
from console.demo.localsched import LocalScheduler
from console.demo.sbatch import render_batch_script, sweep_log_path, write_arm_config
from console.model import Arm
from console.recipes import load_recipe
from console.results import read_job_metadata, read_points, running_concurrency
from console.scheduler import JobState, JobStatus, Submission
from console.signatures import default_matcher
from tests.conftest import RECIPES

DEMO = RECIPES / "demo"
SPEED = 20.0  # demo seconds per real second
DEADLINE_S = 45.0
# Between SIGTERM and SIGKILL, as Slurm's default KillWait. The engine ends within milliseconds of
# SIGTERM, so this costs nothing.
KILL_WAIT_S = 30.0
PYTHON36 = Path(os.path.expanduser("~/.pyenv/versions/3.6.15/bin/python3"))

SA_BENCH_KEYS = [
    "date",
    "backend",
    "model_id",
    "tokenizer_id",
    "best_of",
    "num_prompts",
    "request_rate",
    "burstiness",
    "max_concurrency",
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "peak_output_tokens_per_s",
    "total_token_throughput",
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
    *(f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el") for stat in ("mean", "median", "std", "p99")),
    "reuse_http_connections",
]


def demo_arm(name: str) -> Arm:
    recipe = load_recipe(DEMO / f"{name}.yaml")
    assert recipe.ok, recipe.problems
    return recipe.arms[0]


class Launched:
    def __init__(self, sched: LocalScheduler, job_id: str, outputs: Path, results_root: Path | None) -> None:
        self.sched = sched
        self.job_id = job_id
        self.job_dir = outputs / job_id
        self.results_root = results_root

    @property
    def logs(self) -> Path:
        return self.job_dir / "logs"

    @property
    def sweep_log(self) -> str:
        return (self.logs / f"sweep_{self.job_id}.log").read_text(encoding="utf-8")

    def worker_logs(self) -> dict[str, str]:
        return {p.name: p.read_text(encoding="utf-8") for p in sorted(self.logs.glob("*_w*.out"))}


async def launch(
    tmp_path: Path,
    arm: Arm,
    *,
    attempt: int = 1,
    speed: float = SPEED,
    results_root: Path | None = None,
    time_limit: str | None = None,
    sched: LocalScheduler | None = None,
) -> Launched:
    """Render the demo batch script for an arm and submit it to a local scheduler."""
    outputs = tmp_path / "outputs"
    plan = write_arm_config(arm, tmp_path / "plans")
    template = str(outputs / "%j")
    script = render_batch_script(
        arm,
        job_dir_template=template,
        engine_path=str(engine_script()),
        config_path=str(plan),
        python=sys.executable,
        results_root=str(results_root) if results_root else None,
        attempt=attempt,
        speed=speed,
        time_limit=time_limit,
    )
    path = tmp_path / f"{arm.name}-a{attempt}.sh"
    path.write_text(script, encoding="utf-8")
    sched = sched or LocalScheduler(tmp_path / "local-jobs", grace_seconds=KILL_WAIT_S)
    job_id = await sched.submit(
        Submission(
            script=str(path),
            job_name=arm.name,
            output=sweep_log_path(template),
            nodes=arm.topology.node_demand,
            time_limit=time_limit,
            workdir=str(tmp_path),
        )
    )
    return Launched(sched, job_id, outputs, results_root)


async def wait_done(job: Launched, timeout: float = DEADLINE_S) -> JobStatus:
    deadline = time.monotonic() + timeout
    while True:
        status = (await job.sched.poll([job.job_id]))[job.job_id]
        if status.state.finished:
            return status
        if time.monotonic() > deadline:
            pytest.fail(f"job {job.job_id} still {status.state} after {timeout} s")
        await asyncio.sleep(0.05)


def findings(text: str) -> list[str]:
    matcher = default_matcher()
    ids = []
    for line in text.splitlines():
        found = matcher.match_line(line)
        if found is not None:
            ids.append(found.signature_id)
    return ids


# --------------------------------------------------------------------------- success paths


async def test_quick_completes_with_srtctl_layout_and_three_points(tmp_path: Path) -> None:
    arm = demo_arm("quick")
    job = await launch(tmp_path, arm)
    status = await wait_done(job)
    assert status.state is JobState.COMPLETED, job.sweep_log
    assert status.exit_code == "0:0"

    log = job.sweep_log
    for line in (
        "🚀 srtctl Sweep Orchestrator",
        f"Job ID: {job.job_id}",
        "[INFO] Sweep Orchestrator",
        f"[INFO] Run name: demo-quick_{job.job_id}",
        "[INFO] Worker nodes: node1",
        "[INFO] Starting backend workers",
        "[INFO] Starting agg worker 0 on node1",
        f"[INFO] Log: {job.logs / 'node1_agg_w0.out'}",
        "[INFO] Starting sglang-router 0 on node1",
        "[INFO] Waiting for server health (expecting 1 health entries: 1 agg)...",  # srtctl's words
        "[INFO] Model is ready. Have 0 prefills and 1 decodes.",
        "[INFO] Server is healthy - starting benchmark",
        "[INFO] Running SA-Bench benchmark",
        "[INFO] Benchmark completed successfully",
        "[INFO] Cleanup",
        "✓ Sweep completed successfully",
    ):
        assert line in log, line
    orchestrator = [ln for ln in log.splitlines() if "[INFO]" in ln or "[ERROR]" in ln]
    assert orchestrator and all(
        re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[(INFO|WARNING|ERROR)\] ", ln) for ln in orchestrator
    )
    assert log.index("Model is ready") < log.index("Running SA-Bench benchmark") < log.index("Benchmark completed")

    points = read_points(job.job_dir)
    assert [(p.concurrency, p.status) for p in points] == [(1, "done"), (4, "done"), (16, "done")]
    assert all(p.gpus == 4 for p in points)
    names = sorted(p.name for p in (job.logs / "sa-bench_isl_1024_osl_256").iterdir())
    assert names == sorted(f"results_concurrency_{c}_gpus_4.json" for c in (1, 4, 16))

    raw = (job.logs / "sa-bench_isl_1024_osl_256" / "results_concurrency_4_gpus_4.json").read_bytes()
    assert b"\n" not in raw
    data = json.loads(raw)
    assert list(data) == SA_BENCH_KEYS
    assert data["max_concurrency"] == 4 and data["num_prompts"] == 40 and data["completed"] == 40
    assert len(data["itls"]) == 40 and len(data["itls"][0]) == 255
    assert data["total_output_tokens"] == 40 * 256
    assert data["output_throughput"] == pytest.approx(data["total_output_tokens"] / data["duration"], rel=1e-3)

    bench = (job.logs / "benchmark.out").read_text(encoding="utf-8")
    assert bench.startswith("All sa-bench deps already available")  # bench.sh's first line
    assert "\nSA-Bench Config: endpoint=http://localhost:8000; isl=1024; osl=256; concurrencies=1x4x16" in bench
    for c in (1, 4, 16):
        assert f"Running benchmark with concurrency: {c}\n" in bench
        assert f"Completed benchmark with concurrency: {c}\n" in bench
    assert "=" * 12 + " Serving Benchmark Result " + "=" * 12 in bench
    assert "-" * 41 + "\n" in bench
    assert running_concurrency(bench) is None

    meta = read_job_metadata(job.job_dir / f"{job.job_id}.json")
    assert meta.status == "done" and meta.job_id == job.job_id and meta.total_gpus == 4
    assert yaml.safe_load((job.job_dir / "config.yaml").read_text(encoding="utf-8")) == arm.config
    worker = (job.logs / "node1_agg_w0.out").read_text(encoding="utf-8")
    assert "Loading safetensors checkpoint shards: 100% Completed | 4/4" in worker
    assert "Capturing batches (bs=" in worker and "The server is fired up and ready to roll!" in worker
    assert (job.logs / "node1_sglang-router_0.out").exists()
    assert findings(log + worker) == []


async def test_1p1d_twin_delivers_six_fixed_seq_points(tmp_path: Path) -> None:
    results_root = tmp_path / "shared-results"
    job = await launch(tmp_path, demo_arm("mi355x-1p1d-tp8"), results_root=results_root)
    status = await wait_done(job)
    assert status.state is JobState.COMPLETED, job.sweep_log

    points = read_points(job.job_dir, results_root=results_root, job_id=job.job_id)
    assert [(p.concurrency, p.status) for p in points] == [(c, "done") for c in (4, 8, 16, 32, 64, 128)]
    fixed = results_root / job.job_id / "fixed-seq"
    names = sorted(p.name for p in fixed.iterdir())
    assert names == sorted(
        f"dsv4-fp4-mi355x-atom-disagg-1p1d-tp8-isl8192-osl1024-c{c}.json" for c in (4, 8, 16, 32, 64, 128)
    )
    data = json.loads((fixed / "dsv4-fp4-mi355x-atom-disagg-1p1d-tp8-isl8192-osl1024-c16.json").read_text())
    assert "request_goodput:" in data and "request_goodput" not in data
    assert {"p90_tpot_ms", "p99_tpot_ms", "p99.9_tpot_ms", "benchmark_start_time_unix"} <= set(data)
    assert "itls" not in data and "peak_output_tokens_per_s" not in data and data["num_prompts"] == 32
    assert (results_root / job.job_id / "runtime-logs.tar.gz").exists()

    log = job.sweep_log
    assert "[INFO] Starting atomesh 0 on node1: atomesh launch --pd-disaggregation" in log
    assert "[INFO] Model is ready. Have 1 prefills and 1 decodes." in log
    assert "[INFO] Running Custom benchmark" in log
    assert sorted(job.worker_logs()) == ["node1_prefill_w0.out", "node2_decode_w0.out"]
    prefill = job.worker_logs()["node1_prefill_w0.out"]
    assert re.search(r"^\[atom \d\d:\d\d:\d\d\] Registered with atomesh router", prefill, re.MULTILINE)
    assert "Loading safetensors checkpoint shards: 100% Completed | 64/64" in prefill
    bench = (job.logs / "benchmark.out").read_text(encoding="utf-8")
    assert bench.count("Maximum request concurrency:") == 6 and "P99.9 TPOT (ms):" in bench


# --------------------------------------------------------------------------- faults


def zmq_checks(logs: dict[str, str]) -> None:
    assert sorted(logs) == ["node1_prefill_w0.out", "node2_prefill_w1.out", "node3_decode_w0.out"]
    for name, text in logs.items():
        assert "zmq-bind-in-use" in findings(text), name
        assert "zmq.error.ZMQError: Address already in use" in text, name
        # Shards loaded and graphs captured first, as on hardware.
        assert text.index("64/64") < text.index("CUDA graph capture done") < text.index("ZMQError")
        bound = re.findall(r"EngineCore_DP\d+ KV event publisher bound to (tcp://127\.0\.0\.1:\d+)", text)
        assert len(bound) == 1, name  # one rank holds the endpoint, every other rank fails
        assert f"(addr='{bound[0]}')" in text or f"hook on {bound[0]}: Address already in use" in text
    # DP attention on prefill: one EngineCore per GPU, all but one failing.
    assert logs["node1_prefill_w0.out"].count("zmq.error.ZMQError: Address already in use") == 7
    assert logs["node3_decode_w0.out"].count("zmq.error.ZMQError: Address already in use") == 1


async def test_2p1d_twin_is_doomed_by_the_zmq_bind_error_in_every_worker(tmp_path: Path) -> None:
    """As job 39443: the workers stay up unregistered, the job holds its nodes until the health check gives up."""
    job = await launch(tmp_path, demo_arm("mi355x-2p1d-dpa-tp8"))
    status = await wait_done(job)
    assert status.state is JobState.FAILED and status.exit_code == "1:0"
    logs = job.worker_logs()
    zmq_checks(logs)
    for name, text in logs.items():
        assert "Some processes failed to start" not in text, name
        assert "not registering with the router" in text, name
    log = job.sweep_log
    assert "Model is not ready, waiting for 2 prefills and 1 decodes. Have 0 prefills and 0 decodes." in log
    assert "[ERROR] Model did not get healthy in 40 seconds" in log
    assert "Critical process" not in log
    assert "✗ Sweep failed (exit code: 1)" in log
    assert read_points(job.job_dir) == []


async def test_zmq_bind_with_exit_shuts_the_workers_down(tmp_path: Path) -> None:
    arm = demo_arm("mi355x-2p1d-dpa-tp8")
    config = {**arm.config, "demo": {**arm.config["demo"], "faults": [{"type": "zmq-bind", "exit": True}]}}
    job = await launch(tmp_path, replace(arm, config=config))
    status = await wait_done(job)
    assert status.state is JobState.FAILED and status.exit_code == "1:0"
    logs = job.worker_logs()
    zmq_checks(logs)
    for name, text in logs.items():
        assert "Some processes failed to start, shutting down all" in text, name
    log = job.sweep_log
    for name in ("prefill_0_node1", "prefill_1_node2", "decode_0_node3"):
        assert f"[ERROR] Critical process '{name}' exited with code 1" in log
    assert "[ERROR] Critical process failure detected!" in log
    assert "FAILURE DETAILS" in log and "--- Process: decode_0_node3 ---" in log
    assert "✗ Sweep failed (exit code: 1)" in log
    assert "Benchmark" not in log.split("Critical process failure detected!")[1].split("Cleanup")[0]
    assert read_points(job.job_dir) == []


async def test_crash_at_concurrency_keeps_earlier_points(tmp_path: Path) -> None:
    job = await launch(tmp_path, demo_arm("crash-at-concurrency"))
    status = await wait_done(job)
    assert status.state is JobState.FAILED

    points = {p.concurrency: p.status for p in read_points(job.job_dir)}
    assert points == {8: "done", 16: "done", 32: "done"}  # 64, 128 and 256 never arrive
    decode = job.worker_logs()["node2_decode_w0.out"]
    assert "gpu-illegal-memory-access" in findings(decode)
    log = job.sweep_log
    assert re.search(r"\[ERROR\] Critical process 'decode_0_node2' exited with code -?\d+", log)
    assert "[ERROR] Benchmark failed with exit code 1" in log
    assert "Benchmark completed successfully" not in log
    bench = (job.logs / "benchmark.out").read_text(encoding="utf-8")
    assert "Running benchmark with concurrency: 64" in bench
    assert "Completed benchmark with concurrency: 64" not in bench
    assert "Running benchmark with concurrency: 128" not in bench


async def test_flake_fails_the_first_attempt_only(tmp_path: Path) -> None:
    arm = demo_arm("flake-first-attempt")
    sched = LocalScheduler(tmp_path / "local-jobs")
    first = await launch(tmp_path, arm, attempt=1, sched=sched)
    assert (await wait_done(first)).state is JobState.FAILED
    prefill = first.worker_logs()["node1_prefill_w0.out"]
    assert "nccl-error" in findings(prefill)
    assert "Critical process 'prefill_0_node1' exited with code 1" in first.sweep_log

    second = await launch(tmp_path, arm, attempt=2, sched=sched)
    assert int(second.job_id) > int(first.job_id)
    assert (await wait_done(second)).state is JobState.COMPLETED, second.sweep_log
    assert [p.status for p in read_points(second.job_dir)] == ["done"] * 3


async def test_oom_at_graph_capture(tmp_path: Path) -> None:
    job = await launch(tmp_path, demo_arm("oom-graph-capture"))
    assert (await wait_done(job)).state is JobState.FAILED
    decode = job.worker_logs()["node2_decode_w0.out"]
    assert (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity" in decode
    )
    found = set(findings(decode))
    assert {"gpu-oom", "cuda-graph-capture-failed"} <= found
    assert "The server is fired up" not in decode
    assert "Critical process 'decode_0_node2' exited with code 1" in job.sweep_log


async def test_health_hang_times_out_with_srtctl_lines(tmp_path: Path) -> None:
    job = await launch(tmp_path, demo_arm("health-hang"))
    assert (await wait_done(job)).state is JobState.FAILED
    log = job.sweep_log
    assert "[INFO] Model is not ready, waiting for 1 prefills and 1 decodes. Have 0 prefills and 0 decodes." in log
    assert "[ERROR] Model did not get healthy in 15 seconds" in log  # max_attempts 3 x interval 5
    assert "health-check-timeout" in findings(log)
    assert "Critical process" not in log
    assert "✗ Sweep failed (exit code: 1)" in log


async def test_cancel_stops_the_engine_with_srtctl_cleanup(tmp_path: Path) -> None:
    job = await launch(tmp_path, demo_arm("mi355x-1p1d-tp8"), speed=4.0)
    deadline = time.monotonic() + DEADLINE_S
    while "Running Custom benchmark" not in (job.sweep_log if (job.logs / f"sweep_{job.job_id}.log").exists() else ""):
        assert time.monotonic() < deadline, "the benchmark never started"
        await asyncio.sleep(0.05)
    await job.sched.cancel([job.job_id])
    status = await wait_done(job)
    assert status.state is JobState.CANCELLED
    log = job.sweep_log
    assert "Received signal SIGTERM, initiating cleanup..." in log
    assert log.index("Received signal SIGTERM") < log.index("[INFO] Cleanup")
    assert f"*** JOB {job.job_id} ON node1 CANCELLED AT" in log
    assert all("Received shutdown request" in text for text in job.worker_logs().values())


# --------------------------------------------------------------------------- the engine on its own


def test_a_stop_signalled_mid_wait_ends_the_wait() -> None:
    # The engine's stop request is set from SIGTERM's handler, which runs on the main thread in
    # the middle of whatever it was doing, a wait on the same flag included. A threading.Event
    # hung there now and then (its set() waits for a lock the interrupted wait holds).
    flag = StopFlag()
    previous = signal.signal(signal.SIGALRM, lambda *_: flag.set())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        assert flag.wait(30.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert flag.is_set()
    assert flag.wait(0)
    assert not StopFlag().wait(0.01)


def test_missing_pyzmq_is_a_clear_failure(tmp_path: Path) -> None:
    arm = demo_arm("mi355x-2p1d-dpa-tp8")
    plan = write_arm_config(arm, tmp_path)
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "zmq.py").write_text("raise ImportError('No module named zmq (blocked for this test)')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker), "SRT_DEMO_SPEED": str(SPEED)}
    env.pop("SLURMD_NODENAME", None)
    proc = subprocess.run(
        [
            sys.executable,
            str(engine_script()),
            "orchestrator",
            "--plan",
            str(plan),
            "--job-dir",
            str(tmp_path / "j"),
            "--job-id",
            "77",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for name in ("node1_prefill_w0.out", "node2_prefill_w1.out", "node3_decode_w0.out"):
        text = (tmp_path / "j" / "logs" / name).read_text(encoding="utf-8")
        assert "the demo's zmq-bind fault needs pyzmq" in text and "cannot import zmq" in text
        assert "ZMQError" not in text and "zmq-bind-in-use" not in findings(text)


@pytest.mark.parametrize("name", sorted(engine_sources()))
def test_engine_parses_as_python_36(name: str) -> None:
    source = engine_sources()[name].decode("utf-8")
    tree = ast.parse(source, feature_version=(3, 6))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not (isinstance(node, ast.ImportFrom) and node.level)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "", None)])
    }
    assert "console" not in imported and "dataclasses" not in imported
    assert imported - {"zmq"} <= set(sys.stdlib_module_names)
    assert "from __future__ import annotations" not in source


@pytest.mark.skipif(not PYTHON36.exists(), reason="no Python 3.6 on this machine")
def test_python_36_runs_the_engine_as_one_file(tmp_path: Path) -> None:
    """The package reaches a cluster as one zipapp that a login node's python3 (3.6) runs."""
    engine = tmp_path / engine_name()
    engine.write_bytes(engine_zipapp())
    assert engine_zipapp() == engine_zipapp.__wrapped__()  # deterministic: its content names it
    usage = subprocess.run([str(PYTHON36), str(engine), "--help"], capture_output=True, text=True, check=False)
    assert usage.returncode == 0, usage.stderr
    assert "orchestrator" in usage.stdout and "node" in usage.stdout
    plan = write_arm_config(demo_arm("quick"), tmp_path)
    proc = subprocess.run(
        [str(PYTHON36), str(engine), "orchestrator", "--plan", str(plan), "--job-dir", str(tmp_path / "j"),
         "--job-id", "36", "--speed", "40"],
        capture_output=True, text=True, timeout=DEADLINE_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Benchmark completed successfully" in proc.stdout
    assert list((tmp_path / "j" / "logs").glob("*_w0.out"))  # the node task ran from the same file


@pytest.mark.parametrize("path", sorted(DEMO.glob("*.yaml")), ids=lambda p: p.stem)
def test_config_yaml_round_trips(path: Path) -> None:
    config = demo_arm(path.stem).config
    assert yaml.safe_load(engine.to_yaml(config)) == config


def test_yaml_writer_quotes_what_yaml_would_misread() -> None:
    data = {
        "a": ["yes", "no", "1.5", "null", "~", "", " lead", "x: y", "#c", "- d", "tab\there", "é"],
        "b": {"k": "two\nlines\n", "k2": "no newline\nat end", "k3": None, "k4": True, "k5": 3, "k6": 2.5},
        "c": [{"type": "zmq-bind", "role": None}, [], {}],
        "1": "key that looks like a number",
    }
    assert yaml.safe_load(engine.to_yaml(data)) == data


def plan_of(name: str) -> engine.Plan:
    from console.demo.sbatch import arm_plan

    return engine.Plan(json.loads(json.dumps(arm_plan(demo_arm(name)))))


def test_placement_follows_the_topology() -> None:
    plan = plan_of("mi355x-2p1d-dpa-tp8")
    segs = engine.place(plan, ["a", "b", "c"])
    assert [(s.mode, s.index, s.node) for s in segs] == [("prefill", 0, "a"), ("prefill", 1, "b"), ("decode", 0, "c")]
    assert plan.role("prefill") is not None and plan.role("prefill").dp_attention  # type: ignore[union-attr]

    # One worker over two nodes: one log per node with the same index; two workers on one node.
    raw = {
        "name": "x",
        "resources": {
            "gpus_per_node": 4,
            "prefill_nodes": 2,
            "prefill_workers": 1,
            "decode_nodes": 1,
            "decode_workers": 2,
        },
    }
    segs = engine.place(engine.Plan(raw), ["n1", "n2", "n3"])
    assert [s.log_name for s in segs] == [
        "n1_prefill_w0.out",
        "n2_prefill_w0.out",
        "n3_decode_w0.out",
        "n3_decode_w1.out",
    ]
    assert [s.node_rank for s in segs] == [0, 1, 0, 0]
    assert segs[1].process_name == "prefill_0_n1"


def test_numbers_are_deterministic_and_consistent() -> None:
    plan = plan_of("quick")
    a = engine.PointNumbers(plan, 16, 160, 0)
    b = engine.PointNumbers(plan, 16, 160, 0)
    assert a.output_tps == b.output_tps and a.per_request(plan.osl) == b.per_request(plan.osl)
    low, high = engine.PointNumbers(plan, 1, 10, 0), engine.PointNumbers(plan, 64, 640, 0)
    assert high.total_tps > low.total_tps  # throughput grows with concurrency
    assert high.tpot > low.tpot  # and each user gets slower
    assert a.total_tps == pytest.approx(a.output_tps * (plan.isl + plan.osl) / plan.osl)


async def test_hostile_paths_and_names_run_and_run_nothing_else(tmp_path: Path) -> None:
    weird = tmp_path / "we ird 'q' \"dq\" ; $(touch CANARY) `touch CANARY2` dir"
    weird.mkdir()
    text = (DEMO / "quick.yaml").read_text(encoding="utf-8").replace("name: demo-quick\n", "")
    recipe = weird / "my recipe; $(touch CANARY3) 'x'.yaml"
    recipe.write_text(text, encoding="utf-8")
    arm = load_recipe(recipe).arms[0]
    assert "$(touch CANARY3)" in arm.name
    job = await launch(weird, arm)
    status = await wait_done(job)
    assert status.state is JobState.COMPLETED, job.sweep_log
    assert [p.status for p in read_points(job.job_dir)] == ["done"] * 3
    script = next(weird.glob("*.sh"))
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    assert "#SBATCH --job-name=\"my recipe; $(touch CANARY3) 'x'\"" in script.read_text(encoding="utf-8")
    for root in (tmp_path, weird, Path.cwd()):
        assert not list(root.rglob("CANARY*")), root


def test_batch_script_refuses_what_sbatch_cannot_take(tmp_path: Path) -> None:
    arm = demo_arm("quick")
    common = {"engine_path": "/e.py", "config_path": "/c.json"}
    with pytest.raises(ValueError, match="%j"):
        render_batch_script(arm, job_dir_template="/outputs", **common)
    with pytest.raises(ValueError, match="line break"):
        render_batch_script(arm, job_dir_template="/o/%j", job_name="a\nb", **common)
    with pytest.raises(ValueError, match="attempt"):
        render_batch_script(arm, job_dir_template="/o/%j", attempt=0, **common)
    text = render_batch_script(
        arm, job_dir_template="/o/%j", partition="debug", account="bench", time_limit="0:30", attempt=2, **common
    )
    assert text.startswith(
        "#!/bin/bash\n#SBATCH --job-name=demo-quick\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=1\n"
    )
    for line in ("#SBATCH --output=/o/%j/logs/sweep_%j.log", "#SBATCH --partition=debug", "#SBATCH --account=bench"):
        assert line in text
    assert "#SBATCH --time=0:30" in text and "--attempt 2" in text
    twin = render_batch_script(demo_arm("mi355x-2p1d-dpa-tp8"), job_dir_template="/o/%j", **common)
    assert "#SBATCH --nodes=3" in twin and "#SBATCH --time=04:00:00" in twin  # the recipe's slurm.time_limit


def test_yaml_writer_quotes_what_yaml_1_1_reads_as_times_and_dates() -> None:
    data = {
        "time_limit": "4:00:00",
        "zero": "00:15:00",
        "at": "2026-12-01T09:54:23Z",
        "day": "2026-12-01",
        "node": "node1",
    }
    text = engine.to_yaml(data)
    assert yaml.safe_load(text) == data and 'time_limit: "4:00:00"' in text and "node: node1" in text


# --------------------------------------------------------------------------- Dynamo's mocker

MOCKER = Path(__file__).resolve().parents[1] / "data" / "real-srtctl" / "1p1d-completed" / "config.yaml"


def mocker_arm(faults: list[dict[str, object]]) -> Arm:
    """The real pipeline's 1P1D mocker recipe, with demo faults."""
    arm = load_recipe(MOCKER).arms[0]
    return replace(arm, config={**arm.config, "demo": {"health_seconds": 60, "point_seconds": 1, "faults": faults}})


async def test_mocker_worker_that_never_registers_fails_the_health_check(tmp_path: Path) -> None:
    job = await launch(tmp_path, mocker_arm([{"type": "health-hang", "role": "decode"}]))
    assert (await wait_done(job)).state is JobState.FAILED
    decode, prefill = job.worker_logs()["node2_decode_w0.out"], job.worker_logs()["node1_prefill_w0.out"]
    assert "All 1 mocker worker(s) created and running" in decode and "Registered endpoint" not in decode
    assert "Registered endpoint 'dynamo.prefill.generate'" in prefill
    assert "[ERROR] Model did not get healthy in 60 seconds" in job.sweep_log
    assert "Prefill worker detected" in (job.logs / "node1_frontend_0.out").read_text(encoding="utf-8")
    assert not list(tmp_path.rglob("control-*"))  # the orchestrator's control files are gone with it


async def test_mocker_crash_at_a_concurrency_keeps_earlier_points(tmp_path: Path) -> None:
    job = await launch(tmp_path, mocker_arm([{"type": "crash-at-concurrency", "role": "decode", "concurrency": 4}]))
    assert (await wait_done(job)).state is JobState.FAILED
    assert {p.concurrency: p.status for p in read_points(job.job_dir)} == {1: "done", 2: "done"}
    log = job.sweep_log
    assert "[ERROR] Critical process 'decode_0_node2' exited with code" in log
    # srtctl's failure details: the worker's tail quoted under [ERROR], as the console reads it.
    assert re.search(r"\[ERROR\] \n--- Process: decode_0_node2 ---\n", log)
    assert re.search(r"\[ERROR\] \nLast 50 lines of log:\n", log)
    assert "gpu-illegal-memory-access" in findings(job.worker_logs()["node2_decode_w0.out"])


@pytest.mark.skipif(not PYTHON36.exists(), reason="no Python 3.6 on this machine")
def test_python_36_runs_a_mocker_job(tmp_path: Path) -> None:
    engine_file = tmp_path / engine_name()
    engine_file.write_bytes(engine_zipapp())
    plan = write_arm_config(load_recipe(MOCKER).arms[0], tmp_path)
    proc = subprocess.run(
        [str(PYTHON36), str(engine_file), "orchestrator", "--plan", str(plan), "--job-dir", str(tmp_path / "j"),
         "--job-id", "36", "--speed", "40"],
        capture_output=True, text=True, timeout=DEADLINE_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    logs = tmp_path / "j" / "logs"
    assert {"benchmark-rollup.csv", "resource_snapshot.json", "fingerprint_decode_w0.json", "infra.out"} <= {
        p.name for p in logs.iterdir()
    }
    assert "Registered endpoint 'dynamo.backend.generate'" in (logs / "node2_decode_w0.out").read_text()
