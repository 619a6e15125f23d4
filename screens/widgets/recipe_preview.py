"""The selected recipe: its arms (topology, grid, pins), its problems and its YAML."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.highlight import highlight
from textual.widget import Widget
from textual.widgets import Label, Static, TabbedContent, TabPane

from console.describe import grid_label, nodes_label, seq_label, shown
from console.model import Arm, Recipe
from console.sanitize import clean_text
from screens.widgets.recipe_tree import display_path
from screens.widgets.topology import TopologyView


class ArmCard(Vertical):
    """One arm: what srtctl would submit for it, and its topology drawn out."""

    def __init__(self, arm: Arm) -> None:
        super().__init__(classes="arm")
        self.arm = arm

    def compose(self) -> ComposeResult:
        arm, topo = self.arm, self.arm.topology
        yield Label(Text(shown(arm.name)), classes="arm-title")
        facts = [
            ("variant", arm.variant or "-"),
            ("selector", f":{arm.selector}" if arm.selector else "-"),
            ("mode", topo.mode),
            ("engine / frontend", f"{arm.backend} / {arm.frontend}"),
            ("benchmark", f"{arm.benchmark}  ISL/OSL {seq_label(arm)}"),
            ("points", f"{grid_label(arm.concurrencies)}  ({len(arm.concurrencies)})"),
            ("node demand", nodes_label(topo)),
            ("GPUs", f"{topo.total_gpus}  ({arm.gpu_type or '?'})"),
            ("model", f"{arm.model_path or '?'}  {arm.precision or ''}"),
        ]
        text = Text()
        for key, value in facts:
            text.append(f"  {key:<18}", style="dim")
            text.append(f"{shown(value)}\n")
        text.rstrip()
        yield Static(text, classes="facts")
        # Pins are long (image URIs, commit hashes): each wraps inside the card, never cut.
        for pin in arm.pins:
            pin_text = Text(overflow="fold")
            pin_text.append(f"pin {shown(pin.name)}  ", style="dim")
            pin_text.append(shown(pin.value))
            pin_text.append(f"  ({shown(pin.source)})", style="dim")
            yield Static(pin_text, classes="pin")
        yield TopologyView(topo)


def numbered_yaml(text: str) -> Content:
    """Recipe text highlighted in the theme's colours, with line numbers. It is shown as text:
    the highlighter never interprets markup."""
    lines = highlight(clean_text(text), language="yaml").split("\n")
    width = len(str(len(lines)))
    return Content("\n").join(
        Content.assemble((f"{number:>{width}} ", "$text-muted"), line) for number, line in enumerate(lines, 1)
    )


class RecipePreview(Widget, can_focus=False):
    BORDER_TITLE = "preview"
    COMPONENT_CLASSES: ClassVar[set[str]] = {"recipe-preview--valid", "recipe-preview--invalid"}
    DEFAULT_CSS = """
    RecipePreview > .recipe-preview--valid { color: $success; }
    RecipePreview > .recipe-preview--invalid { color: $error; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="title")
        with TabbedContent(id="tabs"):
            with TabPane("Arms", id="tab-arms"):
                yield VerticalScroll(id="arms")
            with TabPane("Problems", id="tab-problems"):
                yield VerticalScroll(id="problems")
            with TabPane("YAML", id="tab-yaml"), VerticalScroll():
                yield Static("", id="yaml")

    def show(self, recipe: Recipe | None, roots: list[Path] | None = None) -> None:
        title = self.query_one("#title", Static)
        arms = self.query_one("#arms", VerticalScroll)
        problems = self.query_one("#problems", VerticalScroll)
        arms.remove_children()
        problems.remove_children()
        if recipe is None:
            title.update("no recipe selected")
            self.query_one("#yaml", Static).update("")
            return
        ok = self.get_component_rich_style("recipe-preview--valid", partial=True)
        bad = self.get_component_rich_style("recipe-preview--invalid", partial=True)
        status = Text("valid", style=ok) if recipe.ok else Text(f"{len(recipe.errors)} error(s)", style=bad)
        shown = display_path(recipe.path, roots or [])
        title.update(Text.assemble(shown, "  ", status, (f"  {recipe.kind}, {len(recipe.arms)} arm(s)", "dim")))
        arms.mount_all([ArmCard(arm) for arm in recipe.arms] or [Label("no arms", classes="muted")])
        rows = [Label(Text(str(p)), classes=f"problem-{p.severity}") for p in recipe.problems] or [
            Label("no problems", classes="muted")
        ]
        problems.mount_all(rows)
        tabs = self.query_one(TabbedContent)
        tabs.get_tab("tab-problems").label = f"Problems ({len(recipe.problems)})" if recipe.problems else "Problems"
        self.query_one("#yaml", Static).update(numbered_yaml(recipe.text))
        if not recipe.ok and tabs.active == "tab-arms" and not recipe.arms:
            tabs.active = "tab-problems"
