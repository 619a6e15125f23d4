"""Load recipe files into validated, expanded recipes. Never raises for bad input."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from console.agent import inside, open_regular
from console.model import Arm, Pin, Problem, Recipe, RecipeKind
from console.recipes import expand as expansion
from console.recipes import fork, upstream
from console.recipes import pins as pinning
from console.recipes.flavours import Flavour, FlavourName, judge
from console.recipes.sections import OWN
from console.recipes.spec import Checker, Finding, dotted
from console.recipes.topology import (
    backend_type,
    combination_rules,
    frontend_type,
    grid,
    schema_version,
    topology,
)
from console.recipes.yamlio import YamlError, decode, load
from console.sanitize import has_controls

RECIPE_SUFFIXES = (".yaml", ".yml")


def split_target(target: str) -> tuple[str, str | None]:
    """`file.yaml:selector` -> (file, selector), split on the last colon as srtctl does.

    A target that names an existing file as a whole is never split.
    """
    if os.path.exists(target) or ":" not in target:
        return target, None
    path, _, selector = target.rpartition(":")
    return path, selector or None


def load_recipe(
    path: str | os.PathLike[str],
    selector: str | None = None,
    text: str | None = None,
    flavour: Flavour | None = None,
) -> Recipe:
    """One recipe file, expanded for `selector` the way `srtctl apply -f path[:selector]` would,
    and checked for the srtctl `flavour` that will run it (None: not known)."""
    shown = str(path)
    if text is None:
        try:
            raw = _read_regular(shown)
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
        arm, found = _arm(shown, variant, comment_pins, flavour)
        for key, message, severity, finding_kind in found:
            line = variant.line(marks, key)
            label = dotted(key)
            if (line, label, message) in seen:
                continue
            seen.add((line, label, message))
            problems.append(Problem(shown, line, label, message, severity, finding_kind))  # type: ignore[arg-type]
        if arm is not None:
            arms.append(arm)
    kind: RecipeKind = "override" if expansion.is_override_file(data) else ("sweep" if "sweep" in data else "plain")
    return Recipe(shown, tuple(arms), tuple(problems), text, kind)


MAX_RECIPE_BYTES = 16 << 20


def _read_regular(path: str) -> bytes:
    """The bytes of a regular file; a FIFO, device or socket is refused unopened for reading
    (opened without blocking, never read), so it can never hang a command or the UI."""
    try:
        fd = open_regular(path)
    except OSError as exc:
        if exc.errno == errno.EINVAL and os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "is a directory", path) from None
        raise
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_RECIPE_BYTES + 1)
    if len(data) > MAX_RECIPE_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_RECIPE_BYTES >> 20} MiB, not a recipe", path)
    return data


def _broken(path: str, line: int | None, message: str, text: str = "") -> Recipe:
    return Recipe(path, (), (Problem(path, line, "", message),), text, "invalid")


def check_config(config: dict[str, Any], source: str = "plain") -> tuple[Any, dict[FlavourName, list[Finding]]]:
    """One job's config checked by every flavour: (topology, findings per flavour).

    `source` is how srtctl gets the job (see expand.Variant.source)."""
    shape = Checker()
    topo = topology(config, shape)
    points = Checker()
    grid(config, points)
    up = Checker()
    upstream.check(config, up, plain_file=source == "plain", extra_top=OWN)
    if source == "override-sweep":
        up.error(("sweep",), "srtctl checks an override variant before it expands the variant's sweep, "
                 "and refuses `sweep:` there: move the sweep into its own file")  # fmt: skip
    # The console's concurrency reading: srtctl passes a string on to the benchmark unread.
    up.found += [Finding(f.path, f"{f.message} (srtctl passes it to the benchmark as it is)", "warning")
                 if f.severity == "error" else f for f in points.found]  # fmt: skip
    fk = Checker()
    fork.check(config, fk, extra_top=OWN)
    fk.found += shape.found + points.found
    combination_rules(config, topo, fk)
    return topo, {"upstream": up.found, "fork": fk.found}


def _arm(
    path: str, variant: expansion.Variant, comment_pins: list[Pin], flavour: Flavour | None
) -> tuple[Arm | None, list[tuple[Any, str, str, str]]]:
    config = variant.config
    topo, found = check_config(config, variant.source)
    out = Checker()
    for section, spec in OWN.items():
        if section in config:
            spec.check(config[section], (section,), out)
    verdict = [*judge(found, flavour), *((f.path, f.message, f.severity, f.kind) for f in out.found)]
    name = variant.name or Path(path).stem
    if has_controls(name):
        # It becomes a Slurm job name, a file name and a terminal title: a line break or an
        # escape sequence there is a command to each of them.
        message = "holds control characters (a line break, a tab, an escape sequence): use plain text"
        verdict.append((("name",), message, "error", ""))
    v2 = schema_version(config) == 2
    points, isl, osl = grid(config, Checker())
    if any(severity == "error" for _, _, severity, _ in verdict) and not topo.roles:
        return None, verdict
    model, resources, bench = (_mapping(config.get(k)) for k in ("model", "resources", "benchmark"))
    arm = Arm(
        name=name,
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
    return arm, verdict


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


def load_targets(targets: Iterable[str | os.PathLike[str]], flavour: Flavour | None = None) -> list[Recipe]:
    """Files (with optional `:selector`) and directories, as `srtctl apply -f` accepts them,
    checked for the srtctl `flavour` that will run them (None: not known)."""
    recipes: list[Recipe] = []
    for target in targets:
        path_text, selector = split_target(str(target))
        path = Path(path_text)
        if path.is_dir():
            real_root = os.path.realpath(path)
            for f in recipe_files(path):
                if inside(os.path.realpath(f), [real_root]):
                    recipes.append(load_recipe(f, flavour=flavour))
                else:
                    # A link out of the folder is not read on the folder's behalf.
                    message = f"not read: a symbolic link out of {path_text} (name the file itself to check it)"
                    recipes.append(_broken(str(f), None, message))
        elif not path.exists():
            recipes.append(_broken(path_text, None, "no such file or directory"))
        else:
            recipes.append(load_recipe(path, selector, flavour=flavour))
    return recipes
