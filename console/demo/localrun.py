"""The runner of one local job: ``python -m console.demo.localrun STATE_DIR JOB_ID``.

Started by :class:`console.demo.localsched.LocalScheduler` in a session of its own, so it
outlives the console; it runs the batch script, enforces cancel and the time limit, and
writes the job's final state.
"""

from __future__ import annotations

import sys
from pathlib import Path

from console.demo.localsched import run_job


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m console.demo.localrun STATE_DIR JOB_ID", file=sys.stderr)
        return 2
    return run_job(Path(args[0]), args[1])


if __name__ == "__main__":
    sys.exit(main())
