"""The user's configuration file: `$XDG_CONFIG_HOME/srt-console/config.yaml`.

Read leniently: a missing file is an empty config; a broken one is reported with its
path and line, and the console carries on with the defaults.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.recipes.yamlio import Marks, YamlError, decode, load

ENV_CONFIG = "SRT_CONSOLE_CONFIG"


def default_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "srt-console" / "config.yaml"


@dataclass(frozen=True)
class Config:
    path: Path
    recipe_dirs: tuple[Path, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    marks: Marks | None = None


def load_config(path: str | os.PathLike[str] | None = None) -> Config:
    """The config at `path`, else `$SRT_CONSOLE_CONFIG`, else the XDG default."""
    # os.path.expanduser leaves `~nouser` as it is (Path.expanduser raises).
    chosen = Path(os.path.expanduser(path or os.environ.get(ENV_CONFIG) or default_config_path()))
    if not chosen.exists():
        missing = (f"{chosen}: no such config file",) if path else ()
        return Config(chosen, problems=missing)
    try:
        data, marks = load(decode(chosen.read_bytes()))
    except YamlError as exc:
        where = f"{chosen}:{exc.line}" if exc.line else str(chosen)
        return Config(chosen, problems=(f"{where}: {exc.message}",))
    except OSError as exc:
        return Config(chosen, problems=(f"{chosen}: cannot read: {exc.strerror or exc}",))
    if not isinstance(data, dict):
        return Config(chosen, problems=(f"{chosen}:1: the config is a YAML mapping",))
    problems: list[str] = []
    dirs: list[Path] = []
    raw_dirs = data.get("recipe_dirs") or []
    if not isinstance(raw_dirs, list):
        problems.append(f"{chosen}:{marks.line(('recipe_dirs',))}: recipe_dirs: expected a list of directories")
        raw_dirs = []
    for i, item in enumerate(raw_dirs):
        if not isinstance(item, str):
            problems.append(f"{chosen}:{marks.line(('recipe_dirs', i))}: recipe_dirs[{i}]: expected a path")
            continue
        expanded = os.path.expanduser(os.path.expandvars(item))
        if expanded.startswith("~"):
            user = expanded[1:].split("/", 1)[0]
            line = marks.line(("recipe_dirs", i))
            problems.append(f"{chosen}:{line}: recipe_dirs[{i}]: {item}: no user {user!r} on this machine")
            continue
        resolved = Path(expanded)
        if not resolved.is_absolute():
            resolved = chosen.parent / resolved
        dirs.append(resolved)
    return Config(chosen, tuple(dirs), data, tuple(problems), marks)
