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
