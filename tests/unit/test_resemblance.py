"""Resemblance: a failure line that no regex knows is named by the known lines it reads like
(the catalog's corpus of real lines, its entries' examples), below every regex-found cause and
family match; benign lines, warnings and stack context stay quiet."""

from __future__ import annotations

import json
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from console.resemblance import BENIGN, Resemblance, words
from console.signatures import CatalogError, Matcher, bundled_catalog_path, default_matcher, load_catalog
from console.triage import Triage

# Lines no regex of the bundled catalog knows (checked below), each reading like one failure.
UNSEEN = [
    (
        "E1205 10:00:01.000000 77 rdma_context.cpp:12] Failed to register the buffer with the RDMA device",
        "mooncake-register-memory-failed",
    ),
    ("host-3:77:88 [0] NCCL WARN IB: the queue pair to peer host-4 went to the error state", "nccl-ib-error"),
]


# A real Dynamo frontend's warning (its words read like a missing model file's lines).
DYNAMO_MM_WARNING = (
    "\x1b[2m2026-12-05T12:36:49.836630Z\x1b[0m \x1b[33m WARN\x1b[0m \x1b[2mmm_routing\x1b[0m\x1b[2m:\x1b[0m /model is n"
    "ot supported for MM-aware KV routing (image routing processor unavailable (mm-routing: fai"
    "led to read preprocessor_config.json at /root/.cache/dynamo/mdc/by-slug/tiny/79e498495ca03"
    "58aad03c151e8a994d0e36b3c192cd2d4baf3563bbed13ef185/preprocessor_config.json); image-place"
    "holder token or model-specific prompt layout unresolvable from config.json / processor_con"
    "fig.json / tokenizer_config.json / vocab probe). Falling back to KV routing without MM awa"
    "reness — text-prefix overlap still works but the router cannot distinguish requests by ima"
    "ge content. model=/model reasons=image routing processor unavailable (mm-routing: failed t"
    "o read preprocessor_config.json at /root/.cache/dynamo/mdc/by-slug/tiny/79e498495ca0358aad"
    "03c151e8a994d0e36b3c192cd2d4baf3563bbed13ef185/preprocessor_config.json); image-placeholde"
    "r token or model-specific prompt layout unresolvable from config.json / processor_config.j"
    "son / tokenizer_config.json / vocab probe"
)


def test_words_split_names_and_leave_numbers_out() -> None:
    got = words("[rank3] _kgspIsHeartbeatTimedOut: 0x7f12 register_local_memory failed on 10.0.0.2")
    assert {"heartbeat", "timed", "out", "kgspisheartbeattimedout", "register", "local", "memory", "failed"} <= set(got)
    assert not any(w[0].isdigit() for w in got) and "the" not in words("the end")


def test_words_leave_out_who_wrote_the_line_and_from_where() -> None:
    # vLLM's prefix names the process and the source file, not what happened
    got = words("(EngineCore pid=134011) ERROR 07-26 23:45:57 [core.py:1233] RuntimeError: producer rejected pull")
    assert {"runtimeerror", "producer", "rejected", "pull"} <= set(got)
    assert not {"enginecore", "engine", "core", "pid", "py"} & set(got)


def _toy() -> Resemblance:
    return Resemblance(
        [
            ("NCCL WARN socket connect to peer 10.0.0.2 failed: connection refused", "nccl-socket-failure"),
            ("NCCL WARN socket recv from peer failed: connection reset", "nccl-socket-failure"),
            ("bootstrap: socket connect to rank 3 timed out", "nccl-socket-failure"),
            (
                "misc/socket.cc:484 NCCL WARN socket connect to 10.0.0.3 failed, retries exhausted",
                "nccl-socket-failure",
            ),
            ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "gpu-oom"),
            ("RuntimeError: CUDA error: out of memory", "gpu-oom"),
            ("HIP out of memory. Tried to allocate 1.50 GiB on device 3", "gpu-oom"),
            ("grpc: failed to reconnect to the metrics collector, will retry", BENIGN),
            ("metrics exporter: connection to collector failed, retrying", BENIGN),
        ]
    )


def test_a_line_is_named_by_the_words_it_shares_with_a_signatures_lines() -> None:
    guess = _toy().classify("gloo: NCCL WARN socket connect to peer 10.0.0.7 failed after 3 attempts")
    assert guess is not None and guess.signature_id == "nccl-socket-failure"
    assert guess.margin >= 2.0 and "socket" in guess.words


def test_a_failure_said_without_a_failure_word_is_looked_at() -> None:
    toy = Resemblance(
        [
            ("OSError: llama-3 does not appear to have a file named tokenizer.json", "model-files-missing"),
            ("tokenizer.json not found in the model directory", "model-files-missing"),
            ("RuntimeError: CUDA error: out of memory", "gpu-oom"),
        ]
    )
    guess = toy.classify("qwen-7b: the model directory's tokenizer.json not found")
    assert guess is not None and guess.signature_id == "model-files-missing"
    # the same words without the phrase say no failure
    assert toy.classify("qwen-7b: the model directory's tokenizer.json found") is None


def test_the_matcher_passes_a_failure_phrase_to_the_resemblance() -> None:
    line = "nvshmem bootstrap: peer GPU 2 is not accessible from GPU 5"  # no failure word
    assert Matcher(load_catalog(), resemblance=False).match_line(line) is None
    finding = default_matcher().match_line(line)
    assert finding is not None and finding.signature_id == "nvshmem-init-failed", finding
    assert "resembles" in finding.captures


@pytest.mark.parametrize(
    "line",
    [
        "socket connect to peer 10.0.0.7 established",  # no failure word
        "metrics exporter: connection to collector failed again, retrying",  # reads like benign lines
        "the frobnicator failed",  # no word it knows beyond the failure word: no clear winner
        "frame #3: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout() + 0x1d2 (socket connect failed)",  # a stack frame
    ],
)
def test_unclear_benign_and_stack_lines_are_not_named(line: str) -> None:
    assert _toy().classify(line) is None


def test_the_bundled_corpus_names_unseen_lines_below_the_regexes() -> None:
    matcher = default_matcher()
    regexes_only = Matcher(load_catalog(), resemblance=False)
    for line, expected in UNSEEN:
        assert regexes_only.match_line(line) is None, line  # no regex knows it
        finding = matcher.match_line(line)
        assert finding is not None and (finding.signature_id, finding.family) == (expected, True), line
        assert finding.basis is not None and finding.basis.startswith("its words (")
        assert finding.captures["resembles"]


def test_a_catalog_without_family_words_still_names_by_resemblance() -> None:
    catalog = load_catalog()
    bare = replace(catalog, signatures=tuple(replace(sig, family=()) for sig in catalog.signatures))
    finding = Matcher(bare).match_line(UNSEEN[0][0])
    assert finding is not None and finding.signature_id == UNSEEN[0][1] and "resembles" in finding.captures


@pytest.mark.parametrize(
    "line",
    [
        # Dynamo's frontend (Rust tracing, coloured) warning that it falls back, quoting a failed read
        DYNAMO_MM_WARNING,
        # a glog W line and a Python warning that say the same
        "W1205 10:00:01.000000 77 rdma_context.cpp:12] Failed to register the buffer with the RDMA device",
        "WARNING 12-05 10:00:01 [nccl.py:12] NCCL WARN IB: the queue pair to peer host-4 went to the error state",
        # PyTorch's C++ stack: its header and frames are context
        "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609"
        " (most recent call first):",
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<long>) + 0x1d2 (0x7f3b in libtorch.so)",
        # a comment of the Triton kernel source inductor prints at E level (michael-amd/sglang-ci's MI355X log)
        "[rank3]:E1103 11:06:59.661000 187 torch/_inductor/runtime/triton_heuristics.py:750] [22/4]     # Cast batch"
        " id and batch dimension strides to int64 to avoid int32 overflow during offset calculation",
        # IPython's frame and the numbered source lines under it (vllm-project/vllm#15518)
        "File ~/.conda/envs/vllm/lib/python3.12/site-packages/httpcore/_backends/sync.py:207, in"
        " SyncBackend.connect_tcp(self, host, port, timeout, local_address, socket_options)",
        "    203     socket.timeout: ConnectTimeout,",
        # absl's symbolised frame under a SIGTERM Ray's worker caught at teardown
        "0:     @     0x4004ebf56848        464  absl::lts_20230802::AbslFailureSignalHandler()",
        # a program's fields in snake_case, whatever their words (`fatal_by_judge`): a reward log of a healthy run
        "[2026-04-28 14:22:57] [plan_xml_reward_decoupled] call_counter=4 version=v2 cost_time=53.47s"
        " rewards={-0.800:4, 1.000:4} stages={fatal_by_judge:4, scored:4} gate_reasons={} exceptions={}",
    ],
)
def test_warnings_and_stack_context_are_not_named_by_resemblance(line: str) -> None:
    finding = default_matcher().match_line(line)
    assert finding is None or "resembles" not in finding.captures, (line, finding)


def test_a_regex_found_cause_is_the_root_over_an_earlier_resemblance() -> None:
    triage = Triage()
    triage.feed(
        "logs/n1_decode_w0.out",
        [
            "[2026-12-01 10:00:00 TP0] " + UNSEEN[1][0],
            "[2026-12-01 10:00:05 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ],
    )
    d = triage.diagnose("FAILED")
    assert d.root_cause is not None and d.root_cause.id == "gpu-oom"


def test_a_resemblance_is_the_root_over_an_unrecognised_error_and_says_how_it_was_found(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from console.cli import main

    log = tmp_path / "prefill_w0.out"
    log.write_text(
        "2026-12-01 09:59:00 [ERROR] the sweep could not read its state file\n" + UNSEEN[0][0] + "\n",
        encoding="utf-8",
    )
    triage = Triage()
    triage.feed("logs/prefill_w0.out", log.read_text(encoding="utf-8").splitlines())
    d = triage.diagnose("FAILED")
    assert d.root_cause is not None and d.root_cause.id == "mooncake-register-memory-failed"
    doc = d.root_cause.to_json()
    assert "by_family" not in doc and doc["by_resemblance"]
    assert "mooncake-register-memory-failed (" in d.advice and ", by its words (" in d.advice
    main(["scan", str(log)])
    out = capsys.readouterr().out
    assert "root cause: mooncake-register-memory-failed" in out
    assert "(by its words (" in out and "like its known lines: no regex of it matched)" in out


SITE = """\
version: 1
signatures:
  - id: site-lustre-quota
    title: Lustre project quota exceeded
    category: infra
    severity: fatal
    priority: 60
    keywords: [disk quota exceeded]
    regex: 'Disk quota exceeded'
    hint: The project's Lustre quota is full; clean the checkpoints.
    examples:
      - 'OSError: [Errno 122] Disk quota exceeded: /lustre/proj/ckpt/model-00001.safetensors'
      - 'write(/lustre/proj/ckpt/x.bin) failed: Disk quota exceeded (lustre project quota)'
      - 'lfs setstripe /lustre/proj/ckpt failed: Disk quota exceeded (project quota of lustre exhausted)'
    benign:
      - 'INFO lustre quota for project inference: 71% used'
"""


def test_an_operators_examples_teach_the_resemblance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from console.cli import main

    site = tmp_path / "site.yaml"
    site.write_text(SITE, encoding="utf-8")
    # (a line clearly of the site's family: one that reads half like torch's checkpoint writer, which
    # disk-full's corpus holds, is named by a margin that the corpus's growth can move)
    line = "ERROR lustre project quota exhausted: write of /lustre/proj/ckpt/model-00002.safetensors failed"
    finding = Matcher(load_catalog(bundled_catalog_path(), site)).match_line(line)
    assert finding is not None and finding.signature_id == "site-lustre-quota" and finding.family
    # alone, a catalog names nothing by resemblance: no corpus
    assert Matcher(load_catalog(site)).match_line(line) is None
    log = tmp_path / "w0.out"
    log.write_text("[2026-12-01 10:00:00 TP0] Load weight begin.\n" + line + "\n", encoding="utf-8")
    assert main(["signatures", "test", "--catalog", str(site), str(log)]) == 0
    out = capsys.readouterr().out
    assert "  site-lustre-quota (infra, fatal) x1\n    2: ERROR lustre project quota" in out
    assert "like its known lines: no regex of it matched]" in out
    assert main(["signatures", "test", "--catalog", str(site), str(log), "--json"]) == 0
    lines = json.loads(capsys.readouterr().out)["files"][str(log)]["site-lustre-quota"]["lines"]
    assert [(x["line_no"], x["family"], bool(x["resembles"])) for x in lines] == [(2, None, True)]


def test_a_corpus_is_read_beside_its_catalog_and_a_missing_one_is_named(tmp_path: Path) -> None:
    (tmp_path / "lines.yaml").write_text(
        textwrap.dedent(
            """\
            variants:
            - {id: site-lustre-quota, line: 'lustre: project quota exhausted on ost3, write failed', source: site}
            benign:
            - {line: 'lustre: quota report failed to render, retrying', source: site}
            """
        ),
        encoding="utf-8",
    )
    good = tmp_path / "good.yaml"
    good.write_text(SITE.replace("version: 1\n", "version: 1\ncorpus: lines.yaml\n"), encoding="utf-8")
    assert load_catalog(good).corpus == (tmp_path / "lines.yaml",)
    bad = tmp_path / "bad.yaml"
    bad.write_text(SITE.replace("version: 1\n", "version: 1\ncorpus: [gone.yaml]\n"), encoding="utf-8")
    with pytest.raises(CatalogError, match=r"bad.yaml: field 'corpus': no such file: .*gone.yaml"):
        load_catalog(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(SITE.replace("version: 1\n", "version: 1\ncorpus: {a: 1}\n"), encoding="utf-8")
    with pytest.raises(CatalogError, match="field 'corpus' must be a file name or a list of them"):
        load_catalog(wrong)


@pytest.mark.parametrize(("text", "message"), [("variants: [\n  - broken", "not valid YAML"), ("- a\n", "a corpus is")])
def test_a_corpus_that_cannot_be_parsed_is_named(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "lines.yaml").write_text(text, encoding="utf-8")
    site = tmp_path / "site.yaml"
    site.write_text(SITE.replace("version: 1\n", "version: 1\ncorpus: lines.yaml\n"), encoding="utf-8")
    with pytest.raises(CatalogError, match=f"site.yaml: field 'corpus': .*lines.yaml: {message}"):
        load_catalog(site)


# Checks that an engine (ROCm/ATOM) raises: a builtin exception's name and a `missing` or
# `mismatch` say that something failed, not which failure; none is any signature's.
ENGINE_CHECKS = [
    "ValueError: percentile of an empty sequence",
    "ValueError: Layer 3 kv_cache_base is missing for MLA cache.",
    "ValueError: MiniMax-M3 sparse KV cache head count mismatch.",
    "RuntimeError: DSV4 PAGE/state checkpoint spec is missing",
    "RuntimeError: ATOM model has no parameters; cannot determine device/dtype.",
    "ValueError: segment/device mismatch",
]


@pytest.mark.parametrize("line", ENGINE_CHECKS)
def test_an_engines_own_checks_are_not_named_after_a_signature(line: str) -> None:
    # (they did read like kv-cache-memory-insufficient, gpu-binary-incompatible, gpu-memory-held-by-other)
    findings = default_matcher().match_all(line)
    assert all(f.generic for f in findings), [(f.signature_id, f.captures) for f in findings]


def test_an_engines_own_check_that_ends_a_process_is_reported_as_unrecognised() -> None:
    triage = Triage()
    triage.feed(
        "logs/n1_agg_w0.out",
        [
            "Traceback (most recent call last):",
            '  File "/app/atom/model_engine/model_runner.py", line 903, in forward',
            "ValueError: Layer 3 kv_cache_base is missing for MLA cache.",
        ],
    )
    d = triage.diagnose("FAILED")
    assert d.root_cause is not None and d.root_cause.first.generic
    assert "kv_cache_base is missing" in d.root_cause.first.text


def test_a_line_that_retries_is_not_named_and_its_give_up_line_is() -> None:
    # Gloo's connect: the retry reads word for word like the give-up (numbers are no words), so
    # the retry is told apart before numbers are masked.
    toy = Resemblance(
        [
            (
                "ERROR failed to connect, willRetry=0, retry=3, retryLimit=3, remote=[10.0.0.2]:4000",
                "dist-rendezvous-timeout",
            ),
            ("gloo rendezvous failed to connect to the store", "dist-rendezvous-timeout"),
            ("all ranks joined the rendezvous", BENIGN),
        ]
    )
    give_up = "ERROR failed to connect, willRetry=0, retry=3, retryLimit=3, remote=[10.0.0.7]:4100"
    assert toy.classify(give_up) is not None
    for retry in (
        "ERROR failed to connect, willRetry=1, retry=1, retryLimit=3, remote=[10.0.0.7]:4100",
        "failed to connect to the rendezvous store, retrying in 5 s",
    ):
        assert toy.classify(retry) is None, retry


def test_a_return_code_says_no_failure_of_a_kind() -> None:
    # `return code` is in enroot's hook failures, and any process has one: a generic
    # `Process 1 failed with return code 1` is an unrecognised error, not a container start.
    line = "[cosmos] 2026-05-14 05:28:06,261 - cosmos - ERROR - Process 1 failed with return code 1"
    findings = default_matcher().match_all(line)
    assert findings and all(f.generic for f in findings), [f.signature_id for f in findings]


def test_a_timeout_given_as_a_setting_says_no_failure() -> None:
    # A CI harness's progress (michael-amd/sglang-ci): the timeout is how long it will wait.
    toy = Resemblance(
        [
            ("Server failed to start: timed out waiting for the server to be ready", "health-check-timeout"),
            ("timeout waiting for server to be ready", "health-check-timeout"),
            ("server is ready", BENIGN),
        ]
    )
    assert toy.classify("[online] Waiting for server to be ready (timeout: 600s)...") is None
    assert toy.classify("waiting for server to be ready, timeout=600") is None
    matcher = default_matcher()
    assert matcher.match_all("[online] Waiting for server to be ready (timeout: 600s)...") == []
    found = matcher.match_line("[online] ERROR: Server failed to start within 600 seconds")
    assert found is not None and found.signature_id == "health-check-timeout"


def test_a_wrapper_of_an_error_printed_elsewhere_is_not_named_by_its_words() -> None:
    # torch_npu's wrapper names the operator that ran; the capture wrapper that carried the same
    # text (`Capture cuda graph failed: The Inner error is reported as above ...`) is learned,
    # and the wrapper alone read like it. It ends the process, so it is an unrecognised error.
    wrapper = (
        "RuntimeError: The Inner error is reported as above. The process exits for this inner error, "
        "and the current working operator name is ReshapeCacheOperation."
    )
    toy = Resemblance(
        [
            (
                "Exception: Capture cuda graph failed: " + wrapper.removeprefix("RuntimeError: "),
                "cuda-graph-capture-failed",
            ),
            (
                "Capture cuda graph failed: the current working operator name is SelfAttentionOperation",
                "cuda-graph-capture-failed",
            ),
            ("warmup of operator ReshapeCacheOperation done", BENIGN),
        ]
    )
    said = wrapper.replace("ReshapeCacheOperation", "SelfAttentionOperation")
    assert toy.classify(said.replace("is reported as above", "happened")) is not None
    assert toy.classify(said) is None
    triage = Triage()
    triage.feed(
        "logs/worker-0.out", ["Traceback (most recent call last):", '  File "x.py", line 3, in <module>', wrapper]
    )
    d = triage.diagnose("FAILED")
    assert d.root_cause is not None and d.root_cause.first.generic, d.root_cause


def test_an_exception_group_is_not_named_by_its_words() -> None:
    # starlette's wrapper of a client's disconnect in a healthy vLLM log (vllm-project/vllm#2621):
    # its sub-exceptions follow it; `errors`, `group` and `exception` read like a watchdog's timeout.
    line = "exceptiongroup.ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)"
    assert all("resembles" not in f.captures for f in default_matcher().match_all(line))


def test_rays_report_of_a_remote_exception_is_not_named_by_its_words() -> None:
    # (slime's trainer, THUDM/slime#1297: its actor's words read like an engine that failed to start;
    # the traceback of the exception it carries follows)
    line = (
        "ray.exceptions.RayTaskError(AcceleratorError): ray::MegatronTrainRayActor.train() (pid=76563, "
        "ip=10.1.49.166, actor_id=37d82bcbdafcda12f1eef52b02000000, repr=<slime.backends.megatron_utils."
        "actor.MegatronTrainRayActor object at 0x7f0c2c1b2a10>)"
    )
    assert all("resembles" not in f.captures for f in default_matcher().match_all(line))


def test_pydantics_header_is_not_named_by_its_words_but_a_config_it_refused_is_a_setting() -> None:
    # (vLLM's ModelConfig says under it both a setting refused and a model it could not inspect or
    # find: the line below decides, baidu/vLLM-Kunlun's log in tests/data/real-logs)
    header = "(APIServer pid=37564) pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig"
    assert all("resembles" not in f.captures for f in default_matcher().match_all(header))
    assert default_matcher().match_line(header) is None
    # any other of vLLM's configs refused a combination of settings
    for config in ("VllmConfig", "SpeculativeConfig"):
        finding = default_matcher().match_line(header.replace("ModelConfig", config))
        assert finding is not None and finding.signature_id == "engine-bad-argument" and not finding.family
