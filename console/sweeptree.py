"""Sweeps, arms and attempts as one tree (sweep → arm → attempts): its rows, a state filter,
sorting by any column and the summary line, as the sweeps screen and `status` show them.

Headless: built from store rows and the monitor's verdicts, so the same tree can be tested
without a terminal. An arm stands for its last attempt (what a rerun would repeat); a sweep
for its arms.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from console.ids import arm_ref, attempt_ref, sweep_ref
from console.store import ArmRow, AttemptRow, SweepRow

Kind = Literal["sweep", "arm", "attempt"]
# What the filter and the summary count, in the summary's order.
CATEGORIES = ("running", "pending", "failed", "done", "doomed", "cancelled")
FILTERS = ("all", "running", "pending", "failed", "done", "doomed")
# Columns that can be sorted by (the screen shows them all).
SORT_KEYS = ("id", "state", "elapsed", "name", "job", "reason", "submitted", "started", "ended", "cluster", "nodes")
_RANK = {"doomed": 0, "failed": 1, "running": 2, "pending": 3, "cancelled": 4, "done": 5}


def category(attempt: AttemptRow, verdict: str | None = None) -> str:
    """running / pending / failed / done / doomed / cancelled (by you) for one attempt."""
    if attempt.live:
        if verdict == "doomed":
            return "doomed"
        return "running" if attempt.state in ("RUNNING", "COMPLETING") else "pending"
    if attempt.state == "COMPLETED":
        return "done"
    if attempt.cancelled_by_operator:
        return "cancelled"
    return "failed"


@dataclass(frozen=True)
class TreeRow:
    """One row of the tree; ``key`` is its id (``s1``, ``a3``, ``a3.1``), unique in the tree."""

    kind: Kind
    key: str
    level: int
    name: str
    cluster: str
    job: str
    state: str
    category: str
    reason: str
    submitted: float | None
    started: float | None
    ended: float | None
    elapsed: float | None
    nodes: str
    simulated: bool
    live: bool
    sweep_id: int
    arm_id: int | None = None
    attempt_id: int | None = None
    children: int = 0  # rows below it when expanded (an arm's attempts, a sweep's arms)

    def sort_value(self, column: str) -> Any:
        if column == "id":
            return (self.arm_id or self.sweep_id, self.attempt_id or 0)
        if column == "state":
            return (_RANK.get(self.category, 9), self.state)
        value = getattr(self, column)
        if isinstance(value, str):
            return value.lower()
        return -1.0 if value is None else value


@dataclass(frozen=True)
class TreeView:
    """How the operator looks at the tree: what is shown, in which order, what is folded."""

    state_filter: str = "all"
    sort: str = "id"
    descending: bool = False
    collapsed: frozenset[str] = frozenset()

    def next_filter(self) -> TreeView:
        return replace(self, state_filter=FILTERS[(FILTERS.index(self.state_filter) + 1) % len(FILTERS)])

    def sorted_by(self, column: str) -> TreeView:
        """Sort by ``column``; asking again for the same column reverses the order."""
        if column == self.sort:
            return replace(self, descending=not self.descending)
        return replace(self, sort=column, descending=False)

    def toggled(self, key: str) -> TreeView:
        return replace(self, collapsed=self.collapsed ^ {key})


@dataclass(frozen=True)
class Tree:
    """The data a tree is built from (store rows and the monitor's verdicts by attempt id)."""

    sweeps: Sequence[SweepRow]
    arms: Mapping[int, Sequence[ArmRow]]  # by sweep id
    attempts: Mapping[int, Sequence[AttemptRow]]  # by arm id, oldest first
    verdicts: Mapping[int, str]
    _built: list[tuple[TreeRow, list[tuple[TreeRow, list[TreeRow]]]]] | None = field(
        default=None, compare=False, repr=False
    )

    @classmethod
    def of(
        cls,
        sweeps: Sequence[SweepRow],
        arms: Sequence[ArmRow],
        attempts: Sequence[AttemptRow],
        verdicts: Mapping[int, str] | None = None,
    ) -> Tree:
        by_sweep: dict[int, list[ArmRow]] = {}
        for arm in arms:
            by_sweep.setdefault(arm.sweep_id, []).append(arm)
        by_arm: dict[int, list[AttemptRow]] = {}
        for attempt in sorted(attempts, key=lambda a: (a.arm_id, a.number)):
            by_arm.setdefault(attempt.arm_id, []).append(attempt)
        return cls(sweeps, by_sweep, by_arm, dict(verdicts or {}))

    # --- rows -------------------------------------------------------------------------

    def attempt_row(self, attempt: AttemptRow, arm: ArmRow) -> TreeRow:
        reason = attempt.reason or attempt.error or ""
        if attempt.cancelled_by_operator and not attempt.live:
            reason = "cancelled by you"
        return TreeRow(
            kind="attempt", key=attempt_ref(attempt.arm_id, attempt.number), level=2,
            name=f"attempt {attempt.number}", cluster=attempt.cluster, job=attempt.job_id or "-",
            state=attempt.state, category=category(attempt, self.verdicts.get(attempt.id)), reason=reason,
            submitted=attempt.submit_time, started=attempt.start_time, ended=attempt.end_time,
            elapsed=attempt.elapsed(), nodes=attempt.nodelist or "", simulated=attempt.simulated,
            live=attempt.live, sweep_id=arm.sweep_id, arm_id=arm.id, attempt_id=attempt.id,
        )  # fmt: skip

    def arm_row(self, arm: ArmRow, last: TreeRow | None = None) -> TreeRow | None:
        attempts = self.attempts.get(arm.id, [])
        if not attempts:
            return None
        last = last or self.attempt_row(attempts[-1], arm)
        return TreeRow(
            kind="arm", key=arm_ref(arm.id), level=1, name=arm.name, cluster=last.cluster, job=last.job,
            state=last.state, category=last.category, reason=last.reason, submitted=attempts[0].submit_time,
            started=last.started, ended=last.ended, elapsed=last.elapsed, nodes=last.nodes,
            simulated=any(a.simulated for a in attempts), live=last.live, sweep_id=arm.sweep_id,
            arm_id=arm.id, attempt_id=last.attempt_id, children=len(attempts),
        )  # fmt: skip

    def sweep_row(self, sweep: SweepRow, arm_rows: Sequence[TreeRow]) -> TreeRow:
        counts = count(arm_rows)
        worst = min(arm_rows, key=lambda r: _RANK.get(r.category, 9)).category if arm_rows else "done"
        state = ", ".join(f"{n} {c}" for c, n in counts.items() if n) or "empty"
        starts = [r.started for r in arm_rows if r.started is not None]
        ends = [r.ended for r in arm_rows if r.ended is not None]
        live = any(r.live for r in arm_rows)
        return TreeRow(
            kind="sweep", key=sweep_ref(sweep.id), level=0, name=sweep.name, cluster=sweep.cluster, job="",
            state=state, category=worst, reason="", submitted=sweep.created_at,
            started=min(starts) if starts else None, ended=None if live or not ends else max(ends),
            elapsed=None, nodes="", simulated=any(r.simulated for r in arm_rows), live=live,
            sweep_id=sweep.id, children=len(arm_rows),
        )  # fmt: skip

    def _build(self) -> list[tuple[TreeRow, list[tuple[TreeRow, list[TreeRow]]]]]:
        """Every row once (a tree is built per event: the rows and the summary share this)."""
        if self._built is not None:
            return self._built
        built: list[tuple[TreeRow, list[tuple[TreeRow, list[TreeRow]]]]] = []
        for sweep in self.sweeps:
            arms: list[tuple[TreeRow, list[TreeRow]]] = []
            for arm in self.arms.get(sweep.id, []):
                attempts = [self.attempt_row(a, arm) for a in self.attempts.get(arm.id, [])]
                arm_row = self.arm_row(arm, attempts[-1] if attempts else None)
                if arm_row is not None:
                    arms.append((arm_row, attempts))
            built.append((self.sweep_row(sweep, [a for a, _ in arms]), arms))
        object.__setattr__(self, "_built", built)
        return built

    def rows(self, view: TreeView = TreeView()) -> list[TreeRow]:
        """The rows to show, in order: each sweep, its arms (those the filter keeps), each arm's attempts."""
        out: list[tuple[TreeRow, list[tuple[TreeRow, list[TreeRow]]]]] = []
        for sweep_row, arms in self._build():
            shown = [(a, kids) for a, kids in arms if view.state_filter in ("all", a.category)]
            if shown or view.state_filter == "all":
                out.append((sweep_row, shown))
        key = _sort_key(view.sort)
        out.sort(key=lambda item: key(item[0]), reverse=view.descending)
        flat: list[TreeRow] = []
        for sweep_row, arms in out:
            flat.append(sweep_row)
            if sweep_row.key in view.collapsed:
                continue
            for arm_row, attempts in sorted(arms, key=lambda item: key(item[0]), reverse=view.descending):
                flat.append(arm_row)
                if arm_row.key not in view.collapsed:
                    flat += attempts
        return flat

    def summary(self) -> dict[str, int]:
        """Arms by category (each arm as its last attempt), over every sweep."""
        return count([arm_row for _, arms in self._build() for arm_row, _ in arms])


def count(rows: Collection[TreeRow]) -> dict[str, int]:
    counts = dict.fromkeys(CATEGORIES, 0)
    for row in rows:
        counts[row.category] = counts.get(row.category, 0) + 1
    return counts


def summary_label(counts: Mapping[str, int]) -> str:
    """`2 running · 1 pending · 0 failed · 4 done · 1 doomed` (cancelled only when there are some)."""
    parts = [f"{counts.get(c, 0)} {c}" for c in CATEGORIES if c != "cancelled" or counts.get(c)]
    return " · ".join(parts)


def _sort_key(column: str) -> Callable[[TreeRow], Any]:
    if column not in SORT_KEYS:
        raise ValueError(f"cannot sort by {column!r}; columns: {', '.join(SORT_KEYS)}")
    return lambda row: row.sort_value(column)
