"""Which concurrency benchmark.out says is being measured: the one parser, fed a tail or live lines."""

from __future__ import annotations

import re

_SA_RUNNING = re.compile(r"Running benchmark with concurrency:\s*(\d+)")
_SA_COMPLETED = re.compile(r"Completed benchmark with concurrency:\s*(\d+)")
_MAX_CONCURRENCY = re.compile(r"Maximum request concurrency:\s*(\d+)")
_RESULT_BLOCK_END = re.compile(r"^={20,}\s*$", re.MULTILINE)


def running_concurrency(benchmark_out: str) -> int | None:
    """The concurrency being measured according to benchmark.out text (or its tail).

    sa-bench brackets each measured run with ``Running benchmark with concurrency: C`` and
    ``Completed benchmark with concurrency: C``. Without those markers (InferenceX custom
    benchmark), the last ``Maximum request concurrency: C`` not yet followed by the closing
    ``=====`` line of a result block is running.
    """
    runs = list(_SA_RUNNING.finditer(benchmark_out))
    if runs:
        last = runs[-1]
        conc = int(last.group(1))
        for done in _SA_COMPLETED.finditer(benchmark_out, last.end()):
            if int(done.group(1)) == conc:
                return None
        return conc
    maxes = list(_MAX_CONCURRENCY.finditer(benchmark_out))
    if not maxes:
        return None
    last = maxes[-1]
    if _RESULT_BLOCK_END.search(benchmark_out, last.end()):
        return None
    return int(last.group(1))
