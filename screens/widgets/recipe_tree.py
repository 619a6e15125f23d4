"""The recipe library as a tree: one branch per folder, one leaf per recipe file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from console.describe import shown
from console.model import Recipe
from screens.messages import RecipeSelected


def _label(recipe: Recipe, ok: Style, bad: Style) -> Text:
    name = shown(Path(recipe.path).name)
    if not recipe.ok:
        return Text.assemble(("✗ ", bad + Style(bold=True)), name, (f"  {len(recipe.errors)} error(s)", bad))
    arms = len(recipe.arms)
    suffix = f"  {arms} arms" if arms != 1 else ""
    return Text.assemble(("✓ ", ok), name, (suffix, "dim"))


class RecipeTree(Tree[Recipe]):
    """Keeps its expansion and cursor across reloads; leaves are keyed by file path."""

    BORDER_TITLE = "recipes"
    COMPONENT_CLASSES: ClassVar[set[str]] = {"recipe-tree--valid", "recipe-tree--invalid"}
    DEFAULT_CSS = """
    RecipeTree > .recipe-tree--valid { color: $success; }
    RecipeTree > .recipe-tree--invalid { color: $error; }
    """

    def __init__(self, *, id: str | None = None) -> None:  # noqa: A002 - Textual's own name
        super().__init__("recipes", id=id)
        self.show_root = False
        self.guide_depth = 3
        self._leaves: dict[str, TreeNode[Recipe]] = {}

    def show(self, recipes: list[Recipe], roots: list[Path]) -> None:
        """Fill the tree, or update it in place when the same files are shown again."""
        paths = [r.path for r in recipes]
        if paths == list(self._leaves):
            for recipe in recipes:
                leaf = self._leaves[recipe.path]
                leaf.data = recipe
                leaf.set_label(self._label(recipe))
            return
        selected = self.cursor_node.data.path if self.cursor_node and self.cursor_node.data else None
        self.clear()
        self._leaves = {}
        folders: dict[tuple[str, ...], TreeNode[Recipe]] = {}
        for recipe in recipes:
            parts = _folder_parts(Path(recipe.path), roots)
            parent = self.root
            for depth in range(1, len(parts) + 1):
                key = parts[:depth]
                if key not in folders:
                    folders[key] = parent.add(f"{parts[depth - 1]}/", expand=True)
                parent = folders[key]
            self._leaves[recipe.path] = parent.add_leaf(self._label(recipe), data=recipe)
        if self._leaves:
            self.select_path(selected if selected in self._leaves else next(iter(self._leaves)))

    def _label(self, recipe: Recipe) -> Text:
        ok = self.get_component_rich_style("recipe-tree--valid", partial=True)
        return _label(recipe, ok, self.get_component_rich_style("recipe-tree--invalid", partial=True))

    def select_path(self, path: str | None) -> bool:
        """Move to a recipe and preview it (the cursor alone does not announce a first position)."""
        leaf = self._leaves.get(path) if path else None
        if leaf is None or leaf.data is None:
            return False
        self.move_cursor(leaf)
        self.post_message(RecipeSelected(leaf.data))
        return True

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Recipe]) -> None:
        if event.node.data is not None:
            self.post_message(RecipeSelected(event.node.data))


def display_path(path: str, roots: list[Path]) -> str:
    """A recipe's path as the operator knows it: from its library folder down."""
    return shown("/".join((*_folder_parts(Path(path), roots), Path(path).name)))


def _folder_parts(path: Path, roots: list[Path]) -> tuple[str, ...]:
    for root in roots:
        try:
            # abspath, not resolve(): a symlink loop must not stop the tree.
            relative = Path(os.path.abspath(path)).relative_to(os.path.abspath(root))
        except ValueError:
            continue
        return (root.name, *relative.parts[:-1])
    return (path.parent.name,)
