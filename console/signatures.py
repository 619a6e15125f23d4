"""Failure-signature catalog and the line matcher used by triage.

The catalog is data: ``assets/signatures.yaml`` (see the comment at its top for the fields).
:func:`load_catalog` reads and validates it, :class:`Matcher` matches log lines against it::

    matcher = default_matcher()
    finding = matcher.match_line(line)      # the most specific finding, or None
    findings = matcher.match_all(line)      # every matching signature, most specific first

Matching is built for whole logs. A line is first checked for the catalog's keywords: a
couple of trie-shaped regex scans over the lowercased line, each led by one character, so an
ordinary log line costs a ``lower()`` and two fast scans. Only lines holding a keyword reach
the signatures' own regexes, and only the first :data:`MAX_LINE_CHARS` characters of a line
are scanned. The catalog's regexes use bounded gaps, so no line can make them backtrack for
long.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from console.agent import literal_union, prefilter_sources
from console.paths import asset

__all__ = [
    "CATEGORIES",
    "MAX_LINE_CHARS",
    "SEVERITIES",
    "Catalog",
    "CatalogError",
    "Finding",
    "Matcher",
    "Signature",
    "bundled_catalog_path",
    "default_matcher",
    "load_catalog",
    "reload",
]

CATEGORIES: Final[tuple[str, ...]] = ("startup", "runtime", "infra", "scheduler")
SEVERITIES: Final[tuple[str, ...]] = ("fatal", "error", "warning")
MAX_LINE_CHARS: Final[int] = 4096
"""How much of a line the matcher scans; the rest of a longer line is ignored."""

DEFAULT_PRIORITY: Final[int] = 50
DEFAULT_WRAPPER_PRIORITY: Final[int] = 20
_CONTEXT_CHARS: Final[int] = 256
_ID_RE: Final = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")
_FIELDS: Final = frozenset(
    {
        "id",
        "title",
        "category",
        "severity",
        "regex",
        "wrapper_regex",
        "keywords",
        "ignore_case",
        "exclude",
        "wrapper",
        "priority",
        "hint",
    }
)
_REQUIRED: Final = ("id", "title", "category", "severity", "regex", "hint")
_TOP_LEVEL: Final = frozenset({"version", "context", "signatures"})
# CSI, OSC and two-character escape sequences (colour codes, titles, cursor moves).
_ANSI_RE: Final = re.compile(r"\x1b(?:\[[0-?]{0,64}[ -/]{0,8}[@-~]|\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)?|[@-Z\\-_])")


class CatalogError(ValueError):
    """The catalog cannot be used. The message names the file, the entry and the field."""


@dataclass(frozen=True)
class Signature:
    """One catalog entry, with its regexes compiled."""

    id: str
    title: str
    category: str
    severity: str
    hint: str
    patterns: tuple[re.Pattern[str], ...]
    wrapper_patterns: tuple[re.Pattern[str], ...] = ()
    keywords: tuple[str, ...] = ()
    exclude: re.Pattern[str] | None = None
    wrapper: bool = False
    priority: int = DEFAULT_PRIORITY


@dataclass(frozen=True)
class Catalog:
    """Validated signatures (in catalog order) and the line-prefix context patterns."""

    signatures: tuple[Signature, ...]
    context: tuple[re.Pattern[str], ...] = ()
    sources: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Finding:
    """One signature matched in one line.

    ``span`` indexes the line as given (the matcher removes ANSI escape sequences before
    matching and maps the span back). ``captures`` holds the named groups that matched,
    plus rank/process details found in the line's prefix (``rank``, ``tp_rank``,
    ``dp_rank``, ``pid``, ``process``) where the signature did not capture them itself.
    """

    signature_id: str
    title: str
    category: str
    severity: str
    wrapper: bool
    priority: int
    span: tuple[int, int]
    captures: dict[str, str] = field(default_factory=dict, hash=False)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "signature_id": self.signature_id,
            "title": self.title,
            "category": self.category,
            "severity": self.severity,
            "wrapper": self.wrapper,
            "priority": self.priority,
            "span": list(self.span),
            "captures": dict(self.captures),
        }


# --------------------------------------------------------------------------- loading


def bundled_catalog_path() -> Path:
    """The catalog shipped with srt-console."""
    return asset("signatures.yaml")


def load_catalog(*paths: str | Path) -> Catalog:
    """Read, validate and compile catalogs; with no argument, the bundled one.

    Several files are merged in order: an entry whose id is already defined replaces the
    earlier definition (so a user file can override or extend the bundled catalog).
    Raises :class:`CatalogError` with the file, entry and field at fault.
    """
    sources = tuple(Path(p) for p in paths) if paths else (bundled_catalog_path(),)
    merged: dict[str, Signature] = {}
    context: list[re.Pattern[str]] = []
    for source in sources:
        signatures, ctx = _load_file(source)
        for sig in signatures:
            merged[sig.id] = sig
        context.extend(ctx)
    return Catalog(signatures=tuple(merged.values()), context=tuple(context), sources=sources)


def _load_file(path: Path) -> tuple[list[Signature], list[re.Pattern[str]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read the signature catalog: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: the catalog must be a mapping with a 'signatures' list")
    unknown = sorted(str(k) for k in data if k not in _TOP_LEVEL)
    if unknown:
        raise CatalogError(f"{path}: unknown top-level key(s) {', '.join(unknown)}")
    version = data.get("version", 1)
    if version != 1:
        raise CatalogError(f"{path}: field 'version': unsupported catalog version {version!r} (expected 1)")
    entries = data.get("signatures")
    if not isinstance(entries, list):
        raise CatalogError(f"{path}: field 'signatures' must be a list of entries")

    raw_context = data.get("context", [])
    if not isinstance(raw_context, list):
        raise CatalogError(f"{path}: field 'context' must be a list of regexes")
    context = [_compile(p, 0, f"{path}: context pattern #{i + 1}") for i, p in enumerate(raw_context)]

    signatures: list[Signature] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries, start=1):
        sig = _parse_entry(path, index, entry)
        if sig.id in seen:
            raise CatalogError(f"{path}: signature #{index} ({sig.id!r}): field 'id': duplicate id")
        seen.add(sig.id)
        signatures.append(sig)
    return signatures, context


def _parse_entry(path: Path, index: int, entry: object) -> Signature:
    where = f"{path}: signature #{index}"
    if not isinstance(entry, dict):
        raise CatalogError(f"{where}: must be a mapping, not {type(entry).__name__}")
    raw_id = entry.get("id")
    if isinstance(raw_id, str):
        where = f"{where} ({raw_id!r})"
    unknown = sorted(str(k) for k in entry if k not in _FIELDS)
    if unknown:
        raise CatalogError(f"{where}: unknown field(s) {', '.join(unknown)}")
    for name in _REQUIRED:
        if entry.get(name) in (None, "", []):
            raise CatalogError(f"{where}: field {name!r} is missing")

    def text_field(name: str) -> str:
        value = entry[name]
        if not isinstance(value, str) or not value.strip():
            raise CatalogError(f"{where}: field {name!r} must be a non-empty string")
        return value.strip()

    def bool_field(name: str, default: bool) -> bool:
        value = entry.get(name, default)
        if not isinstance(value, bool):
            raise CatalogError(f"{where}: field {name!r} must be true or false, not {value!r}")
        return value

    sig_id = text_field("id")
    if not _ID_RE.fullmatch(sig_id):
        raise CatalogError(f"{where}: field 'id': {sig_id!r} must be lowercase letters, digits and dashes")
    category = text_field("category")
    if category not in CATEGORIES:
        raise CatalogError(f"{where}: field 'category': {category!r} is not one of {', '.join(CATEGORIES)}")
    severity = text_field("severity")
    if severity not in SEVERITIES:
        raise CatalogError(f"{where}: field 'severity': {severity!r} is not one of {', '.join(SEVERITIES)}")
    wrapper = bool_field("wrapper", False)
    flags = re.IGNORECASE if bool_field("ignore_case", False) else 0

    priority = entry.get("priority", DEFAULT_WRAPPER_PRIORITY if wrapper else DEFAULT_PRIORITY)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 1000:
        raise CatalogError(f"{where}: field 'priority' must be an integer from 0 to 1000, not {priority!r}")

    patterns = _compile_list(entry["regex"], flags, f"{where}: field 'regex'")
    wrapper_patterns = (
        _compile_list(entry["wrapper_regex"], flags, f"{where}: field 'wrapper_regex'")
        if entry.get("wrapper_regex") is not None
        else ()
    )
    exclude = None
    if entry.get("exclude") is not None:
        exclude = _compile(entry["exclude"], flags, f"{where}: field 'exclude'")

    raw_keywords = entry.get("keywords", [])
    if isinstance(raw_keywords, str):
        raw_keywords = [raw_keywords]
    if not isinstance(raw_keywords, list) or not all(isinstance(k, str) and k for k in raw_keywords):
        raise CatalogError(f"{where}: field 'keywords' must be a list of non-empty strings")
    keywords = tuple(dict.fromkeys(k.lower() for k in raw_keywords))

    return Signature(
        id=sig_id,
        title=text_field("title"),
        category=category,
        severity=severity,
        hint=" ".join(text_field("hint").split()),
        patterns=patterns,
        wrapper_patterns=wrapper_patterns,
        keywords=keywords,
        exclude=exclude,
        wrapper=wrapper,
        priority=priority,
    )


def _compile_list(value: object, flags: int, where: str) -> tuple[re.Pattern[str], ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise CatalogError(f"{where} must be a regex or a non-empty list of regexes")
    return tuple(_compile(item, flags, f"{where} #{i + 1}") for i, item in enumerate(items))


def _compile(value: object, flags: int, where: str) -> re.Pattern[str]:
    if not isinstance(value, str) or not value:
        raise CatalogError(f"{where} must be a non-empty string")
    try:
        return re.compile(value, flags)
    except re.error as exc:
        raise CatalogError(f"{where}: invalid regex {value!r}: {exc}") from None


# --------------------------------------------------------------------------- matching

_SEVERITY_RANK: Final = {name: rank for rank, name in enumerate(SEVERITIES)}


class Matcher:
    """Matches log lines against a catalog. Immutable and safe to share between threads."""

    def __init__(self, catalog: Catalog, *, max_line_chars: int = MAX_LINE_CHARS) -> None:
        if max_line_chars < 1:
            raise ValueError("max_line_chars must be positive")
        self._catalog = catalog
        self._max = max_line_chars
        position = {sig.id: i for i, sig in enumerate(catalog.signatures)}
        # Most specific first: priority, then causes before wrappers, then severity, then
        # catalog order.
        self._ordered: tuple[Signature, ...] = tuple(
            sorted(
                catalog.signatures,
                key=lambda s: (-s.priority, s.wrapper, _SEVERITY_RANK[s.severity], position[s.id]),
            )
        )
        self._by_id: Mapping[str, Signature] = {sig.id: sig for sig in catalog.signatures}
        self._unkeyed = tuple(sig for sig in self._ordered if not sig.keywords)
        self._keywords = tuple(sorted({k for sig in catalog.signatures for k in sig.keywords}))
        self._gates = tuple(re.compile(source) for source in prefilter_sources(list(self._keywords)))
        # For lines that pass the prefilter: which keywords they hold, found in one pass (the
        # longest keyword starting at each position, plus the keywords it contains), and
        # which signatures (by position in the specificity order) each keyword selects.
        self._finder = re.compile("(?=(" + literal_union(list(self._keywords)) + "))") if self._keywords else None
        self._implied = {k: tuple(o for o in self._keywords if o in k) for k in self._keywords}
        selects: dict[str, list[int]] = {k: [] for k in self._keywords}
        for index, sig in enumerate(self._ordered):
            for keyword in sig.keywords:
                selects[keyword].append(index)
        self._selects = {k: tuple(v) for k, v in selects.items()}
        self._unkeyed_indices = frozenset(i for i, sig in enumerate(self._ordered) if not sig.keywords)

    @classmethod
    def from_paths(cls, *paths: str | Path, max_line_chars: int = MAX_LINE_CHARS) -> Matcher:
        """A matcher for the given catalog files (the bundled catalog when none is given)."""
        return cls(load_catalog(*paths), max_line_chars=max_line_chars)

    @property
    def catalog(self) -> Catalog:
        return self._catalog

    @property
    def signatures(self) -> tuple[Signature, ...]:
        """Signatures in catalog order."""
        return self._catalog.signatures

    @property
    def keywords(self) -> tuple[str, ...]:
        """Every lowercase prefilter literal: a line containing none of them cannot match
        a keyed signature (a cheap candidate filter for remote followers)."""
        return self._keywords

    @property
    def max_line_chars(self) -> int:
        return self._max

    def signature(self, signature_id: str) -> Signature:
        """The signature with this id (KeyError if unknown)."""
        return self._by_id[signature_id]

    def match_line(self, line: str) -> Finding | None:
        """The most specific finding in ``line``, or None."""
        prepared = self._prepare(line)
        if prepared is None:
            return None
        found = self._scan(*prepared, first_only=True)
        return found[0] if found else None

    def match_all(self, line: str) -> list[Finding]:
        """Every signature that matches ``line`` (one finding each), most specific first."""
        prepared = self._prepare(line)
        if prepared is None:
            return []
        return self._scan(*prepared, first_only=False)

    # The hot path: most lines leave here after one lower() and a few regex scans.
    def _prepare(self, line: str) -> tuple[str, str, list[tuple[int, int]] | None, bool] | None:
        text = line if len(line) <= self._max else line[: self._max]
        segments = None
        if "\x1b" in text:
            text, segments = _strip_ansi(text)
        low = text.lower()
        for gate in self._gates:
            if gate.search(low) is not None:
                return text, low, segments, True
        if self._unkeyed:
            return text, low, segments, False
        return None

    def _scan(
        self, text: str, low: str, segments: list[tuple[int, int]] | None, keyed: bool, *, first_only: bool
    ) -> list[Finding]:
        chosen = set(self._unkeyed_indices)
        if keyed and self._finder is not None:
            present: set[str] = set()
            for found in self._finder.finditer(low):
                present.update(self._implied[found.group(1)])
            for keyword in present:
                chosen.update(self._selects[keyword])
        findings: list[Finding] = []
        stop_below: int | None = None
        for index in sorted(chosen):
            sig = self._ordered[index]
            if stop_below is not None and sig.priority < stop_below:
                break
            if sig.exclude is not None and sig.exclude.search(text) is not None:
                continue
            finding = self._try(sig, text, segments)
            if finding is None:
                continue
            findings.append(finding)
            if first_only and stop_below is None:
                # A signature of the same priority can still win (a cause over a wrapper).
                stop_below = sig.priority
        if len(findings) > 1:
            findings.sort(key=lambda f: (-f.priority, f.wrapper, _SEVERITY_RANK[f.severity]))
        return findings[:1] if first_only else findings

    def _try(self, sig: Signature, text: str, segments: list[tuple[int, int]] | None) -> Finding | None:
        match: re.Match[str] | None = None
        wrapper = sig.wrapper
        for pattern in sig.wrapper_patterns:
            match = pattern.search(text)
            if match is not None:
                wrapper = True
                break
        if match is None:
            for pattern in sig.patterns:
                match = pattern.search(text)
                if match is not None:
                    break
        if match is None:
            return None
        captures = {k: v for k, v in match.groupdict().items() if v is not None}
        start, end = match.span()
        if start > 0 and self._catalog.context:
            prefix = text[: min(start, _CONTEXT_CHARS)]
            for pattern in self._catalog.context:
                found = pattern.search(prefix)
                if found is not None:
                    for key, value in found.groupdict().items():
                        if value is not None:
                            captures.setdefault(key, value)
        if segments is not None:
            start, end = _original_span(segments, start, end)
        return Finding(
            signature_id=sig.id,
            title=sig.title,
            category=sig.category,
            severity=sig.severity,
            wrapper=wrapper,
            priority=sig.priority,
            span=(start, end),
            captures=captures,
        )


def _strip_ansi(text: str) -> tuple[str, list[tuple[int, int]]]:
    """Text without escape sequences, and (clean offset, original offset) per kept run."""
    parts: list[str] = []
    segments: list[tuple[int, int]] = []
    pos = 0
    length = 0
    for m in _ANSI_RE.finditer(text):
        if m.start() > pos:
            segments.append((length, pos))
            parts.append(text[pos : m.start()])
            length += m.start() - pos
        pos = m.end()
    if pos < len(text):
        segments.append((length, pos))
        parts.append(text[pos:])
    return "".join(parts), segments


def _original_span(segments: list[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    starts = [clean for clean, _ in segments]

    def to_original(i: int) -> int:
        k = max(bisect.bisect_right(starts, i) - 1, 0)
        clean, original = segments[k]
        return original + (i - clean)

    if end <= start:
        return to_original(start), to_original(start)
    return to_original(start), to_original(end - 1) + 1


# --------------------------------------------------------------------------- default

_default: Matcher | None = None
_default_lock = threading.Lock()


def default_matcher() -> Matcher:
    """The matcher for the bundled catalog (or the one installed by :func:`reload`)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Matcher(load_catalog())
        return _default


def reload(*paths: str | Path) -> Matcher:
    """Load the catalog again (bundled, or ``paths`` merged in order), make it the default
    matcher and return it. On a broken catalog the previous default stays in place and
    :class:`CatalogError` is raised."""
    global _default
    matcher = Matcher(load_catalog(*paths))
    with _default_lock:
        _default = matcher
    return matcher
