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
from console.paths import root_label
from screens.messages import RecipeSelected


def _label(recipe: Recipe, ok: Style, bad: Style, marked: bool = False) -> Text:
    name = shown(Path(recipe.path).name)
    mark = ("● ", "bold") if marked else ("", "")
    if not recipe.ok:
        return Text.assemble(mark, ("✗ ", bad + Style(bold=True)), name, (f"  {len(recipe.errors)} error(s)", bad))
    arms = len(recipe.arms)
    suffix = f"  {arms} arms" if arms != 1 else ""
    return Text.assemble(mark, ("✓ ", ok), name, (suffix, "dim"))


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
        self.marked: set[str] = set()  # recipe paths marked for one launch (m)
        # Where the cursor is, as the operator last moved it (the cursor line lags a move made
        # before the tree is laid out).
        self._at: TreeNode[Recipe] | None = None
        self._roots: list[Path] = []

    def show(self, recipes: list[Recipe], roots: list[Path]) -> None:
        """Fill the tree, or update it in place when the same files are shown again."""
        paths = [r.path for r in recipes]
        self._roots = roots
        self.marked &= set(paths)
        if paths == list(self._leaves):
            for recipe in recipes:
                leaf = self._leaves[recipe.path]
                leaf.data = recipe
                leaf.set_label(self._label(recipe))
            return
        at = self._at if self._at is not None else self.cursor_node
        selected = at.data.path if at is not None and at.data is not None else None
        self.clear()
        self._at = None
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
        bad = self.get_component_rich_style("recipe-tree--invalid", partial=True)
        return _label(recipe, ok, bad, recipe.path in self.marked)

    def toggle_mark(self) -> Recipe | None:
        """Mark (or unmark) the recipe under the cursor for a launch of several recipes."""
        node = self.cursor_node
        if node is None or node.data is None:
            return None
        self.marked ^= {node.data.path}
        node.set_label(self._label(node.data))
        return node.data

    def selection(self) -> tuple[str, list[Recipe]]:
        """What `l` launches, named as the operator knows it: the marked recipes, else the folder
        under the cursor (every recipe below it), else the recipe under the cursor."""
        if self.marked:
            chosen = [leaf.data for path, leaf in self._leaves.items() if path in self.marked and leaf.data]
            return f"{len(chosen)} marked recipe(s)", chosen
        node = self._at if self._at is not None and self._at.tree is self else self.cursor_node
        if node is None:
            return "", []
        if node.data is not None:
            return display_path(node.data.path, self._roots), [node.data]
        below = [r for r in _recipes_under(node)]
        folder = _folder_name(node)
        return f"the folder {folder} ({len(below)} recipe(s))", below

    def select_path(self, path: str | None) -> bool:
        """Move to a recipe and preview it (the cursor alone does not announce a first position)."""
        leaf = self._leaves.get(path) if path else None
        if leaf is None or leaf.data is None:
            return False
        self.move_cursor(leaf)
        # Again once laid out: before that a node has no line, and the cursor stays on the first row.
        self.call_after_refresh(self.move_cursor, leaf)
        self._at = leaf
        self.post_message(RecipeSelected(leaf.data))
        return True

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Recipe]) -> None:
        self._at = event.node
        if event.node.data is not None:
            self.post_message(RecipeSelected(event.node.data))


def _recipes_under(node: TreeNode[Recipe]) -> list[Recipe]:
    found: list[Recipe] = []
    for child in node.children:
        if child.data is not None:
            found.append(child.data)
        else:
            found += _recipes_under(child)
    return found


def _folder_name(node: TreeNode[Recipe]) -> str:
    parts: list[str] = []
    while node.parent is not None:
        parts.append(str(node.label).rstrip("/"))
        node = node.parent
    return "/".join(reversed(parts)) + "/"


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
        return (root_label(root), *relative.parts[:-1])
    return (path.parent.name,)
