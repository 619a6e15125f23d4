"""The fast reader of a local file (chunks, only the lines the prefilter takes fed in full) gives
what the line-by-line reader gives (and so does a followed log's batches through the prefilter,
what they give line by line): the same findings (ids, lines, line numbers, text, time), the
same diagnosis (verdict, root cause), the same stages and line counts - on the real logs, the
real srtctl job dirs, the real variants among healthy lines, and long, redrawn and odd lines.
Both literal engines are held to it: Hyperscan when it is installed, and the regex fallback."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import console.prefilter as prefilter
import console.triage as triage_module
from console.cli.scan_cmd import collect_files
from console.diagnosis import Observation
from console.prefilter import LONG_LINE, LineFilter
from console.triage import Triage, feed_file, read_lines

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
REAL_LOGS = DATA / "real-logs"
REAL_SRTCTL = DATA / "real-srtctl"
VARIANTS = yaml.safe_load((ROOT / "assets" / "real-lines.yaml").read_text(encoding="utf-8"))["variants"]
ENGINES = ["re"] + (["hyperscan"] if prefilter.engine() == "hyperscan" else [])


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(triage_module, "_FILTERS", {})
    if request.param == "re":
        monkeypatch.setattr(prefilter, "_hs", None)
    yield request.param


def _observed(o: Observation) -> dict[str, Any]:
    return {**o.to_json(), "time": o.time, "dated": o.time_has_date, "quoted": o.quoted, "mode": o.mode}


class _Ticks:
    """A clock that counts its reads: both readers read it once a batch."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return 1_000_000.0 + self.reads


def _feed_live(triage: Triage, path: Path, seed: int) -> list[tuple[str, str | None, str, int]]:
    """The file's lines in batches of the sizes a follower's events carry, as the monitor feeds
    them; the stage changes the batches tell (what the monitor publishes)."""
    rng = random.Random(seed)
    with path.open("rb") as fh:
        lines = list(read_lines(fh))
    changes = []
    line_no = 1
    while line_no <= len(lines):
        size = rng.choice([1, 3, 8, 9, 50, 200, 1000, 5000])
        update = triage.feed(str(path), lines[line_no - 1 : line_no - 1 + size], first_line_no=line_no)
        changes += [(c.subject, c.old, c.new, c.line_no) for c in update.changes]
        line_no += size
    return changes


def _outcome(
    files: list[Path], *, fast: bool, baseline: frozenset[str] | None = None, live: bool = False
) -> dict[str, Any]:
    """The triage of ``files``: read as a file (``fast``: the chunked reader), or, ``live``, fed
    in batches as a followed log is (``fast``: through the prefilter)."""
    clock = _Ticks()
    triage = Triage(baseline=baseline, clock=clock, sparse=fast)
    changes = []
    for i, path in enumerate(files):
        if live:
            changes += _feed_live(triage, path, seed=i)
        else:
            feed_file(triage, path, fast=fast)
    diagnosis = triage.diagnose("FAILED")
    return {
        "templates": sorted(triage.templates),
        "clock": (clock.reads, triage._worker_output_at, triage._awaiting_since),
        "failures": {f: s.failure and _observed(s.failure) for f, s in triage._files.items()},
        "findings": [_observed(o) for o in triage.findings],
        "groups": [(g.id, g.count, g.last_line_no, _observed(g.first)) for g in triage.groups],
        "diagnosis": diagnosis.to_json(),
        "verdict": diagnosis.verdict,
        "root": diagnosis.root_cause.id if diagnosis.root_cause else None,
        "snapshot": triage.snapshot("FAILED").as_dict(),
        "lines": [triage.lines_seen(str(p)) for p in files],
        "changes": changes,
    }


def _same(files: list[Path], baseline: frozenset[str] | None = None) -> dict[str, Any]:
    slow = _outcome(files, fast=False, baseline=baseline)
    fast = _outcome(files, fast=True, baseline=baseline)
    for key in slow:
        assert fast[key] == slow[key], key
    live_slow = _outcome(files, fast=False, baseline=baseline, live=True)
    live_fast = _outcome(files, fast=True, baseline=baseline, live=True)
    for key in live_slow:
        assert live_fast[key] == live_slow[key], f"live: {key}"
    return slow


@pytest.mark.parametrize("name", sorted(p.name for p in REAL_LOGS.glob("*.log")))
def test_each_real_log(engine: str, name: str) -> None:
    _same([REAL_LOGS / name])


@pytest.mark.parametrize("job", sorted(p.name for p in REAL_SRTCTL.iterdir() if p.is_dir()))
def test_each_real_srtctl_job_dir(engine: str, job: str) -> None:
    files, _ = collect_files([str(REAL_SRTCTL / job)])
    _same(files)


def _healthy() -> list[bytes]:
    """The lines of the real healthy logs, to put between the lines under test (a line of many
    KB, a progress bar's redraws, is read whole by test_each_real_log: here it only slows)."""
    lines: list[bytes] = []
    for path in sorted(REAL_LOGS.glob("healthy-*.log")):
        lines += [line for line in path.read_bytes().splitlines() if line.strip() and len(line) <= 8192]
    return lines


@pytest.mark.parametrize("name", ["mixed.log", "node1_prefill_w0.out", "node2_decode_w3.out"])
def test_real_variants_among_healthy_lines(engine: str, name: str, tmp_path: Path) -> None:
    rng = random.Random(7)
    healthy = _healthy()
    out: list[bytes] = []
    for entry in VARIANTS:
        # one gap in eight up to twice the lookback, the others short: the log grows with the
        # corpus by a few dozen lines a variant, not by hundreds
        gap = rng.randrange(0, 400) if rng.random() < 0.125 else rng.randrange(0, 25)
        out += rng.choices(healthy, k=gap)
        out.append(entry["line"].encode())
    out += rng.choices(healthy, k=50)
    log = tmp_path / name
    log.write_bytes(b"\n".join(out) + b"\n")
    result = _same([log])
    assert len(result["findings"]) >= len(VARIANTS)  # the variants are found (frames aside)
    assert result["lines"] == [len(out)]


def _odd_lines() -> list[bytes]:
    healthy = _healthy()
    return [
        b"x" * (2 * LONG_LINE - 1) + b" error: out of memory",  # long, the keyword near its end
        b"y" * (20 << 10) + b" CUDA error: out of memory",  # past the cut: head and tail kept
        b"z" * (3 << 20) + b" RuntimeError: CUDA error: an illegal memory access was encountered",
        b"q" * (2 * LONG_LINE + 5),  # long and healthy
        b"Loading safetensors checkpoint shards: 50% |#####     | 1/2\r" * 400 + b"NCCL error: unhandled",
        b"progress 1/2\rprogress 2/2\rtorch.OutOfMemoryError: CUDA out of memory.",
        b"INFO 10-15 08:32:29 a line with a CRLF end\r",
        b"\x1b[31mERROR\x1b[0m: out of\x1b[0m memory",
        b"tab\tseparated\tfailed",
        b"caf\xc3\xa9 \xe2\x9c\x93 done; invalid \xff\xfe bytes",
        b"NETWOR\xe2\x84\xaa error",  # the Kelvin sign lowers to a k
        b"Traceback (most recent call last):",
        b'  File "/x/y.py", line 3, in f',
        b'    raise ValueError("out of memory")',
        *healthy[:300],  # healthy lines while the traceback waits for its exception line
        b"ValueError: bad value",
        *healthy[300:310],
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]


@pytest.mark.parametrize("name", ["odd.log", "node0_decode_w0.out"])
def test_long_redrawn_and_odd_lines(engine: str, name: str, tmp_path: Path) -> None:
    rng = random.Random(3)
    healthy = _healthy()
    out: list[bytes] = []
    for line in _odd_lines():
        out += rng.choices(healthy, k=rng.randrange(0, 30))
        out.append(line)
    log = tmp_path / name
    # No newline at the end: the last line is read all the same.
    log.write_bytes(b"\n".join(out))
    result = _same([log])
    assert result["findings"]


def test_an_undated_finding_takes_the_time_of_a_line_passed_over(engine: str, tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    dated = b"2026-03-01 10:00:00 INFO serving 12 requests"
    log.write_bytes(b"\n".join([dated] + [b"plain line"] * 150 + [b"CUDA error: out of memory"]) + b"\n")
    result = _same([log])
    assert result["findings"][0]["time"] is not None


def test_lines_across_chunk_and_block_boundaries(engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Small chunks: lines and long lines cross chunk ends, and a line longer than the carry.
    monkeypatch.setattr(triage_module, "_CHUNK", 4 * triage_module._BLOCK)
    monkeypatch.setattr(triage_module, "_MAX_CARRY", 8 * triage_module._BLOCK)
    rng = random.Random(5)
    healthy = _healthy()
    out: list[bytes] = []
    while sum(len(x) + 1 for x in out) < 30 << 20:
        out += rng.choices(healthy, k=2000)
        out.append(rng.choice([v["line"] for v in VARIANTS]).encode())
    out.insert(len(out) // 2, b"w" * (40 << 20) + b"\rCUDA error: out of memory")
    log = tmp_path / "node3_agg_w1.out"
    log.write_bytes(b"\n".join(out) + b"\n")
    _same([log])


def test_a_worker_stopped_and_later_progress_in_one_batch(engine: str, tmp_path: Path) -> None:
    # The stage rules of a batch come before the worker failures it tells, as line by line: in a
    # run that succeeded, a worker stopped by its cleanup keeps the progress its batch shows.
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "sweep_1.log").write_text("2026-12-01 09:54:23 [INFO] Benchmark completed successfully\n")
    lines = [b"healthy"] * 10 + [b"slurmstepd: error: *** STEP 123.0 ON node1 CANCELLED AT 2026-12-01T10:00:00 ***"]
    lines += [b"Uvicorn running on http://0.0.0.0:30000"] + [b"healthy"] * 5000
    lines += [b"The server is fired up and ready to roll!"]
    (logs / "nodeA_prefill_w0.out").write_bytes(b"\n".join(lines) + b"\n")
    files, _ = collect_files([str(tmp_path)])
    result = _same(files)
    assert result["findings"][0]["id"] == "slurm-job-cancelled"
    assert result["snapshot"]["workers"]["nodeA_prefill_w0"]["stage"] == "server up"


def test_the_filter_takes_what_matters(engine: str) -> None:
    line_filter = LineFilter(["out of memory", "nccl"])
    data = b"a\nb OUT OF MEMORY\nc\nd\tx\ne \xc3\xa9\nf Nccl\ng\n" + b"h" * (2 * LONG_LINE) + b"\ni\n"
    starts = line_filter.lines(data)
    taken = [data[s : data.find(b"\n", s)] for s in starts]
    assert taken == [b"b OUT OF MEMORY", b"d\tx", b"e \xc3\xa9", b"f Nccl", b"h" * (2 * LONG_LINE)]
    assert line_filter.engine == engine


# Error-level lines no catalog keyword is in: found as novel lines only, so the prefilter must
# take them for what is_error_level looks for (a level word, glog's E0603, TensorRT-LLM's [E],
# level=error, an exception line).
_UNCATALOGUED = [
    b"ERROR 10-15 08:32:29 [scheduler.py:41] the quux widget went sideways on rank 3",
    b"[2026-08-21 10:02:11 TP3] FATAL: frobnicator 7 lost its place",
    b"E0603 10:48:27.885119 1234 widget.cc:88] bar queue wedged at 0x7f12",
    b"F0603 10:48:28.000001 1234 widget.cc:90] Check failed: wedge == 0",
    b"[TensorRT-LLM][E] the gizmo table is not warm",
    b'time="2026-08-21T10:02:11Z" level=error msg="plumbus rejected"',
    b"srun: error: node-07: task 3: plumbus rejected",
    b"2026-08-21 10:02:11,123 CRITICAL quux: giving up on the widget",
    b"WidgetMirrorException: widget 12 mirrored twice",
    b"frob.errors.QuuxError: the quux is inside out",
]


@pytest.mark.parametrize("name", ["node1_prefill_w0.out", "mixed.log"])
def test_novel_lines_with_a_healthy_baseline(engine: str, name: str, tmp_path: Path) -> None:
    rng = random.Random(11)
    healthy = _healthy()
    base = tmp_path / "healthy"
    base.mkdir()
    (base / name).write_bytes(b"\n".join(rng.choices(healthy, k=3000) + _UNCATALOGUED[:2]) + b"\n")
    baseline = frozenset(_outcome([base / name], fast=False)["templates"])
    assert baseline
    out: list[bytes] = []
    for line in _UNCATALOGUED * 3:
        out += rng.choices(healthy, k=rng.randrange(0, 300))
        out.append(line)
    out += [v["line"].encode() for v in VARIANTS[:40]] + rng.choices(healthy, k=50)
    log = tmp_path / name
    log.write_bytes(b"\n".join(out) + b"\n")
    result = _same([log], baseline)
    novel = [f for f in result["findings"] if f["id"] == "novel-error-line"]
    # Most uncatalogued lines outside the baseline are novel findings, every time they are written.
    assert len({f["captures"]["template"] for f in novel}) >= 6
    assert len(novel) >= 18
    # the log's templates: those of the baseline it wrote again, and the uncatalogued lines'
    assert len(set(result["templates"]) - baseline) >= 6 and set(result["templates"]) & baseline
