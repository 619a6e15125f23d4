"""The recipes screen driven with Textual's Pilot: browse, preview, problems, live reload."""

from __future__ import annotations

import shutil
from pathlib import Path

from textual.message import Message
from textual.widgets import TabbedContent

from screens.app import make_app
from screens.messages import RecipesLoaded
from screens.widgets.recipe_preview import ArmCard, RecipePreview
from screens.widgets.recipe_tree import RecipeTree
from screens.widgets.topology import TopologyView
from tests.conftest import RECIPES, SEED_DIR
from tests.tui.helpers import wait_for


def leaf_labels(tree: RecipeTree) -> dict[str, str]:
    return {Path(path).name: str(node.label) for path, node in tree._leaves.items()}


async def test_browse_bundled_recipes_and_preview_topology() -> None:
    messages: list[Message] = []
    app = make_app([RECIPES])
    async with app.run_test(size=(150, 45), message_hook=messages.append) as pilot:
        tree = app.screen.query_one(RecipeTree)
        await wait_for(pilot, lambda: len(tree._leaves) >= 9)
        loaded = [m for m in messages if isinstance(m, RecipesLoaded)]
        assert loaded and all(r.ok for r in loaded[-1].recipes)
        assert all(label.startswith("✓") for label in leaf_labels(tree).values())

        assert tree.select_path(str(SEED_DIR / "2p1d-dpa-tp8.yaml"))
        preview = app.screen.query_one(RecipePreview)
        seed_arm = "dsv4-fp4-mi355x-atom-2p1d-dpa-tp8"
        await wait_for(pilot, lambda: [c.arm.name for c in preview.query(ArmCard)] == [seed_arm])
        card = preview.query_one(ArmCard)
        topology = card.query_one(TopologyView)
        assert topology.topology.node_demand == 3
        drawn = str(topology.render())
        assert "node 3" in drawn and "prefill w1 (TP8 DPA)" in drawn and "decode w0 (TP8)" in drawn
        title = str(preview.query_one("#title").render())
        assert "recipes/mi355x/dsv4-fp4-atom-disagg/2p1d-dpa-tp8.yaml" in title

        await pilot.press("y")
        assert app.screen.query_one(TabbedContent).active == "tab-yaml"
        await pilot.press("q")
    assert app.return_code == 0


async def test_broken_recipe_shows_its_problems(tmp_path: Path) -> None:
    broken = tmp_path / "lib" / "broken.yaml"
    broken.parent.mkdir()
    broken.write_text((SEED_DIR / "1p1d-tp8.yaml").read_text().replace("prefill_nodes: 1", "prefill_nodes: one"))
    app = make_app([tmp_path / "lib"])
    async with app.run_test(size=(150, 45)) as pilot:
        tree = app.screen.query_one(RecipeTree)
        await wait_for(pilot, lambda: "broken.yaml" in leaf_labels(tree))
        assert leaf_labels(tree)["broken.yaml"].startswith("✗")
        await wait_for(pilot, lambda: bool(app.screen.query(".problem-error")))
        await pilot.press("p")
        tabs = app.screen.query_one(TabbedContent)
        assert tabs.active == "tab-problems"
        problems = [str(label.render()) for label in app.screen.query(".problem-error")]
        assert any(f"{broken}:14: resources.prefill_nodes: expected an integer" in p for p in problems), problems


async def test_live_reload_when_a_recipe_changes_on_disk(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    quick = lib / "quick.yaml"
    shutil.copy(RECIPES / "demo" / "quick.yaml", quick)
    app = make_app([lib])
    async with app.run_test(size=(150, 45)) as pilot:
        tree = app.screen.query_one(RecipeTree)
        await wait_for(pilot, lambda: leaf_labels(tree).get("quick.yaml", "").startswith("✓"))
        # The watcher must be running before the file changes.
        await wait_for(pilot, lambda: any(w.group == "recipe-watcher" and w.is_running for w in app.screen.workers))
        await pilot.pause(0.3)

        quick.write_text(quick.read_text().replace("agg_workers: 1", "agg_workers: many"))
        await wait_for(pilot, lambda: leaf_labels(tree).get("quick.yaml", "").startswith("✗"))
        preview = app.screen.query_one(RecipePreview)
        await wait_for(pilot, lambda: "error" in str(preview.query_one("#title").render()))

        shutil.copy(SEED_DIR / "1p1d-tp8.yaml", lib / "added.yaml")
        await wait_for(pilot, lambda: "added.yaml" in leaf_labels(tree))
