"""What the job commands share: the session (config, profiles, the store, the engine), built once."""

from __future__ import annotations

import json
import sys
from contextvars import ContextVar

from console.describe import shown
from console.ids import Ref, parse_ref
from console.session import ConfigError, Session
from console.store import AttemptRow, Store, StoreError

# Exit codes, the same for every command (and listed in `srt-console --help`).
EXIT_OK = 0
EXIT_BAD = 1  # the command ran and the answer is bad: errors, failed or doomed, missing points
EXIT_USAGE = 2  # the command could not run as asked: arguments, config, no terminal
EXIT_CODES_HELP = """exit codes:
  0    success: what was asked is done, and it is good
  1    the answer is bad: recipe errors, a verdict failed or doomed (watch, scan), points
       missing or invalid (results), a submission or cancel that failed, nothing to do
  2    the command could not run as asked: bad arguments, a missing --config file or a
       config error (an unknown default_cluster), an unknown cluster, no terminal
  130  interrupted (Ctrl-C)
With --json, an error is a JSON document too: {"error": "...", "problems": [...]}."""

JSON_ERRORS: ContextVar[bool] = ContextVar("json_errors", default=False)
"""Set by the CLI's entry for a command run with --json: errors are then printed as JSON."""


class CliError(Exception):
    """A message for the operator; the command exits non-zero without a traceback."""

    def __init__(self, message: str, code: int = EXIT_BAD) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, problems: list[str] | None = None, code: int = EXIT_BAD) -> int:
    """Report an error (as JSON on stdout under --json, else on stderr) and return the exit code."""
    if JSON_ERRORS.get():
        json.dump({"error": message, "problems": list(problems or []), "exit_code": code}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return code
    for problem in problems or []:
        print(shown(problem, 4000), file=sys.stderr)
    print(f"srt-console: {shown(message, 4000)}", file=sys.stderr)
    return code


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
