"""`srt-console signatures test FILE... [--id ID]`, `signatures check`: try the catalog on logs.

``test`` reads each log as triage does (a traceback is one event, a long line is matched at
both ends) and shows, per signature, how many lines it names and the first of them; with
``--id`` only that signature, including lines where a narrower signature wins (and which).
The catalog is the bundled one with the operator's signatures merged in (the config's
``signatures:``, ``signatures.yaml`` beside it), or ``--catalog FILE`` on top of the bundled
one: write an entry, try it on a real log, in minutes. Problems with an entry are printed and
the entry is left out; ``check`` prints them and exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from console.config import load_config
from console.recipes.yamlio import YamlError, decode, load
from console.sanitize import clean_line
from console.signatures import Catalog, Finding, Matcher, bundled_catalog, merge_catalog, parse_catalog_document
from console.triage import looks_binary, read_lines
from console.user_signatures import user_catalog

__all__ = ["cmd_signatures", "test_file"]

_SHOWN: Final[int] = 5  # lines shown per signature
_TEXT_CHARS: Final[int] = 200


@dataclass
class Hits:
    """What one signature named in one file."""

    count: int = 0
    # line, text, shown as (another signature), and when no regex found it: the family word
    # that did, or the words by which it resembles the signature's known lines
    lines: list[tuple[int, str, str | None, str | None, str | None]] = field(default_factory=list)


def cmd_signatures(args: argparse.Namespace) -> int:
    catalog, problems, origin = _catalog(args)
    for problem in problems:
        print(f"srt-console: {problem}", file=sys.stderr)
    if args.verb == "check":
        print(f"{origin}: {len(catalog.signatures)} signature(s), {len(problems)} problem(s)")
        return 1 if problems else 0
    matcher = Matcher(catalog)
    ids = {sig.id for sig in matcher.signatures}
    if args.only and args.only not in ids:
        print(f"srt-console: signatures: no signature {args.only!r} in {origin}", file=sys.stderr)
        return 1
    report: dict[str, dict[str, Hits]] = {}
    for name in args.files:
        path = Path(name)
        try:
            with path.open("rb") as fh:
                if looks_binary(fh.read(8192)):
                    print(f"srt-console: signatures: {path}: binary file, not a log", file=sys.stderr)
                    return 2
            report[name] = test_file(matcher, path, args.only, keep=None if args.all else _SHOWN)
        except OSError as exc:
            print(f"srt-console: signatures: {path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
            return 2
    if args.json:
        doc = {
            "catalog": origin,
            "problems": problems,
            "files": {
                name: {sig: {"count": h.count, "lines": [{"line_no": n, "text": t, "shown_as": w, "family": f,
                                                          "resembles": r} for n, t, w, f, r in h.lines]}
                       for sig, h in hits.items()}
                for name, hits in report.items()
            },
        }  # fmt: skip
        json.dump(doc, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    print(f"catalog: {origin} ({len(catalog.signatures)} signatures)")
    for name, hits in report.items():
        if not hits:
            print(f"{name}: {'nothing' if not args.only else args.only + ' finds nothing'}")
            continue
        print(f"{name}:")
        for sig_id, found in hits.items():
            sig = matcher.signature(sig_id)
            print(f"  {sig_id} ({sig.category}, {sig.severity}{', unrecognised' if sig.generic else ''}) "
                  f"x{found.count}")  # fmt: skip
            for line_no, text, shown_as, family, resembles in found.lines:
                note = f"  [shown as {shown_as}]" if shown_as else ""
                if family:
                    note += f"  [by its family word {family!r}: no regex of it matched]"
                elif resembles is not None:
                    note += f"  [by its words ({resembles}), like its known lines: no regex of it matched]"
                print(f"    {line_no}: {text}{note}")
            if found.count > len(found.lines):
                print(f"    ... {found.count - len(found.lines)} more")
    return 0


def _catalog(args: argparse.Namespace) -> tuple[Catalog, list[str], str]:
    """The catalog to try, its problems, and what it is made of (for the report)."""
    if args.catalog:
        path = Path(args.catalog)
        try:
            data, marks = load(decode(path.read_bytes()))
        except OSError as exc:
            return bundled_catalog(), [f"{path}: cannot read: {exc.strerror or exc}"], "bundled"
        except YamlError as exc:
            return bundled_catalog(), [f"{path}:{exc.line or 1}: {exc.message}"], "bundled"
        part, problems = parse_catalog_document(data, str(path), marks.line, base=path.parent)
        return merge_catalog(bundled_catalog(), part, path), problems, f"bundled + {path}"
    config = load_config(getattr(args, "config", None))
    catalog, problems = user_catalog(config)
    theirs = [str(s) for s in catalog.sources[1:]] if len(catalog.sources) > 1 else []
    return catalog, [*config.problems, *problems], " + ".join(["bundled", *theirs])


def test_file(matcher: Matcher, path: Path, only: str | None = None, *, keep: int | None = _SHOWN) -> dict[str, Hits]:
    """Per signature (in order of first appearance), the lines of ``path`` it names: as triage
    names them (one finding a line, a traceback one event), and with ``only`` also the lines
    where that signature matches but another, narrower one is the finding."""
    hits: dict[str, Hits] = {}
    stream = matcher.stream()

    def add(sig_id: str, line_no: int, text: str, shown_as: str | None, finding: Finding | None = None) -> None:
        found = hits.setdefault(sig_id, Hits())
        found.count += 1
        if keep is None or len(found.lines) < keep:
            family = resembles = None
            if finding is not None and finding.family:
                family = finding.captures.get("family")
                resembles = None if family is not None else finding.captures.get("resembles", "")
            found.lines.append((line_no, clean_line(text, _TEXT_CHARS), shown_as, family, resembles))

    with path.open("rb") as fh:
        for line_no, line in enumerate(read_lines(fh), start=1):
            finding = stream.match(line)
            winner = finding.signature_id if finding is not None else None
            if only is None:
                if winner is not None:
                    add(winner, line_no, line, None, finding)
            elif winner == only:
                add(only, line_no, line, None, finding)
            elif any(f.signature_id == only for f in matcher.match_all(line)):
                add(only, line_no, line, winner or "nothing: inside a traceback")
    return hits
