"""Failure-signature catalog and the line matcher used by triage.

The catalog is data: ``assets/signatures.yaml`` (see the comment at its top for the fields).
:func:`load_catalog` reads and validates it, :class:`Matcher` matches log lines against it::

    matcher = default_matcher()
    finding = matcher.match_line(line)      # the most specific finding, or None
    findings = matcher.match_all(line)      # every matching signature, most specific first
    stream = matcher.stream()               # one per log file: lines in order
    finding = stream.match(line)            # a traceback's frames are context, not findings

Matching is built for whole logs. A line is first checked for the catalog's keywords: a
couple of trie-shaped regex scans over the lowercased line, each led by one character, so an
ordinary log line costs a ``lower()`` and two fast scans. Only lines holding a keyword reach
the signatures' own regexes. A line longer than :data:`MAX_LINE_CHARS` is scanned at its head
and at its tail (an error written at the end of a 10 MB line is still found). The catalog's
regexes use bounded gaps, so no line can make them backtrack for long.

Before the regexes run, a line is normalised the way real logs need: escape sequences
(colours, also the bare ``[1;36m`` a copy-paste leaves behind) are removed, ``\r``
redraws become separate segments, and a JSON-formatted log line is matched on its decoded
message. Prefixes (Ray/vLLM process tags, glog, Rust ``tracing``, uvicorn, srun labels,
timestamps) need no removal for matching - the regexes match the message wherever it
starts - but :class:`MatchStream` strips them to follow a Python traceback: its frames and
source lines are context, the exception line that ends it is what gets classified.
"""

from __future__ import annotations

import bisect
import functools
import json
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

import yaml

from console.agent import literal_union, prefilter_sources
from console.paths import asset
from console.resemblance import BENIGN, FAILURE_KEYWORDS, Resemblance, says_code_bug, says_retry, without_paths

__all__ = [
    "CATEGORIES",
    "FRAME_OPENER",
    "MAX_LINE_CHARS",
    "SEVERITIES",
    "TRACEBACK_OPENER",
    "Catalog",
    "CatalogError",
    "Finding",
    "MatchStream",
    "Matcher",
    "Signature",
    "bundled_catalog",
    "bundled_catalog_path",
    "default_matcher",
    "install",
    "load_catalog",
    "merge_catalog",
    "parse_catalog_document",
    "parse_entries",
    "read_catalog_document",
    "reload",
    "strip_prefixes",
]

CATEGORIES: Final[tuple[str, ...]] = ("startup", "runtime", "infra", "scheduler")
SEVERITIES: Final[tuple[str, ...]] = ("fatal", "error", "warning", "info")
"""``info`` is a note that reports no failure (a stop asked of a process)."""
MAX_LINE_CHARS: Final[int] = 4096
"""How much of a line the matcher scans at once: a longer line is scanned at its head and
at its tail, this many characters each."""

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
        "frames",
        "deterministic",
        "generic",
        "uncaught",
        "novel",
        "examples",
        "benign",
        "family",
        "stop",
    }
)
_REQUIRED: Final = ("id", "title", "category", "severity", "hint")
_TOP_LEVEL: Final = frozenset(
    {"version", "context", "error_lines", "warning_lines", "quiet_lines", "corpus", "signatures"}
)
# CSI, OSC and two-character escape sequences (colour codes, titles, cursor moves).
_ESCAPE: Final = r"\x1b(?:\[[0-?]{0,64}[ -/]{0,8}[@-~]|\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)?|[@-Z\\-_])"
_ANSI_RE: Final = re.compile(_ESCAPE)
# What a copy-paste leaves of a colour code: the ESC is gone (or shown as an arrow, or as
# rsyslog's and CloudWatch's octal `#033`).
_BARE_SGR: Final = r"(?:\u2190|#033)?\[(?:\d{1,3};){0,4}\d{1,3}m"
_BARE_SGR_RE: Final = re.compile(_BARE_SGR)
_ANSI_OR_BARE_RE: Final = re.compile(_ESCAPE + "|" + _BARE_SGR)
_JSON_MAX_CHARS: Final[int] = 1 << 20
# libyaml's safe loader when PyYAML has it (ten times faster on the catalog: a scan starts sooner).
_YAML_LOADER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_JSON_MAX_STRINGS: Final[int] = 64


class CatalogError(ValueError):
    """The catalog cannot be used. The message names the file, the entry and the field."""


class LazyRegex:
    """A bundled catalog regex, compiled at its first search: a line is tried only against the
    signatures its keywords select, and compiling all of the catalog's regexes took longer than
    a scan of 100 MB of a healthy log. The bundled regexes are compiled and tried by the
    project's tests; an operator's are compiled when read (a bad one has a clear message)."""

    __slots__ = ("flags", "pattern", "search")

    def __init__(self, pattern: str, flags: int) -> None:
        self.pattern = pattern
        self.flags = flags
        self.search: Callable[..., re.Match[str] | None] = self._first_search

    def _first_search(self, string: str, *args: int) -> re.Match[str] | None:
        self.search = re.compile(self.pattern, self.flags).search  # from now on, the regex's own
        return self.search(string, *args)


Regex = re.Pattern[str] | LazyRegex
"""A catalog regex: compiled (an operator's) or compiled when first used (the bundled ones)."""


@dataclass(frozen=True)
class Signature:
    """One catalog entry, with its regexes compiled."""

    id: str
    title: str
    category: str
    severity: str
    hint: str
    patterns: tuple[Regex, ...]
    wrapper_patterns: tuple[Regex, ...] = ()
    keywords: tuple[str, ...] = ()
    exclude: Regex | None = None
    wrapper: bool = False
    priority: int = DEFAULT_PRIORITY
    frames: Regex | None = None
    # A failure of the cluster's setup or of the recipe itself: every rerun fails the same way,
    # however many workers it reached.
    deterministic: bool = False
    # An error no specific signature knows (an error-level line, a FATAL, a panic): found, shown
    # as unrecognised, and a root cause only when no specific signature found one.
    generic: bool = False
    # The exception that ends a Python traceback when no other signature knows it (generic).
    uncaught: bool = False
    # An error-level line that a healthy run of the same arm or engine never wrote (generic).
    novel: bool = False
    # Words that name this failure's component or kind (`nccl`, `etcd`, `safetensors`): an
    # error-level line (the catalog's `error_lines`) holding one that no regex knows is
    # found under this signature, as a family match.
    family: tuple[str, ...] = ()
    # A line that reports a stop asked of its process from outside (a SIGTERM, a Ctrl-C): the
    # reports and unrecognised errors written after it in the same file are that stop's
    # teardown, not failures.
    stop: bool = False
    # The entry's own lines (validated: found under it, or not found): they teach the
    # resemblance of lines no regex knows too.
    examples: tuple[str, ...] = ()
    benign: tuple[str, ...] = ()


@dataclass(frozen=True)
class Catalog:
    """Validated signatures (in catalog order), the line-prefix context patterns and the
    patterns of an error-level line (for family matches)."""

    signatures: tuple[Signature, ...]
    context: tuple[re.Pattern[str], ...] = ()
    sources: tuple[Path, ...] = ()
    error_lines: tuple[re.Pattern[str], ...] = ()
    warning_lines: tuple[re.Pattern[str], ...] = ()  # not error-level, though they quote an error
    # Lines no signature finds anything in: a tool's informational level that quotes the
    # errors it handles (`NCCL INFO`; NCCL reports its failures with `NCCL WARN`).
    quiet_lines: tuple[re.Pattern[str], ...] = ()
    # Files of real labelled lines (assets/real-lines.yaml) that a line no regex knows is
    # compared with (console.resemblance): none, and nothing is named by resemblance.
    corpus: tuple[Path, ...] = ()


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
    generic: bool = False  # an error no specific signature knows (shown as unrecognised)
    # Found without a regex of its signature: by a family word in an error-level line
    # (``captures["family"]`` holds the word) or by resemblance to the signature's known lines
    # (``captures["resembles"]`` holds the words that weighed most). A cause, ranked below
    # every regex-found one.
    family: bool = False
    stop: bool = False  # a stop asked of the process (its signature's ``stop``)

    @property
    def basis(self) -> str | None:
        """How a finding that no regex of its signature made was named, or None."""
        if not self.family:
            return None
        if "family" in self.captures:
            return f"its family word {self.captures['family']!r}"
        return f"its words ({self.captures.get('resembles', '')}), like its known lines"

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
            "generic": self.generic,
            "family": self.family,
            "stop": self.stop,
        }


# --------------------------------------------------------------------------- loading


def bundled_catalog_path() -> Path:
    """The catalog shipped with srt-console."""
    return asset("signatures.yaml")


@functools.cache
def bundled_catalog() -> Catalog:
    """The catalog shipped with srt-console, read once."""
    return load_catalog()


def load_catalog(*paths: str | Path) -> Catalog:
    """Read, validate and compile catalogs; with no argument, the bundled one.

    Several files are merged in order: an entry whose id is already defined replaces the
    earlier definition (so a user file can override or extend the bundled catalog).
    Raises :class:`CatalogError` with the file, entry and field at fault.
    """
    sources = tuple(Path(p) for p in paths) if paths else (bundled_catalog_path(),)
    catalog = Catalog(signatures=())
    for source in sources:
        catalog = merge_catalog(catalog, _load_file(source, lazy=not paths), source)
    return catalog


def merge_catalog(base: Catalog, part: Catalog, source: Path | None = None) -> Catalog:
    """``base`` with the signatures and patterns of ``part`` added: a signature whose id
    ``base`` has replaces it in place."""
    merged = {sig.id: sig for sig in base.signatures}
    for sig in part.signatures:
        merged[sig.id] = sig
    sources = (*base.sources, source) if source is not None else base.sources
    return Catalog(
        signatures=tuple(merged.values()),
        context=(*base.context, *part.context),
        sources=sources,
        error_lines=(*base.error_lines, *part.error_lines),
        warning_lines=(*base.warning_lines, *part.warning_lines),
        quiet_lines=(*base.quiet_lines, *part.quiet_lines),
        corpus=tuple(dict.fromkeys((*base.corpus, *part.corpus))),
    )


def read_catalog_document(path: Path) -> object:
    """A catalog file's YAML (CatalogError when it cannot be read or parsed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read the signature catalog: {exc}") from None
    try:
        return yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from None


def _load_file(path: Path, *, lazy: bool = False) -> Catalog:
    part, problems = parse_catalog_document(read_catalog_document(path), str(path), lazy=lazy, base=path.parent)
    if problems:
        raise CatalogError(problems[0])
    return part


def parse_catalog_document(
    data: object,
    where: str,
    line_of: Callable[[tuple[str | int, ...]], int | None] | None = None,
    *,
    lazy: bool = False,
    base: Path | None = None,
) -> tuple[Catalog, list[str]]:
    """A catalog document's signatures and patterns (as a catalog to merge), and a message per
    problem. A document-level problem leaves nothing; a bad entry is left out with its message
    (``where`` names the file, ``line_of`` the line of a key path when known). ``base`` is the
    folder of the file: its ``corpus`` files are found there (none is read without it)."""
    empty = Catalog(signatures=())
    if not isinstance(data, dict):
        return empty, [f"{where}: the catalog must be a mapping with a 'signatures' list"]
    unknown = sorted(str(k) for k in data if k not in _TOP_LEVEL)
    if unknown:
        return empty, [f"{where}: unknown top-level key(s) {', '.join(unknown)}"]
    version = data.get("version", 1)
    if version != 1:
        return empty, [f"{where}: field 'version': unsupported catalog version {version!r} (expected 1)"]
    entries = data.get("signatures")
    if not isinstance(entries, list):
        return empty, [f"{where}: field 'signatures' must be a list of entries"]
    patterns: dict[str, tuple[re.Pattern[str], ...]] = {}
    for name in ("context", "error_lines", "warning_lines", "quiet_lines"):
        raw = data.get(name, [])
        if not isinstance(raw, list):
            return empty, [f"{where}: field {name!r} must be a list of regexes"]
        try:
            patterns[name] = tuple(_compile(p, 0, f"{where}: {name} pattern #{i + 1}") for i, p in enumerate(raw))
        except CatalogError as exc:
            return empty, [str(exc)]
    corpus = data.get("corpus", [])
    corpus = [corpus] if isinstance(corpus, str) else corpus
    if not isinstance(corpus, list) or not all(isinstance(c, str) and c.strip() for c in corpus):
        return empty, [f"{where}: field 'corpus' must be a file name or a list of them"]
    files = [base / c for c in corpus] if base is not None else []
    for file in files:
        try:
            corpus_lines(file)  # read once, here: a bad corpus is named with its catalog
        except CatalogError as exc:
            return empty, [f"{where}: field 'corpus': {exc}"]
    signatures, problems = parse_entries(
        entries,
        where,
        line_of,
        key=("signatures",),
        context=patterns["context"],
        quiet=patterns["quiet_lines"],
        lazy=lazy,
    )
    part = Catalog(
        signatures=tuple(signatures),
        context=patterns["context"],
        error_lines=patterns["error_lines"],
        warning_lines=patterns["warning_lines"],
        quiet_lines=patterns["quiet_lines"],
        corpus=tuple(files),
    )
    return part, problems


def parse_entries(
    entries: Sequence[object],
    where: str,
    line_of: Callable[[tuple[str | int, ...]], int | None] | None = None,
    *,
    key: tuple[str | int, ...] = ("signatures",),
    context: tuple[re.Pattern[str], ...] = (),
    quiet: tuple[re.Pattern[str], ...] = (),
    lazy: bool = False,
) -> tuple[list[Signature], list[str]]:
    """Catalog entries validated one by one (regexes compiled, examples matched, benign lines
    not, the catalog's ``quiet`` lines applying): the good ones, and a message naming the file,
    line, entry and field of each bad one."""
    signatures: list[Signature] = []
    problems: list[str] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries, start=1):
        line = line_of((*key, index - 1)) if line_of is not None else None
        label = f"{where}:{line}" if line else where
        try:
            sig = _parse_entry(label, index, entry, lazy=lazy)
            if sig.id in seen:
                raise CatalogError(f"{label}: signature #{index} ({sig.id!r}): field 'id': duplicate id")
            sig = _check_examples(sig, entry, f"{label}: signature #{index} ({sig.id!r})", context, quiet)
        except CatalogError as exc:
            problems.append(str(exc))
            continue
        seen.add(sig.id)
        signatures.append(sig)
    return signatures, problems


def _check_examples(
    sig: Signature,
    entry: object,
    where: str,
    context: tuple[re.Pattern[str], ...],
    quiet: tuple[re.Pattern[str], ...] = (),
) -> Signature:
    """An entry's ``examples`` must be found under it (through its keywords), its ``benign``
    lines must not. The signature with its lines."""
    assert isinstance(entry, dict)
    examples = _lines_field(entry, "examples", where)
    benign = _lines_field(entry, "benign", where)
    if not examples and not benign:
        return sig
    if sig.uncaught or sig.novel:
        raise CatalogError(f"{where}: field 'examples'/'benign': a signature without a regex has no lines to test")
    alone = Matcher(Catalog(signatures=(sig,), context=context, quiet_lines=quiet))
    for i, line in enumerate(examples, start=1):
        if alone.match_line(line) is None:
            gated = " (no keyword of the entry is in it)" if sig.keywords and not alone.has_keyword(line) else ""
            raise CatalogError(f"{where}: field 'examples' #{i}: not matched{gated}: {line!r}")
    for i, line in enumerate(benign, start=1):
        if alone.match_line(line) is not None:
            raise CatalogError(f"{where}: field 'benign' #{i}: matched, but must not be: {line!r}")
    return replace(sig, examples=tuple(examples), benign=tuple(benign))


def _lines_field(entry: dict[str, object], name: str, where: str) -> list[str]:
    value = entry.get(name)
    if value is None:
        return []
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) and i for i in items):
        raise CatalogError(f"{where}: field {name!r} must be a list of log lines")
    return list(items)


def _parse_entry(path: str | Path, index: int, entry: object, *, lazy: bool = False) -> Signature:
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

    uncaught = bool_field("uncaught", False)
    novel = bool_field("novel", False)
    if uncaught and novel:
        raise CatalogError(f"{where}: fields 'uncaught' and 'novel' cannot both be true")
    if entry.get("regex") in (None, "", []) and not (uncaught or novel):
        raise CatalogError(f"{where}: field 'regex' is missing")
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
    generic = bool_field("generic", False) or uncaught or novel
    flags = re.IGNORECASE if bool_field("ignore_case", False) else 0

    priority = entry.get("priority", DEFAULT_WRAPPER_PRIORITY if wrapper else DEFAULT_PRIORITY)
    if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= 1000:
        raise CatalogError(f"{where}: field 'priority' must be an integer from 0 to 1000, not {priority!r}")

    patterns = (
        _compile_list(entry["regex"], flags, f"{where}: field 'regex'", lazy) if entry.get("regex") is not None else ()
    )
    wrapper_patterns = (
        _compile_list(entry["wrapper_regex"], flags, f"{where}: field 'wrapper_regex'", lazy)
        if entry.get("wrapper_regex") is not None
        else ()
    )
    exclude = None
    if entry.get("exclude") is not None:
        exclude = _regex(entry["exclude"], flags, f"{where}: field 'exclude'", lazy)
    frames = None
    if entry.get("frames") is not None:
        frames = _regex(entry["frames"], flags, f"{where}: field 'frames'", lazy)

    raw_keywords = entry.get("keywords", [])
    if isinstance(raw_keywords, str):
        raw_keywords = [raw_keywords]
    if not isinstance(raw_keywords, list) or not all(isinstance(k, str) and k for k in raw_keywords):
        raise CatalogError(f"{where}: field 'keywords' must be a list of non-empty strings")
    keywords = tuple(dict.fromkeys(k.lower() for k in raw_keywords))
    raw_family = entry.get("family", [])
    if isinstance(raw_family, str):
        raw_family = [raw_family]
    if not isinstance(raw_family, list) or not all(isinstance(k, str) and k.strip() for k in raw_family):
        raise CatalogError(f"{where}: field 'family' must be a list of non-empty strings")
    family = tuple(dict.fromkeys(k.lower() for k in raw_family))
    if family and generic:
        raise CatalogError(f"{where}: field 'family': an unrecognised error's signature has no family")
    stop = bool_field("stop", False)
    if stop and (severity != "info" or not wrapper or generic or family):
        raise CatalogError(
            f"{where}: field 'stop': a stop reports no failure: it needs severity 'info' and 'wrapper: true',"
            " and no 'family'"
        )

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
        frames=frames,
        deterministic=bool_field("deterministic", False),
        generic=generic,
        uncaught=uncaught,
        novel=novel,
        family=family,
        stop=stop,
    )


def _compile_list(value: object, flags: int, where: str, lazy: bool = False) -> tuple[Regex, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items:
        raise CatalogError(f"{where} must be a regex or a non-empty list of regexes")
    return tuple(_regex(item, flags, f"{where} #{i + 1}", lazy) for i, item in enumerate(items))


def _regex(value: object, flags: int, where: str, lazy: bool) -> Regex:
    if lazy and isinstance(value, str) and value:
        return LazyRegex(value, flags)
    return _compile(value, flags, where)


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

    def __init__(self, catalog: Catalog, *, max_line_chars: int = MAX_LINE_CHARS, resemblance: bool = True) -> None:
        if max_line_chars < 1:
            raise ValueError("max_line_chars must be positive")
        if not resemblance:
            catalog = replace(catalog, corpus=())
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
        # A signature without line patterns (an uncaught exception's) is never tried on lines.
        self._unkeyed = tuple(sig for sig in self._ordered if not sig.keywords and sig.patterns)
        keywords = {k for sig in catalog.signatures for k in sig.keywords}
        if catalog.corpus:
            # A line no regex can know is still looked at for resemblance when it holds a
            # failure word or phrase: they pass the prefilter (and select no signature).
            keywords.update(FAILURE_KEYWORDS)
        self._keywords = tuple(sorted(keywords))
        # For lines that pass the prefilter (built on first use: a scan that skips every line
        # needs none of it): which keywords they hold, found in one pass (the
        # longest keyword starting at each position, plus the keywords it contains), and
        # which signatures (by position in the specificity order) each keyword selects.
        selects: dict[str, list[int]] = {k: [] for k in self._keywords}
        for index, sig in enumerate(self._ordered):
            for keyword in sig.keywords:
                selects[keyword].append(index)
        self._selects = {k: tuple(v) for k, v in selects.items()}
        # Family words are not keywords: only a line that passed on a keyword (an error-level
        # one holds `error`, `fatal`, `critical` or `panic`) is looked at for them, so a word
        # common in healthy logs (`cuda`) costs them nothing.
        families: dict[str, list[int]] = {}
        if catalog.error_lines:
            for index, sig in enumerate(self._ordered):
                for word in sig.family:
                    families.setdefault(word, []).append(index)
        self._families = {k: tuple(v) for k, v in families.items()}
        self._unkeyed_indices = frozenset(i for i, sig in enumerate(self._ordered) if not sig.keywords and sig.patterns)
        self._framed = tuple(sig for sig in self._ordered if sig.frames is not None)
        self._uncaught = next((sig for sig in self._ordered if sig.uncaught), None)
        self._novel = next((sig for sig in self._ordered if sig.novel), None)

    @functools.cached_property
    def _gates(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(source) for source in prefilter_sources(list(self._keywords)))

    @functools.cached_property
    def _keywords_held(self) -> _Words | None:
        return _Words(self._keywords) if self._keywords else None

    @functools.cached_property
    def _family_words_held(self) -> _Words:
        return _Words(tuple(self._families))

    @functools.cached_property
    def _resemblance(self) -> Resemblance | None:
        """The classifier of lines no regex knows (built on first use), None without a corpus."""
        if not self._catalog.corpus:
            return None
        named = {sig.id for sig in self._catalog.signatures if not sig.generic}
        labelled = [(line, label) for path in self._catalog.corpus for line, label in corpus_lines(path)]
        for sig in self._catalog.signatures:
            labelled += [(line, sig.id) for line in sig.examples] + [(line, BENIGN) for line in sig.benign]
        return Resemblance((line, label) for line, label in labelled if label == BENIGN or label in named)

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
    def keyed_only(self) -> bool:
        """Whether every signature has keywords: a line holding none cannot match."""
        return not self._unkeyed

    @property
    def max_line_chars(self) -> int:
        return self._max

    def has_keyword(self, line: str) -> bool:
        """Whether the line holds one of the catalog's keywords (passes the prefilter)."""
        low = line.lower()
        return any(gate.search(low) is not None for gate in self._gates)

    def signature(self, signature_id: str) -> Signature:
        """The signature with this id (KeyError if unknown)."""
        return self._by_id[signature_id]

    def match_line(self, line: str) -> Finding | None:
        """The most specific finding in ``line``, or None."""
        found = self._match(line, first_only=True)
        return found[0] if found else None

    def match_all(self, line: str) -> list[Finding]:
        """Every signature that matches ``line`` (one finding each), most specific first."""
        return self._match(line, first_only=False)

    def stream(self) -> MatchStream:
        """A matcher for the lines of one log, fed in order (see :class:`MatchStream`)."""
        return MatchStream(self)

    @property
    def frame_signatures(self) -> tuple[Signature, ...]:
        """Signatures recognised by the frames of a traceback (most specific first)."""
        return self._framed

    @property
    def uncaught_signature(self) -> Signature | None:
        """The signature of an exception ending a traceback that nothing else knows."""
        return self._uncaught

    @property
    def novel_signature(self) -> Signature | None:
        """The signature of an error-level line a healthy run never wrote."""
        return self._novel

    def _match(self, line: str, *, first_only: bool) -> list[Finding]:
        if "\r" in line and "\r" in line.rstrip("\r"):
            # A crash message written after a progress bar's last redraw shares its line:
            # each redraw is a line of its own (a regex's `^`, a family word in the bar).
            return self._match_redraws(line, first_only=first_only)
        if len(line) <= self._max:
            return self._match_window(line, 0, first_only=first_only)
        # A long line is scanned at both ends: its head and its last max_line_chars. A quiet
        # head quiets the whole line (a logged prompt's text runs to its end).
        if self._quiet(line, self._max):
            return []
        head = self._match_window(line[: self._max], 0, first_only=first_only)
        offset = len(line) - self._max
        tail = self._match_window(line[offset:], offset, first_only=first_only)
        if not tail:
            return head
        seen = {f.signature_id for f in head}
        found = head + [f for f in tail if f.signature_id not in seen]
        found.sort(key=_specificity)
        return found[:1] if first_only else found

    def _match_redraws(self, line: str, *, first_only: bool) -> list[Finding]:
        """A line of ``\r`` redraws (a progress bar written to a file, perhaps with the line a
        crash wrote after it): every redraw is matched on its own (each at both ends when it is
        long itself)."""
        found: list[Finding] = []
        seen: set[str] = set()
        start = 0
        while start <= len(line):
            end = line.find("\r", start)
            if end < 0:
                end = len(line)
            if end > start:
                segment = line[start:end]
                if len(segment) <= self._max:
                    hits = self._match_window(segment, start, first_only=first_only)
                else:
                    hits = [_shifted(f, start) for f in self._match(segment, first_only=first_only)]
                for f in hits:
                    if f.signature_id not in seen or first_only:
                        seen.add(f.signature_id)
                        found.append(f)
            start = end + 1
        # The most specific; of equals the last redraw (what the program said last).
        found.reverse()
        found.sort(key=_specificity)
        if first_only:
            return found[:1]
        unique: dict[str, Finding] = {}
        for f in found:
            unique.setdefault(f.signature_id, f)
        return list(unique.values())

    def _match_window(self, text: str, offset: int, *, first_only: bool) -> list[Finding]:
        prepared = self._prepare(text)
        if prepared is None:
            return []
        found = self._scan(prepared, first_only=first_only)
        if offset:
            found = [_shifted(f, offset) for f in found]
        return found

    # The hot path: most lines leave here after one lower() and a few regex scans.
    def _prepare(self, line: str) -> _Prepared | None:
        text = line
        segments = None
        if "\x1b" in text:
            text, segments = _strip_ansi(text, _ANSI_RE)
        if "\r" in text:  # (only a line's trailing CRs: redraws are split by _match)
            text = text.replace("\r", "\n")
        low = text.lower()
        keyed = False
        for gate in self._gates:
            if gate.search(low) is not None:
                keyed = True
                break
        if not keyed and not self._unkeyed:
            return None
        prepared = _Prepared(line, text, low, segments, keyed)
        if keyed:
            decoded = _json_text(text) if text[:1] == "{" else None
            if decoded is not None:
                prepared = _Prepared(line, decoded, decoded.lower(), None, keyed, whole=True)
            elif _BARE_SGR_RE.search(text) is not None:
                clean, segments = _strip_ansi(line.replace("\r", "\n"), _ANSI_OR_BARE_RE)
                prepared = _Prepared(line, clean, clean.lower(), segments, keyed)
            if self._keywords_held is not None:
                prepared.held = self._keywords_held.held(prepared.low)
            # The gates pass every line holding a keyword and some more (a keyword's tail:
            # `disabled` for `unable`); a line holding none selects no signature.
            if not prepared.held and not self._unkeyed:
                return None
        return prepared

    def quiet(self, text: str) -> bool:
        """Whether the line is one of the catalog's quiet lines (it reports no failure, whatever it says)."""
        return self._quiet(text, len(text))

    def _quiet(self, text: str, end: int) -> bool:
        """Whether one of the catalog's quiet lines is in ``text`` up to ``end``: nothing there is a finding."""
        return any(quiet.search(text, 0, end) is not None for quiet in self._catalog.quiet_lines)

    def _scan(self, prepared: _Prepared, *, first_only: bool) -> list[Finding]:
        text = prepared.text
        chosen = set(self._unkeyed_indices)
        for keyword in prepared.held:
            chosen.update(self._selects[keyword])
        findings: list[Finding] = []
        stop_below: int | None = None
        for index in sorted(chosen):
            sig = self._ordered[index]
            if stop_below is not None and sig.priority < stop_below:
                break
            if sig.exclude is not None and sig.exclude.search(text) is not None:
                continue
            finding = self._try(sig, prepared)
            if finding is None:
                continue
            findings.append(finding)
            if first_only and stop_below is None:
                # A signature of the same priority can still win (a cause over a wrapper).
                stop_below = sig.priority
        if len(findings) > 1:
            findings.sort(key=_specificity)
        if (self._families or self._catalog.corpus) and prepared.keyed and all(f.generic for f in findings):
            # No regex knows the line: a family word in an error-level line still names it,
            # ahead of an unrecognised error.
            family = (self._family(prepared) if self._families else None) or self._resemble(prepared)
            if family is not None:
                # As severe as the line says: a glog `F` line that names Mooncake is a crash.
                worst = min((f.severity for f in findings), key=_SEVERITY_RANK.__getitem__, default=family.severity)
                if _SEVERITY_RANK[worst] < _SEVERITY_RANK[family.severity]:
                    family = replace(family, severity=worst)
                findings.insert(0, family)
        # (asked last: most lines that get this far name nothing, and a quiet line names nothing)
        if findings and self.quiet(text):
            return []
        return findings[:1] if first_only else findings

    def _family(self, prepared: _Prepared) -> Finding | None:
        """The most specific signature with a family word in the line, when it is an
        error-level one (one of the catalog's ``error_lines``, none of its ``warning_lines``)
        that does not say it will try again."""
        # (a family word only in a path names nothing: `.../v0.5.3-rocm700-mi35x/...`; nor one in
        # a field's name, as a dump of values has them: `SchedulerStats(..., cudagraph_stats=None)`)
        held = self._family_words_held.held(_FIELD_NAME_RE.sub(" ", without_paths(prepared.low)))
        if not held:
            return None
        best, word = min((self._families[w][0], w) for w in held)
        text = prepared.text
        level = next((m for m in (p.search(text) for p in self._catalog.error_lines) if m is not None), None)
        if level is None or any(p.search(text) is not None for p in self._catalog.warning_lines):
            return None
        if says_retry(text) or says_code_bug(text):  # (Ray's `..., so the task will be retried. Error: ...`)
            return None
        sig = self._ordered[best]
        if sig.exclude is not None and sig.exclude.search(text) is not None:
            return None
        start = level.start()
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "._"):
            start -= 1  # to the start of a named exception (`torch.OutOfMemoryError`)
        return self._finding(sig, prepared, start, len(text.rstrip()), {"family": word}, sig.wrapper, family=True)

    def _resemble(self, prepared: _Prepared) -> Finding | None:
        """The signature whose known lines a line no regex knows reads like (console.resemblance),
        when it is not a warning."""
        resemblance = self._resemblance
        if resemblance is None:
            return None
        text = prepared.text
        guess = resemblance.classify(text)
        if guess is None or any(p.search(text) is not None for p in self._catalog.warning_lines):
            return None
        sig = self._by_id[guess.signature_id]
        if sig.exclude is not None and sig.exclude.search(text) is not None:
            return None
        level = next((m for m in (p.search(text) for p in self._catalog.error_lines) if m is not None), None)
        start = 0 if level is None else level.start()
        captures = {"resembles": ", ".join(guess.words)}
        return self._finding(sig, prepared, start, len(text.rstrip()), captures, sig.wrapper, family=True)

    def _try(self, sig: Signature, prepared: _Prepared) -> Finding | None:
        text = prepared.text
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
        return self._finding(sig, prepared, start, end, captures, wrapper)

    def _finding(
        self,
        sig: Signature,
        prepared: _Prepared,
        start: int,
        end: int,
        captures: dict[str, str],
        wrapper: bool,
        *,
        family: bool = False,
    ) -> Finding:
        """The finding of ``sig`` at ``start:end`` of the prepared text, with the rank and process
        its prefix names (where the signature did not capture them)."""
        if start > 0 and self._catalog.context:
            for key, value in self.context_of(prepared.text[max(0, start - _CONTEXT_CHARS) : start]).items():
                captures.setdefault(key, value)
        return Finding(
            signature_id=sig.id,
            title=sig.title,
            category=sig.category,
            severity=sig.severity,
            wrapper=wrapper,
            priority=sig.priority,
            span=prepared.original_span(start, end),
            captures=captures,
            generic=sig.generic,
            family=family,
            stop=sig.stop,
        )

    def context_of(self, prefix: str) -> dict[str, str]:
        """Rank and process details named in a line's prefix (the catalog's context patterns)."""
        captures: dict[str, str] = {}
        for pattern in self._catalog.context:
            found = pattern.search(prefix)
            if found is not None:
                for key, value in found.groupdict().items():
                    if value is not None:
                        captures.setdefault(key, value)
        return captures

    def framed_finding(self, sig: Signature, line: str, start: int, captures: dict[str, str]) -> Finding:
        """A finding of a frame-recognised signature on a traceback's exception line."""
        return Finding(
            signature_id=sig.id,
            title=sig.title,
            category=sig.category,
            severity=sig.severity,
            wrapper=sig.wrapper,
            priority=sig.priority,
            span=(start, len(line)),
            captures=captures,
            generic=sig.generic,
        )


@functools.cache
def corpus_lines(path: Path) -> tuple[tuple[str, str], ...]:
    """A corpus file's lines with their labels (a signature id, or BENIGN), read once
    (CatalogError when it cannot be read or is no corpus)."""
    if not path.is_file():
        raise CatalogError(f"no such file: {path}")
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER)
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read: {exc}") from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("variants", []), list):
        raise CatalogError(f"{path}: a corpus is a mapping with 'variants' and 'benign' lists")
    out: list[tuple[str, str]] = []
    for key in ("variants", "benign"):
        entries = data.get(key)
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict) and isinstance(entry.get("line"), str):
                label = entry.get("id") if key == "variants" else BENIGN
                if isinstance(label, str):
                    out.append((entry["line"], label))
    return tuple(out)


def _specificity(f: Finding) -> tuple[bool, int, bool, int]:
    # Regex-found causes first, then family matches, then unrecognised errors (whose
    # priorities are the catalog's lowest).
    return (f.family or f.generic, -f.priority, f.wrapper, _SEVERITY_RANK[f.severity])


def _shifted(f: Finding, offset: int) -> Finding:
    return replace(f, span=(f.span[0] + offset, f.span[1] + offset))


_FIELD_NAME_RE: Final = re.compile(r"[\w.]{1,80}=(?!=)")


class _Words:
    """Which of some lowercase words a lowercased text holds, found in one pass: the longest
    word starting at each position, plus the words it contains."""

    def __init__(self, words: Sequence[str]) -> None:
        self._finder = re.compile("(?=(" + literal_union(list(words)) + "))")
        self._implied = {k: tuple(o for o in words if o in k) for k in words}

    def held(self, low: str) -> set[str]:
        found: set[str] = set()
        for match in self._finder.finditer(low):
            found.update(self._implied[match.group(1)])
        return found


@dataclass
class _Prepared:
    """A window of a line made ready for the regexes, and how to map spans back to it."""

    line: str
    text: str
    low: str
    segments: list[tuple[int, int]] | None
    keyed: bool
    whole: bool = False  # a decoded JSON message: spans cover the whole line
    held: set[str] = field(default_factory=set)  # the prefilter's keywords in `low`

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        if self.whole:
            return 0, len(self.line)
        if self.segments is not None:
            return _original_span(self.segments, start, end)
        return start, end


def _json_text(text: str) -> str | None:
    """The string values of a JSON-formatted log line (message, error, traceback ...), one a
    line; None when the line is not a JSON object."""
    stripped = text.rstrip()
    if not stripped.endswith("}") or len(stripped) > _JSON_MAX_CHARS:
        return None
    try:
        data = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    strings: list[str] = []
    pending: list[object] = [data]
    while pending and len(strings) < _JSON_MAX_STRINGS:
        item = pending.pop()
        if isinstance(item, str):
            strings.append(item)
        elif isinstance(item, dict):
            pending.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            pending.extend(reversed(item))
    return "\n".join(strings) if strings else None


def _strip_ansi(text: str, pattern: re.Pattern[str]) -> tuple[str, list[tuple[int, int]]]:
    """Text without escape sequences, and (clean offset, original offset) per kept run."""
    parts: list[str] = []
    segments: list[tuple[int, int]] = []
    pos = 0
    length = 0
    for m in pattern.finditer(text):
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


# --------------------------------------------------------------------------- streams

# The prefixes a log line can carry before its message, at its start, in any order: colour
# codes, timestamps ([2025-07-25 07:53:08 TP2], 2025-10-13T18:18:46Z, Buildkite's
# [2025-09-12T15:42:57Z]), Ray/vLLM process tags ((EngineCore_DP0 pid=5), (pid=1, ip=..)),
# level words (vLLM "ERROR 10-15 08:32:29 [core.py:708]", uvicorn "ERROR:", srtctl
# "[ERROR]", Rust tracing "ERROR dynamo_runtime::worker:"), [rank1]:, glog
# "E0603 20:16:59.104586 27322 file.cc:271]", [atom 12:19:54], docker compose "svc-1  | ",
# srun --label "3: ", TRT-LLM "[TRT-LLM] [E]", syslog and journalctl's "Feb 22 06:35:27 host vllm[2827]: ".
_PREFIX_RE: Final = re.compile(
    r"(?:\u2190|#033)?\[(?:\d{1,3};){0,4}\d{1,3}m ?"
    r"|(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d"
    r" \S{1,80} [\w.@/\-]{1,80}(?:\[\d{1,10}\])?: "
    r"|\[\d{4}-\d\d-\d\d[T ][\d:.,]{5,20}(?:Z|[+-]\d\d:?\d\d)?(?: [^\]\n]{0,60})?\]:? ?"
    r"|\d{4}-\d\d-\d\d[T ][\d:.,]{5,20}(?:Z|[+-]\d\d:?\d\d)? +(?:\| )?"
    r"|\((?P<tag>(?:[A-Za-z][\w\-]{0,40}(?: [\w=\-]{1,20}){0,3} )?pid=\d{1,10}(?:, ?ip=[\w.:]{1,45})?)\) ?"
    r"|(?:TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?::| +\d\d-\d\d [\d:.]{8,15})? +"
    r"(?:\[[\w./\-]{1,80}:\d{1,6}\]|[\w./\-]{1,80}:\d{1,6}\])? ?"
    r"|\[rank\d{1,6}\]: ?"
    r"|[IWEF]\d{4,8} [\d:.]{8,20} +(?:\d{1,10} )?[\w.\-]{1,80}:\d{1,6}\] "
    r"|\[atom [\d:]{8}\] "
    r"|\[(?:TRACE|DEBUG|INFO|INF|WARNING|WRN|WARN|ERROR|ERR|FATAL|CRITICAL)\] "
    r"|\[TRT-LLM\] \[[A-Z]\] |\[TensorRT-LLM\]\[[A-Z]{1,8}\] "
    r"|[a-z_][\w]{0,40}(?:::[\w]{1,40}){1,8}: "
    r"|[\w.\-]{1,60} +\| "
    r"|\d{1,5}: "
)
_MAX_PREFIXES: Final[int] = 8
# Anywhere in the line: a progress bar redrawn with \r leaves the header glued to its last redraw.
_TRACEBACK_RE: Final = re.compile(r"Traceback \(most recent call last\):?\s*$")
# faulthandler's stacks and c10's "Exception raised from ... (most recent call first):"
_STACK_RE: Final = re.compile(r"\(most recent call first\):?\s*$")
_CHAINED_RE: Final = re.compile(
    r"^(?:The above exception was the direct cause of the following exception"
    r"|During handling of the above exception, another exception occurred):?\s*$"
)
_FRAME_FILE_RE: Final = re.compile(r'^\s*File "(?P<path>[^"]{1,500})", line \d{1,9}')
_EXCEPTION_RE: Final = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]{0,120}?(?:Error|Exception|Exit|Interrupt|Warning|Fault))\b"
)
_MAX_FRAMES: Final[int] = 400
# A traceback whose process prints nothing more for this many lines of the log is left (a log cut
# inside it, a rank killed while it printed): otherwise every later line would count as its own.
_STALE_LINES: Final[int] = 2000
# What an uncaught exception's last line looks like: a (dotted) class name, then its message.
_UNCAUGHT_RE: Final = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:\([\w.]{1,80}\))?)(?::\s|:?\s*$)"
)
# ... and what it must look like to end a traceback whose header the log does not hold (an
# excerpt, or a line of another process cut it in two): an exception class's name, nothing looser.
_HEADLESS_UNCAUGHT_RE: Final = re.compile(
    r"^(?:[A-Za-z_]\w{0,60}\.){0,8}[A-Z]\w{0,80}(?:Error|Exception|Fault)(?::\s|\s*$)"
)
# How processes are stopped, not how they fail (vLLM's server raises `KeyboardInterrupt: terminated`
# on SIGTERM); and a watcher's word that a process it watched has ended (psutil's, in SGLang's CPU
# monitor thread when the server is stopped): that end is told elsewhere.
_STOPPED_RE: Final = re.compile(
    r"^(?:(?:KeyboardInterrupt(?:: \S[^\n]{0,200})?|GeneratorExit|(?:\w+\.)*CancelledError|SystemExit(?:: 0)?)\s*$"
    r"|psutil\.NoSuchProcess: process no longer exists\b)"
)
# Python's report of an exception raised where it cannot propagate (a `__del__`, a callback at
# exit): the interpreter printed it and went on; and of one that ended a thread that only reports
# usage statistics (vLLM's `Exception in thread Thread-1 (_report_usage_worker):` when `cpuinfo`
# cannot read its probe): the statistics are lost, the server serves on.
_IGNORED_RE: Final = re.compile(
    r"^(?:Exception ignored (?:in|on|while|when)\b"
    r"|Exception in thread [^\n()]{1,100}\(\w{0,40}(?:usage|telemetry)\w{0,40}\):)"
)
_IGNORED_KEY: Final[str] = "Exception i"  # (both reports begin so: one scan of a line)
TRACEBACK_OPENER: Final[str] = "recent call"
"""A line without it or :data:`FRAME_OPENER` (and outside a traceback) is matched as a line alone."""
FRAME_OPENER: Final[str] = 'File "'
"""A traceback's frame: a log excerpt may start inside a traceback, below its header."""


def strip_prefixes(line: str) -> tuple[str, int, str]:
    """``(message, start, process tag)``: the line without the prefixes log writers put
    before a message (see :data:`_PREFIX_RE`); ``start`` is where the message begins in the
    line without its escape sequences."""
    if "\x1b" in line:
        line = _ANSI_RE.sub("", line)
    pos = 0
    tag = ""
    for _ in range(_MAX_PREFIXES):
        m = _PREFIX_RE.match(line, pos)
        if m is None or m.end() == pos:
            break
        if m.group("tag"):
            tag = m.group("tag")
        pos = m.end()
    return line[pos:], pos, tag


@dataclass
class _Traceback:
    indent: int
    frames: list[str] = field(default_factory=list)
    waiting: bool = False  # after the exception line: a chain may go on
    chained: bool = False  # after "The above exception was the direct cause ..."
    cause: str | None = None  # the signature found on the previous exception of the chain
    stack: bool = False  # a stack dump (faulthandler, c10), not an exception traceback
    headless: bool = False  # opened by a frame (the header was not in the log)
    ignored: bool = False  # under Python's `Exception ignored in: ...`: no uncaught exception
    after_frame: bool = False  # the previous line was a frame: this one may be its source
    last: int = 0  # the stream's count of lines when this process last printed a line of it


class MatchStream:
    """Matches the lines of one log, fed in order, so that a Python traceback is one event.

    Inside a traceback (``Traceback (most recent call last):`` up to the exception line that
    ends it, behind whatever prefix the writer adds) the frames and source lines are context:
    they yield no finding, so a ``raise ValueError("...out of memory...")`` source line is not
    taken for the error. The exception line is classified; in a chain ("The above exception
    was the direct cause of ...") each exception is, and a finding records the signature of
    the exception that caused it (``caused_by``) and the exception type (``exception``). An
    exception line that no signature knows is matched against the signatures recognised by
    their frames (an uncaught exception in srtctl's orchestrator). Tracebacks are followed per
    process tag, so interleaved lines of other processes do not end one.
    """

    def __init__(self, matcher: Matcher) -> None:
        self._matcher = matcher
        self._open: dict[str, _Traceback] = {}
        self._lines = 0
        self._ignored: dict[str, int] = {}  # process tag -> the line that said `Exception ignored in`

    @property
    def inside(self) -> bool:
        """Whether a traceback (or the chain it may go on with) is open: every line counts."""
        return bool(self._open)  # (left when stale as each line is matched)

    def _leave_stale(self) -> None:
        """Leave the tracebacks whose process has printed nothing for :data:`_STALE_LINES` lines."""
        oldest = self._lines - _STALE_LINES
        if any(tb.last < oldest for tb in self._open.values()):
            self._open = {tag: tb for tag, tb in self._open.items() if tb.last >= oldest}

    def match(self, line: str) -> Finding | None:
        """The finding of this line (None for a traceback's frames)."""
        self._lines += 1
        if _IGNORED_KEY in line:
            ignored_body, _, ignored_tag = strip_prefixes(line)
            if _IGNORED_RE.match(ignored_body.strip()) is not None:
                self._ignored[ignored_tag] = self._lines
        if self._open:
            self._leave_stale()
        if not self._open and TRACEBACK_OPENER not in line and FRAME_OPENER not in line:
            return self._matcher.match_line(line)
        body, start, tag = strip_prefixes(line)
        stripped = body.strip()
        indent = len(body) - len(body.lstrip())
        tb = self._open.get(tag)
        if tb is not None:
            tb.last = self._lines
        cause = None
        ignored = False
        if tb is not None:
            if tb.waiting:
                if not stripped:
                    return None
                if not tb.chained and _CHAINED_RE.match(stripped) is not None:
                    tb.chained = True
                    return None
                if tb.chained:
                    cause = tb.cause
                    ignored = tb.ignored
                del self._open[tag]
            elif (
                not stripped
                or indent > tb.indent
                or stripped.startswith((FRAME_OPENER, "frame #"))
                # a pasted traceback that lost its indentation: a frame's source line
                or (tb.after_frame and _UNCAUGHT_RE.match(stripped) is None)
            ):
                # (only where frames are not indented below the header: source lines are, elsewhere)
                tb.after_frame = stripped.startswith(FRAME_OPENER) and indent <= tb.indent
                if len(tb.frames) < _MAX_FRAMES:
                    frame = _FRAME_FILE_RE.match(body)
                    if frame is not None:
                        tb.frames.append(frame.group("path"))
                    elif stripped.startswith("frame #"):
                        tb.frames.append(stripped)
                return None
            elif tb.stack:
                del self._open[tag]
            else:
                return self._exception(line, body, start, tag, tb)
        finding = self._matcher.match_line(line)
        if "\r" in stripped:
            # After redraws (a progress bar) the header is in the last one, at the bar's indent.
            stripped = stripped[stripped.rfind("\r") + 1 :].strip()
            indent = 0
        if _TRACEBACK_RE.search(stripped) is not None:
            # (the header follows `Exception ignored in: <object>` at once, but for another
            # process's interleaved line)
            said = self._ignored.pop(tag, None)
            ignored = ignored or (said is not None and self._lines - said <= 3)
            self._open[tag] = _Traceback(indent=indent, cause=cause, ignored=ignored, last=self._lines)
        elif _STACK_RE.search(stripped) is not None:
            self._open[tag] = _Traceback(indent=indent, stack=True, last=self._lines)
        elif finding is None and (frame := _FRAME_FILE_RE.match(body)) is not None and ", in " in stripped:
            # A traceback whose header is not in the log (an excerpt, a rank's interleaved lines).
            self._open[tag] = _Traceback(
                indent=indent, frames=[frame.group("path")], headless=True, after_frame=True, last=self._lines
            )
            return None
        return finding

    def _exception(self, line: str, body: str, start: int, tag: str, tb: _Traceback) -> Finding | None:
        """The line that ends a traceback: the exception, classified with its context."""
        finding = self._matcher.match_line(line)
        if finding is None or finding.family:
            # Frames that name the code it came from say more than a family word.
            for sig in self._matcher.frame_signatures:
                assert sig.frames is not None
                if any(sig.frames.search(frame) for frame in tb.frames):
                    captures = self._matcher.context_of(line[:start])
                    finding = self._matcher.framed_finding(sig, line, start + len(body) - len(body.lstrip()), captures)
                    break
        if tb.ignored and finding is not None and finding.family:
            finding = None  # only a cause a regex knows counts in what Python ignored
        uncaught = self._matcher.uncaught_signature
        # (without the header, what follows the frames may be any line: only an exception's counts)
        if (
            finding is None
            and uncaught is not None
            and tb.cause is None
            and (not tb.headless or _HEADLESS_UNCAUGHT_RE.match(body.strip()) is not None)
            and not tb.ignored
            and not self._matcher.quiet(line)  # (a request the server refused as invalid)
        ):
            # An exception nothing knows, with no known cause earlier in its chain.
            text = body.strip()
            exception = _UNCAUGHT_RE.match(text)
            # (an exception that only carries another, Ray's `RayTaskError(ValueError): ray::f() ...`, is
            # followed by the traceback of the one it carries: that one ends it)
            if exception is not None and _STOPPED_RE.match(text) is None and "(" not in exception.group("type"):
                captures = {"exception": exception.group("type"), **self._matcher.context_of(line[:start])}
                finding = self._matcher.framed_finding(uncaught, line, start + len(body) - len(body.lstrip()), captures)
        if finding is not None:
            exception = _EXCEPTION_RE.match(body.lstrip())
            extra = {}
            if exception is not None:
                extra["exception"] = exception.group("type")
            if tb.cause is not None and tb.cause != finding.signature_id:
                extra["caused_by"] = tb.cause
            if extra:
                finding = replace(finding, captures={**extra, **finding.captures})
        # The exception stays open as a possible link of a chain until something else follows.
        self._open[tag] = _Traceback(
            indent=tb.indent,
            waiting=True,
            cause=finding.signature_id if finding is not None else tb.cause,
            ignored=tb.ignored,
            last=self._lines,
        )
        return finding


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
    return install(Matcher(load_catalog(*paths)))


def install(matcher: Matcher) -> Matcher:
    """Make ``matcher`` the default (the catalog with the operator's signatures merged in)."""
    global _default
    with _default_lock:
        _default = matcher
    return matcher
