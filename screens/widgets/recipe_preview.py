"""The selected recipe: its arms (topology, grid, pins), its problems and its YAML."""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Label, Static, TabbedContent, TabPane

from console.describe import grid_label, nodes_label, seq_label
from console.model import Arm, Recipe
from screens.widgets.recipe_tree import display_path
from screens.widgets.topology import TopologyView


class ArmCard(Vertical):
    """One arm: what srtctl would submit for it, and its topology drawn out."""

    def __init__(self, arm: Arm) -> None:
        super().__init__(classes="arm")
        self.arm = arm

    def compose(self) -> ComposeResult:
        arm, topo = self.arm, self.arm.topology
        yield Label(Text(arm.name), classes="arm-title")
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
            text.append(f"{value}\n")
        for pin in arm.pins:
            text.append(f"  {'pin ' + pin.name:<18}", style="dim")
            text.append(pin.value)
            text.append(f"  ({pin.source})\n", style="dim")
        text.rstrip()
        yield Static(text, classes="facts")
        yield TopologyView(topo)


class RecipePreview(Widget, can_focus=False):
    BORDER_TITLE = "preview"

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
        status = Text("valid", style="green") if recipe.ok else Text(f"{len(recipe.errors)} error(s)", style="red")
        shown = display_path(recipe.path, roots or [])
        title.update(Text.assemble(shown, "  ", status, (f"  {recipe.kind}, {len(recipe.arms)} arm(s)", "dim")))
        arms.mount_all([ArmCard(arm) for arm in recipe.arms] or [Label("no arms", classes="muted")])
        rows = [Label(Text(str(p)), classes=f"problem-{p.severity}") for p in recipe.problems] or [
            Label("no problems", classes="muted")
        ]
        problems.mount_all(rows)
        tabs = self.query_one(TabbedContent)
        tabs.get_tab("tab-problems").label = f"Problems ({len(recipe.problems)})" if recipe.problems else "Problems"
        # Recipe text is shown as text: Syntax never interprets markup.
        self.query_one("#yaml", Static).update(
            Syntax(recipe.text, "yaml", line_numbers=True, word_wrap=False, theme="ansi_dark")
        )
        if not recipe.ok and tabs.active == "tab-arms" and not recipe.arms:
            tabs.active = "tab-problems"
