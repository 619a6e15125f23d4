"""The srt-console Textual application."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from console.paths import asset
from screens.recipes import RecipesScreen


class SrtConsole(App[None]):
    """Operator console for srtctl benchmarks. Screens are pushed by mode."""

    CSS_PATH = str(asset("console.tcss"))
    TITLE = "srt-console"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "toggle_help", "Help"),
        Binding("ctrl+q", "quit", "Quit", show=False),
    ]

    def __init__(self, roots: list[Path], notes: list[str] | None = None) -> None:
        super().__init__()
        self.roots = roots
        self.notes = notes or []

    def on_mount(self) -> None:
        self.push_screen(RecipesScreen(self.roots, self.notes))

    def action_toggle_help(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()


def make_app(roots: list[Path], notes: list[str] | None = None) -> SrtConsole:
    """The app, built the same way for the CLI and for tests."""
    return SrtConsole(roots, notes)


def run(roots: list[Path], notes: list[str] | None = None, config_path: str | None = None) -> int:
    make_app(roots, notes).run()
    return 0
