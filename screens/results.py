"""Results of a sweep, live: one table per arm (every expected point from the start) and a plot.

Rows are keyed by concurrency and updated cell by cell as points arrive (``PointUpdated``),
as attempts change (``AttemptUpdated``: a rerun adds an attempt, an ended one stops running)
and as ``benchmark.out`` says which point is being measured (``LogLinesArrived``). Each arm's
row shows the merged view of all its attempts: the latest valid result per point and the
attempt it came from.

Also here: the rerun flow the sweeps screen runs on ``r`` / ``R`` and the export it runs on ``e``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Label, Static

from console.engine import Engine, LaunchRefused
from console.ids import arm_ref, attempt_ref, sweep_ref
from console.rerun import (
    AttemptPoints,
    RerunPlan,
    RerunRefused,
    arm_points_view,
    diagnose_output_dir,
    expected_points,
    fetch_arm_points,
    plan_rerun,
    rerun,
)
from console.results import PointResult, arm_view, points_csv, points_rows, running_concurrency
from console.store import ArmRow, AttemptRow
from screens.dialogs import ConfirmDialog
from screens.messages import AttemptUpdated, LogLinesArrived, PointUpdated
from screens.widgets.plot import PARETO, THROUGHPUT, PointsPlot, Series

COLUMNS = (
    ("conc", "conc"),
    ("status", "status"),
    ("attempt", "attempt"),
    ("out", "out tok/s"),
    ("total", "total tok/s"),
    ("per_gpu", "tok/s/GPU"),
    ("per_user", "tok/s/user"),
    ("ttft", "TTFT p50 ms"),
    ("tpot", "TPOT p50 ms"),
    ("itl", "ITL p50 ms"),
    ("e2el", "E2EL p50 ms"),
    ("completed", "completed"),
)
_STATUS_STYLE = {"done": "green", "running": "bold", "missing": "dim", "incomplete": "yellow", "invalid": "red"}
_BENCH_TAIL_CHARS = 16 * 1024


def _num(value: float | None, digits: int = 1) -> Text:
    return Text("-" if value is None else f"{value:,.{digits}f}", justify="right")


def point_cells(point: PointResult) -> dict[str, Any]:
    return {
        "conc": Text(str(point.concurrency), justify="right"),
        "status": Text(point.status, style=_STATUS_STYLE.get(point.status, "")),
        "attempt": point.attempt or "",
        "out": _num(point.output_tok_s),
        "total": _num(point.total_tok_s),
        "per_gpu": _num(point.tok_s_per_gpu),
        "per_user": _num(point.tok_s_per_user),
        "ttft": _num(point.ttft.median),
        "tpot": _num(point.tpot.median, 2),
        "itl": _num(point.itl.median, 2),
        "e2el": _num(point.e2el.median, 0),
        "completed": Text("-" if point.completed is None else str(point.completed), justify="right"),
    }


class ArmResults:
    """What the screen knows of one arm: its attempts' points and running points, merged on demand."""

    def __init__(self, arm: ArmRow, attempts: list[AttemptRow]) -> None:
        self.arm = arm
        self.expected = expected_points(arm)
        self.attempts: dict[int, AttemptRow] = {a.id: a for a in attempts}
        self.points: dict[int, dict[int, PointResult]] = {a.id: {} for a in attempts}
        self.running: dict[int, int | None] = {}
        self.bench_tail: dict[int, str] = {}
        self.shown: dict[int, PointResult] = {}

    def merged(self) -> list[PointResult]:
        return arm_view(
            self.expected,
            (
                (
                    attempt_ref(attempt.arm_id, attempt.number),
                    attempt.concurrencies,
                    self.points.get(attempt.id, {}).values(),
                    self.running.get(attempt.id) if attempt.live else None,
                )
                for attempt in sorted(self.attempts.values(), key=lambda a: a.number)
            ),
        )


class ResultsScreen(Screen[None]):
    """Every arm of one sweep: a live table each and one plot across them."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "toggle_plot", "Plot: pareto/throughput"),
        Binding("e", "export", "Export CSV+JSON"),
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def __init__(
        self, engine: Engine, sweep_id: int, focus_arm_id: int | None = None, export_dir: Path | None = None
    ) -> None:
        super().__init__()
        self.engine = engine
        self.sweep_id = sweep_id
        self.focus_arm_id = focus_arm_id
        self.export_dir = export_dir
        self.arms: dict[int, ArmResults] = {}
        self._attempt_arm: dict[int, int] = {}
        self.loaded = False
        self.row_updates = 0  # cells are only ever updated or rows added, never cleared
        self.point_times: dict[tuple[int, int], float] = {}  # (arm id, concurrency) -> when it became done

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="results-head")
        with Horizontal(id="results-body"):
            with VerticalScroll(id="results-tables"):
                for arm in self.engine.store.arms(self.sweep_id):
                    yield Label(Text(f"{arm_ref(arm.id)}  {arm.name}"), classes="results-arm-title")
                    yield DataTable(id=f"arm-{arm.id}", cursor_type="row", zebra_stripes=True, classes="results-table")
            yield PointsPlot(id="results-plot")
        yield Footer()

    def on_mount(self) -> None:
        sweep = self.engine.store.sweep(self.sweep_id)
        self.sub_title = f"results of {sweep_ref(self.sweep_id)} {sweep.name if sweep else ''}".strip()
        for arm in self.engine.store.arms(self.sweep_id):
            attempts = self.engine.store.attempts(arm.id)
            self.arms[arm.id] = ArmResults(arm, attempts)
            for attempt in attempts:
                self._attempt_arm[attempt.id] = arm.id
            table = self.table(arm.id)
            for key, label in COLUMNS:
                table.add_column(label, key=key)
            self._refresh_arm(arm.id)
        self._head()
        if self.focus_arm_id is not None and self.focus_arm_id in self.arms:
            table = self.table(self.focus_arm_id)
            table.focus()
            self.call_after_refresh(table.scroll_visible)
        self.load_points()

    def table(self, arm_id: int) -> DataTable[Any]:
        return self.query_one(f"#arm-{arm_id}", DataTable)

    def _head(self) -> None:
        plot = self.query_one(PointsPlot)
        mode = "pareto" if plot.mode == PARETO.key else "throughput"
        done = sum(1 for a in self.arms.values() for p in a.shown.values() if p.status == "done")
        expected = sum(len(a.shown) for a in self.arms.values())
        loading = "" if self.loaded else "  (reading result files...)"
        text = f"{len(self.arms)} arm(s), {done}/{expected} points done · plot: {mode} (t)"
        self.query_one("#results-head", Static).update(Text(text + loading))

    # --- filling in ---------------------------------------------------------------------

    @work(exclusive=True, group="results-load", exit_on_error=False)
    async def load_points(self) -> None:
        monitor = getattr(self.app, "monitor", None)
        views = monitor.views if monitor is not None else None
        for arm_id, state in self.arms.items():
            try:
                fetched: dict[int, AttemptPoints] = await fetch_arm_points(self.engine, arm_id, views)
            except (RerunRefused, OSError, LaunchRefused) as exc:
                self.notify(f"{arm_ref(arm_id)}: {exc}", severity="warning")
                continue
            for attempt_id, got in fetched.items():
                known = state.points.setdefault(attempt_id, {})
                for point in got.points:
                    known.setdefault(point.concurrency, point)  # a live point that arrived meanwhile wins
                if got.running is not None:
                    state.running.setdefault(attempt_id, got.running)
            self._refresh_arm(arm_id)
        self.loaded = True
        self._head()

    def _refresh_arm(self, arm_id: int) -> None:
        state = self.arms[arm_id]
        table = self.table(arm_id)
        for point in state.merged():
            key = str(point.concurrency)
            previous = state.shown.get(point.concurrency)
            if previous == point:
                continue
            cells = point_cells(point)
            if key in table.rows:
                old = point_cells(previous) if previous is not None else {}
                for column, value in cells.items():
                    if old.get(column) != value:
                        table.update_cell(key, column, value)
            else:
                table.add_row(*cells.values(), key=key)
                if any(c > point.concurrency for c in state.shown):
                    table.sort("conc", key=_conc_key)  # a point outside the expected grid
            self.row_updates += 1
            if point.status == "done" and (previous is None or previous.status != "done"):
                self.point_times[(arm_id, point.concurrency)] = time.monotonic()
            state.shown[point.concurrency] = point
        self._plot()
        self._head()

    def _plot(self) -> None:
        plot = self.query_one(PointsPlot)
        pareto: list[Series] = []
        throughput: list[Series] = []
        for state in self.arms.values():
            done = [p for p in sorted(state.shown.values(), key=lambda p: p.concurrency) if p.status == "done"]
            pareto.append(
                Series(
                    state.arm.name,
                    tuple(
                        (p.tok_s_per_user, p.tok_s_per_gpu)
                        for p in done
                        if p.tok_s_per_user is not None and p.tok_s_per_gpu is not None
                    ),
                )
            )
            throughput.append(
                Series(
                    state.arm.name,
                    tuple((float(p.concurrency), p.output_tok_s) for p in done if p.output_tok_s is not None),
                )
            )
        plot.set_series(PARETO.key, pareto)
        plot.set_series(THROUGHPUT.key, throughput)

    def _arm_of(self, attempt_id: int) -> int | None:
        arm_id = self._attempt_arm.get(attempt_id)
        if arm_id is None:
            try:
                attempt = self.engine.store.attempt(attempt_id)
            except KeyError:
                return None
            if attempt.arm_id not in self.arms:
                return None
            self._add_attempt(attempt)
            arm_id = attempt.arm_id
        return arm_id

    def _add_attempt(self, attempt: AttemptRow) -> None:
        state = self.arms[attempt.arm_id]
        state.attempts[attempt.id] = attempt
        state.points.setdefault(attempt.id, {})
        self._attempt_arm[attempt.id] = attempt.arm_id

    @on(PointUpdated)
    def point_updated(self, message: PointUpdated) -> None:
        arm_id = self._arm_of(message.attempt_id)
        if arm_id is None:
            return
        self.arms[arm_id].points.setdefault(message.attempt_id, {})[message.point.concurrency] = message.point
        self._refresh_arm(arm_id)

    @on(AttemptUpdated)
    def attempt_updated(self, message: AttemptUpdated) -> None:
        attempt = message.attempt
        if attempt.arm_id not in self.arms:
            return
        self._add_attempt(attempt)
        self._refresh_arm(attempt.arm_id)

    @on(LogLinesArrived)
    def log_lines(self, message: LogLinesArrived) -> None:
        if not message.file.endswith("benchmark.out"):
            return
        arm_id = self._arm_of(message.attempt_id)
        if arm_id is None:
            return
        state = self.arms[arm_id]
        tail = (state.bench_tail.get(message.attempt_id, "") + "\n" + "\n".join(message.lines))[-_BENCH_TAIL_CHARS:]
        state.bench_tail[message.attempt_id] = tail
        running = running_concurrency(tail)
        if state.running.get(message.attempt_id) != running:
            state.running[message.attempt_id] = running
            self._refresh_arm(arm_id)

    # --- actions ------------------------------------------------------------------------

    def action_toggle_plot(self) -> None:
        self.query_one(PointsPlot).toggle()
        self._head()

    def action_export(self) -> None:
        rows = sweep_rows(self.arms.values())
        try:
            paths = write_export(self.export_dir or Path.cwd(), self.sweep_id, rows)
        except OSError as exc:
            self.notify(f"export failed: {exc}", severity="error")
            return
        self.notify("Exported " + " and ".join(str(p) for p in paths), timeout=8)


def _conc_key(value: Any) -> int:
    return int(value.plain) if isinstance(value, Text) else int(value)


def sweep_rows(arms: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for state in arms:
        rows += points_rows(state.arm.name, sorted(state.shown.values(), key=lambda p: p.concurrency))
    return rows


def write_export(directory: Path, sweep_id: int, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """``srt-results-s<N>-<time>.csv`` and ``.json`` in ``directory``; returns both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = f"srt-results-{sweep_ref(sweep_id)}-{time.strftime('%Y%m%d-%H%M%S')}"
    csv_path = directory / f"{stem}.csv"
    json_path = directory / f"{stem}.json"
    csv_path.write_text(points_csv(rows), encoding="utf-8")
    json_path.write_text(json.dumps({"sweep": sweep_ref(sweep_id), "points": list(rows)}, indent=2) + "\n")
    return [csv_path, json_path]


# --------------------------------------------------------------------------- reruns from the UI

_BUSY: set[tuple[int, int]] = set()  # (id(engine), arm id) while a rerun is being planned or submitted


def rerun_body(plan: RerunPlan) -> str:
    points = ", ".join(str(c) for c in plan.concurrencies)
    what = "only its missing points" if plan.missing_only else "the whole arm again, exactly the last config"
    lines = [
        f"arm     {plan.arm}  {plan.arm_name}",
        f"what    {what}",
        f"points  {points}",
        f"cluster {plan.cluster}",
        f"after   {plan.last_attempt} ({plan.last_state}); earlier attempts and results are kept",
    ]
    if plan.warning:
        lines += ["", f"WARNING: {plan.warning}"]
    return "\n".join(lines)


async def prepare_rerun(screen: Screen[Any], engine: Engine, arm_id: int, missing_only: bool) -> RerunPlan:
    monitor = getattr(screen.app, "monitor", None)
    views = monitor.views if monitor is not None else None
    fetched = await fetch_arm_points(engine, arm_id, views) if missing_only else None
    attempts = engine.store.attempts(arm_id)
    last = attempts[-1] if attempts else None
    view = views.get(last.id) if views is not None and last is not None else None
    diagnosis = view.diagnosis if view is not None else None
    if diagnosis is None and last is not None and last.output_dir and not last.live:
        # A scan of the logs on this machine, off the UI thread (it touches no SQLite).
        diagnosis = await asyncio.to_thread(diagnose_output_dir, last.output_dir, last.state)
    return plan_rerun(engine.store, arm_id, missing_only, diagnosis, monitor_views=views, attempt_points=fetched)


async def rerun_from_screen(screen: Screen[Any], engine: Engine, arm_id: int, missing_only: bool) -> AttemptRow | None:
    """Plan, confirm and submit one rerun; a second press while one is under way does nothing."""
    key = (id(engine), arm_id)
    if key in _BUSY:
        screen.notify(f"{arm_ref(arm_id)}: a rerun is already being prepared", severity="warning")
        return None
    _BUSY.add(key)
    try:
        try:
            plan = await prepare_rerun(screen, engine, arm_id, missing_only)
        except (RerunRefused, OSError, LaunchRefused) as exc:
            screen.notify(f"Not rerun: {exc}", severity="error", timeout=8)
            return None
        except Exception as exc:
            screen.notify(f"Not rerun: {type(exc).__name__}: {exc}", severity="error", timeout=8)
            return None
        title = "Rerun missing points?" if missing_only else "Rerun this arm?"
        yes = await screen.app.push_screen_wait(ConfirmDialog(title, rerun_body(plan), yes="Submit (y)"))
        if not yes:
            return None
        try:
            row = await rerun(engine, plan)
        except (RerunRefused, LaunchRefused) as exc:
            screen.notify(f"Not rerun: {exc}", severity="error", timeout=8)
            return None
        if row.job_id:
            screen.notify(f"{attempt_ref(row.arm_id, row.number)} submitted: job {row.job_id} on {row.cluster}")
        else:
            screen.notify(f"{attempt_ref(row.arm_id, row.number)}: {row.error or row.state}", severity="error")
        return row
    finally:
        _BUSY.discard(key)


async def export_sweep(engine: Engine, sweep_id: int, directory: Path, views: Any = None) -> list[Path]:
    """Read every arm of the sweep and write its merged points as CSV and JSON."""
    rows: list[dict[str, Any]] = []
    for arm in engine.store.arms(sweep_id):
        fetched = await fetch_arm_points(engine, arm.id, views)
        rows += points_rows(arm.name, arm_points_view(engine.store, arm.id, views, attempt_points=fetched))
    return write_export(directory, sweep_id, rows)
