"""The log view's tools: wrap, regex search, jump to a line, copy a line or the path, the status
line when filter and search combine, follow mode with a horizontal scrollbar, and `z`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from textual import events
from textual.pilot import Pilot

from console.engine import Engine
from console.scheduler import JobState
from screens.app import SrtConsole, make_app
from screens.attempt import AttemptScreen
from screens.widgets.log_view import LogView
from tests.tui.helpers import wait_for
from tests.tui.test_attempt_screen import engine, finished_attempt, open_attempt  # noqa: F401 - fixture

LINES = [f"line {i} {'worker ready' if i % 10 == 0 else 'loading shards'}" for i in range(1, 201)]


def _job(tmp_path: Path, lines: list[str]) -> Path:
    out = tmp_path / "outputs" / "8801"
    (out / "logs").mkdir(parents=True)
    (out / "logs" / "sweep_8801.log").write_text("\n".join(lines) + "\n")
    return out


def status(view: LogView) -> str:
    return str(view.query_one("#log-status").render())


@contextlib.asynccontextmanager
async def log_of(
    engine: Engine,  # noqa: F811 - the fixture's value
    tmp_path: Path,
    lines: list[str],
    size: tuple[int, int] = (120, 40),
) -> AsyncIterator[tuple[SrtConsole, Pilot[None], AttemptScreen, LogView]]:
    """The attempt screen of an ended job whose sweep log holds ``lines``, open in a test app."""
    out = _job(tmp_path, lines)
    attempt = finished_attempt(engine, out, "8801", JobState.COMPLETED)
    app = make_app([], engine=engine)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        screen = await open_attempt(app, attempt.id)
        yield app, pilot, screen, screen.query_one(LogView)


async def test_regex_search_jump_to_line_copy_and_a_consistent_status(engine: Engine, tmp_path: Path) -> None:  # noqa: F811
    async with log_of(engine, tmp_path, LINES) as (app, pilot, _, view):
        await wait_for(pilot, lambda: view.body.row_count == 200)
        # A regular expression, case-insensitive.
        await pilot.press("slash", *"line 1[0-9]0 WORKER")
        await wait_for(pilot, lambda: "10 match" in status(view))
        assert view.body.match_line_numbers()[:2] == [100, 110]
        # Filter and search together: both counts are of the same rows.
        await pilot.press("escape", "f", *"ready", "enter")
        await wait_for(pilot, lambda: "filter: lines containing 'ready' → 20 of 200 lines" in status(view))
        assert "search /line 1[0-9]0 WORKER/: 10 match of them" in status(view)
        await pilot.press("slash", "ctrl+u", *"(unclosed")
        await wait_for(pilot, lambda: "not a regex" in status(view))
        await pilot.press("ctrl+u", "escape", "f", "ctrl+u", "enter")
        await wait_for(pilot, lambda: view.body.row_count == 200)
        # Jump to a line by number.
        await pilot.press("colon", *"42", "enter")
        await wait_for(pilot, lambda: view.body.cursor_line_no == 42)
        await pilot.press("y")
        assert app.clipboard == "line 42 loading shards"
        await pilot.press("Y")
        assert app.clipboard == f"{tmp_path}/outputs/8801/logs/sweep_8801.log"
        await pilot.press("colon", *"abc", "enter")
        await wait_for(pilot, lambda: "not a line number: 'abc'" in status(view))


async def test_wrap_and_the_newest_line_in_follow_mode(engine: Engine, tmp_path: Path) -> None:  # noqa: F811
    lines = [f"short {i}" for i in range(1, 60)] + ["wide " + "x" * 400, "the newest line"]
    async with log_of(engine, tmp_path, lines, size=(80, 24)) as (_, pilot, screen, view):
        await wait_for(pilot, lambda: view.body.row_count == 61)
        await pilot.pause()
        # A horizontal scrollbar for the wide line takes a row: the newest line is still on screen.
        assert view.body.follow
        assert any("the newest line" in row for row in view.body.rendered_text())
        await pilot.press("w")
        await wait_for(pilot, lambda: view.body.wrap and view.body.row_count > 61)
        await pilot.pause()
        shown = view.body.rendered_text()
        assert any("the newest line" in row for row in shown)
        assert view.body.virtual_size.width <= view.body.size.width  # no sideways scrolling
        assert "wrap" in status(view)
        wide_rows = [row for row in shown if "xxxx" in row]
        assert len(wide_rows) >= 2 and all(len(row.rstrip()) <= 80 for row in wide_rows)
        await pilot.press("w")
        await wait_for(pilot, lambda: view.body.row_count == 61)
        # `z`: the log view fills the screen, `z` again gives the layout back.
        await pilot.press("z")
        await wait_for(pilot, lambda: screen.maximized is view)
        await pilot.press("z")
        await wait_for(pilot, lambda: screen.maximized is None)


async def test_keys_typed_ahead_go_to_the_prompt_they_follow(engine: Engine, tmp_path: Path) -> None:  # noqa: F811
    """A terminal delivers what was typed in one read: `f` then the filter's text arrive together
    (a busy screen, a fast typist, a paste). The text is the prompt's, not keys of the log's
    bindings (`c` would ask to cancel the job, `y` copy a line, `/` open the search)."""
    async with log_of(engine, tmp_path, LINES) as (app, pilot, screen, view):
        await wait_for(pilot, lambda: view.body.row_count == 200)
        driver = app._driver
        assert driver is not None
        names = {" ": "space", "/": "slash"}
        for key, char in [*((names.get(c, c), c) for c in "fready f/g cy"), ("enter", "\r")]:
            event = events.Key(key, char)
            event.set_sender(app)
            driver.send_message(event)  # as the terminal's reader does: no pause between keys
        await wait_for(pilot, lambda: view.body.filter_text == "ready f/g cy" and view.body.has_focus)
        assert app.screen is screen  # no dialog was opened by the typed text
        assert app.clipboard == ""
