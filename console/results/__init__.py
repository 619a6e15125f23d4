"""Benchmark result files: names and places, head/tail scanning, points, rollup, job metadata.

- :mod:`names`: the file-name and place rules (the agent's own, so both sides count the same files);
- :mod:`scan`: a file's head and tail bytes and the scalar fields scanned from them;
- :mod:`points`: points derived from them, and the one merge of an arm's attempts;
- :mod:`reader`: the one route that reads an attempt's files, here or on a cluster;
- :mod:`progress`: the one parser of the concurrency benchmark.out says is running;
- :mod:`rollup`, :mod:`metadata`: ``benchmark-rollup.json`` and ``<JOBID>.json``;
- :mod:`arms`: one arm's results across its attempts (read, then merged);
- :mod:`export`: points as JSON documents and CSV.
"""

from console.results.export import points_csv, points_rows
from console.results.fields import ScanStatus
from console.results.metadata import JobMetadata, parse_job_metadata, read_job_metadata, total_gpus
from console.results.names import (
    ResultFile,
    ResultKind,
    ResultName,
    discover_results,
    parse_result_name,
    remote_kind,
    result_kind,
)
from console.results.points import (
    PointResult,
    PointStatus,
    arm_points,
    arm_view,
    merge_attempts,
    point_from_bytes,
    point_from_scan,
    read_point,
    read_points,
)
from console.results.progress import running_concurrency
from console.results.reader import (
    AttemptPoints,
    LocalFiles,
    RemoteFiles,
    ResultFiles,
    read_attempt_points,
    read_local_points,
    read_remote_points,
)
from console.results.rollup import Rollup, RollupRun, parse_rollup, read_rollup
from console.results.scan import (
    DEFAULT_HEAD_BYTES,
    DEFAULT_TAIL_BYTES,
    FAILED_REQUESTS_LIMIT,
    METRICS,
    HeadTail,
    LatencyStats,
    ResultScalars,
    ScanResult,
    read_head_tail,
    scan_result,
)

__all__ = [
    "DEFAULT_HEAD_BYTES",
    "DEFAULT_TAIL_BYTES",
    "FAILED_REQUESTS_LIMIT",
    "METRICS",
    "AttemptPoints",
    "HeadTail",
    "JobMetadata",
    "LatencyStats",
    "LocalFiles",
    "PointResult",
    "PointStatus",
    "RemoteFiles",
    "ResultFile",
    "ResultFiles",
    "ResultKind",
    "ResultName",
    "ResultScalars",
    "Rollup",
    "RollupRun",
    "ScanResult",
    "ScanStatus",
    "arm_points",
    "arm_view",
    "discover_results",
    "merge_attempts",
    "parse_job_metadata",
    "parse_result_name",
    "parse_rollup",
    "point_from_bytes",
    "point_from_scan",
    "points_csv",
    "points_rows",
    "read_attempt_points",
    "read_head_tail",
    "read_job_metadata",
    "read_local_points",
    "read_point",
    "read_points",
    "read_remote_points",
    "read_rollup",
    "remote_kind",
    "result_kind",
    "running_concurrency",
    "scan_result",
    "total_gpus",
]
