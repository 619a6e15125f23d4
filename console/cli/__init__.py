"""`srt-console`'s commands: headless ones for scripts and CI, and the UI when one is handed in.

The program is :func:`screens.main.main`, which passes the terminal UI in as ``ui``: the core
never imports the UI. ``python -m console`` runs the headless commands only.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from console import __version__
from console.cli import jobs_cmd, recipes_cmd, results_cmd, scan_cmd, validate_cmd, watch_cmd
from console.cli.context import EXIT_CODES_HELP, EXIT_USAGE, JSON_ERRORS, fail
from console.store import StoreError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="srt-console",
        description="Operator console for srtctl LLM-serving benchmarks on Slurm. "
        "With no command it opens the terminal UI.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"srt-console {__version__}")
    parser.add_argument(
        "--config", metavar="FILE", help="config file (default: $XDG_CONFIG_HOME/srt-console/config.yaml)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("recipes", help="list recipes with their arms, topology and grid")
    p.add_argument("paths", nargs="*", metavar="PATH", help="recipe files (file.yaml[:selector]) or folders")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    recipes_cmd.add_flavour_arguments(p)

    p = sub.add_parser("check", help="validate recipes; exit 1 when any has an error")
    p.add_argument("paths", nargs="+", metavar="PATH", help="recipe files (file.yaml[:selector]) or folders")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    recipes_cmd.add_flavour_arguments(p)

    p = sub.add_parser("clusters", help="list cluster profiles and check that each can be used")
    p.add_argument("--json", action="store_true", help="print one JSON document")

    p = sub.add_parser("launch", help="launch recipes (a folder or several files form one sweep)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="recipe files (file.yaml[:selector]) or folders")
    p.add_argument("--cluster", help="cluster profile (default: default_cluster from the config, else local)")
    p.add_argument("--name", help="a name for the sweep")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--wait", action="store_true", help="wait until every attempt has ended")
    p.add_argument("--dry-run", action="store_true", help="show what would run (srtctl dry-run); submit nothing")
    p.add_argument(
        "--force", action="store_true",
        help="submit even when the pin checks fail (srt-slurm commit mismatch, unsupported backend)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print one JSON document")

    p = sub.add_parser("status", help="sweeps, arms and attempts with their Slurm states")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--all", action="store_true", help="include attempts that ended long ago")

    p = sub.add_parser(
        "cancel", help="cancel the live attempts of an attempt (a3.1), arm (a3), sweep (s2) or Slurm job (job:123)"
    )
    p.add_argument(
        "target", metavar="ATTEMPT|ARM|SWEEP|job:ID",
        help="a3.1, a3, s2, or job:<Slurm job id> (a job the console did not launch is adopted and followed)",
    )  # fmt: skip
    p.add_argument("--cluster", help="the cluster of a job:<id> the console does not know (default: default_cluster)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="print one JSON document")

    scan_cmd.add_parser(sub)
    results_cmd.add_parsers(sub)
    validate_cmd.add_parsers(sub)

    p = sub.add_parser(
        "watch",
        help="follow attempts live: stages, findings, diagnosis, points; exit 1 when a verdict is failed or doomed",
    )
    p.add_argument("target", metavar="ATTEMPT|SWEEP", help="an attempt (a3.1), arm (a3), sweep (s2) or job:<id>")
    p.add_argument("--json", action="store_true", help="one JSON object per line")

    p = sub.add_parser("tui", help="open the terminal UI (the default)")
    p.add_argument("paths", nargs="*", metavar="PATH", help="recipe folders to browse")
    for command in sub.choices.values():
        command.epilog = EXIT_CODES_HELP
        command.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


UiRunner = Callable[[list[Path], list[str], "str | None"], int]
"""Opens the terminal UI on recipe roots, with notes to show, and a config path."""


def _tui(args: argparse.Namespace, ui: UiRunner | None) -> int:
    if ui is None:
        print("srt-console: the terminal UI is opened by `srt-console` (or `python -m screens`)", file=sys.stderr)
        return 2
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Without a terminal the UI would draw to nowhere and spin; scripts have the commands.
        print(
            "srt-console: the terminal UI needs a terminal (stdin and stdout); "
            "from a script use a command, e.g. `srt-console status` (see --help)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    notes: list[str] = []
    if getattr(args, "paths", None):
        roots = list(args.paths)
    else:
        roots, notes = recipes_cmd.default_recipe_roots(args.config)
    return ui([Path(r) for r in roots], notes, args.config)


def main(argv: Sequence[str] | None = None, ui: UiRunner | None = None) -> int:
    """Run one command; with none (or ``tui``) open ``ui``."""
    args = _parser().parse_args(argv)
    JSON_ERRORS.set(bool(getattr(args, "json", False)))
    if args.config and not Path(args.config).expanduser().is_file():
        return fail(f"--config {args.config}: no such config file", code=EXIT_USAGE)
    handlers: dict[str | None, Callable[[argparse.Namespace], int]] = {
        "recipes": recipes_cmd.cmd_recipes,
        "check": recipes_cmd.cmd_check,
        "clusters": jobs_cmd.cmd_clusters,
        "launch": jobs_cmd.cmd_launch,
        "status": jobs_cmd.cmd_status,
        "cancel": jobs_cmd.cmd_cancel,
        "scan": scan_cmd.cmd_scan,
        "watch": watch_cmd.cmd_watch,
        "results": results_cmd.cmd_results,
        "rerun": results_cmd.cmd_rerun,
        "report": validate_cmd.cmd_report,
        "compare": validate_cmd.cmd_compare,
        "tui": lambda a: _tui(a, ui),
        None: lambda a: _tui(a, ui),
    }
    try:
        return handlers[args.command](args)
    except StoreError as exc:
        # A full disk, a locked or read-only store...: the cause, never a traceback.
        return fail(str(exc))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `srt-console status | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
