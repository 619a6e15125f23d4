"""Expand one recipe file into the jobs srtctl would submit: overrides, zip groups and sweeps.

Follows srtctl's code where its docs disagree (see reference/srtctl.md §1.5–1.6): an
override file with no selector submits every override and zip variant but not base;
`sweep:` is the flat Cartesian form; lists replace, dicts merge, null deletes.
"""

from __future__ import annotations

import copy
import fnmatch
import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from console.recipes.yamlio import KeyPath, Marks

_ZIP_INDEX = re.compile(r"^(zip_override_[^\[\]]+)\[(\d+)\]$")


class ExpandError(Exception):
    """A recipe that cannot be expanded; `path` is the key path at fault."""

    def __init__(self, path: KeyPath, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


@dataclass
class Variant:
    """One job of a recipe file, before validation and topology."""

    name: str | None
    config: dict[str, Any]
    label: str | None = None  # "override_x", "zip_override_g[1]", "mem=0.85", or None for a plain file
    selector: str | None = None  # the srtctl selector that submits exactly this variant
    params: dict[str, Any] = field(default_factory=dict)
    # Where keys of `config` were written in the file, most specific first.
    prefixes: tuple[KeyPath, ...] = ((),)
    # How srtctl gets this job: "plain" (the whole file), "override" (a variant of an override
    # file), "sweep" (a job of a plain file's sweep), "override-sweep" (a sweep inside a variant).
    source: str = "plain"

    def line(self, marks: Marks, path: KeyPath) -> int | None:
        for prefix in self.prefixes:
            full = (*prefix, *path)
            # Walk up only within this prefix, so an override key is not blamed on base.
            probe = full
            while len(probe) > len(prefix):
                if probe in marks.lines:
                    return marks.lines[probe]
                probe = probe[:-1]
        return marks.line(self.prefixes[-1] + path[:1]) if path else marks.line(())


def is_override_file(data: Any) -> bool:
    return isinstance(data, dict) and "base" in data


def expand(data: dict[str, Any], selector: str | None) -> tuple[list[Variant], list[str]]:
    """All variants of a loaded recipe for `selector`, plus warnings (as srtctl logs them)."""
    warnings: list[str] = []
    if is_override_file(data):
        variants = _expand_overrides(data, selector, warnings)
    else:
        if selector:
            warnings.append(f"selector {selector!r} ignored: not an override file (no top-level `base:`)")
        variants = [Variant(name=_name(data), config=data)]
    out: list[Variant] = []
    for variant in variants:
        if "sweep" not in variant.config:
            out.append(variant)
        elif not isinstance(variant.config["sweep"], dict):
            raise ExpandError(("sweep",), "expected a mapping of parameter: [values]")
        else:
            out.extend(_expand_sweep(variant, warnings))
    return out, warnings


def _name(config: dict[str, Any]) -> str | None:
    name = config.get("name")
    return str(name) if isinstance(name, str | int | float) else None


# --- overrides ---------------------------------------------------------------------------


def deep_merge(base: Any, override: Any) -> Any:
    """srtctl's merge: dicts recursively, lists and scalars replaced, null deletes the key."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy.deepcopy(override)
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _expand_overrides(data: dict[str, Any], selector: str | None, warnings: list[str]) -> list[Variant]:
    base = data.get("base")
    if not isinstance(base, dict):
        raise ExpandError(("base",), "expected a mapping (the shared config of every variant)")
    # srtctl's order: the override_* sections sorted, then the zip_override_* sections sorted.
    overrides = sorted(k for k in data if isinstance(k, str) and k.startswith("override_"))
    zips = sorted(k for k in data if isinstance(k, str) and k.startswith("zip_override_"))
    sections = overrides + zips
    for key in data:
        if key != "base" and key not in sections:
            warnings.append(f"{key}: ignored by srtctl (an override file has base, override_<name> and "
                            "zip_override_<name> sections)")  # fmt: skip
    for key in sections:
        if not isinstance(data[key], dict):
            raise ExpandError((key,), "expected a mapping")
    base_name = _name(base) or "unnamed"

    if selector == "base":
        return [Variant(name=_name(base), config=copy.deepcopy(base), label="base", selector="base",
                        prefixes=(("base",),))]  # fmt: skip
    index: int | None = None
    chosen: list[str]
    if selector is None:
        chosen = [str(k) for k in sections]
    else:
        m = _ZIP_INDEX.match(selector)
        if m:
            chosen, index = [m.group(1)], int(m.group(2))
        elif any(ch in selector for ch in "*?"):
            chosen = sorted(k for k in sections if fnmatch.fnmatchcase(k, selector))
        else:
            chosen = [selector] if selector in data else []
        if not chosen:
            available = ", ".join(["base", *map(str, sections)])
            raise ExpandError((), f"selector {selector!r} matches nothing; available: {available}")

    out: list[Variant] = []
    for key in chosen:
        section = data[key]
        if key.startswith("override_"):
            suffix = key[len("override_") :]
            config = deep_merge(base, section)
            if "name" not in section:  # an override's own `name:` (even null) is kept as it is
                config["name"] = f"{base_name}_{suffix}"
            out.append(Variant(name=_name(config), config=config, label=key, selector=key,
                               prefixes=((key,), ("base",)), source="override"))  # fmt: skip
        else:
            members = _zip_members(key, section, base_name)
            if index is not None:
                if index >= len(members):
                    raise ExpandError((key,), f"{key} has {len(members)} variants; [{index}] is out of range")
                members = [members[index]]
            for i, (name, patch) in members:
                config = deep_merge(base, patch)
                if name is not None:
                    config["name"] = name
                out.append(Variant(name=_name(config), config=config, label=f"{key}[{i}]", selector=f"{key}[{i}]",
                                   prefixes=((key,), ("base",)), source="override"))  # fmt: skip
    return out


def _zip_members(key: str, section: dict[str, Any], base_name: str) -> list[tuple[int, tuple[str | None, Any]]]:
    names = section.get("name")
    body = {k: v for k, v in section.items() if k != "name"}
    lengths: dict[KeyPath, int] = {}
    lists = 0
    for path, leaf in _leaves(body, ()):
        if isinstance(leaf, list):
            lists += 1
            if not leaf:
                raise ExpandError((key, *path), "is an empty list: a zip group cannot have zero variants")
            if len(leaf) != 1:
                lengths[path] = len(leaf)
    if isinstance(names, list):
        lists += 1
        if not names:
            raise ExpandError((key, "name"), "is an empty list: a zip group cannot have zero variants")
    if not lists:
        raise ExpandError((key,), "has no list values: nothing to zip (use override_<name> for one variant)")
    sizes = set(lengths.values())
    if isinstance(names, list) and len(names) != 1:
        sizes.add(len(names))
    if len(sizes) > 1:
        detail = ", ".join(f"{'.'.join(map(str, p))}={n}" for p, n in lengths.items())
        if isinstance(names, list):
            detail += f", name={len(names)}"
        # Blame the first list whose length differs from the first list's.
        first = next(iter(lengths.values()), len(names) if isinstance(names, list) else 0)
        odd = next((p for p, n in lengths.items() if n != first), ())
        raise ExpandError((key, *odd), f"zip lists have different lengths ({detail})")
    count = sizes.pop() if sizes else 1
    members: list[tuple[int, tuple[str | None, Any]]] = []
    for i in range(count):
        patch = _pick(body, i)
        name: str | None
        if isinstance(names, list):
            # A listed name is merged like any other value (srtctl does not stringify it).
            patch["name"] = copy.deepcopy(names[0 if len(names) == 1 else i])
            name = None
        else:  # a scalar name would repeat in every variant: srtctl names them itself
            name = f"{base_name}_{key[len('zip_override_') :]}_{i}"
        members.append((i, (name, patch)))
    return members


def _leaves(node: Any, path: KeyPath) -> Iterator[tuple[KeyPath, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, (*path, k))
    else:
        yield path, node


def _pick(node: Any, i: int) -> Any:
    """Member i of a zip group: list leaves are dimensions, length-1 lists broadcast."""
    if isinstance(node, dict):
        return {k: _pick(v, i) for k, v in node.items()}
    if isinstance(node, list):
        return copy.deepcopy(node[0] if len(node) == 1 else node[i])
    return copy.deepcopy(node)


# --- sweeps ----------------------------------------------------------------------------


def _expand_sweep(variant: Variant, warnings: list[str]) -> list[Variant]:
    """srtctl's `generate_sweep_configs`: the Cartesian product of the parameter lists, each
    `{param}` in a string replaced by the value's text (a whole-string placeholder of a list
    value becomes the list), each job named `<name>_<k1><v1>_<k2><v2>`."""
    config = dict(variant.config)
    sweep = config.pop("sweep")
    axes: list[list[Any]] = []
    for key, values in sweep.items():
        if isinstance(values, str):
            warnings.append(f"sweep.{key}: a string is swept character by character, as srtctl does")
            values = list(values)
        if not isinstance(values, list):
            raise ExpandError(("sweep", key), f"expected a list of values, got {type(values).__name__}")
        if not values:
            warnings.append(f"sweep.{key}: an empty list: srtctl submits no jobs for this sweep")
        axes.append(values)
    if "name" not in config and all(axes):
        raise ExpandError(("name",), "is required: each job of a sweep is named after it")
    keys = list(sweep)
    out: list[Variant] = []
    for combo in itertools.product(*axes):
        params = dict(zip(keys, combo, strict=True))
        resolved = _substitute(config, params)
        name = f"{config.get('name')}_" + "_".join(f"{k}{v}" for k, v in params.items())
        resolved["name"] = name
        label = ", ".join(f"{k}={v}" for k, v in params.items())
        if variant.label:
            label = f"{variant.label} {label}"
        source = "override-sweep" if variant.source == "override" else "sweep"
        out.append(Variant(name=name, config=resolved, label=label, selector=variant.selector, params=params,
                           prefixes=variant.prefixes, source=source))  # fmt: skip
    return out


def _substitute(node: Any, params: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        return {k: _substitute(v, params) for k, v in node.items()}
    if isinstance(node, list):
        return [_substitute(v, params) for v in node]
    if isinstance(node, str):
        text = node
        for key, value in params.items():
            placeholder = f"{{{key}}}"
            if isinstance(value, list):
                if text == placeholder:
                    return copy.deepcopy(value)
                text = text.replace(placeholder, ",".join(str(v) for v in value))
            else:
                text = text.replace(placeholder, str(value))
        return text
    return node


def parse_concurrencies(value: Any) -> list[int]:
    """srtctl's `get_concurrency_list`, extended to mixed lists: 4, "256", "4x8", [8, "16"]."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[int] = []
    for item in items:
        if isinstance(item, bool):
            raise ValueError(f"{item!r} is not a concurrency")
        if isinstance(item, int):
            parts = [item]
        elif isinstance(item, str):
            try:
                parts = [int(p) for p in item.strip().split("x")]
            except ValueError:
                raise ValueError(f'{item!r} is not a concurrency list such as "4x8x16"') from None
        else:
            raise ValueError(f"{item!r} is not a concurrency")
        for p in parts:
            if p < 1:
                raise ValueError(f"concurrency {p} must be at least 1")
        out.extend(parts)
    return out
