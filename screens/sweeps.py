"""Sweeps and attempts, live: one row per attempt, updated in place as Slurm's answers arrive.

Rows come from the session once, then from its events; the elapsed time ticks from the rows
held here, so the UI loop never waits on SQLite.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from console.describe import shown
from console.events import AgentChanged, AttemptChanged, ClusterChanged
from console.ids import attempt_ref, sweep_ref
from console.session import Session
from console.store import AttemptRow
from screens.dialogs import ConfirmDialog
from screens.messages import CoreUpdate, ReportsWorkerErrors

COLUMNS = ("attempt", "sweep", "arm", "cluster", "job", "state", "reason", "elapsed", "nodes")
# Each state's look is a component class: its colour comes from the theme.
_STATE_CLASS = {
    "COMPLETED": "sweeps--done",
    "RUNNING": "sweeps--live",
    "PENDING": "sweeps--waiting",
    "SUBMITTING": "sweeps--waiting",
    "COMPLETING": "sweeps--live",
}
_FAILED_CLASS = "sweeps--failed"


def elapsed_text(attempt: AttemptRow, now: float) -> str:
    seconds = attempt.elapsed(now)
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class SweepsScreen(ReportsWorkerErrors, Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_attempt", "Details"),
        Binding("c", "cancel", "Cancel job"),
        Binding("r", "rerun(False)", "Rerun arm"),
        Binding("R", "rerun(True)", "Rerun missing"),
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
        self._arm_names: dict[int, tuple[str, int]] = {}
        self._attempts: dict[int, AttemptRow] = {}
        self.report_dir: Path | None = None  # where `v` saves reports (None: the working directory)

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="clusters")
        yield DataTable(id="attempts", cursor_type="row", zebra_stripes=True)
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

    def _reload(self) -> None:
        for attempt in self.session.attempts():
            self._show(attempt)
        self._show_clusters()

    def _arm(self, arm_id: int) -> tuple[str, int]:
        if arm_id not in self._arm_names:
            arm = self.session.arm(arm_id)
            self._arm_names[arm_id] = (arm.name, arm.sweep_id) if arm else ("?", 0)
        return self._arm_names[arm_id]

    def _show(self, attempt: AttemptRow) -> None:
        """Add the attempt's row, or update its cells in place (rows are keyed, never refilled)."""
        table = self.query_one(DataTable)
        self._attempts[attempt.id] = attempt
        name, sweep_id = self._arm(attempt.arm_id)
        key = str(attempt.id)
        cells = {
            "attempt": attempt_ref(attempt.arm_id, attempt.number),
            "sweep": sweep_ref(sweep_id),
            "arm": Text(shown(name)),
            "cluster": attempt.cluster,
            "job": attempt.job_id or "-",
            "state": self.state_text(attempt.state),
            "reason": Text(shown(attempt.reason or attempt.error or "")),
            "elapsed": elapsed_text(attempt, time.time()),
            "nodes": Text(shown(attempt.nodelist or "")),
        }
        if key in table.rows:
            for column, value in cells.items():
                table.update_cell(key, column, value)
        else:
            table.add_row(*cells.values(), key=key)

    def state_text(self, state: str) -> Text:
        return Text(state, style=self.get_component_rich_style(_STATE_CLASS.get(state, _FAILED_CLASS), partial=True))

    def _tick(self) -> None:
        now = time.time()
        table = self.query_one(DataTable)
        for attempt in self._attempts.values():
            if attempt.live and str(attempt.id) in table.rows:
                table.update_cell(str(attempt.id), "elapsed", elapsed_text(attempt, now))

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
            self._show(event.attempt)
        elif isinstance(event, ClusterChanged | AgentChanged):
            self._show_clusters()

    def selected_attempt(self) -> AttemptRow | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self._attempts.get(int(key)) if key else None

    @on(DataTable.RowSelected, "#attempts")
    def _row_selected(self) -> None:
        self.action_open_attempt()

    def action_open_attempt(self) -> None:
        """The selected attempt in detail: diagnosis, workers, findings, logs."""
        from screens.attempt import AttemptScreen

        attempt = self.selected_attempt()
        if attempt is None:
            self.notify("No attempt selected", severity="warning")
            return
        self.app.push_screen(AttemptScreen(self.session, attempt.id))

    def action_cancel(self) -> None:
        attempt = self.selected_attempt()
        if attempt is None or not attempt.live or not attempt.job_id:
            self.notify("No live job selected", severity="warning")
            return
        name, _ = self._arm(attempt.arm_id)
        body = (
            f"{name}\njob {attempt.job_id} on {attempt.cluster} ({attempt.state})\n\n"
            "scancel frees its nodes; its logs and any results already written are kept."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.cancel_attempts([attempt])

        self.app.push_screen(ConfirmDialog("Cancel this job?", body, yes="Cancel job (y)"), answered)

    @work(exclusive=False, group="cancel", exit_on_error=False)
    async def cancel_attempts(self, attempts: list[AttemptRow]) -> None:
        try:
            await self.session.cancel(attempts)
        except Exception as exc:
            self.notify(f"cancel failed: {exc}", severity="error")
        else:
            self.notify(f"Cancel requested for job {', '.join(a.job_id or '' for a in attempts)}")

    # --- results and reruns (screens/results.py) ---------------------------------------

    def action_rerun(self, missing_only: bool) -> None:
        """Rerun the selected row's arm (`r`), or only its missing points (`R`), after a confirm."""
        attempt = self.selected_attempt()
        if attempt is None:
            self.notify("No arm selected", severity="warning")
            return
        self.rerun_arm(attempt.arm_id, missing_only)

    @work(exclusive=False, group="rerun", exit_on_error=False)
    async def rerun_arm(self, arm_id: int, missing_only: bool) -> None:
        from screens.rerun_flow import rerun_from_screen

        await rerun_from_screen(self, self.session, arm_id, missing_only)

    def action_results(self) -> None:
        """The selected row's sweep: a live result table per arm and the plot."""
        from screens.results import ResultsScreen

        attempt = self.selected_attempt()
        if attempt is None:
            self.notify("No sweep selected", severity="warning")
            return
        _, sweep_id = self._arm(attempt.arm_id)
        self.app.push_screen(ResultsScreen(self.session, sweep_id, focus_arm_id=attempt.arm_id))

    def action_export_results(self) -> None:
        attempt = self.selected_attempt()
        if attempt is None:
            self.notify("No sweep selected", severity="warning")
            return
        self.export_results(self._arm(attempt.arm_id)[1])

    def action_report(self) -> None:
        """The selected row's sweep as a pull-request report (Markdown: saved and copied)."""
        attempt = self.selected_attempt()
        if attempt is None:
            self.notify("No sweep selected", severity="warning")
            return
        self.write_report(f"s{self._arm(attempt.arm_id)[1]}")

    @work(exclusive=False, group="report", exit_on_error=False)
    async def write_report(self, target: str) -> None:
        from screens.report_flow import save_report

        await save_report(self, self.session, target, self.report_dir)

    @work(exclusive=False, group="export", exit_on_error=False)
    async def export_results(self, sweep_id: int) -> None:
        from pathlib import Path

        from screens.rerun_flow import export_sweep

        try:
            paths = await export_sweep(self.session, sweep_id, Path.cwd())
        except Exception as exc:
            self.notify(f"export failed: {exc}", severity="error")
        else:
            self.notify("Exported " + " and ".join(str(p) for p in paths), timeout=8)
