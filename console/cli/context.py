"""What the job commands share: config, profiles, the store and the engine, built once."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from console.clusters import LOCAL, Profile, load_profiles
from console.config import load_config
from console.engine import Engine
from console.ids import Ref, parse_ref
from console.store import AttemptRow, Store, StoreError, default_data_dir


class CliError(Exception):
    """A message for the operator; the command exits non-zero without a traceback."""


@dataclass
class Context:
    engine: Engine
    store: Store
    profiles: dict[str, Profile]
    default_cluster: str
    data_dir: Path


def open_context(config_path: str | None) -> Context:
    config = load_config(config_path)
    for problem in config.problems:
        print(f"srt-console: {problem}", file=sys.stderr)
    data_dir = default_data_dir()
    profiles, problems = load_profiles(config, data_dir)
    for problem in problems:
        print(f"srt-console: {problem}", file=sys.stderr)
    try:
        store = Store(data_dir / "console.sqlite3")
    except StoreError as exc:
        raise CliError(str(exc)) from None
    default = config.raw.get("default_cluster")
    default_cluster = default if isinstance(default, str) and default in profiles else LOCAL
    return Context(Engine(store, profiles, data_dir), store, profiles, default_cluster, data_dir)


def resolve_attempts(store: Store, text: str) -> list[AttemptRow]:
    """Every attempt an id names (a sweep's, an arm's, one attempt, or a Slurm job's)."""
    try:
        ref: Ref = parse_ref(text)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    attempts = store.attempts()
    if ref.kind == "sweep":
        arms = {a.id for a in store.arms(int(ref.id))}
        found = [a for a in attempts if a.arm_id in arms]
    elif ref.kind == "arm":
        found = [a for a in attempts if a.arm_id == ref.id]
    elif ref.kind == "attempt":
        found = [a for a in attempts if a.arm_id == ref.id and a.number == ref.number]
    else:
        found = [a for a in attempts if a.job_id == ref.id]
    if not found:
        raise CliError(f"no {ref.kind} {text}")
    return found
