"""A small declarative type checker for recipe YAML, in the spirit of srtctl's schema.

srtctl's marshmallow dataclasses raise on unknown keys and on type errors; these
specs do the same, but collect every problem with its key path instead of stopping
at the first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from console.recipes.yamlio import KeyPath


def dotted(path: KeyPath) -> str:
    """`('benchmark', 'concurrencies', 2)` -> `benchmark.concurrencies[2]`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


@dataclass
class Checker:
    """Collects (path, message, severity) triples while specs walk the data."""

    found: list[tuple[KeyPath, str, str]] = field(default_factory=list)

    def error(self, path: KeyPath, message: str) -> None:
        self.found.append((path, message, "error"))

    def warning(self, path: KeyPath, message: str) -> None:
        self.found.append((path, message, "warning"))


class Spec:
    """Checks one value; `expects` names the type for messages."""

    expects: str = "value"

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        raise NotImplementedError


class AnyValue(Spec):
    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        return None


@dataclass
class Scalar(Spec):
    """A string, integer, number or boolean, optionally restricted to choices."""

    kinds: tuple[type, ...]
    expects: str = "value"
    choices: tuple[Any, ...] = ()
    minimum: float | None = None
    nullable: bool = True

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            if not self.nullable:
                out.error(path, f"expected {self.expects}, got null")
            return
        # YAML booleans are ints in Python; never let `true` pass as a number.
        if isinstance(value, bool) and bool not in self.kinds:
            out.error(path, f"expected {self.expects}, got boolean {value!r}")
            return
        if not isinstance(value, self.kinds):
            out.error(path, f"expected {self.expects}, got {type_name(value)} {_short(value)}")
            return
        if self.choices and value not in self.choices:
            options = ", ".join(str(c) for c in self.choices)
            out.error(path, f"{value!r} is not one of: {options}")
        elif self.minimum is not None and isinstance(value, int | float) and value < self.minimum:
            out.error(path, f"must be at least {self.minimum:g}, got {value}")


def Str(*choices: str) -> Scalar:
    return Scalar((str,), "a string", choices)


def Int(minimum: int | None = 0) -> Scalar:
    return Scalar((int,), "an integer", minimum=minimum)


def Num(minimum: float | None = None) -> Scalar:
    return Scalar((int, float), "a number", minimum=minimum)


def Bool() -> Scalar:
    return Scalar((bool,), "true or false")


def StrOrNum() -> Scalar:
    return Scalar((str, int, float), "a string or a number")


@dataclass
class ListOf(Spec):
    item: Spec
    expects: str = "a list"

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            return
        if not isinstance(value, list):
            out.error(path, f"expected a list, got {type_name(value)} {_short(value)}")
            return
        for i, item in enumerate(value):
            self.item.check(item, (*path, i), out)


@dataclass
class MapOf(Spec):
    """A free-form mapping (env, CLI flags, mounts) whose values follow `values`."""

    values: Spec = field(default_factory=AnyValue)
    expects: str = "a mapping"

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            return
        if not isinstance(value, dict):
            out.error(path, f"expected a mapping, got {type_name(value)} {_short(value)}")
            return
        for key, item in value.items():
            self.values.check(item, (*path, key), out)


@dataclass
class Fields(Spec):
    """A mapping with known keys; unknown keys are errors, as in srtctl."""

    fields: Mapping[str, Spec]
    required: tuple[str, ...] = ()
    expects: str = "a mapping"
    extra: Callable[[dict[str, Any], KeyPath, Checker], None] | None = None

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            if self.required:
                out.error(path, f"expected a mapping with {', '.join(self.required)}, got null")
            return
        if not isinstance(value, dict):
            out.error(path, f"expected a mapping, got {type_name(value)} {_short(value)}")
            return
        for key in self.required:
            if value.get(key) is None:
                out.error((*path, key), "is required")
        for key, item in value.items():
            spec = self.fields.get(str(key))
            if spec is None:
                out.error((*path, key), f"unknown key{_suggest(str(key), self.fields)}")
            else:
                spec.check(item, (*path, key), out)
        if self.extra is not None:
            self.extra(value, path, out)


@dataclass
class Either(Spec):
    """The first alternative whose type fits is used for the detailed check."""

    options: tuple[Spec, ...]
    expects: str = "value"

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        for option in self.options:
            trial = Checker()
            option.check(value, path, trial)
            if not trial.found:
                return
        out.error(path, f"expected {self.expects}, got {type_name(value)} {_short(value)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _suggest(key: str, known: Mapping[str, Any]) -> str:
    import difflib

    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
