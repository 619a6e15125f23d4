"""`srt-console scan PATH... [--json] [--state STATE]`: offline triage of log files.

The operator's own signatures (config ``signatures:`` or ``signatures.yaml`` beside the config)
are merged with the bundled catalog. A PATH is a log file or a directory: a job output dir
(its ``logs/`` is read), a ``logs/`` dir, or any folder of logs. In a directory the sweep log, worker logs, frontends,
``benchmark.out`` and other ``.out``/``.log``/``.err``/``.txt`` files are read; binary
files there are skipped with a note. Files are read line by line (a very long line is cut
and read past, never held whole). Findings are not errors: the exit code is 0 after a
successful scan, and 2 when an input cannot be read.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Final

from console.agent import open_regular
from console.config import load_config
from console.diagnosis import Diagnosis, FindingGroup
from console.stages import SWEEP_LOG_RE, WORKER_FILE_RE, StageSnapshot
from console.triage import Triage, feed_file, looks_binary, within
from console.user_signatures import install_user_signatures

__all__ = ["ScanError", "cmd_scan", "collect_files", "scan_paths"]

LOG_SUFFIXES: Final = (".out", ".log", ".err", ".txt")
_SNIFF_BYTES: Final[int] = 8192
_MAX_DEPTH: Final[int] = 4


class ScanError(Exception):
    """An input cannot be scanned; the message names it."""


def cmd_scan(args: argparse.Namespace) -> int:
    config = load_config(getattr(args, "config", None))
    for problem in (*config.problems, *install_user_signatures(config)):
        print(f"srt-console: {problem}", file=sys.stderr)
    try:
        files, notes = collect_files(args.paths)
        triage = scan_paths(files)
    except ScanError as exc:
        print(f"srt-console: scan: {exc}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"srt-console: scan: {note}", file=sys.stderr)
    state = args.state
    diagnosis = triage.diagnose(state)
    snapshot = triage.snapshot(state)
    if args.json:
        json.dump(scan_document(triage, diagnosis, snapshot, files), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_report(triage, diagnosis, snapshot, files))
    return 1 if diagnosis.verdict in ("failed", "doomed") else 0


# --------------------------------------------------------------------------- collecting


def collect_files(paths: list[str]) -> tuple[list[Path], list[str]]:
    """The files to read for ``paths``, and notes on what was skipped."""
    files: list[Path] = []
    notes: list[str] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ScanError(f"{raw}: no such file or directory")
        if path.is_dir():
            found = _walk(path, notes)
            if not found:
                raise ScanError(f"{raw}: no log files ({', '.join(LOG_SUFFIXES)}) in this directory")
        elif path.is_file():
            _check_readable(path, explicit=True)
            found = [path]
        else:
            raise ScanError(f"{raw}: not a regular file or directory")
        for f in found:
            key = Path(os.path.realpath(f))
            if key not in seen:
                seen.add(key)
                files.append(f)
    return files, notes


def _walk(root: Path, notes: list[str]) -> list[Path]:
    base = root / "logs" if (root / "logs").is_dir() else root
    found: list[Path] = []
    base_depth = len(base.parts)
    for dirpath, dirnames, filenames in os.walk(base, onerror=None):
        current = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if len(current.parts) - base_depth >= _MAX_DEPTH:
            dirnames[:] = []
        for name in sorted(filenames):
            if name.startswith(".") or not name.endswith(LOG_SUFFIXES):
                continue
            path = current / name
            if not within(path, root):
                notes.append(f"skipped {path}: a symbolic link out of {root}")
                continue
            if not path.is_file():
                if path.exists() or path.is_symlink():
                    notes.append(f"skipped {path}: not a regular file")
                continue
            try:
                _check_readable(path, explicit=False)
            except ScanError as exc:
                notes.append(f"skipped {exc}")
                continue
            found.append(path)
    # `srtctl apply --mock` writes its orchestrator log beside logs/, in the job dir.
    mock = root / "mock_worker.log"
    if base != root and mock.is_file():
        found.append(mock)
    found.sort(key=_file_order)
    return found


def _file_order(path: Path) -> tuple[int, str]:
    if SWEEP_LOG_RE.match(path.name):
        return 0, str(path)
    if WORKER_FILE_RE.match(path.name):
        return 1, str(path)
    return 2, str(path)


def _check_readable(path: Path, *, explicit: bool) -> None:
    try:
        with os.fdopen(open_regular(str(path)), "rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as exc:
        raise ScanError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if looks_binary(head):
        raise ScanError(f"{path}: binary file, not a log" + ("" if explicit else " (skipped)"))


# --------------------------------------------------------------------------- scanning


def scan_paths(files: list[Path], triage: Triage | None = None) -> Triage:
    """Feed every file to a triage, line by line in batches."""
    triage = triage or Triage()
    for path in files:
        try:
            feed_file(triage, path)
        except OSError as exc:
            raise ScanError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return triage


# --------------------------------------------------------------------------- output


def scan_document(triage: Triage, diagnosis: Diagnosis, snapshot: StageSnapshot, files: list[Path]) -> dict[str, Any]:
    """The `--json` document."""
    diag = diagnosis.to_json()
    return {
        "findings": [o.to_json() for o in triage.findings],
        "diagnosis": diag,
        "stage": snapshot.stage.value if triage.tracker.has_sweep_log else None,
        "readiness": snapshot.readiness.label or None,
        "workers": {name: w.as_dict() for name, w in sorted(snapshot.workers.items())},
        "files": [str(f) for f in files],
        "findings_dropped": triage.dropped,
    }


def render_report(triage: Triage, diagnosis: Diagnosis, snapshot: StageSnapshot, files: list[Path]) -> str:
    """The readable report: root cause first, with hint and advice; consequences; counts."""
    out: list[str] = []
    lines_read = sum(triage.lines_seen(str(f)) for f in files)
    out.append(f"scanned {len(files)} file(s), {lines_read} line(s)")
    root = diagnosis.root_cause
    out.append(f"verdict: {diagnosis.verdict}" + (f" (scheduler state {diagnosis.state})" if diagnosis.state else ""))
    if root is None:
        out.append("root cause: none found")
    else:
        first = root.first
        by = f" (by {first.basis}: no regex of it matched)" if first.basis else ""
        out.append(f"root cause: {root.id} - {first.finding.title} [{first.category}, {first.severity}]{by}")
        out.append(f"  first at {first.file}:{first.line_no}{_where(root)}")
        out.append(f"  | {_short(first.text)}")
        spread = f"  seen {diagnosis.root_count} time(s)"
        if diagnosis.root_workers:
            spread += f" in {len(diagnosis.root_workers)} worker(s): {', '.join(diagnosis.root_workers)}"
        if diagnosis.deterministic:
            spread += " - deterministic"
            if diagnosis.deterministic_roles:
                spread += f" (every {'/'.join(diagnosis.deterministic_roles)} worker)"
            if diagnosis.recurrences:
                spread += f" (also ended {', '.join(diagnosis.recurrences)})"
        out.append(spread)
        if diagnosis.same_failure:
            same = ", ".join(
                f"{sig_id} x{sum(g.count for g in groups)} at {groups[0].first.file}:{groups[0].first.line_no}"
                for sig_id, groups in _by_signature(diagnosis.same_failure)
            )
            out.append(f"  same failure: {same}")
        if diagnosis.hint:
            out.append(f"  hint: {diagnosis.hint}")
    out.append(f"advice: {_advice_head(diagnosis)}")
    if diagnosis.consequences:
        out.append("consequences:")
        for sig_id, groups in _by_signature(diagnosis.consequences):
            count = sum(g.count for g in groups)
            first = groups[0].first
            workers = sorted({g.first.worker for g in groups if g.first.worker})
            where = f" in {', '.join(workers)}" if workers else ""
            mark = "wrapper" if first.wrapper else first.severity
            out.append(f"  {sig_id} ({mark}) x{count}{where}; first at {first.file}:{first.line_no}")
    if diagnosis.teardown:
        torn = ", ".join(f"{sig_id} x{sum(g.count for g in groups)}" for sig_id, groups in
                         _by_signature(diagnosis.teardown))  # fmt: skip
        after = ["the run succeeded"] if snapshot.succeeded or not diagnosis.stops else []
        after += [f"the stop asked at {g.first.file}:{g.first.line_no}" for g in diagnosis.stops]
        out.append(f"teardown (after {' and '.join(after)}, not failures): {torn}")
    if triage.tracker.has_sweep_log:
        stage = snapshot.stage.value + (f"   readiness {snapshot.readiness.label}" if snapshot.readiness.label else "")
        out.append(f"stage: {stage}")
    if snapshot.workers:
        out.append("workers:")
        for name, w in sorted(snapshot.workers.items()):
            bits = [w.stage.value]
            if w.shards_label:
                bits.append(f"shards {w.shards_label}")
            if w.graphs_label:
                bits.append(f"graphs {w.graphs_label}")
            if w.failure:
                bits.append(f"({w.failure} at {w.failure_at})" if w.failure_at else f"({w.failure})")
            out.append(f"  {name}: {', '.join(bits)}")
    if diagnosis.counts:
        total = sum(diagnosis.counts.values())
        detail = ", ".join(f"{k} {v}" for k, v in sorted(diagnosis.counts.items(), key=lambda kv: (-kv[1], kv[0])))
        out.append(f"findings: {total} line(s) in {len(diagnosis.groups)} group(s): {detail}")
    else:
        out.append("findings: none")
    if triage.dropped:
        out.append(f"  ({triage.dropped} finding line(s) beyond the first {len(triage.findings)} were counted only)")
    return "\n".join(out) + "\n"


def _advice_head(diagnosis: Diagnosis) -> str:
    # The hint is printed with the root cause; keep the advice line short.
    text = diagnosis.advice
    if diagnosis.hint and text.endswith(f". Hint: {diagnosis.hint}"):
        text = text[: -len(f". Hint: {diagnosis.hint}")]
    return text


def _where(group: FindingGroup) -> str:
    o = group.first
    bits = []
    if o.worker:
        bits.append(f"worker {o.worker}")
    if o.node:
        bits.append(f"on {o.node}")
    if o.rank:
        bits.append(o.rank)
    return f" ({' '.join(bits)})" if bits else ""


def _short(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _by_signature(groups: tuple[FindingGroup, ...]) -> list[tuple[str, list[FindingGroup]]]:
    merged: dict[str, list[FindingGroup]] = {}
    for g in groups:
        merged.setdefault(g.id, []).append(g)
    return list(merged.items())
