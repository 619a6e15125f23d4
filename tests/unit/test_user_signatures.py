"""Operators teach the console: their signatures (config or a file beside it) merged with the
bundled catalog, validated the same way, and `srt-console signatures test` to try them on a log."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli import main
from console.config import load_config
from console.signatures import Matcher, bundled_catalog, default_matcher, install
from console.user_signatures import user_catalog

STALE = """\
  - id: site-lustre-stale
    title: Lustre handle went stale
    category: infra
    severity: fatal
    keywords: [stale file handle]
    regex: 'Stale file handle'
    hint: The shared filesystem dropped the node; drain it.
    examples: ['OSError: [Errno 116] Stale file handle']
    benign: ['NFS handle refreshed']
"""
LOG = [
    "[2026-08-21 10:01:09 TP0] Load weight begin.",
    "Traceback (most recent call last):",
    '  File "/sgl-workspace/python/sglang/srt/model_loader/loader.py", line 88, in load',
    "OSError: [Errno 116] Stale file handle",
    "zmq.error.ZMQError: Address already in use (addr='tcp://*:5557')",
    "zmq.error.ZMQError: Address already in use on a Stale file handle",
]


@pytest.fixture(autouse=True)
def bundled_default() -> Iterator[None]:
    yield
    install(Matcher(bundled_catalog()))  # what a test installed is not another test's catalog


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "logs" / "n1_prefill_w0.out"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(LOG) + "\n", encoding="utf-8")
    return path


def test_signatures_in_the_config_are_merged_and_scan_names_them(
    tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path / "cfg" / "config.yaml", "signatures:\n" + STALE)
    assert main(["--config", str(config), "scan", "--json", str(log)]) == 1  # its fatal finding: failed
    doc = json.loads(capsys.readouterr().out)
    ids = [(f["id"], f["line_no"]) for f in doc["findings"]]
    assert ("site-lustre-stale", 4) in ids
    assert doc["diagnosis"]["root_cause"]["id"] == "zmq-bind-in-use"  # startup before infra
    catalog, problems = user_catalog(load_config(config))
    assert problems == [] and len(catalog.signatures) == len(bundled_catalog().signatures) + 1


def test_a_bad_entry_is_named_by_file_line_and_field_and_the_others_are_used(tmp_path: Path) -> None:
    text = (
        "signatures:\n"
        + STALE
        + """\
  - id: broken-regex
    title: x
    category: infra
    severity: fatal
    keywords: [boom]
    regex: 'boom('
    hint: x
  - id: example-missed
    title: y
    category: infra
    severity: fatal
    keywords: [kaboom]
    regex: 'ka-boom'
    hint: y
    examples: ['kaboom here']
  - id: benign-matched
    title: z
    category: runtime
    severity: error
    keywords: [flaky]
    regex: 'flaky'
    hint: z
    benign: ['a flaky but harmless line']
  - id: keyword-gate
    title: w
    category: runtime
    severity: error
    keywords: [other word]
    regex: 'gated line'
    hint: w
    examples: ['a gated line']
  - id: no-category
    title: v
    category: somewhere
    severity: error
    regex: 'v'
    hint: v
"""
    )
    config = write(tmp_path / "config.yaml", text)
    catalog, problems = user_catalog(load_config(config))
    assert [p.split(": ", 1)[0] for p in problems] == [f"{config}:{n}" for n in (11, 18, 26, 34, 42)]
    assert "signature #2 ('broken-regex'): field 'regex' #1: invalid regex 'boom('" in problems[0]
    assert "signature #3 ('example-missed'): field 'examples' #1: not matched: 'kaboom here'" in problems[1]
    assert "field 'benign' #1: matched, but must not be" in problems[2]
    assert "field 'examples' #1: not matched (no keyword of the entry is in it)" in problems[3]
    assert "field 'category': 'somewhere' is not one of startup, runtime, infra, scheduler" in problems[4]
    assert "site-lustre-stale" in {s.id for s in catalog.signatures}
    assert not {"broken-regex", "example-missed", "benign-matched"} & {s.id for s in catalog.signatures}


def test_a_catalog_file_beside_the_config_or_named_by_it_is_read(tmp_path: Path) -> None:
    beside = write(
        tmp_path / "signatures.yaml",
        """\
        version: 1
        signatures:
          - id: zmq-bind-in-use
            title: Our KV publisher port is taken
            category: startup
            severity: fatal
            keywords: [address already in use]
            regex: 'Address already in use'
            hint: On our cluster this is the KV publisher; set ATOM_KV_PORT per rank.
        """,
    )
    config = write(tmp_path / "config.yaml", "signatures: more/site.yaml\n")
    write(tmp_path / "more" / "site.yaml", "signatures:\n" + STALE)
    catalog, problems = user_catalog(load_config(config))
    assert problems == []
    assert [str(s) for s in catalog.sources[1:]] == [str(beside), str(tmp_path / "more" / "site.yaml")]
    by_id = {s.id: s for s in catalog.signatures}
    assert by_id["zmq-bind-in-use"].hint.startswith("On our cluster")  # the operator's replaces ours
    assert "site-lustre-stale" in by_id
    broken = write(tmp_path / "b" / "config.yaml", "signatures: {id: x}\n")
    assert user_catalog(load_config(broken))[1] == [
        f"{broken}:1: signatures: expected a list of signatures or a catalog file"
    ]
    write(tmp_path / "c" / "signatures.yaml", "signatures: [unclosed\n")
    problems = user_catalog(load_config(tmp_path / "c" / "config.yaml"))[1]
    assert len(problems) == 1 and problems[0].startswith(f"{tmp_path / 'c' / 'signatures.yaml'}:")


def test_signatures_test_shows_what_each_signature_finds(
    tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write(tmp_path / "config.yaml", "signatures:\n" + STALE)
    assert main(["--config", str(config), "signatures", "test", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"catalog: bundled + {config}" in out
    assert "  site-lustre-stale (infra, fatal) x1\n    4: OSError: [Errno 116] Stale file handle" in out
    assert "  zmq-bind-in-use (startup, fatal) x2" in out
    # One signature: also the lines where a narrower one is the finding.
    assert main(["--config", str(config), "signatures", "test", str(log), "--id", "site-lustre-stale", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    lines = doc["files"][str(log)]["site-lustre-stale"]["lines"]
    assert [(x["line_no"], x["shown_as"]) for x in lines] == [(4, None), (6, "zmq-bind-in-use")]
    assert main(["--config", str(config), "signatures", "test", str(log), "--id", "nope"]) == 1
    assert "no signature 'nope'" in capsys.readouterr().err


def test_signatures_test_tries_a_catalog_file_and_check_validates(
    tmp_path: Path, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    candidate = write(tmp_path / "try.yaml", "signatures:\n" + STALE)
    assert main(["signatures", "test", str(log), "--catalog", str(candidate), "--id", "site-lustre-stale"]) == 0
    assert "4: OSError: [Errno 116] Stale file handle" in capsys.readouterr().out
    assert main(["signatures", "check", "--catalog", str(candidate)]) == 0
    bad = write(tmp_path / "bad.yaml", "signatures:\n  - id: x\n    title: t\n")
    assert main(["signatures", "check", "--catalog", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:2: signature #1 ('x'): field 'category' is missing" in err
    assert main(["signatures", "test", str(tmp_path / "missing.log")]) == 2


def test_an_operators_family_word_names_unseen_error_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Their entry with a family: any error-level line (the bundled catalog's error_lines) that
    # mentions their filesystem is found under it, and `signatures test` says how.
    config = write(tmp_path / "config.yaml", "signatures:\n" + STALE + "    family: [lustre]\n")
    log = write(
        tmp_path / "w0.out",
        """\
        [2026-12-01 10:00:00 TP0] Load weight begin.
        2026-12-01 10:00:01 ERROR ll_ost_io: Lustre: client evicted by the OST (rc=-107)
        2026-12-01 10:00:02 INFO lustre mounted again
        """,
    )
    assert main(["--config", str(config), "signatures", "test", str(log)]) == 0
    out = capsys.readouterr().out
    assert "  site-lustre-stale (infra, fatal) x1\n    2: 2026-12-01 10:00:01 ERROR ll_ost_io" in out
    assert "[by its family word 'lustre': no regex of it matched]" in out
    assert main(["--config", str(config), "signatures", "test", str(log), "--json"]) == 0
    lines = json.loads(capsys.readouterr().out)["files"][str(log)]["site-lustre-stale"]["lines"]
    assert [(x["line_no"], x["family"]) for x in lines] == [(2, "lustre")]


def test_a_session_installs_the_operators_signatures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from console.session import Session

    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    config = write(tmp_path / "config.yaml", "signatures:\n" + STALE + "  - {id: half}\n")
    session = Session.open(str(config))
    try:
        assert "site-lustre-stale" in {s.id for s in default_matcher().signatures}
        assert any("signature #2 ('half')" in note for note in session.notes)
        # The agent's prefilter knows the operator's keywords too.
        assert "stale file handle" in default_matcher().keywords
    finally:
        import asyncio

        asyncio.run(session.close())


def test_a_damaged_bundled_catalog_is_named_with_its_fault_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from console import signatures

    broken = write(tmp_path / "signatures.yaml", "version: 1\nsignatures:\n  - id: x\n    keywords: [a: b]\n")
    monkeypatch.setattr(signatures, "bundled_catalog_path", lambda: broken)
    signatures.bundled_catalog.cache_clear()
    try:
        assert main(["signatures", "check"]) == 1
    finally:
        signatures.bundled_catalog.cache_clear()
    err = capsys.readouterr().err
    assert err.startswith(f"srt-console: {broken}: signature #1 ('x')") and "Traceback" not in err
