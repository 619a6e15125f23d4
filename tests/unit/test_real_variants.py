"""The catalog against real material: lines and whole logs from public issues and the
engines' sources (assets/real-lines.yaml, tests/data/real-logs/), and the line-level
normalisation real logs need (tracebacks, long lines, redraws, colours, JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from console.agent import keyword_gates
from console.cli.scan_cmd import scan_paths
from console.signatures import Matcher, load_catalog, strip_prefixes
from console.triage import read_lines

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
VARIANTS = yaml.safe_load((ROOT / "assets" / "real-lines.yaml").read_text(encoding="utf-8"))
LOGS = yaml.safe_load((DATA / "real-logs" / "manifest.yaml").read_text(encoding="utf-8"))["logs"]
REFERENCE = yaml.safe_load((DATA / "failure-examples.yaml").read_text(encoding="utf-8"))

VARIANT_CASES = [pytest.param(v["id"], v["line"], id=f"{v['id']}-{i}") for i, v in enumerate(VARIANTS["variants"])]
BENIGN_CASES = [pytest.param(b["line"], id=f"benign-{i}") for i, b in enumerate(VARIANTS["benign"])]


@pytest.fixture(scope="module")
def matcher() -> Matcher:
    return Matcher(load_catalog())


# --------------------------------------------------------------------------- the data


def test_every_entry_names_a_known_signature_and_its_source(matcher: Matcher) -> None:
    ids = {sig.id for sig in matcher.signatures}
    for entry in VARIANTS["variants"]:
        assert entry["id"] in ids, entry
        assert entry["source"].strip() and entry["line"].strip(), entry
    for entry in VARIANTS["benign"]:
        assert entry["source"].strip() and entry["line"].strip(), entry
    lines = [v["line"] for v in VARIANTS["variants"]]
    assert len(lines) == len(set(lines)), "a line is listed twice"


def test_most_reference_signatures_have_real_variants_beyond_the_examples() -> None:
    covered = {v["id"] for v in VARIANTS["variants"]}
    reference = {entry["id"] for entry in REFERENCE["signatures"]}
    assert len(reference & covered) >= 40, sorted(reference - covered)


# --------------------------------------------------------------------------- single lines


@pytest.mark.parametrize(("expected", "line"), VARIANT_CASES)
def test_real_variant_is_found_under_its_signature(matcher: Matcher, expected: str, line: str) -> None:
    finding = matcher.match_line(line)
    assert finding is not None, f"nothing matches {line!r}"
    assert finding.signature_id == expected, line
    start, end = finding.span
    assert 0 <= start < end <= len(line)
    # A line alone in a stream is matched the same way.
    streamed = matcher.stream().match(line)
    assert streamed is not None and streamed.signature_id == expected


def test_every_real_variant_is_known_without_the_resemblance_that_learns_from_it() -> None:
    # The resemblance is trained on these very lines: one it alone names would name itself.
    regexes = Matcher(load_catalog(), resemblance=False)
    missed = [
        (v["id"], v["line"])
        for v in VARIANTS["variants"]
        if getattr(regexes.match_line(v["line"]), "signature_id", None) != v["id"]
    ]
    assert missed == []


@pytest.mark.parametrize("line", BENIGN_CASES)
def test_real_benign_line_matches_nothing(matcher: Matcher, line: str) -> None:
    # but a stop asked of a process (`SIGTERM received`), a note that reports no failure
    assert [f.signature_id for f in matcher.match_all(line) if not f.stop] == []


def test_nothing_nccl_says_at_info_is_a_finding(matcher: Matcher) -> None:
    # NCCL writes its failures at WARN; the same words at INFO (a plugin it did not find, a
    # retried connect, its trace of a failed call) are a healthy run's chatter.
    nccl = [v["line"] for v in VARIANTS["variants"] if "NCCL WARN" in v["line"]]
    assert len(nccl) >= 40
    at_info = [line.replace("NCCL WARN", "NCCL INFO") for line in nccl]
    assert [(line, matcher.match_all(line)) for line in at_info if matcher.match_all(line)] == []


def test_the_agent_prefilter_lets_every_real_variant_through(matcher: Matcher) -> None:
    # The remote follower sends only lines its keyword gates find (on raw, lowercased bytes).
    gates = keyword_gates(list(matcher.keywords))
    missed = [v["line"] for v in VARIANTS["variants"] if not any(g.search(v["line"].encode().lower()) for g in gates)]
    assert missed == []


# --------------------------------------------------------------------------- whole logs

FAILURE_LOGS = [pytest.param(e, id=e["file"]) for e in LOGS if e["root"] is not None]
OTHER_LOGS = [pytest.param(e, id=e["file"]) for e in LOGS if e["root"] is None]


@pytest.mark.parametrize("entry", FAILURE_LOGS)
def test_whole_failure_log_names_the_root_cause_on_its_line(entry: dict[str, object]) -> None:
    triage = scan_paths([DATA / "real-logs" / str(entry["file"])])
    diagnosis = triage.diagnose(state="FAILED")
    root = diagnosis.root_cause
    assert root is not None, [(o.id, o.line_no) for o in triage.findings]
    assert (root.id, root.first.line_no) == (entry["root"], entry["line"])
    assert diagnosis.verdict == "failed"


@pytest.mark.parametrize("entry", OTHER_LOGS)
def test_whole_log_without_a_cause_is_not_called_failed(entry: dict[str, object]) -> None:
    triage = scan_paths([DATA / "real-logs" / str(entry["file"])])
    diagnosis = triage.diagnose(state="COMPLETED")
    serious = [(o.id, o.line_no) for o in triage.findings if o.severity in ("fatal", "error")]
    if entry.get("first"):
        assert serious[:1] == [(entry["first"], entry["line"])]
        assert diagnosis.verdict != "failed"
    elif entry.get("stopped"):
        # a worker told to stop (vLLM's `received signal=SIGTERM`) reports its engine dead as it goes
        assert serious and all(line > int(entry["stopped"]) for _, line in serious)
        assert [g.first.line_no for g in diagnosis.stops] == [entry["stopped"]]
        assert diagnosis.verdict == "healthy" and diagnosis.teardown
    elif entry.get("teardown"):
        # srtctl kills its workers' steps once the benchmark succeeded: srun's `Killed` and the
        # steps' cancels come after its `[INFO] Cleanup` and are its teardown, shown apart
        cleanup = triage.snapshot("COMPLETED").cleanup
        assert cleanup is not None and serious and all(line > cleanup[1] for _, line in serious)
        assert diagnosis.verdict == "healthy" and diagnosis.teardown
    else:
        assert serious == []
        assert diagnosis.verdict == "healthy"


@pytest.mark.parametrize(
    "line",
    [
        "ERROR 07-28 15:07:22 [core.py:632] CUDA kernel errors might be asynchronously reported at some other API"
        " call, so the stacktrace below might be incorrect.",
        "ERROR 07-28 15:07:22 [core.py:632] For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "ERROR 07-28 15:07:22 [core.py:632] Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "[rank0]: CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace"
        " below might be incorrect.",
        "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might"
        " be incorrect.",
        "For debugging consider passing AMD_SERIALIZE_KERNEL=3",
        "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.",
    ],
)
def test_the_advice_pytorch_prints_under_a_cuda_error_is_no_finding(matcher: Matcher, line: str) -> None:
    # Printed under every CUDA/HIP error: its words (CUDA, `device-side assertions`) named a
    # runtime error and a device-side assert beside an OOM or a kernel built for another GPU.
    assert matcher.match_all(line) == []


def test_a_cuda_errors_advice_adds_no_finding_to_its_log() -> None:
    triage = scan_paths([DATA / "real-logs" / "vllm-14452-sm120.log"])
    assert [(o.id, o.line_no) for o in triage.findings if o.severity == "fatal"] == [("gpu-binary-incompatible", 3)]


def test_every_healthy_engine_is_represented() -> None:
    healthy = " ".join(str(e["file"]) for e in LOGS if e["root"] is None and not e.get("first"))
    for engine in ("sglang", "vllm", "trtllm", "dynamo"):
        assert engine in healthy


# --------------------------------------------------------------------------- tracebacks


def feed(matcher: Matcher, text: str) -> list[tuple[int, str, dict[str, str]]]:
    stream = matcher.stream()
    found = []
    for no, line in enumerate(text.splitlines(), start=1):
        finding = stream.match(line)
        if finding is not None:
            found.append((no, finding.signature_id, finding.captures))
    return found


def test_traceback_frames_and_source_lines_are_context_not_findings(matcher: Matcher) -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 699, in check\n'
        '    raise ValueError("No available memory for the cache blocks. "\n'
        '                     "Try increasing `gpu_memory_utilization` when "\n'
        "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
        "initializing the engine.\n"
    )
    # Alone, the source line would be taken for the error.
    assert matcher.match_line(log.splitlines()[2]) is not None
    assert feed(matcher, log) == [(5, "kv-cache-memory-insufficient", {"exception": "ValueError"})]


def test_traceback_pasted_without_indentation_or_header_keeps_its_source_lines_quiet(matcher: Matcher) -> None:
    frames = [
        'File "/sgl/srt/distributed/device_communicators/pynccl_wrapper.py", line 375, in ncclCommInitRank',
        "self.NCCL_CHECK(",
        'File "/sgl/srt/distributed/device_communicators/pynccl_wrapper.py", line 350, in NCCL_CHECK',
        'raise RuntimeError(f"NCCL error: {error_str}")',
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
    ]
    # Alone, the source line would be taken for an NCCL error (an error-level line naming NCCL).
    assert matcher.match_line(frames[3]) is not None
    # An excerpt that starts below the header, as pasted in an issue (every line at column 0) ...
    assert [(no, sig) for no, sig, _ in feed(matcher, "\n".join(frames))] == [(5, "nccl-error")]
    # ... and the same with its header.
    assert [(no, sig) for no, sig, _ in feed(matcher, "\n".join(["Traceback (most recent call last):", *frames]))] == [
        (6, "nccl-error")
    ]
    # A frame with no source line (frozen modules) is followed by the exception itself.
    frozen = [
        "Traceback (most recent call last):",
        'File "<frozen importlib._bootstrap>", line 1176, in _find_and_load',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    assert [(no, sig) for no, sig, _ in feed(matcher, "\n".join(frozen))] == [(3, "gpu-oom")]
    # Without the header, what follows the frames is a known failure or nothing: a log line
    # after a stack that `traceback.print_stack()` wrote is not taken for an uncaught exception.
    printed = ['  File "/app/server.py", line 12, in serve', "    run()", "Started: server process [12]"]
    assert feed(matcher, "\n".join(printed)) == []
    # ... but an exception class's line ends it as it would end a traceback: an excerpt that starts
    # inside one (sgl-project/sglang#4779), or one that another process's line cut in two
    # (`Process SpawnProcess-1:` of Python's multiprocessing, vllm-project/vllm#12899).
    excerpt = [
        '  File "/usr/lib/python3.10/site-packages/psutil/_common.py", line 802, in cat',
        "    with _open(fname) as f:",
    ]
    recursion = "RecursionError: maximum recursion depth exceeded while calling a Python object"
    assert [(no, sig) for no, sig, _ in feed(matcher, "\n".join([*excerpt, recursion]))] == [
        (3, "unrecognised-exception")
    ]
    cut = [
        "Traceback (most recent call last):",
        '  File "/vllm/worker/model_runner.py", line 1112, in load_model',
        "    self.model = get_model(vllm_config=self.vllm_config)",
        "Process SpawnProcess-1:",
        '  File "/vllm/distributed/parallel_state.py", line 749, in get_tp_group',
        '    assert _TP is not None, ("tensor model parallel group is not initialized")',
        "AssertionError: tensor model parallel group is not initialized",
    ]
    assert [(no, sig) for no, sig, _ in feed(matcher, "\n".join(cut))] == [(7, "unrecognised-exception")]


def test_prefixed_traceback_is_followed_per_process(matcher: Matcher) -> None:
    p = "(EngineCore_DP0 pid=59619) ERROR 10-15 08:32:29 [core.py:708] "
    log = "\n".join(
        [
            p + "EngineCore failed to start.",
            p + "Traceback (most recent call last):",
            p + '  File "/v/vllm/v1/engine/core.py", line 699, in run_engine_core',
            "(Worker_TP1 pid=60000) INFO 10-15 08:32:29 [gpu_worker.py:12] another process writes meanwhile",
            p + '    raise RuntimeError("CUDA error: out of memory")',
            p + "RuntimeError: CUDA error: an illegal memory access was encountered",
        ]
    )
    found = feed(matcher, log)
    assert [(no, sig) for no, sig, _ in found] == [(1, "engine-init-failed"), (6, "gpu-illegal-memory-access")]
    assert found[1][2]["process"] == "EngineCore_DP0"


def test_a_traceback_whose_process_falls_silent_is_left(matcher: Matcher) -> None:
    # A rank killed while it printed its traceback: the lines of the others are lines alone again
    # (while one is open every line counts, and a scan reads every line).
    p = "(Worker_TP3 pid=60003) ERROR 10-15 08:32:29 [multiproc_executor.py:12] "
    other = "(Worker_TP1 pid=60001) INFO 10-15 08:32:30 [gpu_worker.py:12] step {}"
    stream = matcher.stream()
    stream.match(p + "Traceback (most recent call last):")
    stream.match(p + '  File "/v/vllm/v1/worker/gpu_worker.py", line 12, in execute_model')
    for n in range(300):
        stream.match(other.format(n))
    assert stream.inside  # a traceback of one rank between others' lines is still open ...
    last = stream.match(p + "RuntimeError: CUDA error: an illegal memory access was encountered")
    assert last is not None and last.captures.get("exception") == "RuntimeError"
    stream.match(p + "Traceback (most recent call last):")
    for n in range(2100):
        stream.match(other.format(n))
    assert not stream.inside  # ... but not after thousands of lines without one of its own


def test_cause_chain_links_each_exception_to_its_cause(matcher: Matcher) -> None:
    log = (DATA / "real-logs" / "deathstarbench-3-connection-refused.log").read_text(encoding="utf-8")
    log += "aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host 127.0.0.1:8080 ssl:default\n"
    found = feed(matcher, log)
    assert [(sig, c.get("exception")) for _, sig, c in found] == [
        ("upstream-connection-refused", "ConnectionRefusedError"),
        ("upstream-connection-refused", "aiohttp.client_exceptions.ClientConnectorError"),
    ]
    other = (
        'Traceback (most recent call last):\n  File "x.py", line 1\n'
        "ValueError: TP rank 2 could finish the model loading\n"
    )
    chained = (
        other
        + "\nThe above exception was the direct cause of the following exception:\n\n"
        + other.replace(
            "ValueError: TP rank 2 could finish the model loading", "RuntimeError: Engine core initialization failed."
        )
    )
    found = feed(matcher, chained)
    assert [sig for _, sig, _ in found] == ["model-load-straggler", "engine-init-failed"]
    assert found[1][2]["caused_by"] == "model-load-straggler"


def test_unknown_exception_in_srtctl_frames_is_an_orchestrator_crash(matcher: Matcher) -> None:
    log = (DATA / "real-logs" / "srtctl-do-sweep-uncaught-sweep_21115700.log").read_text(encoding="utf-8")
    found = feed(matcher, log)
    assert [(no, sig) for no, sig, _ in found] == [
        (3, "srtctl-sweep-failed"),
        (11, "srtctl-orchestrator-crashed"),
        (14, "srtctl-sweep-failed"),
    ]
    assert found[1][2]["exception"] == "KeyError"
    # The same exception from another program's frames is not srtctl's: an unrecognised one.
    elsewhere = log.replace("srtctl/cli/do_sweep.py", "app/main.py").replace("srtctl/core/runtime.py", "app/rt.py")
    assert [sig for _, sig, _ in feed(matcher, elsewhere)] == [
        "srtctl-sweep-failed",
        "unrecognised-exception",
        "srtctl-sweep-failed",
    ]


def test_unknown_exception_raised_checking_sglang_arguments_is_a_refused_setting(matcher: Matcher) -> None:
    # SGLang's ServerArgs.__post_init__ checks the arguments before anything starts
    log = (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/launch_server.py", line 14, in <module>\n'
        "    server_args = prepare_server_args(sys.argv[1:])\n"
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/server_args.py", line 2837, in _handle_moe\n'
        "    assert self.ep_size == self.tp_size\n"
        "AssertionError: Expert parallelism needs the experts split evenly across ranks\n"
    )
    found = feed(matcher, log)
    assert [(no, sig) for no, sig, _ in found] == [(6, "engine-bad-argument")]
    assert found[0][2]["exception"] == "AssertionError"
    # The same exception raised elsewhere is no argument's: an unrecognised one.
    elsewhere = log.replace("sglang/srt/server_args.py", "sglang/srt/layers/moe/ep_moe/layer.py")
    assert [sig for _, sig, _ in feed(matcher, elsewhere)] == ["unrecognised-exception"]


def test_stack_dumps_are_context_and_a_truncated_traceback_ends_cleanly(matcher: Matcher) -> None:
    log = "\n".join(
        [
            "Fatal Python error: Segmentation fault",
            "",
            "Current thread 0x00007fcf597eb640 (most recent call first):",
            '  File "/usr/local/lib/python3.10/dist-packages/flashinfer/decode.py", line 514 in begin_forward',
            '  File "/x/error_handler.py", line 3 in raise_cuda_out_of_memory',
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
            "[2026-08-25 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "x.py", line 2, in <module>',
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "srun: error: n1: task 0: Exited with exit code 1",
        ]
    )
    found = [(no, sig) for no, sig, _ in feed(matcher, log)]
    assert found == [
        (1, "process-crash-signal"),
        (8, "sglang-scheduler-exception"),
        (10, "gpu-oom"),
        (11, "srun-task-failed"),
    ]


@pytest.mark.parametrize(
    ("line", "message", "tag"),
    [
        (
            "(EngineCore_DP0 pid=59619) ERROR 10-15 08:32:29 [core.py:708] Traceback",
            "Traceback",
            "EngineCore_DP0 pid=59619",
        ),
        (
            "(RayWorkerWrapper pid=880, ip=10.0.0.2) ERROR 04-16 01:01:44 [worker_base.py:620] x",
            "x",
            "RayWorkerWrapper pid=880, ip=10.0.0.2",
        ),
        ("[2025-07-25 07:53:08 DP1 TP2] Scheduler hit an exception", "Scheduler hit an exception", ""),
        (
            "2025-10-13T18:18:46.927697Z ERROR dynamo_llm::http::service::service_v2: Failed to bind",
            "Failed to bind",
            "",
        ),
        ("E0603 20:16:59.104586 27322 worker_pool.cpp:271] Worker: Process failed", "Worker: Process failed", ""),
        ("ERROR:    [Errno 98] error while attempting to bind", "[Errno 98] error while attempting to bind", ""),
        (
            "[rank1]:[E1015 08:32:29.123 ProcessGroupNCCL.cpp:1515] x",
            "[E1015 08:32:29.123 ProcessGroupNCCL.cpp:1515] x",
            "",
        ),
        ('sglang-1  |   File "/s.py", line 2', '  File "/s.py", line 2', ""),
        ("2026-08-25 10:00:00 [ERROR] Fatal error", "Fatal error", ""),
        ("3: srun: error: n1: task 0: Exited with exit code 1", "srun: error: n1: task 0: Exited with exit code 1", ""),
        # journalctl's short format of a vLLM service (its traceback's frames are context behind it)
        (
            "Feb 22 06:35:27 gpu-host-1 env[2827]: (EngineCore_DP0 pid=2827) ERROR 02-22 06:35:27 [core.py:946]"
            "     _check_enough_kv_cache_memory(",
            "    _check_enough_kv_cache_memory(",
            "EngineCore_DP0 pid=2827",
        ),
        ("Nov 13 01:50:23 8000a-e12 vllm[62501]: RuntimeError: x", "RuntimeError: x", ""),
        # rsyslog's and CloudWatch's octal escapes of a colour code's ESC (a SageMaker endpoint's log)
        (
            "#033[1;36m(VllmWorker pid=96)#033[0;0m ERROR 08-25 10:46:51 [multiproc_executor.py:559] x",
            "x",
            "VllmWorker pid=96",
        ),
        (
            "\x1b[2m2025-10-13T18:18:46Z\x1b[0m \x1b[31mERROR\x1b[0m "
            "\x1b[2mdynamo_runtime::worker\x1b[0m\x1b[2m:\x1b[0m y",
            "y",
            "",
        ),
    ],
)
def test_prefixes_are_stripped_to_find_the_message(line: str, message: str, tag: str) -> None:
    body, start, found_tag = strip_prefixes(line)
    assert body == message
    assert found_tag == tag
    if "\x1b" not in line:
        assert line[start:] == body


# --------------------------------------------------------------------------- long lines, redraws


def test_ten_megabyte_line_with_an_oom_at_its_end_is_found_by_scan(tmp_path: Path) -> None:
    log = tmp_path / "worker.out"
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity"
    log.write_text("ok\n" + "x" * (10 * 1024 * 1024) + oom + "\nafter\n", encoding="utf-8")
    triage = scan_paths([log])
    assert [(o.id, o.line_no) for o in triage.findings] == [("gpu-oom", 2)]
    assert oom[:40] in triage.findings[0].text
    assert len(triage.findings[0].text) < 5000
    assert triage.lines_seen(str(log)) == 3


def test_a_file_of_carriage_return_redraws_is_split_on_them(tmp_path: Path) -> None:
    log = tmp_path / "bench.out"
    progress = "".join(
        f"\rProcessed prompts: {i % 100:3d}%|####| {i}/100000 [00:01<00:02, 9.1it/s]" for i in range(60_000)
    )
    crash = "RuntimeError: CUDA error: an illegal memory access was encountered"
    log.write_bytes((progress + "\r" + crash).encode())
    with log.open("rb") as fh:
        lines = list(read_lines(fh))
    # one line, as the file has: its redraws that say something new, each matched on its own
    assert len(lines) == 1 and lines[0].split("\r")[-1] == crash and len(lines[0]) < 4 * 4096
    triage = scan_paths([log])
    assert [(o.id, o.line_no) for o in triage.findings] == [("gpu-illegal-memory-access", 1)]
    assert triage.findings[0].text.startswith("RuntimeError: CUDA error")


def test_the_lines_after_a_long_redrawn_line_keep_the_files_numbers(tmp_path: Path) -> None:
    # a training or benchmark progress bar written to a Slurm .out file, 3,000 redraws on one line
    bar = "".join(
        f"\r{i * 100 // 3000:3d}%|{'█' * (i // 300):<10}| {i}/3000 [00:{i % 60:02d}<01:00]" for i in range(3000)
    )
    lines = ["Starting benchmark", bar, "an error in the middle\r" + bar[:90_000], "next"]
    lines.append("slurmstepd: error: *** JOB 370250 ON n1 CANCELLED AT 2025-08-17T06:49:14 DUE TO TIME LIMIT ***")
    log = tmp_path / "slurm-370250.out"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with log.open("rb") as fh:
        read = list(read_lines(fh))
    assert len(read) == 5 and read[3] == "next"
    assert "an error in the middle" in read[2].split("\r")  # a redraw of its own is kept
    assert sum(len(line) for line in read) < 5 * 4 * 4096
    triage = scan_paths([log])
    assert [(o.id, o.line_no) for o in triage.findings] == [("slurm-time-limit", 5)]


def test_an_error_in_an_earlier_segment_of_a_redrawn_line_is_found(matcher: Matcher, tmp_path: Path) -> None:
    line = "srun: error: n1: task 0: Exited with exit code 1\rProcessed prompts:  6%|█▋  | 29/512"
    finding = matcher.match_line(line)
    assert finding is not None and finding.signature_id == "srun-task-failed"
    log = tmp_path / "w.out"
    log.write_text(line + "\n", encoding="utf-8")
    found = scan_paths([log]).findings
    assert [o.id for o in found] == ["srun-task-failed"]
    assert found[0].text.startswith("srun: error: n1")  # not the redraw a terminal would show


@pytest.mark.parametrize(
    ("crash", "signature_id"),
    [
        # family words of the bar (`safetensors`) must not name the crash
        ("RuntimeError: NIXL transfer got to Error state.", "nixl-transfer-failed"),
        # a regex that starts at the line's start
        (
            "slurmstepd: error: pyxis:     [ERROR] No such file or directory: /fsx/pyxis/385.0.squashfs",
            "pyxis-image-import-failed",
        ),
    ],
)
def test_a_crash_written_after_a_short_redraw_is_a_line_of_its_own(
    matcher: Matcher, crash: str, signature_id: str
) -> None:
    bar = "Loading safetensors checkpoint shards: 100% Completed | 8/8 [00:12<00:00,  1.52s/it]"
    line = f"{bar}\r{crash}"
    finding = matcher.match_line(line)
    assert finding is not None and finding.signature_id == signature_id
    assert finding.span[0] > len(bar)  # in the crash's segment
    assert matcher.match_all(bar + "\r" + bar) == []


# --------------------------------------------------------------------------- normalisation


def test_json_formatted_log_line_is_matched_on_its_message(matcher: Matcher) -> None:
    record = {
        "time": "2025-10-08T13:03:51.794Z",
        "level": "ERROR",
        "target": "dynamo_llm::http::service::openai",
        "message": 'Internal server error: no instances found for endpoint "instances/dynamo/backend/generate"',
    }
    line = json.dumps(record)
    finding = matcher.match_line(line)
    assert finding is not None and finding.signature_id == "router-no-healthy-workers"
    assert finding.captures["name"] == "instances/dynamo/backend/generate"
    assert finding.span == (0, len(line))
    nested = json.dumps(
        {
            "level": "error",
            "fields": {
                "error": "Address already in use (os error 98)",
                "message": "Failed to bind server to address protocol=HTTP address=0.0.0.0:8000",
            },
        }
    )
    found = matcher.match_line(nested)
    assert found is not None and found.signature_id == "http-port-in-use"
    assert (
        matcher.match_line(json.dumps({"level": "INFO", "message": "Successfully reconnected to ETCD cluster"})) is None
    )
    # Not JSON after all: matched as text.
    assert matcher.match_line('{"not json" OSError: [Errno 98] Address already in use') is not None


def test_colour_codes_with_and_without_escape_are_removed(matcher: Matcher) -> None:
    rust = (
        "\x1b[2m2025-09-03T20:28:47.089394Z\x1b[0m \x1b[31mERROR\x1b[0m "
        "\x1b[2mdynamo_runtime::system_status_server\x1b[0m"
        "\x1b[2m:\x1b[0m Failed to bind to address \x1b[1m0.0.0.0:8083\x1b[0m: Address already in use (os error 98)"
    )
    finding = matcher.match_line(rust)
    assert finding is not None and finding.signature_id == "http-port-in-use"
    assert finding.captures["port"] == "8083"
    pasted = "[1;36m(APIServer pid=670293)[0;0m zmq.error.ZMQError: Address already in use (addr='tcp://10.0.0.1:[1m5557[0m')"
    finding = matcher.match_line(pasted)
    assert finding is not None and finding.signature_id == "zmq-bind-in-use"
    assert finding.captures["port"] == "5557"
    assert finding.captures["process"] == "APIServer"
    windows = (
        "\u2190[31mERROR\u2190[0m:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
        "address already in use"
    )
    assert (matcher.match_line(windows) or pytest.fail("no match")).signature_id == "http-port-in-use"
