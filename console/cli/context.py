"""What the job commands share: the session (config, profiles, the store, the engine), built once."""

from __future__ import annotations

import sys

from console.cli.exits import EXIT_BAD, EXIT_USAGE
from console.ids import Ref, parse_ref
from console.session import ConfigError, Session
from console.store import AttemptRow, Store, StoreError


class CliError(Exception):
    """A message for the operator; the command exits non-zero without a traceback."""

    def __init__(self, message: str, code: int = EXIT_BAD) -> None:
        super().__init__(message)
        self.code = code


Context = Session
"""The job commands' view of the session (config, profiles, store, engine, monitor)."""


def open_context(config_path: str | None) -> Session:
    """The session for one command; config problems are printed, a store that cannot open is a CliError."""
    try:
        return Session.open(config_path, on_note=lambda note: print(f"srt-console: {note}", file=sys.stderr))
    except StoreError as exc:
        raise CliError(str(exc)) from None
    except ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


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
