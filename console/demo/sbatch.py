"""The batch script the demo launcher submits, and the arm plan the demo engine reads.

The script is plain sbatch: ``#SBATCH`` lines for the job name, node demand, one task per node
and the srtctl output path, then the demo engine's orchestrator with every value shell-quoted.
The same script runs under real Slurm and under the local scheduler.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any

from console.model import Arm

__all__ = [
    "arm_plan",
    "render_batch_script",
    "sweep_log_path",
    "write_arm_config",
]


_MODE_KEYS = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}
_UNSAFE_DIRECTIVE = re.compile(r"[\n\r\x00]")


def arm_plan(arm: Arm) -> dict[str, Any]:
    """What the engine needs of an arm: the resolved config (with its ``demo:`` section) and
    the topology the console already worked out, so the engine never re-derives it."""
    topo = arm.topology
    return {
        "name": arm.name,
        "recipe_path": arm.recipe_path,
        "config": arm.config,
        "backend": arm.backend,
        "frontend": arm.frontend,
        "benchmark": arm.benchmark,
        "isl": arm.isl,
        "osl": arm.osl,
        "concurrencies": list(arm.concurrencies),
        "gpus_per_node": topo.gpus_per_node,
        "node_demand": topo.node_demand,
        "roles": [
            {
                "name": role.name,
                "workers": role.workers,
                "nodes": role.nodes,
                "gpus_per_worker": role.gpus_per_worker,
                "colocated": role.colocated,
                "dp_attention": bool(topo.dp_attention.get(role.name)),
                "tp": topo.tp.get(role.name, role.gpus_per_worker),
            }
            for role in topo.roles
        ],
        "model": arm.model_path,
        "container": arm.container,
        "precision": arm.precision,
        "gpu_type": arm.gpu_type,
    }


def _safe_stem(name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    return stem or "arm"


def write_arm_config(arm: Arm, directory: str | os.PathLike[str], *, stem: str | None = None) -> Path:
    """Write the arm's plan (resolved config incl. ``demo:``, plus topology) as JSON into
    ``directory`` and return its path. Written under a temporary name and renamed."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_safe_stem(stem or arm.name)}.json"
    tmp = folder / f".{path.name}.tmp"
    tmp.write_text(json.dumps(arm_plan(arm), indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def sweep_log_path(job_dir_template: str) -> str:
    """``<outputs>/%j/logs/sweep_%j.log`` for a job dir template ``<outputs>/%j``."""
    return f"{job_dir_template.rstrip('/')}/logs/sweep_%j.log"


def _directive(option: str, value: str | int) -> str:
    text = str(value)
    if _UNSAFE_DIRECTIVE.search(text):
        raise ValueError(f"#SBATCH {option}: value contains a line break or NUL: {text!r}")
    if re.search(r"[\s\"'\\]", text):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"#SBATCH {option}={text}"


def render_batch_script(
    arm: Arm,
    *,
    job_dir_template: str,
    engine_path: str,
    config_path: str,
    python: str = "python3",
    results_root: str | None = None,
    attempt: int = 1,
    job_name: str | None = None,
    partition: str | None = None,
    account: str | None = None,
    time_limit: str | None = None,
    speed: float | None = None,
    extra_directives: dict[str, str] | None = None,
) -> str:
    """The sbatch script for one attempt of ``arm`` under the demo engine.

    ``job_dir_template`` is the job output dir with ``%j`` for the job id (``<outputs>/%j``);
    ``config_path`` is the plan written by :func:`write_arm_config`; ``results_root`` is the
    InferenceX results root (the engine defaults to ``<job dir>/results``). The time limit
    defaults to the recipe's ``slurm.time_limit``. Slurm does not create the output
    directory: the launcher creates ``<outputs>/<id>/logs`` before the job starts (submit
    held, create, release).
    """
    if "%j" not in job_dir_template:
        raise ValueError(f"job_dir_template must contain %j (the job id): {job_dir_template!r}")
    if attempt < 1:
        raise ValueError(f"attempt must be 1 or more, not {attempt}")
    raw_slurm = arm.config.get("slurm")
    slurm: dict[str, Any] = raw_slurm if isinstance(raw_slurm, dict) else {}
    limit = time_limit if time_limit is not None else slurm.get("time_limit")
    lines = [
        "#!/bin/bash",
        _directive("--job-name", job_name or arm.name),
        _directive("--nodes", arm.topology.node_demand),
        _directive("--ntasks-per-node", 1),
        _directive("--output", sweep_log_path(job_dir_template)),
    ]
    if partition:
        lines.append(_directive("--partition", partition))
    if account:
        lines.append(_directive("--account", account))
    if limit:
        lines.append(_directive("--time", str(limit)))
    for key, value in (extra_directives or {}).items():
        if not re.fullmatch(r"[a-z][a-z0-9-]{0,40}", key):
            raise ValueError(f"not an sbatch option name: {key!r}")
        lines.append(_directive(f"--{key}", value) if value != "" else f"#SBATCH --{key}")
    argv = [
        python,
        engine_path,
        "orchestrator",
        "--plan",
        config_path,
        "--job-dir-template",
        job_dir_template,
        "--attempt",
        str(attempt),
    ]
    if results_root:
        argv += ["--results-root", results_root]
    if speed is not None:
        argv += ["--speed", repr(float(speed))]
    # "$0" is the job's copy of this script (Slurm's spool, the local scheduler's state dir):
    # the engine keeps it as sbatch_script.sh, as srtctl does.
    command = " ".join(shlex.quote(a) for a in argv) + ' --batch-script "$0"'
    lines += [
        f"# srt-console demo launcher: arm {shlex.quote(arm.name)}, attempt {attempt}",
        "set -u",
        f"{command} &",
        "pid=$!",
        "trap 'kill -TERM \"$pid\" 2>/dev/null' TERM INT",
        'wait "$pid"',
        "rc=$?",
        'while kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done',
        'echo ""',
        'echo "=========================================="',
        'if [ "$rc" -eq 0 ]; then',
        '  echo "✓ Sweep completed successfully"',
        "else",
        '  echo "✗ Sweep failed (exit code: $rc)"',
        "fi",
        'echo "End: $(date)"',
        'echo "=========================================="',
        'exit "$rc"',
        "",
    ]
    return "\n".join(lines)
