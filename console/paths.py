"""Where the bundled recipes and assets are, in a checkout and in an installed wheel."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


@cache
def _data_root(name: str) -> Path:
    # An installed wheel carries them under console/_bundled/ (see pyproject.toml);
    # a checkout or an editable install has them beside the package.
    for candidate in (_PACKAGE / "_bundled" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"srt-console's bundled {name}/ directory is missing from {_PACKAGE}")


def bundled_recipes_dir() -> Path:
    return _data_root("recipes")


def assets_dir() -> Path:
    return _data_root("assets")


def asset(name: str) -> Path:
    return assets_dir() / name


def is_bundled_copy(root: Path) -> bool:
    """The recipes installed with srt-console (a wheel's copy, not a checkout the operator edits)."""
    return "_bundled" in root.parts and root.resolve() == bundled_recipes_dir().resolve()


def root_label(root: Path) -> str:
    """How a recipe root is named in the library: its folder name; the installed copy says so."""
    return f"{root.name} (bundled copy)" if is_bundled_copy(root) else root.name


def local_recipe_tree(start: Path, levels: int = 6) -> tuple[Path, str] | None:
    """The `recipes/` of the srt-console checkout or srt-slurm tree that ``start`` is in, and
    which it is ("srt-console" or "srt-slurm"); None outside both."""
    here = start.resolve()
    for folder in [here, *here.parents][:levels]:
        recipes = folder / "recipes"
        if not recipes.is_dir():
            continue
        pyproject = folder / "pyproject.toml"
        try:
            project = pyproject.read_text(encoding="utf-8", errors="replace")[:4096] if pyproject.is_file() else ""
        except OSError:
            project = ""
        if 'name = "srt-console"' in project:
            return recipes, "srt-console"
        if (folder / "srtslurm.yaml").is_file() or (folder / "src" / "srtctl").is_dir() or "srtctl" in project:
            return recipes, "srt-slurm"
    return None
