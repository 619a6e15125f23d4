"""Notices: doomed or failed attempts, completed arms and ended sweeps, each once; the notify command gets JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from console.diagnosis import Diagnosis
from console.events import AttemptChanged, Notice, Triaged
from console.notify import Notifier, notify_command
from console.scheduler import JobState, JobStatus
from console.stages import Readiness, Stage, StageSnapshot
from console.store import Store


def _two_arms(tmp_path: Path) -> tuple[Store, list[int]]:
    store = Store(tmp_path / "console.sqlite3")
    sweep = store.add_sweep("s", "c", [])
    ids = []
    for name in ("one", "two"):
        arm = store.add_arm(sweep, name, f"{name}.yaml", None, None, "x: 1\n", {})
        attempt = store.add_attempt(arm, "c", "srtctl", "x: 1\n", [1])
        store.mark_submitted(attempt.id, str(10 + arm), f"/o/{arm}", None)
        store.record_status(attempt.id, JobStatus(str(10 + arm), JobState.RUNNING))
        ids.append(attempt.id)
    return store, ids


def _end(store: Store, attempt_id: int, state: JobState) -> AttemptChanged:
    attempt = store.attempt(attempt_id)
    store.record_status(attempt_id, JobStatus(attempt.job_id or "", state, reason="NonZeroExitCode"))
    return AttemptChanged(store.attempt(attempt_id))


def test_each_notice_once_and_the_sweep_ends_with_its_last_arm(tmp_path: Path) -> None:
    store, (first, second) = _two_arms(tmp_path)
    notifier = Notifier(store)
    got: list[Notice] = []
    notifier.subscribe(got.append)
    doomed = Diagnosis(root_cause=None, consequences=(), verdict="doomed", advice="cancel it", deterministic=True)
    triaged = Triaged(first, doomed, StageSnapshot(Stage.STARTING, Readiness()), [])
    notifier.feed(triaged)
    notifier.feed(triaged)  # the same verdict again: no second notice
    notifier.feed(_end(store, first, JobState.FAILED))
    notifier.feed(AttemptChanged(store.attempt(first)))  # repeated: nothing new
    notifier.feed(_end(store, second, JobState.COMPLETED))
    assert [(n.kind, n.attempt or n.sweep) for n in got] == [
        ("attempt_doomed", "a1.1"),
        ("attempt_failed", "a1.1"),
        ("arm_completed", "a2.1"),
        ("sweep_ended", "s1"),
    ]
    assert got[1].text == "a1.1 FAILED: NonZeroExitCode" and got[0].severity == "error"
    assert got[3].text == "s1 ended: 1/2 arm(s) completed" and got[3].severity == "warning"
    assert got[0].to_json()["event"] == "attempt_doomed" and got[0].to_json()["detail"] == "cancel it"


def test_a_cancel_by_you_is_not_a_failure(tmp_path: Path) -> None:
    store, (first, _) = _two_arms(tmp_path)
    notifier = Notifier(store)
    store.mark_cancel_requested([first])
    assert notifier.feed(_end(store, first, JobState.CANCELLED)) == []


def test_the_notify_command_gets_the_notice_as_json(tmp_path: Path) -> None:
    store, (first, _) = _two_arms(tmp_path)
    out = tmp_path / "got.json"
    script = f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read())"
    command, problem = notify_command([sys.executable, "-c", script])
    assert problem is None
    notifier = Notifier(store, command)

    async def scenario() -> None:
        notifier.feed(_end(store, first, JobState.FAILED))
        await notifier.close()

    asyncio.run(scenario())
    doc = json.loads(out.read_text())
    assert (doc["event"], doc["attempt"], doc["state"], doc["arm_name"]) == ("attempt_failed", "a1.1", "FAILED", "one")


def test_a_failing_notify_command_is_reported(tmp_path: Path) -> None:
    store, (first, _) = _two_arms(tmp_path)
    notifier = Notifier(store, [sys.executable, "-c", "import sys; sys.stderr.write('no webhook'); sys.exit(3)"])
    got: list[Notice] = []
    notifier.subscribe(got.append)

    async def scenario() -> None:
        notifier.feed(_end(store, first, JobState.FAILED))
        await notifier.close()

    asyncio.run(scenario())
    assert got[-1].kind == "notify_failed" and got[-1].text == "notify command exited 3: no webhook"
    assert notify_command("notify-send 'srt console'") == (["notify-send", "srt console"], None)
    assert notify_command(42)[1] == "config: notify: expected a command (a string or a list of arguments)"
