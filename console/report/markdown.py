"""A report as paste-ready GitHub Markdown, and as one JSON document.

Everything from outside (log lines, paths, recipe values, Slurm's words) is cleaned of control
characters first, table cells have their pipes escaped, and quoted log lines sit in code fences
longer than any backtick run they hold: nothing from a log can break out of its place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from console.diagnosis import FindingGroup
from console.ids import arm_ref
from console.provenance import Provenance
from console.report.gather import ArmFacts, AttemptFacts, Report
from console.report.words import duration, timestamp
from console.results import PointResult
from console.sanitize import clean_line

_MAX_CELL = 300


def text(value: object, limit: int = _MAX_CELL) -> str:
    """Inert one-line text for Markdown prose and table cells."""
    return clean_line(str(value), limit).replace("|", "\\|")


def code(value: object, limit: int = _MAX_CELL) -> str:
    """Inline code; a value holding backticks gets a longer delimiter."""
    cleaned = clean_line(str(value), limit).replace("|", "\\|")
    runs = [len(r) for r in re.findall(r"`+", cleaned)]
    tick = "`" * (max(runs, default=0) + 1)
    pad = " " if cleaned.startswith("`") or cleaned.endswith("`") else ""
    return f"{tick}{pad}{cleaned}{pad}{tick}"


def fence(line: str) -> list[str]:
    cleaned = clean_line(line, 2000)
    runs = [len(r) for r in re.findall(r"`+", cleaned)]
    tick = "`" * max(3, max(runs, default=0) + 1)
    return [tick + "text", cleaned, tick]


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _table(header: list[str], rows: Iterable[list[str]], right: Iterable[int] = ()) -> list[str]:
    aligned = set(right)
    out = ["| " + " | ".join(header) + " |"]
    out.append("|" + "|".join("---:" if i in aligned else "---" for i in range(len(header))) + "|")
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def _points_summary(points: list[PointResult]) -> str:
    counts: dict[str, int] = {}
    for p in points:
        counts[p.status] = counts.get(p.status, 0) + 1
    order = ("done", "running", "missing", "invalid", "incomplete")
    return ", ".join(f"{counts[s]} {s}" for s in order if counts.get(s)) or "none expected"


def _state(a: AttemptFacts) -> str:
    row = a.attempt
    state = row.state
    if row.exit_code and row.exit_code not in ("", "0:0"):
        state += f" {row.exit_code}"
    if row.cancelled_by_operator:
        state += " (cancelled by you)"
    if row.reason and row.live:
        state += f" ({row.reason})"
    return state


def render_markdown(report: Report) -> str:
    lines: list[str] = [f"## Validation report: {text(report.title)}", ""]
    where = ", ".join(code(c) for c in report.clusters) or "-"
    lines.append(f"Cluster {where} · {len(report.arms)} arm(s) · generated {timestamp(report.generated_at)}")
    if report.simulated:
        lines += ["", "> **Simulated:** these runs are the demo engine's (no GPU ran them); their numbers are "
                  "a model's, not hardware's."]  # fmt: skip
    lines.append("")
    running = report.still_running
    if running:
        names = [f"{text(arm.arm.name)} ({a.ref}, job {text(a.attempt.job_id or '-')}, {text(_state(a))})"
                 for arm, a in running]  # fmt: skip
        lines.append("**Still running:** " + "; ".join(names))
    else:
        lines.append("**Still running:** none")
    lines.append("")
    rows = []
    for arm in report.arms:
        for a in arm.attempts:
            row = a.attempt
            rows.append([
                text(arm.arm.name), a.ref, text(row.job_id or "-"), text(_state(a)), text(row.nodelist or "-"),
                timestamp(row.started_at), timestamp(row.ended_at), duration(row.elapsed()),
                text(a.diagnosis.verdict if a.diagnosis else "-"), _points_summary(a.points),
            ])  # fmt: skip
    header = ["arm", "attempt", "Slurm job", "state", "nodes", "start", "end", "elapsed", "verdict", "points"]
    lines += _table(header, rows)
    for arm in report.arms:
        lines += ["", *_arm(arm)]
    return "\n".join(lines).rstrip() + "\n"


def _arm(arm: ArmFacts) -> list[str]:
    s = arm.arm.summary
    out = [f"### {arm.ref} {text(arm.arm.name)}", ""]
    bits = []
    if s.get("node_demand") is not None:
        bits.append(f"{s['node_demand']} node(s)")
    if s.get("backend"):
        bits.append(f"{text(s['backend'])}/{text(s.get('frontend') or '-')}")
    if s.get("isl") or s.get("osl"):
        bits.append(f"ISL/OSL {s.get('isl') or '?'}/{s.get('osl') or '?'}")
    grid = s.get("concurrencies")
    if isinstance(grid, list) and grid:
        bits.append("points " + ", ".join(str(c) for c in grid))
    out.append(f"Recipe {code(arm.arm.recipe_path)}" + (" · " + " · ".join(bits) if bits else ""))
    previous: list[str] | None = None
    previous_ref = ""
    for a in arm.attempts:
        out += ["", *_attempt(a)]
        table = _provenance(a.provenance)
        if table == previous:
            out += ["", f"Provenance: as {previous_ref}."]
        else:
            out += ["", "Provenance:", "", *table]
            previous, previous_ref = table, a.ref
    source = "merged across attempts" if len(arm.attempts) > 1 else (arm.attempts[0].ref if arm.attempts else "-")
    out += ["", f"Points ({source}):", ""]
    out += _points(arm.points)
    return out


def _attempt(a: AttemptFacts) -> list[str]:
    row = a.attempt
    job = f"Slurm job {text(row.job_id)}" if row.job_id else "not submitted"
    out = [f"#### {a.ref}: {job}, {text(_state(a))}", ""]
    if row.error:
        out.append(f"- Submission failed: {text(row.error, 600)}")
    out.append(f"- Nodes: {text(row.nodelist or '-')}; start {timestamp(row.started_at)}, end "
               f"{timestamp(row.ended_at)}, elapsed {duration(row.elapsed())}")  # fmt: skip
    out.append(f"- Reached: {text(a.reached, 600)}")
    if a.logs not in ("followed", "local", "cluster"):
        out.append(f"- Logs: {text(a.logs)}")
    d = a.diagnosis
    if d is None:
        return out
    if d.root_cause is None:
        out.append(f"- Diagnosis: {text(d.verdict)}: {text(d.advice, 600)}")
        if d.teardown:
            after = "a stop asked of a worker" if d.stops else "the benchmark completed"
            out.append(f"- Teardown after {after} (not a failure): {len(d.teardown)} finding(s)")
        return out
    root = d.root_cause
    first = root.first
    out.append(f"- Diagnosis: **{text(d.verdict)}**. Root cause: **{text(first.finding.title)}** "
               f"({code(root.id)})")  # fmt: skip
    out += ["", *fence(first.text), ""]
    out.append(f"- Where: {_where(first.file, first.line_no, a.attempt.output_dir)}" + _place(root))
    workers = ", ".join(d.root_workers) or "-"
    if d.deterministic:
        scope = _roles_scope(d.deterministic_roles)
        out.append(
            f"- Deterministic: yes{scope} ({d.root_count} line(s) across {workers}): "
            "a plain rerun will fail the same way"
        )
    else:
        out.append(f"- Deterministic: no ({d.root_count} line(s) in {workers}): it may be a one-off")
    consequences = _consequences(d.consequences)
    if consequences:
        out.append(f"- Consequences: {consequences}")
    if d.hint and d.hint not in d.advice:
        out.append(f"- Hint: {text(d.hint, 600)}")
    out.append(f"- Advice: {text(d.advice, 800)}")
    return out


def _roles_scope(roles: tuple[str, ...]) -> str:
    """`, in every prefill and decode worker`."""
    order = {"prefill": 0, "decode": 1, "agg": 2}
    ordered = sorted(roles, key=lambda r: order.get(r, 9))
    if not ordered:
        return ""
    return ", in every " + " and ".join(ordered) + " worker"


def _where(file: str, line_no: int, output_dir: str | None) -> str:
    shown = file
    if output_dir and file.startswith(output_dir.rstrip("/") + "/"):
        shown = file[len(output_dir.rstrip("/")) + 1 :]
    return code(f"{shown}:{line_no}")


def _place(group: FindingGroup) -> str:
    first = group.first
    parts = []
    if first.node:
        parts.append(f"node {code(first.node)}")
    if first.worker:
        parts.append(f"worker {code(first.worker)}")
    if first.rank:
        parts.append(f"rank {code(first.rank)}")
    return (", " + ", ".join(parts)) if parts else ""


def _consequences(groups: tuple[FindingGroup, ...]) -> str:
    merged: dict[str, tuple[str, int, set[str]]] = {}
    for g in groups:
        title, count, workers = merged.get(g.id, (g.first.finding.title, 0, set()))
        if g.first.worker:
            workers.add(g.first.worker)
        merged[g.id] = (title, count + g.count, workers)
    parts = []
    for sig, (title, count, workers) in list(merged.items())[:8]:
        where = f" in {', '.join(sorted(workers))}" if workers else ""
        parts.append(f"{text(title)} ({code(sig)}, {count}×{where})")
    more = len(merged) - 8
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _provenance(p: Provenance | None) -> list[str]:
    if p is None:
        return ["- Not recorded (launched before provenance was kept, or adopted)."]
    rows: list[list[str]] = []
    if p.simulated:
        rows.append(
            ["launcher", f"demo engine {code(p.engine or '?')} (simulated), srt-console {text(p.console_version)}"]
        )
    else:
        rows.append(
            ["launcher", f"{text(p.launcher)} via {code(p.srtctl or '-')}, srt-console {text(p.console_version)}"]
        )
    if p.checkout is not None:
        commit = p.checkout.get("commit")
        dirty = " **with local changes**" if p.checkout.get("dirty") else ""
        rows.append(
            ["srt-slurm checkout", f"{code(p.checkout.get('path') or '-')} at {code(commit or 'no commit')}{dirty}"]
        )
        rows.append(
            ["srtctl", f"{text(p.checkout.get('version') or '?')}, {text(p.checkout.get('flavour') or '?')} flavour"]
        )
    for stated in p.stated_commits:
        rows.append(["srt-slurm stated", f"{code(stated.get('commit', ''))} ({text(stated.get('source', ''))})"])
    rows.append(["container image", code(p.image) if p.image else "-"])
    pinned = [f"{text(pin.get('name', ''))} {code(pin.get('value', ''))}" for pin in p.pins
              if pin.get("name") not in ("container", "srt-slurm")]  # fmt: skip
    if pinned:
        rows.append(["pinned", "; ".join(dict.fromkeys(pinned))])
    if p.scheduling:
        # A value nobody set is Slurm's own default: said once, not "Slurm default (Slurm default)".
        rows.append(["scheduling", " · ".join(
            f"{text(s.get('key'))} {text(s.get('value'))} ({text(s.get('source'))})" if s.get("value")
            else f"{text(s.get('key'))} {text(s.get('source') or 'Slurm default')}"
            for s in p.scheduling)])  # fmt: skip
    rows.append(["resolved recipe", f"sha256 {code(p.recipe_sha256)}"])
    for note in p.notes:
        rows.append(["note", text(note)])
    return _table(["what ran", ""], rows)


def _points(points: list[PointResult]) -> list[str]:
    if not points:
        return ["- No points expected or found."]
    header = ["conc", "status", "output tok/s", "total tok/s", "tok/s/GPU", "tok/s/user", "TTFT p50 ms",
              "TTFT p99 ms", "TPOT p50 ms", "TPOT p99 ms", "from"]  # fmt: skip
    rows = []
    for p in points:
        status = p.status if p.status == "done" or not p.invalid_reason else f"{p.status}: {p.invalid_reason}"
        rows.append([
            str(p.concurrency), text(status, 120), _num(p.output_tok_s), _num(p.total_tok_s), _num(p.tok_s_per_gpu),
            _num(p.tok_s_per_user), _num(p.ttft.median), _num(p.ttft.p99), _num(p.tpot.median, 2),
            _num(p.tpot.p99, 2), text(p.attempt if p.attempt and p.status != "missing" else "-"),
        ])  # fmt: skip
    return _table(header, rows, right=range(2, 10))


# --------------------------------------------------------------------------- JSON


def report_json(report: Report) -> dict[str, Any]:
    arms = []
    for arm in report.arms:
        attempts = []
        for a in arm.attempts:
            row = a.attempt
            attempts.append({
                "id": a.ref, "job_id": row.job_id, "cluster": row.cluster, "state": row.state,
                "exit_code": row.exit_code, "cancelled_by_you": row.cancelled_by_operator, "nodes": row.nodelist,
                "started_at": row.started_at, "ended_at": row.ended_at, "elapsed_s": row.elapsed(),
                "error": row.error, "reached": a.reached, "logs": a.logs,
                "stage": a.snapshot.as_dict() if a.snapshot else None,
                "diagnosis": a.diagnosis.to_json() if a.diagnosis else None,
                "provenance": a.provenance.to_json() if a.provenance else None,
                "points": [p.to_json() for p in a.points],
            })  # fmt: skip
        arms.append({"id": arm.ref, "name": arm.arm.name, "recipe": arm.arm.recipe_path, "attempts": attempts,
                     "points": [p.to_json() for p in arm.points]})  # fmt: skip
    return {
        "target": report.target,
        "title": report.title,
        "generated_at": report.generated_at,
        "simulated": report.simulated,
        "still_running": [
            {"arm": arm_ref(arm.arm.id), "attempt": a.ref, "job_id": a.attempt.job_id}
            for arm, a in report.still_running
        ],
        "arms": arms,
    }


__all__ = ["code", "fence", "render_markdown", "report_json", "text"]
