"""What scripts rely on: exit codes, JSON errors, refusals that say why, and no UI without a terminal."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli import main
from tests.conftest import RECIPES

DEMO = RECIPES / "demo"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SRT_CONSOLE_CONFIG", raising=False)
    monkeypatch.setenv("SRT_DEMO_SPEED", "8")
    return tmp_path / "data"


def test_exit_codes_are_documented_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["results", "--help"], ["watch", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        assert "exit codes:" in out and "130" in out and "doomed" in out
    with pytest.raises(SystemExit):
        main(["cancel", "--help"])
    assert "job:<Slurm job id>" in capsys.readouterr().out  # positional arguments have help


def test_a_missing_config_file_is_an_error_and_json_errors_are_json(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.yaml")
    assert main(["--config", missing, "status"]) == 2
    assert "no such config file" in capsys.readouterr().err
    assert main(["--config", missing, "status", "--json"]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 2 and "nope.yaml" in doc["error"]
    assert main(["watch", "a9", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["error"] == "no arm a9"


def test_an_unknown_default_cluster_is_an_error_not_local(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("clusters: {}\ndefault_cluster: mi355\n")
    assert main(["--config", str(config), "launch", str(DEMO / "quick.yaml"), "--yes"]) == 2
    err = capsys.readouterr().err
    assert f"{config}:2: default_cluster: 'mi355' is not a configured cluster" in err
    assert "local" in err  # the configured ones are named
    assert not (data_dir / "local-jobs").exists()  # nothing ran on local instead


def test_launch_refuses_a_selector_that_does_not_apply(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", f"{DEMO / 'quick.yaml'}:override_fast", "--yes"]) == 1
    err = capsys.readouterr().err
    assert "selector 'override_fast' ignored" in err and "nothing was submitted" in err


def test_status_has_a_header_and_says_when_there_is_nothing(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status"]) == 0
    assert "No sweeps yet" in capsys.readouterr().out
    assert main(["launch", str(DEMO / "quick.yaml"), "--yes", "--wait"]) == 0
    capsys.readouterr()
    assert main(["status"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["ATTEMPT", "ARM", "STATE", "JOB", "SUBMITTED", "STARTED", "ENDED", "ELAPSED"]
    (row,) = [line for line in out if line.strip().startswith("a1.1")]
    assert "COMPLETED [simulated]" in row and row.split()[-1] != "-"
    assert main(["status", "--json"]) == 0
    (attempt,) = json.loads(capsys.readouterr().out)["sweeps"][0]["arms"][0]["attempts"]
    assert attempt["simulated"] is True and attempt["times_from"] == "scheduler"
    assert attempt["started"] and attempt["ended"] and attempt["elapsed_s"] > 0


def test_the_ui_refuses_to_start_without_a_terminal(data_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "screens"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert "needs a terminal" in proc.stderr


def test_results_of_a_custom_benchmark_job_dir_are_found_outside_it(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # InferenceX's custom benchmark writes <results>/<job id>/fixed-seq/, not into the job dir.
    assert main(["launch", str(DEMO / "mi355x-1p1d-tp8.yaml"), "--yes", "--wait", "--json"]) == 0
    (attempt,) = json.loads(capsys.readouterr().out)["attempts"]
    job_dir = Path(attempt["output_dir"])
    assert not list(job_dir.rglob("*-c4.json"))
    assert main(["results", str(job_dir), "--json"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert [p["concurrency"] for p in points] == [4, 8, 16, 32, 64, 128]
    assert all(p["status"] == "done" and p["simulated"] for p in points)
    assert all("/fixed-seq/" in p["file"] for p in points)
    # Without a record of it, and no results root that has it: it says where it looked.
    stray = tmp_path / "stray" / "4242"
    stray.mkdir(parents=True)
    shutil.copy(job_dir / "config.yaml", stray / "config.yaml")
    assert main(["results", str(stray)]) == 1
    out = capsys.readouterr().out
    assert "no result files found; looked in:" in out and f"{stray} (and its logs/)" in out
    assert "local/results/4242" in out


def test_rerun_of_a_sweep_leaves_deterministic_failures_out_unless_asked(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["launch", str(DEMO / "mi355x-2p1d-dpa-tp8.yaml"), "--yes", "--wait"]) == 1
    capsys.readouterr()
    assert main(["rerun", "s1", "--yes"]) == 1  # nothing left to submit
    err = capsys.readouterr().err
    assert "deterministic" in err and "--include-deterministic reruns it" in err
    assert main(["rerun", "s1", "--yes", "--include-deterministic", "--json"]) == 0
    (attempt,) = json.loads(capsys.readouterr().out)["attempts"]
    assert attempt["id"] == "a1.2"
    assert main(["cancel", "s1", "--yes"]) in (0, 1)


def test_the_ui_refuses_an_unknown_default_cluster(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from screens.app import run

    config = tmp_path / "config.yaml"
    config.write_text("default_cluster: nowhere\n")
    assert run([], [], str(config)) == 2
    assert "default_cluster: 'nowhere' is not a configured cluster" in capsys.readouterr().err


def test_an_export_with_nothing_done_writes_nothing(tmp_path: Path) -> None:
    from console.results.export import NothingToExport, write_export

    with pytest.raises(NothingToExport, match="nothing to export: no point of s3 has a result yet"):
        write_export(tmp_path / "out", "s3", [{"concurrency": 4, "status": "missing"}])
    assert not (tmp_path / "out").exists()


def test_watch_marks_simulated_points_and_exits_by_the_verdict(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["launch", str(DEMO / "quick.yaml"), "--yes"]) == 0
    capsys.readouterr()
    assert main(["watch", "s1", "--json"]) == 0  # completed: healthy
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    points = [e for e in events if e["event"] == "point"]
    assert points and all(e["simulated"] for e in points)
    assert any(e["event"] == "state" and e["simulated"] for e in events)
    assert main(["launch", str(DEMO / "oom-graph-capture.yaml"), "--yes"]) == 0
    capsys.readouterr()
    assert main(["watch", "s2"]) == 1  # failed: non-zero for scripts
    assert "final" in capsys.readouterr().out
