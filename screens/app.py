"""The srt-console Textual application."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message

from console.clusters import LOCAL, Profile, load_profiles
from console.config import load_config
from console.engine import AttemptChanged, ClusterChanged, Engine, Event, LaunchRefused
from console.model import Recipe
from console.monitor import LogLines, Monitor, MonitorEvent, PointArrived, Triaged
from console.paths import asset
from console.store import Store, StoreError, default_data_dir
from screens.messages import (
    AttemptUpdated,
    ClusterStatusChanged,
    LogLinesArrived,
    PointUpdated,
    TriageUpdated,
)
from screens.recipes import RecipesScreen
from screens.sweeps import SweepsScreen

POLL_INTERVAL_S = 2.0
SWEEPS = "sweeps"


class SrtConsole(App[None]):
    """Operator console for srtctl benchmarks."""

    CSS_PATH = str(asset("console.tcss"))
    TITLE = "srt-console"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "toggle_help", "Help"),
        Binding("s", "show_sweeps", "Sweeps"),
        Binding("ctrl+q", "quit", "Quit", show=False),
    ]

    def __init__(
        self,
        roots: list[Path],
        notes: list[str] | None = None,
        engine: Engine | None = None,
        default_cluster: str = LOCAL,
    ) -> None:
        super().__init__()
        self.roots = roots
        self.notes = notes or []
        self.engine = engine
        self.default_cluster = default_cluster
        self.sweeps_screen: SweepsScreen | None = None
        self.monitor: Monitor | None = None

    @property
    def profiles(self) -> dict[str, Profile]:
        return self.engine.profiles if self.engine else {}

    def on_mount(self) -> None:
        default = self.profiles.get(self.default_cluster)
        # Recipes are checked for the srtctl of the default cluster, when its profile says which.
        self.push_screen(RecipesScreen(self.roots, self.notes, default.flavour() if default else None))
        if self.engine is not None:
            self.engine.subscribe(self._on_engine_event)
            self.monitor = Monitor(self.engine)
            self.monitor.subscribe(self._on_monitor_event)
            self.track_jobs()

    def _broadcast(self, message_factory: Callable[[], Message]) -> None:
        """Post a fresh message to every screen on the stack (screens that don't care ignore it)."""
        for screen in self.screen_stack:
            screen.post_message(message_factory())

    def _on_engine_event(self, event: Event) -> None:
        # Engine events arrive on the app's own loop.
        if isinstance(event, AttemptChanged):
            self._broadcast(lambda: AttemptUpdated(event.attempt))
        elif isinstance(event, ClusterChanged):
            self._broadcast(lambda: ClusterStatusChanged(event.cluster, event.status))

    def _on_monitor_event(self, event: MonitorEvent) -> None:
        if isinstance(event, LogLines):
            self._broadcast(lambda: LogLinesArrived(event.attempt_id, event.file, event.first_line_no, event.lines,
                                                    event.findings))  # fmt: skip
        elif isinstance(event, Triaged):
            self._broadcast(lambda: TriageUpdated(event.attempt_id, event.diagnosis, event.snapshot,
                                                  event.new_findings))  # fmt: skip
        elif isinstance(event, PointArrived):
            self._broadcast(lambda: PointUpdated(event.attempt_id, event.point))

    @work(exclusive=True, group="tracker", exit_on_error=False)
    async def track_jobs(self) -> None:
        """Poll every cluster with live attempts and follow their logs, for as long as the console runs."""
        assert self.engine is not None and self.monitor is not None
        while True:
            await self.engine.poll_once()
            try:
                await self.monitor.sync()
            except Exception as exc:
                self.notify(f"log following: {exc}", severity="warning")
            await asyncio.sleep(POLL_INTERVAL_S)

    @work(exclusive=False, group="launch", exit_on_error=False)
    async def launch(self, recipe: Recipe, cluster: str) -> None:
        """Submit the recipe's arms exactly as the launch dialog showed them."""
        assert self.engine is not None
        try:
            sweep_id = await self.engine.launch([recipe.path], cluster, planned=([recipe], list(recipe.arms)))
        except LaunchRefused as exc:
            detail = "\n".join(exc.problems[:5])
            self.notify(f"{exc}\n{detail}".strip(), severity="error", timeout=10)
            return
        self.notify(f"Sweep s{sweep_id} submitted to {cluster}")
        self.action_show_sweeps()

    def action_show_sweeps(self) -> None:
        if self.engine is None:
            self.notify("No store: launching and tracking are unavailable", severity="error")
            return
        # Installed, not merely kept: a screen that is popped without being installed is torn
        # down, and pushing that instance again leaves it on the stack but never repainted.
        if self.sweeps_screen is None:
            self.sweeps_screen = SweepsScreen(self.engine)
            self.install_screen(self.sweeps_screen, SWEEPS)
        if self.sweeps_screen in self.screen_stack:
            while self.screen is not self.sweeps_screen:
                self.pop_screen()
        else:
            self.push_screen(SWEEPS)

    def action_toggle_help(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    async def on_unmount(self) -> None:
        if self.monitor is not None:
            await self.monitor.close()
        if self.engine is not None:
            await self.engine.close()


def make_app(
    roots: list[Path], notes: list[str] | None = None, engine: Engine | None = None, default_cluster: str = LOCAL
) -> SrtConsole:
    """The app, built the same way for the CLI and for tests."""
    return SrtConsole(roots, notes, engine, default_cluster)


def run(roots: list[Path], notes: list[str] | None = None, config_path: str | None = None) -> int:
    notes = list(notes or [])
    config = load_config(config_path)
    data_dir = default_data_dir()
    profiles, problems = load_profiles(config, data_dir)
    notes += problems
    engine: Engine | None = None
    try:
        engine = Engine(Store(data_dir / "console.sqlite3"), profiles, data_dir)
    except StoreError as exc:
        notes.append(f"{exc}: launching and tracking are unavailable")
    default = config.raw.get("default_cluster")
    default_cluster = default if isinstance(default, str) and default in profiles else LOCAL
    make_app(roots, notes, engine, default_cluster).run()
    return 0
