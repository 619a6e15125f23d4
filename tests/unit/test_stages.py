"""Attempt stage, readiness and worker progress from srtctl's sweep log and the worker logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.stages import (
    Readiness,
    Stage,
    StageChange,
    StageTracker,
    WorkerStage,
    parse_worker_file,
)

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
OK_LOGS = LOGS / "sweep-41001-ok" / "logs"
SEED_LOGS = LOGS / "seed-39443" / "logs"


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def stage_path(changes: list[StageChange]) -> list[str]:
    return [c.new for c in changes if c.subject == "stage"]


def feed_one_by_one(tracker: StageTracker, path: Path) -> list[StageChange]:
    changes: list[StageChange] = []
    for line in lines_of(path):
        changes += tracker.feed(str(path), [line])
    return changes


# --------------------------------------------------------------------------- sweep log


def test_successful_sweep_goes_through_every_stage_in_order() -> None:
    tracker = StageTracker()
    assert tracker.stage is Stage.INITIALIZING
    changes = feed_one_by_one(tracker, OK_LOGS / "sweep_41001.log")
    assert stage_path(changes) == [
        "Starting",
        "Starting Infra",
        "Head Ready",
        "Starting Workers",
        "Starting Frontend",
        "Awaiting Workers",
        "Benchmarking",
        "Completed",
    ]
    snap = tracker.snapshot()
    assert snap.stage is Stage.COMPLETED
    assert snap.job_id == "41001"
    assert snap.nodes == 4  # the batch banner's `Nodes: 4`
    assert not snap.failing


def test_stage_changes_name_the_line_that_caused_them() -> None:
    tracker = StageTracker()
    path = OK_LOGS / "sweep_41001.log"
    changes = tracker.feed(str(path), lines_of(path))
    text = lines_of(path)
    for change in changes:
        if change.subject == "stage":
            assert change.file == str(path)
            assert 1 <= change.line_no <= len(text)
    bench = next(c for c in changes if c.new == "Benchmarking")
    assert text[bench.line_no - 1].endswith("Server is healthy - starting benchmark")


def test_readiness_progression_from_the_exact_srtctl_lines() -> None:
    tracker = StageTracker()
    changes = feed_one_by_one(tracker, OK_LOGS / "sweep_41001.log")
    labels = [c.new for c in changes if c.subject == "readiness"]
    assert labels == ["0/2P 0/1D", "1/2P 1/1D", "2/2P 1/1D ready"]
    assert tracker.readiness == Readiness(2, 2, 1, 1, ready=True, known=True)


@pytest.mark.parametrize(
    ("line", "label", "ready"),
    [
        (
            "2026-08-21 10:02:11 [INFO] Model is not ready, waiting for 2 prefills and 0 decodes. "
            "Have 2 prefills and 4 decodes.",
            "2/4P 4/4D",
            False,
        ),
        (
            "2026-08-21 10:02:11 [INFO] Model is not ready, waiting for 1 prefill and 1 decode. "
            "Have 1 prefill and 0 decode. (0 regular workers)",
            "1/2P 0/1D",
            False,
        ),
        ("2026-08-21 10:02:51 [INFO] Model is ready. Have 1 prefills and 1 decodes.", "1/1P 1/1D", True),
        ("2026-08-21 10:00:11 [INFO] Waiting for server health (expecting 4 agg)...", "0/4D", False),
        # srtctl c88ef731's own words (cli/mixins/benchmark_stage.py: `expecting %d health entries: %s`)
        ("2026-12-01 09:53:58 [INFO] Waiting for server health (expecting 2 health entries: 2 agg)...", "0/2D", False),
        (
            "2026-08-21 10:00:11 [INFO] Polling http://h:8000/workers every 10.0s for 1 prefills and 2 decodes "
            "(sglang frontend)",
            "0/1P 0/2D",
            False,
        ),
    ],
)
def test_readiness_lines(line: str, label: str, ready: bool) -> None:
    tracker = StageTracker()
    tracker.feed("logs/sweep_1.log", [line])
    assert tracker.readiness.label == label
    assert tracker.readiness.ready is ready


def test_no_readiness_line_yet_is_not_a_readiness() -> None:
    tracker = StageTracker()
    tracker.feed("logs/sweep_1.log", ["2026-08-21 10:00:05 [INFO] Sweep Orchestrator"])
    assert tracker.readiness.label == ""
    assert tracker.snapshot().stage is Stage.STARTING


def test_whole_log_not_only_the_tail() -> None:
    # 500 lines of benchmark chatter after the last marker: the stage is still known.
    tracker = StageTracker()
    tracker.feed("logs/sweep_7.log", ["2026-08-21 10:02:51 [INFO] Server is healthy - starting benchmark"])
    tracker.feed("logs/sweep_7.log", [f"2026-08-21 10:03:{i % 60:02d} [INFO] still running" for i in range(500)])
    assert tracker.stage is Stage.BENCHMARKING
    assert tracker.lines_seen("logs/sweep_7.log") == 501


def sweep(*messages: str) -> list[str]:
    return [
        f"2026-08-21 10:00:{i:02d} [{'ERROR' if m.startswith('!') else 'INFO'}] {m.lstrip('!')}"
        for i, m in enumerate(messages)
    ]


def test_health_timeout_then_cleanup_is_failed() -> None:
    tracker = StageTracker()
    changes = tracker.feed(
        "logs/sweep_9.log",
        sweep(
            "Sweep Orchestrator",
            "Starting backend workers",
            "Starting frontend layer",
            "Polling http://h:8000/health every 10.0s for 1 prefills and 1 decodes",
            "!Model did not get healthy in 1800 seconds",
            "!Server did not become healthy",
        ),
    )
    assert tracker.stage is Stage.AWAITING_WORKERS
    assert tracker.failing
    assert tracker.snapshot().failure == "Model did not get healthy in 1800 seconds"
    changes += tracker.feed("logs/sweep_9.log", ["2026-08-21 10:31:00 [INFO] Cleanup"])
    assert tracker.stage is Stage.FAILED
    assert stage_path(changes)[-1] == "Failed"


def test_cleanup_without_verdict_is_finalizing_then_the_end_line_decides() -> None:
    tracker = StageTracker()
    tracker.feed("logs/sweep_9.log", sweep("Sweep Orchestrator", "Benchmark type is 'manual' - server is ready"))
    assert tracker.stage is Stage.BENCHMARKING
    tracker.feed("logs/sweep_9.log", ["2026-08-21 11:00:00 [INFO] Cleanup"])
    assert tracker.stage is Stage.FINALIZING
    # a quoted worker line after Cleanup does not move the stage back
    tracker.feed("logs/sweep_9.log", ["    [INFO] Starting backend workers"])
    assert tracker.stage is Stage.FINALIZING
    tracker.feed("logs/sweep_9.log", ["✗ Sweep failed (exit code: 1)", "End: Fri Aug 21 11:00:05 UTC 2026"])
    assert tracker.stage is Stage.FAILED


def test_benchmark_failure_after_cleanup_is_failed() -> None:
    tracker = StageTracker()
    tracker.feed(
        "logs/sweep_9.log",
        sweep("Sweep Orchestrator", "Running SA-Bench benchmark", "!Benchmark failed with exit code 1", "Cleanup"),
    )
    assert tracker.stage is Stage.FAILED


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("RUNNING", Stage.AWAITING_WORKERS),
        ("PENDING", Stage.AWAITING_WORKERS),
        ("CANCELLED", Stage.KILLED),
        ("TIMEOUT", Stage.TIMED_OUT),
        ("COMPLETED", Stage.KILLED),
        ("CANCELLED by 1001", Stage.KILLED),
    ],
)
def test_finished_scheduler_state_ends_a_stage_in_progress(state: str, expected: Stage) -> None:
    tracker = StageTracker()
    tracker.feed("logs/sweep_9.log", sweep("Sweep Orchestrator", "Waiting for workers to be ready..."))
    assert tracker.snapshot(state).stage is expected
    assert tracker.snapshot().stage is Stage.AWAITING_WORKERS  # the override is for that call only


def test_scheduler_state_change_is_an_event_and_failures_stay_failed() -> None:
    tracker = StageTracker()
    tracker.feed("logs/sweep_9.log", sweep("Sweep Orchestrator", "!Critical process 'decode_0_n3' exited with code 1"))
    assert tracker.set_scheduler_state("RUNNING") == []
    [change] = tracker.set_scheduler_state("FAILED")
    assert (change.old, change.new) == ("Starting", "Failed")


def test_slurm_time_limit_line_means_timed_out_once_the_job_ended() -> None:
    tracker = StageTracker()
    tracker.feed(
        "logs/sweep_9.log",
        [
            *sweep("Sweep Orchestrator", "Polling http://h:8000/health every 10.0s for 1 prefills and 1 decodes"),
            "slurmstepd: error: *** JOB 9 ON n1 CANCELLED AT 2026-08-21T14:00:00 DUE TO TIME LIMIT ***",
        ],
    )
    assert tracker.snapshot("CANCELLED").stage is Stage.TIMED_OUT


def test_no_sweep_log_is_initializing() -> None:
    tracker = StageTracker()
    tracker.feed("logs/n1_prefill_w0.out", ["Loading safetensors checkpoint shards:  37% Completed | 24/64"])
    assert tracker.snapshot().stage is Stage.INITIALIZING
    assert tracker.snapshot("RUNNING").stage is Stage.INITIALIZING
    assert not tracker.has_sweep_log
    tracker.feed("logs/sweep_12.log", [])
    assert tracker.has_sweep_log  # an empty sweep log: the job was submitted


# --------------------------------------------------------------------------- workers


def test_worker_file_names() -> None:
    assert parse_worker_file("logs/gb200-n01_prefill_w0.out") == ("gb200-n01", "prefill", 0)
    assert parse_worker_file("node_with_underscores_decode_w12.out") == ("node_with_underscores", "decode", 12)
    assert parse_worker_file("n1_agg_w3.out") == ("n1", "agg", 3)
    assert parse_worker_file("n1_frontend_0.out") is None
    assert parse_worker_file("benchmark.out") is None


def test_sglang_worker_progress_shards_graphs_server_ready() -> None:
    tracker = StageTracker()
    path = OK_LOGS / "gb200-n01_prefill_w0.out"
    changes = feed_one_by_one(tracker, path)
    path_of_stages = [c.new for c in changes if c.subject == "gb200-n01_prefill_w0"]
    assert path_of_stages == [
        "starting",
        "loading shards",
        "shards loaded",
        "capturing graphs",
        "graphs captured",
        "server up",
        "ready",
    ]
    w = tracker.snapshot().workers["gb200-n01_prefill_w0"]
    assert (w.node, w.mode, w.index, w.worker) == ("gb200-n01", "prefill", 0, "prefill_w0")
    assert (w.shards_loaded, w.shards_total) == (32, 32)
    assert (w.graphs_captured, w.graphs_total) == (4, 4)
    assert w.server_up and w.ready
    assert w.as_dict()["shards"] == "32/32"


def test_shard_progress_mid_load() -> None:
    tracker = StageTracker()
    tracker.feed(
        "logs/n1_decode_w0.out", ["Loading safetensors checkpoint shards:  37% Completed | 24/64 [01:02<01:40]"]
    )
    w = tracker.snapshot().workers["n1_decode_w0"]
    assert w.stage is WorkerStage.LOADING
    assert w.shards_label == "24/64"


def test_tqdm_carriage_returns_take_the_last_update() -> None:
    tracker = StageTracker()
    line = "\r".join(
        f"Loading safetensors checkpoint shards: {p:3d}% Completed | {n}/8 [00:0{n}<00:00]"
        for p, n in ((25, 2), (50, 4), (100, 8))
    )
    tracker.feed("logs/n1_agg_w0.out", [line])
    w = tracker.snapshot().workers["n1_agg_w0"]
    assert w.shards_label == "8/8"
    assert w.stage is WorkerStage.LOADED


@pytest.mark.parametrize(
    ("lines", "stage"),
    [
        (
            [
                "(VllmWorker rank=0 pid=1) INFO 10-15 08:32:29 [default_loader.py:262] "
                "Loading weights took 38.12 seconds"
            ],
            WorkerStage.LOADED,
        ),
        (
            [
                "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 "
                "[00:20<00:00,  3.24it/s]"
            ],
            WorkerStage.CAPTURING,
        ),
        (
            ["INFO 10-15 08:33:10 [gpu_model_runner.py:2567] Graph capturing finished in 21 secs, took 0.61 GiB"],
            WorkerStage.CAPTURED,
        ),
        (["[atom 14:05:00] CUDA graph capture done in 24.4 s"], WorkerStage.CAPTURED),
        (["(APIServer pid=1) INFO:     Application startup complete."], WorkerStage.SERVER_UP),
        (["[atom 14:05:10] Server started on http://0.0.0.0:30000"], WorkerStage.SERVER_UP),
        (["[atom 14:05:11] Registered with atomesh router at http://n0:8000 as prefill"], WorkerStage.READY),
        (["[2026-08-21 10:02:40] The server is fired up and ready to roll!"], WorkerStage.READY),
    ],
)
def test_engine_variants(lines: list[str], stage: WorkerStage) -> None:
    tracker = StageTracker()
    tracker.feed("logs/n1_prefill_w0.out", lines)
    assert tracker.snapshot().workers["n1_prefill_w0"].stage is stage


def test_worker_stage_never_goes_back() -> None:
    tracker = StageTracker()
    tracker.feed("logs/n1_prefill_w0.out", ["[2026-08-21 10:02:40] The server is fired up and ready to roll!"])
    tracker.feed("logs/n1_prefill_w0.out", ["Loading safetensors checkpoint shards:  37% Completed | 24/64"])
    assert tracker.snapshot().workers["n1_prefill_w0"].stage is WorkerStage.READY


def test_seed_workers_loaded_and_captured_then_failed_by_critical_exit() -> None:
    tracker = StageTracker()
    # the sweep log first: the critical exit names a worker whose file is read later
    for name in (
        "sweep_39443.log",
        "mi355x-a01_prefill_w0.out",
        "mi355x-a02_prefill_w1.out",
        "mi355x-a03_decode_w0.out",
    ):
        path = SEED_LOGS / name
        tracker.feed(str(path), lines_of(path))
    snap = tracker.snapshot("RUNNING")
    assert snap.stage is Stage.AWAITING_WORKERS
    assert snap.readiness.label == "0/2P 0/1D"
    assert snap.failing
    assert snap.job_id == "39443" and snap.nodes == 3
    for w in snap.workers.values():
        assert w.shards_label == "64/64"
        assert w.graphs_label == "8/8"
    assert snap.workers["mi355x-a01_prefill_w0"].stage is WorkerStage.FAILED
    assert snap.workers["mi355x-a01_prefill_w0"].failure == "exited with code 1"
    # the tracker alone sees no failure in the other workers' logs (the matcher does)
    assert snap.workers["mi355x-a02_prefill_w1"].stage is WorkerStage.CAPTURED


def test_model_ready_marks_every_live_worker_ready() -> None:
    tracker = StageTracker()
    tracker.feed("logs/n1_prefill_w0.out", ["INFO:     Uvicorn running on http://0.0.0.0:30000"])
    tracker.feed("logs/n2_decode_w0.out", ["Capture cuda graph end. Time elapsed: 17.20 s."])
    tracker.feed("logs/sweep_5.log", ["2026-08-21 10:02:51 [INFO] Model is ready. Have 1 prefills and 1 decodes."])
    snap = tracker.snapshot()
    assert {w.stage for w in snap.workers.values()} == {WorkerStage.READY}
    # the tracker's own record is untouched by the snapshot
    assert tracker.snapshot().workers["n2_decode_w0"].graphs_captured == 1


def test_mark_worker_failed_and_other_files() -> None:
    tracker = StageTracker()
    [created, failed] = tracker.mark_worker_failed("logs/n1_decode_w0.out", "gpu-oom", 12)
    assert (created.new, failed.new, failed.line_no) == ("starting", "failed", 12)
    assert tracker.mark_worker_failed("logs/benchmark.out", "x") == []
    assert tracker.feed("logs/benchmark.out", ["Traceback (most recent call last):"]) == []
    assert tracker.lines_seen("logs/benchmark.out") == 1


def test_stage_rules_are_data_beside_the_signature_catalog() -> None:
    import re

    from console.paths import asset
    from console.stages import _Rules

    rules = _Rules(asset("stages.yaml"))
    assert len(rules.stage_rules("sweep.stages")) == 10
    assert rules.pattern("worker.graphs.begin").flags & re.IGNORECASE


def test_a_broken_stage_rule_names_the_file_and_the_entry(tmp_path: Path) -> None:
    from console.stages import StageRulesError, _Rules

    broken = tmp_path / "stages.yaml"
    broken.write_text("sweep:\n  stages:\n    - {keyword: x, stage: Benchmarking, pattern: '(unclosed'}\n")
    with pytest.raises(StageRulesError, match=r"stages.yaml: sweep.stages\[0\]: not a valid regex"):
        _Rules(broken).stage_rules("sweep.stages")
    with pytest.raises(StageRulesError, match=r"stages.yaml: readiness.ready: missing"):
        _Rules(broken).pattern("readiness.ready")


def _worker_changes(files: list[list[str]]) -> list[list[tuple[str, str | None, str, int]]]:
    """Each list of lines read as one worker's log."""
    out = []
    for lines in files:
        changes = StageTracker().feed("logs/node1_prefill_w0.out", lines, first_line_no=1)
        out.append([(c.subject, c.old, c.new, c.line_no) for c in changes])
    return out


def test_the_worker_keyword_gate_loses_no_stage_on_real_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every worker line is skipped at once unless it holds a keyword (the fast path for the
    # decode lines a serving log is mostly made of): on the real logs, the gate changes nothing.
    import console.stages as stages

    data = Path(__file__).resolve().parents[1] / "data"
    paths = sorted((data / "real-logs").glob("*.log")) + sorted((data / "real-srtctl").glob("*/logs/*.out"))
    files = [p.read_text(encoding="utf-8", errors="replace").splitlines() for p in paths]
    files.append(["Capture cuda graph begin. This can take up to several minutes.",
                  "Capturing batches (bs=160 avail_mem=20.15 GB): 100%|#####| 23/23 [00:05<00:00,  4.51it/s]",
                  "Capture cuda graph end. Time elapsed: 5.42 s. mem usage=1.12 GB. avail mem=19.03 GB."])  # fmt: skip
    files.append(["INFO 05-02 10:00:01 model_runner.py:1530] Graph capturing finished in 12 secs, took 0.44 GiB"])
    gated = _worker_changes(files)
    stages_seen = {new for changes in gated for _, _, new, _ in changes}
    assert {"capturing graphs", "graphs captured", "shards loaded", "server up", "ready"} <= stages_seen
    for name in ("_WORKER_KEYS", "_LOADING_KEYS", "_GRAPH_KEYS"):
        monkeypatch.setattr(stages, name, ("",))  # "" is in every line: no gate
    assert _worker_changes(files) == gated


def test_a_decode_line_is_skipped_by_the_gate() -> None:
    import console.stages as stages

    line = ("[2026-08-21 10:00:01 DP0 TP0] Decode batch. #running-req: 64, #token: 81234, token usage: 0.41, "
            "cuda graph: True, gen throughput (token/s): 2345.67, #queue-req: 0")  # fmt: skip
    assert not any(k in line for k in stages._WORKER_KEYS)


@pytest.mark.parametrize(
    "line",
    [
        "[2025-11-23 16:19:02] The server is fired up and ready to roll!",
        "2026-12-05T12:36:49Z  INFO dynamo_llm: Registered endpoint 'dynamo.backend.generate' with frontend",
        "Successfully registered with the router",
        "Worker decode-0 registered",
        "Registered with atomesh router at http://10.0.0.1:8000 as prefill",
    ],
)
def test_any_log_says_where_its_server_became_ready(line: str) -> None:
    # a log that is no srtctl worker file is looked at for its ready keywords alone: every ready line holds one
    tracker = StageTracker()
    tracker.feed("server.log", ["loading", line])
    assert tracker.ready_lines == {"server.log": 2}
    assert any(k in line for k in StageTracker.line_keywords("server.log") or ())


def test_a_server_that_listens_is_not_yet_ready() -> None:
    # SGLang's HTTP server comes up before its DP ranks fail to bind their ZMQ sockets
    tracker = StageTracker()
    listening = ["INFO:     Uvicorn running on http://0.0.0.0:30000", "INFO:     Application startup complete."]
    tracker.feed("server.log", listening)
    assert tracker.ready_lines == {}
