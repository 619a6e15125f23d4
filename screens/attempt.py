"""One attempt in detail: diagnosis banner, workers, findings and a fast view of its logs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from console.describe import shown
from console.diagnosis import Diagnosis, FindingGroup, Observation
from console.events import AgentChanged, AttemptChanged, LogLines, Triaged
from console.ids import attempt_ref
from console.monitor import AttemptView
from console.provenance import Provenance
from console.sanitize import clean_line
from console.session import Session
from console.stages import StageSnapshot
from console.store import AttemptRow
from screens.dialogs import ConfirmDialog
from screens.messages import CoreUpdate, ReportsWorkerErrors
from screens.widgets.findings import DiagnosisBanner, FindingsPanel
from screens.widgets.log_view import LogBody, LogView
from screens.widgets.workers import WorkersPanel

MAX_MARKS = 100_000
"""Finding lines marked in the log view at most."""


def provenance_line(attempt: AttemptRow) -> Text:
    """What the attempt ran, in one line (values from the cluster and the recipe: cleaned)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("ran ", "dim")
    if attempt.provenance is None:
        text.append("not recorded")
        return text
    text.append(clean_line(Provenance.from_json(attempt.provenance).summary(), 400))
    return text


class AttemptScreen(ReportsWorkerErrors, Screen[None]):
    """Everything about one attempt, live."""

    CORE_EVENTS: ClassVar[tuple[type, ...]] = (AttemptChanged, LogLines, Triaged, AgentChanged)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("c", "cancel", "Cancel job"),
        Binding("n", "next_finding(1)", "Next finding"),
        Binding("N", "next_finding(-1)", "Prev finding", show=False),
        # Keys that open the log's prompt are taken as they arrive (priority), so that the prompt
        # has the focus for the keys typed after them: a terminal read brings `f` and the filter's
        # text at once, and keys already routed to the log would be its bindings, not text.
        Binding("slash", "prompt('search')", "Search", priority=True),
        Binding("m", "next_match(1)", "Next match"),
        Binding("M", "next_match(-1)", "Prev match", show=False),
        Binding("f", "prompt('filter')", "Filter", priority=True),
        Binding("F", "findings_only", "Findings only"),
        Binding("right_square_bracket", "cycle_file(1)", "Next file"),
        Binding("left_square_bracket", "cycle_file(-1)", "Prev file", show=False),
        *(Binding(str(i), f"file({i - 1})", f"File {i}", show=False) for i in range(1, 10)),
        Binding("o", "older", "Older lines"),
        Binding("t", "follow", "Follow tail"),
        Binding("w", "wrap", "Wrap"),
        Binding("colon,g", "prompt('line')", "Go to line", priority=True),
        Binding("V", "pager", "$PAGER"),
        Binding("y", "copy_line", "Copy line", show=False),
        Binding("Y", "copy_path", "Copy path", show=False),
        Binding("l", "focus_log", "Log", show=False),
        Binding("v", "report", "Report"),
    ]

    def __init__(self, session: Session, attempt_id: int) -> None:
        super().__init__()
        self.session = session
        self.monitor = session.monitor
        self.attempt_id = attempt_id
        self.attempt: AttemptRow = session.attempt(attempt_id)
        arm = session.arm(self.attempt.arm_id)
        self.arm_name = shown(arm.name) if arm else "?"
        demand = arm.summary.get("node_demand") if arm else None
        self.node_demand = demand if isinstance(demand, int) else None
        self.view: AttemptView | None = None
        self.diagnosis: Diagnosis | None = None
        self._following = asyncio.Event()
        self._opening = False
        self._seen_findings: set[tuple[str, int, str]] = set()
        self.report_dir: Path | None = None  # where `v` saves the report (None: the working directory)

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="attempt-head")
        yield Static("", id="attempt-provenance")
        yield DiagnosisBanner(id="banner")
        with Horizontal(id="attempt-panels"):
            yield WorkersPanel(id="workers-panel")
            yield FindingsPanel(id="findings-panel")
        yield LogView(id="log-view")
        yield Footer()

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    def on_unmount(self) -> None:
        self.monitor.unpin(self.attempt_id)

    def on_mount(self) -> None:
        self.monitor.pin(self.attempt_id)
        self.sub_title = f"attempt {attempt_ref(self.attempt.arm_id, self.attempt.number)}"
        self._show_head()
        self.query_one(DiagnosisBanner).show(None, cancellable=False)
        self.log_view.connect(self._read_range, self._position, self._lines_seen)
        self.log_view.body.focus()
        self.open_attempt()

    @work(group="attempt-open", exit_on_error=False)
    async def open_attempt(self) -> None:
        """Follow the attempt (if nobody does yet) and show what the monitor already knows."""
        if not self.attempt.output_dir or self._opening:
            return  # not submitted yet: followed once its output dir is known (AttemptUpdated)
        self._opening = True
        try:
            self.view = await self.monitor.follow(self.attempt)
        except Exception as exc:
            self.notify(f"cannot follow the attempt's logs: {exc}", severity="error")
            return
        finally:
            self._following.set()
        view = self.view
        triage = view.triage
        self._add_findings(triage.findings)
        log_view = self.log_view
        log_view.add_files(triage.files())
        diagnosis = view.diagnosis or triage.diagnose(self.attempt.state)
        self._show_triage(diagnosis, triage.snapshot(self.attempt.state))
        if diagnosis.root_cause is not None:
            log_view.show_file(diagnosis.root_cause.first.file)

    # ------------------------------------------------------------------ data

    async def _read_range(self, file: str, offset: int, length: int) -> bytes:
        await self._following.wait()
        return await self.monitor.read_range(self.attempt_id, file, offset, length)

    def _position(self, file: str) -> tuple[int, int | None] | None:
        """Where the monitor's stream of ``file`` stands: (byte offset, lines before it)."""
        return self.monitor.position(self.attempt_id, file)

    def _lines_seen(self, file: str) -> int:
        return self.view.triage.lines_seen(file) if self.view else 0

    def _add_findings(self, findings: list[Observation]) -> None:
        """Mark finding lines in the log view (at most MAX_MARKS: a signature hit on every line
        of a huge log must not grow memory without bound)."""
        new = []
        room = MAX_MARKS - len(self._seen_findings)
        if room <= 0:
            return
        for obs in findings[:room]:
            key = (obs.file, obs.line_no, obs.id)
            if key not in self._seen_findings:
                self._seen_findings.add(key)
                new.append((obs.file, obs.line_no, obs.severity))
        if new:
            self.log_view.add_findings(new)

    def _groups(self) -> list[FindingGroup]:
        if self.view is not None:
            return self.view.triage.groups
        return list(self.diagnosis.groups) if self.diagnosis else []

    def _show_triage(self, diagnosis: Diagnosis, snapshot: StageSnapshot) -> None:
        self.diagnosis = diagnosis
        self._show_banner()
        self.query_one(WorkersPanel).update_snapshot(snapshot)
        root = diagnosis.root_cause.id if diagnosis.root_cause else None
        root_first = diagnosis.root_cause.first if diagnosis.root_cause else None
        self.query_one(FindingsPanel).update_groups(self._groups(), root, root_first)

    def _show_banner(self) -> None:
        cancellable = self.attempt.live and bool(self.attempt.job_id)
        self.query_one(DiagnosisBanner).show(self.diagnosis, cancellable=cancellable, nodes=self._node_count())

    def _show_head(self) -> None:
        a = self.attempt
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(attempt_ref(a.arm_id, a.number), "bold")
        text.append("  ")
        text.append(self.arm_name)
        text.append("  cluster ", "dim")
        text.append(a.cluster)
        text.append("  job ", "dim")
        text.append(a.job_id or "-")
        text.append("  ")
        text.append(f" {a.state} ", "bold reverse")
        if a.simulated:
            text.append(" SIMULATED ", "bold italic")
        if a.reason or a.error:
            text.append(f" {a.reason or a.error}")
        if a.nodelist:
            text.append("  nodes ", "dim")
            text.append(a.nodelist)
        agent = self.session.agent_statuses().get(a.cluster)
        if agent is not None:
            text.append("  logs ", "dim")
            text.append(agent.summary)
        self.query_one("#attempt-head", Static).update(text)
        self.query_one("#attempt-provenance", Static).update(provenance_line(a))

    @on(CoreUpdate)
    def _core_update(self, message: CoreUpdate) -> None:
        event = message.event
        if isinstance(event, AttemptChanged) and event.attempt.id == self.attempt_id:
            self.attempt = event.attempt
            self._show_head()
            self._show_banner()
            if self.view is None and self.attempt.output_dir and not self._opening:
                self.open_attempt()
        elif isinstance(event, LogLines) and event.attempt_id == self.attempt_id:
            self.log_view.append(event.file, event.first_line_no, event.lines)
        elif isinstance(event, Triaged) and event.attempt_id == self.attempt_id:
            self._add_findings(event.new_findings)
            self._show_triage(event.diagnosis, event.snapshot)
        elif isinstance(event, AgentChanged) and event.cluster == self.attempt.cluster:
            self._show_head()

    @on(FindingsPanel.Selected)
    def _finding_selected(self, message: FindingsPanel.Selected) -> None:
        self.log_view.jump_to(message.file, message.line_no)
        self.log_view.body.focus()

    @on(LogBody.FollowChanged)
    def _follow_changed(self) -> None:
        self.refresh_bindings()

    # ------------------------------------------------------------------ actions

    def action_next_finding(self, step: int) -> None:
        self.log_view.next_finding(step)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # In a text field the prompt's keys are text (priority bindings come first otherwise).
        return not (action == "prompt" and isinstance(self.focused, Input))

    def action_prompt(self, mode: str) -> None:
        self.log_view.open_prompt(mode)

    def action_next_match(self, step: int) -> None:
        self.log_view.next_match(step)

    def action_findings_only(self) -> None:
        self.log_view.toggle_findings_only()

    def action_cycle_file(self, step: int) -> None:
        self.log_view.cycle_file(step)

    def action_file(self, index: int) -> None:
        self.log_view.show_index(index)

    def action_older(self) -> None:
        self.log_view.load_older()

    def action_follow(self) -> None:
        self.log_view.follow_tail()

    def action_report(self) -> None:
        """This attempt as a pull-request report (Markdown: saved and copied)."""
        self.write_report(attempt_ref(self.attempt.arm_id, self.attempt.number))

    @work(exclusive=False, group="report", exit_on_error=False)
    async def write_report(self, target: str) -> None:
        from screens.report_flow import save_report

        await save_report(self, self.session, target, self.report_dir)

    def action_focus_log(self) -> None:
        self.log_view.body.focus()

    def action_wrap(self) -> None:
        self.log_view.toggle_wrap()

    def file_path(self) -> str | None:
        """The shown file's path where it is (on this machine, or on the cluster)."""
        file = self.log_view.current
        if file is None:
            return None
        if file.startswith("/") or not self.attempt.output_dir:
            return file
        return f"{self.attempt.output_dir.rstrip('/')}/{file}"

    def action_copy_line(self) -> None:
        line = self.log_view.cursor_line()
        if line is None:
            self.notify("No line to copy", severity="warning")
            return
        self.app.copy_to_clipboard(line[1])
        self.notify(f"Copied line {line[0]} to the clipboard", timeout=3)

    def action_copy_path(self) -> None:
        path = self.file_path()
        if path is None:
            self.notify("No file shown", severity="warning")
            return
        where = f"{self.attempt.cluster}:" if self._remote() else ""
        self.app.copy_to_clipboard(f"{where}{path}")
        self.notify(f"Copied {where}{path}", timeout=4)

    def _remote(self) -> bool:
        profile = self.session.profiles.get(self.attempt.cluster)
        return profile is not None and profile.ssh is not None

    def action_pager(self) -> None:
        """The shown file in $PAGER (less by default); a file on a cluster is paged from the lines held here."""
        import os
        import shlex
        import subprocess
        import tempfile

        path = self.file_path()
        if path is None:
            self.notify("No file shown", severity="warning")
            return
        pager = shlex.split(os.environ.get("PAGER") or "less")
        temp: str | None = None
        if self._remote() or not os.path.isfile(path):
            # Untrusted text, already cleaned of terminal controls: the pager sees what the view shows.
            with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8") as out:
                out.write("\n".join(self.log_view.held_lines()) + "\n")
                temp = path = out.name
            self.notify(f"The file is on {self.attempt.cluster}: paging the lines held here", timeout=5)
        try:
            with self.app.suspend():
                subprocess.run([*pager, path], check=False)
        except Exception as exc:
            self.notify(f"cannot run {pager[0]}: {exc}", severity="error")
        finally:
            if temp is not None:
                os.unlink(temp)

    def _node_count(self) -> int | None:
        """Nodes the job holds: as its log says, else as its recipe asks."""
        return (self.diagnosis.nodes if self.diagnosis else None) or self.node_demand

    def action_cancel(self) -> None:
        attempt = self.attempt
        if not attempt.live or not attempt.job_id:
            self.notify("This attempt's job is not running", severity="warning")
            return
        nodes = self._node_count()
        node_text = f"{nodes} node(s)" if nodes else "its nodes"
        lines = [
            f"{self.arm_name} ({attempt_ref(attempt.arm_id, attempt.number)})",
            f"job {attempt.job_id} on {attempt.cluster} ({attempt.state}), {node_text}"
            + (f": {attempt.nodelist}" if attempt.nodelist else ""),
        ]
        if self.diagnosis is not None and self.diagnosis.verdict == "doomed" and self.diagnosis.root_cause:
            root = self.diagnosis.root_cause
            lines.append(f"\nDoomed: {root.first.finding.title} [{root.id}]")
        lines.append(f"\nscancel frees {node_text}; its logs and any results already written are kept.")

        def answered(yes: bool | None) -> None:
            if yes:
                self.cancel_attempt(attempt)

        self.app.push_screen(ConfirmDialog(f"Cancel job {attempt.job_id}?", "\n".join(lines),
                                           yes="Cancel job (y)"), answered)  # fmt: skip

    @work(group="cancel", exit_on_error=False)
    async def cancel_attempt(self, attempt: AttemptRow) -> None:
        try:
            await self.session.cancel([attempt])
        except Exception as exc:
            self.notify(f"cancel failed: {exc}", severity="error")
        else:
            self.notify(f"Cancel requested for job {attempt.job_id}")
