"""Family matches: an error-level line that no regex knows is still named by a word of its
failure's family (`nccl`, `etcd`, `safetensor`), below every regex-found cause and above an
unrecognised error; a warning that quotes an error is not one."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from console.signatures import CatalogError, Matcher, default_matcher, load_catalog
from console.triage import Triage

SITE = """\
version: 1
error_lines:
  - '(?<![\\w./-])ERROR(?![\\w/-])'
  - '(?:Error|Exception)(?:: |$)'
warning_lines:
  - '(?<![\\w./-])WARNING(?![\\w/-])'
signatures:
  - id: site-lustre
    title: Lustre filesystem failed
    category: infra
    severity: fatal
    priority: 60
    keywords: [stale file handle]
    family: [lustre, ldiskfs]
    regex: 'Stale file handle'
    hint: The shared filesystem dropped the node; drain it.
  - id: site-fabric
    title: Fabric manager failed
    category: infra
    severity: error
    priority: 40
    family: [fabricmanager, lustre]
    keywords: [fabric manager is down]
    regex: 'fabric manager is down'
    hint: Restart the fabric manager.
  - id: site-unknown
    title: Unrecognised error line
    category: runtime
    severity: error
    priority: 2
    generic: true
    keywords: [error]  # an error-level line passes on it, and is looked at for family words
    regex: '(?<![\\w./-])ERROR (?P<message>.{1,200})'
    hint: Read the log around it.
"""


@pytest.fixture
def site(tmp_path: Path) -> Matcher:
    path = tmp_path / "site.yaml"
    path.write_text(SITE, encoding="utf-8")
    return Matcher(load_catalog(path))


def test_an_error_line_with_a_family_word_is_found_under_that_family(site: Matcher) -> None:
    line = "2026-12-01 10:00:00 ERROR ll_ost_io: Lustre: client evicted by the OST (rc=-107)"
    finding = site.match_line(line)
    assert finding is not None
    assert (finding.signature_id, finding.family, finding.generic) == ("site-lustre", True, False)
    assert finding.captures["family"] == "lustre"
    assert line[finding.span[0] : finding.span[1]].startswith("ERROR ll_ost_io")
    # ahead of the unrecognised error that the same line also is
    assert [f.signature_id for f in site.match_all(line)] == ["site-lustre", "site-unknown"]


def test_a_named_exception_is_an_error_line(site: Matcher) -> None:
    finding = site.match_line("OSError: [Errno 5] ldiskfs journal aborted")
    assert finding is not None and finding.signature_id == "site-lustre" and finding.family


@pytest.mark.parametrize(
    "line",
    [
        "2026-12-01 10:00:00 INFO mounted lustre on /scratch",  # not error-level
        "2026-12-01 10:00:00 WARNING lustre reconnect took 3 s, last ERROR cleared",  # a warning quoting one
        "2026-12-01 10:00:00 ERROR the scheduler lost a heartbeat",  # error-level, no family word
    ],
)
def test_no_family_match_without_an_error_level_and_a_word(site: Matcher, line: str) -> None:
    assert not any(f.family for f in site.match_all(line))


def test_python_telling_of_a_bug_in_code_is_named_by_no_family_word() -> None:
    # the words of a code object's name are no failure's family (`_CudaDeviceProperties`)
    bug = "AttributeError: 'torch._C._CudaDeviceProperties' object has no attribute 'total_mem'."
    finding = default_matcher().match_line(bug)
    assert finding is None or finding.generic, finding
    assert default_matcher().match_line("ValueError: CUDA device properties lost") is not None  # (a family word)
    # ... nor does it resemble a signature's known lines (a CI script's own summary step)
    summary = "Error generating summary: unsupported operand type(s) for *: 'NoneType' and 'int'"
    finding = default_matcher().match_line(summary)
    assert finding is None or finding.generic, finding
    # ... while a pattern that owns such a message still names it
    owned = "Exception: Capture cuda graph failed: TypeError: 'NoneType' object is not subscriptable"
    finding = default_matcher().match_line(owned)
    assert finding is not None and finding.signature_id == "cuda-graph-capture-failed"


def test_a_regex_found_cause_wins_over_a_family_word(site: Matcher) -> None:
    finding = site.match_line("ERROR lustre: fabric manager is down")
    assert finding is not None
    assert (finding.signature_id, finding.family) == ("site-fabric", False)


def test_of_two_families_the_more_specific_names_the_line(site: Matcher) -> None:
    finding = site.match_line("ERROR fabricmanager lost the lustre router")
    assert finding is not None and finding.signature_id == "site-lustre"  # priority 60 over 40


def test_a_catalog_without_error_lines_makes_no_family_match(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    path.write_text("version: 1\nsignatures:\n" + SITE.split("signatures:\n", 1)[1], encoding="utf-8")
    finding = Matcher(load_catalog(path)).match_line("2026-12-01 10:00:00 ERROR Lustre: client evicted")
    assert finding is not None and finding.signature_id == "site-unknown"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("    family: lustre fs\n", None),  # one word as a string: accepted
        ("    family: [1, 2]\n", "field 'family' must be a list of non-empty strings"),
        ("    family: ['  ']\n", "field 'family' must be a list of non-empty strings"),
        ("    generic: true\n    family: [lustre]\n", "an unrecognised error's signature has no family"),
    ],
)
def test_a_bad_family_field_has_a_clear_message(tmp_path: Path, entry: str, message: str | None) -> None:
    doc = (
        textwrap.dedent("""\
        version: 1
        signatures:
          - id: site-x
            title: X
            category: infra
            severity: error
            keywords: [xx]
            regex: 'xx'
            hint: h
        """)
        + entry
    )
    path = tmp_path / "c.yaml"
    path.write_text(doc, encoding="utf-8")
    if message is None:
        assert load_catalog(path).signatures[0].family == ("lustre fs",)
    else:
        with pytest.raises(CatalogError, match=message):
            load_catalog(path)


def test_a_bad_error_lines_pattern_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("version: 1\nerror_lines: ['(unclosed']\nsignatures: []\n", encoding="utf-8")
    with pytest.raises(CatalogError, match="error_lines pattern #1"):
        load_catalog(path)


# --------------------------------------------------------------------------- the bundled catalog


@pytest.mark.parametrize(
    ("line", "expected", "word"),
    [
        # wordings no regex of the catalog knows, each in one engine's error format
        ("(EngineCore_DP0 pid=77) ERROR 12-01 10:00:00 [nixl_connector.py:1187] nixl agent lost its peer list",
         "nixl-transfer-failed", "nixl"),
        ("E1201 10:00:00.123456 4242 transfer_task.cpp:512] segment descriptor went stale mid-batch",
         "mooncake-transfer-failed", "transfer_task"),
        ("[2026-12-01 10:00:00 TP3] RuntimeError: NCCL communicator reported a torn ring",
         "nccl-error", "nccl"),
        ("2026-12-01T10:00:00.000Z ERROR dynamo_runtime::transports::etcd: watch stream ended without a lease",
         "etcd-nats-unavailable", "etcd"),
        ("srun: error: nvl72-07: the step's gres could not be bound to a task",
         "slurm-request-rejected", "srun:"),
    ],
)  # fmt: skip
def test_bundled_families_name_unseen_wordings(line: str, expected: str, word: str) -> None:
    finding = default_matcher().match_line(line)
    assert finding is not None, line
    assert (finding.signature_id, finding.family, finding.captures.get("family")) == (expected, True, word)


def test_the_more_specific_family_wins_in_the_bundled_catalog() -> None:
    line = "torch.distributed.DistBackendError: c10d reported a NCCL peer that never published its id"
    finding = default_matcher().match_line(line)
    assert finding is not None and finding.family
    assert finding.signature_id == "dist-rendezvous-timeout"  # over nccl-error: c10d is the rendezvous


@pytest.mark.parametrize(
    "line",
    [
        "[2026-02-26 05:20:06 TP0] Failed to import amdsmi with ModuleNotFoundError(\"No module named 'amdsmi'\")",
        "(Worker pid=22514) [W socket.cpp:601] [c10d] The IPv6 network addresses of (head, 16516) cannot be "
        "retrieved (gai error: -2 - Name or service not known).",
        "WARNING 12-01 10:00:00 [cuda.py:88] CUDA error: peer access unsupported, custom all-reduce disabled",
        "n1:4242:4243 [0] NCCL INFO NET/IB : No device found; falling back to socket, error: none",
    ],
)
def test_warnings_and_info_lines_that_quote_an_error_are_not_family_matches(line: str) -> None:
    assert not any(f.family for f in default_matcher().match_all(line))


# --------------------------------------------------------------------------- the diagnosis


def test_a_regex_found_cause_is_the_root_over_an_earlier_family_match() -> None:
    triage = Triage()
    triage.feed(
        "logs/n1_decode_w0.out",
        [
            "[2026-12-01 10:00:01 TP0] RuntimeError: NCCL communicator reported a torn ring",
            "[2026-12-01 10:00:05 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        ],
    )
    d = triage.diagnose("FAILED")
    assert d.root_cause is not None and d.root_cause.id == "gpu-oom"


def test_a_family_match_is_the_root_over_an_unrecognised_error_and_says_how_it_was_found() -> None:
    triage = Triage()
    triage.feed(
        "logs/n1_decode_w0.out",
        [
            "2026-12-01 09:59:00 [ERROR] the sweep could not read its state file",
            "[2026-12-01 10:00:01 TP0] RuntimeError: NCCL communicator reported a torn ring",
        ],
    )
    d = triage.diagnose("FAILED")
    assert d.root_cause is not None and d.root_cause.id == "nccl-error"
    assert d.root_cause.to_json()["by_family"] == "nccl"
    assert "nccl-error (NCCL/RCCL call failed, by its family word 'nccl')" in d.advice


def test_scan_says_the_root_cause_was_named_by_a_family_word(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from console.cli import main

    log = tmp_path / "decode_w0.out"
    log.write_text(
        "[2026-12-01 10:00:00 TP0] Load weight begin.\n"
        "(EngineCore_DP0 pid=77) ERROR 12-01 10:00:01 [nixl_connector.py:1187] nixl agent lost its peer list\n",
        encoding="utf-8",
    )
    main(["scan", str(log)])
    out = capsys.readouterr().out
    assert (
        "root cause: nixl-transfer-failed - NIXL KV transfer failed [runtime, error]"
        " (by its family word 'nixl': no regex of it matched)"
    ) in out


def test_a_family_match_is_as_severe_as_its_line() -> None:
    # a glog F line is a crash: named by its family (Mooncake's transfer engine), still fatal
    line = "F0812 10:00:00.123456  1234 transfer_engine.cpp:12] Check failed: segment != nullptr"
    finding = default_matcher().match_line(line)
    assert finding is not None and finding.family
    assert (finding.signature_id, finding.severity) == ("mooncake-transfer-failed", "fatal")
    triage = Triage()
    triage.feed("logs/n1_prefill_w0.out", [line])
    assert triage.diagnose("RUNNING").verdict == "failed"  # not "degraded": nothing fatal was found


QUIET = """\
version: 1
quiet_lines:
  - '\\bNCCL INFO\\b'
signatures:
  - id: site-refused
    title: Connection refused
    category: runtime
    severity: error
    keywords: [connection refused]
    regex: 'Connection refused'
    hint: The peer is not listening.
    examples: ['ConnectionRefusedError: [Errno 111] Connection refused']
    benign: ['node-3:412:598 [0] NCCL INFO Call to connect returned Connection refused, retrying']
"""


def test_a_quiet_line_yields_no_signature_and_its_entries_benign_lines_may_rely_on_it(tmp_path: Path) -> None:
    path = tmp_path / "quiet.yaml"
    path.write_text(QUIET, encoding="utf-8")
    matcher = Matcher(load_catalog(path))  # loads: the benign line is quiet, the entry has no exclude
    assert matcher.match_line("ConnectionRefusedError: [Errno 111] Connection refused").signature_id == "site-refused"
    assert matcher.match_line("node-3:412:598 [0] NCCL INFO Call to connect returned Connection refused") is None
    # without the catalog's quiet line, the same entry's benign line is refused on load
    path.write_text(QUIET.replace("quiet_lines:\n  - '\\bNCCL INFO\\b'\n", ""), encoding="utf-8")
    with pytest.raises(CatalogError, match="field 'benign' #1: matched, but must not be"):
        load_catalog(path)
