"""Results of a sweep, live: one table per arm (every expected point from the start) and a plot.

Rows are keyed by concurrency and updated cell by cell as points arrive (``PointArrived``),
as attempts change (``AttemptChanged``: a rerun adds an attempt, an ended one stops running)
and as ``benchmark.out`` says which point is being measured (``PointRunning``). Each arm's
row shows the merged view of all its attempts: the latest valid result per point and the
attempt it came from.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Label, Static

from console.compare import Comparison, Side, arm_side_points, compare
from console.describe import shown
from console.engine import LaunchRefused
from console.events import AttemptChanged, PointArrived, PointRunning
from console.ids import arm_ref, attempt_ref, sweep_ref
from console.results import AttemptPoints, PointResult, arm_view, points_rows
from console.results.arms import ResultsUnavailable, attempt_context, expected_points
from console.results.export import NothingToExport, export_dir, write_export
from console.session import Session
from console.sides import SideError, side_of
from console.store import ArmRow, AttemptRow
from screens.baseline import DELTA_COLUMNS, VERDICT_COLUMN, delta_cells
from screens.messages import CoreUpdate, ReportsWorkerErrors
from screens.widgets.live_table import LiveTable
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
    ("why", "why not done"),
)
# Each status's look is a component class of the screen: its colour comes from the theme.
STATUS_CLASSES = {
    "done": "results--done",
    "running": "results--running",
    "missing": "results--missing",
    "incomplete": "results--incomplete",
    "invalid": "results--invalid",
}


def _num(value: float | None, digits: int = 1) -> Text:
    return Text("-" if value is None else f"{value:,.{digits}f}", justify="right")


def point_cells(point: PointResult, styles: Mapping[str, Style] | None = None) -> dict[str, Any]:
    """The row of one point; ``styles`` maps a status to its look (plain text without)."""
    return {
        "conc": Text(str(point.concurrency), justify="right"),
        "status": Text(point.status, style=(styles or {}).get(point.status, "")),
        "attempt": (point.attempt or "") + (" sim" if point.simulated else ""),
        "out": _num(point.output_tok_s),
        "total": _num(point.total_tok_s),
        "per_gpu": _num(point.tok_s_per_gpu),
        "per_user": _num(point.tok_s_per_user),
        "ttft": _num(point.ttft.median),
        "tpot": _num(point.tpot.median, 2),
        "itl": _num(point.itl.median, 2),
        "e2el": _num(point.e2el.median, 0),
        "completed": Text("-" if point.completed is None else str(point.completed), justify="right"),
        # Why a point is not done: never ran, crashed at this concurrency, an invalid result...
        "why": Text(point.invalid_reason or "" if point.status != "done" else ""),
    }


class ArmResults:
    """What the screen knows of one arm: its attempts' points and running points, merged on demand."""

    def __init__(self, arm: ArmRow, attempts: list[AttemptRow]) -> None:
        self.arm = arm
        self.expected = expected_points(arm)
        self.attempts: dict[int, AttemptRow] = {a.id: a for a in attempts}
        self.points: dict[int, dict[int, PointResult]] = {a.id: {} for a in attempts}
        self.running: dict[int, int | None] = {}
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
            **attempt_context(self.attempts.values()),
        )


class ResultsScreen(ReportsWorkerErrors, Screen[None]):
    """Every arm of one sweep: a live table each and one plot across them."""

    CORE_EVENTS: ClassVar[tuple[type, ...]] = (PointArrived, AttemptChanged, PointRunning)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "toggle_plot", "Plot: pareto/throughput"),
        Binding("e", "export", "Export CSV+JSON"),
        Binding("b", "baseline", "Baseline"),
        Binding("escape", "app.pop_screen", "Back"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = set(STATUS_CLASSES.values())
    DEFAULT_CSS = """
    ResultsScreen > .results--done { color: $success; }
    ResultsScreen > .results--running { text-style: bold; }
    ResultsScreen > .results--missing { color: $text-muted; }
    ResultsScreen > .results--incomplete { color: $warning; }
    ResultsScreen > .results--invalid { color: $error; }
    """

    def __init__(
        self, session: Session, sweep_id: int, focus_arm_id: int | None = None, export_dir: Path | None = None
    ) -> None:
        super().__init__()
        self.session = session
        self.sweep_id = sweep_id
        self.focus_arm_id = focus_arm_id
        self.export_dir = export_dir
        self.arms: dict[int, ArmResults] = {}
        self._attempt_arm: dict[int, int] = {}
        self.loaded = False
        self.row_updates = 0  # cells are only ever updated or rows added, never cleared
        self.point_times: dict[tuple[int, int], float] = {}  # (arm id, concurrency) -> when it became done
        self.baseline: Side | None = None  # compared with on `b`: delta columns and a plot overlay
        self.comparisons: dict[int, Comparison] = {}  # per arm, against the baseline
        self._delta_shown: dict[tuple[int, int], dict[str, Any]] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="results-head")
        with Horizontal(id="results-body"):
            with VerticalScroll(id="results-tables"):
                for arm in self.session.arms(self.sweep_id):
                    simulated = any(a.simulated for a in self.session.attempts(arm.id))
                    title = Text(f"{arm_ref(arm.id)}  {shown(arm.name)}")
                    if simulated:
                        title.append("  SIMULATED: demo engine numbers, not measured", "italic")
                    yield Label(title, classes="results-arm-title")
                    # `conc` stays in view when the table is scrolled sideways.
                    yield LiveTable(id=f"arm-{arm.id}", cursor_type="row", zebra_stripes=True, fixed_columns=1,
                                    classes="results-table")  # fmt: skip
            yield PointsPlot(id="results-plot")
        yield Footer()

    def on_mount(self) -> None:
        sweep = self.session.sweep(self.sweep_id)
        self.sub_title = f"results of {sweep_ref(self.sweep_id)} {shown(sweep.name) if sweep else ''}".strip()
        for arm in self.session.arms(self.sweep_id):
            attempts = self.session.attempts(arm.id)
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

    @property
    def _status_styles(self) -> dict[str, Style]:
        return {status: self.get_component_rich_style(name, partial=True) for status, name in STATUS_CLASSES.items()}

    def table(self, arm_id: int) -> DataTable[Any]:
        return self.query_one(f"#arm-{arm_id}", DataTable)

    def _head(self) -> None:
        plot = self.query_one(PointsPlot)
        mode = "pareto" if plot.mode == PARETO.key else "throughput"
        done = sum(1 for a in self.arms.values() for p in a.shown.values() if p.status == "done")
        expected = sum(len(a.shown) for a in self.arms.values())
        loading = "" if self.loaded else "  (reading result files...)"
        text = f"{len(self.arms)} arm(s), {done}/{expected} points done · plot: {mode} (t)"
        if self.baseline is not None:
            regressed = sum(len(c.regressions) for c in self.comparisons.values())
            lost = sum(len(c.lost) for c in self.comparisons.values())
            text += f" · baseline {self.baseline.label}: {regressed} regressed, {lost} lost (b)"
        self.query_one("#results-head", Static).update(Text(text + loading))

    # --- filling in ---------------------------------------------------------------------

    @work(exclusive=True, group="results-load", exit_on_error=False)
    async def load_points(self) -> None:
        for arm_id, state in self.arms.items():
            try:
                fetched: dict[int, AttemptPoints] = await self.session.arm_points(arm_id)
            except (ResultsUnavailable, OSError, LaunchRefused) as exc:
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
            cells = point_cells(point, self._status_styles)
            if key in table.rows:
                old = point_cells(previous, self._status_styles) if previous is not None else {}
                for column, value in cells.items():
                    if old.get(column) != value:
                        table.update_cell(key, column, value, update_width=True)
            else:
                table.add_row(*cells.values(), key=key)
                if any(c > point.concurrency for c in state.shown):
                    table.sort("conc", key=_conc_key)  # a point outside the expected grid
            self.row_updates += 1
            if point.status == "done" and (previous is None or previous.status != "done"):
                self.point_times[(arm_id, point.concurrency)] = time.monotonic()
            state.shown[point.concurrency] = point
        self._refresh_deltas(arm_id)
        self._plot()
        self._head()

    def _refresh_deltas(self, arm_id: int) -> None:
        """The arm's delta cells against the baseline, updated cell by cell."""
        if self.baseline is None:
            return
        state = self.arms[arm_id]
        shown = sorted(state.shown.values(), key=lambda p: p.concurrency)
        candidate = Side(state.arm.name, arm_side_points(state.arm.summary, state.arm.name, shown))
        comparison = compare(self.baseline, candidate)
        self.comparisons[arm_id] = comparison
        cells = delta_cells(comparison, self.get_component_rich_style("results--invalid", partial=True))
        table = self.table(arm_id)
        blank = {key: Text("-", justify="right") for key, _, _ in DELTA_COLUMNS} | {VERDICT_COLUMN[0]: Text("")}
        for conc in state.shown:
            key = str(conc)
            if key not in table.rows:
                continue
            new = cells.get(conc, blank)
            old = self._delta_shown.get((arm_id, conc), {})
            for column, value in new.items():
                if old.get(column) != value:
                    table.update_cell(key, column, value)
            self._delta_shown[(arm_id, conc)] = new

    def action_baseline(self) -> None:
        """Compare with a baseline run: delta columns per arm and its points on the plot."""
        from screens.baseline import BaselineDialog

        def chosen(text: str | None) -> None:
            if text is not None:
                self.set_baseline(text)

        self.app.push_screen(BaselineDialog(self.baseline.label if self.baseline else None), chosen)

    @work(exclusive=True, group="results-baseline", exit_on_error=False)
    async def set_baseline(self, text: str) -> None:
        if not text:
            self._clear_baseline()
            return
        try:
            side = await side_of(self.session, text)
        except SideError as exc:
            self.notify(f"no baseline: {exc}", severity="error")
            return
        if not any(p.done for p in side.points):
            self.notify(f"{text}: no delivered point to compare with", severity="warning")
        columns = [(key, label) for key, label, _ in DELTA_COLUMNS] + [VERDICT_COLUMN]
        for arm_id in self.arms:
            table = self.table(arm_id)
            for key, label in columns:
                if key not in table.columns:
                    table.add_column(label, key=key, default=Text(""))
        self.baseline = side
        self._delta_shown.clear()
        for arm_id in self.arms:
            self._refresh_deltas(arm_id)
        self._plot()
        self._head()

    def _clear_baseline(self) -> None:
        self.baseline = None
        self.comparisons.clear()
        self._delta_shown.clear()
        for arm_id in self.arms:
            table = self.table(arm_id)
            for key in [k for k, _, _ in DELTA_COLUMNS] + [VERDICT_COLUMN[0]]:
                if key in table.columns:
                    table.remove_column(key)
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
        if self.baseline is not None:
            base = sorted((p.point for p in self.baseline.points if p.done), key=lambda p: p.concurrency)
            name = f"baseline {self.baseline.label}"
            frontier = tuple(
                (p.tok_s_per_user, p.tok_s_per_gpu)
                for p in base
                if p.tok_s_per_user is not None and p.tok_s_per_gpu is not None
            )
            pareto.append(Series(name, frontier))
            throughput.append(
                Series(name, tuple((float(p.concurrency), p.output_tok_s) for p in base if p.output_tok_s is not None))
            )
        plot.set_series(PARETO.key, pareto)
        plot.set_series(THROUGHPUT.key, throughput)

    def _arm_of(self, attempt_id: int) -> int | None:
        arm_id = self._attempt_arm.get(attempt_id)
        if arm_id is None:
            try:
                attempt = self.session.attempt(attempt_id)
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

    @on(CoreUpdate)
    def core_update(self, message: CoreUpdate) -> None:
        event = message.event
        if isinstance(event, PointArrived):
            arm_id = self._arm_of(event.attempt_id)
            if arm_id is not None:
                self.arms[arm_id].points.setdefault(event.attempt_id, {})[event.point.concurrency] = event.point
                self._refresh_arm(arm_id)
        elif isinstance(event, AttemptChanged):
            if event.attempt.arm_id in self.arms:
                self._add_attempt(event.attempt)
                self._refresh_arm(event.attempt.arm_id)
        elif isinstance(event, PointRunning):
            arm_id = self._arm_of(event.attempt_id)
            if arm_id is not None and self.arms[arm_id].running.get(event.attempt_id) != event.concurrency:
                self.arms[arm_id].running[event.attempt_id] = event.concurrency
                self._refresh_arm(arm_id)

    # --- actions ------------------------------------------------------------------------

    def action_toggle_plot(self) -> None:
        self.query_one(PointsPlot).toggle()
        self._head()

    def action_export(self) -> None:
        """Ask where (default beside the data dir), then write what the tables show."""
        from screens.dialogs import PathDialog

        def chosen(directory: str | None) -> None:
            if directory:
                self.export_to(Path(directory))

        body = f"Writes srt-results-{sweep_ref(self.sweep_id)}-<time>.csv and .json in this folder:"
        default = str(self.export_dir or export_dir(self.session.data_dir))
        self.app.push_screen(PathDialog(f"Export the results of {sweep_ref(self.sweep_id)}", body, default), chosen)

    def export_to(self, directory: Path) -> list[Path]:
        rows = sweep_rows(self.arms.values())
        try:
            job_dirs = {
                attempt_ref(a.arm_id, a.number): a.output_dir
                for state in self.arms.values()
                for a in state.attempts.values()
                if a.output_dir
            }
            paths = write_export(directory, sweep_ref(self.sweep_id), rows, job_dirs)
        except NothingToExport as exc:
            self.notify(str(exc).capitalize(), severity="warning")
            return []
        except OSError as exc:
            self.notify(f"export failed: {exc}", severity="error")
            return []
        self.notify("Exported " + " and ".join(str(p) for p in paths), timeout=10)
        return paths


def _conc_key(value: Any) -> int:
    return int(value.plain) if isinstance(value, Text) else int(value)


def sweep_rows(arms: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for state in arms:
        rows += points_rows(state.arm.name, sorted(state.shown.values(), key=lambda p: p.concurrency))
    return rows
