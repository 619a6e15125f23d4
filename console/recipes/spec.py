"""A small declarative type checker for recipe YAML, in the spirit of srtctl's schema.

srtctl's marshmallow dataclasses raise on unknown keys and on type errors; these
specs do the same, but collect every problem with its key path instead of stopping
at the first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

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


class Finding(NamedTuple):
    """One problem found while checking: where, what, how bad, and what kind of problem.

    `kind` lets a caller weigh problems differently: "unknown" (a key the schema does not
    have), "job-start:<stage>" (srtctl accepts the recipe but its job will stop at that stage:
    frontend, placement, benchmark), or "" (any other problem: a type, a missing field, a rule).
    """

    path: KeyPath
    message: str
    severity: str
    kind: str = ""


@dataclass
class Checker:
    """Collects findings while specs walk the data."""

    found: list[Finding] = field(default_factory=list)

    def error(self, path: KeyPath, message: str, kind: str = "") -> None:
        self.found.append(Finding(path, message, "error", kind))

    def warning(self, path: KeyPath, message: str, kind: str = "") -> None:
        self.found.append(Finding(path, message, "warning", kind))

    def unknown(self, path: KeyPath, message: str) -> None:
        self.found.append(Finding(path, message, "error", "unknown"))

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.found if f.severity == "error"]


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
    nullable: bool = True

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            if not self.nullable:
                out.error(path, "may not be null (give a list, or leave the key out)")
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
    nullable: bool = True
    string_keys: bool = False  # srtctl's dict[str, ...] fields: a key such as `8:` is refused

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            if not self.nullable:
                out.error(path, "may not be null (give a mapping, or leave the key out)")
            return
        if not isinstance(value, dict):
            out.error(path, f"expected a mapping, got {type_name(value)} {_short(value)}")
            return
        for key, item in value.items():
            if self.string_keys and not isinstance(key, str):
                out.error((*path, key), f"a key here must be a string, got {type_name(key)} {key!r}: quote it")
                continue
            self.values.check(item, (*path, key), out)


@dataclass
class Fields(Spec):
    """A mapping with known keys; unknown keys are errors, as in srtctl."""

    fields: Mapping[str, Spec]
    required: tuple[str, ...] = ()
    expects: str = "a mapping"
    extra: Callable[[dict[str, Any], KeyPath, Checker], None] | None = None
    nullable: bool = True

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            if self.required:
                out.error(path, f"expected a mapping with {', '.join(self.required)}, got null")
            elif not self.nullable:
                out.error(path, "may not be null (give a mapping, or leave the key out)")
            return
        if not isinstance(value, dict):
            out.error(path, f"expected a mapping, got {type_name(value)} {_short(value)}")
            return
        for key in self.required:
            if value.get(key) is None:
                out.error((*path, key), "is required")
        for key, item in value.items():
            if item is None and key in self.required:
                continue  # said above
            spec = self.fields.get(key) if isinstance(key, str) else None
            if spec is None:
                out.unknown((*path, key), f"unknown key{_suggest(str(key), self.fields)}")
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


@dataclass
class Choice(Spec):
    """One of a few values of any type (srtctl's `Literal[...]` fields)."""

    choices: tuple[Any, ...]
    expects: str = "value"
    nullable: bool = True

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None and self.nullable:
            return
        if not _hashable(value) or value not in self.choices or isinstance(value, bool):
            options = ", ".join(str(c) for c in self.choices)
            out.error(path, f"{_short(value)} is not one of: {options}")


# --- scalars as srtctl's loader (marshmallow) reads them ------------------------------------
#
# srtctl converts as it loads: an integer field takes "4" and 4.5 (as 4), a number field takes
# "1.5", a boolean field takes yes/no/on/off/1/0 and their spellings. Strings stay strict: 60
# is not a string. None is refused unless the field may be null.

_TRUTHY = frozenset({"t", "T", "true", "True", "TRUE", "on", "On", "ON", "y", "Y", "yes", "Yes", "YES", "1", 1})
_FALSY = frozenset({"f", "F", "false", "False", "FALSE", "off", "Off", "OFF", "n", "N", "no", "No", "NO", "0", 0})


def _hashable(value: Any) -> bool:
    return not isinstance(value, list | dict | set)


def loose_bool(value: Any) -> bool | None:
    """`value` as srtctl's boolean field reads it, or None when it is not a boolean."""
    if isinstance(value, bool):
        return value
    if not _hashable(value):
        return None
    if value in _TRUTHY:
        return True
    if value in _FALSY:
        return False
    return None


def loose_int(value: Any) -> int | None:
    """`value` as srtctl's integer field reads it ("4" -> 4, 4.5 -> 4), or None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value) if isinstance(value, int | float | str) else None
    except (ValueError, OverflowError):
        return None


def loose_num(value: Any) -> float | None:
    """`value` as srtctl's number field reads it ("1.5" -> 1.5; nan and inf refused), or None."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value) if isinstance(value, int | float | str) else None
    except (ValueError, OverflowError):
        return None
    return number if number is not None and math.isfinite(number) else None


_LOOSE_NAMES = {"int": "an integer", "num": "a number", "bool": "true or false"}


@dataclass
class Loose(Spec):
    """An integer, number or boolean field of srtctl's loader, with its conversions."""

    kind: str  # "int" | "num" | "bool"
    nullable: bool = True
    minimum: float | None = None

    def __post_init__(self) -> None:
        self.expects = _LOOSE_NAMES[self.kind]

    def check(self, value: Any, path: KeyPath, out: Checker) -> None:
        if value is None:
            if not self.nullable:
                out.error(path, f"may not be null (give {self.expects}, or leave the key out)")
            return
        read = {"int": loose_int, "num": loose_num, "bool": loose_bool}[self.kind](value)
        if read is None:
            out.error(path, f"expected {self.expects}, got {type_name(value)} {_short(value)}")
        elif self.minimum is not None and not isinstance(read, bool) and read < self.minimum:
            out.error(path, f"must be at least {self.minimum:g}, got {_short(value)}")


def LInt(null: bool = True, minimum: float | None = None) -> Loose:
    return Loose("int", null, minimum)


def LNum(null: bool = True) -> Loose:
    return Loose("num", null)


def LBool(null: bool = False) -> Loose:
    return Loose("bool", null)


def SStr(null: bool = True) -> Scalar:
    """A string field of srtctl's loader: nothing else converts to a string."""
    return Scalar((str,), "a string", nullable=null)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _suggest(key: str, known: Mapping[str, Any]) -> str:
    import difflib

    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
