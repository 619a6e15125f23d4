"""Result file names and places: the agent's rules (``console.agent``), one set for both sides.

A name says a file's layout and the numbers encoded in it; its place (the dirs between the
job dir, or the results dir, and the file) says whether that layout counts there. The agent
applies the same rules when it reports result files live, so a point shows the same whether it
arrives while the job runs or is read when a screen opens later.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from console import agent

ResultKind = Literal["sa-bench", "legacy", "fixed-seq", "collected", "rollup"]

RESULT_PLACES = agent.RESULT_PLACES


@dataclass(frozen=True)
class ResultName:
    """What a result file's name says: its layout and the numbers encoded in it."""

    kind: ResultKind
    concurrency: int | None = None
    gpus: int | None = None
    ctx: int | None = None
    gen: int | None = None


def parse_result_name(name: str) -> ResultName | None:
    """Classify a result file by its base name; ``None`` when it is not a result file.

    Pure, so that a remote directory listing is classified exactly like a local one.
    ``*.pytorch.json`` companions match the same globs but are not results.
    """
    parsed = agent.parse_result_name(name)
    if parsed is None:
        return None
    kind, concurrency, numbers = parsed
    return ResultName(cast(ResultKind, kind), concurrency, numbers.get("gpus"), numbers.get("ctx"), numbers.get("gen"))


def result_kind(name: str, parts: Iterable[str], *, in_results: bool) -> ResultKind | None:
    """The kind of result file ``name`` is, found ``parts`` dirs below the job dir (or, with
    ``in_results``, below the results dir); ``None`` when it does not count there."""
    return cast("ResultKind | None", agent.result_kind(name, agent.result_place(list(parts), in_results)))


def remote_kind(path: str, job_dir: str, results_dir: str | None) -> ResultKind | None:
    """:func:`result_kind` of a path listed on another machine (POSIX paths)."""
    for root, in_results in ((results_dir, True), (job_dir, False)):
        if not root:
            continue
        rel = posixpath.relpath(path, root.rstrip("/") or "/")
        if rel.startswith("../") or rel == "..":
            continue
        parts = rel.split("/")
        return result_kind(parts[-1], parts[:-1], in_results=in_results)
    return None


# --------------------------------------------------------------------------- discovery


@dataclass(frozen=True)
class ResultFile:
    """A discovered result file with what its name says."""

    path: Path
    name: ResultName

    @property
    def kind(self) -> ResultKind:
        return self.name.kind

    @property
    def concurrency(self) -> int | None:
        return self.name.concurrency


SAFE_JOB_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


def results_dir_of(results_root: Path | None, job_id: str | None) -> Path | None:
    """``<results root>/<job id>``, the dir holding InferenceX's ``fixed-seq/``; None for an unsafe id."""
    if results_root is None or job_id is None or not SAFE_JOB_ID.match(job_id) or job_id in {".", ".."}:
        return None
    return results_root / job_id


def _walk(root: Path, into: str, depth: int) -> list[tuple[Path, list[str]]]:
    """Files of ``root`` and of its subdir ``into`` down to ``depth`` levels (the agent's walk)."""
    return [(Path(path), parts) for _name, path, parts in agent.listing(str(root), into, depth)]


def discover_results(
    job_dir: Path | None,
    *,
    results_root: Path | None = None,
    job_id: str | None = None,
    results_dir: Path | None = None,
) -> list[ResultFile]:
    """Find result files of one job in every known layout, by the agent's rules.

    Looks in the job dir, its ``logs/`` and the subdirs of ``logs/`` (sa-bench, legacy and the
    rollup, InferenceX fixed-seq files under ``logs/fixed-seq/``), and in
    ``<results_root>/<job_id>/`` (``job_id`` defaults to the job dir's name) and its
    ``fixed-seq/`` (or ``results_dir`` itself when given). Only listings are made; no file is
    opened. Sorted by concurrency, the rollup last.
    """
    found: dict[Path, ResultFile] = {}
    roots: list[tuple[Path, bool, str, int]] = []
    if job_dir is not None:
        roots.append((job_dir, False, "logs", 2))
    jid = job_id if job_id is not None else (job_dir.name if job_dir is not None else None)
    results = results_dir if results_dir is not None else results_dir_of(results_root, jid)
    if results is not None:
        roots.append((results, True, "fixed-seq", 1))
    for root, in_results, into, depth in roots:
        for path, parts in _walk(root, into, depth):
            if result_kind(path.name, parts, in_results=in_results) is not None:
                parsed = parse_result_name(path.name)
                if parsed is not None:
                    found[path] = ResultFile(path, parsed)

    def order(rf: ResultFile) -> tuple[int, int, str]:
        c = rf.name.concurrency
        return (1 if c is None else 0, c or 0, str(rf.path))

    return sorted(found.values(), key=order)
