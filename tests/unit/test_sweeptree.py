"""The sweep tree: sweep → arm → attempts, the state filter, sorting and the summary line."""

from __future__ import annotations

from pathlib import Path

from console.scheduler import JobState, JobStatus
from console.store import Store
from console.sweeptree import Tree, TreeView, summary_label


def _store(tmp_path: Path) -> tuple[Store, dict[str, int]]:
    store = Store(tmp_path / "console.sqlite3")
    s1 = store.add_sweep("first", "c", [])
    ids: dict[str, int] = {}
    for name, states in (("ok", ["COMPLETED"]), ("flaky", ["FAILED", "RUNNING"]), ("broken", ["FAILED"])):
        arm = store.add_arm(s1, name, f"{name}.yaml", None, None, "x: 1\n", {})
        for n, state in enumerate(states):
            attempt = store.add_attempt(arm, "c", "srtctl", "x: 1\n", [1])
            job = f"{arm}{n}"
            store.mark_submitted(attempt.id, job, f"/o/{job}", None)
            store.record_status(
                attempt.id, JobStatus(job, JobState(state), start_time=1000.0 + arm, end_time=2000.0 + arm)
            )
            ids[f"{name}.{n + 1}"] = attempt.id
    s2 = store.add_sweep("second", "c", [])
    arm = store.add_arm(s2, "waiting", "w.yaml", None, None, "x: 1\n", {})
    attempt = store.add_attempt(arm, "c", "demo", "x: 1\n", [1])
    store.mark_submitted(attempt.id, "99", "/o/99", None)
    ids["waiting.1"] = attempt.id
    return store, ids


def _tree(store: Store, verdicts: dict[int, str] | None = None) -> Tree:
    return Tree.of(store.sweeps(), store.arms(), store.attempts(), verdicts)


def test_rows_nest_sweep_arm_attempts_and_arms_stand_for_their_last_attempt(tmp_path: Path) -> None:
    store, _ = _store(tmp_path)
    rows = _tree(store).rows()
    assert [(r.level, r.key) for r in rows] == [
        (0, "s1"), (1, "a1"), (2, "a1.1"), (1, "a2"), (2, "a2.1"), (2, "a2.2"), (1, "a3"), (2, "a3.1"),
        (0, "s2"), (1, "a4"), (2, "a4.1"),
    ]  # fmt: skip
    by_key = {r.key: r for r in rows}
    assert (by_key["a2"].state, by_key["a2"].category, by_key["a2"].children) == ("RUNNING", "running", 2)
    assert by_key["s1"].state == "1 running, 1 failed, 1 done"
    assert by_key["a4"].simulated and by_key["s2"].simulated and not by_key["s1"].simulated
    # The scheduler's times, not when the console noticed.
    assert (by_key["a1.1"].started, by_key["a1.1"].ended, by_key["a1.1"].elapsed) == (1001.0, 2001.0, 1000.0)
    assert by_key["a4.1"].started is None and by_key["a4"].category == "pending"


def test_filter_keeps_matching_arms_and_their_sweeps(tmp_path: Path) -> None:
    store, ids = _store(tmp_path)
    tree = _tree(store)
    failed = tree.rows(TreeView(state_filter="failed"))
    assert [r.key for r in failed] == ["s1", "a3", "a3.1"]
    view = TreeView()
    seen = []
    for _ in range(6):
        view = view.next_filter()
        seen.append(view.state_filter)
    assert seen == ["running", "pending", "failed", "done", "doomed", "all"]
    # A live attempt the monitor diagnosed as doomed is counted and filtered as doomed.
    doomed = _tree(store, {ids["flaky.2"]: "doomed"})
    assert [r.key for r in doomed.rows(TreeView(state_filter="doomed"))] == ["s1", "a2", "a2.1", "a2.2"]
    assert summary_label(doomed.summary()) == "0 running · 1 pending · 1 failed · 1 done · 1 doomed"


def test_sorting_by_any_column_and_again_reverses(tmp_path: Path) -> None:
    store, _ = _store(tmp_path)
    tree = _tree(store)
    by_name = TreeView().sorted_by("name")
    arms = [r.name for r in tree.rows(by_name) if r.kind == "arm"]
    assert arms == ["broken", "flaky", "ok", "waiting"]  # sweeps sorted too: first < second
    reverse = by_name.sorted_by("name")
    assert reverse.descending and [r.name for r in tree.rows(reverse) if r.kind == "arm"] == [
        "waiting", "ok", "flaky", "broken",
    ]  # fmt: skip
    by_state = [r.key for r in tree.rows(TreeView(sort="state")) if r.kind == "arm"]
    assert by_state[:2] == ["a3", "a2"]  # failed first, then running
    for column in ("elapsed", "job", "submitted", "started", "ended", "cluster", "nodes", "reason", "id"):
        assert len(tree.rows(TreeView(sort=column))) == 11


def test_collapsed_rows_hide_what_is_below(tmp_path: Path) -> None:
    store, _ = _store(tmp_path)
    tree = _tree(store)
    view = TreeView().toggled("a2").toggled("s2")
    assert [r.key for r in tree.rows(view)] == ["s1", "a1", "a1.1", "a2", "a3", "a3.1", "s2"]
    assert [r.key for r in tree.rows(view.toggled("a2"))][:6] == ["s1", "a1", "a1.1", "a2", "a2.1", "a2.2"]
