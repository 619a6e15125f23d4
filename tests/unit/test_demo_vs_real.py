"""The demo engine against the real pipeline, on the same recipe.

``tests/data/real-srtctl/1p1d-completed/`` is a job dir the real srtctl wrote on the test cluster
(real orchestrator, NATS and etcd, Dynamo's mocker and frontend, sa-bench). Its own
``config.yaml`` is the recipe it ran. The demo engine runs that recipe here through the `local`
profile, and what the console reads of a job is compared: the output layout, the stages,
readiness and worker progress the console derives, the worker and frontend logs, the result
files, the rollup, benchmark.out and the sweep log.

What differs by nature is named here, each with its reason: lines the test cluster's site
writes (its venv sync, its loopback node addresses, its CPU count) and the teardown Slurm
writes when srtctl's cleanup cancels the steps.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from console.cli import main
from console.triage import Triage, read_lines

REAL = Path(__file__).resolve().parents[1] / "data" / "real-srtctl" / "1p1d-completed"
RECIPE = REAL / "config.yaml"
REAL_ID = "21186533"

# Files of a job dir that only some features write: none for this recipe, on either side.
ONLY_REAL: dict[str, str] = {}
ONLY_DEMO: dict[str, str] = {}

# Lines of the real sweep log written by the test cluster's site, not by srtctl's run of the recipe.
SITE_LINES = (
    # The batch script's venv sync (uv); the demo engine has no venv.
    re.compile(r"^Using uv "),
    re.compile(r"^Resolved \d+ packages in "),
    re.compile(r"^Checked \d+ packages in "),
    # The test cluster's nodes resolve to loopback, which srtctl refuses and then falls back from.
    re.compile(r"\[ERROR\] Failed to get IP for node "),
    re.compile(r"\[WARNING\] srun-based IP resolution failed for "),
    re.compile(r"\[WARNING\] socket\.gethostbyname returned loopback "),
    # srun's own words when srtctl's cleanup terminates the steps.
    re.compile(r"^srun: (?:forcing job termination|Job step aborted|error: \S+: task \d+: Killed)"),
)
# Lines of the real worker and frontend logs written because srtctl's cleanup stops etcd first and
# then cancels every step; the demo's workers stop on their own when the orchestrator says so.
TEARDOWN = re.compile(
    r"Keep-alive stream error|Failed to establish keep-alive stream|Reconnecting to ETCD cluster"
    r"|Successfully reconnected to ETCD cluster|Error watching stream for prefix"
    r"|failed to resync etcd watch prefix|\*\*\* STEP \S+ ON \S+ CANCELLED AT "
)
# benchmark.out: the mocker's image has no PyTorch, which transformers says once per run.
BENCH_SITE = re.compile(r"^\[transformers\] PyTorch was not found")
# The test data keeps the frontend's first 60 and last 20 lines only.
CUT_MARK = "[... per-request lines cut for the project's test data ...]"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Job:
    """One job dir, with what normalises its names: the job id, its dir and its nodes."""

    def __init__(self, root: Path, job_id: str) -> None:
        self.root = root
        self.job_id = job_id
        self.logs = root / "logs"
        self.sweep = self.logs / f"sweep_{job_id}.log"
        text = self.sweep.read_text(encoding="utf-8")
        runtime = re.search(r"^Runtime config: (\S+)/config\.yaml$", text, re.MULTILINE)
        assert runtime is not None, "no Runtime config line"
        self.written_as = runtime.group(1)  # the job dir as the job saw it
        nodes = re.search(r"\[INFO\] Worker nodes: (.+)$", text, re.MULTILINE)
        assert nodes is not None, "no Worker nodes line"
        self.nodes = [n.strip() for n in nodes.group(1).split(",")]

    def name(self, text: str) -> str:
        """Job id, job dir and node names replaced by placeholders."""
        text = text.replace(self.written_as, "<job>").replace(str(self.root), "<job>")
        # Where a job id appears: Job ID: <id>, --jobid <id>, <id>.json, sweep_<id>.log, <name>_<id>.
        job = re.escape(self.job_id)
        text = re.sub(rf"(?<=Job ID: ){job}$|(?<=--jobid ){job}\b|^{job}(?=\.json)|(?<=/){job}(?=\.json)", "<id>", text)
        text = re.sub(rf"(?<=sweep_){job}(?=\.log)|(?<=_){job}$|(?<=Copied ){job}(?=\.json)", "<id>", text)
        return self.nodes_named(text)

    def nodes_named(self, text: str) -> str:
        text = text.replace(self.written_as, "<job>").replace(str(self.root), "<job>")
        for i, node in enumerate(self.nodes):
            text = re.sub(rf"\b{re.escape(node)}\b", f"<n{i}>", text)
        return text

    def layout(self) -> set[str]:
        out = set()
        for folder, dirs, files in os.walk(self.root):
            for item in dirs + files:
                rel = os.path.relpath(os.path.join(folder, item), self.root)
                out.add(self.name(rel) + ("/" if item in dirs else ""))
        return out

    def lines(self, path: Path) -> list[str]:
        with path.open("rb") as handle:
            return list(read_lines(handle))

    def json(self, rel: str) -> object:
        return json.loads((self.root / rel).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Job:
    base = tmp_path_factory.mktemp("demo-vs-real")
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SRT_CONSOLE_DATA", str(base / "data"))
        mp.setenv("XDG_CONFIG_HOME", str(base / "xdg"))
        mp.setenv("SRT_DEMO_SPEED", "5")  # a loaded machine still starts the workers within the health report period
        with contextlib.redirect_stdout(out):
            code = main(["launch", str(RECIPE), "--cluster", "local", "--yes", "--wait", "--json"])
    doc = json.loads(out.getvalue())
    (attempt,) = doc["attempts"]
    assert code == 0 and attempt["state"] == "COMPLETED", doc
    return Job(Path(attempt["output_dir"]), str(attempt["job_id"]))


@pytest.fixture(scope="module")
def real() -> Job:
    return Job(REAL, REAL_ID)


# --------------------------------------------------------------------------- layout


def test_output_layout_is_the_real_one(demo: Job, real: Job) -> None:
    real_files, demo_files = real.layout(), demo.layout()
    assert sorted(real_files - demo_files - set(ONLY_REAL)) == []
    assert sorted(demo_files - real_files - set(ONLY_DEMO)) == []


def test_job_records_have_the_real_schema(demo: Job, real: Job) -> None:
    for rel in ("{id}.json", "logs/{id}.json", "logs/resource_snapshot.json"):
        assert shape(demo.json(rel.format(id=demo.job_id))) == shape(real.json(rel.format(id=real.job_id))), rel
    for mode in ("prefill", "decode"):
        rel = f"logs/fingerprint_{mode}_w0.json"
        demo_fp, real_fp = demo.json(rel), real.json(rel)
        assert isinstance(demo_fp, dict) and isinstance(real_fp, dict)
        assert list(demo_fp) == list(real_fp), rel
        assert sorted(demo_fp["env"]) == sorted(real_fp["env"]), rel
    meta, real_meta = demo.json(f"{demo.job_id}.json"), real.json(f"{real.job_id}.json")
    assert isinstance(meta, dict) and isinstance(real_meta, dict)
    assert meta["model"]["path"] == real_meta["model"]["path"]
    for rel in ("config.yaml", "logs/config.yaml"):
        demo_doc = launched(yaml.safe_load((demo.root / rel).read_text()))
        assert demo_doc == launched(yaml.safe_load((real.root / rel).read_text())), rel
    demo_lock = yaml.safe_load((demo.root / "recipe.lock.yaml").read_text())
    real_lock = yaml.safe_load((real.root / "recipe.lock.yaml").read_text())
    assert list(demo_lock["lock"]) == list(real_lock["lock"])
    demo_recipe = launched({k: v for k, v in demo_lock.items() if k != "lock"})
    assert demo_recipe == launched({k: v for k, v in real_lock.items() if k != "lock"})
    assert list(demo_lock["lock"]["fingerprints"]) == list(real_lock["lock"]["fingerprints"])
    for name in ("sbatch_script.sh", f"{demo.job_id}.json", "config.yaml"):
        assert (demo.logs / name).read_bytes() == (demo.root / name).read_bytes(), name
    assert (demo.logs / "etcd.log").read_bytes() == b"" == (real.logs / "etcd.log").read_bytes()


def launched(doc: dict[str, object]) -> dict[str, object]:
    """A submitted recipe without what the launch adds to it: the profile's scheduling values
    (`slurm:`) and the console's marker (`sbatch_directives.comment`)."""
    out = {k: v for k, v in doc.items() if k != "slurm"}
    directives = out.get("sbatch_directives")
    if isinstance(directives, dict):
        directives = {k: v for k, v in directives.items() if k != "comment"}
        if directives:
            out["sbatch_directives"] = directives
        else:
            out.pop("sbatch_directives")
    return out


def shape(value: object) -> object:
    """The structure of JSON data: keys in order, value types, the first item of lists."""
    if isinstance(value, dict):
        return [(k, shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return ["list", shape(value[0]) if value else None]
    return type(value).__name__


# --------------------------------------------------------------------------- what the console derives


def derived(job: Job) -> tuple[dict[str, list[tuple[str, str]]], Triage]:
    """Every stage change the console derives, per subject, in file and line order."""
    triage = Triage()
    changes: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(p for p in job.logs.iterdir() if p.is_file() and p.suffix in (".out", ".log")):
        lines = job.lines(path)
        for change in triage.feed(str(path), lines).changes:
            text = lines[change.line_no - 1] if change.line_no else ""
            changes.setdefault(job.name(change.subject), []).append((change.new, text))
    return changes, triage


def test_stages_readiness_and_workers_the_console_derives_are_the_real_ones(demo: Job, real: Job) -> None:
    real_changes, real_triage = derived(real)
    demo_changes, demo_triage = derived(demo)
    assert sorted(demo_changes) == sorted(real_changes)
    for subject, real_seq in real_changes.items():
        if subject not in ("stage", "readiness"):
            # The real workers are marked failed by slurmstepd's line when the cleanup cancels them.
            torn = [(new, text) for new, text in real_seq if new == "failed"]
            assert all(TEARDOWN.search(text) for _, text in torn), torn
            real_seq = [item for item in real_seq if item not in torn]
        assert [new for new, _ in demo_changes[subject]] == [new for new, _ in real_seq], subject
        if subject.endswith(("_w0",)):
            # The same line of the engine's log moves the worker, in the same words.
            assert [worker_line(demo, t) for _, t in demo_changes[subject]] == [
                worker_line(real, t) for _, t in real_seq
            ], subject
    demo_snap, real_snap = demo_triage.snapshot("COMPLETED"), real_triage.snapshot("COMPLETED")
    assert demo_snap.stage == real_snap.stage and demo_snap.readiness == real_snap.readiness
    assert {demo.name(n): w.stage for n, w in demo_snap.workers.items()} == {
        real.name(n): w.stage for n, w in real_snap.workers.items()
    }
    for triage in (demo_triage, real_triage):
        diagnosis = triage.diagnose("COMPLETED")
        assert diagnosis.verdict == "healthy" and diagnosis.root_cause is None


# --------------------------------------------------------------------------- worker and frontend logs


def worker_line(job: Job, line: str) -> str:
    """A Dynamo log line with what varies from run to run masked (times, ids, ports, counts); colours kept."""
    text = job.nodes_named(line)
    text = re.sub(r"/\S*?/\.cache/dynamo/mdc/by-slug/", "<home>/.cache/dynamo/mdc/by-slug/", text)
    parts = ANSI.split(text)
    codes = ANSI.findall(text)
    out = [mask(parts[0])]
    for code, part in zip(codes, parts[1:], strict=True):
        out += [code, mask(part)]
    return "".join(out)


def mask(text: str) -> str:
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", "<ts>", text)
    text = re.sub(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uuid>", text)
    text = re.sub(r"(?<=_)[0-9a-f]{13,14}\b|(?<=/)[0-9a-f]{13,14}\b|\b[0-9a-f]{64}\b", "<hex>", text)
    return re.sub(r"(?<![\w\[])\d+(?:\.\d+)?", "#", text)


def log_lines(job: Job, name: str) -> list[str]:
    lines = [ln for ln in job.lines(job.logs / name) if ln != CUT_MARK and not TEARDOWN.search(ln)]
    return [worker_line(job, ln) for ln in lines]


def test_worker_and_frontend_files_are_the_real_ones(demo: Job, real: Job) -> None:
    def names(job: Job) -> list[str]:
        return sorted(job.name(p.name) for p in job.logs.glob("*.out"))

    assert names(demo) == names(real)


@pytest.mark.parametrize("name", ["<n0>_prefill_w0.out", "<n1>_decode_w0.out"])
def test_mocker_worker_logs_are_the_real_mockers(demo: Job, real: Job, name: str) -> None:
    def path(job: Job) -> str:
        return name.replace("<n0>", job.nodes[0]).replace("<n1>", job.nodes[1])

    assert log_lines(demo, path(demo)) == log_lines(real, path(real))


def test_dynamo_frontend_log_is_the_real_frontends(demo: Job, real: Job) -> None:
    """Every kind of line the real frontend writes, and no other (their order follows the workers' timing)."""
    name = f"{real.nodes[0]}_frontend_0.out"
    demo_kinds, real_kinds = set(log_lines(demo, name)), set(log_lines(real, name))
    assert sorted(real_kinds - demo_kinds) == [] and sorted(demo_kinds - real_kinds) == []
    text = (demo.logs / name).read_text(encoding="utf-8")
    assert text.index("Starting HTTP(S) service") < text.index("Adding worker set to model")
    assert text.index("Prefill worker detected") < text.index("request received")


def test_infra_log_has_the_real_setup_lines(demo: Job, real: Job) -> None:
    def setup(job: Job) -> list[str]:
        lines = job.lines(job.logs / "infra.out")
        return [re.sub(r"\d+", "#", ln[20:]) for ln in lines if re.match(r"^\d{4}-\d\d-\d\d [\d:]{8} \[[A-Z]+\] ", ln)]

    assert setup(demo) == setup(real)


# --------------------------------------------------------------------------- results


def result_files(job: Job) -> dict[str, dict[str, object]]:
    out = {}
    for path in sorted(job.logs.glob("sa-bench_*/results_*.json")):
        raw = path.read_bytes()
        assert b"\n" not in raw, path  # one line, no newline, as sa-bench writes it
        out[job.name(str(path.relative_to(job.root)))] = json.loads(raw)
    return out


RECIPE_DERIVED = ("backend", "model_id", "tokenizer_id", "best_of", "num_prompts", "request_rate", "burstiness",
                  "max_concurrency", "completed", "request_goodput", "reuse_http_connections")  # fmt: skip


def test_result_files_have_the_real_schema(demo: Job, real: Job) -> None:
    demo_results, real_results = result_files(demo), result_files(real)
    assert sorted(demo_results) == sorted(real_results)
    for rel, real_doc in real_results.items():
        doc = demo_results[rel]
        assert list(doc) == list(real_doc), rel
        assert {k: type(v).__name__ for k, v in doc.items()} == {k: type(v).__name__ for k, v in real_doc.items()}
        for key in ("input_lens", "output_lens", "ttfts", "generated_texts", "errors"):
            assert {type(v).__name__ for v in doc[key]} == {type(v).__name__ for v in real_doc[key]}, key
        assert {k: doc[k] for k in RECIPE_DERIVED} == {k: real_doc[k] for k in RECIPE_DERIVED}, rel
        assert len(doc["input_lens"]) == len(real_doc["input_lens"]) == doc["num_prompts"]


def test_rollup_is_the_real_one(demo: Job, real: Job) -> None:
    demo_json, real_json = demo.json("logs/benchmark-rollup.json"), real.json("logs/benchmark-rollup.json")
    assert shape(demo_json) == shape(real_json)
    assert isinstance(demo_json, dict) and isinstance(real_json, dict)
    assert demo_json["config"] == real_json["config"] and demo_json["benchmark_type"] == real_json["benchmark_type"]
    assert [r["concurrency"] for r in demo_json["runs"]] == [r["concurrency"] for r in real_json["runs"]]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{6})?Z", str(demo_json["timestamp"]))

    def table(job: Job) -> tuple[bytes, list[dict[str, str]]]:
        raw = (job.logs / "benchmark-rollup.csv").read_bytes()
        return raw, list(csv.DictReader(io.StringIO(raw.decode())))

    (demo_raw, demo_rows), (real_raw, real_rows) = table(demo), table(real)
    assert demo_raw.splitlines()[0] == real_raw.splitlines()[0] and demo_raw.count(b"\r\n") == real_raw.count(b"\r\n")
    fixed = ("Config", "Total GPU Count", "Decode GPU Count", "Total Working GPU Count", "Decode Working GPU Count",
             "Prefill Working GPU Count", "Concurrency", "P90 Decode Running Requests")  # fmt: skip
    assert [{k: r[k] for k in fixed} for r in demo_rows] == [{k: r[k] for k in fixed} for r in real_rows]
    for demo_row, real_row in zip(demo_rows, real_rows, strict=True):
        assert {k: bool(v) for k, v in demo_row.items()} == {k: bool(v) for k, v in real_row.items()}


def bench_lines(job: Job) -> Iterator[str]:
    for line in job.lines(job.logs / "benchmark.out"):
        if BENCH_SITE.match(line) or line == "+ set +x":
            continue  # set -x's `+ set +x` is stderr: where it lands among stdout lines varies
        line = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$", "<date>", line)
        line = re.sub(r"chatcmpl-[0-9a-f-]+", "chatcmpl-<uuid>", line)
        line = re.sub(r'"created":\d+', '"created":#', line)
        result = re.match(r"^([A-Z][^:]{2,60}\(?[^:]*\)?:)\s+(-?\d+(?:\.\d+)?)\s*$", line)
        yield f"{result.group(1)} #" if result else line


def test_benchmark_out_has_the_real_structure(demo: Job, real: Job) -> None:
    assert list(bench_lines(demo)) == list(bench_lines(real))
    for job in (demo, real):
        text = (job.logs / "benchmark.out").read_text(encoding="utf-8")
        assert text.count("\n+ set +x\n") == text.count("Completed benchmark with concurrency:")


# --------------------------------------------------------------------------- the sweep log


def sweep_lines(job: Job) -> list[str]:
    out: list[str] = []
    skip_blank = False
    for line in job.lines(job.sweep):
        if any(p.search(line) for p in SITE_LINES):
            skip_blank = "Failed to get IP" in line  # its message ends with a newline
            continue
        if skip_blank and not line:
            skip_blank = False
            continue
        skip_blank = False
        line = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", job.name(line))
        line = re.sub(r"--container-image=\S+", "--container-image=<image>", line)
        line = re.sub(r"--container-mounts=\S+", "--container-mounts=<mounts>", line)
        line = re.sub(r"^(Config|Container|Start|End): .*", r"\1: <value>", line)
        # What the machine has: its CPUs, and what srtctl's CPU check makes of them.
        line = re.sub(r"^(CPUs per node|CPUs on orchestrator node): .*", r"\1: <cpus>", line)
        line = re.sub(r"^  (CPU hardware|CPUs|CPU affinity|CPU/GPU): .*", r"  \1: <cpus>", line)
        line = re.sub(r"^\[(?:INFO|WARNING)\] CPU (?:allocation check|ALLOCATION WARNING).*", "<cpu check>", line)
        out.append(line)
    return out


def test_sweep_log_has_srtctls_real_lines(demo: Job, real: Job) -> None:
    demo_lines, real_lines = sweep_lines(demo), sweep_lines(real)
    assert demo_lines == real_lines
