"""`srt-console scan`: offline triage of log files and job output dirs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from console.cli import main

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = yaml.safe_load((DATA / "failure-examples.yaml").read_text(encoding="utf-8"))
SEED_JOB = DATA / "logs" / "seed-39443"
OK_JOB = DATA / "logs" / "sweep-41001-ok"
FINDING_KEYS = {"id", "category", "severity", "file", "line_no", "text", "captures"}
OPTIONAL_FINDING_KEYS = {"node", "worker", "rank"}


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["scan", "--json", *args]) in (0, 1)  # 1: the verdict is failed or doomed
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert isinstance(doc, dict)
    return doc


def test_every_failure_example_is_found_under_its_id_at_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected: dict[int, str] = {}
    lines: list[str] = []
    for entry in EXAMPLES["signatures"]:
        for example in entry["examples"]:
            lines.append(example)
            expected[len(lines)] = entry["id"]
            lines.append("INFO 10-15 08:32:29 [core.py:708] an ordinary line between examples")
    log = tmp_path / "examples.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")

    doc = run_json(capsys, str(log))
    found = {f["line_no"]: f for f in doc["findings"]}  # type: ignore[union-attr]
    assert len(expected) == sum(len(e["examples"]) for e in EXAMPLES["signatures"])
    for line_no, sig_id in expected.items():
        assert line_no in found, f"line {line_no} ({sig_id}) not found: {lines[line_no - 1]!r}"
        assert found[line_no]["id"] == sig_id, lines[line_no - 1]
        assert found[line_no]["file"] == str(log)
        assert found[line_no]["text"] == lines[line_no - 1]
    assert set(found) == set(expected)  # the ordinary lines in between found nothing


def test_benign_lines_find_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "benign.log"
    log.write_text("\n".join(EXAMPLES["benign"]) + "\n", encoding="utf-8")
    doc = run_json(capsys, str(log))
    assert doc["findings"] == []
    assert doc["stage"] is None  # no orchestrator log was read
    diagnosis = doc["diagnosis"]
    assert isinstance(diagnosis, dict)
    assert diagnosis["root_cause"] is None and diagnosis["verdict"] == "healthy"


def test_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    doc = run_json(capsys, str(SEED_JOB), "--state", "running")
    assert {"findings", "diagnosis"} <= set(doc)
    findings = doc["findings"]
    assert isinstance(findings, list) and findings
    for finding in findings:
        assert FINDING_KEYS <= set(finding) <= FINDING_KEYS | OPTIONAL_FINDING_KEYS
        assert isinstance(finding["line_no"], int) and finding["line_no"] >= 1
        assert isinstance(finding["captures"], dict)
        assert finding["severity"] in {"fatal", "error", "warning"}
        assert finding["category"] in {"startup", "runtime", "infra", "scheduler"}
    diagnosis = doc["diagnosis"]
    assert isinstance(diagnosis, dict)
    assert {"root_cause", "consequences", "verdict", "advice"} <= set(diagnosis)
    assert diagnosis["verdict"] == "doomed"
    root = diagnosis["root_cause"]
    assert isinstance(root, dict) and set(root) >= FINDING_KEYS and root["id"] == "zmq-bind-in-use"
    assert isinstance(diagnosis["consequences"], list)
    assert "cancel job 39443 to free its 3 node(s)" in str(diagnosis["advice"])
    assert doc["stage"] == "Awaiting Workers" and doc["readiness"] == "0/2P 0/1D"
    assert isinstance(doc["workers"], dict) and len(doc["workers"]) == 3


def test_directory_scan_of_a_job_dir_and_its_logs_dir(capsys: pytest.CaptureFixture[str]) -> None:
    by_job = run_json(capsys, str(SEED_JOB))
    by_logs = run_json(capsys, str(SEED_JOB / "logs"))
    files = {f["file"] for f in by_job["findings"]}  # type: ignore[union-attr]
    assert {Path(f).name for f in files} == {
        "sweep_39443.log",
        "mi355x-a01_prefill_w0.out",
        "mi355x-a02_prefill_w1.out",
        "mi355x-a03_decode_w0.out",
    }
    assert len(by_job["findings"]) == len(by_logs["findings"])  # type: ignore[arg-type]
    assert by_job["diagnosis"]["verdict"] == "failed"  # type: ignore[index]  # no --state: the job is over


def test_text_report_puts_the_root_cause_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(SEED_JOB), "--state", "RUNNING"]) == 1  # doomed
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1] == "verdict: doomed (scheduler state RUNNING)"
    assert lines[2].startswith("root cause: zmq-bind-in-use")
    assert "hint: " in out and "advice: cancel job 39443 to free its 3 node(s): it cannot recover" in out
    assert out.index("root cause:") < out.index("consequences:") < out.index("findings:")
    assert "engine-init-failed (wrapper)" in out
    assert "deterministic" in out


def test_healthy_job_dir(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(OK_JOB)]) == 0
    out = capsys.readouterr().out
    assert "verdict: healthy" in out and "stage: Completed   readiness 2/2P 1/1D" in out
    assert "findings: none" in out


def test_missing_path_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(tmp_path / "nope.log")]) == 2
    err = capsys.readouterr().err
    assert "nope.log: no such file or directory" in err and "Traceback" not in err


def test_binary_file_exits_2_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blob = tmp_path / "core.bin"
    blob.write_bytes(bytes(range(256)) * 64)
    assert main(["scan", str(blob)]) == 2
    captured = capsys.readouterr()
    assert "core.bin: binary file, not a log" in captured.err
    assert captured.out == "" and "Traceback" not in captured.err


def test_unreadable_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = tmp_path / "locked.log"
    locked.write_text("x\n")
    import console.cli.scan_cmd as scan_cmd

    real_open = scan_cmd.open_regular

    def refuse(path: str, roots: list[str] | None = None) -> int:
        if path.endswith("locked.log"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, roots)

    monkeypatch.setattr(scan_cmd, "open_regular", refuse)
    assert main(["scan", str(locked)]) == 2
    err = capsys.readouterr().err
    assert "locked.log: cannot read: Permission denied" in err and "Traceback" not in err


def test_binary_files_in_a_directory_are_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "job" / "logs"
    logs.mkdir(parents=True)
    (logs / "n1_prefill_w0.out").write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n")
    (logs / "trace.log").write_bytes(b"\x1f\x8b\x08\x00" + bytes(200))
    (logs / "config.json").write_text("{}")
    assert main(["scan", "--json", str(tmp_path / "job")]) == 1  # failed: gpu-oom
    captured = capsys.readouterr()
    assert [f["id"] for f in json.loads(captured.out)["findings"]] == ["gpu-oom"]
    assert "trace.log: binary file, not a log (skipped)" in captured.err


def test_empty_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", str(tmp_path)]) == 2
    assert "no log files" in capsys.readouterr().err


def test_invalid_state_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["scan", str(SEED_JOB), "--state", "SLEEPING"])
    assert exc.value.code == 2


def test_ten_megabyte_line_does_not_blow_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "huge.log"
    with log.open("w", encoding="utf-8") as fh:
        fh.write("first line\n")
        fh.write("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557') " + "A" * (10 << 20) + "\n")
        fh.write("\x1b[31m" + "B" * (10 << 20) + "\x00\n")
        fh.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n")
    doc = run_json(capsys, str(log))
    findings = doc["findings"]
    assert [(f["id"], f["line_no"]) for f in findings] == [("zmq-bind-in-use", 2), ("gpu-oom", 4)]  # type: ignore[union-attr]
    assert all(len(f["text"]) <= 4096 for f in findings)  # type: ignore[union-attr]


def test_hostile_content_is_cleaned_in_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "hostile.log"
    log.write_bytes(
        b"\x1b]0;pwned\x07\x1b[1;31m[bold]torch.OutOfMemoryError\x1b[0m: CUDA out of memory. "
        b"Tried to allocate 1.00 GiB \xff\xfe\n"
    )
    doc = run_json(capsys, str(log))
    [finding] = doc["findings"]  # type: ignore[misc]
    assert "\x1b" not in finding["text"] and "pwned" not in finding["text"]
    assert finding["text"].startswith("[bold]torch.OutOfMemoryError")  # markup kept as text
    assert "\ufffd" in finding["text"]


def test_console_script_runs_scan(tmp_path: Path) -> None:
    log = tmp_path / "one.log"
    log.write_text("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557')\n")
    proc = subprocess.run(
        [sys.executable, "-m", "console", "scan", "--json", str(log)], capture_output=True, text=True, check=False
    )
    doc = json.loads(proc.stdout)
    assert proc.returncode == 1, proc.stderr  # a failed verdict: non-zero for scripts
    assert doc["diagnosis"]["verdict"] in ("failed", "doomed")
    assert doc["findings"][0]["id"] == "zmq-bind-in-use"
    assert doc["diagnosis"]["root_cause"]["id"] == "zmq-bind-in-use"
