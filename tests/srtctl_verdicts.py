"""What the real srtctl does with recipe files: run with the interpreter of an srtctl install.

    <srtctl venv>/bin/python tests/srtctl_verdicts.py FILE[:selector] ...

Prints one JSON line per target:

    {"target": ..., "accepted": bool, "error": str | null,
     "jobs": [{"name": ..., "nodes": int, "job_start": [str, ...]}, ...]}

`accepted` is srtctl's own verdict at submission: `srtctl dry-run -f TARGET` run in-process
(srtctl's `main`, argv and all), in a scratch directory with a minimal srtslurm.yaml, so that
hundreds of files cost one interpreter start. Its Rich console is replaced by one that keeps
the printed strings without rendering them (rendering the generated sbatch script and tables
is most of a dry-run's time); the error srtctl prints is kept. Its Hugging Face lookup of
`identity.model.repo` (printed, never a verdict) is answered without the network.

For an accepted target, `jobs` has one entry per job: `nodes` is the node count of the
`#SBATCH --nodes` lines of the job script srtctl generates for it, and `job_start` what srtctl
itself refuses later, deterministically from the config alone, when the job runs: the frontend
(`get_frontend`), worker placement (the backend's `allocate_endpoints` and
`endpoints_to_processes` over the job's nodes), the frontend and benchmark-client placements
(`placed_node`), and the benchmark runner (`get_runner` and its `validate_config`). Nothing
here re-implements srtctl; every verdict comes from calling it.

Tests and benchmarks call `run_verdicts(srtctl, targets)` with the path of an installed
`srtctl` executable; it finds that install's interpreter and runs this file with it.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar


def interpreter_of(srtctl: Path) -> Path:
    """The Python that an installed `srtctl` console script runs with (its #! line)."""
    with open(srtctl, "rb") as handle:
        first = handle.readline().decode("utf-8", "replace").strip()
    if first.startswith("#!") and "python" in first:
        return Path(first[2:].split()[0])
    return srtctl.parent / "python"


def run_verdicts(srtctl: Path, targets: list[str], timeout: float = 300) -> dict[str, dict[str, Any]]:
    """The real srtctl's verdict on each target (file or file:selector), keyed by target as given."""
    import subprocess

    resolved = {(_resolve(t) if ":" in t and not Path(t).exists() else str(Path(t).resolve())): t for t in targets}
    # No bytecode written into the install: it may belong to another user (the test cluster's).
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [str(interpreter_of(srtctl)), __file__, *targets],
        capture_output=True, text=True, timeout=timeout, check=False, env=env,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"{srtctl}: the verdict run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return {resolved[row["target"]]: row for row in rows}


SRTSLURM_YAML = """\
cluster: differential
default_partition: batch
default_time_limit: "01:00:00"
use_gpus_per_node_directive: false
use_segment_sbatch_directive: false
"""


def main(argv: list[str]) -> int:
    scratch = Path(tempfile.mkdtemp(prefix="srtctl-verdicts-"))
    (scratch / "srtslurm.yaml").write_text(SRTSLURM_YAML)
    os.environ["SRTSLURM_CONFIG"] = str(scratch / "srtslurm.yaml")
    os.environ.pop("RUNNER_NAME", None)
    targets = [str(Path(t).resolve()) if ":" not in t or Path(t).exists() else _resolve(t) for t in argv]
    os.chdir(scratch)  # a sweep's dry-run writes dry-runs/ into the working directory
    logging.basicConfig(level=logging.CRITICAL, handlers=[logging.NullHandler()])

    from srtctl.cli import submit
    from srtctl.core import validation

    submit.Console = _Quiet
    # A recipe's identity.model.repo makes the dry-run ask huggingface.co whether the model
    # exists; the answer is only printed, never a verdict, and tests stay off the network.
    validation.validate_hf_model = lambda name, revision: validation.ValidationResult(
        "hf_model", True, "not asked (offline)"
    )
    for target in targets:
        accepted, error = _dry_run(submit, target)
        jobs = _job_start(target) if accepted else []
        print(json.dumps({"target": target, "accepted": accepted, "error": error, "jobs": jobs}), flush=True)
    return 0


def _resolve(target: str) -> str:
    path, _, selector = target.rpartition(":")
    return f"{Path(path).resolve()}:{selector}"


class _Quiet:
    """Stands in for rich.console.Console in srtctl's CLI: keeps strings, renders nothing."""

    printed: ClassVar[list[str]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def print(self, *objects: Any, **kwargs: Any) -> None:
        _Quiet.printed.extend(o for o in objects if isinstance(o, str))

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _dry_run(submit: Any, target: str) -> tuple[bool, str | None]:
    submit.console = _Quiet()
    _Quiet.printed = []
    sys.argv = ["srtctl", "dry-run", "-f", target]
    code: object = 0
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            submit.main()
        except SystemExit as exc:
            code = exc.code
        except Exception as exc:  # srtctl let it escape main(): still a refusal
            return False, f"{type(exc).__name__}: {exc}"
    if code in (0, None):
        return True, None
    errors = [p for p in _Quiet.printed if "Error:" in p or "not found" in p]
    text = errors[-1] if errors else "\n".join(_Quiet.printed[-3:])
    return False, re.sub(r"\[/?[a-z ]*\]", "", text).replace("Error:", "", 1).strip()


def _configs(target: str) -> list[Any]:
    """The SrtConfig of every job the target submits, loaded by srtctl's own functions."""
    import yaml
    from srtctl.cli.submit import is_override_config, is_sweep_config, parse_config_arg
    from srtctl.core.config import (
        generate_override_configs,
        load_cluster_config,
        load_config,
        resolve_config_with_defaults,
    )
    from srtctl.core.schema import SrtConfig
    from srtctl.core.sweep import generate_sweep_configs

    path, selector = parse_config_arg(target)
    raw = yaml.safe_load(path.read_text())
    schema = SrtConfig.Schema()
    if is_override_config(path):
        out = []
        for _suffix, variant in generate_override_configs(raw, selector=selector):
            resolved = resolve_config_with_defaults(variant, load_cluster_config())
            if "sweep" in resolved:
                out += [schema.load(c) for c, _ in generate_sweep_configs(resolved)]
            else:
                out.append(schema.load(resolved))
        return out
    if is_sweep_config(path):
        return [schema.load(c) for c, _ in generate_sweep_configs(raw)]
    return [load_config(path)]


def _job_start(target: str) -> list[dict[str, Any]]:
    try:
        configs = _configs(target)
    except Exception as exc:
        return [{"name": None, "job_start": [f"(could not reload the accepted config: {exc})"]}]
    return [
        {"name": c.name, "nodes": _nodes(c), "job_start": _frontend(c) + _placement(c) + _runner(c)} for c in configs
    ]


def _nodes(config: Any) -> int | None:
    from srtctl.cli.submit import generate_minimal_sbatch_script

    try:
        script = generate_minimal_sbatch_script(config=config, config_path=Path("config.yaml"))
    except Exception:
        return None
    return sum(int(n) for n in re.findall(r"^#SBATCH --nodes=(\d+)$", script, re.MULTILINE))


def _frontend(config: Any) -> list[str]:
    from srtctl.frontends import get_frontend

    try:
        get_frontend(config.frontend.type)
    except ValueError as exc:
        return [f"frontend: {exc}"]
    return []


def _runner(config: Any) -> list[str]:
    kind = config.benchmark.type
    if kind == "manual":
        return []
    from srtctl.benchmarks import get_runner

    try:
        runner = get_runner(kind)
    except ValueError as exc:
        return [f"benchmark: {exc}"]
    return [f"benchmark: {e}" for e in runner.validate_config(config)]


def _placement(config: Any) -> list[str]:
    r = config.resources
    if r.het_components(infra_dedicated=config.infra.etcd_nats_dedicated_node) is not None:
        return []  # heterogeneous jobs are placed per component by Slurm itself
    from srtctl.core.topology import placed_node

    nodes = [f"node{i}" for i in range(config.total_nodes)]
    try:
        endpoints = config.backend.allocate_endpoints(
            num_prefill=r.num_prefill, num_decode=r.num_decode, num_agg=r.num_agg,
            gpus_per_prefill=r.gpus_per_prefill, gpus_per_decode=r.gpus_per_decode, gpus_per_agg=r.gpus_per_agg,
            gpus_per_node=r.gpus_per_node, available_nodes=nodes, spread_workers=r.spread_workers,
        )  # fmt: skip
        processes = config.backend.endpoints_to_processes(endpoints, frontend_type=config.frontend.type)
    except Exception as exc:
        return [f"placement: {type(exc).__name__}: {exc}"]
    found = []
    for kind, placement in (
        ("frontend.orchestrator_placement", config.frontend.orchestrator_placement),
        ("benchmark.client_placement", config.benchmark.client_placement),
    ):
        try:
            placed_node(processes, placement, nodes[0] if nodes else "head", kind=kind)
        except ValueError as exc:
            found.append(f"placement: {exc}")
    return found


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
