"""`srt-console results` and `srt-console rerun` on the local profile and on job output dirs."""

from __future__ import annotations

import asyncio
import csv
import importlib.util
import io
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from console.cli import main
from console.clusters import local_profile
from console.engine import Engine
from console.results import read_remote_points
from console.store import Store
from console.transport.local import LocalTransport
from tests.conftest import RECIPES, ROOT

DEMO = RECIPES / "demo"
BIG_NAME = "results_concurrency_2048_gpus_24_ctx_8_gen_16.json"


def _bench_results() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_results", ROOT / "benchmarks" / "bench_results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rchar() -> int:
    with open("/proc/self/io", "rb") as f:
        for line in f:
            if line.startswith(b"rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar")


@pytest.fixture(scope="module")
def big_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A job output dir with one ~300 MB sa-bench result, and the scalars written into it."""
    job = tmp_path_factory.mktemp("big") / "41001"
    sub = job / "logs" / "sa-bench_isl_8192_osl_1024"
    sub.mkdir(parents=True)
    fields = _bench_results().write_result(sub / BIG_NAME, 300 * 1024 * 1024)
    return job, fields


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SRT_DEMO_SPEED", "4")
    return tmp_path / "data"


def test_results_of_a_300mb_file_read_head_and_tail_only(
    big_job: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    job, fields = big_job
    path = job / "logs" / "sa-bench_isl_8192_osl_1024" / BIG_NAME
    assert path.stat().st_size > 290 * 1024 * 1024
    before = _rchar()
    assert main(["results", str(job), "--json"]) == 0
    read = _rchar() - before
    (point,) = json.loads(capsys.readouterr().out)["points"]
    assert read < 1024 * 1024, f"{read} bytes read for a {path.stat().st_size} byte file"
    assert point["bytes_read"] <= 32 * 1024
    assert point["concurrency"] == 2048 and point["status"] == "done"
    assert point["output_tok_s"] == pytest.approx(fields["output_throughput"])
    assert point["total_tok_s"] == pytest.approx(fields["total_token_throughput"])
    assert point["tok_s_per_gpu"] == pytest.approx(fields["total_token_throughput"] / 24)
    assert point["tok_s_per_user"] == pytest.approx(1000 / fields["median_tpot_ms"])
    assert point["ttft_ms"] == {
        "mean": pytest.approx(fields["mean_ttft_ms"]),
        "median": pytest.approx(fields["median_ttft_ms"]),
        "p99": pytest.approx(fields["p99_ttft_ms"]),
    }
    assert point["e2el_ms"]["p99"] == pytest.approx(fields["p99_e2el_ms"])
    assert point["completed"] == fields["completed"] and point["file"] == str(path)


def test_results_over_a_transport_read_head_and_tail_only(big_job: tuple[Path, dict[str, Any]]) -> None:
    job, fields = big_job
    reads: list[tuple[str, int, int | None, int]] = []

    class Counting(LocalTransport):
        async def read_file(self, path: str, offset: int = 0, length: int | None = None, **kw: Any) -> bytes:
            data = await super().read_file(path, offset, length, **kw)
            reads.append((path, offset, length, len(data)))
            return data

    got = asyncio.run(read_remote_points(Counting(), str(job), gpus=24))
    (point,) = got.points
    assert point.status == "done" and point.tok_s_per_gpu == pytest.approx(fields["total_token_throughput"] / 24)
    assert [(offset, length) for _, offset, length, _ in reads] == [(0, 16384), (-16384, None)]
    assert got.bytes_read == sum(n for *_, n in reads) == 32768


def test_truncated_file_is_incomplete_and_expected_points_are_missing(
    tmp_path: Path, big_job: tuple[Path, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    job = tmp_path / "41002"
    sub = job / "logs" / "sa-bench_isl_8192_osl_1024"
    sub.mkdir(parents=True)
    source = big_job[0] / "logs" / "sa-bench_isl_8192_osl_1024" / BIG_NAME
    with source.open("rb") as src, (sub / "results_concurrency_64_gpus_24.json").open("wb") as dst:
        dst.write(src.read(5 * 1024 * 1024))  # cut in the middle of the per-request arrays
    shutil.copy(DEMO / "crash-at-concurrency.yaml", job / "config.yaml")
    assert main(["results", str(job), "--json"]) == 1  # points missing or invalid: non-zero for scripts
    points = {p["concurrency"]: p for p in json.loads(capsys.readouterr().out)["points"]}
    assert points[64]["status"] == "incomplete"
    assert {c: p["status"] for c, p in points.items() if c != 64} == {
        8: "missing", 16: "missing", 32: "missing", 128: "missing", 256: "missing",
    }  # fmt: skip


def test_results_and_rerun_of_an_arm(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", str(DEMO / "flake-first-attempt.yaml"), "--yes", "--wait", "--json"]) == 1
    capsys.readouterr()
    assert main(["results", "a1", "--json"]) == 1  # every point missing
    points = json.loads(capsys.readouterr().out)["points"]
    assert [(p["concurrency"], p["status"], p["arm"]) for p in points] == [
        (8, "missing", "demo-flake-first-attempt"),
        (16, "missing", "demo-flake-first-attempt"),
        (32, "missing", "demo-flake-first-attempt"),
    ]
    # Each says why; the demo launcher's attempts are marked simulated.
    assert all(p["invalid_reason"].startswith("never ran (a1.1 ended FAILED") for p in points), points
    assert all(p["simulated"] for p in points)
    assert main(["rerun", "a1", "--missing", "--yes", "--wait", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (plan,) = doc["plans"]
    assert (plan["arm"], plan["concurrencies"], plan["missing_only"]) == ("a1", [8, 16, 32], True)
    (attempt,) = doc["attempts"]
    assert (attempt["id"], attempt["state"], attempt["concurrencies"]) == ("a1.2", "COMPLETED", [8, 16, 32])

    assert main(["results", "s1", "--csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["concurrency"], r["status"], r["attempt"]) for r in rows] == [
        ("8", "done", "a1.2"),
        ("16", "done", "a1.2"),
        ("32", "done", "a1.2"),
    ]
    assert all(float(r["tok_s_per_gpu"]) > 0 and r["arm"] == "demo-flake-first-attempt" for r in rows)
    assert {r["simulated"] for r in rows} == {"yes"}
    assert main(["results", "a1.1", "--json"]) == 1
    assert {p["status"] for p in json.loads(capsys.readouterr().out)["points"]} == {"missing"}

    assert main(["rerun", "s1", "--yes"]) == 1  # nothing failed any more
    assert "no failed arm" in capsys.readouterr().err
    assert main(["rerun", "a1", "--missing", "--yes"]) == 1
    assert "nothing is missing" in capsys.readouterr().err


def test_rerun_prints_the_plan_and_refuses_a_live_arm(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["launch", str(DEMO / "health-hang.yaml"), "--yes", "--json"]) == 0
    capsys.readouterr()
    assert main(["rerun", "a1", "--yes"]) == 1
    err = capsys.readouterr().err
    assert "a1.1 is still" in err and "cancel it first" in err
    assert main(["cancel", "a1", "--yes"]) == 0
    capsys.readouterr()

    async def settle() -> None:
        engine = Engine(Store(data_dir / "console.sqlite3"), {"local": local_profile(data_dir)}, data_dir)
        await engine.wait([a.id for a in engine.store.attempts()], 0.2)
        await engine.close()

    asyncio.run(settle())
    assert main(["rerun", "a1"]) == 1  # not a terminal, no --yes: the plan is shown, nothing submitted
    captured = capsys.readouterr()
    assert "Rerun 1 arm(s):" in captured.out and "whole arm again on local" in captured.out
    assert "add --yes" in captured.err
    assert main(["status", "--json"]) == 0
    (arm,) = json.loads(capsys.readouterr().out)["sweeps"][0]["arms"]
    assert len(arm["attempts"]) == 1


def test_results_bad_targets(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", "nonsense"]) == 1
    assert "not an id" in capsys.readouterr().err
    assert main(["results", "a9"]) == 1
    assert "no arm a9" in capsys.readouterr().err


def test_rerun_missing_points_from_a_fixed_config(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["launch", str(DEMO / "crash-at-concurrency.yaml"), "--yes", "--wait", "--json"]) == 1
    capsys.readouterr()
    store = Store(data_dir / "console.sqlite3")
    config = yaml.safe_load(store.attempts()[0].config_yaml)
    config["demo"]["faults"] = []  # the fix the operator pinned
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(yaml.safe_dump(config))
    assert main(["rerun", "a1", "--missing", "--from", str(fixed), "--yes", "--wait", "--json"]) == 0
    (attempt,) = json.loads(capsys.readouterr().out)["attempts"]
    assert (attempt["state"], attempt["concurrencies"]) == ("COMPLETED", [64, 128, 256])
    assert main(["results", "a1", "--json"]) == 0
    points = json.loads(capsys.readouterr().out)["points"]
    assert [(p["concurrency"], p["status"], p["attempt"]) for p in points] == [
        (8, "done", "a1.1"), (16, "done", "a1.1"), (32, "done", "a1.1"),
        (64, "done", "a1.2"), (128, "done", "a1.2"), (256, "done", "a1.2"),
    ]  # fmt: skip
