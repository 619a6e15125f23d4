"""The launch dialog: per arm the scheduling values and their sources, the cluster's own dry-run
verdict and preflight; checked again for another cluster; launching a folder and marked recipes.

The srtctl cluster here is this machine with the srtctl stand-in (tests/fakes/srtctl_standin.py,
which follows srtctl's dry-run and preflight contract) in a checkout with an srtslurm.yaml.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from textual.widgets import Select

from console.clusters import load_profiles
from console.config import load_config
from console.engine import Engine
from console.session import Session
from console.store import Store
from screens.app import SrtConsole, make_app
from screens.dialogs import LaunchDialog
from screens.sweeps import SweepsScreen
from screens.widgets.recipe_tree import RecipeTree
from tests.conftest import RECIPES, ROOT
from tests.tui.helpers import showing, wait_for

DEMO = RECIPES / "demo"


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.setenv("SRT_DEMO_SPEED", "8")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "srtslurm.yaml").write_text("default_account: acct\ndefault_time_limit: '00:30:00'\n")
    standin = ROOT / "tests" / "fakes" / "srtctl_standin.py"
    config = tmp_path / "config.yaml"
    config.write_text(
        "clusters:\n"
        "  site:\n"
        "    launcher: srtctl\n"
        "    scheduler: slurm\n"
        f"    srt_slurm: {checkout}\n"
        f"    srtctl: {sys.executable} {standin}\n"
        "    partition: debug\n"
        f"    workdir: {tmp_path / 'work'}\n"
        "  broken:\n"
        "    launcher: srtctl\n"
        "    scheduler: slurm\n"
        f"    srt_slurm: {checkout}\n"
        "    srtctl: /bin/false\n"
        f"    workdir: {tmp_path / 'work'}\n"
    )
    data = tmp_path / "data"
    profiles, problems = load_profiles(load_config(config), data)
    assert problems == []
    return Session.of(Engine(Store(data / "console.sqlite3"), profiles, data), "site")


def plan_text(app: SrtConsole) -> str:
    return str(app.screen.query_one("#plan").render())


async def open_dialog(app: SrtConsole, pilot, path: Path | None = None) -> LaunchDialog:  # type: ignore[no-untyped-def]
    tree = app.screen.query_one(RecipeTree)
    await wait_for(pilot, lambda: len(tree._leaves) >= 7)
    if path is not None:
        tree.select_path(str(path))
    await pilot.pause()
    await pilot.press("l")
    await wait_for(pilot, lambda: isinstance(app.screen, LaunchDialog))
    assert isinstance(app.screen, LaunchDialog)
    return app.screen


async def test_settings_sources_and_the_dry_run_verdict_then_another_cluster(session: Session) -> None:
    app = make_app([DEMO], session=session)
    async with app.run_test(size=(140, 45)) as pilot:
        dialog = await open_dialog(app, pilot, DEMO / "quick.yaml")
        assert dialog.heading == "Launch demo/quick.yaml"  # the library's path, not a site-packages one
        await wait_for(pilot, lambda: dialog.planned, timeout=60)
        text = plan_text(app)
        assert "partition debug (profile) · account acct (srtslurm.yaml) · time 00:30:00 (srtslurm.yaml)" in text
        assert "srtctl dry-run: agrees with the plan" in text
        await pilot.press("p")
        await wait_for(pilot, lambda: "preflight:" in plan_text(app), timeout=60)
        # Another cluster: checked again, and its srtctl refuses (its srtctl is /bin/false).
        dialog.query_one(Select).value = "broken"
        await wait_for(pilot, lambda: dialog.cluster == "broken" and dialog.planned, timeout=60)
        assert "srtctl dry-run: REFUSED" in plan_text(app)
        await pilot.press("y")
        await pilot.pause()
        assert isinstance(app.screen, LaunchDialog)  # refused: nothing submitted
        assert session.store.sweeps() == []
        dialog.query_one(Select).value = "local"
        await wait_for(pilot, lambda: dialog.cluster == "local" and dialog.planned, timeout=30)
        assert "demo launcher: simulated" in plan_text(app)
        await pilot.press("y")
        await wait_for(pilot, showing(pilot, SweepsScreen), timeout=30)
        (sweep,) = session.store.sweeps()
        assert sweep.cluster == "local"
        await wait_for(pilot, lambda: not app.screen.query(RecipeTree) and app.screen.is_mounted)
        await pilot.pause()


async def test_the_folder_under_the_cursor_launches_as_one_sweep(session: Session) -> None:
    app = make_app([RECIPES], session=session)
    async with app.run_test(size=(140, 45)) as pilot:
        tree = app.screen.query_one(RecipeTree)
        await wait_for(pilot, lambda: len(tree._leaves) >= 9)

        def folders(node):  # type: ignore[no-untyped-def]
            for child in node.children:
                if child.data is None:
                    yield child
                    yield from folders(child)

        folder = next(n for n in folders(tree.root) if str(n.label) == "demo/")
        await wait_for(pilot, lambda: tree.cursor_node is not None and tree.cursor_node.data is not None)
        await pilot.pause()
        tree.move_cursor(folder)
        await pilot.pause()
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchDialog))
        dialog = app.screen
        assert isinstance(dialog, LaunchDialog)
        assert dialog.heading.startswith("Launch the folder ") and "recipe(s)" in dialog.heading
        expected = sorted(p for p in (RECIPES / "demo").glob("*.yaml"))
        assert sorted(Path(r.path) for r in dialog.recipes) == expected
        await pilot.press("escape")


async def test_marked_recipes_launch_together(session: Session) -> None:
    app = make_app([DEMO], session=session)
    async with app.run_test(size=(140, 45)) as pilot:
        tree = app.screen.query_one(RecipeTree)
        await wait_for(pilot, lambda: len(tree._leaves) >= 7)
        for name in ("quick.yaml", "health-hang.yaml"):
            tree.select_path(str(DEMO / name))
            await pilot.pause()
            await pilot.press("m")
        assert tree.marked == {str(DEMO / "quick.yaml"), str(DEMO / "health-hang.yaml")}
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchDialog))
        dialog = app.screen
        assert isinstance(dialog, LaunchDialog) and dialog.heading == "Launch 2 marked recipe(s)"
        dialog.query_one(Select).value = "local"
        await wait_for(pilot, lambda: dialog.cluster == "local" and dialog.planned, timeout=30)
        await pilot.press("y")
        await wait_for(pilot, lambda: len(session.store.attempts()) == 2, timeout=30)
        (sweep,) = session.store.sweeps()
        assert sorted(a.name for a in session.store.arms(sweep.id)) == ["demo-health-hang", "demo-quick"]
        await session.cancel(session.store.attempts(live=True))
        await wait_for(pilot, showing(pilot, SweepsScreen), timeout=30)
        await pilot.pause()


async def test_the_clusters_words_are_shown_inert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """srtctl's refusal is the cluster's text: terminal controls removed, markup kept as text."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    hostile = tmp_path / "srtctl"
    hostile.write_text("#!/bin/sh\nprintf '\\033]0;pwned\\007\\033[2J[bold red]no such partition[/]\\n' >&2\nexit 1\n")
    hostile.chmod(0o755)
    config = tmp_path / "config.yaml"
    config.write_text(
        f"clusters:\n  site:\n    launcher: srtctl\n    scheduler: slurm\n    srt_slurm: {checkout}\n"
        f"    srtctl: {hostile}\n    workdir: {tmp_path / 'work'}\n"
    )
    data = tmp_path / "data"
    profiles, _ = load_profiles(load_config(config), data)
    session = Session.of(Engine(Store(data / "console.sqlite3"), profiles, data), "site")
    app = make_app([DEMO], session=session)
    async with app.run_test(size=(140, 45)) as pilot:
        dialog = await open_dialog(app, pilot, DEMO / "quick.yaml")
        await wait_for(pilot, lambda: dialog.planned, timeout=60)
        text = plan_text(app)
        assert "srtctl dry-run: REFUSED" in text and "[bold red]no such partition[/]" in text
        assert "\x1b" not in text and "\x07" not in text and "pwned" not in text, repr(text)
        await pilot.press("escape")
