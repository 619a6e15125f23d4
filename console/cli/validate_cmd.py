"""`srt-console report SWEEP|ARM|ATTEMPT` and `srt-console compare A B`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from console.cli.context import CliError, open_context
from console.compare import DEFAULT_THRESHOLD_PCT, Side, compare, dir_side
from console.compare import render_markdown as compare_markdown
from console.compare import render_text as compare_text
from console.report import ReportError, gather_report, render_markdown, report_json
from console.sides import SideError, store_side


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("report", help="a pull-request report of a sweep (s2), arm (a3) or attempt (a3.1)")
    p.add_argument("target", metavar="SWEEP|ARM|ATTEMPT", help="a sweep (s2), arm (a3) or attempt (a3.1)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="GitHub Markdown (the default)")
    fmt.add_argument("--json", action="store_true", help="one JSON document")
    p.add_argument("--output", "-o", metavar="FILE", help="write it to FILE instead of the terminal")

    p = sub.add_parser(
        "compare", help="compare B's points with a baseline A; exit 1 on a regression or a lost point"
    )  # fmt: skip
    p.add_argument("a", metavar="A", help="the baseline: an attempt, arm, sweep, or a results directory")
    p.add_argument("b", metavar="B", help="the candidate: an attempt, arm, sweep, or a results directory")
    p.add_argument(
        "--threshold", type=float, default=DEFAULT_THRESHOLD_PCT, metavar="PCT",
        help=f"a change for the worse beyond PCT percent is a regression (default {DEFAULT_THRESHOLD_PCT:g})",
    )  # fmt: skip
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="one JSON document")
    fmt.add_argument("--markdown", action="store_true", help="GitHub Markdown")


def _fail(message: str, code: int = 1) -> int:
    print(f"srt-console: {message}", file=sys.stderr)
    return code


def _emit(text: str, output: str | None) -> int:
    if output is None:
        sys.stdout.write(text)
        return 0
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        return _fail(f"{output}: cannot write: {exc.strerror or exc}")
    print(f"wrote {output}", file=sys.stderr)
    return 0


# --- report -------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    try:
        session = open_context(args.config)
    except CliError as exc:
        return _fail(str(exc))

    async def run() -> str:
        try:
            report = await gather_report(session, args.target)
        finally:
            await session.close()
        if args.json:
            return json.dumps(report_json(report), indent=2) + "\n"
        return render_markdown(report)

    try:
        text = asyncio.run(run())
    except ReportError as exc:
        return _fail(str(exc))
    return _emit(text, args.output)


# --- compare ------------------------------------------------------------------------------


async def _sides(args: argparse.Namespace) -> tuple[Side, Side]:
    paths = [Path(x) for x in (args.a, args.b)]
    session = None if all(p.is_dir() for p in paths) else open_context(args.config)
    try:
        sides = []
        for raw, path in zip((args.a, args.b), paths, strict=True):
            if path.is_dir():
                sides.append(dir_side(path))
            else:
                assert session is not None
                try:
                    sides.append(await store_side(session, raw))
                except SideError as exc:
                    raise CliError(str(exc)) from None
        return sides[0], sides[1]
    finally:
        if session is not None:
            await session.close()


def cmd_compare(args: argparse.Namespace) -> int:
    if args.threshold < 0:
        return _fail("--threshold is a percentage of 0 or more", 2)
    try:
        a, b = asyncio.run(_sides(args))
    except CliError as exc:
        return _fail(str(exc), 2)
    result = compare(a, b, args.threshold)
    if not result.matched and not result.lost:
        print(f"srt-console: no point of {a.label} matches one of {b.label}", file=sys.stderr)
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.markdown:
        sys.stdout.write(compare_markdown(result))
    else:
        sys.stdout.write(compare_text(result))
    return 0 if result.ok else 1


__all__ = ["add_parsers", "cmd_compare", "cmd_report"]
