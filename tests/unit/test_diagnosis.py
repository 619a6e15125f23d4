"""Diagnosis: root cause, consequences, deterministic, verdict and advice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.diagnosis import Diagnosis, Observation, diagnose, group_findings
from console.signatures import default_matcher
from console.triage import Triage, clean_text, line_time

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
SEED_LOGS = LOGS / "seed-39443" / "logs"
OK_LOGS = LOGS / "sweep-41001-ok" / "logs"

FINDING_KEYS = {"id", "category", "severity", "file", "line_no", "text", "captures"}


def triage_dir(logs: Path) -> Triage:
    triage = Triage()
    for path in sorted(logs.iterdir()):
        triage.feed(str(path), path.read_text(encoding="utf-8").splitlines())
    return triage


def triage_files(files: dict[str, list[str]]) -> Triage:
    triage = Triage()
    for name, lines in files.items():
        triage.feed(name, lines)
    return triage


def observe(line: str, file: str = "logs/n1_prefill_w0.out", line_no: int = 1, **kw: object) -> Observation:
    finding = default_matcher().match_line(line)
    assert finding is not None, line
    return Observation(finding=finding, file=file, line_no=line_no, text=line, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the seed


@pytest.fixture(scope="module")
def seed() -> Triage:
    return triage_dir(SEED_LOGS)


def test_seed_root_cause_is_the_zmq_bind_error(seed: Triage) -> None:
    d = seed.diagnose("RUNNING")
    assert d.root_cause is not None
    assert d.root_cause.id == "zmq-bind-in-use"
    first = d.root_cause.first
    assert first.category == "startup" and first.severity == "fatal"
    assert first.finding.captures["port"] == "5557"
    assert first.worker in {"prefill_w0", "prefill_w1", "decode_w0"}
    # 7 failing DP ranks per worker, two lines each (the engine's message and the traceback's last line)
    assert d.root_count == 42
    assert d.root_workers == ("decode_w0", "prefill_w0", "prefill_w1")


def test_seed_consequences_are_the_wrappers(seed: Triage) -> None:
    d = seed.diagnose("RUNNING")
    ids = {g.id for g in d.consequences}
    assert {"engine-init-failed", "srtctl-critical-process-exit"} <= ids
    assert "zmq-bind-in-use" not in ids
    assert all(g.first.wrapper for g in d.consequences)
    engine = [g for g in d.consequences if g.id == "engine-init-failed"]
    assert {g.first.worker for g in engine} == {"prefill_w0", "prefill_w1", "decode_w0"}
    assert all(g.count == 3 for g in engine)  # three engine-manager lines per worker, one group each


def test_seed_is_deterministic_across_every_worker(seed: Triage) -> None:
    d = seed.diagnose("RUNNING")
    assert d.deterministic
    assert d.deterministic_roles == ("decode", "prefill")


def test_seed_is_doomed_while_slurm_runs_it(seed: Triage) -> None:
    d = seed.diagnose("RUNNING")
    assert d.verdict == "doomed"
    assert d.job_id == "39443" and d.nodes == 3
    assert "cancel job 39443 to free its 3 node(s): it cannot recover" in d.advice
    assert "a plain rerun will fail the same way" in d.advice
    assert "fix zmq-bind-in-use" in d.advice and "pin a fixed build" in d.advice
    assert d.hint is not None and d.hint in d.advice


@pytest.mark.parametrize("state", ["FAILED", "CANCELLED", None])
def test_seed_is_failed_once_the_job_ended(seed: Triage, state: str | None) -> None:
    d = seed.diagnose(state)
    assert d.verdict == "failed"
    assert "cancel" not in d.advice
    assert d.advice.startswith("a plain rerun will fail the same way")
    assert d.root_cause is not None and d.root_cause.id == "zmq-bind-in-use"


def test_seed_diagnosis_json(seed: Triage) -> None:
    doc = seed.diagnose("RUNNING").to_json()
    json.dumps(doc)  # serialisable
    assert {"root_cause", "consequences", "verdict", "advice", "deterministic"} <= set(doc)
    assert doc["verdict"] == "doomed" and doc["deterministic"] is True
    root = doc["root_cause"]
    assert set(root) >= FINDING_KEYS
    assert root["id"] == "zmq-bind-in-use"
    assert root["line_no"] >= 1 and root["count"] >= 1
    assert root["worker"] and root["node"] and root["rank"].startswith("DP")
    for item in doc["consequences"]:
        assert set(item) >= FINDING_KEYS
        assert item["count"] >= 1


def test_seed_workers_are_marked_failed(seed: Triage) -> None:
    snap = seed.snapshot("RUNNING")
    assert {w.stage.value for w in snap.workers.values()} == {"failed"}
    # The workers table names the failure as the diagnosis does, where it was first written.
    assert snap.workers["mi355x-a02_prefill_w1"].failure == "zmq-bind-in-use"
    assert snap.workers["mi355x-a02_prefill_w1"].failure_at == "mi355x-a02_prefill_w1.out:29"
    d = seed.diagnose("RUNNING")
    assert d.root_cause is not None
    first = d.root_cause.first
    root_worker = next(w for w in snap.workers.values() if w.file == first.file)
    assert (root_worker.failure, root_worker.failure_at) == (first.id, f"{Path(first.file).name}:{first.line_no}")


def test_seed_order_of_files_does_not_matter() -> None:
    forward = triage_dir(SEED_LOGS).diagnose("RUNNING")
    backward = Triage()
    for path in sorted(SEED_LOGS.iterdir(), reverse=True):
        backward.feed(str(path), path.read_text(encoding="utf-8").splitlines())
    other = backward.diagnose("RUNNING")
    assert forward.root_cause is not None and other.root_cause is not None
    assert (other.root_cause.id, other.verdict, other.deterministic) == ("zmq-bind-in-use", "doomed", True)


# --------------------------------------------------------------------------- other scenarios


def oom_at_graph_capture() -> dict[str, list[str]]:
    prefill = [
        "[2026-08-21 10:01:09 TP0] Load weight begin. avail mem=180.52 GB",
        "Loading safetensors checkpoint shards: 100% Completed | 32/32 [00:41<00:00,  1.28s/it]",
        "[2026-08-21 10:02:11 TP0] Load weight end. type=DeepseekV3ForCausalLM, avail mem=96.12 GB",
        "[2026-08-21 10:02:13 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=20.14 GB",
        "Capturing batches (bs=512 avail_mem=19.90 GB):  25%|██        | 1/4 [00:01<00:03,  2.91it/s]",
        "Traceback (most recent call last):",
        '  File "/sgl-workspace/python/model_executor/cuda_graph_runner.py", line 318, in capture',
        "    graph, output_buffers = self.capture_one_batch_size(bs, forward)",
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
        "287.98 GiB of which 1.07 GiB is free.",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Exception: Capture cuda graph failed: HIP out of memory. Tried to allocate 2.00 GiB. (bs=256)",
        "[2026-08-21 10:02:20 TP3] Scheduler hit an exception: Capture cuda graph failed (bs=256)",
    ]
    decode = [
        "[2026-08-21 10:01:09 TP0] Load weight begin. avail mem=180.52 GB",
        "Loading safetensors checkpoint shards: 100% Completed | 32/32 [00:41<00:00,  1.28s/it]",
        "[2026-08-21 10:02:30 TP0] Capture cuda graph end. Time elapsed: 17.20 s. mem usage=1.21 GB.",
        "[2026-08-21 10:02:31] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    ]
    sweep = [
        "2026-08-21 10:00:05 [INFO] Sweep Orchestrator",
        "2026-08-21 10:00:05 [INFO] Job ID: 41100",
        "2026-08-21 10:00:09 [INFO] Starting backend workers",
        "2026-08-21 10:00:11 [INFO] Polling http://n0:8000/health every 10.0s for 1 prefills and 1 decodes",
        "2026-08-21 10:02:22 [ERROR] Critical process 'prefill_0_n1' exited with code 1",
        "2026-08-21 10:02:22 [ERROR] Critical process failure detected!",
        "srun: error: n1: task 0: Exited with exit code 1",
    ]
    return {"logs/sweep_41100.log": sweep, "logs/n1_prefill_w0.out": prefill, "logs/n2_decode_w0.out": decode}


def test_oom_at_graph_capture() -> None:
    triage = triage_files(oom_at_graph_capture())
    d = triage.diagnose("RUNNING")
    assert d.root_cause is not None
    # The OOM line comes first, but it is reported as graph-capture failure (startup, narrower).
    assert d.root_cause.id == "cuda-graph-capture-failed"
    assert d.root_cause.first.finding.captures.get("bytes") == "2.00 GiB"
    # The OOM that broke the capture is the same failure, never a consequence of itself.
    assert [g.id for g in d.same_failure] == ["gpu-oom"]
    ids = [g.id for g in d.consequences]
    assert "gpu-oom" not in ids and "srtctl-critical-process-exit" in ids and "srun-task-failed" in ids
    assert d.verdict == "doomed"  # a fatal startup finding, Slurm still running
    assert not d.deterministic  # one worker of two; the decode worker started fine
    assert "rerun" in d.advice and "plain rerun will fail" not in d.advice
    assert "cancel job 41100" in d.advice
    snap = triage.snapshot()
    assert snap.workers["n1_prefill_w0"].stage.value == "failed"
    # The workers table agrees with the banner: the same failure, at the same line.
    first = d.root_cause.first
    assert snap.workers["n1_prefill_w0"].failure == "cuda-graph-capture-failed"
    assert snap.workers["n1_prefill_w0"].failure_at == f"n1_prefill_w0.out:{first.line_no}"
    assert snap.workers["n2_decode_w0"].stage.value == "server up"


def test_flake_like_single_worker_nccl_error_is_not_deterministic() -> None:
    ok = [
        "[2026-08-21 10:01:09 TP0] Init torch distributed begin.",
        "[2026-08-21 10:01:19 TP0] Init torch distributed ends. mem usage=0.42 GB",
    ]
    bad = [
        "[2026-08-21 10:01:09 TP0] Init torch distributed begin.",
        "n2:4242:4243 [1] NCCL WARN Net : Connect to 10.0.0.11<43215> failed : Connection refused",
        "Traceback (most recent call last):",
        '  File "/sgl-workspace/python/model_executor/model_runner.py", line 412, in init_torch_distributed',
        "RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "[2026-08-21 10:01:20 TP1] Scheduler hit an exception: RuntimeError: NCCL Error 2: unhandled system error",
    ]
    triage = triage_files({"logs/n1_prefill_w0.out": ok, "logs/n2_prefill_w1.out": bad, "logs/n3_decode_w0.out": ok})
    d = triage.diagnose("FAILED")
    assert d.root_cause is not None and d.root_cause.id == "nccl-error"
    assert d.root_cause.first.worker == "prefill_w1"
    assert not d.deterministic
    assert d.deterministic_roles == ()
    assert d.verdict == "failed"
    assert "one-off" in d.advice and "rerun" in d.advice
    assert "plain rerun will fail" not in d.advice
    # the socket failure came first, two lines above the fatal NCCL error it broke: the
    # same failure, named more narrowly by the NCCL error
    assert [g.id for g in d.same_failure] == ["nccl-socket-failure"]
    assert "nccl-socket-failure" not in {g.id for g in d.consequences}


def test_healthy_log_is_healthy() -> None:
    triage = triage_dir(OK_LOGS)
    d = triage.diagnose("COMPLETED")
    assert d.verdict == "healthy"
    assert d.root_cause is None and d.consequences == ()
    assert d.advice == "no failure found: nothing to do"
    assert d.to_json()["root_cause"] is None
    assert triage.snapshot("COMPLETED").stage.value == "Completed"


# --------------------------------------------------------------------------- the rules


def test_earliest_timestamp_wins_across_files() -> None:
    late = observe(
        "[2026-08-21 10:05:00] RuntimeError: CUDA error: an illegal memory access was encountered",
        file="logs/n1_decode_w0.out",
        time=1000.0,
        time_has_date=True,
        order=1,
        worker="decode_w0",
        mode="decode",
    )
    early = observe(
        "[2026-08-21 10:04:00] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
        file="logs/n2_prefill_w0.out",
        time=900.0,
        time_has_date=True,
        order=2,
        worker="prefill_w0",
        mode="prefill",
    )
    d = diagnose([late, early], state="FAILED")
    assert d.root_cause is not None and d.root_cause.id == "gpu-oom"
    assert [g.id for g in d.consequences] == ["gpu-illegal-memory-access"]


def test_startup_before_runtime_and_priority_on_ties() -> None:
    runtime = observe("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB", time=10.0)
    startup = observe("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557')", time=20.0)
    assert diagnose([runtime, startup]).root_cause.first is startup  # type: ignore[union-attr]
    low = observe("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB", time=5.0, order=1)
    high = observe("RuntimeError: CUDA error: an illegal memory access was encountered", time=5.0, order=2)
    assert diagnose([low, high]).root_cause.first is high  # type: ignore[union-attr]


def test_undated_traceback_line_takes_the_time_above_it() -> None:
    triage = triage_files(
        {
            "logs/a_prefill_w0.out": [
                "[2026-08-21 10:09:00] starting",
                "RuntimeError: CUDA error: an illegal memory access was encountered",
            ],
            "logs/b_decode_w0.out": [
                "[2026-08-21 10:01:00] starting",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
            ],
        }
    )
    d = triage.diagnose()
    assert d.root_cause is not None and d.root_cause.id == "gpu-oom"
    assert d.root_cause.first.time_has_date


def test_finding_before_any_timestamp_is_placed_just_before_the_first_one() -> None:
    triage = triage_files(
        {
            "logs/a_prefill_w0.out": [
                "RuntimeError: CUDA error: an illegal memory access was encountered",
                "Traceback (most recent call last):",
                "[2026-08-21 10:02:00] shutting down",
            ],
            "logs/b_decode_w0.out": [
                "[2026-08-21 10:03:00] starting",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB",
            ],
        }
    )
    [illegal] = [g for g in triage.groups if g.id == "gpu-illegal-memory-access"]
    assert illegal.first.time is not None and illegal.first.time_has_date
    d = triage.diagnose()
    assert d.root_cause is not None and d.root_cause.id == "gpu-illegal-memory-access"


def test_only_wrappers_give_a_wrapper_root_and_say_so() -> None:
    d = diagnose(
        [
            observe("2026-08-21 10:30:00 [ERROR] Model did not get healthy in 1800 seconds", file="logs/sweep_1.log"),
            observe("2026-08-21 10:30:00 [ERROR] Server did not become healthy", file="logs/sweep_1.log", line_no=2),
        ],
        state="FAILED",
    )
    assert d.root_cause is not None and d.root_cause.id == "health-check-timeout"
    assert d.root_cause.count == 2
    assert "read the worker logs" in d.advice


def test_errors_only_is_degraded_and_warnings_only_is_healthy() -> None:
    error = observe(
        "[1716594409.541480] [gpu1:1581047:0] sock.c:323 UCX ERROR connect(fd=87, "
        "dest_addr=172.17.0.1:47133) failed: Connection refused"
    )
    assert error.severity == "error"
    d = diagnose([error], state="RUNNING")
    assert d.verdict == "degraded"
    assert d.root_cause is not None and "nothing fatal" in d.advice
    warning = observe("Required power telemetry failed startup - skipping the formal benchmark")
    assert warning.severity == "warning"
    assert diagnose([warning], state="RUNNING").verdict == "healthy"
    assert diagnose([], state="RUNNING").verdict == "healthy"


def test_runtime_fatal_while_running_is_failed_not_doomed() -> None:
    crash = observe("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert crash.category == "runtime"
    assert diagnose([crash], state="RUNNING").verdict == "failed"


@pytest.mark.parametrize(
    ("last_sweep_line", "verdict"),
    [
        ("Model is not ready, waiting for 1 prefills and 1 decodes. Have 0 prefills and 1 decodes.", "doomed"),
        ("Server is healthy - starting benchmark", "failed"),
    ],
)
def test_any_fatal_finding_before_the_servers_are_healthy_dooms_a_running_job(
    last_sweep_line: str, verdict: str
) -> None:
    sweep = [
        "2026-08-21 10:00:05 [INFO] Sweep Orchestrator",
        "2026-08-21 10:00:09 [INFO] Starting backend workers",
        f"2026-08-21 10:01:11 [INFO] {last_sweep_line}",
    ]
    worker = [
        "[2026-08-21 10:01:09 TP0] Load weight begin. avail mem=78.52 GB",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.00 GiB. GPU 0 has a total capacity of 79 GiB",
    ]
    triage = triage_files({"logs/sweep_5.log": sweep, "logs/n1_prefill_w0.out": worker})
    d = triage.diagnose("RUNNING")
    assert d.root_cause is not None and d.root_cause.id == "gpu-oom" and d.root_cause.first.category == "runtime"
    assert d.verdict == verdict
    assert triage.diagnose("FAILED").verdict == "failed"


def test_doomed_needs_a_live_job_that_has_not_ended() -> None:
    zmq = observe("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557')")
    assert diagnose([zmq], state="PENDING").verdict == "doomed"
    assert diagnose([zmq], state="RUNNING", ending=True).verdict == "failed"
    assert diagnose([zmq], state="TIMEOUT").verdict == "failed"
    d = diagnose([zmq], state="RUNNING")
    assert d.advice.startswith("cancel the job to free its node(s): it cannot recover")


def test_dedup_by_signature_node_worker_rank() -> None:
    lines = [
        observe("[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered", line_no=i, rank="1")
        for i in (1, 2, 3)
    ] + [observe("[rank2]: RuntimeError: CUDA error: an illegal memory access was encountered", line_no=4, rank="2")]
    groups = group_findings(lines)
    assert [(g.first.rank, g.count, g.first.line_no, g.last_line_no) for g in groups] == [
        ("1", 3, 1, 3),
        ("2", 1, 4, 4),
    ]
    d = diagnose(lines)
    assert d.root_count == 4 and d.counts == {"gpu-illegal-memory-access": 4}


def test_deterministic_needs_every_worker_of_a_role() -> None:
    def zmq(worker: str) -> Observation:
        return observe(
            "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557')",
            worker=worker,
            mode=worker.split("_")[0],
        )

    roles = {"prefill": ["prefill_w0", "prefill_w1"], "decode": ["decode_w0"]}
    both = diagnose([zmq("prefill_w0"), zmq("prefill_w1")], workers=roles)
    assert both.deterministic and both.deterministic_roles == ("prefill",)
    one = diagnose([zmq("prefill_w0")], workers=roles)
    assert not one.deterministic
    # one worker of one role is not evidence enough ...
    lone = diagnose([zmq("decode_w0")], workers=roles)
    assert not lone.deterministic and lone.deterministic_roles == ("decode",)
    # ... but every worker of a 1P1D job is
    pair = diagnose([zmq("prefill_w0"), zmq("decode_w0")], workers={"prefill": ["prefill_w0"], "decode": ["decode_w0"]})
    assert pair.deterministic


def test_diagnosis_is_frozen() -> None:
    d = diagnose([])
    assert isinstance(d, Diagnosis)
    with pytest.raises(AttributeError):
        d.verdict = "failed"  # type: ignore[misc]


# --------------------------------------------------------------------------- line handling


def test_line_time_formats() -> None:
    assert line_time("2026-08-21 10:00:05 [INFO] x") == (1787306405.0, True)
    assert line_time("[atom 14:05:01] EngineCore_DP1 failed") == (14 * 3600 + 5 * 60 + 1, False)
    assert line_time("E0603 20:16:59.104586 27322 file.cc:271] x") == (20 * 3600 + 16 * 60 + 59.104586, False)
    assert line_time("Traceback (most recent call last):") is None


def test_clean_text_strips_escapes_and_caps() -> None:
    assert clean_text("\x1b[31mERROR\x1b[0m boom\x00\x07") == "ERROR boom"
    assert clean_text("\x1b]0;title\x07x") == "x"
    assert clean_text("x" * 100_000) == "x" * 4096 + "… [+95904 chars]"
    assert clean_text("\tlast\rshown") == "shown"  # what a terminal shows of a rewritten line


# --------------------------------------------------------------------------- srtctl's FAILURE DETAILS


FAILURE_DETAILS = [
    "2026-08-26 14:05:04 [ERROR] Critical process 'prefill_0_mi355x-a01' exited with code 1",
    "2026-08-26 14:05:05 [INFO] Cleanup",
    "2026-08-26 14:05:06 [ERROR] ============================================================",
    "2026-08-26 14:05:06 [ERROR] FAILURE DETAILS",
    "2026-08-26 14:05:06 [ERROR] ============================================================",
    "--- Process: prefill_0_mi355x-a01 ---",
    "Exit code: 1",
    "Node: mi355x-a01",
    "Log file: /shared/outputs/39443/logs/mi355x-a01_prefill_w0.out",
    "Last 50 lines of log:",
    "    (EngineCore_DP7 pid=20424) zmq.error.ZMQError: Address already in use (addr='tcp://*:5557')",
    "    [atom 14:05:03] Some processes failed to start, shutting down all",
    "2026-08-26 14:05:06 [ERROR] ============================================================",
    "✗ Sweep failed (exit code: 1)",
]


def test_failure_details_quotes_are_attributed_to_the_quoted_worker() -> None:
    triage = triage_files({"logs/sweep_39443.log": FAILURE_DETAILS})
    quoted = [o for o in triage.findings if o.quoted]
    assert [(o.id, o.worker, o.node, o.line_no) for o in quoted] == [
        ("zmq-bind-in-use", "prefill_w0", "mi355x-a01", 11),
        ("engine-init-failed", "prefill_w0", "mi355x-a01", 12),
    ]
    d = triage.diagnose()
    assert d.root_cause is not None and d.root_cause.id == "zmq-bind-in-use"
    assert d.root_cause.first.file == "logs/sweep_39443.log"  # no worker log was read
    assert d.verdict == "failed"


def test_worker_log_line_beats_the_quote_of_it() -> None:
    triage = Triage()
    triage.feed("logs/sweep_39443.log", FAILURE_DETAILS)  # the quote arrives first
    worker = (SEED_LOGS / "mi355x-a01_prefill_w0.out").read_text(encoding="utf-8").splitlines()
    triage.feed("logs/mi355x-a01_prefill_w0.out", worker)
    d = triage.diagnose()
    assert d.root_cause is not None
    assert d.root_cause.first.file == "logs/mi355x-a01_prefill_w0.out"
    dp7 = [g for g in triage.groups if g.id == "zmq-bind-in-use" and g.first.rank == "DP7"]
    assert len(dp7) == 1 and not dp7[0].first.quoted and dp7[0].count == 3


def test_quote_ends_at_the_first_unindented_line() -> None:
    lines = [
        *FAILURE_DETAILS[:10],
        "    [atom 14:05:03] ok",
        "2026-08-26 14:05:07 [ERROR] Server did not become healthy",
    ]
    triage = triage_files({"logs/sweep_1.log": lines})
    assert [o.id for o in triage.findings] == [
        "srtctl-critical-process-exit",
        "srtctl-critical-process-exit",  # the FAILURE DETAILS heading
        "health-check-timeout",
    ]
    finding = triage.findings[-1]
    assert finding.id == "health-check-timeout" and not finding.quoted and finding.worker is None


# --------------------------------------------------------------------------- the demo engine


def test_demo_engine_twin_of_the_seed(tmp_path: Path) -> None:
    """The demo engine's 2P1D DPA twin (real pyzmq bind conflict) triages like the seed."""
    pytest.importorskip("zmq")
    import subprocess
    import sys

    from console.demo.bundle import engine_script

    plan = {
        "name": "twin-2p1d",
        "backend": "atom",
        "frontend": "atomesh",
        "benchmark": "custom",
        "concurrencies": [256],
        "gpus_per_node": 8,
        "gpu_type": "mi355x",
        "roles": [
            {"name": "prefill", "workers": 2, "nodes": 2, "gpus_per_worker": 8, "dp_attention": True, "tp": 8},
            {"name": "decode", "workers": 1, "nodes": 1, "gpus_per_worker": 8, "tp": 8},
        ],
        "config": {
            "name": "twin-2p1d",
            "demo": {
                "startup_seconds": 1,
                "shards": 64,
                "graph_batches": 4,
                "faults": [{"type": "zmq-bind", "exit": True}],
            },
            "health_check": {"max_attempts": 5, "interval_seconds": 1},
        },
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    job = tmp_path / "job"
    proc = subprocess.run(
        [sys.executable, str(engine_script()), "orchestrator", "--plan", str(tmp_path / "plan.json"),
         "--job-dir", str(job), "--job-id", "39443", "--speed", "4"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    (job / "logs" / "sweep_39443.log").write_text(proc.stdout)
    triage = triage_dir(job / "logs")
    d = triage.diagnose("RUNNING")
    assert d.root_cause is not None and d.root_cause.id == "zmq-bind-in-use", proc.stderr[-2000:]
    assert not d.root_cause.first.quoted
    assert d.deterministic and set(d.root_workers) == {"prefill_w0", "prefill_w1", "decode_w0"}
    assert {"engine-init-failed", "srtctl-critical-process-exit"} <= {g.id for g in d.consequences}
    snap = triage.snapshot("RUNNING")
    assert snap.job_id == "39443" and snap.nodes == 3
    for worker in snap.workers.values():
        assert worker.shards_label == "64/64" and worker.graphs_label == "4/4" and worker.stage.value == "failed"
    # the orchestrator already ended the attempt, so it is failed rather than doomed
    assert snap.stage.value == "Failed" and d.verdict == "failed"


def test_findings_beyond_the_cap_are_counted_not_kept() -> None:
    triage = Triage(max_findings=5)
    line = "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered"
    update = triage.feed("logs/n1_decode_w0.out", [line] * 12)
    assert len(update.findings) == 12  # the caller still hears of each one
    assert len(triage.findings) == 5 and triage.dropped == 7
    [group] = triage.groups
    assert (group.count, group.first.line_no, group.last_line_no) == (12, 1, 12)
    assert triage.diagnose().root_count == 12


def test_feed_continues_line_numbers_and_reports_stage_changes() -> None:
    triage = Triage()
    first = triage.feed("logs/sweep_3.log", ["2026-08-21 10:00:05 [INFO] Sweep Orchestrator"])
    assert [(c.subject, c.new, c.line_no) for c in first.changes] == [("stage", "Starting", 1)]
    second = triage.feed("logs/sweep_3.log", ["x", "2026-08-21 10:00:09 [INFO] Starting backend workers"])
    assert [(c.new, c.line_no) for c in second.changes] == [("Starting Workers", 3)]
    third = triage.feed("logs/n1_prefill_w0.out", ["zmq.error.ZMQError: Address already in use"], first_line_no=40)
    assert [(o.id, o.line_no) for o in third.findings] == [("zmq-bind-in-use", 40)]
    assert ("n1_prefill_w0", "failed") in [(c.subject, c.new) for c in third.changes]
    assert triage.lines_seen("logs/n1_prefill_w0.out") == 40


# --------------------------------------------------------------------------- a stop asked of a worker

STOP = (
    "(EngineCore pid=552076) INFO 08-21 10:24:34 [core.py:1214] [shutdown] EngineCore: trigger received signal=SIGTERM"
)
DEAD = (
    "(APIServer pid=551751) ERROR 08-21 10:24:34 [async_llm.py:704] vllm.v1.engine.exceptions.EngineDeadError: "
    "EngineCore encountered an issue. See stack trace (above) for the root cause."
)


def test_a_worker_told_to_stop_that_reports_its_engine_dead_has_not_failed() -> None:
    worker = "logs/n1_decode_w0.out"
    served = 'INFO: 127.0.0.1:56098 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    triage = triage_files({worker: [served, STOP, DEAD]})
    assert [(o.id, o.severity, o.line_no) for o in triage.findings] == [
        ("stop-requested", "info", 2),
        ("engine-process-died", "fatal", 3),
    ]
    d = triage.diagnose()
    assert d.verdict == "healthy" and d.root_cause is None
    assert [g.id for g in d.teardown] == ["engine-process-died"] and [g.first.line_no for g in d.stops] == [2]
    assert json.loads(json.dumps(d.to_json()))["stops"][0]["line_no"] == 2
    # the workers table does not call it failed either
    assert {w.stage.value for w in triage.snapshot().workers.values()} != {"failed"}


def test_a_stop_excuses_only_the_reports_written_after_it_in_its_own_file() -> None:
    before = [DEAD, STOP]
    d = triage_files({"logs/n1_decode_w0.out": before}).diagnose()
    assert d.verdict == "failed" and d.root_cause is not None and d.root_cause.id == "engine-process-died"
    assert d.teardown == () and d.stops == ()
    elsewhere = triage_files({"logs/n1_decode_w0.out": [STOP], "logs/n1_prefill_w0.out": ["x", DEAD]}).diagnose()
    assert elsewhere.verdict == "failed" and elsewhere.teardown == ()


def test_a_specific_cause_written_after_a_stop_is_still_a_failure() -> None:
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"
    d = triage_files({"logs/n1_decode_w0.out": [STOP, oom, DEAD]}).diagnose()
    assert d.verdict == "failed" and d.root_cause is not None and d.root_cause.id == "gpu-oom"
    assert [g.id for g in d.teardown] == ["engine-process-died"]


# --------------------------------------------------------------------------- a startup failure the server outlived

# Mooncake failing one NIC of several (kvcache-ai/Mooncake rdma_context.cpp; assets/real-lines.yaml)
OPEN_NIC = "E20260821 12:30:19.435154 rdma_context.cpp:209] Failed to open device mlx5_3 on port  with GID 3"
# Mooncake without any NIC: its own WARNING, and the TCP transport carries the KV
NO_RDMA = "W1123 16:17:39.035148   161 topology.cpp:55] No RDMA devices found, check your device installation"
FIRED_UP = "[2025-11-23 16:19:02] The server is fired up and ready to roll!"
FAULT = "Memory access fault by GPU node-4 (Agent handle: 0x55d0a7e2c1d0) on address 0x7f1c2a000000. Reason: Unknown."


@pytest.mark.parametrize("name", ["prefill.log", "logs/n1_prefill_w0.out"])  # any log, and srtctl's worker files
def test_a_startup_failure_the_server_outlived_is_no_root_cause(name: str) -> None:
    outlived = triage_files({name: [OPEN_NIC, "x", FIRED_UP, "y", FAULT]})
    assert outlived.tracker.ready_lines == {name: 3}
    d = outlived.diagnose("RUNNING")
    assert d.root_cause is not None and (d.root_cause.id, d.root_cause.first.line_no) == ("rocm-gpu-memory-fault", 5)
    assert d.verdict == "failed"  # a runtime failure: not doomed by the startup line it outlived
    # without the server's word that it is up, the startup failure comes first
    before = triage_files({name: [OPEN_NIC, "x", "y", "z", FAULT]}).diagnose("RUNNING")
    assert before.root_cause is not None and before.root_cause.id == "mooncake-register-memory-failed"
    # and alone, an outlived startup failure is still what the log holds
    alone = triage_files({name: [OPEN_NIC, FIRED_UP]}).diagnose("FAILED")
    assert alone.root_cause is not None and alone.root_cause.id == "mooncake-register-memory-failed"
    # but it failed nothing: a run that went on serving after it is degraded, not failed
    served = triage_files({name: [OPEN_NIC, FIRED_UP]})
    assert [served.diagnose(state).verdict for state in ("RUNNING", "COMPLETED")] == ["degraded", "degraded"]
    assert triage_files({name: [OPEN_NIC, "x"]}).diagnose("COMPLETED").verdict == "failed"


def test_a_startup_failure_is_the_root_of_what_it_left_broken_in_its_component() -> None:
    # Mooncake's registration failed, the server still started, then every transfer found its
    # memory unregistered (sgl-project/sglang#6753): the registration is the cause.
    unregistered = (
        "E0529 23:23:23.432950 69588 rdma_transport.cpp:323] Memory region not registered by any active"
        " device(s): 0x7c1cda002800"
    )
    name = "logs/n1_prefill_w0.out"
    d = triage_files({name: [OPEN_NIC, "x", FIRED_UP, "y", unregistered]}).diagnose("RUNNING")
    assert d.root_cause is not None and (d.root_cause.id, d.root_cause.first.line_no) == (
        "mooncake-register-memory-failed",
        1,
    )
    assert "mooncake-transfer-failed" in {g.id for g in d.consequences}
    # in another worker's log it is that worker's own failure
    other = triage_files({name: [OPEN_NIC, "x", FIRED_UP], "logs/n2_decode_w0.out": ["y", unregistered]})
    root = other.diagnose("RUNNING").root_cause
    assert root is not None and root.id == "mooncake-transfer-failed"


@pytest.mark.parametrize("batched", [True, False])
def test_a_worker_that_outlived_its_startup_failure_is_serving_until_it_fails(batched: bool) -> None:
    name = "logs/n1_prefill_w0.out"
    triage = Triage()

    def stage() -> tuple[str, str | None]:
        (worker,) = triage.snapshot().workers.values()
        return worker.stage.value, worker.failure

    lines = [OPEN_NIC, "x", FIRED_UP]
    if batched:
        triage.feed(name, lines)
    else:
        triage.feed(name, lines[:1])
        assert stage() == ("failed", "mooncake-register-memory-failed")  # until its server says it is ready
        triage.feed(name, lines[1:])
    assert stage() == ("ready", None)
    triage.feed(name, ["y", FAULT])
    assert stage() == ("failed", "rocm-gpu-memory-fault")


@pytest.mark.parametrize("batched", [True, False])
def test_the_workers_table_fails_a_worker_by_the_start_that_left_it_broken(batched: bool) -> None:
    # The diagnosis names the registration that failed at line 1 as the root cause of the
    # unregistered memory at line 5 (above); the workers table names the same failure there.
    unregistered = "E0529 23:23:23.432950 69588 rdma_transport.cpp:323] Memory region not registered: 0x7c1c"
    name = "logs/n1_prefill_w0.out"
    triage = Triage()
    lines = [OPEN_NIC, "x", FIRED_UP, "y", unregistered, FAULT]
    if batched:
        triage.feed(name, lines)
    else:
        for line in lines[:-2]:
            triage.feed(name, [line])
        (worker,) = triage.snapshot().workers.values()
        assert (worker.stage.value, worker.failure) == ("ready", None)
        triage.feed(name, lines[-2:])
    (worker,) = triage.snapshot().workers.values()
    assert (worker.stage.value, worker.failure, worker.failure_line) == (
        "failed",
        "mooncake-register-memory-failed",
        1,
    )
    root = triage.diagnose("RUNNING").root_cause
    assert root is not None and (root.id, root.first.line_no) == (worker.failure, worker.failure_line)
    # a failure of another component leaves the outlived start where it was: served
    other = Triage()
    other.feed(name, [OPEN_NIC, "x", FIRED_UP, "y", FAULT])
    (worker,) = other.snapshot().workers.values()
    assert (worker.failure, worker.failure_line) == ("rocm-gpu-memory-fault", 5)


def test_mooncake_without_rdma_is_a_warning_not_a_doomed_start() -> None:
    # Mooncake logs it at WARNING and starts its TCP transport: the start goes on, slower KV.
    name = "logs/n1_prefill_w0.out"
    tcp = "I1123 16:17:39.035200   161 tcp_transport.cpp:299] TcpTransport: listen on port 16019"
    starting = triage_files({name: [NO_RDMA, tcp]})
    d = starting.diagnose("RUNNING")
    assert [(g.id, g.first.severity) for g in d.groups] == [("mooncake-no-rdma-device", "warning")]
    assert d.verdict == "healthy" and d.root_cause is None
    (worker,) = starting.snapshot().workers.values()
    assert worker.stage.value != "failed"
    # the failure that follows is the root cause, whatever came first
    failing = triage_files({name: [NO_RDMA, "x", FAULT]}).diagnose("FAILED")
    assert failing.root_cause is not None and failing.root_cause.id == "rocm-gpu-memory-fault"


def test_a_step_cancelled_for_a_task_failure_points_at_the_task() -> None:
    # A job script's broken line continuation ran a flag as a command (exit 127); srun then
    # cancelled the step: the task that exited is the first report, the cancel repeats it.
    lines = [
        "./.my_script_temp_245536: line 12: --tensor-parallel-size: command not found",
        "srun: error: gpu-1-59: task 3: Exited with exit code 127",
        "srun: Terminating StepId=245536.0",
        "[2026-03-14T17:16:41.080] error: *** STEP 245536.0 ON gpu-1-59 CANCELLED AT 2026-03-14T17:16:41 DUE TO"
        " TASK FAILURE ***",
        "srun: error: gpu-1-59: tasks 0,2: Terminated",
    ]
    root = triage_files({"slurm-245536.err": lines}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("srun-task-failed", 2)
    # a cancel with no task report above it is the first report itself
    alone = triage_files({"slurm-245536.err": lines[3:4]}).diagnose("FAILED").root_cause
    assert alone is not None and (alone.id, alone.first.line_no) == ("slurm-job-cancelled", 1)


def test_gpu_errors_after_a_gpu_fault_are_its_consequences() -> None:
    # An illegal address breaks the process's GPU context: the next stream switch reports the
    # device busy (sgl-project/sglang#3892). That report is no cause of its own.
    fault = "RuntimeError: CUDA error: an illegal memory access was encountered"
    busy = "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"
    name = "logs/n1_decode_w0.out"
    root = triage_files({name: ["x", fault, "y", busy]}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("gpu-illegal-memory-access", 2)
    # before any fault, a busy device is the cause
    root = triage_files({name: ["x", busy, "y", fault]}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("gpu-memory-held-by-other", 2)


def test_an_uncaught_cpp_exception_dies_of_the_report_its_what_holds() -> None:
    # `terminate called after throwing` only says the process aborted; the `what():` line below
    # says of what (sgl-project/sglang#1693: the NCCL watchdog's collective timeout).
    terminate = "terminate called after throwing an instance of 'c10::DistBackendError'"
    what = (
        "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: [Rank 5] Watchdog"
        " caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008,"
        " NumelOut=152064, Timeout(ms)=600000) ran for 600031 milliseconds before timing out."
    )
    name = "logs/n1_decode_w0.out"
    root = triage_files({name: ["x", terminate, what]}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("nccl-watchdog-timeout", 3)
    # with a `what():` no signature knows, the abort is the report
    unknown = "  what():  std::bad_variant_access"
    root = triage_files({name: ["x", terminate, unknown]}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("process-crash-signal", 2)


def test_a_report_that_opens_a_traceback_dies_of_the_exception_that_ends_it() -> None:
    # SGLang's `Scheduler hit an exception: Traceback ...` (and its older `Exception in
    # ModelTpServer:`, Ray's `RayTaskError(ValueError): ...`) is written first, but reports the
    # exception its traceback ends in: when no signature knows that one, it is the cause.
    name = "logs/n1_prefill_w0.out"
    frames = ['  File "/sgl/srt/managers/scheduler.py", line 2732, in run_scheduler_process', "    scheduler.run()"]
    for report in (
        "[2025-11-13 16:17:31 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "Exception in ModelTpServer:",
    ):
        head = [report] if "Traceback" in report else [report, "Traceback (most recent call last):"]
        lines = ["x", *head, *frames, "AttributeError: 'DeepseekV2MoE' object has no attribute 'experts_shared'"]
        root = triage_files({name: lines}).diagnose("FAILED").root_cause
        assert root is not None and (root.id, root.first.line_no) == ("unrecognised-exception", len(lines)), report
    # A report that opens no traceback stays the earliest word of the failure.
    lines = [
        "x",
        "[2025-11-13 16:17:31 TP0] Scheduler hit an exception.",
        "y",
        "Traceback (most recent call last):",
        *frames,
        "KeyError: 'a'",
    ]
    root = triage_files({name: lines}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("sglang-scheduler-exception", 2)


def test_a_kill_the_script_announced_is_its_stop_not_the_oom_killer() -> None:
    # SGLang's AMD nightly script stops the server it started once its benchmark is done, and bash
    # reports the job it killed (michael-amd/sglang-ci: cron_log/mi30x/20251207/grok2_nightly_online.log).
    killed = (
        "/mnt/raid/ci/grok_perf_online_csv.sh: line 504:    51 Killed                  env SGLANG_USE_AITER=1"
        " python3 -m sglang.launch_server --model /data/grok-2"
    )
    name = "logs/n1_agg_w0.out"
    done = ["Client benchmark completed in 1668 seconds", "[online] Shutting down server (PID 51)...", killed]
    assert triage_files({name: done}).findings == []
    # Unannounced (or another process announced), the same kill is the OOM killer's.
    for lines in (["Client benchmark running", killed], ["[online] Shutting down server (PID 52)...", killed]):
        root = triage_files({name: lines}).diagnose("FAILED").root_cause
        assert root is not None and (root.id, root.first.line_no) == ("host-oom-kill", 2)


def test_a_graph_capture_that_met_a_missing_kernel_is_the_kernels_failure() -> None:
    # SGLang captured CUDA graphs on a T4 with FlashInfer built without its kernels
    # (sgl-project/sglang#1058): the capture is only where the first kernel was launched.
    lines = [
        "Initialization failed. controller_init_state: Traceback (most recent call last):",
        "Exception: Capture cuda graph failed: BatchDecodeWithPagedKVCache failed with error no kernel image is"
        " available for execution on the device",
        "Possible solutions:",
        "1. disable torch compile by not using --enable-torch-compile",
        "2. disable cuda graph by --disable-cuda-graph",
    ]
    root = triage_files({"logs/n1_decode_w0.out": lines}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("gpu-binary-incompatible", 2)
    # a capture that failed of itself stays the cause, and its advice list only repeats it
    lines[1] = "Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing"
    root = triage_files({"logs/n1_decode_w0.out": lines}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("cuda-graph-capture-failed", 2)


def test_a_request_refused_as_invalid_is_the_clients_error_and_a_bad_config_is_not() -> None:
    # SGLang answered a chat request whose assistant turn had no content with a 500 and its
    # pydantic traceback, and served on (sgl-project/sglang#7083).
    request = [
        "Traceback (most recent call last):",
        '  File "/sglang/srt/openai_api/adapter.py", line 1471, in v1_chat_completions',
        "    all_requests = [ChatCompletionRequest(**request_json)]",
        "pydantic_core._pydantic_core.ValidationError: 3 validation errors for ChatCompletionRequest",
        "messages.2.ChatCompletionMessageGenericParam.content",
        "  Field required [type=missing, input_value={'role': 'assistant', 'to...}, input_type=dict]",
        "    For further information visit https://errors.pydantic.dev/2.11/v/missing",
        "messages.2.ChatCompletionMessageUserParam.role",
        "  Input should be 'user' [type=literal_error, input_value='assistant', input_type=str]",
    ]
    triage = triage_files({"logs/n1_agg_w0.out": request})
    assert not triage.findings and triage.diagnose("RUNNING").verdict == "healthy"
    # a validator's own message about the engine's configuration is its refusal of a flag
    config = [
        "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
        "  Value error, User-specified max_model_len (131072) is greater than the derived max_model_len"
        " (max_position_embeddings=32768.0 or model_max_length=None in model's config.json). [type=value_error,"
        " input_value=ArgsKwargs((), {'model': ...}), input_type=ArgsKwargs]",
    ]
    root = triage_files({"logs/n1_agg_w0.out": config}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("engine-bad-argument", 2)


def test_a_scheduler_that_is_dead_died_of_its_own_traceback_when_it_left_one() -> None:
    # SGLang's launcher says a scheduler is gone; the scheduler's last lines above say why.
    lines = [
        "[01-28 04:18:08] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2871, in run_scheduler_process',
        "NotImplementedError: Using `device_map` requires the `accelerate` library. Please install it using:"
        " `pip install accelerate`.",
        "[01-28 04:18:10] Rank 0 scheduler is dead. Please check if there are relevant logs.",
    ]
    root = triage_files({"logs/n1_agg_w0.out": lines}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("python-import-error", 3)
    # without a traceback of its own it was killed: its death is all there is to name
    root = triage_files({"logs/n1_agg_w0.out": lines[3:]}).diagnose("FAILED").root_cause
    assert root is not None and (root.id, root.first.line_no) == ("sglang-scheduler-dead", 1)
