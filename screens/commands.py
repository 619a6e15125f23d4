"""The command palette's own commands (ctrl+p): launch, open a sweep, arm or attempt by id, rerun,
rerun failed, cancel, results, export, scan a folder. Each is carried out by the app, on
whichever screen is showing, through the same actions as the keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from screens.app import SrtConsole

Command = tuple[str, str, Callable[[], Any]]  # (text, help, what it does)


def console_commands(app: SrtConsole) -> Iterator[Command]:
    """Every command the console offers now: the fixed ones, then one set per sweep, arm and attempt."""
    yield ("Launch the selected recipe, folder or marked recipes", "the launch dialog", app.action_launch)
    yield ("Sweeps: show every sweep, arm and attempt", "the sweeps screen", app.action_show_sweeps)
    yield (
        "Rerun failed arms of the selected sweep",
        "one dialog for the whole sweep",
        partial(app.run_on_sweeps, None, "rerun_failed"),
    )
    yield ("Scan a folder of logs", "offline triage: root cause and advice", app.action_scan_folder)
    if app.session is None:
        return
    for row in app.session.tree().rows():
        name = f"{row.key} {row.name}"
        if row.kind == "sweep":
            yield (f"Open sweep {name}", row.state, partial(app.run_on_sweeps, row.key, "open"))
            yield (f"Results of {name}", "tables and plot", partial(app.run_on_sweeps, row.key, "results"))
            yield (f"Export {name}", "CSV and JSON, asks where", partial(app.run_on_sweeps, row.key, "export"))
            yield (f"Rerun failed arms of {name}", row.state, partial(app.run_on_sweeps, row.key, "rerun_failed"))
        elif row.kind == "arm":
            yield (f"Open arm {name}", row.state, partial(app.run_on_sweeps, row.key, "details"))
            yield (f"Rerun arm {name}", f"after {row.state}", partial(app.run_on_sweeps, row.key, "rerun"))
        else:
            yield (
                f"Open attempt {row.key}",
                f"{row.state} job {row.job}",
                partial(app.run_on_sweeps, row.key, "details"),
            )
        if row.live and row.kind != "sweep":
            yield (f"Cancel {name}", f"job {row.job} ({row.state})", partial(app.run_on_sweeps, row.key, "cancel"))


class ConsoleCommands(Provider):
    """The console's commands, fuzzy-matched on their text."""

    def _commands(self) -> list[Command]:
        from screens.app import SrtConsole

        app = self.app
        return list(console_commands(app)) if isinstance(app, SrtConsole) else []

    async def discover(self) -> Hits:
        for text, help_text, run in self._commands()[:12]:
            yield DiscoveryHit(text, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, run in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), run, text=text, help=help_text)
