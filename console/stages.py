"""Attempt stage, readiness and per-worker progress, read from srtctl's own log lines.

A :class:`StageTracker` is fed the lines of an attempt's files as they arrive (whole files
from the start, or live appends) and keeps the state::

    tracker = StageTracker()
    changes = tracker.feed("logs/sweep_39443.log", lines)     # StageChange events
    changes += tracker.feed("logs/nodeA_prefill_w0.out", lines)
    snap = tracker.snapshot(scheduler_state="RUNNING")
    snap.stage, snap.readiness.label, snap.workers["nodeA_prefill_w0"].stage

The attempt stage follows the orchestrator log (``sweep_<JOBID>.log``) with the markers
``srtctl monitor`` uses, applied to the whole log rather than its tail: the latest marker
wins until ``[INFO] Cleanup``, after which only the end (completed, failed) can change.
A finished scheduler state turns a stage still in progress into Killed or Timed Out.

Workers come from ``<node>_<mode>_w<idx>.out`` files; their progress (shards loaded, CUDA
graphs captured, server up, registered/ready) from the engines' startup lines (SGLang,
vLLM, ATOM, TensorRT-LLM variants). A worker's stage never goes backwards.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path, PurePath
from typing import Final

import yaml

from console.paths import asset

__all__ = [
    "SWEEP_LOG_RE",
    "WORKER_FILE_RE",
    "Readiness",
    "Stage",
    "StageChange",
    "StageSnapshot",
    "StageTracker",
    "WorkerProgress",
    "WorkerStage",
    "parse_worker_file",
]

_SCAN_CHARS: Final[int] = 4096


# --------------------------------------------------------------------------- the rules (data)


class StageRulesError(Exception):
    """The stage rules file is broken: the message names the file and the entry."""


def _compile(where: str, value: object) -> re.Pattern[str]:
    """A pattern: a string, or ``{pattern, ignorecase}``."""
    flags = 0
    if isinstance(value, dict):
        flags = re.IGNORECASE if value.get("ignorecase") else 0
        value = value.get("pattern")
    if not isinstance(value, str) or not value:
        raise StageRulesError(f"{where}: a non-empty pattern is needed")
    try:
        return re.compile(value, flags)
    except re.error as exc:
        raise StageRulesError(f"{where}: not a valid regex: {exc}") from None


class _Rules:
    """``assets/stages.yaml`` read and checked: every pattern compiled, every keyword a string."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            # libyaml's safe loader when PyYAML has it: the rules are read at import.
            data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except (OSError, yaml.YAMLError) as exc:
            raise StageRulesError(f"{path}: cannot read the stage rules: {exc}") from None
        self.data = data if isinstance(data, dict) else {}

    def _value(self, key: str) -> object:
        node: object = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                raise StageRulesError(f"{self.path}: {key}: missing")
            node = node[part]
        return node

    def pattern(self, key: str) -> re.Pattern[str]:
        return _compile(f"{self.path}: {key}", self._value(key))

    def patterns(self, key: str) -> tuple[re.Pattern[str], ...]:
        items = self._value(key)
        if not isinstance(items, list) or not items:
            raise StageRulesError(f"{self.path}: {key}: a list of patterns is needed")
        return tuple(_compile(f"{self.path}: {key}[{i}]", item) for i, item in enumerate(items))

    def keywords(self, key: str) -> tuple[str, ...]:
        items = self._value(key)
        if not isinstance(items, list) or not all(isinstance(k, str) and k for k in items):
            raise StageRulesError(f"{self.path}: {key}: a list of non-empty strings is needed")
        return tuple(items)

    def rule(self, key: str, value: object = None) -> tuple[str, re.Pattern[str]]:
        """(keyword, pattern): the pattern is tried only on lines holding the keyword."""
        value = self._value(key) if value is None else value
        keyword = value.get("keyword") if isinstance(value, dict) else None
        if not isinstance(keyword, str) or not keyword:
            raise StageRulesError(f"{self.path}: {key}: a keyword is needed")
        return keyword, _compile(f"{self.path}: {key}", value)

    def stage_rules(self, key: str) -> tuple[tuple[str, re.Pattern[str], Stage], ...]:
        items = self._value(key)
        if not isinstance(items, list) or not items:
            raise StageRulesError(f"{self.path}: {key}: a list of rules is needed")
        rules = []
        for i, item in enumerate(items):
            keyword, pattern = self.rule(f"{key}[{i}]", item)
            try:
                stage = Stage(item.get("stage"))
            except ValueError:
                raise StageRulesError(f"{self.path}: {key}[{i}]: unknown stage {item.get('stage')!r}") from None
            rules.append((keyword, pattern, stage))
        return tuple(rules)


_RULES: Final = _Rules(asset("stages.yaml"))

WORKER_FILE_RE: Final = _RULES.pattern("files.worker")
SWEEP_LOG_RE: Final = _RULES.pattern("files.sweep_log")


class Stage(str, Enum):
    """Stage of an attempt, in the order srtctl goes through them."""

    INITIALIZING = "Initializing"
    STARTING = "Starting"
    STARTING_INFRA = "Starting Infra"
    HEAD_READY = "Head Ready"
    STARTING_WORKERS = "Starting Workers"
    STARTING_FRONTEND = "Starting Frontend"
    AWAITING_WORKERS = "Awaiting Workers"
    BENCHMARKING = "Benchmarking"
    FINALIZING = "Finalizing"
    COMPLETED = "Completed"
    FAILED = "Failed"
    KILLED = "Killed"
    TIMED_OUT = "Timed Out"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL: Final = frozenset({Stage.COMPLETED, Stage.FAILED, Stage.KILLED, Stage.TIMED_OUT})


class WorkerStage(str, Enum):
    """Startup progress of one worker; the order of the members is the order of progress."""

    STARTING = "starting"
    LOADING = "loading shards"
    LOADED = "shards loaded"
    CAPTURING = "capturing graphs"
    CAPTURED = "graphs captured"
    SERVER_UP = "server up"
    READY = "ready"
    FAILED = "failed"

    @property
    def rank(self) -> int:
        return _WORKER_ORDER[self]


_WORKER_ORDER: Final = {stage: i for i, stage in enumerate(WorkerStage)}


@dataclass(frozen=True)
class StageChange:
    """One change: ``subject`` is ``"stage"``, ``"readiness"`` or a worker's name."""

    subject: str
    old: str | None
    new: str
    file: str
    line_no: int  # 1-based line of the file that caused it (0: not caused by a line)

    def as_dict(self) -> dict[str, object]:
        return {"subject": self.subject, "old": self.old, "new": self.new, "file": self.file, "line_no": self.line_no}


@dataclass(frozen=True)
class Readiness:
    """Workers registered with the frontend, as the orchestrator reports them."""

    have_prefill: int = 0
    want_prefill: int = 0
    have_decode: int = 0  # aggregated workers count as decodes, as srtctl does
    want_decode: int = 0
    ready: bool = False
    known: bool = False  # a readiness or expectation line has been seen

    @property
    def label(self) -> str:
        """``2/4P 4/4D``; the prefill part is left out when no prefill is expected."""
        if not self.known:
            return ""
        parts = []
        if self.want_prefill or self.have_prefill:
            parts.append(f"{self.have_prefill}/{self.want_prefill}P")
        if self.want_decode or self.have_decode or not parts:
            parts.append(f"{self.have_decode}/{self.want_decode}D")
        return " ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "have_prefill": self.have_prefill,
            "want_prefill": self.want_prefill,
            "have_decode": self.have_decode,
            "want_decode": self.want_decode,
            "ready": self.ready,
        }


@dataclass
class WorkerProgress:
    """One worker log file's progress. ``name`` is the file stem (``<node>_<mode>_w<idx>``)."""

    name: str
    node: str
    mode: str
    index: int
    file: str
    stage: WorkerStage = WorkerStage.STARTING
    shards_loaded: int | None = None
    shards_total: int | None = None
    graphs_captured: int | None = None
    graphs_total: int | None = None
    server_up: bool = False
    ready: bool = False
    failure: str | None = None
    failure_line: int | None = None  # the line of this worker's file that names its failure
    # Failed only by a consequence (killed, cancelled): undone when the run succeeded after all.
    failed_by_consequence: bool = False
    before_failure: WorkerStage | None = None
    # Failed by a startup finding its server may still outlive (a NIC Mooncake could not open
    # while it went on with the others): undone by the worker's ready line.
    outlivable: bool = False

    @property
    def worker(self) -> str:
        """The logical worker (``prefill_w0``); a multi-node worker has one file per node."""
        return f"{self.mode}_w{self.index}"

    @property
    def shards_label(self) -> str:
        if self.shards_total is None:
            return ""
        return f"{self.shards_loaded or 0}/{self.shards_total}"

    @property
    def graphs_label(self) -> str:
        if self.graphs_total is None:
            return "done" if self.stage.rank >= WorkerStage.CAPTURED.rank and self.graphs_captured else ""
        return f"{self.graphs_captured or 0}/{self.graphs_total}"

    def copy(self) -> WorkerProgress:
        return WorkerProgress(**{f: getattr(self, f) for f in self.__dataclass_fields__})

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "worker": self.worker,
            "node": self.node,
            "mode": self.mode,
            "index": self.index,
            "file": self.file,
            "stage": self.stage.value,
            "shards": self.shards_label or None,
            "graphs": self.graphs_label or None,
            "server_up": self.server_up,
            "ready": self.ready,
            "failure": self.failure,
            "failure_at": self.failure_at,
        }

    @property
    def failure_at(self) -> str | None:
        """``<file name>:<line>`` of the line naming the failure, when a line of this worker's log does."""
        return f"{PurePath(self.file).name}:{self.failure_line}" if self.failure and self.failure_line else None


@dataclass(frozen=True)
class StageSnapshot:
    """The tracker's state at one moment (copies: safe to keep)."""

    stage: Stage
    readiness: Readiness
    workers: dict[str, WorkerProgress] = field(default_factory=dict)
    job_id: str | None = None
    nodes: int | None = None
    failing: bool = False  # the orchestrator logged a failure (health timeout, critical exit ...)
    failure: str | None = None  # the first such line's message
    succeeded: bool = False  # the orchestrator said the benchmark (or the whole sweep) completed successfully
    cleanup: tuple[str, int, str] | None = None  # the orchestrator's `[INFO] Cleanup` line: file, line, text

    def as_dict(self) -> dict[str, object]:
        return {
            "stage": self.stage.value,
            "readiness": self.readiness.as_dict(),
            "workers": {name: w.as_dict() for name, w in sorted(self.workers.items())},
            "job_id": self.job_id,
            "nodes": self.nodes,
            "failing": self.failing,
            "failure": self.failure,
            "succeeded": self.succeeded,
        }


def parse_worker_file(path: str) -> tuple[str, str, int] | None:
    """``(node, mode, index)`` of a worker log file name, or None."""
    m = WORKER_FILE_RE.match(PurePath(path).name)
    if m is None:
        return None
    return m.group("node"), m.group("mode"), int(m.group("idx"))


# --------------------------------------------------------------------------- sweep log rules

# Checked in order; the first rule that matches a line decides it, as in `srtctl monitor`.
_STAGE_RULES: Final = _RULES.stage_rules("sweep.stages")
_SWEEP_DONE_RE: Final = _RULES.pattern("sweep.done")
_SWEEP_FAILED_KEY, _SWEEP_FAILED_RE = _RULES.rule("sweep.failed")
_CLEANUP_KEY, _CLEANUP_RE = _RULES.rule("sweep.cleanup")
_BENCH_OK_KEY, _BENCH_OK_RE = _RULES.rule("sweep.benchmark_ok")
_SIGTERM_KEY, _SIGTERM_RE = _RULES.rule("sweep.signalled")
_TIME_LIMIT_KEY, _TIME_LIMIT_RE = _RULES.rule("sweep.time_limit")
_JOB_ID_KEY, _JOB_ID_RE = _RULES.rule("sweep.job_id")
_NODES_KEY, _NODES_RE = _RULES.rule("sweep.nodes")
_WORKER_NODES_KEY, _WORKER_NODES_RE = _RULES.rule("sweep.worker_nodes")
_FAILED_KEYS: Final = _RULES.keywords("sweep.failure_keywords")
_FAILED_RES: Final = _RULES.patterns("sweep.failures")
_CRITICAL_RE: Final = _RULES.pattern("sweep.critical_exit")
_PROCESS_RE: Final = _RULES.pattern("files.process")

_READINESS_KEYS: Final = _RULES.keywords("readiness.keywords")
_NOT_READY_RE: Final = _RULES.pattern("readiness.not_ready")
_READY_RE: Final = _RULES.pattern("readiness.ready")
_EXPECT_PD_RE: Final = _RULES.pattern("readiness.expect_pd")
_EXPECT_AGG_RE: Final = _RULES.pattern("readiness.expect_agg")
_POLL_FOR_RE: Final = _RULES.pattern("readiness.poll_for")
_OTHER_READY_RE: Final = _RULES.pattern("readiness.other_ready")

# --------------------------------------------------------------------------- worker rules

_WORKER_KEYS: Final = _RULES.keywords("worker.keywords")
_LOADING_KEYS: Final = _RULES.keywords("worker.loading.keywords")
_SHARDS_RE: Final = _RULES.pattern("worker.loading.shards")
_LOADED_RE: Final = _RULES.pattern("worker.loading.loaded")
_GRAPH_KEYS: Final = _RULES.keywords("worker.graphs.keywords")
_GRAPH_BAR_RE: Final = _RULES.pattern("worker.graphs.bar")
_GRAPH_BEGIN_RE: Final = _RULES.pattern("worker.graphs.begin")
_GRAPH_END_RE: Final = _RULES.pattern("worker.graphs.end")
_SERVER_UP_RE: Final = _RULES.pattern("worker.server_up")
_READY_KEYS: Final = _RULES.keywords("worker.ready_keywords")
_READY_WORKER_RE: Final = _RULES.pattern("worker.ready")


class StageTracker:
    """Stage, readiness and worker progress of one attempt, kept as lines arrive."""

    def __init__(self) -> None:
        self._stage = Stage.INITIALIZING
        self._cleanup = False
        self._cleanup_mark: tuple[str, int, str] | None = None
        self._bench_ok = False
        self._failed = False
        self._failure: str | None = None
        self._final: Stage | None = None  # from the batch script's last line
        self._signalled = False
        self._time_limit = False
        self._readiness = Readiness()
        self._workers: dict[str, WorkerProgress] = {}
        self._line_counts: dict[str, int] = {}
        self._job_id: str | None = None
        self._nodes: int | None = None
        self._worker_nodes: tuple[str, ...] = ()
        self._scheduler_state: str | None = None
        # Critical-exit lines of the sweep log, by (node, mode, index): the worker's file
        # may be fed after the sweep log.
        self._exits: dict[tuple[str, str, int], tuple[str, str, int]] = {}
        # The first line where each log said its server is ready (not only listening: SGLang's
        # HTTP server is up before its DP ranks fail to bind): a startup failure written above it
        # did not stop the start.
        self._ready_at: dict[str, int] = {}

    # ------------------------------------------------------------------ feeding

    def feed(self, file: str, lines: Iterable[str], *, first_line_no: int | None = None) -> list[StageChange]:
        """Take the next lines of ``file`` (in order); return what changed.

        Line numbers continue from the lines already fed for that file unless
        ``first_line_no`` (1-based) says where ``lines`` start.
        """
        name = PurePath(file).name
        count = self._line_counts.get(file, 0) if first_line_no is None else first_line_no - 1
        changes: list[StageChange] = []
        if SWEEP_LOG_RE.match(name):
            for line in lines:
                count += 1
                self._sweep_line(file, count, line[:_SCAN_CHARS], changes)
        else:
            parsed = WORKER_FILE_RE.match(name)
            if parsed is None:
                for line in lines:
                    count += 1
                    if (
                        file not in self._ready_at
                        and any(k in line for k in _READY_KEYS)
                        and _READY_WORKER_RE.search(line[:_SCAN_CHARS])
                    ):
                        self._ready_at[file] = count
            else:
                worker = self._worker(file, parsed, changes)
                for line in lines:
                    count += 1
                    self._worker_line(worker, file, count, line[:_SCAN_CHARS], changes)
        self._line_counts[file] = max(count, self._line_counts.get(file, 0))
        return changes

    @staticmethod
    def line_keywords(file: str) -> tuple[str, ...] | None:
        """The literals that make a line of ``file`` matter to the tracker (case-sensitive; a
        line without any of them only counts); None when every line does (the sweep log)."""
        name = PurePath(file).name
        if SWEEP_LOG_RE.match(name):
            return None
        return _WORKER_KEYS if WORKER_FILE_RE.match(name) else _READY_KEYS  # any log may say it is ready

    @property
    def ready_lines(self) -> Mapping[str, int]:
        """Each log's first line that says its server is ready."""
        return self._ready_at

    def feed_line(self, file: str, line: str) -> list[StageChange]:
        return self.feed(file, (line,))

    def lines_seen(self, file: str) -> int:
        return self._line_counts.get(file, 0)

    @property
    def has_sweep_log(self) -> bool:
        """Whether lines of an orchestrator log (``sweep_<JOBID>.log``) were fed."""
        return any(SWEEP_LOG_RE.match(PurePath(f).name) for f in self._line_counts)

    def mark_worker_failed(
        self,
        file: str,
        reason: str,
        line_no: int = 0,
        *,
        consequence: bool = False,
        rename: bool = False,
        outlivable: bool = False,
    ) -> list[StageChange]:
        """Record that the worker writing ``file`` failed (a fatal finding in its log);
        ``consequence`` says the finding only tells that it was stopped (cancelled, killed);
        ``rename`` gives the failure a better name (a cause after a consequence, a narrower
        signature of the same failure); ``outlivable`` says its ready line would undo it."""
        parsed = WORKER_FILE_RE.match(PurePath(file).name)
        if parsed is None:
            return []
        changes: list[StageChange] = []
        worker = self._worker(file, parsed, changes)
        if rename and worker.stage is WorkerStage.FAILED:
            worker.failure, worker.failure_line = reason, line_no or None
            worker.failed_by_consequence = consequence
            worker.outlivable = outlivable
            return changes
        if worker.stage is not WorkerStage.FAILED:
            worker.before_failure = worker.stage
            worker.failed_by_consequence = consequence
            worker.outlivable = outlivable
        elif not consequence and worker.failed_by_consequence:
            # A cause found after a consequence is the worker's failure.
            worker.failed_by_consequence = False
            worker.failure, worker.failure_line = reason, line_no or None
        if worker.failure is None or worker.failure.startswith("exited with code"):
            # A finding in the worker's own log says more than its exit code.
            worker.failure, worker.failure_line = reason, line_no or None
        worker.outlivable = worker.outlivable and outlivable
        self._advance(worker, WorkerStage.FAILED, file, line_no, changes)
        return changes

    def set_scheduler_state(self, state: str | None) -> list[StageChange]:
        """Tell the tracker the scheduler's state; a finished job ends a stage in progress."""
        before = self.stage
        self._scheduler_state = _state_name(state)
        after = self.stage
        if after is before:
            return []
        return [StageChange("stage", before.value, after.value, "", 0)]

    # ------------------------------------------------------------------ reading

    @property
    def stage(self) -> Stage:
        return self._resolve(self._scheduler_state)

    @property
    def readiness(self) -> Readiness:
        return self._readiness

    @property
    def job_id(self) -> str | None:
        return self._job_id

    @property
    def nodes(self) -> int | None:
        """Node count of the allocation (the batch banner), else the nodes seen in worker files."""
        if self._nodes is not None:
            return self._nodes
        nodes = {w.node for w in self._workers.values()} | set(self._worker_nodes)
        return len(nodes) or None

    @property
    def failing(self) -> bool:
        return self._failed

    def snapshot(self, scheduler_state: str | None = None) -> StageSnapshot:
        """The current state; ``scheduler_state`` overrides the one set for this call only."""
        state = _state_name(scheduler_state) if scheduler_state is not None else self._scheduler_state
        workers = {name: w.copy() for name, w in self._workers.items()}
        succeeded = (self._bench_ok and not self._failed) or self._final is Stage.COMPLETED
        if succeeded:
            # Stopped by the orchestrator's own cleanup after a good run: not a failed worker.
            for w in workers.values():
                if w.stage is WorkerStage.FAILED and w.failed_by_consequence and w.before_failure is not None:
                    w.stage, w.failure, w.failure_line = w.before_failure, None, None
        if self._readiness.ready:
            for w in workers.values():
                if w.stage is not WorkerStage.FAILED and w.stage.rank < WorkerStage.READY.rank:
                    w.stage = WorkerStage.READY
                    w.ready = True
        return StageSnapshot(
            stage=self._resolve(state),
            readiness=self._readiness,
            workers=workers,
            job_id=self._job_id,
            nodes=self.nodes,
            failing=self._failed,
            failure=self._failure,
            succeeded=succeeded,
            cleanup=self._cleanup_mark,
        )

    # ------------------------------------------------------------------ internals

    def _resolve(self, state: str | None) -> Stage:
        if self._final is not None:
            return self._final
        if self._cleanup:
            if self._bench_ok:
                stage = Stage.COMPLETED
            elif self._failed:
                stage = Stage.FAILED
            else:
                stage = Stage.FINALIZING
        else:
            stage = self._stage
        if state is None or stage.terminal or state in _LIVE_STATES:
            return stage
        if state == "TIMEOUT" or state == "DEADLINE" or self._time_limit:
            return Stage.TIMED_OUT
        if self._failed:
            return Stage.FAILED
        if state == "COMPLETED" and stage is Stage.FINALIZING:
            return Stage.COMPLETED
        return Stage.KILLED

    def _set_stage(self, before: Stage, file: str, line_no: int, changes: list[StageChange]) -> None:
        after = self.stage
        if after is not before:
            changes.append(StageChange("stage", before.value, after.value, file, line_no))

    def _sweep_line(self, file: str, line_no: int, line: str, changes: list[StageChange]) -> None:
        before = self.stage
        if self._stage is Stage.INITIALIZING and line.strip():
            # The batch script writes its banner first; any line means it runs.
            self._stage = Stage.STARTING
        self._sweep_facts(line)
        self._readiness_line(file, line_no, line, changes)
        if _SWEEP_DONE_RE.search(line):
            self._final = Stage.COMPLETED
        elif _SWEEP_FAILED_KEY in line and _SWEEP_FAILED_RE.search(line):
            self._final = Stage.FAILED
            self._note_failure(line)
        elif _CLEANUP_KEY in line and _CLEANUP_RE.search(line):
            self._cleanup = True
            if self._cleanup_mark is None:
                self._cleanup_mark = (file, line_no, line)
        else:
            if _BENCH_OK_KEY in line and _BENCH_OK_RE.search(line):
                self._bench_ok = True
            if any(k in line for k in _FAILED_KEYS):
                for pattern in _FAILED_RES:
                    if pattern.search(line):
                        self._note_failure(line)
                        break
                critical = _CRITICAL_RE.search(line)
                if critical is not None:
                    self._critical_exit(critical, file, line_no, changes)
            if _SIGTERM_KEY in line and _SIGTERM_RE.search(line):
                self._signalled = True
            if _TIME_LIMIT_KEY in line and _TIME_LIMIT_RE.search(line):
                self._time_limit = True
            if not self._cleanup:
                for keyword, pattern, stage in _STAGE_RULES:
                    if keyword in line and pattern.search(line):
                        self._stage = stage
                        break
        self._set_stage(before, file, line_no, changes)

    def _note_failure(self, line: str) -> None:
        if not self._failed:
            self._failed = True
            self._failure = _message(line)

    def _sweep_facts(self, line: str) -> None:
        if self._job_id is None and _JOB_ID_KEY in line:
            m = _JOB_ID_RE.search(line)
            if m is not None:
                self._job_id = m.group("job")
        if self._nodes is None and _NODES_KEY in line:
            m = _NODES_RE.search(line)
            if m is not None:
                self._nodes = int(m.group("n"))
        if not self._worker_nodes and _WORKER_NODES_KEY in line:
            m = _WORKER_NODES_RE.search(line)
            if m is not None:
                self._worker_nodes = tuple(n.strip() for n in m.group("nodes").split(",") if n.strip())

    def _readiness_line(self, file: str, line_no: int, line: str, changes: list[StageChange]) -> None:
        if not any(k in line for k in _READINESS_KEYS):
            return
        old = self._readiness
        new = old
        m = _NOT_READY_RE.search(line)
        if m is not None:
            wp, wd, hp, hd = (int(g) for g in m.groups())
            new = Readiness(hp, max(hp + wp, 0), hd, max(hd + wd, 0), ready=False, known=True)
        elif (m := _READY_RE.search(line)) is not None:
            hp, hd = int(m.group(1)), int(m.group(2))
            new = Readiness(hp, max(hp, old.want_prefill), hd, max(hd, old.want_decode), ready=True, known=True)
        elif (m := _EXPECT_PD_RE.search(line)) is not None or (m := _POLL_FOR_RE.search(line)) is not None:
            wp, wd = int(m.group(1)), int(m.group(2))
            new = Readiness(old.have_prefill, wp, old.have_decode, wd, ready=old.ready, known=True)
        elif (m := _EXPECT_AGG_RE.search(line)) is not None:
            new = Readiness(0, 0, old.have_decode, int(m.group(1)), ready=old.ready, known=True)
        elif _OTHER_READY_RE.search(line):
            new = Readiness(old.want_prefill, old.want_prefill, old.want_decode, old.want_decode, True, old.known)
        if new != old:
            self._readiness = new
            if new.label != old.label or new.ready != old.ready:
                label = new.label + (" ready" if new.ready else "")
                old_label = (old.label + (" ready" if old.ready else "")) or None
                changes.append(StageChange("readiness", old_label, label.strip(), file, line_no))

    def _critical_exit(self, m: re.Match[str], file: str, line_no: int, changes: list[StageChange]) -> None:
        # srtctl names worker processes `<mode>_<idx>_<node>`.
        name = m.group("name")
        pm = _PROCESS_RE.match(name)
        if pm is None:
            return
        key = (pm.group("node"), pm.group("mode"), int(pm.group("idx")))
        reason = f"exited with code {m.group('code')}"
        self._exits.setdefault(key, (reason, file, line_no))
        for worker in self._workers.values():
            if (worker.node, worker.mode, worker.index) == key:
                self._exited(worker, reason, file, line_no, changes)

    def _exited(self, worker: WorkerProgress, reason: str, file: str, line_no: int, changes: list[StageChange]) -> None:
        if worker.failure is None:
            worker.failure = reason
        self._advance(worker, WorkerStage.FAILED, file, line_no, changes)

    def _worker(self, file: str, parsed: re.Match[str], changes: list[StageChange]) -> WorkerProgress:
        name = PurePath(file).name[: -len(".out")]
        worker = self._workers.get(name)
        if worker is None:
            worker = WorkerProgress(
                name=name,
                node=parsed.group("node"),
                mode=parsed.group("mode"),
                index=int(parsed.group("idx")),
                file=file,
            )
            self._workers[name] = worker
            changes.append(StageChange(name, None, worker.stage.value, file, 0))
            exited = self._exits.get((worker.node, worker.mode, worker.index))
            if exited is not None:
                self._exited(worker, *exited, changes)
        return worker

    def _worker_line(
        self, worker: WorkerProgress, file: str, line_no: int, line: str, changes: list[StageChange]
    ) -> None:
        # The hot path: most worker lines hold none of these words.
        if not any(k in line for k in _WORKER_KEYS):
            return
        if any(k in line for k in _LOADING_KEYS):
            found = _last_match(_SHARDS_RE, line)
            if found is not None:
                done, total = int(found.group(1)), int(found.group(2))
                worker.shards_loaded, worker.shards_total = done, total
                stage = WorkerStage.LOADED if total and done >= total else WorkerStage.LOADING
                self._advance(worker, stage, file, line_no, changes)
                return
            if _LOADED_RE.search(line):
                if worker.shards_total is not None:
                    worker.shards_loaded = worker.shards_total
                self._advance(worker, WorkerStage.LOADED, file, line_no, changes)
                return
        if any(k in line for k in _GRAPH_KEYS):
            bar = _last_match(_GRAPH_BAR_RE, line)
            if bar is not None:
                done, total = int(bar.group(1)), int(bar.group(2))
                worker.graphs_captured, worker.graphs_total = done, total
                self._advance(worker, WorkerStage.CAPTURING, file, line_no, changes)
                return
            if _GRAPH_END_RE.search(line):
                if worker.graphs_total is not None:
                    worker.graphs_captured = worker.graphs_total
                else:
                    worker.graphs_captured = 1
                self._advance(worker, WorkerStage.CAPTURED, file, line_no, changes)
                return
            if _GRAPH_BEGIN_RE.search(line):
                self._advance(worker, WorkerStage.CAPTURING, file, line_no, changes)
                return
        if _READY_WORKER_RE.search(line):
            worker.server_up = True
            worker.ready = True
            self._ready_at.setdefault(file, line_no)
            if worker.stage is WorkerStage.FAILED and worker.outlivable:
                # It outlived the startup failure that marked it failed: it is serving.
                worker.stage, worker.failure, worker.failure_line = WorkerStage.READY, None, None
                worker.outlivable = False
                changes.append(StageChange(worker.name, "failed", WorkerStage.READY.value, file, line_no))
            else:
                self._advance(worker, WorkerStage.READY, file, line_no, changes)
        elif _SERVER_UP_RE.search(line):
            worker.server_up = True
            self._advance(worker, WorkerStage.SERVER_UP, file, line_no, changes)

    @staticmethod
    def _advance(
        worker: WorkerProgress, stage: WorkerStage, file: str, line_no: int, changes: list[StageChange]
    ) -> None:
        if worker.stage is WorkerStage.FAILED or stage.rank <= worker.stage.rank:
            return
        old = worker.stage
        worker.stage = stage
        changes.append(StageChange(worker.name, old.value, stage.value, file, line_no))


_LIVE_STATES: Final = frozenset({"PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "CONFIGURING", "REQUEUED"})
_PREFIX_RE: Final = _RULES.pattern("files.message_prefix")


def _state_name(state: object) -> str | None:
    if state is None:
        return None
    value = getattr(state, "value", state)
    return str(value).strip().upper().split(" ")[0] or None


def _message(line: str) -> str:
    return _PREFIX_RE.sub("", line.strip())[:300]


def _last_match(pattern: re.Pattern[str], line: str) -> re.Match[str] | None:
    """The last match in the line (a progress bar rewritten with carriage returns)."""
    last = None
    for last in pattern.finditer(line):  # noqa: B007 - only the last one is wanted
        pass
    return last
