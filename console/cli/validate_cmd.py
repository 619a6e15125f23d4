"""`srt-console report SWEEP|ARM|ATTEMPT` and `srt-console compare A B`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from console.cli.context import CliError, open_context
from console.compare import Side, compare, dir_side
from console.compare import render_markdown as compare_markdown
from console.compare import render_text as compare_text
from console.report import ReportError, gather_report, render_markdown, report_json
from console.sides import SideError, store_side


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


__all__ = ["cmd_compare", "cmd_report"]
