"""Going back and forth between screens: what the terminal shows is always the screen that has the keys.

Run in a real pty and read back through a terminal emulator, because the failure this guards
against (a screen pushed a second time is never repainted) is invisible to Pilot's screenshots.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RECIPES
from tests.tui.terminal import Terminal, console_argv, console_env

RECIPES_TITLE = "srt-console — recipes"
SWEEPS_TITLE = "srt-console — sweeps"


@pytest.fixture
def term(tmp_path: Path) -> Iterator[Terminal]:
    # A library of one recipe: the launch needs no walking through the tree.
    library = tmp_path / "library"
    library.mkdir()
    shutil.copy(RECIPES / "demo" / "quick.yaml", library / "quick.yaml")
    env = console_env(tmp_path / "data")
    env["SRT_DEMO_SPEED"] = "8"
    t = Terminal(console_argv("tui", str(library)), env, cols=140, rows=40)
    try:
        yield t
    finally:
        t.close()


def title(text: str) -> str:
    return text.splitlines()[0] if text else ""


def showing(term: Terminal, name: str) -> str:
    return term.wait(lambda text: name in title(text), f"the {name!r} title")


def test_recipes_and_sweeps_back_and_forth(term: Terminal) -> None:
    showing(term, RECIPES_TITLE)
    for _ in range(3):
        term.press("s")
        showing(term, SWEEPS_TITLE)
        term.press("escape")
        showing(term, RECIPES_TITLE)


def test_launch_then_sweeps_attempt_results_and_back(term: Terminal) -> None:
    showing(term, RECIPES_TITLE)
    # Visit the sweeps screen once, so that the launch has to bring it back.
    term.press("s")
    showing(term, SWEEPS_TITLE)
    term.press("escape")
    showing(term, RECIPES_TITLE)
    term.wait(lambda text: "demo-quick" in text, "the quick recipe's preview")
    term.press("l")
    term.wait(lambda text: "Launch" in text and "demo-quick" in text, "the launch dialog")
    term.press("y")
    text = showing(term, SWEEPS_TITLE)
    term.wait(lambda text: "a1.1" in text, "the new attempt's row")
    assert "demo-quick" in term.text()
    for key, name in (("enter", "attempt"), ("p", "results")):
        term.press(key)
        term.wait(lambda text, n=name: n in title(text) and SWEEPS_TITLE not in title(text), f"the {name} screen")
        term.press("escape")
        showing(term, SWEEPS_TITLE)
        term.wait(lambda text: "a1.1" in text, "the attempt's row, repainted")
    term.press("escape")
    showing(term, RECIPES_TITLE)
    term.press("s")
    text = showing(term, SWEEPS_TITLE)
    assert "a1.1" in text
