"""Sweeps, arms and attempts, live, as a tree (sweep → arm → attempts): a state filter, sorting
by any column, a summary line, and the scheduler's own submit, start and end times.

The tree's rows come from the session (``console.sweeptree``); they are rebuilt when an event
arrives and drawn in place: a row whose cells changed is updated cell by cell, and the table is
refilled only when the rows themselves change (a new attempt, a filter, a sort, a fold). The
elapsed time ticks from the rows held here, so the UI loop never waits on SQLite.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from console.describe import clock_label, duration_label
from console.events import AgentChanged, AttemptChanged, ClusterChanged, Triaged
from console.sanitize import clean_line
from console.session import Session
from console.store import ArmRow, AttemptRow, SweepRow
from console.sweeptree import SORT_KEYS, TreeRow, TreeView, summary_label
from screens.dialogs import ConfirmDialog
from screens.messages import CoreUpdate, ReportsWorkerErrors
from screens.widgets.live_table import LiveTable

# Most telling first: at 80 columns the id, state and elapsed time stay in view.
COLUMNS = ("id", "state", "elapsed", "name", "job", "reason", "submitted", "started", "ended", "cluster", "nodes")
assert set(COLUMNS) == set(SORT_KEYS)
# Each category's look is a component class: its colour comes from the theme.
_CATEGORY_CLASS = {
    "done": "sweeps--done",
    "running": "sweeps--live",
    "pending": "sweeps--waiting",
    "failed": "sweeps--failed",
    "doomed": "sweeps--failed",
    "cancelled": "sweeps--waiting",
}


def elapsed_text(attempt: AttemptRow, now: float) -> str:
    return duration_label(attempt.elapsed(now))


class SweepsScreen(ReportsWorkerErrors, Screen[None]):
    CORE_EVENTS: ClassVar[tuple[type, ...]] = (AttemptChanged, Triaged, ClusterChanged, AgentChanged)
    """The core events it shows (the app posts it no others)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_attempt", "Details"),
        Binding("space", "toggle_row", "Fold"),
        Binding("f", "next_filter", "Filter"),
        Binding("o", "sort_next", "Sort"),
        Binding("O", "sort_reverse", "Reverse", show=False),
        Binding("c", "cancel", "Cancel job"),
        Binding("r", "rerun(False)", "Rerun arm"),
        Binding("R", "rerun(True)", "Rerun missing", show=False),
        Binding("F", "rerun_failed", "Rerun failed"),
        Binding("p", "results", "Results"),
        Binding("e", "export_results", "Export"),
        Binding("v", "report", "Report"),
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {"sweeps--done", "sweeps--live", "sweeps--waiting", "sweeps--failed"}
    DEFAULT_CSS = """
    SweepsScreen > .sweeps--done { color: $success; }
    SweepsScreen > .sweeps--live { text-style: bold; }
    SweepsScreen > .sweeps--waiting { color: $warning; }
    SweepsScreen > .sweeps--failed { color: $error; }
    """

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self.view = TreeView()
        self.rows: dict[str, TreeRow] = {}
        self._order: list[str] = []
        self._attempts: dict[int, AttemptRow] = {}
        # Sweeps and arms held here (they change only when something is launched): an event
        # rebuilds the tree from held rows, without reading the store.
        self._sweeps: list[SweepRow] = []
        self._arms: list[ArmRow] = []
        self._arm_ids: set[int] = set()
        self._tree_pending = False
        self.refills = 0  # times the table was refilled (rows changed), not merely updated
        self._request: tuple[str | None, str] | None = None  # from the command palette, done once shown
        self.report_dir: Path | None = None  # where `v` saves reports (None: the working directory)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="clusters")
        yield Static("", id="summary")
        yield LiveTable(id="attempts", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "sweeps"
        table = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        self._reload()
        self.set_interval(1.0, self._tick)

    def on_screen_resume(self) -> None:
        # Events reach the screens on the stack only: catch up on what changed meanwhile.
        if self.is_mounted:
            self._reload()
            self._run_request()

    def request(self, ref: str | None, what: str) -> None:
        """Move to ``ref`` and do ``what`` (the command palette's commands), now or once shown."""
        self._request = (ref, what)
        if self.is_mounted and self.app.screen is self:
            self._run_request()

    def _run_request(self) -> None:
        if self._request is None:
            return
        ref, what = self._request
        self._request = None
        if ref is not None and not self.open_ref(ref):
            self.notify(f"No {ref} here", severity="warning")
            return
        actions: dict[str, Any] = {
            "open": lambda: None,
            "details": self.action_open_attempt,
            "results": self.action_results,
            "export": self.action_export_results,
            "rerun": lambda: self.action_rerun(False),
            "rerun_failed": self.action_rerun_failed,
            "cancel": self.action_cancel,
        }
        actions[what]()

    # --- the tree ---------------------------------------------------------------------

    def _reload(self) -> None:
        self._attempts = {a.id: a for a in self.session.attempts()}
        self._reload_arms()
        self._show_tree()
        self._show_clusters()

    def _reload_arms(self) -> None:
        self._sweeps = self.session.sweeps()
        self._arms = self.session.all_arms()
        self._arm_ids = {a.id for a in self._arms}

    def _show_tree(self) -> None:
        if any(a.arm_id not in self._arm_ids for a in self._attempts.values()):
            self._reload_arms()  # a new sweep or arm: launched, adopted or rerun meanwhile
        tree = self.session.tree(sweeps=self._sweeps, arms=self._arms, attempts=list(self._attempts.values()))
        rows = tree.rows(self.view)
        table = self.query_one(DataTable)
        keys = [r.key for r in rows]
        if keys != self._order:
            selected = self.selected_row()
            table.clear()
            for row in rows:
                table.add_row(*self._cells(row).values(), key=row.key)
            self.refills += 1
            if selected is not None and selected.key in keys:
                table.move_cursor(row=keys.index(selected.key))
            elif keys:
                table.move_cursor(row=len(keys) - 1)  # the newest attempt: what was just launched
        else:
            for row in rows:
                if self.rows.get(row.key) != row:
                    for column, value in self._cells(row).items():
                        table.update_cell(row.key, column, value, update_width=True)
        self.rows = {r.key: r for r in rows}
        self._order = keys
        self._show_summary(tree.summary())

    def _schedule_tree(self) -> None:
        """One rebuild for a burst of events (a poll that changed many attempts)."""
        if not self._tree_pending:
            self._tree_pending = True
            self.call_later(self._flush_tree)

    def _flush_tree(self) -> None:
        self._tree_pending = False
        if self.is_mounted:
            self._show_tree()

    def _cells(self, row: TreeRow) -> dict[str, Any]:
        indent = "  " * row.level
        fold = ("▸ " if row.key in self.view.collapsed else "▾ ") if row.children and row.kind != "attempt" else "  "
        state = Text(row.state, style=self._style(row.category))
        if row.category == "doomed" and row.kind != "sweep":  # a sweep's state counts its doomed arms already
            state.append(" doomed", style="bold")
        if row.simulated and row.kind != "sweep":
            state.append(" sim", style="italic")
        return {
            "id": Text(f"{indent}{fold}{row.key}", style="bold" if row.kind == "sweep" else ""),
            "state": state,
            "elapsed": Text(duration_label(row.elapsed) if row.kind != "sweep" else "", justify="right"),
            "name": Text(clean_line(row.name, 200), style="bold" if row.kind == "sweep" else ""),
            "job": row.job,
            # The scheduler's and the launcher's words: untrusted, shown inert.
            "reason": Text(clean_line(row.reason, 300)),
            "submitted": clock_label(row.submitted, date=True),
            "started": clock_label(row.started),
            "ended": clock_label(row.ended),
            "cluster": row.cluster,
            "nodes": Text(clean_line(row.nodes, 200)),
        }

    def _style(self, category: str) -> Any:
        return self.get_component_rich_style(_CATEGORY_CLASS.get(category, "sweeps--failed"), partial=True)

    def _show_summary(self, counts: dict[str, int]) -> None:
        view = self.view
        order = "descending" if view.descending else "ascending"
        text = Text(summary_label(counts))
        text.append(f"   filter: {view.state_filter} (f) · sort: {view.sort} {order} (o/O)", style="dim")
        self.query_one("#summary", Static).update(text)

    def _tick(self) -> None:
        now = time.time()
        table = self.query_one(DataTable)
        for key, row in self.rows.items():
            attempt = self._attempts.get(row.attempt_id or -1)
            if row.live and row.kind != "sweep" and attempt is not None and key in table.rows:
                table.update_cell(key, "elapsed", Text(elapsed_text(attempt, now), justify="right"))

    def _show_clusters(self) -> None:
        statuses = self.session.cluster_statuses()
        agents = self.session.agent_statuses()
        parts = []
        for name in sorted(set(statuses) | set(agents)):
            text = f"{name}: {statuses.get(name, 'not polled yet')}"
            if name in agents:
                text += f" · logs: {agents[name].summary}"
            parts.append(text)
        self.query_one("#clusters", Static).update(Text("  ".join(parts) or "no cluster contacted yet"))

    @on(CoreUpdate)
    def core_update(self, message: CoreUpdate) -> None:
        event = message.event
        if isinstance(event, AttemptChanged):
            self._attempts[event.attempt.id] = event.attempt
            self._schedule_tree()
        elif isinstance(event, Triaged):
            previous = self.rows.get(next((k for k, r in self.rows.items() if r.attempt_id == event.attempt_id), ""))
            doomed = event.diagnosis.verdict == "doomed"
            if previous is not None and (previous.category == "doomed") != doomed:
                self._schedule_tree()
        elif isinstance(event, ClusterChanged | AgentChanged):
            self._show_clusters()

    # --- what the cursor is on ------------------------------------------------------------

    def selected_row(self) -> TreeRow | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.rows.get(key or "")

    def selected_attempt(self) -> AttemptRow | None:
        """The attempt row under the cursor, or an arm's last attempt."""
        row = self.selected_row()
        if row is None or row.attempt_id is None:
            return None
        return self._attempts.get(row.attempt_id) or self.session.attempt(row.attempt_id)

    def _sweep_id(self) -> int | None:
        row = self.selected_row()
        return row.sweep_id if row is not None else None

    # --- keys -------------------------------------------------------------------------

    @on(DataTable.RowSelected, "#attempts")
    def _row_selected(self) -> None:
        self.action_open_attempt()

    @on(DataTable.HeaderSelected, "#attempts")
    def _header_selected(self, event: DataTable.HeaderSelected) -> None:
        self.view = self.view.sorted_by(str(event.column_key.value))
        self._show_tree()

    def action_toggle_row(self) -> None:
        row = self.selected_row()
        if row is None or row.kind == "attempt":
            return
        self.view = self.view.toggled(row.key)
        self._show_tree()

    def action_next_filter(self) -> None:
        self.view = self.view.next_filter()
        self._show_tree()

    def action_sort_next(self) -> None:
        column = COLUMNS[(COLUMNS.index(self.view.sort) + 1) % len(COLUMNS)]
        self.view = self.view.sorted_by(column)
        self._show_tree()

    def action_sort_reverse(self) -> None:
        self.view = self.view.sorted_by(self.view.sort)
        self._show_tree()

    def action_open_attempt(self) -> None:
        """The selected attempt (an arm: its last attempt) in detail; on a sweep, fold it."""
        from screens.attempt import AttemptScreen

        row = self.selected_row()
        if row is not None and row.kind == "sweep":
            self.action_toggle_row()
            return
        attempt = self.selected_attempt()
        if attempt is None:
            self.notify("No attempt selected", severity="warning")
            return
        self.app.push_screen(AttemptScreen(self.session, attempt.id))

    def open_ref(self, ref: str) -> bool:
        """Move the cursor to a sweep, arm or attempt by its id (``s1``, ``a3``, ``a3.1``)."""
        if ref not in self.rows:
            self.view = TreeView(sort=self.view.sort, descending=self.view.descending)
            self._show_tree()
        if ref not in self._order:
            return False
        self.query_one(DataTable).move_cursor(row=self._order.index(ref))
        return True

    def action_cancel(self) -> None:
        row = self.selected_row()
        live = self._live_attempts(row)
        if row is None or not live:
            self.notify("No live job selected", severity="warning")
            return
        jobs = "\n".join(f"job {a.job_id} on {a.cluster} ({a.state})" for a in live)
        body = f"{row.key} {row.name}\n{jobs}\n\nscancel frees its nodes; its logs and results written so far are kept."
        title = "Cancel this job?" if len(live) == 1 else f"Cancel {len(live)} jobs?"

        def answered(yes: bool | None) -> None:
            if yes:
                self.cancel_attempts(live)

        self.app.push_screen(ConfirmDialog(title, body, yes="Cancel job (y)"), answered)

    def _live_attempts(self, row: TreeRow | None) -> list[AttemptRow]:
        if row is None:
            return []
        if row.kind == "sweep":
            arms = {a.id for a in self.session.arms(row.sweep_id)}
            return [a for a in self._attempts.values() if a.arm_id in arms and a.live and a.job_id]
        attempt = self._attempts.get(row.attempt_id or -1)
        return [attempt] if attempt is not None and attempt.live and attempt.job_id else []

    @work(exclusive=False, group="cancel", exit_on_error=False)
    async def cancel_attempts(self, attempts: list[AttemptRow]) -> None:
        try:
            await self.session.cancel(attempts)
        except Exception as exc:
            self.notify(f"cancel failed: {exc}", severity="error")
        else:
            self.notify(f"Cancel requested for job {', '.join(a.job_id or '' for a in attempts)}")

    # --- results and reruns (screens/rerun_flow.py) ---------------------------------------

    def action_rerun(self, missing_only: bool) -> None:
        """Rerun the selected row's arm (`r`), or only its missing points (`R`), after a confirm."""
        row = self.selected_row()
        if row is None or row.arm_id is None:
            self.notify("No arm selected: move to an arm or an attempt", severity="warning")
            return
        self.rerun_arm(row.arm_id, missing_only)

    @work(exclusive=False, group="rerun", exit_on_error=False)
    async def rerun_arm(self, arm_id: int, missing_only: bool) -> None:
        from screens.rerun_flow import rerun_from_screen

        await rerun_from_screen(self, self.session, arm_id, missing_only)

    def action_rerun_failed(self) -> None:
        """Every failed arm of the selected sweep in one go (`F`)."""
        sweep_id = self._sweep_id()
        if sweep_id is None:
            self.notify("No sweep selected", severity="warning")
            return
        self.rerun_failed(sweep_id)

    @work(exclusive=False, group="rerun", exit_on_error=False)
    async def rerun_failed(self, sweep_id: int) -> None:
        from screens.rerun_flow import rerun_failed_from_screen

        await rerun_failed_from_screen(self, self.session, sweep_id)

    def action_results(self) -> None:
        """The selected row's sweep: a live result table per arm and the plot."""
        from screens.results import ResultsScreen

        row = self.selected_row()
        if row is None:
            self.notify("No sweep selected", severity="warning")
            return
        self.app.push_screen(ResultsScreen(self.session, row.sweep_id, focus_arm_id=row.arm_id))

    def action_export_results(self) -> None:
        sweep_id = self._sweep_id()
        if sweep_id is None:
            self.notify("No sweep selected", severity="warning")
            return
        from screens.rerun_flow import export_from_screen

        export_from_screen(self, self.session, sweep_id)

    def action_report(self) -> None:
        """The selected row's sweep as a pull-request report (Markdown: saved and copied)."""
        sweep_id = self._sweep_id()
        if sweep_id is None:
            self.notify("No sweep selected", severity="warning")
            return
        self.write_report(f"s{sweep_id}")

    @work(exclusive=False, group="report", exit_on_error=False)
    async def write_report(self, target: str) -> None:
        from screens.report_flow import save_report

        await save_report(self, self.session, target, self.report_dir)
