"""The srt-console Textual application."""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.worker import Worker, WorkerState

from console.clusters import LOCAL, Profile
from console.engine import Engine, LaunchRefused
from console.events import CoreEvent, FileSkipped, Notice, TrackingError
from console.model import Recipe
from console.monitor import Monitor
from console.paths import asset
from console.sanitize import clean_line
from console.session import ConfigError, Session
from console.store import StoreError
from screens import cycles
from screens.commands import ConsoleCommands
from screens.messages import CoreUpdate, LaunchRequested, WorkerFailed
from screens.recipes import RecipesScreen
from screens.sweeps import SweepsScreen

# Before any widget draws: Textual's strips and cleared caches made every frame cyclic garbage.
cycles.install()

SWEEPS = "sweeps"
_NOTICE_TITLES = {
    "attempt_doomed": "Doomed",
    "attempt_failed": "Attempt failed",
    "arm_completed": "Arm completed",
    "sweep_ended": "Sweep ended",
    "notify_failed": "notify: command",
}

__all__ = ["SrtConsole", "make_app", "run"]


class SrtConsole(App[None]):
    """Operator console for srtctl benchmarks."""

    CSS_PATH = str(asset("console.tcss"))
    TITLE = "srt-console"
    COMMANDS = App.COMMANDS | {ConsoleCommands}
    # Screens lay out their panels for the terminal's size (assets/console.tcss: -short, -narrow).
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]  # noqa: RUF012 - Textual declares it a list
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide")]  # noqa: RUF012
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "toggle_help", "Help"),
        Binding("s", "show_sweeps", "Sweeps"),
        Binding("z", "toggle_maximize", "Max panel"),
        Binding("ctrl+q", "quit", "Quit", show=False),
    ]

    settle_collector = False
    """Freeze what start-up made once the UI is up (:func:`_settle_collector`): the program
    does; an app a test makes and drops does not (its frozen objects would never be freed)."""

    def __init__(self, roots: list[Path], notes: list[str] | None = None, session: Session | None = None) -> None:
        super().__init__()
        self.roots = roots
        self.notes = notes or []
        self.session = session
        self.sweeps_screen: SweepsScreen | None = None
        self.notices: list[Notice] = []  # every notice shown, oldest first
        self._unsubscribe = session.subscribe(self._on_core_event) if session is not None else None

    @property
    def engine(self) -> Engine | None:
        return self.session.engine if self.session else None

    @property
    def monitor(self) -> Monitor | None:
        return self.session.monitor if self.session else None

    @property
    def profiles(self) -> dict[str, Profile]:
        return self.session.profiles if self.session else {}

    @property
    def default_cluster(self) -> str:
        return self.session.default_cluster if self.session else LOCAL

    def on_mount(self) -> None:
        self.push_screen(RecipesScreen(self.roots, self.notes, self.session))
        if self.session is not None:
            self.session.start_notices()
            self.track_jobs()
        if self.settle_collector:
            self.call_after_refresh(_settle_collector)

    def _on_core_event(self, event: CoreEvent) -> None:
        # Core events arrive on the app's own loop. Every screen on the stack that takes this
        # kind of event gets one message with the event itself. Only those: any message a screen
        # below the top one handles makes Textual repaint the whole top screen, and a followed
        # log's lines arrive many times a second.
        for screen in self.screen_stack:
            if isinstance(event, getattr(screen, "CORE_EVENTS", ())):
                screen.post_message(CoreUpdate(event))
        if isinstance(event, Notice):
            # On whatever screen is showing: a toast, and the terminal bell for the operator away from it.
            severity: SeverityLevel = (
                "error" if event.severity == "error" else "warning" if event.severity == "warning" else "information"
            )
            self.notify(clean_line(event.text, 300), title=_NOTICE_TITLES.get(event.kind, "srt-console"),
                        severity=severity, timeout=12, markup=False)  # fmt: skip
            self.bell()
            self.notices.append(event)
        if isinstance(event, TrackingError):
            where = f"{event.cluster}: " if event.cluster else ""
            self.notify(f"{where}{event.message}", title="Tracking error", severity="warning", timeout=10)
        elif isinstance(event, FileSkipped):
            self.notify(clean_line(f"{event.file}: {event.reason}"), title="Not read", severity="warning", timeout=10)

    @work(exclusive=True, group="tracker", exit_on_error=False)
    async def track_jobs(self) -> None:
        """The session's poll loop, for as long as the console runs (failures are reported, not fatal)."""
        assert self.session is not None
        await self.session.track()

    @on(LaunchRequested)
    def _launch_requested(self, message: LaunchRequested) -> None:
        self.launch(message.recipes, message.cluster, message.name)

    @work(exclusive=False, group="launch", exit_on_error=False)
    async def launch(self, recipes: list[Recipe], cluster: str, name: str | None = None) -> None:
        """Submit the recipes' arms, one sweep, exactly as the launch dialog showed them."""
        assert self.session is not None
        try:
            sweep_id = await self.session.launch(recipes, cluster, name)
        except LaunchRefused as exc:
            detail = "\n".join(exc.problems[:5])
            self.notify(f"{exc}\n{detail}".strip(), severity="error", timeout=10)
            return
        self.notify(f"Sweep s{sweep_id} submitted to {cluster}")
        self.action_show_sweeps()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR:
            self._show_failure(event.worker)

    @on(WorkerFailed)
    def _worker_failed(self, message: WorkerFailed) -> None:
        self._show_failure(message.worker)

    def _show_failure(self, worker: Worker[object]) -> None:
        """Any worker, the app's or a screen's or widget's, that ended in error is shown: failures never vanish."""
        error = worker.error
        self.notify(
            f"{worker.name or 'a background task'} failed: {type(error).__name__}: {error}",
            title="Error",
            severity="error",
            timeout=15,
        )

    def action_show_sweeps(self) -> None:
        if self.session is None:
            self.notify("No store: launching and tracking are unavailable", severity="error")
            return
        # Installed, not merely kept: a screen that is popped without being installed is torn
        # down, and pushing that instance again leaves it on the stack but never repainted.
        if self.sweeps_screen is None:
            self.sweeps_screen = SweepsScreen(self.session)
            self.install_screen(self.sweeps_screen, SWEEPS)
        if self.sweeps_screen in self.screen_stack:
            while self.screen is not self.sweeps_screen:
                self.pop_screen()
        else:
            self.push_screen(SWEEPS)

    # --- the command palette's commands (screens/commands.py) ------------------------------

    def action_launch(self) -> None:
        """Launch from the recipes screen (brought back if another screen is showing)."""
        while not isinstance(self.screen, RecipesScreen) and len(self.screen_stack) > 2:
            self.pop_screen()
        if isinstance(self.screen, RecipesScreen):
            self.screen.action_launch()
        else:
            self.notify("The recipes screen is not showing: press Esc until it is", severity="warning")

    def run_on_sweeps(self, ref: str | None, what: str) -> None:
        """Show the sweeps screen with the cursor on ``ref`` (a sweep, arm or attempt id; None:
        where it is) and do ``what`` there: open, details, results, export, rerun, rerun_failed, cancel."""
        self.action_show_sweeps()
        if self.sweeps_screen is not None:
            self.sweeps_screen.request(ref, what)

    def action_scan_folder(self) -> None:
        from screens.dialogs import PathDialog

        def chosen(folder: str | None) -> None:
            if folder:
                self.scan_folder(folder)

        self.push_screen(
            PathDialog("Scan a folder of logs", "Triage every log file below this folder (a job output dir):",
                       str(Path.cwd()), action="Scan"),
            chosen,
        )  # fmt: skip

    @work(thread=True, group="scan", exit_on_error=False)
    def scan_folder(self, folder: str) -> None:
        from console.cli.scan_cmd import ScanError, collect_files, render_report, scan_paths
        from screens.dialogs import InfoDialog

        try:
            files, notes = collect_files([folder])
            triage = scan_paths(files)
        except ScanError as exc:
            self.call_from_thread(self.notify, f"scan: {exc}", severity="error")
            return
        diagnosis = triage.diagnose(None)
        report = render_report(triage, diagnosis, triage.snapshot(None), files)
        text = "\n".join([*notes, report]) if notes else report
        self.call_from_thread(self.push_screen, InfoDialog(f"Scan of {folder}: {diagnosis.verdict}", text))

    def action_toggle_maximize(self) -> None:
        """`z`: the focused panel fills the screen, or the screen's layout comes back."""
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
        elif screen.focused is None or not screen.maximize(screen.focused):
            self.notify("Nothing here to maximise: focus a panel first (tab)", severity="warning", timeout=3)

    def action_toggle_help(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    async def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self.session is not None:
            await self.session.close()


YOUNG_THRESHOLD = 50_000
"""Allocations between two collections of the youngest generation (Python's default: 700)."""


def _settle_collector() -> None:
    """Once the UI is up: what start-up made (modules, classes, the first screen) lives as long
    as the app, so it is moved out of the cyclic collector's sight. A full collection walked it
    all (about 120,000 objects, most of the 170 ms such a collection took under a busy log: a
    frame, a key press, a finding held back that long); now it walks what came later.

    And the youngest generation is collected less often: every 700 allocations (Python's
    default), a frame's strips and rows still in use were carried into the older generations at
    every collection, and a full collection (over 100 ms under a busy log) came every few
    seconds. With strips freed as soon as they are dropped (screens/cycles.py), what the young
    generation holds at 50,000 is mostly alive: collections are rare and few objects move on."""
    gc.collect()
    gc.freeze()
    _gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, max(gen1, 20), gen2)


def make_app(
    roots: list[Path],
    notes: list[str] | None = None,
    engine: Engine | None = None,
    default_cluster: str = LOCAL,
    *,
    session: Session | None = None,
) -> SrtConsole:
    """The app, built the same way for the CLI and for tests (around a session, or an engine)."""
    if session is None and engine is not None:
        session = Session.of(engine, default_cluster)
    return SrtConsole(roots, notes, session)


def run(roots: list[Path], notes: list[str] | None = None, config_path: str | None = None) -> int:
    notes = list(notes or [])

    def note(problem: str) -> None:
        if problem not in notes:  # config problems may already be among the recipe roots' notes
            notes.append(problem)

    session: Session | None = None
    try:
        session = Session.open(config_path, on_note=note)
    except StoreError as exc:
        notes.append(f"{exc}: launching and tracking are unavailable")
    except ConfigError as exc:
        # Not a silent fall back to another cluster: the operator fixes the config first.
        print(f"srt-console: {exc}", file=sys.stderr)
        return 2
    app = make_app(roots, notes, session=session)
    app.settle_collector = True
    app.run()
    return 0
