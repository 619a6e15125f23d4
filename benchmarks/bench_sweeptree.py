"""What the sweeps screen does on the UI loop for each event: build the tree's rows (filtered,
sorted) and the summary line from the rows it holds; and the same reading everything from the
store (on a resume). Beside them, the peer: the flat read of every attempt the screen did per
resume before the tree. Figures, not a test.

    .venv/bin/python benchmarks/bench_sweeptree.py [--sweeps 200] [--arms 5] [--attempts 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.scheduler import JobState, JobStatus
from console.store import Store
from console.sweeptree import Tree, TreeView

STATES = [JobState.COMPLETED, JobState.FAILED, JobState.RUNNING, JobState.PENDING, JobState.TIMEOUT]


def fill(store: Store, sweeps: int, arms: int, attempts: int) -> int:
    job = 0
    for s in range(sweeps):
        sweep = store.add_sweep(f"sweep {s}", "c", [])
        for a in range(arms):
            arm = store.add_arm(sweep, f"arm-{s}-{a}", "r.yaml", None, None, "x: 1\n", {})
            for n in range(attempts):
                job += 1
                row = store.add_attempt(arm, "c", "srtctl", "x: 1\n", [1, 2, 4])
                store.mark_submitted(row.id, str(job), f"/o/{job}", None)
                state = STATES[(job + n) % len(STATES)]
                store.record_status(row.id, JobStatus(str(job), state, submit_time=1000.0 + job,
                                                      start_time=1010.0 + job, end_time=2000.0 + job))  # fmt: skip
    return job


def timed(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=200)
    parser.add_argument("--arms", type=int, default=5)
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "console.sqlite3")
        total = fill(store, args.sweeps, args.arms, args.attempts)

        def tree_rows() -> None:
            tree = Tree.of(store.sweeps(), store.arms(), store.attempts(), {})
            tree.rows(TreeView(state_filter="failed", sort="elapsed", descending=True))
            tree.summary()

        sweeps, arms, attempts = store.sweeps(), store.arms(), store.attempts()

        def held_rows() -> None:  # what the sweeps screen does per event: its held rows, no store read
            tree = Tree.of(sweeps, arms, attempts, {})
            tree.rows(TreeView(state_filter="failed", sort="elapsed", descending=True))
            tree.summary()

        figures = {
            "attempts": total,
            "per_event_held_rows_ms": round(timed(held_rows, args.repeat) * 1000, 2),
            "tree_from_the_store_ms": round(timed(tree_rows, args.repeat) * 1000, 2),
            "peer_flat_attempts_read_ms": round(timed(store.attempts, args.repeat) * 1000, 2),
        }
        store.close()
    for key, value in figures.items():
        print(f"{key:<28} {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
