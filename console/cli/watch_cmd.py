"""`srt-console watch ATTEMPT|SWEEP`: stage changes, findings, diagnosis and points, live."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from console.cli.context import CliError, open_context, resolve_attempts
from console.cli.exits import EXIT_BAD, EXIT_OK, fail
from console.describe import shown
from console.events import AgentChanged, AttemptChanged, CoreEvent, FileSkipped, PointArrived, TrackingError, Triaged
from console.ids import attempt_ref
from console.sanitize import clean_line

SETTLE_AFTER_END_S = 3.0


def cmd_watch(args: argparse.Namespace) -> int:
    try:
        ctx = open_context(args.config)
        attempts = resolve_attempts(ctx.store, args.target)
    except CliError as exc:
        return fail(str(exc), code=exc.code)
    printer = _Printer(
        args.json, {a.id: attempt_ref(a.arm_id, a.number) for a in attempts}, {a.id for a in attempts if a.simulated}
    )

    verdicts: list[str] = []

    async def run() -> None:
        ctx.subscribe(printer.event)
        ids = [a.id for a in attempts]
        ended_at: float | None = None

        def settled() -> bool:
            # Every attempt ended, and their last lines and results had time to arrive.
            nonlocal ended_at
            if any(ctx.store.attempt(i).live for i in ids):
                return False
            ended_at = ended_at or time.monotonic()
            return time.monotonic() - ended_at >= SETTLE_AFTER_END_S

        try:
            for attempt in attempts:
                await ctx.monitor.follow(attempt)
            await ctx.track(until=settled, follow=False)
            for attempt_id in ids:
                view = ctx.monitor.views.get(attempt_id)
                if view is not None:
                    row = ctx.store.attempt(attempt_id)
                    diagnosis = view.triage.diagnose(row.state, cancelled=row.cancelled_by_operator)
                    printer.final(attempt_id, diagnosis.to_json())
                    verdicts.append(diagnosis.verdict)
        finally:
            await ctx.close()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        return 130
    # For scripts: non-zero when an attempt is failed or doomed (a cancel by you is neither).
    return EXIT_BAD if any(v in ("failed", "doomed") for v in verdicts) else EXIT_OK


class _Printer:
    """One line per event: readable, or one JSON object per line with --json."""

    def __init__(self, as_json: bool, refs: dict[int, str], simulated: set[int] | None = None) -> None:
        self.as_json = as_json
        self.refs = refs
        self.simulated = simulated or set()  # attempts of the demo launcher
        self._stage: dict[int, tuple[str, str]] = {}
        self._verdict: dict[int, tuple[str, str | None, bool]] = {}
        self._seen: set[tuple[int, str, str | None, str | None]] = set()

    def _out(self, attempt_id: int | None, kind: str, text: str, doc: dict[str, Any]) -> None:
        ref = self.refs.get(attempt_id or -1, "")
        if self.as_json:
            print(json.dumps({"attempt": ref or None, "event": kind, **doc}), flush=True)
        else:
            print(f"{time.strftime('%H:%M:%S')} {ref:<7} {kind:<9} {shown(text, 2000)}", flush=True)

    def event(self, event: CoreEvent) -> None:
        if isinstance(event, AttemptChanged) and event.attempt.id in self.refs:
            a = event.attempt
            reason = f" ({a.reason})" if a.reason else ""
            sim = " [simulated]" if a.simulated else ""
            self._out(a.id, "state", f"{a.state}{reason} job {a.job_id}{sim}",
                      {"state": a.state, "reason": a.reason, "simulated": a.simulated})  # fmt: skip
        elif isinstance(event, Triaged) and event.attempt_id in self.refs:
            snap = event.snapshot
            stage = (snap.stage.value, snap.readiness.label)
            if self._stage.get(event.attempt_id) != stage:
                self._stage[event.attempt_id] = stage
                self._out(event.attempt_id, "stage", " ".join(s for s in stage if s), snap.as_dict())
            for finding in event.new_findings:
                # One line per signature and worker: every DP rank repeating it adds nothing new.
                key = (event.attempt_id, finding.id, finding.node, finding.worker)
                if finding.quoted or key in self._seen:
                    continue
                self._seen.add(key)
                text = clean_line(finding.text, 300)
                where = f"{finding.file.rsplit('/', 1)[-1]}:{finding.line_no}"
                self._out(event.attempt_id, "finding", f"{finding.severity.upper()} {finding.id} {where}  {text}",
                          finding.to_json())  # fmt: skip
            diagnosis = event.diagnosis
            root = diagnosis.root_cause.id if diagnosis.root_cause else None
            verdict = (diagnosis.verdict, root, diagnosis.deterministic)
            if self._verdict.get(event.attempt_id) != verdict:
                self._verdict[event.attempt_id] = verdict
                detail = f"{diagnosis.verdict}: root cause {root}" if root else diagnosis.verdict
                if diagnosis.deterministic:
                    detail += " (deterministic)"
                self._out(event.attempt_id, "diagnosis", f"{detail}. {diagnosis.advice}", diagnosis.to_json())
        elif isinstance(event, PointArrived) and event.attempt_id in self.refs:
            p = event.point
            tput = f"{p.output_tok_s:.0f} tok/s" if p.output_tok_s is not None else ""
            simulated = event.attempt_id in self.simulated
            doc = {**p.to_json(), "simulated": simulated}
            self._out(
                event.attempt_id,
                "point",
                f"c={p.concurrency} {p.status} {tput}" + (" [simulated]" if simulated else ""),
                doc,
            )
        elif isinstance(event, AgentChanged):
            self._out(None, "follow", f"{event.cluster}: {event.status.state.value} {event.status.message}",
                      {"cluster": event.cluster, "state": event.status.state.value})  # fmt: skip
        elif isinstance(event, FileSkipped) and event.attempt_id in self.refs:
            self._out(event.attempt_id, "skipped", clean_line(f"not read: {event.file}: {event.reason}"),
                      {"file": event.file, "reason": event.reason})  # fmt: skip
        elif isinstance(event, TrackingError):
            where = event.cluster or "tracking"
            self._out(None, "error", f"{where}: {event.message}", {"cluster": event.cluster, "message": event.message})

    def final(self, attempt_id: int, diagnosis: dict[str, Any]) -> None:
        root = diagnosis.get("root_cause") or {}
        text = f"{diagnosis.get('verdict')}" + (f": {root.get('id')}" if root else "")
        self._out(attempt_id, "final", f"{text}. {diagnosis.get('advice') or ''}".strip(), {"diagnosis": diagnosis})
