"""Read YAML while remembering the line of every key, so problems can name it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import SafeConstructor

try:  # libyaml is ~10x faster; PyYAML without it still works
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

Key = str | int
KeyPath = tuple[Key, ...]

MAX_RECIPE_BYTES = 4 * 1024 * 1024
# Aliases can make a small file expand exponentially ("billion laughs"); no recipe comes close.
MAX_NODES = 200_000


class YamlError(Exception):
    """The file could not be read as one YAML mapping; `line` is 1-based when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass
class Marks:
    """1-based line of each key path (the key's own line) in one document."""

    lines: dict[KeyPath, int] = field(default_factory=dict)
    duplicates: list[tuple[KeyPath, int]] = field(default_factory=list)
    visited: int = 0

    def visit(self) -> None:
        self.visited += 1
        if self.visited > MAX_NODES:
            raise YamlError(f"expands to more than {MAX_NODES} values (aliases nested too deep)")

    def line(self, path: KeyPath) -> int | None:
        """The line of `path`, or of its nearest ancestor that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)


def decode(raw: bytes) -> str:
    """Recipe bytes as text, refusing what is clearly not a YAML text file."""
    if len(raw) > MAX_RECIPE_BYTES:
        raise YamlError(f"file is {len(raw)} bytes; a recipe is at most {MAX_RECIPE_BYTES}")
    if b"\x00" in raw[:8192]:
        raise YamlError("binary file (contains NUL bytes), not a YAML recipe")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise YamlError(f"not UTF-8 text (byte {exc.start}): not a YAML recipe") from None


def load(text: str) -> tuple[Any, Marks]:
    """Parse one YAML document into plain Python data plus the line of every key."""
    if not text.strip():
        raise YamlError("empty file: a recipe is a YAML mapping", 1)
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise YamlError(f"not valid YAML: {exc.problem or exc.context}", line) from None
    except yaml.YAMLError as exc:
        raise YamlError(f"not valid YAML: {exc}") from None
    nodes = [n for n in nodes if n is not None]
    if not nodes:
        raise YamlError("empty document: a recipe is a YAML mapping", 1)
    if len(nodes) > 1:
        raise YamlError("several YAML documents in one file; a recipe is one mapping", nodes[1].start_mark.line + 1)
    root = nodes[0]
    marks = Marks()
    marks.lines[()] = root.start_mark.line + 1
    constructor = SafeConstructor()
    try:
        try:
            data = _build(root, (), marks, constructor)
        except _Unusual:
            # Merge keys, sets, timestamps...: PyYAML's own constructor handles every case.
            marks = Marks(lines={(): root.start_mark.line + 1})
            data = SafeConstructor().construct_document(root)
            _walk(root, (), marks)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YamlError(f"not valid YAML: {exc.problem}", mark.line + 1 if mark else None) from None
    except (yaml.YAMLError, TypeError, ValueError, RecursionError) as exc:
        raise YamlError(f"not valid YAML: {exc}") from None
    return data, marks


class _Unusual(Exception):
    """A node the fast builder leaves to PyYAML's constructor."""


_TAG = "tag:yaml.org,2002:"
_SCALARS = {
    f"{_TAG}str": SafeConstructor.construct_yaml_str,
    f"{_TAG}int": SafeConstructor.construct_yaml_int,
    f"{_TAG}float": SafeConstructor.construct_yaml_float,
    f"{_TAG}bool": SafeConstructor.construct_yaml_bool,
    f"{_TAG}null": SafeConstructor.construct_yaml_null,
}


def _build(node: yaml.Node, path: KeyPath, marks: Marks, constructor: SafeConstructor) -> Any:
    """Data and key lines in one pass; the composer already resolved every tag.

    Aliases are rebuilt per use (recipes are small trees), so the result is a tree.
    """
    marks.visit()
    if isinstance(node, yaml.ScalarNode):
        build = _SCALARS.get(node.tag)
        if build is None:
            raise _Unusual(node.tag)
        return build(constructor, node)
    if isinstance(node, yaml.SequenceNode):
        if node.tag != f"{_TAG}seq":
            raise _Unusual(node.tag)
        items = []
        for index, item in enumerate(node.value):
            child = (*path, index)
            marks.lines[child] = item.start_mark.line + 1
            items.append(_build(item, child, marks, constructor))
        return items
    if isinstance(node, yaml.MappingNode) and node.tag == f"{_TAG}map":
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == f"{_TAG}merge":
                raise _Unusual("complex or merge key")
            key = _build(key_node, path, marks, constructor)
            child = (*path, key_node.value)
            if key in mapping:
                marks.duplicates.append((child, key_node.start_mark.line + 1))
            marks.lines[child] = key_node.start_mark.line + 1
            mapping[key] = _build(value_node, child, marks, constructor)
        return mapping
    raise _Unusual(node.tag)


def _walk(node: yaml.Node, path: KeyPath, marks: Marks) -> None:
    marks.visit()
    if isinstance(node, yaml.MappingNode):
        seen: set[Any] = set()
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else repr(key_node.value)
            child = (*path, key)
            if key in seen:
                marks.duplicates.append((child, key_node.start_mark.line + 1))
            seen.add(key)
            marks.lines[child] = key_node.start_mark.line + 1
            _walk(value_node, child, marks)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = (*path, index)
            marks.lines[child] = item.start_mark.line + 1
            _walk(item, child, marks)


def dump(data: Any) -> str:
    """YAML text for a resolved config, keys in the order given."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True, width=100)
