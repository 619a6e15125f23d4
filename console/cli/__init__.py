"""`srt-console`'s commands: headless ones for scripts and CI, and the UI when one is handed in.

The program is :func:`screens.main.main`, which passes the terminal UI in as ``ui``: the core
never imports the UI. ``python -m console`` runs the headless commands only.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from console.cli.exits import EXIT_USAGE, JSON_ERRORS, fail
from console.cli.parser import build_parser

# Each command's module, imported only when it runs: `--help` and one command never pay for
# the others (SSH, the recipe schemas, the failure catalog...).
COMMANDS: dict[str, tuple[str, str]] = {
    "recipes": ("recipes_cmd", "cmd_recipes"),
    "check": ("recipes_cmd", "cmd_check"),
    "clusters": ("jobs_cmd", "cmd_clusters"),
    "launch": ("jobs_cmd", "cmd_launch"),
    "status": ("jobs_cmd", "cmd_status"),
    "cancel": ("jobs_cmd", "cmd_cancel"),
    "scan": ("scan_cmd", "cmd_scan"),
    "signatures": ("signatures_cmd", "cmd_signatures"),
    "watch": ("watch_cmd", "cmd_watch"),
    "results": ("results_cmd", "cmd_results"),
    "rerun": ("results_cmd", "cmd_rerun"),
    "report": ("validate_cmd", "cmd_report"),
    "compare": ("validate_cmd", "cmd_compare"),
}


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
        from console.cli.recipes_cmd import default_recipe_roots

        roots, notes = default_recipe_roots(args.config)
    return ui([Path(r) for r in roots], notes, args.config)


def main(argv: Sequence[str] | None = None, ui: UiRunner | None = None) -> int:
    """Run one command; with none (or ``tui``) open ``ui``."""
    args = build_parser().parse_args(argv)  # `--help` and usage errors end here
    JSON_ERRORS.set(bool(getattr(args, "json", False)))
    if args.config and not Path(args.config).expanduser().is_file():
        return fail(f"--config {args.config}: no such config file", code=EXIT_USAGE)
    try:
        if args.command in COMMANDS:
            module, name = COMMANDS[args.command]
            handler: Callable[[argparse.Namespace], int] = getattr(
                importlib.import_module(f"console.cli.{module}"), name
            )
            return handler(args)
        return _tui(args, ui)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `srt-console status | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0
    except Exception as exc:
        # A full disk, a locked or read-only store...: the cause, never a traceback. (Only a
        # command that opened the store can meet its errors: `scan` does not import it.)
        store = sys.modules.get("console.store")
        if store is not None and isinstance(exc, store.StoreError):
            return fail(str(exc))
        # A catalog that cannot be read (an install's own, damaged): its file and line.
        signatures = sys.modules.get("console.signatures")
        if signatures is not None and isinstance(exc, signatures.CatalogError):
            return fail(str(exc))
        raise


if __name__ == "__main__":
    sys.exit(main())
