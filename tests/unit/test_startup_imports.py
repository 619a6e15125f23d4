"""What a command imports is what it uses: `--help` is argparse and the console's version, and
`status` reads the store and asks the schedulers without SSH, the UI, the recipe loader or the
failure catalog, `scan` triages without the store (each a fresh interpreter, as an operator runs
them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli.parser import DEFAULT_THRESHOLD_PCT, FLAVOUR_CHOICES, SCAN_STATES
from console.compare import DEFAULT_THRESHOLD_PCT as COMPARE_THRESHOLD
from console.recipes.flavours import FLAVOUR_NAMES
from console.scheduler import JobState

ROOT = Path(__file__).resolve().parents[2]

# Run the program's entry point in-process and list every module left imported.
PROBE = """
import contextlib, io, json, sys
from screens.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
    code = main(sys.argv[1:])
sys.stderr.write(json.dumps(sorted(sys.modules)))
"""

HEAVY = ("asyncssh", "textual", "rich", "yaml", "sqlite3", "watchfiles", "zmq")
NOT_FOR_STATUS = (
    "asyncssh",
    "textual",
    "screens.app",
    "console.signatures",
    "console.triage",
    "console.stages",
    "console.follow.follower",
    "console.recipes.loader",
    "console.recipes.upstream",
    "console.recipes.fork",
    "console.results",
    "console.launch_plan",
    "console.rerun",
)


def imported(argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    modules: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return modules


def loaded(modules: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_a_bare_help_imports_the_parser_alone() -> None:
    modules = imported(["--help"])
    console = sorted(m for m in modules if m == "console" or m.startswith(("console.", "screens")))
    assert console == ["console", "console.cli", "console.cli.exits", "console.cli.parser", "screens", "screens.main"]
    assert [name for name in HEAVY if loaded(modules, name)] == []


def test_a_commands_help_imports_no_command() -> None:
    modules = imported(["status", "--help"])
    grammar = ("console.cli.parser", "console.cli.exits")
    assert not [m for m in modules if m.startswith("console.cli.") and m not in grammar]


def test_status_imports_only_what_tracking_uses(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    # A cluster over SSH in the config: nothing is live on it, so nothing connects to it.
    config.write_text("clusters:\n  far:\n    ssh: {host: 127.0.0.1, port: 1, user: nobody}\n"
                      "    srt_slurm: ~/srt-slurm\n    srtctl_flavour: upstream\n")  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SRT_CONSOLE_DATA": str(tmp_path / "data"),
           "SRT_CONSOLE_CONFIG": str(config), "PYTHONPATH": str(ROOT)}  # fmt: skip
    modules = imported(["status", "--json"], env=env, cwd=tmp_path)
    assert "console.cli.jobs_cmd" in modules and "sqlite3" in modules  # it did run
    assert [name for name in NOT_FOR_STATUS if loaded(modules, name)] == []


def test_scan_imports_the_triage_and_not_the_store(tmp_path: Path) -> None:
    log = tmp_path / "worker.out"
    log.write_text("[2026-12-01 10:00:01] Decode batch. #running-req: 64\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SRT_CONSOLE_DATA": str(tmp_path / "data"),
           "SRT_CONSOLE_CONFIG": str(tmp_path / "none.yaml"), "PYTHONPATH": str(ROOT)}  # fmt: skip
    modules = imported(["scan", "--json", str(log)], env=env, cwd=tmp_path)
    assert "console.triage" in modules  # it did run
    assert [name for name in ("sqlite3", "console.store", "asyncssh", "textual") if loaded(modules, name)] == []


@pytest.mark.parametrize(
    ("copy", "original"),
    [
        (FLAVOUR_CHOICES, FLAVOUR_NAMES),
        (SCAN_STATES, tuple(s.value for s in JobState)),
        (DEFAULT_THRESHOLD_PCT, COMPARE_THRESHOLD),
    ],
)
def test_the_parsers_choices_are_the_commands(copy: object, original: object) -> None:
    if isinstance(copy, tuple) and isinstance(original, tuple):
        assert sorted(copy) == sorted(original)
    else:
        assert copy == original
