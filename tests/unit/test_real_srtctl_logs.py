"""Triage, stages and results on job dirs the real srtctl wrote (tests/data/real-srtctl/).

The live path is tested on the cluster (tests/integration/test_real_srtctl.py); these keep what
the console makes of real srtctl output in the fast suite, line by line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import main
from console.results import read_points
from console.stages import Stage
from console.triage import Triage, read_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "real-srtctl"
COMPLETED = DATA / "1p1d-completed"
NO_PLUGIN = DATA / "no-container-plugin"


def scan(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    main(["scan", "--json", *args])
    doc = json.loads(capsys.readouterr().out)
    assert isinstance(doc, dict)
    return doc


def test_a_completed_real_job_is_healthy_and_its_teardown_is_no_failure(capsys: pytest.CaptureFixture[str]) -> None:
    doc = scan(capsys, str(COMPLETED))
    diagnosis = doc["diagnosis"]
    assert isinstance(diagnosis, dict)
    assert diagnosis["verdict"] == "healthy" and diagnosis["root_cause"] is None, diagnosis
    assert doc["stage"] == "Completed" and doc["readiness"] == "1/1P 1/1D"
    workers = doc["workers"]
    assert isinstance(workers, dict) and {w["stage"] for w in workers.values()} == {"ready"}
    # srtctl's cleanup stopped etcd, cancelled the steps and killed the workers: shown apart.
    torn = {g["id"] for g in diagnosis["teardown"]}
    assert {"slurm-job-cancelled", "srun-task-failed"} <= torn, torn


def test_real_stage_lines_in_order() -> None:
    """srtctl's real sweep log, fed line by line, walks the stages in order and ends Completed."""
    triage = Triage()
    sweep = COMPLETED / "logs" / "sweep_21186533.log"
    seen = []
    with sweep.open("rb") as handle:
        lines = list(read_lines(handle))
    for line in lines:
        for change in triage.feed(str(sweep), [line]).changes:
            if change.subject == "stage":
                seen.append(change.new)
    order = [s.value for s in Stage]
    assert seen == sorted(seen, key=order.index), seen
    assert seen[0] == "Starting" and seen[-1] == "Completed"
    assert {"Starting Infra", "Head Ready", "Starting Workers", "Starting Frontend", "Awaiting Workers",
            "Benchmarking"} <= set(seen)  # fmt: skip
    assert triage.snapshot().readiness.label == "1/1P 1/1D"


def test_real_result_files_give_their_own_numbers() -> None:
    points = {p.concurrency: p for p in read_points(COMPLETED)}
    assert sorted(points) == [1, 2, 4]
    for conc, point in points.items():
        (path,) = (COMPLETED / "logs").glob(f"sa-bench_*/results_concurrency_{conc}_gpus_16_ctx_8_gen_8.json")
        doc = json.loads(path.read_text())
        assert point.status == "done"
        assert point.output_tok_s == pytest.approx(doc["output_throughput"])
        assert point.ttft.median == pytest.approx(doc["median_ttft_ms"])
        assert point.gpus == 16


def test_no_container_plugin_is_doomed_deterministic_while_running(capsys: pytest.CaptureFixture[str]) -> None:
    sweep = NO_PLUGIN / "logs" / "sweep_21203422.log"
    with sweep.open("rb") as handle:
        lines = list(read_lines(handle))
    refused = next(i for i, line in enumerate(lines) if "unrecognized option '--container-image'" in line)
    # As the console saw it live: up to the srun line, while Slurm still runs the job.
    triage = Triage()
    triage.feed(str(sweep), lines[: refused + 2])
    diagnosis = triage.diagnose("RUNNING")
    assert diagnosis.root_cause is not None and diagnosis.root_cause.id == "srtctl-container-plugin-missing"
    assert diagnosis.root_cause.first.line_no == refused + 1
    assert diagnosis.verdict == "doomed" and diagnosis.deterministic
    assert "cancel job 21203422" in diagnosis.advice
    # The operator cancelled it: that is the end, not another failure to read logs for.
    whole = Triage()
    whole.feed(str(sweep), lines)
    after = whole.diagnose("CANCELLED", cancelled=True)
    assert after.verdict == "cancelled" and "cancelled by you" in after.advice
    assert after.root_cause is not None and after.root_cause.id == "srtctl-container-plugin-missing"


def test_srtctl_apply_mock_orchestrator_log_is_read_in_its_own_format(capsys: pytest.CaptureFixture[str]) -> None:
    """`srtctl apply --mock` runs the real orchestrator and logs `HH:MM:SS | INFO | ...` to
    mock_worker.log beside logs/: its stages are srtctl's, in order, to Completed."""
    mock = DATA / "apply-mock"
    log = mock / "mock_worker.log"
    with log.open("rb") as handle:
        lines = list(read_lines(handle))
    triage = Triage()
    seen = [c.new for line in lines for c in triage.feed(str(log), [line]).changes if c.subject == "stage"]
    order = [s.value for s in Stage]
    assert seen == sorted(seen, key=order.index), seen
    assert {"Starting Infra", "Head Ready", "Starting Workers", "Benchmarking"} <= set(seen)
    assert seen[-1] == "Completed"
    doc = scan(capsys, str(mock))
    assert doc["stage"] == "Completed" and doc["diagnosis"]["verdict"] == "healthy"  # type: ignore[index]


@pytest.mark.parametrize(
    ("name", "component"), [("node1_prefill_w0.out", "prefill"), ("node2_decode_w0.out", "backend")]
)
def test_real_mocker_worker_is_up_then_ready_at_its_generate_endpoint(name: str, component: str) -> None:
    """Dynamo's mocker loads nothing: it is up when its workers run, ready when its generate
    endpoint is registered (an event channel registering with discovery earlier is not that)."""
    path = COMPLETED / "logs" / name
    with path.open("rb") as handle:
        lines = list(read_lines(handle))
    triage = Triage()
    changes = [(c.new, c.line_no) for c in triage.feed(str(path), lines).changes]
    by_stage = dict(changes)
    assert [stage for stage, _ in changes] == ["starting", "server up", "ready", "failed"]
    assert "All 1 mocker worker(s) created and running" in lines[by_stage["server up"] - 1]
    assert f"Registered endpoint 'dynamo.{component}.generate'" in lines[by_stage["ready"] - 1]
    publisher = next(i for i, ln in enumerate(lines, 1) if "EventPublisher registered with discovery" in ln)
    if component == "backend":
        assert publisher < by_stage["ready"]  # the decode's first event channel comes before its endpoint
    assert "CANCELLED AT" in lines[by_stage["failed"] - 1]  # srtctl's cleanup, undone once the run succeeded
    assert triage.snapshot("COMPLETED").workers[path.stem].stage.value == "failed"
    real_triage = Triage()
    for log in [*sorted((COMPLETED / "logs").glob("*.out")), COMPLETED / "logs" / "sweep_21186533.log"]:
        with log.open("rb") as handle:
            real_triage.feed(str(log), list(read_lines(handle)))
    assert real_triage.snapshot("COMPLETED").workers[path.stem].stage.value == "ready"
