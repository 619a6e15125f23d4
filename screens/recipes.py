"""The recipes screen: the library as a tree, the selected recipe previewed, live reload."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from console.model import Recipe
from console.recipes import load_recipe, load_targets
from console.recipes.flavours import Flavour
from console.recipes.loader import RECIPE_SUFFIXES
from console.session import Session
from screens.messages import LaunchRequested, RecipeSelected, RecipesLoaded, ReportsWorkerErrors
from screens.widgets.recipe_preview import RecipePreview
from screens.widgets.recipe_tree import RecipeTree, display_path


class RecipesScreen(ReportsWorkerErrors, Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "reload", "Reload"),
        Binding("p", "show_tab('tab-problems')", "Problems"),
        Binding("y", "show_tab('tab-yaml')", "YAML"),
        Binding("a", "show_tab('tab-arms')", "Arms"),
        Binding("l", "launch", "Launch"),
        Binding("m", "mark", "Mark"),
        Binding("q", "app.quit", "Quit"),
    ]

    def __init__(self, roots: list[Path], notes: list[str] | None = None, session: Session | None = None) -> None:
        super().__init__()
        self.roots = roots
        self.notes = notes or []
        self.session = session
        default = session.profiles.get(session.default_cluster) if session is not None else None
        # Recipes are checked for the srtctl of the default cluster, when its profile says which.
        self.flavour: Flavour | None = default.flavour() if default is not None else None
        self.recipes: dict[str, Recipe] = {}
        self.selected: str | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("\n".join(self.notes), id="notes", classes="-has-notes" if self.notes else "")
        with Horizontal(id="body"):
            yield RecipeTree(id="tree")
            yield RecipePreview(id="preview")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "srt-console"
        self.sub_title = "recipes"
        self.load_library()
        self.watch_library()

    @work(thread=True, exclusive=True, group="recipe-loader", exit_on_error=False)
    def load_library(self) -> None:
        recipes = load_targets([str(r) for r in self.roots], flavour=self.flavour)
        self.post_message(RecipesLoaded(recipes, self.roots))

    @work(exclusive=True, group="recipe-watcher", exit_on_error=False)
    async def watch_library(self) -> None:
        from watchfiles import awatch

        roots = [str(r) for r in self.roots if r.exists()]
        if not roots:
            return
        # Debounced by watchfiles; one reload per burst of saves.
        async for changes in awatch(*roots, debounce=200, step=50):
            changed = {p for _, p in changes if p.endswith(RECIPE_SUFFIXES)}
            if not changed:
                continue
            if all(p in self.recipes for p in changed) and all(Path(p).exists() for p in changed):
                updated = {**self.recipes, **{p: load_recipe(p, flavour=self.flavour) for p in changed}}
                self.post_message(RecipesLoaded(list(updated.values()), self.roots))
            else:  # files added or removed: the tree's shape changes
                self.load_library()

    @on(RecipesLoaded)
    def show_recipes(self, message: RecipesLoaded) -> None:
        self.recipes = {r.path: r for r in message.recipes}
        tree = self.query_one(RecipeTree)
        tree.show(message.recipes, message.roots)
        bad = sum(1 for r in message.recipes if not r.ok)
        self.sub_title = f"recipes: {len(message.recipes)} files, {bad} with errors"
        if self.selected in self.recipes:
            self.query_one(RecipePreview).show(self.recipes[self.selected], self.roots)

    @on(RecipeSelected)
    def preview(self, message: RecipeSelected) -> None:
        if message.recipe.path == self.selected and self.recipes.get(self.selected) is message.recipe:
            return  # the cursor landing where it already was
        self.selected = message.recipe.path
        self.query_one(RecipePreview).show(message.recipe, self.roots)

    def action_reload(self) -> None:
        self.load_library()
        self.notify("Recipes reloaded", timeout=2)

    def action_mark(self) -> None:
        """Mark the recipe under the cursor (m): `l` then launches every marked recipe as one sweep."""
        tree = self.query_one(RecipeTree)
        recipe = tree.toggle_mark()
        if recipe is not None:
            self.notify(f"{len(tree.marked)} recipe(s) marked: l launches them as one sweep", timeout=3)

    def action_launch(self) -> None:
        """Confirm, then launch: the marked recipes, else the folder under the cursor, else the
        recipe under it (every arm of each, one sweep)."""
        from screens.dialogs import LaunchDialog

        session = self.session
        if session is None:
            self.notify("No store: launching is unavailable", severity="error")
            return
        what, recipes = self.query_one(RecipeTree).selection()
        # The newest load of each (a file may have changed since it was marked).
        recipes = [self.recipes.get(r.path, r) for r in recipes]
        if not recipes:
            self.notify("Select a recipe or a folder first", severity="warning")
            return
        broken = [r for r in recipes if not r.ok or not r.arms]
        if broken:
            names = ", ".join(display_path(r.path, self.roots) for r in broken[:3])
            self.notify(f"{names}: errors or no arms; fix them first (p shows them)", severity="error")
            return

        def chosen(answer: tuple[str, list[Recipe]] | None) -> None:
            if answer:
                cluster, checked = answer
                self.post_message(LaunchRequested(checked, cluster))  # the app submits it

        dialog = LaunchDialog(f"Launch {what}", recipes, session, session.default_cluster)
        self.app.push_screen(dialog, chosen)

    def action_show_tab(self, tab: str) -> None:
        from textual.widgets import TabbedContent

        self.query_one(TabbedContent).active = tab
