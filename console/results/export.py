"""Points as JSON documents (``--json``, the export's .json) and as CSV, one line per point."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
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
        for metric in ("ttft", "tpot", "itl", "e2el"):
            stats = doc.get(f"{metric}_ms") or {}
            for stat in ("mean", "median", "p99"):
                flat[f"{metric}_{stat}_ms"] = stats.get(stat)
        writer.writerow(["" if flat.get(c) is None else flat[c] for c in CSV_COLUMNS])
    return out.getvalue()
