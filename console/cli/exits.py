"""The command line's exit codes and how an error is said (as JSON under ``--json``).

Standard library only: the parser lists the codes in ``--help`` without importing a command.
"""

from __future__ import annotations

import json
import sys
from contextvars import ContextVar

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


def fail(message: str, problems: list[str] | None = None, code: int = EXIT_BAD) -> int:
    """Report an error (as JSON on stdout under --json, else on stderr) and return the exit code."""
    if JSON_ERRORS.get():
        json.dump({"error": message, "problems": list(problems or []), "exit_code": code}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return code
    from console.describe import shown

    for problem in problems or []:
        print(shown(problem, 4000), file=sys.stderr)
    print(f"srt-console: {shown(message, 4000)}", file=sys.stderr)
    return code
