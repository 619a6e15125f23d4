"""The command line's grammar: every command and option of `srt-console`, and nothing else.

It imports only the standard library and the console's version, so that `--help`, a mistyped
option and the choice of a command cost no more than argparse; each command's module is
imported once it is chosen (:mod:`console.cli`).
"""

from __future__ import annotations

import argparse
from typing import Any

from console import __version__
from console.cli.exits import EXIT_CODES_HELP

# The choices that the commands' modules also define; tests hold them equal
# (importing those modules here would import what every command needs, for all of them).
FLAVOUR_CHOICES = ("upstream", "fork")  # console.recipes.flavours.FLAVOUR_NAMES
SCAN_STATES = (  # console.scheduler.JobState
    "PENDING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "UNKNOWN",
)
DEFAULT_THRESHOLD_PCT = 5.0  # console.compare.DEFAULT_THRESHOLD_PCT


def build_parser() -> argparse.ArgumentParser:
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
    _flavour_arguments(p)

    p = sub.add_parser("check", help="validate recipes; exit 1 when any has an error")
    p.add_argument("paths", nargs="+", metavar="PATH", help="recipe files (file.yaml[:selector]) or folders")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    _flavour_arguments(p)

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

    _scan_parser(sub)
    _signatures_parser(sub)
    _results_parsers(sub)
    _validate_parsers(sub)

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


def _flavour_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--flavour",
        choices=FLAVOUR_CHOICES,
        help="check for this srtctl: upstream (NVIDIA/srt-slurm) or fork (SemiAnalysisAI/srt-slurm)",
    )
    group.add_argument("--cluster", metavar="NAME", help="check for the srtctl of this cluster profile "
                       "(its srtctl_flavour)")  # fmt: skip


def _scan_parser(sub: Any) -> None:
    """The `scan` subcommand (``sub`` is the parser's subparsers action)."""
    p = sub.add_parser("scan", help="offline triage of log files or a job output dir; exit 1 when failed or doomed")
    p.add_argument("paths", nargs="+", metavar="PATH", help="log files, logs/ dirs or job output dirs")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument(
        "--state",
        type=str.upper,
        choices=SCAN_STATES,
        metavar="STATE",
        help="the job's scheduler state (RUNNING makes a doomed verdict possible)",
    )


def _signatures_parser(sub: Any) -> None:
    """The `signatures` subcommand (``sub`` is the parser's subparsers action)."""
    p = sub.add_parser("signatures", help="try the failure-signature catalog (yours merged in) on logs")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)
    t = verbs.add_parser("test", help="what each signature finds in log files")
    t.add_argument("files", nargs="+", metavar="FILE", help="log files")
    t.add_argument("--id", dest="only", metavar="ID", help="only this signature (also where another one wins)")
    t.add_argument("--catalog", metavar="FILE", help="a catalog file to try, merged on the bundled one")
    t.add_argument("--all", action="store_true", help="every line found, not only the first few")
    t.add_argument("--json", action="store_true", help="print one JSON document")
    c = verbs.add_parser("check", help="validate your signatures; exit 1 on a problem")
    c.add_argument("--catalog", metavar="FILE", help="a catalog file to check instead of the configured ones")


def _results_parsers(sub: Any) -> None:
    """The `results` and `rerun` subcommands (``sub`` is the parser's subparsers action)."""
    p = sub.add_parser("results", help="points of an attempt (a3.1), arm (a3), sweep (s2) or job output dir")
    p.add_argument(
        "target", metavar="ATTEMPT|ARM|SWEEP|DIR",
        help="an attempt (a3.1), arm (a3), sweep (s2), job:<id>, or a job output dir on this machine; "
        "exit 1 when a point is missing or invalid",
    )  # fmt: skip
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON document")
    fmt.add_argument("--csv", action="store_true", help="print CSV, one line per point")

    p = sub.add_parser("rerun", help="rerun a failed arm (a3), or every failed arm of a sweep (s2)")
    p.add_argument(
        "target", metavar="ARM|SWEEP",
        help="an arm (a3), or a sweep (s2): every arm of it whose last attempt failed",
    )  # fmt: skip
    p.add_argument("--missing", action="store_true", help="only the points without a valid result")
    p.add_argument(
        "--include-deterministic", action="store_true",
        help="also rerun arms whose failure is deterministic (skipped by default: they would fail the same way)",
    )  # fmt: skip
    p.add_argument(
        "--from",
        dest="rerun_config",
        metavar="FILE",
        help="start from this resolved config (e.g. with a fix pinned) instead of the last attempt's",
    )
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--wait", action="store_true", help="wait until every new attempt has ended")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def _validate_parsers(sub: Any) -> None:
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
