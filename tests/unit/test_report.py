"""The pull-request report of the seed's two twins, run for real on the `local` profile: the 1P1D
arm delivers its points, the 2P1D DPA arm is doomed by the ZMQ bind failure in every worker and
is cancelled, as the operator did on hardware."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path

import pytest

from console.cli import main
from console.clusters import local_profile
from console.engine import Engine
from console.report import attempt_triage, gather_report, render_markdown
from console.report.markdown import code, fence, text
from console.report.words import duration, furthest_stage, role_phrase
from console.results import read_points
from console.session import Session
from console.store import Store
from console.triage import diagnose_output_dir
from tests.conftest import RECIPES

ONE = "demo-dsv4-fp4-mi355x-atom-1p1d-tp8"
TWO = "demo-dsv4-fp4-mi355x-atom-2p1d-dpa-tp8"
TWINS = [str(RECIPES / "demo" / "mi355x-1p1d-tp8.yaml"), str(RECIPES / "demo" / "mi355x-2p1d-dpa-tp8.yaml")]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SRT_DEMO_SPEED", "4")
    return tmp_path / "data"


def run_the_seed_story(data_dir: Path) -> str:
    """Launch both twins; when the 2P1D attempt is doomed in every worker, report (the seed's live update), cancel
    it, and wait for both to end. Returns the report written while it was doomed."""

    async def scenario() -> str:
        engine = Engine(Store(data_dir / "console.sqlite3"), {"local": local_profile(data_dir)}, data_dir)
        session = Session.of(engine)
        sweep = await engine.launch(TWINS, "local")
        attempts = {engine.store.arm(a.arm_id).name: a for arm in engine.store.arms(sweep)  # type: ignore[union-attr]
                    for a in engine.store.attempts(arm.id)}  # fmt: skip
        two = attempts[TWO]

        def doomed() -> bool:
            row = engine.store.attempt(two.id)
            if not row.live:
                raise AssertionError(f"the 2P1D attempt ended ({row.state}) before it was seen doomed")
            found = diagnose_output_dir(row.output_dir or "", row.state) if row.state == "RUNNING" else None
            # Doomed, and seen in every worker: the moment the seed's update was written.
            return found is not None and found.verdict == "doomed" and found.deterministic

        await engine.watch(0.2, until=doomed)
        live = render_markdown(await gather_report(session, "s1"))
        await engine.cancel([engine.store.attempt(two.id)])
        await engine.wait([a.id for a in attempts.values()], 0.2)
        await session.close()
        return live

    return asyncio.run(scenario())


def test_report_of_the_seed_twins(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    live = run_the_seed_story(data_dir)
    # While doomed: the report says which arm still runs, the verdict and what to do.
    assert re.search(rf"\*\*Still running:\*\* .*{TWO} \(a2\.1, job \d+, RUNNING\)", live)
    assert re.search(r"\| a2\.1 \| \d+ \| RUNNING \| node\[1-3\] \| .* \| doomed \|", live)
    assert "cancel job" in live and "to free its 3 node(s)" in live
    assert "then both prefills and the decode (prefill_w0, prefill_w1, decode_w0) failed" in live
    assert "- Deterministic: yes, in every prefill and decode worker" in live

    assert main(["report", "s1"]) == 0
    md = capsys.readouterr().out
    store = Store(data_dir / "console.sqlite3")
    one, two = store.attempts()
    assert (one.state, two.state) == ("COMPLETED", "CANCELLED")

    # Per arm, the attempts: job ids, states, nodes, start/end and elapsed.
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"
    assert re.search(rf"\| {ONE} \| a1\.1 \| {one.job_id} \| COMPLETED \| node\[1-2\] \| {stamp} \| {stamp} \| "
                     r"\d+s \| healthy \| 6 done \|", md)  # fmt: skip
    assert re.search(rf"\| {TWO} \| a2\.1 \| {two.job_id} \| CANCELLED[^|]*\(cancelled by you\) \| node\[1-3\] \| "
                     rf"{stamp} \| {stamp} \| \d+s \| cancelled \| 5 missing \|", md)  # fmt: skip
    assert "**Still running:** none" in md

    # Provenance: simulated, the engine build, image, pinned commit, the resolved recipe's digest.
    assert "**Simulated:**" in md and "(simulated), srt-console" in md
    assert "| container image | `rocm/atom-dev:nightly_202608251555` |" in md
    assert "ATOM_COMMIT `4e0848dcdf94f3d4be0c1e3ce51db99bc93f8b8c`" in md
    assert f"sha256 `{hashlib.sha256(two.config_yaml.encode()).hexdigest()}`" in md
    assert "time_limit 04:00:00 (recipe)" in md
    # Unset values are Slurm's own default, said once.
    assert "partition Slurm default ·" in md and "Slurm default (Slurm default)" not in md

    # The furthest stage in words, the root cause quoted, where, deterministic, the advice.
    assert "Reached: All 64 model shards and CUDA-graph capture completed on both prefills and the decode" in md
    assert "Reached: All 64 model shards and CUDA-graph capture completed on the prefill and the decode" in md
    assert "Root cause: **ZMQ endpoint already bound** (`zmq-bind-in-use`)" in md
    quoted = re.search(r"```text\n(.*)\n```", md)
    assert quoted and "Address already in use" in quoted.group(1) and "EngineCore_DP" in quoted.group(1)
    # Which worker wrote the bind error first is a race between them: any of them is right.
    assert re.search(r"- Where: `logs/node\d_(?:prefill|decode)_w\d\.out:\d+`, node `node\d`, "
                     r"worker `(?:prefill|decode)_w\d`(?:, rank `DP\d`)?", md)  # fmt: skip
    assert "- Deterministic: yes, in every prefill and decode worker" in md
    assert "a plain rerun will fail the same way" in md

    # The points: the 1P1D arm's six as its result files say, the 2P1D arm's five missing.
    points = read_points(Path(one.output_dir or ""), results_root=Path(one.results_dir or "").parent,
                         job_id=one.job_id, gpus=16)  # fmt: skip
    assert [p.concurrency for p in points] == [4, 8, 16, 32, 64, 128]
    for p in points:
        assert (f"| {p.concurrency} | done | {p.output_tok_s:,.1f} | {p.total_tok_s:,.1f} | {p.tok_s_per_gpu:,.1f} | "
                f"{p.tok_s_per_user:,.1f} | {p.ttft.median:,.1f} | {p.ttft.p99:,.1f} | {p.tpot.median:,.2f} | "
                f"{p.tpot.p99:,.2f} | a1.1 |") in md  # fmt: skip
    for c in (256, 512, 768, 1024, 2048):
        assert f"| {c} | missing: " in md  # and why
    assert all(ch.isprintable() or ch == "\n" for ch in md)

    # The same facts as JSON, and saved to a file.
    assert main(["report", "s1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    arm2 = doc["arms"][1]["attempts"][0]
    assert arm2["diagnosis"]["root_cause"]["id"] == "zmq-bind-in-use" and arm2["diagnosis"]["deterministic"]
    assert arm2["provenance"]["simulated"] and "demo:" in arm2["provenance"]["resolved_recipe"]
    assert doc["still_running"] == [] and doc["simulated"]

    # Read through the log agent (as on a cluster), the logs say the same.
    async def through_the_agent() -> tuple[str | None, str, str]:
        session = Session.open()
        try:
            triage, where = await attempt_triage(session, two, timeout=60, local=False)
        finally:
            await session.close()
        assert triage is not None
        diagnosis = triage.diagnose(two.state, cancelled=True)
        root = diagnosis.root_cause.id if diagnosis.root_cause else None
        return root, where, furthest_stage(triage.snapshot(two.state))

    root, where, reached = asyncio.run(through_the_agent())
    assert (root, where) == ("zmq-bind-in-use", "cluster")
    assert reached.startswith("All 64 model shards and CUDA-graph capture completed on both prefills and the decode")

    out = data_dir.parent / "report.md"
    assert main(["report", "a2.1", "--output", str(out)]) == 0
    saved = out.read_text()
    assert saved.startswith(f"## Validation report: a2.1 {TWO}") and "zmq-bind-in-use" in saved


def test_report_refuses_unknown_ids(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "s9"]) == 1
    assert "no sweep s9" in capsys.readouterr().err
    assert main(["report", "nonsense"]) == 1
    assert "is not an id" in capsys.readouterr().err


def test_markdown_keeps_log_text_inert() -> None:
    hostile = "x ``` y | z \x1b[31mred\x1b[0m \x07bell"
    block = fence(hostile)
    assert block[0] == "````text" and block[-1] == "````" and "\x1b" not in block[1] and "\x07" not in block[1]
    assert text("a|b\x1b]0;title\x07") == "a\\|b"
    assert code("has `tick`") == "``has `tick` ``" or code("has `tick`").startswith("``")


def test_words() -> None:
    assert [role_phrase("prefill", n) for n in (1, 2, 4)] == ["the prefill", "both prefills", "all 4 prefills"]
    assert furthest_stage(None) == "no logs were read"
    assert [duration(s) for s in (None, 42, 185, 3720)] == ["-", "42s", "3m 05s", "1h 02m"]
