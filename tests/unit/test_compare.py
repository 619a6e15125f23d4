"""`compare A B`: a real demo run of the seed's 1P1D twin as the baseline, and a results directory
made from its files with known changes as the candidate: exactly the regressed points are flagged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from console.cli import main
from console.compare import Side, SidePoint, compare
from console.results import LatencyStats, PointResult
from console.store import Store
from tests.conftest import RECIPES


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SRT_DEMO_SPEED", "8")
    return tmp_path / "data"


def _edit(path: Path, **factors: float) -> None:
    doc = json.loads(path.read_text())
    for key, factor in factors.items():
        doc[key] = doc[key] * factor
    path.write_text(json.dumps(doc))


def candidate_from(baseline_results: Path, job_dir: Path, target: Path) -> None:
    """The baseline's files with known changes: c8's throughput -10 %, c32's TTFT p99 +20 %,
    c64's throughput -3 % (within 5 %), c128 gone, a c256 only here."""
    target.mkdir()
    shutil.copy(job_dir / "config.yaml", target / "config.yaml")
    files = {int(p.stem.rsplit("-c", 1)[1]): p for p in (baseline_results / "fixed-seq").glob("*.json")}
    for conc, path in files.items():
        if conc != 128:
            shutil.copy(path, target / path.name)
    name = files[8].name
    _edit(target / name, output_throughput=0.90, total_token_throughput=0.90)
    _edit(target / files[32].name, p99_ttft_ms=1.20)
    _edit(target / files[64].name, output_throughput=0.97)
    shutil.copy(files[128], target / files[128].name.replace("-c128", "-c256"))


def test_compare_flags_exactly_the_regressed_points(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["launch", str(RECIPES / "demo" / "mi355x-1p1d-tp8.yaml"), "--yes", "--wait"]) == 0
    (attempt,) = Store(data_dir / "console.sqlite3").attempts()
    assert attempt.state == "COMPLETED" and attempt.results_dir
    candidate = tmp_path / "candidate"
    candidate_from(Path(attempt.results_dir), Path(attempt.output_dir or ""), candidate)
    capsys.readouterr()

    assert main(["compare", "a1.1", str(candidate), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    regressed = {r["concurrency"]: set(r["metrics"]) for r in doc["regressions"]}
    assert regressed == {8: {"output_tok_s", "total_tok_s", "tok_s_per_gpu"}, 32: {"ttft_p99"}}
    assert [p["concurrency"] for p in doc["points"]] == [4, 8, 16, 32, 64]
    c64 = next(p for p in doc["points"] if p["concurrency"] == 64)
    assert c64["regressed"] == [] and round(c64["deltas"]["output_tok_s"]["pct"], 1) == -3.0
    # c128 is expected by the candidate's config, and missing there.
    assert [(x["a"]["concurrency"], x["b"]["status"]) for x in doc["lost"]] == [(128, "missing")]
    assert [p["concurrency"] for p in doc["only_in_b"]] == [256]
    assert (doc["points"][0]["isl"], doc["points"][0]["osl"]) == (8192, 1024)

    # A looser threshold lets the 10 % throughput drop pass; the 20 % TTFT rise still fails.
    assert main(["compare", "a1.1", str(candidate), "--json", "--threshold", "15"]) == 1
    loose = json.loads(capsys.readouterr().out)
    assert {r["concurrency"]: r["metrics"] for r in loose["regressions"]} == {32: ["ttft_p99"]}

    assert main(["compare", "a1.1", str(candidate), "--markdown"]) == 1
    md = capsys.readouterr().out
    assert "**output tok/s, total tok/s, tok/s/GPU**" in md and "**TTFT p99 ms**" in md
    assert "- c128 ISL/OSL 8192/1024: missing" in md and "- c256 ISL/OSL 8192/1024: done" in md

    # The run against itself, and against its own files: nothing regressed, exit 0.
    assert main(["compare", "a1", "a1.1"]) == 0
    assert "no regression" in capsys.readouterr().out
    assert main(["compare", "s1", str(Path(attempt.results_dir))]) == 0
    capsys.readouterr()


def test_compare_usage_errors(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "a1", "a2"]) == 2
    assert "no arm a1" in capsys.readouterr().err
    assert main(["compare", "nowhere", "a1"]) == 2
    assert "is not an id" in capsys.readouterr().err
    assert main(["compare", "a1", "a2", "--threshold", "-1"]) == 2


def _point(conc: int, out: float, ttft99: float, status: str = "done") -> SidePoint:
    return SidePoint(PointResult(conc, status, output_tok_s=out, ttft=LatencyStats(median=100, p99=ttft99)), 1024, 1024)  # type: ignore[arg-type]


def test_matching_by_isl_osl_and_status() -> None:
    a = Side("A", [_point(4, 100, 200), _point(8, 200, 300), _point(16, 300, 400, "invalid")])
    other_seq = SidePoint(PointResult(4, "done", output_tok_s=1.0), 2048, 1024)
    b = Side("B", [other_seq, _point(4, 100, 200), _point(8, 200, 360), _point(16, 290, 400)])
    result = compare(a, b)
    assert [(m.a.concurrency, m.regressed) for m in result.matched] == [(4, ()), (8, ("ttft_p99",))]
    # Not done in A but done in B: new in B; the other ISL/OSL point is B's alone.
    assert sorted((p.concurrency, p.isl) for p in result.new) == [(4, 2048), (16, 1024)]
    assert not result.ok and result.lost == []
