"""Two runs' points side by side: "preserve the original points", checked by a tool.

Each side is a list of points with the ISL/OSL they were measured at (an attempt, an arm merged
across its attempts, a sweep, or a results directory on this machine such as the legacy
launcher's). Points are matched by concurrency, and by ISL/OSL where both sides know them.
Per matched point the deltas of throughput, tok/s/GPU, tok/s/user, TTFT and TPOT (p50, p99)
are computed against the baseline (A); a change for the worse beyond the threshold (5 % by
default) is a regression. A point the baseline delivered that the candidate did not is listed
as lost; one only the candidate has, as new.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from console.results import PointResult, ResultFile, arm_points, discover_results, parse_result_name, read_point

DEFAULT_THRESHOLD_PCT = 5.0


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    higher_is_better: bool
    digits: int = 1

    def value(self, point: PointResult) -> float | None:
        if self.key in ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99"):
            stats = point.ttft if self.key.startswith("ttft") else point.tpot
            return stats.median if self.key.endswith("p50") else stats.p99
        value = getattr(point, self.key)
        return value if isinstance(value, float | int) else None


METRICS: tuple[Metric, ...] = (
    Metric("output_tok_s", "output tok/s", True),
    Metric("total_tok_s", "total tok/s", True),
    Metric("tok_s_per_gpu", "tok/s/GPU", True),
    Metric("tok_s_per_user", "tok/s/user", True),
    Metric("ttft_p50", "TTFT p50 ms", False),
    Metric("ttft_p99", "TTFT p99 ms", False),
    Metric("tpot_p50", "TPOT p50 ms", False, 2),
    Metric("tpot_p99", "TPOT p99 ms", False, 2),
)


@dataclass(frozen=True)
class SidePoint:
    """One point of a side, with where it was measured."""

    point: PointResult
    isl: int | None = None
    osl: int | None = None
    arm: str | None = None

    @property
    def concurrency(self) -> int:
        return self.point.concurrency

    @property
    def done(self) -> bool:
        return self.point.status == "done"

    @property
    def label(self) -> str:
        seq = f" ISL/OSL {self.isl or '?'}/{self.osl or '?'}" if self.isl or self.osl else ""
        return f"c{self.concurrency}{seq}"


@dataclass(frozen=True)
class Side:
    label: str  # what the operator named: "a3", "s1", a directory
    points: list[SidePoint]


@dataclass(frozen=True)
class Delta:
    metric: Metric
    a: float | None
    b: float | None

    @property
    def pct(self) -> float | None:
        if self.a is None or self.b is None or self.a == 0:
            return None
        return (self.b - self.a) / abs(self.a) * 100.0

    def worse_by(self) -> float | None:
        """How much worse B is than A, in percent (negative: better)."""
        pct = self.pct
        if pct is None:
            return None
        return -pct if self.metric.higher_is_better else pct


@dataclass(frozen=True)
class PointComparison:
    a: SidePoint
    b: SidePoint
    deltas: tuple[Delta, ...]
    regressed: tuple[str, ...]  # metric keys worse beyond the threshold

    @property
    def label(self) -> str:
        return self.a.label


@dataclass
class Comparison:
    a: Side
    b: Side
    threshold_pct: float
    matched: list[PointComparison] = field(default_factory=list)
    lost: list[tuple[SidePoint, SidePoint | None]] = field(default_factory=list)  # done in A, not in B
    only_a: list[SidePoint] = field(default_factory=list)  # neither done anywhere or A only, not done
    new: list[SidePoint] = field(default_factory=list)  # in B only

    @property
    def regressions(self) -> list[PointComparison]:
        return [m for m in self.matched if m.regressed]

    @property
    def ok(self) -> bool:
        """No regression and no point of the baseline lost: the exit code for CI."""
        return not self.regressions and not self.lost

    def to_json(self) -> dict[str, Any]:
        def side_point(sp: SidePoint | None) -> dict[str, Any] | None:
            if sp is None:
                return None
            return {"concurrency": sp.concurrency, "isl": sp.isl, "osl": sp.osl, "arm": sp.arm,
                    "status": sp.point.status, "attempt": sp.point.attempt}  # fmt: skip

        return {
            "a": self.a.label,
            "b": self.b.label,
            "threshold_pct": self.threshold_pct,
            "ok": self.ok,
            "points": [
                {
                    "concurrency": m.a.concurrency,
                    "isl": m.a.isl if m.a.isl is not None else m.b.isl,
                    "osl": m.a.osl if m.a.osl is not None else m.b.osl,
                    "a": side_point(m.a),
                    "b": side_point(m.b),
                    "deltas": {d.metric.key: {"a": d.a, "b": d.b, "pct": d.pct} for d in m.deltas},
                    "regressed": list(m.regressed),
                }
                for m in self.matched
            ],
            "regressions": [{"concurrency": m.a.concurrency, "metrics": list(m.regressed)} for m in self.regressions],
            "lost": [{"a": side_point(a), "b": side_point(b)} for a, b in self.lost],
            "only_in_a": [side_point(p) for p in self.only_a],
            "only_in_b": [side_point(p) for p in self.new],
        }


def _compatible(a: SidePoint, b: SidePoint) -> bool:
    if a.concurrency != b.concurrency:
        return False
    known = [(x, y) for x, y in ((a.isl, b.isl), (a.osl, b.osl)) if x is not None and y is not None]
    return all(x == y for x, y in known)


def compare(a: Side, b: Side, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Comparison:
    """Match B's points to A's and flag what got worse beyond ``threshold_pct`` percent."""
    result = Comparison(a, b, threshold_pct)
    unmatched = list(b.points)
    for pa in sorted(a.points, key=lambda p: (p.isl or 0, p.osl or 0, p.concurrency)):
        # Prefer a delivered candidate point, then exact ISL/OSL.
        candidates = [pb for pb in unmatched if _compatible(pa, pb)]
        candidates.sort(key=lambda pb: (not pb.done, (pb.isl, pb.osl) != (pa.isl, pa.osl)))
        pb = candidates[0] if candidates else None
        if pb is not None:
            unmatched.remove(pb)
        if pa.done and pb is not None and pb.done:
            deltas = tuple(Delta(m, m.value(pa.point), m.value(pb.point)) for m in METRICS)
            regressed = tuple(d.metric.key for d in deltas if (d.worse_by() or 0.0) > threshold_pct)
            result.matched.append(PointComparison(pa, pb, deltas, regressed))
        elif pa.done:
            result.lost.append((pa, pb))
        elif pb is None:
            result.only_a.append(pa)
        elif pb.done:
            result.new.append(pb)
        else:
            result.only_a.append(pa)
    result.new += [pb for pb in unmatched if pb.point.status != "missing"]
    return result


# --------------------------------------------------------------------------- sides


def dir_side(directory: Path) -> Side:
    """A results directory on this machine: a job dir, an InferenceX results dir (holding
    ``fixed-seq/``), or else any folder of result files (the legacy launcher's, a fixed-seq
    folder). ISL/OSL and expected points from its config.yaml, if any."""
    from console.recipes import load_recipe

    isl = osl = gpus = None
    expected: list[int] = []
    arm_name: str | None = None
    for config in (directory / "config.yaml", directory / "logs" / "config.yaml"):
        if config.is_file() and config.stat().st_size < 4 * 1024 * 1024:
            recipe = load_recipe(config, text=config.read_text(encoding="utf-8", errors="replace"))
            if len(recipe.arms) == 1:
                arm = recipe.arms[0]
                isl, osl, gpus, arm_name = arm.isl, arm.osl, arm.topology.total_gpus or None, arm.name
                expected = list(arm.concurrencies)
            break
    files = discover_results(directory, results_dir=directory)
    if not files:
        # Not a job or results dir: a folder the operator named as holding result files.
        named = ((path, parse_result_name(path.name)) for path in sorted(directory.glob("*.json")))
        files = [ResultFile(path, name) for path, name in named if name is not None]
    points = arm_points(expected, [read_point(rf.path, gpus=gpus) for rf in files if rf.kind != "rollup"])
    return Side(str(directory), [SidePoint(p, isl, osl, arm_name) for p in points])


def arm_side_points(summary: dict[str, Any], name: str, points: Sequence[PointResult]) -> list[SidePoint]:
    isl, osl = summary.get("isl"), summary.get("osl")
    return [
        SidePoint(p, isl if isinstance(isl, int) else None, osl if isinstance(osl, int) else None, name) for p in points
    ]


# --------------------------------------------------------------------------- Markdown


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pct(delta: Delta) -> str:
    pct = delta.pct
    return "-" if pct is None else f"{pct:+.1f}%"


def render_markdown(c: Comparison) -> str:
    from console.report.markdown import text

    lines = [f"## Comparison: {text(c.b.label)} against {text(c.a.label)}", ""]
    verdict = "no regression" if c.ok else f"{len(c.regressions)} regressed point(s), {len(c.lost)} lost"
    lines.append(f"Threshold {c.threshold_pct:g} % · {len(c.matched)} point(s) matched · **{verdict}**")
    lines.append("")
    header = ["point", *[m.label for m in METRICS], "regressed"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|---|" + "---:|" * len(METRICS) + "---|")
    for m in c.matched:
        cells = [f"{_fmt(d.b, d.metric.digits)} ({_pct(d)})" for d in m.deltas]
        flagged = ", ".join(next(x.label for x in METRICS if x.key == k) for k in m.regressed)
        mark = f"**{flagged}**" if flagged else "-"
        lines.append("| " + " | ".join([text(m.label), *cells, mark]) + " |")
    for title, items in (
        ("Lost (done in the baseline, not in the candidate)", [
            f"{text(a.label)}: {text(b.point.status if b else 'absent')}"
            + (f" ({text(b.point.invalid_reason)})" if b and b.point.invalid_reason else "") for a, b in c.lost]),
        ("Only in the baseline (not done there either)",
         [f"{text(p.label)}: {text(p.point.status)}" for p in c.only_a]),
        ("Only in the candidate", [f"{text(p.label)}: {text(p.point.status)}" for p in c.new]),
    ):  # fmt: skip
        if items:
            lines += ["", f"{title}:", "", *(f"- {item}" for item in items)]
    return "\n".join(lines) + "\n"


def render_text(c: Comparison) -> str:
    lines = [f"{c.b.label} against {c.a.label} (threshold {c.threshold_pct:g} %)"]
    for m in c.matched:
        worst = [f"{d.metric.label} {_pct(d)}" for d in m.deltas if d.metric.key in m.regressed]
        flag = "REGRESSED " + ", ".join(worst) if worst else "ok"
        tput = m.deltas[0]
        lines.append(f"  {m.label:<24} {tput.metric.label} {_fmt(tput.b, 1)} ({_pct(tput)})  {flag}")
    for a, b in c.lost:
        lines.append(f"  {a.label:<24} LOST: {b.point.status if b else 'absent'} in {c.b.label}")
    for p in c.only_a:
        lines.append(f"  {p.label:<24} only in {c.a.label} ({p.point.status})")
    for p in c.new:
        lines.append(f"  {p.label:<24} only in {c.b.label} ({p.point.status})")
    lines.append("no regression" if c.ok else f"{len(c.regressions)} regressed point(s), {len(c.lost)} lost")
    return "\n".join(lines) + "\n"
