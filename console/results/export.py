"""Points as JSON documents (``--json``, the export's .json) and as CSV, one line per point."""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from console.results.points import PointResult

CSV_COLUMNS = (
    "arm",
    "attempt",
    "concurrency",
    "status",
    "output_tok_s",
    "total_tok_s",
    "tok_s_per_gpu",
    "tok_s_per_user",
    "ttft_mean_ms",
    "ttft_median_ms",
    "ttft_p99_ms",
    "tpot_mean_ms",
    "tpot_median_ms",
    "tpot_p99_ms",
    "itl_mean_ms",
    "itl_median_ms",
    "itl_p99_ms",
    "e2el_mean_ms",
    "e2el_median_ms",
    "e2el_p99_ms",
    "completed",
    "gpus",
    "file",
    "reason",
    "simulated",
)


def points_rows(arm_name: str | None, points: Iterable[PointResult]) -> list[dict[str, Any]]:
    """JSON documents of points (``PointResult.to_json()``), with the arm named when given."""
    rows = []
    for p in points:
        doc = p.to_json()
        if arm_name is not None:
            doc = {"arm": arm_name, **doc}
        rows.append(doc)
    return rows


def points_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """CSV text of point documents (as :func:`points_rows` makes them), one line per point."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for doc in rows:
        flat: dict[str, Any] = {
            k: doc.get(k)
            for k in (
                "arm",
                "attempt",
                "concurrency",
                "status",
                "output_tok_s",
                "total_tok_s",
                "tok_s_per_gpu",
                "tok_s_per_user",
                "completed",
                "gpus",
                "file",
            )
        }
        flat["reason"] = doc.get("invalid_reason")
        flat["simulated"] = "yes" if doc.get("simulated") else "no"
        for metric in ("ttft", "tpot", "itl", "e2el"):
            stats = doc.get(f"{metric}_ms") or {}
            for stat in ("mean", "median", "p99"):
                flat[f"{metric}_{stat}_ms"] = stats.get(stat)
        writer.writerow(["" if flat.get(c) is None else flat[c] for c in CSV_COLUMNS])
    return out.getvalue()


class NothingToExport(Exception):
    """No point of the sweep has a result yet: no file is written."""


def export_dir(data_dir: Path) -> Path:
    """Where exports go unless the operator says otherwise: beside the data dir."""
    return data_dir.parent / f"{data_dir.name}-exports"


def write_export(
    directory: Path, sweep: str, rows: Sequence[Mapping[str, Any]], job_dirs: Mapping[str, str] | None = None
) -> list[Path]:
    """``srt-results-<sweep>-<time>.csv`` and ``.json`` in ``directory``; returns both paths.

    Result files on this machine are named relative to the export, so the paths resolve from
    the exported file wherever the export and the data are moved together; others stay as
    they were recorded. A file named relative to its job dir is found through ``job_dirs``
    (attempt ref → the attempt's output dir). :class:`NothingToExport` when no point has a result.
    """
    if not any(row.get("status") == "done" for row in rows):
        raise NothingToExport(f"nothing to export: no point of {sweep} has a result yet")
    directory = directory.expanduser()
    directory.mkdir(parents=True, exist_ok=True)
    base = directory.resolve()
    placed = [_relative_file(row, base, job_dirs or {}) for row in rows]
    stem = f"srt-results-{sweep}-{time.strftime('%Y%m%d-%H%M%S')}"
    csv_path = directory / f"{stem}.csv"
    json_path = directory / f"{stem}.json"
    csv_path.write_text(points_csv(placed), encoding="utf-8")
    json_path.write_text(json.dumps({"sweep": sweep, "points": placed}, indent=2) + "\n", encoding="utf-8")
    return [csv_path, json_path]


def _relative_file(row: Mapping[str, Any], base: Path, job_dirs: Mapping[str, str]) -> dict[str, Any]:
    doc = dict(row)
    file = doc.get("file")
    if not isinstance(file, str) or not file:
        return doc
    path = Path(file)
    job_dir = job_dirs.get(str(doc.get("attempt") or ""))
    if not path.is_absolute() and job_dir:
        path = Path(job_dir) / path
    if path.is_file():
        doc["file"] = os.path.relpath(path.resolve(), base)
    elif path.is_absolute():
        doc["file"] = str(path)
    return doc
