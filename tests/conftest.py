"""Shared fixtures: where the checkout's bundled recipes are, and a recipe writer."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
SEED_DIR = RECIPES / "mi355x" / "dsv4-fp4-atom-disagg"


@pytest.fixture
def write_recipe(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a dedented recipe text into tmp_path and return its path."""

    def write(text: str, name: str = "recipe.yaml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    return write
