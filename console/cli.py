"""`srt-console`: the TUI with no arguments, and headless commands for scripts and CI."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from console import __version__
from console.config import load_config
from console.describe import grid_label, nodes_label, seq_label, topology_label
from console.model import Recipe
from console.paths import bundled_recipes_dir
from console.recipes import load_targets


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="srt-console",
        description="Operator console for srtctl LLM-serving benchmarks on Slurm. "
        "With no command it opens the terminal UI.",
    )
    parser.add_argument("--version", action="version", version=f"srt-console {__version__}")
    parser.add_argument(
        "--config", metavar="FILE", help="config file (default: $XDG_CONFIG_HOME/srt-console/config.yaml)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("recipes", help="list recipes with their arms, topology and grid")
    p.add_argument("paths", nargs="*", metavar="PATH", help="recipe files (file.yaml[:selector]) or folders")
    p.add_argument("--json", action="store_true", help="print one JSON document")

    p = sub.add_parser("check", help="validate recipes; exit 1 when any has an error")
    p.add_argument("paths", nargs="+", metavar="PATH", help="recipe files (file.yaml[:selector]) or folders")
    p.add_argument("--json", action="store_true", help="print one JSON document")

    p = sub.add_parser("tui", help="open the terminal UI (the default)")
    p.add_argument("paths", nargs="*", metavar="PATH", help="recipe folders to browse")
    return parser


def default_recipe_roots(config_path: str | None) -> tuple[list[str], list[str]]:
    """The bundled recipes plus the configured recipe dirs, and any config problems."""
    config = load_config(config_path)
    roots = [str(bundled_recipes_dir())]
    roots += [str(d) for d in config.recipe_dirs if d.is_dir()]
    notes = list(config.problems)
    notes += [f"{config.path}: recipe_dirs: {d} is not a directory" for d in config.recipe_dirs if not d.is_dir()]
    return roots, notes


def cmd_recipes(args: argparse.Namespace) -> int:
    notes: list[str] = []
    paths = args.paths
    if not paths:
        paths, notes = default_recipe_roots(args.config)
    recipes = load_targets(paths)
    for note in notes:
        print(f"srt-console: {note}", file=sys.stderr)
    if args.json:
        json.dump({"recipes": [r.summary() for r in recipes]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_recipes(recipes)
    return 0


def _print_recipes(recipes: list[Recipe]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # Piped output keeps whole rows; a terminal wraps to its width.
    console = Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200, highlight=False)
    for recipe in recipes:
        status = Text("ok", style="green") if recipe.ok else Text(f"{len(recipe.errors)} error(s)", style="red")
        console.print(Text.assemble((_shown(recipe.path), "bold"), "  ", status))
        if recipe.arms:
            table = Table(box=None, header_style="dim", pad_edge=False, padding=(0, 2, 0, 0))
            for column in (
                "arm",
                "mode",
                "topology",
                "nodes",
                "GPUs",
                "engine/frontend",
                "bench",
                "ISL/OSL",
                "points",
            ):
                table.add_column(column)
            for arm in recipe.arms:
                topo = arm.topology
                table.add_row(
                    Text("  " + arm.name), topo.mode, topology_label(topo), nodes_label(topo), str(topo.total_gpus),
                    f"{arm.backend}/{arm.frontend}", arm.benchmark, seq_label(arm), grid_label(arm.concurrencies),
                )  # fmt: skip
            console.print(table)
        for problem in recipe.problems:
            console.print(Text("  " + str(problem), style="yellow" if problem.severity == "warning" else "red"))


def _shown(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path


def cmd_check(args: argparse.Namespace) -> int:
    recipes = load_targets(args.paths)
    failed = [r for r in recipes if not r.ok]
    if args.json:
        json.dump({"recipes": [r.summary() for r in recipes], "ok": not failed}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for recipe in recipes:
            for problem in recipe.problems:
                print(problem)
            if recipe.ok:
                print(f"{recipe.path}: ok ({len(recipe.arms)} arm{'s' if len(recipe.arms) != 1 else ''})")
        print(f"{len(recipes) - len(failed)} of {len(recipes)} recipe file(s) valid", file=sys.stderr)
    return 1 if failed or not recipes else 0


def cmd_tui(args: argparse.Namespace) -> int:
    from screens.app import run  # Textual is imported only when the UI is asked for

    roots, notes = (list(args.paths), []) if getattr(args, "paths", None) else default_recipe_roots(args.config)
    return run(roots=[Path(r) for r in roots], notes=notes)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handlers = {"recipes": cmd_recipes, "check": cmd_check, "tui": cmd_tui, None: cmd_tui}
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `srt-console recipes | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
