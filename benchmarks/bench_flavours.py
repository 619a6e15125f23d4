"""How far `srt-console check` agrees with the real srtctl, over real recipe libraries.

Takes recipe folders (they are not in CI: no network there) and an installed srtctl:

    python benchmarks/bench_flavours.py --srtctl ~/srtctl-venv/bin/srtctl \\
        --upstream srt-slurm/recipes --inferencex InferenceX/benchmarks/multi_node/srt-slurm-recipes \\
        [--json OUT]

For the upstream library (NVIDIA/srt-slurm's recipes/): how many files the real srtctl accepts
(`srtctl dry-run`, see tests/srtctl_verdicts.py) and rejects, against `check --flavour
upstream`, both ways; for the files it accepts, whether both name the same stage at which the
job would stop, and give each job the same node count. For InferenceX's library (recipes run on
srtctl branches and forks): how many files `check` and `launch` block, and how many of those for
a key the console does not know, for an unknown flavour (no profile setting) and for each
flavour. The real srtctl's verdict on those files is printed beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.cli import main as console_main
from console.model import Recipe
from console.recipes import load_recipe, recipe_files
from console.recipes.flavours import FORK, UPSTREAM, Flavour
from tests.srtctl_verdicts import run_verdicts


def _stages(recipe: Recipe) -> list[str]:
    return sorted({p.kind.split(":", 1)[1] for p in recipe.warnings if p.kind.startswith("job-start:")})


def _real_stages(row: dict[str, Any]) -> list[str]:
    return sorted({m.split(":", 1)[0] for job in row["jobs"] for m in job["job_start"]})


def upstream_figures(srtctl: Path, roots: list[Path]) -> dict[str, Any]:
    files = [str(f) for root in roots for f in recipe_files(root)]
    start = time.perf_counter()
    real = run_verdicts(srtctl, files, timeout=3600)
    real_s = time.perf_counter() - start
    start = time.perf_counter()
    mine = {f: load_recipe(f, flavour=UPSTREAM) for f in files}
    check_s = time.perf_counter() - start
    both_accept = sum(1 for f in files if real[f]["accepted"] and mine[f].ok)
    both_reject = sum(1 for f in files if not real[f]["accepted"] and not mine[f].ok)
    only_srtctl = [f for f in files if real[f]["accepted"] and not mine[f].ok]
    only_console = [f for f in files if not real[f]["accepted"] and mine[f].ok]
    accepted = [f for f in files if real[f]["accepted"] and mine[f].ok]
    stage_mismatch = [f for f in accepted if _stages(mine[f]) != _real_stages(real[f])]
    jobs = sum(len(real[f]["jobs"]) for f in accepted)
    node_mismatch = [
        f for f in accepted
        if sorted(a.topology.node_demand for a in mine[f].arms) != sorted(j["nodes"] for j in real[f]["jobs"])
    ]  # fmt: skip
    return {
        "files": len(files),
        "srtctl_accepts": sum(1 for f in files if real[f]["accepted"]),
        "srtctl_rejects": sum(1 for f in files if not real[f]["accepted"]),
        "check_accepts": sum(1 for f in files if mine[f].ok),
        "check_rejects": sum(1 for f in files if not mine[f].ok),
        "agree_accept": both_accept,
        "agree_reject": both_reject,
        "srtctl_accepts_check_rejects": len(only_srtctl),
        "srtctl_rejects_check_accepts": len(only_console),
        "files_srtctl_stops_at_job_start": sum(1 for f in accepted if _real_stages(real[f])),
        "job_start_stage_mismatches": len(stage_mismatch),
        "jobs": jobs,
        "files_with_node_count_mismatch": len(node_mismatch),
        "srtctl_s": round(real_s, 2),
        "check_s": round(check_s, 2),
        "disagreements": [*only_srtctl, *only_console, *stage_mismatch, *node_mismatch][:20],
    }


def _launch_blocked(paths: list[str], flavour: str | None) -> tuple[int, int]:
    """(files `launch` refuses, of them for an unknown key), launching each file on its own on a
    cluster profile of that flavour; nothing is submitted (no --yes, stdin is not a terminal)."""
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        setting = f"\n    srtctl_flavour: {flavour}" if flavour else ""
        config.write_text(
            "clusters:\n  target:\n    ssh: {host: 127.0.0.1, port: 9}\n"
            f"    srt_slurm: /nonexistent/srt-slurm{setting}\n"
        )
        env = {"SRT_CONSOLE_CONFIG": str(config), "SRT_CONSOLE_DATA": str(Path(tmp) / "data")}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        blocked = unknown = 0
        try:
            for path in paths:
                err = io.StringIO()
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                    console_main(["launch", path, "--cluster", "target"])
                if "the recipes have errors" in err.getvalue():
                    blocked += 1
                    unknown += "unknown key" in err.getvalue()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return blocked, unknown


def inferencex_figures(srtctl: Path, roots: list[Path]) -> dict[str, Any]:
    files = [str(f) for root in roots for f in recipe_files(root)]
    real = run_verdicts(srtctl, files, timeout=3600)
    figures: dict[str, Any] = {
        "files": len(files),
        "srtctl_upstream_rejects": sum(1 for f in files if not real[f]["accepted"]),
    }
    flavours: dict[str, Flavour | None] = {"unknown": None, "upstream": UPSTREAM, "fork": FORK}
    for name, flavour in flavours.items():
        recipes = [load_recipe(f, flavour=flavour) for f in files]
        blocked = [r for r in recipes if not r.ok]
        figures[f"check_{name}_blocked"] = len(blocked)
        figures[f"check_{name}_blocked_unknown_key"] = sum(
            1 for r in blocked if any(p.kind == "unknown" for p in r.errors)
        )
        launched, launched_unknown = _launch_blocked(files, None if name == "unknown" else name)
        figures[f"launch_{name}_blocked"] = launched
        figures[f"launch_{name}_blocked_unknown_key"] = launched_unknown
    upstream_blocked = {f for f in files if not load_recipe(f, flavour=UPSTREAM).ok}
    figures["check_upstream_agrees_with_srtctl"] = sum(
        1 for f in files if (f in upstream_blocked) == (not real[f]["accepted"])
    )
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--srtctl", type=Path, required=True, help="an installed srtctl executable (upstream)")
    parser.add_argument("--upstream", type=Path, nargs="+", default=[], help="upstream srt-slurm recipe folders")
    parser.add_argument("--inferencex", type=Path, nargs="+", default=[], help="InferenceX srt-slurm recipe folders")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    report: dict[str, Any] = {}
    if args.upstream:
        report["upstream"] = upstream_figures(args.srtctl, args.upstream)
    if args.inferencex:
        report["inferencex"] = inferencex_figures(args.srtctl, args.inferencex)
    for corpus, figures in report.items():
        print(f"{corpus}:")
        for key, value in figures.items():
            if key != "disagreements":
                print(f"  {key:>40}: {value}")
        for path in figures.get("disagreements", []):
            print(f"  {'disagreement':>40}: {path}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
