"""`srt-console recipes` and `srt-console check`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from console.clusters import load_profiles
from console.config import load_config
from console.describe import arm_facts, grid_label, nodes_label, seq_label, shown, topology_label
from console.model import Recipe
from console.paths import bundled_recipes_dir, local_recipe_tree
from console.recipes import load_targets
from console.recipes.flavours import Flavour, describe, parse_flavour
from console.store import default_data_dir


class FlavourError(Exception):
    pass


def chosen_flavour(args: argparse.Namespace) -> Flavour | None:
    """The srtctl flavour asked for on the command line; None when it is not known."""
    if getattr(args, "flavour", None):
        return parse_flavour(args.flavour)
    name = getattr(args, "cluster", None)
    if not name:
        return None
    profiles, _problems = load_profiles(load_config(args.config), default_data_dir())
    if name not in profiles:
        raise FlavourError(f"unknown cluster {name!r}; configured: {', '.join(sorted(profiles))}")
    return profiles[name].flavour()


def default_recipe_roots(config_path: str | None, cwd: Path | None = None) -> tuple[list[str], list[str]]:
    """The recipes the operator works on, and any config problems: run from an srt-console
    checkout, its `recipes/` (not the installed copy); from an srt-slurm tree, its `recipes/`
    and then the bundled ones; elsewhere the bundled ones. The configured recipe dirs follow."""
    config = load_config(config_path)
    local = local_recipe_tree(cwd or Path.cwd())
    roots: list[str] = []
    if local is not None:
        roots.append(str(local[0]))
    if local is None or local[1] != "srt-console":
        bundled = bundled_recipes_dir()
        if str(bundled.resolve()) not in {str(Path(r).resolve()) for r in roots}:
            roots.append(str(bundled))
    roots += [str(d) for d in config.recipe_dirs if d.is_dir() and str(d.resolve()) not in roots]
    notes = list(config.problems)
    notes += [f"{config.path}: recipe_dirs: {d} is not a directory" for d in config.recipe_dirs if not d.is_dir()]
    return roots, notes


def cmd_recipes(args: argparse.Namespace) -> int:
    notes: list[str] = []
    paths = args.paths
    if not paths:
        paths, notes = default_recipe_roots(args.config)
    try:
        flavour = chosen_flavour(args)
    except FlavourError as exc:
        print(f"srt-console: {exc}", file=sys.stderr)
        return 2
    recipes = load_targets(paths, flavour=flavour)
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
        console.print(Text.assemble((shown(_shown(recipe.path)), "bold"), "  ", status))
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
                engine, bench = arm_facts(arm).split(" · ", 1)
                table.add_row(
                    Text("  " + shown(arm.name)), topo.mode, topology_label(topo), nodes_label(topo),
                    str(topo.total_gpus), engine, bench, seq_label(arm), grid_label(arm.concurrencies),
                )  # fmt: skip
            console.print(table)
        for problem in recipe.problems:
            console.print(Text("  " + str(problem), style="yellow" if problem.severity == "warning" else "red"))


def _shown(path: str) -> str:
    try:
        # abspath, not resolve(): a symlink loop must not stop the listing.
        return str(Path(os.path.abspath(path)).relative_to(Path.cwd()))
    except ValueError:
        return path


def cmd_check(args: argparse.Namespace) -> int:
    try:
        flavour = chosen_flavour(args)
    except FlavourError as exc:
        print(f"srt-console: {exc}", file=sys.stderr)
        return 2
    recipes = load_targets(args.paths, flavour=flavour)
    failed = [r for r in recipes if not r.ok]
    if args.json:
        document = {
            "recipes": [r.summary() for r in recipes],
            "ok": not failed,
            "flavour": flavour.name if flavour else None,
            "checked_against": describe(flavour),
        }
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for recipe in recipes:
            for problem in recipe.problems:
                print(problem)
            if recipe.ok:
                print(f"{shown(recipe.path)}: ok ({len(recipe.arms)} arm{'s' if len(recipe.arms) != 1 else ''})")
        print(f"{len(recipes) - len(failed)} of {len(recipes)} recipe file(s) valid, {describe(flavour)}",
              file=sys.stderr)  # fmt: skip
    return 1 if failed or not recipes else 0
