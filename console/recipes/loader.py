"""Load recipe files into validated, expanded recipes. Never raises for bad input."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from console.model import Arm, Pin, Problem, Recipe, RecipeKind
from console.recipes import expand as expansion
from console.recipes import pins as pinning
from console.recipes import schema
from console.recipes.spec import Checker, dotted
from console.recipes.topology import (
    backend_type,
    combination_rules,
    frontend_type,
    grid,
    schema_version,
    topology,
)
from console.recipes.yamlio import YamlError, decode, load

RECIPE_SUFFIXES = (".yaml", ".yml")


def split_target(target: str) -> tuple[str, str | None]:
    """`file.yaml:selector` -> (file, selector), split on the last colon as srtctl does.

    A target that names an existing file as a whole is never split.
    """
    if os.path.exists(target) or ":" not in target:
        return target, None
    path, _, selector = target.rpartition(":")
    return path, selector or None


def load_recipe(path: str | os.PathLike[str], selector: str | None = None, text: str | None = None) -> Recipe:
    """One recipe file, expanded for `selector` the way `srtctl apply -f path[:selector]` would."""
    shown = str(path)
    if text is None:
        try:
            raw = Path(path).read_bytes()
        except IsADirectoryError:
            return _broken(shown, None, "is a directory, not a recipe file")
        except OSError as exc:
            return _broken(shown, None, f"cannot read: {exc.strerror or exc}")
        try:
            text = decode(raw)
        except YamlError as exc:
            return _broken(shown, exc.line, exc.message)
    try:
        data, marks = load(text)
    except YamlError as exc:
        return _broken(shown, exc.line, exc.message, text)
    if not isinstance(data, dict):
        return _broken(shown, 1, f"a recipe is a YAML mapping, not a {type(data).__name__}", text)

    problems: list[Problem] = [
        Problem(shown, line, dotted(key), "duplicate key; the later value wins", "warning")
        for key, line in marks.duplicates
    ]
    try:
        variants, notes = expansion.expand(data, selector)
    except expansion.ExpandError as exc:
        problems.append(Problem(shown, marks.line(exc.path), dotted(exc.path), exc.message))
        return Recipe(shown, (), tuple(problems), text, "invalid")
    problems += [Problem(shown, None, "selector", note, "warning") for note in notes]

    comment_pins = pinning.comment_pins(text)
    arms: list[Arm] = []
    seen: set[tuple[int | None, str, str]] = set()
    for variant in variants:
        arm, found = _arm(shown, variant, comment_pins)
        for key, message, severity in found:
            line = variant.line(marks, key)
            label = dotted(key)
            if (line, label, message) in seen:
                continue
            seen.add((line, label, message))
            problems.append(Problem(shown, line, label, message, severity))  # type: ignore[arg-type]
        if arm is not None:
            arms.append(arm)
    kind: RecipeKind = "override" if expansion.is_override_file(data) else ("sweep" if "sweep" in data else "plain")
    return Recipe(shown, tuple(arms), tuple(problems), text, kind)


def _broken(path: str, line: int | None, message: str, text: str = "") -> Recipe:
    return Recipe(path, (), (Problem(path, line, "", message),), text, "invalid")


def _arm(
    path: str, variant: expansion.Variant, comment_pins: list[Pin]
) -> tuple[Arm | None, list[tuple[Any, str, str]]]:
    config = variant.config
    out = Checker()
    v2 = schema_version(config) == 2
    if not v2 and ("engine" in config or "roles" in config):
        out.error(("schema",), "`engine`/`roles` are the schema 2 layout: add `schema: 2`")
    (schema.TOP_V2 if v2 else schema.TOP_V1).check(config, (), out)
    errors_before = sum(1 for f in out.found if f[2] == "error")
    topo = topology(config, out)
    combination_rules(config, topo, out)
    points, isl, osl = grid(config, out)
    if errors_before and not topo.roles:
        return None, out.found
    model, resources, bench = (_mapping(config.get(k)) for k in ("model", "resources", "benchmark"))
    arm = Arm(
        name=variant.name or Path(path).stem,
        recipe_path=path,
        variant=variant.label,
        selector=variant.selector,
        config=config,
        schema=2 if v2 else 1,
        backend=backend_type(config),
        frontend=frontend_type(config),
        benchmark=str(bench.get("type") or "manual"),
        isl=isl,
        osl=osl,
        concurrencies=points,
        topology=topo,
        gpu_type=_str(resources.get("gpu_type")),
        model_path=_str(model.get("path")),
        container=_str(model.get("container")),
        precision=_str(model.get("precision")),
        pins=tuple(_unique_pins(pinning.config_pins(config) + comment_pins)),
        params=variant.params,
    )
    return arm, out.found


def _unique_pins(pins: list[Pin]) -> list[Pin]:
    # A commit in both an env var and a comment is one pin, named where srtctl sees it.
    seen: set[str] = set()
    out: list[Pin] = []
    for pin in pins:
        if pin.value not in seen:
            seen.add(pin.value)
            out.append(pin)
    return out


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None


def recipe_files(root: Path) -> list[Path]:
    """Every recipe file under a directory, recursively, in a stable order (hidden dirs skipped)."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        found.extend(Path(dirpath, f) for f in sorted(filenames) if f.endswith(RECIPE_SUFFIXES))
    return found


def load_targets(targets: Iterable[str | os.PathLike[str]]) -> list[Recipe]:
    """Files (with optional `:selector`) and directories, as `srtctl apply -f` accepts them."""
    recipes: list[Recipe] = []
    for target in targets:
        path_text, selector = split_target(str(target))
        path = Path(path_text)
        if path.is_dir():
            recipes.extend(load_recipe(f) for f in recipe_files(path))
        elif not path.exists():
            recipes.append(_broken(path_text, None, "no such file or directory"))
        else:
            recipes.append(load_recipe(path, selector))
    return recipes
