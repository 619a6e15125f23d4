"""What the operator sees, pixel for pixel: SVG snapshots (update with --snapshot-update)."""

from __future__ import annotations

from textual.pilot import Pilot

from screens.app import make_app
from screens.widgets.recipe_preview import ArmCard, RecipePreview
from screens.widgets.recipe_tree import RecipeTree
from tests.conftest import RECIPES, SEED_DIR
from tests.tui.helpers import wait_for


async def select_seed(pilot: Pilot[None]) -> None:
    """The seed's 2P1D recipe selected in the tree, its arm card shown."""
    screen = pilot.app.screen
    tree = screen.query_one(RecipeTree)
    await wait_for(pilot, lambda: len(tree._leaves) >= 9)
    tree.select_path(str(SEED_DIR / "2p1d-dpa-tp8.yaml"))
    preview = screen.query_one(RecipePreview)
    await wait_for(pilot, lambda: [c.arm.name for c in preview.query(ArmCard)] == ["dsv4-fp4-mi355x-atom-2p1d-dpa-tp8"])
    await pilot.pause()


def test_recipes_screen_with_the_seed_2p1d_arm(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app([RECIPES]), terminal_size=(140, 40), run_before=select_seed)


def test_recipes_screen_at_80x24_pins_wrap_in_their_card(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(make_app([RECIPES]), terminal_size=(80, 24), run_before=select_seed)
