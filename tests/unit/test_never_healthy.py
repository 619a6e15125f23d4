"""Never "healthy" while a log says otherwise: errors no signature knows, lines a healthy run
never wrote, a job that stopped making progress, and a diagnosis that agrees with itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import main
from console.diagnosis import Observation, diagnose
from console.monitor import ended_by, history_triage
from console.rerun import deterministic_warning
from console.signatures import default_matcher
from console.stages import Stage
from console.store import Store
from console.templates import is_error_level, line_template
from console.triage import HealthCheck, Triage
from screens.widgets.findings import finding_rows

DATA = Path(__file__).resolve().parents[1] / "data"
COMPLETED = DATA / "real-srtctl" / "1p1d-completed"

UNKNOWN_EXCEPTION = [
    "[2026-08-21 10:01:09 TP0] Load weight begin. avail mem=180.52 GB",
    "[2026-08-21 10:01:30 TP0] Init torch distributed begin.",
    "Traceback (most recent call last):",
    '  File "/sgl-workspace/python/sglang/srt/managers/scheduler.py", line 2009, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
    '  File "/sgl-workspace/python/sglang/srt/layers/quantization/fp8.py", line 88, in __init__',
    "    raise ValueError(self.weight_block_size)",
    "ValueError: weight_block_size [128, 64] does not divide the shard of 7168",
]


def scan_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["scan", "--json", *args]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    return doc


def triage_files(files: dict[str, list[str]], **kwargs: object) -> Triage:
    triage = Triage(**kwargs)  # type: ignore[arg-type]
    for name, lines in files.items():
        triage.feed(name, lines)
    return triage


# --------------------------------------------------------------------------- unrecognised errors


def test_scan_of_a_log_whose_only_failure_is_an_unknown_exception_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "node1_prefill_w0.out"
    log.write_text("\n".join(UNKNOWN_EXCEPTION) + "\n", encoding="utf-8")
    doc = scan_json(capsys, str(log))
    diagnosis = doc["diagnosis"]
    assert isinstance(diagnosis, dict)
    root = diagnosis["root_cause"]
    assert root is not None and root["id"] == "unrecognised-exception" and root["unrecognised"] is True
    assert root["line_no"] == 8 and root["text"].startswith("ValueError: weight_block_size")
    assert root["captures"]["exception"] == "ValueError"
    assert diagnosis["verdict"] == "degraded"  # an error, not known to be fatal: never "healthy"

    # The readable report shows it with its line; the scheduler's FAILED makes it the failure.
    assert main(["scan", str(log), "--state", "FAILED"]) == 1  # a failed verdict exits 1
    out = capsys.readouterr().out
    assert "verdict: failed" in out
    assert "root cause: unrecognised-exception - Unrecognised exception" in out
    assert f"first at {log}:8" in out and "| ValueError: weight_block_size [128, 64]" in out
    assert "no signature knows this failure" in out


@pytest.mark.parametrize("tag", ["", "(Worker_TP2_EP2 pid=2176570) "])
def test_an_exception_python_ignored_is_no_uncaught_exception(tag: str) -> None:
    # vLLM's workers at exit (a healthy GB300 run): the interpreter printed the exception raised
    # in a `__del__` and went on, so nothing ended with it.
    ignored = [
        f"{tag}Exception ignored in: <function ShmRingBuffer.__del__ at 0xec2e2027ccc0>",
        f"{tag}Traceback (most recent call last):",
        f'{tag}  File "/usr/lib/vllm/distributed/shm_broadcast.py", line 323, in __del__',
        f"{tag}    self.shared_memory.unlink()",
        f"{tag}FileNotFoundError: [Errno 2] No such file or directory: '/psm_351ce242'",
    ]
    triage = Triage()
    triage.feed("logs/n1_agg_w0.out", ignored)
    assert triage.findings == []
    # the same exception, uncaught, is one; and one Python ignored still says what it is
    triage = Triage()
    triage.feed("logs/n1_agg_w0.out", ignored[1:])
    assert [o.line_no for o in triage.findings] == [4]
    triage = Triage()
    triage.feed(
        "logs/n1_agg_w0.out",
        [*ignored[:-1], f"{tag}RuntimeError: CUDA error: an illegal memory access was encountered"],
    )
    assert [o.id for o in triage.findings] == ["gpu-illegal-memory-access"]


def test_an_exception_that_ends_a_usage_stats_thread_is_no_uncaught_exception() -> None:
    # vLLM's usage-stats thread dies when `cpuinfo` cannot read its own probe (a healthy run of
    # aiconfigurator's collector): the statistics are lost, the server serves on.
    thread = [
        "Exception in thread Thread-1 (_report_usage_worker):",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.12/site-packages/vllm/usage/usage_lib.py", line 217, in _report_usage_once',
        "    info = cpuinfo.get_cpu_info()",
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
    ]
    triage = Triage()
    triage.feed("logs/n1_agg_w0.out", thread)
    assert triage.findings == []
    # another thread's death is one
    triage = Triage()
    triage.feed("logs/n1_agg_w0.out", ["Exception in thread Thread-3 (_serve_loop):", *thread[1:]])
    assert [o.line_no for o in triage.findings] == [5]


@pytest.mark.parametrize("last", ["KeyboardInterrupt", "KeyboardInterrupt: terminated"])
def test_a_process_stopped_by_a_signal_is_no_uncaught_exception(last: str) -> None:
    # vLLM's API server turns SIGTERM into `KeyboardInterrupt("terminated")`: a stop, not a crash.
    stopped = [
        "Traceback (most recent call last):",
        '  File "/venv/vllm/entrypoints/openai/api_server.py", line 1775, in signal_handler',
        '    raise KeyboardInterrupt("terminated")',
        last,
    ]
    triage = Triage()
    triage.feed("logs/n1_agg_w0.out", stopped)
    # (the SIGTERM's own wording is the stop it reports: the log's teardown starts there)
    assert [(o.id, o.stop) for o in triage.findings] == ([("stop-requested", True)] if ": terminated" in last else [])
    assert triage.diagnose("COMPLETED").verdict == "healthy"
    # ... whatever prefix vLLM's process writes before it
    triage = Triage()
    triage.feed("logs/n1_agg_w0.out", [f"(APIServer pid=7) {line}" for line in stopped])
    assert [o.id for o in triage.findings] == (["stop-requested"] if ": terminated" in last else [])
    # an exception of another kind in its place is one
    triage = Triage()
    triage.feed("logs/n1_agg_w0.out", [*stopped[:-1], "RuntimeError: terminated"])
    assert [o.line_no for o in triage.findings] == [4]


def test_a_known_failure_with_its_wrappers_names_the_specific_cause_on_its_line() -> None:
    worker = [
        *UNKNOWN_EXCEPTION[:3],
        '  File "/sgl-workspace/python/sglang/srt/model_executor/model_runner.py", line 216, in initialize',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
        "79.19 GiB of which 1.07 GiB is free.",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "RuntimeError: scheduler could not start: see above",
    ]
    sweep = [
        "2026-08-21 10:00:09 [INFO] Starting backend workers",
        "2026-08-21 10:01:31 [ERROR] Critical process 'prefill_0_n1' exited with code 1",
        "2026-08-21 10:01:32 [ERROR] Model did not get healthy in 1800 seconds",
        "2026-08-21 10:01:32 [ERROR] Something srtctl says that no signature knows",
    ]
    triage = triage_files({"logs/sweep_7.log": sweep, "logs/n1_prefill_w0.out": worker})
    d = triage.diagnose("FAILED")
    assert d.root_cause is not None
    assert (d.root_cause.id, d.root_cause.first.line_no) == ("gpu-oom", 5)
    # The exception the OOM caused is its chain, not another unknown failure.
    assert "unrecognised-exception" not in d.counts
    consequences = {g.id for g in d.consequences}
    assert {"srtctl-critical-process-exit", "health-check-timeout", "unrecognised-error"} <= consequences
    assert d.verdict == "failed"


def test_an_unrecognised_error_written_after_a_death_is_its_consequence_and_one_before_is_the_cause() -> None:
    # vLLM V1: a worker died with no word of why; the engine core then fails every call
    # (`Executor failed.`), an exception no signature knows.
    died = (
        "(EngineCore_DP0 pid=478560) ERROR 01-18 22:19:25 [multiproc_executor.py:231] Worker proc VllmWorker-0"
        " died unexpectedly, shutting down executor."
    )
    after = [
        died,
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 954, in _handle_client_request',
        '    raise ValueError("the scheduler is gone")',
        "ValueError: the scheduler is gone",
    ]
    d = triage_files({"logs/n1_decode_w0.out": after}).diagnose("FAILED")
    assert d.root_cause is not None and (d.root_cause.id, d.root_cause.first.line_no) == ("engine-process-died", 1)
    # the same exception before the death is what may say why: it is the root
    before = [*after[1:], died]
    d = triage_files({"logs/n1_decode_w0.out": before}).diagnose("FAILED")
    assert d.root_cause is not None and (d.root_cause.id, d.root_cause.first.line_no) == ("unrecognised-exception", 4)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("2026-12-01 09:47:00 [ERROR] Benchmark harness returned no results", "unrecognised-error"),
        ("09:47:00 | ERROR | Benchmark harness returned no results", "unrecognised-error"),
        (
            "2026-12-01 09:47:00.123 | ERROR    | srtctl.cli:main:42 - Benchmark harness returned no results",
            "unrecognised-error",
        ),
        ("[2026-08-21 10:01:30] FATAL: could not open the gizmo registry", "unrecognised-fatal"),
        ("panic: runtime error: invalid memory address or nil pointer dereference", "unrecognised-fatal"),
        ("thread 'tokio-runtime-worker' panicked at lib/llm/src/kv_router.rs:88:14:", "unrecognised-fatal"),
        ("fatal error: concurrent map writes", "unrecognised-fatal"),
        ("F0812 10:00:00.123456  1234 frob.cpp:12] Check failed: gizmo != nullptr", "unrecognised-fatal"),
        ("srun: error: gpu-07: task 3: Exited with exit code 1", "srun-task-failed"),
    ],
)
def test_errors_no_signature_knows_are_findings(line: str, expected: str) -> None:
    finding = default_matcher().match_line(line)
    assert finding is not None and finding.signature_id == expected, line
    d = diagnose([Observation(finding=finding, file="logs/x.out", line_no=1, text=line)], state="RUNNING")
    assert d.verdict != "healthy" and d.root_cause is not None and d.root_cause.id == expected


def test_srtctl_banner_rules_and_info_lines_are_not_errors() -> None:
    matcher = default_matcher()
    assert matcher.match_line("2026-08-26 14:05:06 [ERROR] ============================================") is None
    assert matcher.match_line("2026-08-26 14:05:06 [INFO] Waiting for workers to be ready...") is None


def test_an_exit_code_from_srun_is_the_root_cause_when_nothing_else_is_found() -> None:
    triage = triage_files({"logs/sweep_9.log": ["srun: error: gpu-07: task 3: Exited with exit code 1"]})
    d = triage.diagnose("FAILED")
    assert d.root_cause is not None and d.root_cause.id == "srun-task-failed"
    assert d.verdict == "failed" and "only a consequence was found" in d.advice


def test_the_real_healthy_job_stays_healthy_with_its_ip_warning_known(capsys: pytest.CaptureFixture[str]) -> None:
    doc = scan_json(capsys, str(COMPLETED))
    diagnosis = doc["diagnosis"]
    assert isinstance(diagnosis, dict) and diagnosis["verdict"] == "healthy" and diagnosis["root_cause"] is None
    findings = doc["findings"]
    assert isinstance(findings, list)
    ip = [f for f in findings if f["id"] == "srtctl-node-ip-unresolved"]
    assert [f["line_no"] for f in ip] == [23, 27, 90] and {f["severity"] for f in ip} == {"warning"}
    assert ip[0]["captures"]["node"] == "node1"
    assert not [f for f in findings if f["id"].startswith("unrecognised")]


def test_a_failed_job_is_never_healthy_even_when_no_line_says_why() -> None:
    d = diagnose([], state="FAILED")
    assert d.verdict == "failed" and d.root_cause is None
    assert "no log line read says why" in d.advice
    assert diagnose([], state="COMPLETED").verdict == "healthy"


# --------------------------------------------------------------------------- novel lines


def test_templates_mask_numbers_addresses_ids_and_times() -> None:
    a = "[2026-08-21 10:02:11 TP3] Prefill transfer failed for rid=ab12cd34 on 10.0.0.7:5557 after 1.5 s"
    b = "[2026-08-22 11:12:13 TP5] Prefill transfer failed for rid=99ff00aa on 10.0.0.9:6000 after 12.25 s"
    assert line_template(a) == line_template(b)
    assert "10.0.0.7" not in line_template(a) and "Prefill transfer failed" in line_template(a)
    assert line_template(a) != line_template("[2026-08-21 10:02:11 TP3] Decode transfer failed for rid=ab12cd34")
    assert is_error_level("(EngineCore_DP0 pid=1) ERROR 10-15 08:32:29 [core.py:708] EngineCore failed to start.")
    assert is_error_level("E0603 20:16:59.104586 27322 rdma_context.cpp:271] Failed to modify QP to RTR")
    assert is_error_level("RuntimeError: something broke")
    assert not is_error_level("INFO 10-15 08:32:29 [core.py:708] error_rate=0.0 tracked")
    assert not is_error_level("[2026-08-21 10:02:11 TP3] Decode batch. #running-req: 12, errors: 0")


def test_error_lines_a_healthy_run_never_wrote_are_novel() -> None:
    healthy = [
        "ERROR 10-15 08:30:00 [serving.py:12] Client disconnected before the response (rid=123)",
        "INFO 10-15 08:30:01 [serving.py:12] everything else",
    ]
    baseline = triage_files({"logs/n1_agg_w0.out": healthy}).templates
    assert baseline == frozenset({"Client disconnected before the response (rid=<n>)"})
    attempt = [
        "ERROR 10-16 09:30:00 [serving.py:12] Client disconnected before the response (rid=987)",
        "ERROR 10-16 09:31:00 [batcher.py:40] Batch queue of decode 3 stalled for 30 s",
        "ERROR 10-16 09:31:05 [batcher.py:40] Batch queue of decode 5 stalled for 31 s",
    ]
    triage = triage_files({"logs/n1_agg_w0.out": attempt}, baseline=baseline)
    novel = [(o.line_no, o.severity) for o in triage.findings if o.id == "novel-error-line"]
    assert novel == [(2, "warning"), (3, "warning")]
    d = triage.diagnose("RUNNING")
    assert d.verdict == "healthy" and [g.count for g in d.groups if g.id == "novel-error-line"] == [2]
    # Without a healthy run to compare with, nothing is novel.
    assert not [o for o in triage_files({"logs/n1_agg_w0.out": attempt}).findings if o.id == "novel-error-line"]


def test_the_store_keeps_healthy_templates_per_arm_then_engine(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    sweep = store.add_sweep("s", "local", ["x.yaml"])
    arm_a = store.add_arm(sweep, "a", "x.yaml", None, None, "{}", {"backend": "sglang"})
    arm_b = store.add_arm(sweep, "b", "y.yaml", None, None, "{}", {"backend": "sglang"})
    arm_c = store.add_arm(sweep, "c", "z.yaml", None, None, "{}", {"backend": "vllm"})
    a1 = store.add_attempt(arm_a, "local", "demo", "{}", [1])
    a2 = store.add_attempt(arm_a, "local", "demo", "{}", [1])
    b1 = store.add_attempt(arm_b, "local", "demo", "{}", [1])
    c1 = store.add_attempt(arm_c, "local", "demo", "{}", [1])
    assert store.baseline_templates(a2.id) is None  # no healthy attempt yet
    store.save_healthy_templates(a1.id, ["Client disconnected (rid=<n>)"])
    assert store.baseline_templates(a2.id) == frozenset({"Client disconnected (rid=<n>)"})
    assert store.baseline_templates(b1.id) == frozenset({"Client disconnected (rid=<n>)"})  # same engine
    assert store.baseline_templates(c1.id) is None  # another engine
    store.save_healthy_templates(c1.id, [])
    c2 = store.add_attempt(arm_c, "local", "demo", "{}", [1])
    assert store.baseline_templates(c2.id) == frozenset()  # a healthy run with no error line at all


# --------------------------------------------------------------------------- stalled


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


SWEEP_WAIT = [
    "2026-08-21 10:00:05 [INFO] Sweep Orchestrator",
    "2026-08-21 10:00:09 [INFO] Starting backend workers",
    "2026-08-21 10:00:11 [INFO] Waiting for server health (expecting 2 health entries: 1P + 1D)...",
    "2026-08-21 10:01:11 [INFO] Model is not ready yet: waiting for 1 prefills and 1 decodes. Have 0 prefills "
    "and 0 decodes.",
]


def test_no_worker_output_while_srtctl_waits_for_health_is_a_stall() -> None:
    clock = Clock()
    triage = Triage(clock=clock, health_check=HealthCheck(max_attempts=180, interval_s=10.0))
    triage.feed("logs/sweep_5.log", SWEEP_WAIT)  # srtctl began to wait a minute before this arrived
    triage.feed("logs/n1_prefill_w0.out", ["Loading safetensors checkpoint shards:  50% Completed | 4/8"])
    assert triage.snapshot("RUNNING").stage is Stage.AWAITING_WORKERS
    clock.now += 300
    assert triage.diagnose("RUNNING").verdict == "healthy"  # quiet, not yet stalled
    clock.now += 400
    d = triage.diagnose("RUNNING")
    assert d.verdict == "stalled" and d.stall is not None
    assert d.stall.idle_s == 700 and d.stall.timeout_s == 1800
    assert d.stall.left_s == 1800 - 60 - 700
    assert "no worker output for 11 min while srtctl waits for health" in d.advice
    assert "gives up in 17 min (180 x 10 s)" in d.advice
    assert d.to_json()["stall"]["left_s"] == 1040
    # A worker line ends the stall; a job no longer running is not stalled.
    triage.feed("logs/n1_prefill_w0.out", ["Loading safetensors checkpoint shards:  62% Completed | 5/8"])
    assert triage.diagnose("RUNNING").verdict == "healthy"
    clock.now += 900
    assert triage.diagnose("RUNNING").verdict == "stalled"
    assert triage.diagnose("COMPLETED").verdict == "healthy"


def test_the_health_check_comes_from_the_recipe() -> None:
    assert HealthCheck.of_config({"health_check": {"max_attempts": 30, "interval_seconds": 4}}).timeout_s == 120
    assert HealthCheck.of_config({}).timeout_s == 1800
    assert HealthCheck.of_config({"health_check": {"max_attempts": "x", "interval_seconds": -1}}).timeout_s == 1800


# --------------------------------------------------------------------------- one story


def test_a_health_check_timeout_after_a_process_died_is_its_consequence() -> None:
    sweep = [
        "2026-08-21 10:00:09 [INFO] Starting backend workers",
        "2026-08-21 10:00:11 [INFO] Waiting for server health (expecting 2 health entries: 1P + 1D)...",
        "2026-08-21 10:02:22 [ERROR] Critical process 'decode_0_n2' exited with code -9",
        "2026-08-21 10:02:23 [ERROR] Model did not get healthy in 1800 seconds",
    ]
    d = triage_files({"logs/sweep_3.log": sweep}).diagnose("FAILED")
    assert d.root_cause is not None and d.root_cause.id == "srtctl-critical-process-exit"
    assert [g.id for g in d.consequences] == ["health-check-timeout"]


def test_one_first_at_across_banner_findings_table_and_workers_table() -> None:
    worker = [
        "[2026-08-21 10:02:13 TP0] Capture cuda graph begin. This can take up to several minutes.",
        "Traceback (most recent call last):",
        '  File "/sgl-workspace/python/model_executor/cuda_graph_runner.py", line 318, in capture',
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB.",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Exception: Capture cuda graph failed: HIP out of memory. Tried to allocate 2.00 GiB. (bs=256)",
        "[2026-08-21 10:02:20 TP3] Scheduler hit an exception: Capture cuda graph failed (bs=256)",
    ]
    triage = triage_files({"logs/n1_prefill_w0.out": worker})
    d = triage.diagnose("FAILED")
    root = d.root_cause
    assert root is not None and root.id == "cuda-graph-capture-failed"
    where = (root.first.file, root.first.line_no)
    rows = finding_rows(triage.groups, root.id, root.first)
    assert [(r.first.file, r.first.line_no) for r in rows if r.signature == root.id] == [where]
    worker_row = triage.snapshot().workers["n1_prefill_w0"]
    assert (worker_row.failure, worker_row.failure_at) == (root.id, f"n1_prefill_w0.out:{where[1]}")
    # The OOM that broke the capture is the same failure, not a consequence of it.
    assert [g.id for g in d.same_failure] == ["gpu-oom"] and "gpu-oom" not in {g.id for g in d.consequences}


def test_the_same_root_cause_in_an_earlier_attempt_makes_it_deterministic() -> None:
    worker = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."]
    once = triage_files({"logs/n1_prefill_w0.out": worker}).diagnose("FAILED")
    assert not once.deterministic and "one-off" in once.advice
    key = ended_by(once)
    assert key == "gpu-oom"
    again = triage_files({"logs/n1_prefill_w0.out": worker}, earlier=[("a3.1", key), ("a3.2", "zmq-bind-in-use")])
    d = again.diagnose("FAILED")
    assert d.deterministic and d.recurrences == ("a3.1",)
    assert "one-off" not in d.advice and "also ended attempt a3.1" in d.advice
    warning = deterministic_warning(d)
    assert warning is not None and "also ended a3.1" in warning
    # Two unknown exceptions are not the same failure: an unrecognised root compares its line.
    unknown = triage_files({"logs/n1_prefill_w0.out": UNKNOWN_EXCEPTION}).diagnose("FAILED")
    other = ["Traceback (most recent call last):", '  File "x.py", line 1', "KeyError: 'model_type'"]
    key = ended_by(unknown)
    assert key is not None and key.startswith("unrecognised-exception:ValueError: weight_block_size")
    assert not triage_files({"logs/n1_prefill_w0.out": other}, earlier=[("a1.1", key)]).diagnose("FAILED").deterministic
    assert triage_files({"logs/n1_prefill_w0.out": UNKNOWN_EXCEPTION}, earlier=[("a1.1", key)]).diagnose(
        "FAILED"
    ).recurrences == ("a1.1",)


def test_history_comes_from_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    sweep = store.add_sweep("s", "local", ["x.yaml"])
    arm = store.add_arm(sweep, "a", "x.yaml", None, None, "{}", {"backend": "sglang"})
    config = "health_check:\n  max_attempts: 30\n  interval_seconds: 4\n"
    first = store.add_attempt(arm, "local", "demo", config, [1])
    second = store.add_attempt(arm, "local", "demo", config, [1])
    store.set_root_cause(first.id, "gpu-oom")
    assert store.attempt(first.id).root_cause == "gpu-oom"
    triage = history_triage(store, store.attempt(second.id))
    assert triage.earlier == ((f"a{arm}.1", "gpu-oom"),)
    assert triage.health_check == HealthCheck(30, 4.0) and triage.baseline is None
