"""The failure-signature catalog and its matcher."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from console import signatures
from console.signatures import (
    MAX_LINE_CHARS,
    CatalogError,
    Matcher,
    bundled_catalog_path,
    default_matcher,
    load_catalog,
    reload,
)

# A copy of ../shared/reference/failure-examples.yaml (real lines, and real benign lines).
EXAMPLES_FILE = Path(__file__).resolve().parents[1] / "data" / "failure-examples.yaml"
EXAMPLES = yaml.safe_load(EXAMPLES_FILE.read_text(encoding="utf-8"))

EXAMPLE_CASES = [
    pytest.param(entry["id"], line, id=f"{entry['id']}-{i}")
    for entry in EXAMPLES["signatures"]
    for i, line in enumerate(entry["examples"])
]
BENIGN_CASES = [pytest.param(line, id=f"benign-{i}") for i, line in enumerate(EXAMPLES["benign"])]
# Real lines collected from public issues and sources (tests/unit/test_real_variants.py).
REAL = yaml.safe_load((EXAMPLES_FILE.parents[2] / "assets" / "real-lines.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def matcher() -> Matcher:
    return Matcher(load_catalog())


@pytest.fixture
def restore_default() -> Iterator[None]:
    yield
    reload()


# --------------------------------------------------------------------------- the examples


@pytest.mark.parametrize(("expected", "line"), EXAMPLE_CASES)
def test_example_line_is_best_matched_by_its_signature(matcher: Matcher, expected: str, line: str) -> None:
    finding = matcher.match_line(line)
    assert finding is not None, f"no signature matches {line!r}"
    assert finding.signature_id == expected
    start, end = finding.span
    assert 0 <= start < end <= len(line)


@pytest.mark.parametrize("line", BENIGN_CASES)
def test_benign_line_matches_nothing(matcher: Matcher, line: str) -> None:
    assert matcher.match_all(line) == []


def test_catalog_has_every_example_id(matcher: Matcher) -> None:
    ids = {sig.id for sig in matcher.signatures}
    missing = {entry["id"] for entry in EXAMPLES["signatures"]} - ids
    assert not missing


def test_catalog_entries_carry_the_fields_triage_needs(matcher: Matcher) -> None:
    for sig in matcher.signatures:
        assert sig.title and sig.hint, sig.id
        assert sig.category in signatures.CATEGORIES
        assert sig.severity in signatures.SEVERITIES
        # Every bundled signature is behind the keyword prefilter (but the one of uncaught
        # exceptions and the one of novel lines, never tried on lines).
        assert sig.keywords or ((sig.uncaught or sig.novel) and not sig.patterns), f"{sig.id} has no keywords"
        for pattern in (*sig.patterns, *sig.wrapper_patterns):
            # Bounded gaps only: an unbounded `.*`/`.+` invites slow backtracking.
            assert not re.search(r"(?<!\\)\.[*+]", pattern.pattern), (sig.id, pattern.pattern)
        # The bundled regexes are compiled when first used: each one compiles.
        for pattern in (*sig.patterns, *sig.wrapper_patterns, sig.exclude, sig.frames):
            if pattern is not None:
                re.compile(pattern.pattern, pattern.flags)


def test_example_categories_and_severities_are_kept(matcher: Matcher) -> None:
    for entry in EXAMPLES["signatures"]:
        sig = matcher.signature(entry["id"])
        assert (sig.category, sig.severity) == (entry["category"], entry["severity"])


# --------------------------------------------------------------------------- more families

FAMILY_CASES = [
    # The seed failure and its variants.
    (
        "[atom 12:19:54] (EngineCore_DP3 pid=4242) zmq.error.ZMQError: Address already in use (addr='tcp://*:5557')",
        "zmq-bind-in-use",
        {"addr": "tcp://*:5557", "port": "5557", "dp_rank": "3"},
    ),
    ("zmq.error.ZMQError: Address already in use", "zmq-bind-in-use", {}),
    ("ZMQError: Address already in use (addr='tcp://[::1]:5557')", "zmq-bind-in-use", {"port": "5557"}),
    ("ZMQError: Address already in use (addr='ipc:///tmp/engine.ipc')", "zmq-bind-in-use", {}),
    (
        "Engine Core Mgr: Failed to bind KV event publisher to tcp://0.0.0.0:5557: Address already in use",
        "zmq-bind-in-use",
        {"addr": "tcp://0.0.0.0:5557", "port": "5557"},
    ),
    # srtctl's own lines.
    ("2026-08-25 10:00:00 [ERROR] Model did not get healthy in 3600 seconds", "health-check-timeout", {}),
    ("2026-08-25 10:00:00 [ERROR] Server did not become healthy", "health-check-timeout", {}),
    ("Health check failed after 360 attempts", "health-check-timeout", {"attempts": "360"}),
    (
        "2026-08-25 10:00:00 [ERROR] Critical process 'prefill_0_mi355-03' exited with code -9",
        "srtctl-critical-process-exit",
        {"name": "prefill_0_mi355-03", "exit_code": "-9"},
    ),
    ("2026-08-25 10:00:00 [ERROR] Critical process failure detected!", "srtctl-critical-process-exit", {}),
    ("2026-08-25 10:00:05 [ERROR] FAILURE DETAILS", "srtctl-critical-process-exit", {}),
    ("FAILURE DETAILS", "srtctl-critical-process-exit", {}),
    ("2026-08-25 10:00:05 [ERROR] Error during sweep", "srtctl-sweep-failed", {}),
    ("✗ Sweep failed (exit code: 1)", "srtctl-sweep-failed", {"exit_code": "1"}),
    ("2026-08-25 10:00:00 [ERROR] Benchmark failed with exit code 2", "benchmark-failed", {"exit_code": "2"}),
    ("RuntimeError: NATS failed to start", "head-infra-failed", {"name": "NATS"}),
    ("RuntimeError: etcd not ready after 30 attempts", "head-infra-failed", {"attempts": "30"}),
    ("RuntimeError: Model staging failed on: mi355-03, mi355-04", "model-staging-failed", {}),
    # Slurm's verdicts.
    (
        "slurmstepd: error: *** JOB 39443 ON mi355-03 CANCELLED AT 2026-08-25T12:00:00 DUE TO TIME LIMIT ***",
        "slurm-time-limit",
        {"job": "39443", "node": "mi355-03"},
    ),
    (
        "slurmstepd: error: *** JOB 39443 ON mi355-03 CANCELLED AT 2026-08-25T12:00:00 DUE TO PREEMPTION ***",
        "slurm-job-cancelled",
        {"job": "39443"},
    ),
    (
        "slurmstepd: error: *** JOB 39443 ON mi355-03 CANCELLED AT 2026-08-25T12:00:00 DUE TO NODE FAILURE ***",
        "slurm-job-cancelled",
        {"job": "39443", "node": "mi355-03"},
    ),
    (
        "slurmstepd: error: *** JOB 39443 ON mi355-03 CANCELLED AT 2026-08-25T12:00:00 ***",
        "slurm-job-cancelled",
        {"job": "39443"},
    ),
    (
        "srun: error: mi355-03: task 0: Exited with exit code 1",
        "srun-task-failed",
        {"node": "mi355-03", "exit_code": "1"},
    ),
    ("srun: error: mi355-03: task 3: Out Of Memory", "host-oom-kill", {"node": "mi355-03"}),
    ("[12345.6] Memory cgroup out of memory: Killed process 4242 (python3)", "host-oom-kill", {"pid": "4242"}),
    # a container runtime's reason for a kill at the memory limit, and systemd-oomd's
    ("      Reason:       OOMKilled", "host-oom-kill", {}),
    ("vllm-decode-0   0/1     OOMKilled   3 (45s ago)   5m", "host-oom-kill", {}),
    (
        "node7 systemd-oomd[812]: Killed /system.slice/slurmstepd.scope/job_4242 due to memory pressure for "
        "/system.slice being 92.31% > 80.00% for > 20s with reclaim activity",
        "host-oom-kill",
        {"name": "/system.slice/slurmstepd.scope/job_4242"},
    ),
    # ATOM's engine manager and Mooncake connector.
    ("[atom 12:19:55] Engine Core Mgr: Some processes failed to start, shutting down all", "engine-init-failed", {}),
    ("RuntimeError: Failed to start all EngineCore processes", "engine-init-failed", {}),
    (
        "[atom 12:19:55] Engine Core Mgr: Failed to initialize all EngineCores, cleaning up: boom",
        "engine-init-failed",
        {},
    ),
    (
        "[atom 12:20:01] batch_register_memory FAILED (ret=-1), trying individual registration as fallback...",
        "mooncake-register-memory-failed",
        {"ret": "-1"},
    ),
    (
        "[atom 12:20:01]   register_memory FAILED ptr=0x7f00aa000000 size=2147418112 ret=-1",
        "mooncake-register-memory-failed",
        {"addr": "0x7f00aa000000", "bytes": "2147418112"},
    ),
    (
        "[atom 12:30:00] [PRODUCER] block RDMA chunk error -1 for req 42 → 10.0.0.2:17000 (entries 0-4096/8192)",
        "mooncake-transfer-failed",
        {"request": "42"},
    ),
    ("[atom 12:30:00] [PRODUCER] slot transfer failed for req cmpl-9", "mooncake-transfer-failed", {}),
    (
        "[atom 12:30:00] AsyncIOProcManager(ModelRunner): [ModelRunner3/8] proc died unexpectedly "
        "(exitcode=-6), shutting down.",
        "engine-process-died",
        {"exit_code": "-6"},
    ),
    # Prefixes of other engines.
    (
        "[rank1]:[E1015 08:32:29.123 ProcessGroupNCCL.cpp:1515] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, NumelIn=1)",
        "nccl-watchdog-timeout",
        {"rank": "1", "seq": "3"},
    ),
    (
        "\x1b[31mERROR\x1b[0m 10-15 08:32:29 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
        "Tried to allocate 2.00 GiB. GPU 7 has a total capacity of 79.1 GiB",
        "gpu-oom",
        {"bytes": "2.00 GiB", "gpu": "7"},
    ),
    # Messages as the programs' own sources write them.
    # vLLM's input processor (vllm/v1/engine/processor.py): a prompt alone over max_model_len
    (
        "ValueError: The decoder prompt (length 12324) is longer than the maximum model length of 8192.",
        "request-over-context-length",
        {"requested": "12324", "max_len": "8192"},
    ),
    # vLLM's and SGLang's serving benchmarks (benchmark_serving.py, bench_serving.py) when no request succeeded
    (
        "UserWarning: All requests failed. This is likely due to a misconfiguration on the benchmark arguments.",
        "benchmark-failed",
        {},
    ),
    # vLLM's parallel config check (vllm/config.py, ModelConfig.verify_with_parallel_config)
    (
        "ValueError: Total number of attention heads (32) must be divisible by tensor parallel size (3).",
        "engine-bad-argument",
        {"value": "32"},
    ),
    # Docker's and Kubernetes' image pulls
    (
        "docker: Error response from daemon: manifest for lmsysorg/sglang:v0.9.9 not found: manifest unknown:"
        " manifest unknown.",
        "pyxis-image-import-failed",
        {},
    ),
    ("  Warning  Failed     12s   kubelet  Error: ErrImagePull", "pyxis-image-import-failed", {}),
    # a package of another release than the code expects
    (
        "AttributeError: module 'triton.language' has no attribute 'constexpr_function'",
        "python-import-error",
        {"module": "triton.language", "name": "constexpr_function"},
    ),
    # pip's summary of a package whose build failed
    ("  error: subprocess-exited-with-error", "job-env-setup-failed", {}),
]


@pytest.mark.parametrize(("line", "expected", "captures"), [pytest.param(*case, id=case[1]) for case in FAMILY_CASES])
def test_message_families(matcher: Matcher, line: str, expected: str, captures: dict[str, str]) -> None:
    finding = matcher.match_line(line)
    assert finding is not None, line
    assert finding.signature_id == expected
    assert captures.items() <= finding.captures.items()


@pytest.mark.parametrize(
    ("line", "wrapper"),
    [
        ("slurmstepd: error: *** STEP 4.0 ON n1 CANCELLED AT 2026-08-25T12:00:00 DUE TO PREEMPTION ***", False),
        ("slurmstepd: error: *** JOB 4 CANCELLED AT 2026-08-25T12:00:00 DUE TO NODE FAILURE ***", False),
        ("salloc: error: Node failure on worker-1", False),
        ("slurmstepd: error: *** STEP 4.0 ON n1 CANCELLED AT 2026-08-25T12:00:00 DUE TO TASK FAILURE ***", True),
        ("slurmstepd: error: *** JOB 4 ON n1 CANCELLED AT 2026-08-25T12:00:00 ***", True),
    ],
)
def test_slurm_reasons_are_causes_and_a_plain_cancel_only_reports(matcher: Matcher, line: str, wrapper: bool) -> None:
    # One id for every cancel, as the reference files them; Slurm's own reasons (preemption, a lost
    # node) are the cause, a cancel for no reason or for a failed task only reports one elsewhere.
    finding = matcher.match_line(line)
    assert finding is not None and finding.signature_id == "slurm-job-cancelled"
    assert finding.wrapper is wrapper


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "(VllmWorkerProcess pid=7) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] Exception in worker "
            "VllmWorkerProcess while processing method load_model.",
            "engine-init-failed",
        ),
        (
            "(RayWorkerVllm pid=7) ERROR 04-16 23:50:04 ray_utils.py:50] Error executing method init_device. "
            "This might cause deadlock in distributed execution.",
            "engine-init-failed",
        ),
        (
            "(VllmWorkerProcess pid=7) ERROR 03-02 19:49:43 [multiproc_worker_utils.py:242] Exception in worker "
            "VllmWorkerProcess while processing method execute_model.",
            "engine-process-died",
        ),
    ],
)
def test_a_vllm_worker_that_raised_is_named_by_the_phase_of_its_method(
    matcher: Matcher, line: str, expected: str
) -> None:
    # The reference files a child that died while starting under engine-init-failed, a death while
    # serving under engine-process-died; the method the worker ran says which.
    finding = matcher.match_line(line)
    assert finding is not None and finding.signature_id == expected
    assert finding.wrapper


@pytest.mark.parametrize(
    ("line", "captures"),
    [
        pytest.param(
            "zmq.error.ZMQError: Address already in use (addr='tcp://localhost:5557')",
            {"addr": "tcp://localhost:5557", "port": "5557"},
            id="zmq-addr-port",
        ),
        pytest.param(
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 3 has a total",
            {"bytes": "22.00 MiB", "gpu": "3"},
            id="gpu-and-bytes",
        ),
        pytest.param(
            "ValueError: TP rank 5 could finish the model loading, but there are other ranks that didn't "
            "finish loading.",
            {"rank": "5"},
            id="rank",
        ),
        pytest.param(
            "[2025-07-25 07:53:08 DP1 TP2] Scheduler hit an exception: Traceback (most recent call last):",
            {"tp_rank": "2", "dp_rank": "1", "process": "Scheduler"},
            id="rank-from-prefix",
        ),
        pytest.param(
            "srun: error: nid001277: tasks 1-3: Exited with exit code 137",
            {"node": "nid001277", "tasks": "1-3", "exit_code": "137"},
            id="node-and-exit-code",
        ),
        pytest.param(
            "slurmstepd: error: *** STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME LIMIT ***",
            {"job": "32233190", "step": "0", "node": "nid01934"},
            id="job-and-node",
        ),
        pytest.param(
            "NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-x (size 192814336)",
            {"name": "/dev/shm/nccl-x", "bytes": "192814336"},
            id="bytes",
        ),
        pytest.param(
            "Critical process 'decode_0_mi355-05' exited with code 1",
            {"name": "decode_0_mi355-05", "exit_code": "1"},
            id="exit-code",
        ),
    ],
)
def test_captures(matcher: Matcher, line: str, captures: dict[str, str]) -> None:
    finding = matcher.match_line(line)
    assert finding is not None
    assert captures.items() <= finding.captures.items()
    assert None not in finding.captures.values()


def test_real_pyzmq_bind_error_is_recognised(matcher: Matcher) -> None:
    pytest.importorskip("zmq")
    # Bind one endpoint twice with the real library and read the traceback it prints.
    script = textwrap.dedent(
        """
        import zmq
        ctx = zmq.Context()
        first = ctx.socket(zmq.PUB)
        first.bind("tcp://127.0.0.1:*")
        endpoint = first.getsockopt(zmq.LAST_ENDPOINT).decode()
        print(endpoint, flush=True)
        second = ctx.socket(zmq.PUB)
        second.bind(endpoint)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    endpoint = proc.stdout.strip()
    last_line = proc.stderr.strip().splitlines()[-1]
    finding = matcher.match_line(last_line)
    assert finding is not None, last_line
    assert finding.signature_id == "zmq-bind-in-use"
    assert finding.captures["addr"] == endpoint
    assert finding.captures["port"] == endpoint.rsplit(":", 1)[1]
    # The traceback's other lines are not findings.
    for line in proc.stderr.strip().splitlines()[:-1]:
        assert matcher.match_line(line) is None, line


# --------------------------------------------------------------------------- ordering


@pytest.mark.parametrize(
    ("line", "ids"),
    [
        pytest.param(
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB.",
            ["cuda-graph-capture-failed", "gpu-oom"],
            id="oom-during-capture",
        ),
        pytest.param(
            "srun: error: sdumont6156: task 0: Out Of Memory",
            ["host-oom-kill", "srun-task-failed"],
            id="srun-oom",
        ),
        pytest.param(
            "slurmstepd: error: *** JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 DUE TO TIME LIMIT ***",
            ["slurm-time-limit", "slurm-job-cancelled"],
            id="time-limit",
        ),
        pytest.param(
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            ["gpu-illegal-memory-access", "gpu-runtime-error"],
            id="cuda-error",
        ),
    ],
)
def test_match_all_puts_the_narrower_signature_first(matcher: Matcher, line: str, ids: list[str]) -> None:
    found = [f.signature_id for f in matcher.match_all(line)]
    assert found[: len(ids)] == ids
    best = matcher.match_line(line)
    assert best is not None and best.signature_id == ids[0]


def test_wrappers_are_flagged(matcher: Matcher) -> None:
    wrapper = matcher.match_line(
        "(EngineCore_DP0 pid=59619) ERROR 10-15 08:32:29 [core.py:708] EngineCore failed to start."
    )
    cause = matcher.match_line("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557')")
    remote = matcher.match_line("ncclRemoteError: A call failed possibly due to a remote process exiting prematurely.")
    local = matcher.match_line(
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)"
    )
    assert wrapper is not None and wrapper.wrapper
    assert cause is not None and not cause.wrapper
    assert remote is not None and remote.signature_id == "nccl-error" and remote.wrapper
    assert local is not None and local.signature_id == "nccl-error" and not local.wrapper


def test_finding_is_frozen_and_serialisable(matcher: Matcher) -> None:
    finding = matcher.match_line("srun: error: mi355-03: task 0: Exited with exit code 1")
    assert finding is not None
    with pytest.raises(AttributeError):
        finding.severity = "warning"  # type: ignore[misc]
    data = json.loads(json.dumps(finding.as_dict()))
    assert data["signature_id"] == "srun-task-failed"
    assert data["captures"]["exit_code"] == "1"
    assert hash(finding) == hash(finding)


def test_ordinary_lines_match_nothing(matcher: Matcher) -> None:
    lines = [
        "[2026-08-25 08:53:08 DP1 TP0] Decode batch. #running-req: 12, #token: 12345, token usage: 0.05, "
        "cuda graph: True, gen throughput (token/s): 1234.56, #queue-req: 0",
        "(APIServer pid=1) INFO 08-25 10:14:02 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "GPU KV cache usage: 1.0%",
        "[atom 12:19:54] Engine Core Mgr: All 8 EngineCores initialized and ready",
        "[2026-08-25 08:53:08 TP3] Capture cuda graph bs 64 avail mem=120.52 GB",
        "2026-08-25 10:00:00 [INFO] Model is ready. Have 2 prefills and 1 decodes.",
        '            "OOMKilled": false,',
        "",
    ]
    for line in lines:
        assert matcher.match_all(line) == [], line


def test_keywords_are_lowercase_literals(matcher: Matcher) -> None:
    assert matcher.keywords
    assert all(k == k.lower() and k for k in matcher.keywords)


# --------------------------------------------------------------------------- hostile input


def test_ten_megabyte_line_is_matched_at_both_ends(matcher: Matcher) -> None:
    failure = "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557')"
    filler = "x" * (10 * 1024 * 1024)
    at_end = filler + failure
    finding = matcher.match_line(at_end)
    assert finding is not None and finding.signature_id == "zmq-bind-in-use"
    assert at_end[finding.span[0] : finding.span[1]].startswith("ZMQError")
    assert [f.signature_id for f in matcher.match_all(at_end)] == ["zmq-bind-in-use"]
    at_start = failure + " " + filler
    finding = matcher.match_line(at_start)
    assert finding is not None and finding.signature_id == "zmq-bind-in-use"
    assert finding.span[1] <= MAX_LINE_CHARS
    # Only the two ends are scanned: the cost stays bounded whatever the length.
    assert matcher.match_line(filler + failure + filler) is None


def test_a_logged_prompt_says_no_failure_whatever_its_text(matcher: Matcher) -> None:
    # vLLM logs each request's prompt; a user's text is no failure, even past the line's head.
    head = "INFO 07-21 19:46:50 [logger.py:43] Received request chatcmpl-6ecd: prompt: '<|im_start|>user\\n"
    words = "Is the argument invalid? RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB. "
    assert matcher.match_all(head + words + "'") == []
    assert matcher.match_all(head + "x" * (2 * MAX_LINE_CHARS) + words + "'") == []
    # the same words as a line of their own are the failure they say
    assert [f.signature_id for f in matcher.match_all(words)][:1] == ["gpu-oom"]


def test_cap_is_configurable() -> None:
    small = Matcher(load_catalog(), max_line_chars=100)
    failure = " srun: error: mi355-03: task 0: Exited with exit code 1 "
    line = "y" * 150 + failure + "y" * 150
    assert small.match_line(line) is None
    assert small.max_line_chars == 100
    assert Matcher(load_catalog()).match_line(line) is not None
    found = small.match_line("y" * 150 + failure)
    assert found is not None and found.span[0] >= 150


def test_hostile_content_does_not_crash(matcher: Matcher) -> None:
    lines = [
        "\x00" * 5000,
        "zmq\x00error\x00ZMQError: Address already in use\x00",
        "\x1b]0;title\x07\x1b[2J\x1b[?25l" * 300,
        "\x1b[" * 2000,
        "\udcff\udcfe invalid surrogates Address already in use",
        "\u202e\u2066 bidi controls CUDA out of memory \u2069",
        "İ" * 3000 + " NCCL WARN Connect to 10.0.0.2<45763> failed : Connection refused",
        "\r" * 4000 + "srun: error: n1: task 0: Exited with exit code 1",
    ]
    for line in lines:
        for finding in matcher.match_all(line):
            assert 0 <= finding.span[0] <= finding.span[1] <= len(line)


def test_ansi_coloured_failure_is_matched_with_span_in_the_original_line(matcher: Matcher) -> None:
    line = "\x1b[1;31mzmq.error.ZMQError\x1b[0m: Address already in use (addr='tcp://10.1.2.3:5557')\x1b[0m"
    finding = matcher.match_line(line)
    assert finding is not None and finding.signature_id == "zmq-bind-in-use"
    assert finding.captures["addr"] == "tcp://10.1.2.3:5557"
    start, end = finding.span
    assert line[start:end].startswith("ZMQError")
    assert re.sub(r"\x1b\[[0-9;]*m", "", line[start:end]).endswith("5557')")


def test_regexes_do_not_backtrack_catastrophically(matcher: Matcher) -> None:
    # Lines made of a signature's own fragments repeated up to the cap: the worst input for a
    # regex with overlapping gaps. They must simply return.
    fragments: dict[str, list[str]] = {}
    for entry in EXAMPLES["signatures"]:
        fragments.setdefault(entry["id"], []).extend(entry["examples"])
    for variant in REAL["variants"]:
        fragments.setdefault(variant["id"], []).append(variant["line"])
    for sig in matcher.signatures:
        pieces = [ex[: max(1, len(ex) - cut)] for ex in fragments.get(sig.id, []) for cut in (1, 8)]
        pieces += [keyword + filler for keyword in sig.keywords for filler in ("a" * 40, "1" * 40, " " * 40)]
        for piece in pieces:
            line = (piece * (MAX_LINE_CHARS // max(1, len(piece)) + 1))[:MAX_LINE_CHARS]
            matcher.match_all(line)


# --------------------------------------------------------------------------- broken catalogs

VALID_ENTRY = {
    "id": "custom-thing",
    "title": "Custom thing",
    "category": "runtime",
    "severity": "error",
    "regex": "custom thing (?P<code>\\d+)",
    "keywords": ["custom thing"],
    "hint": "Do the custom thing.",
}


def write_catalog(path: Path, entries: list[object], **top: object) -> Path:
    path.write_text(yaml.safe_dump({"version": 1, **top, "signatures": entries}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        pytest.param({"regex": "custom (thing"}, ["'custom-thing'", "'regex'", "invalid regex"], id="bad-regex"),
        pytest.param({"regex": ["ok", "bad[("]}, ["'custom-thing'", "'regex' #2"], id="bad-regex-in-list"),
        pytest.param({"severity": None}, ["'custom-thing'", "'severity' is missing"], id="missing-severity"),
        pytest.param({"hint": None}, ["'custom-thing'", "'hint' is missing"], id="missing-hint"),
        pytest.param({"severity": "critical"}, ["'custom-thing'", "'severity'", "'critical'"], id="unknown-severity"),
        pytest.param({"category": "network"}, ["'custom-thing'", "'category'", "'network'"], id="unknown-category"),
        pytest.param({"severty": "fatal"}, ["'custom-thing'", "unknown field", "severty"], id="typo-field"),
        pytest.param({"priority": "high"}, ["'custom-thing'", "'priority'"], id="bad-priority"),
        pytest.param({"wrapper": "yes"}, ["'custom-thing'", "'wrapper'"], id="bad-wrapper"),
        pytest.param({"keywords": [""]}, ["'custom-thing'", "'keywords'"], id="empty-keyword"),
        pytest.param({"exclude": "(("}, ["'custom-thing'", "'exclude'"], id="bad-exclude"),
        pytest.param({"id": "Not An Id"}, ["'Not An Id'", "'id'"], id="bad-id"),
        # a stop reports no failure: a fatal one would both excuse and fail the worker
        pytest.param({"stop": True}, ["'custom-thing'", "'stop'", "severity 'info'"], id="fatal-stop"),
        pytest.param({"stop": True, "severity": "info"}, ["'stop'", "'wrapper: true'"], id="stop-not-wrapper"),
    ],
)
def test_broken_entry_names_file_entry_and_field(
    tmp_path: Path, change: dict[str, object], fragments: list[str]
) -> None:
    entry = {**VALID_ENTRY, **change}
    entry = {k: v for k, v in entry.items() if v is not None}
    path = write_catalog(tmp_path / "catalog.yaml", [entry])
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    message = str(err.value)
    assert str(path) in message
    assert "signature #1" in message
    for fragment in fragments:
        assert fragment in message


def test_duplicate_id_is_rejected(tmp_path: Path) -> None:
    path = write_catalog(tmp_path / "catalog.yaml", [VALID_ENTRY, VALID_ENTRY])
    with pytest.raises(CatalogError, match=r"signature #2 \('custom-thing'\): field 'id': duplicate id"):
        load_catalog(path)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("signatures: [", "not valid YAML", id="invalid-yaml"),
        pytest.param("- just\n- a list\n", "must be a mapping", id="not-a-mapping"),
        pytest.param("signatures: {}\n", "'signatures' must be a list", id="signatures-not-list"),
        pytest.param("version: 2\nsignatures: []\n", "'version'", id="unknown-version"),
        pytest.param("signatures: []\nextra: 1\n", "unknown top-level key", id="unknown-top-level"),
        pytest.param("signatures: [3]\n", "signature #1: must be a mapping", id="entry-not-mapping"),
        pytest.param("context: ['(']\nsignatures: []\n", "context pattern #1", id="bad-context"),
    ],
)
def test_broken_file_gives_a_clear_error(tmp_path: Path, text: str, fragment: str) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CatalogError) as err:
        load_catalog(path)
    assert str(path) in str(err.value)
    assert fragment in str(err.value)


def test_missing_file_gives_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalog(tmp_path / "nope.yaml")


# --------------------------------------------------------------------------- extension


def test_user_catalog_extends_and_overrides_the_bundled_one(tmp_path: Path, restore_default: None) -> None:
    override = {**VALID_ENTRY, "id": "gpu-oom", "regex": "never matches this", "keywords": ["never matches"]}
    user = write_catalog(tmp_path / "user.yaml", [VALID_ENTRY, override])
    matcher = reload(bundled_catalog_path(), user)
    assert default_matcher() is matcher

    finding = matcher.match_line("2026 ERROR custom thing 42 happened")
    assert finding is not None
    assert (finding.signature_id, finding.captures["code"]) == ("custom-thing", "42")
    assert matcher.signature("gpu-oom").title == "Custom thing"
    oom = matcher.match_line("RuntimeError: CUDA error: out of memory")
    assert oom is not None and oom.signature_id == "gpu-runtime-error"
    # Bundled signatures are still there.
    assert matcher.signature("zmq-bind-in-use").severity == "fatal"


def test_reload_with_a_broken_catalog_keeps_the_previous_default(tmp_path: Path, restore_default: None) -> None:
    before = reload()
    broken = write_catalog(tmp_path / "broken.yaml", [{**VALID_ENTRY, "regex": "(("}])
    with pytest.raises(CatalogError):
        reload(broken)
    assert default_matcher() is before


def test_signature_without_keywords_is_still_tried(tmp_path: Path) -> None:
    entry = {k: v for k, v in VALID_ENTRY.items() if k != "keywords"}
    matcher = Matcher(load_catalog(write_catalog(tmp_path / "c.yaml", [entry])))
    finding = matcher.match_line("a custom thing 7")
    assert finding is not None and finding.captures == {"code": "7"}


def test_core_module_does_not_import_textual() -> None:
    code = "import sys, console.signatures; sys.exit('textual' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_a_bundled_regex_is_compiled_at_its_first_search_and_an_operators_when_read(tmp_path: Path) -> None:
    sig = signatures.bundled_catalog().signatures[0]
    lazy = sig.patterns[0]
    assert isinstance(lazy, signatures.LazyRegex)
    assert lazy.search("no such failure here") is None
    # the regex's own from now on (compared by value: with more patterns than re's cache holds,
    # an earlier test's compile may have been dropped from it)
    compiled = lazy.search.__self__
    assert isinstance(compiled, re.Pattern) and compiled == re.compile(lazy.pattern, lazy.flags)
    bad = tmp_path / "mine.yaml"
    bad.write_text(
        "signatures:\n- id: mine\n  title: t\n  category: runtime\n  severity: error\n  hint: h\n"
        "  keywords: [boom]\n  regex: 'boom ('\n"
    )
    with pytest.raises(signatures.CatalogError, match="invalid regex"):
        signatures.load_catalog(bad)


@pytest.mark.parametrize(
    ("line", "found"),
    [
        # (constructed in the forms engines use when they take another path)
        ("WARNING 01-01 [rocm.py:120] flash_attn is not supported on gfx90a, falling back to triton backend", None),
        ("Custom allreduce is not supported on gfx1100; disabling it.", None),
        ("ck_moe is not supported on gfx942. Using the default MoE implementation.", None),
        ("FlashInfer is only supported on SM80+; using FLASH_ATTN backend instead", None),
        ("RuntimeError: MXFP4 quantization is not supported on gfx942", "gpu-binary-incompatible"),
        ("ValueError: The fused MoE kernel is only supported on SM90 and SM100", "gpu-binary-incompatible"),
    ],
)
def test_a_method_for_other_gpus_is_a_failure_unless_the_engine_falls_back(line: str, found: str | None) -> None:
    finding = default_matcher().match_line(line)
    assert (finding.signature_id if finding is not None else None) == found
