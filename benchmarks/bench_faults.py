"""Reliability under faults: prints figures and writes JSON (not a timed test).

- stream: log streams killed mid-stream, N times, over sequence-numbered lines: lines lost,
  duplicated, out of order. ``--transport local`` kills the agent process (SIGKILL);
  ``--transport ssh`` aborts the SSH connection to the local test cluster (tests/cluster/up.sh).
- launch: a console SIGKILLed at a random moment of a 6-arm launch, N times: jobs on the
  scheduler vs attempts in the store after the next command, attempts left SUBMITTING.
  ``--transport local`` uses the local scheduler; ``ssh`` the test cluster's Slurm.
- fuzz: hypothesis-generated input, a fixed time budget each, for the recipe loader, the
  result-file reader, the agent's record (frame) parser and the log sanitizer: inputs tried,
  tracebacks (any exception the function must not raise), and for the sanitizer outputs that
  are not inert.

Usage: python benchmarks/bench_faults.py [--parts stream,launch,fuzz] [--transport local|ssh]
       [--kills 100] [--launches 20] [--fuzz-seconds 20] [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _cluster import cluster_env  # noqa: E402  (benchmarks/, the script's folder)

QUICK = (ROOT / "recipes" / "demo" / "quick.yaml").read_text()


def ssh_spec(env: dict[str, str]) -> dict[str, Any]:
    return {
        "host": env["SRT_CLUSTER_SSH_HOST"],
        "port": int(env["SRT_CLUSTER_SSH_PORT"]),
        "user": env["SRT_CLUSTER_SSH_USER"],
        "identity_file": env["SRT_CLUSTER_SSH_IDENTITY"],
        "known_hosts": env["SRT_CLUSTER_SSH_KNOWN_HOSTS"],
    }


# --------------------------------------------------------------------------- stream kills


async def stream_kills(kills: int, transport_kind: str) -> dict[str, Any]:
    from console.follow import Follower, LinesEvent

    if transport_kind == "ssh":
        from console.transport.ssh import SshTransport

        env = cluster_env()
        # Every connection is killed young here, which the transport otherwise takes for a server
        # that accepts and drops it (its backoff then grows to a minute): keep its delays as short
        # as the follower's, so the run measures loss and order, not the backoff.
        transport: Any = SshTransport(ssh_spec(env), name="bench", backoff_initial=0.05, backoff_max=0.5)
        # The writer has a connection of its own: the one the follower uses is the one killed.
        writer_transport: Any = SshTransport(ssh_spec(env), name="bench-writer")
        directory = f"{env['SRT_CLUSTER_WORKDIR']}/bench-faults-{os.getpid()}"
    else:
        from console.transport.local import LocalTransport

        transport = writer_transport = LocalTransport()
        directory = tempfile.mkdtemp(prefix="bench-faults-")
    log_rel = "logs/node1_agg_w0.out"
    await transport.run(["mkdir", "-p", "--", f"{directory}/logs"], check=True)
    await transport.run(["sh", "-c", f": > {shlex.quote(directory + '/' + log_rel)}"], check=True)
    seen: list[int] = []
    stop = asyncio.Event()
    # The writer runs next to the log (on the cluster for ssh): one numbered line per ~1 ms.
    writer = await writer_transport.start(
        [
            "python3",
            "-c",
            "import sys,time\nf=open(sys.argv[1],'a')\ni=0\nwhile True:\n"
            " f.write('seq %09d\\n' % i); f.flush(); i+=1\n if i % 20 == 0: time.sleep(0.01)\n",
            f"{directory}/{log_rel}",
        ]
    )
    async with Follower(transport, backoff_initial=0.05, backoff_max=0.5) as follower:

        async def consume() -> None:
            async for event in follower.events():
                if isinstance(event, LinesEvent) and event.file == log_rel:
                    seen.extend(int(line.split()[1]) for line in event.lines if line.startswith("seq "))
                if stop.is_set():
                    return

        task = asyncio.create_task(consume())
        await follower.watch(directory)
        started = time.monotonic()
        for _ in range(kills):
            before = len(seen)
            deadline = time.monotonic() + 60
            while len(seen) <= before:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no line delivered for 60 s after {len(seen)} lines: the stream is stuck")
                await asyncio.sleep(0.01)
            if transport_kind == "ssh":
                conn = transport._conn
                if conn is not None:
                    conn.abort()  # the SSH session dies under the stream
            else:
                pid = int(follower.agent_info.get("pid") or 0)
                if pid:
                    os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(random.uniform(0.0, 0.1))
        writer.terminate()
        await writer.wait(10)
        # Every line written is delivered before the figures are taken.
        last = await transport.run(["tail", "-n", "1", f"{directory}/{log_rel}"], check=True)
        final = int(last.stdout.split()[1])
        while (not seen or seen[-1] < final) and time.monotonic() - started < 600:
            await asyncio.sleep(0.05)
        stop.set()
        task.cancel()
        restarts = follower.restarts
    await transport.run(["rm", "-rf", "--", directory], timeout=60)
    await transport.close()
    if writer_transport is not transport:
        await writer_transport.close()
    expected = final + 1
    unique = set(seen)
    out_of_order = sum(1 for a, b in itertools.pairwise(seen) if b <= a)
    return {
        "transport": transport_kind,
        "kills": kills,
        "restarts": restarts,
        "lines_written": expected,
        "lines_delivered": len(seen),
        "lost": expected - len(unique & set(range(expected))),
        "duplicated": len(seen) - len(unique),
        "out_of_order": out_of_order,
    }


# --------------------------------------------------------------------------- launch kills


def launch_kills(launches: int, transport_kind: str) -> dict[str, Any]:
    from console.store import SUBMITTING, Store

    tmp = Path(tempfile.mkdtemp(prefix="bench-launch-"))
    folder = tmp / "six"
    folder.mkdir()
    long = QUICK.replace("startup_seconds: 2", "startup_seconds: 900")
    for i in range(6):
        (folder / f"q{i}.yaml").write_text(long.replace("name: demo-quick", f"name: bench-kill-{i}"))
    config = tmp / "config.yaml"
    cluster = "local"
    if transport_kind == "ssh":
        env = cluster_env()
        cluster = "bench"
        profile = {
            "ssh": ssh_spec(env),
            "launcher": "demo",
            "python": "/usr/bin/python3",
            "partition": env["SRT_CLUSTER_PARTITION"],
            "workdir": f"{env['SRT_CLUSTER_WORKDIR']}/bench-faults",
        }
        config.write_text(json.dumps({"default_cluster": "bench", "clusters": {"bench": profile}}))
    else:
        config.write_text("{}\n")
    env_vars = {**os.environ, "SRT_CONSOLE_DATA": str(tmp / "data"), "SRT_CONSOLE_CONFIG": str(config)}
    rounds: list[dict[str, Any]] = []
    for _ in range(launches):
        proc = subprocess.Popen(
            [sys.executable, "-m", "console", "launch", str(folder), "--yes", "--cluster", cluster],
            cwd=ROOT,
            env=env_vars,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(random.uniform(0.2, 3.0 if transport_kind == "local" else 8.0))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # The next command reconciles; then the cluster's jobs are compared with the store.
        subprocess.run(
            [sys.executable, "-m", "console", "status", "--json"],
            cwd=ROOT,
            env=env_vars,
            capture_output=True,
            timeout=300,
        )
        store = Store(tmp / "data" / "console.sqlite3")
        attempts = store.attempts()
        on_cluster = _cluster_jobs(tmp / "data", transport_kind, env_vars)
        known = {a.job_id for a in attempts if a.job_id}
        rounds.append(
            {
                "jobs": len(on_cluster),
                "unknown_jobs": len(on_cluster - known),
                "stuck_submitting": sum(1 for a in attempts if a.state == SUBMITTING),
            }
        )
        store.close()
        subprocess.run(
            [sys.executable, "-m", "console", "cancel", f"s{len(store_sweeps(tmp))}", "--yes"],
            cwd=ROOT,
            env=env_vars,
            capture_output=True,
            timeout=300,
        )
    return {
        "transport": transport_kind,
        "launches_killed": launches,
        "jobs_on_cluster": sum(r["jobs"] for r in rounds[-1:]),
        "jobs_unknown_to_the_store": sum(r["unknown_jobs"] for r in rounds),
        "attempts_left_submitting": sum(r["stuck_submitting"] for r in rounds),
    }


def store_sweeps(tmp: Path) -> list[Any]:
    from console.store import Store

    store = Store(tmp / "data" / "console.sqlite3")
    try:
        return store.sweeps()
    finally:
        store.close()


def _cluster_jobs(data: Path, transport_kind: str, env_vars: dict[str, str]) -> set[str]:
    if transport_kind == "local":
        from console.demo.localsched import LocalScheduler

        return set(LocalScheduler(data / "local-jobs").job_ids())
    env = cluster_env()
    spec = ssh_spec(env)
    done = subprocess.run(
        [
            "ssh",
            "-p",
            str(spec["port"]),
            "-i",
            spec["identity_file"],
            "-o",
            f"UserKnownHostsFile={spec['known_hosts']}",
            f"{spec['user']}@{spec['host']}",
            "squeue --me --noheader --states=all --format='%i|%k'; "
            "sacct -X -P --noheader --starttime=now-1days -o JobIDRaw,Comment",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return {line.split("|")[0] for line in done.stdout.splitlines() if "srt-console:" in line}


# --------------------------------------------------------------------------- fuzzing


def fuzz(seconds: float) -> dict[str, Any]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from console.follow import AgentProtocolError, RecordReader
    from console.recipes import load_recipe
    from console.results.scan import scan_result
    from console.sanitize import clean_line, decode_line

    escapes = st.sampled_from(
        [
            "\x1b]52;c;AAAA\x07",
            "\x1b]0;t\x07",
            "\x1b[2J",
            "\u202e",
            "\x9b31m",
            "\x1bP1$r",
            "\r",
            "\x00",
            "\t",
            "\u2028",
            "\x1b",
            "\x9d",
            "[bold]x[/]",
        ]
    )
    noisy_text = st.lists(st.one_of(st.text(max_size=40), escapes), max_size=30).map("".join)
    yaml_lines = QUICK.splitlines()

    @st.composite
    def recipes(draw: Any) -> str:
        lines = list(yaml_lines)
        for _ in range(draw(st.integers(0, 8))):
            i = draw(st.integers(0, len(lines)))
            lines.insert(
                i,
                draw(
                    st.one_of(
                        noisy_text,
                        st.sampled_from(
                            [
                                "- x",
                                "a: [",
                                "<<: *x",
                                "&a b: 1",
                                "? x",
                                "name: !!python/object x",
                                ": :",
                                "sweep:",
                                "override_x:",
                                "zip_override_g:",
                            ]
                        ),
                    )
                ),
            )
        if draw(st.booleans()) and lines:
            del lines[draw(st.integers(0, len(lines) - 1))]
        return "\n".join(lines)

    good = json.dumps(
        {
            "completed": 10,
            "num_prompts": 10,
            "total_output_tokens": 5,
            "output_throughput": 1.5,
            "total_token_throughput": 2.0,
            "mean_ttft_ms": 1,
            "input_lens": [1, 2],
            "errors": [""],
        }
    )

    @st.composite
    def results(draw: Any) -> tuple[bytes, bytes, int, bool]:
        base = draw(st.one_of(st.just(good.encode()), st.binary(max_size=300)))
        data = bytearray(base)
        for _ in range(draw(st.integers(0, 6))):
            pos = draw(st.integers(0, len(data)))
            data[pos:pos] = draw(
                st.sampled_from(
                    [
                        b"1" + b"0" * 400,
                        b"NaN",
                        b"-Infinity",
                        b"\x00",
                        b"{",
                        b"}",
                        b'"',
                        b"\\",
                        b"[[[[",
                        b"1e999",
                        b"\xff\xfe",
                        b',"errors":[',
                        b"9" * 5000,
                    ]
                )
            )
        cut = draw(st.integers(0, len(data)))
        whole = draw(st.booleans())
        head, tail = (bytes(data), b"") if whole else (bytes(data[:cut]), bytes(data[cut:]))
        return head, tail, len(data), whole

    frames = st.lists(
        st.one_of(
            st.binary(max_size=64),
            st.sampled_from(
                [
                    b'{"t":"hb"}\n',
                    b'{"t":"data","len":3}\nabc\n',
                    b'{"len":-1}\n',
                    b'{"len":"x"}\n',
                    b"[1]\n",
                    b'{"t":"data","len":99999999999}\n',
                    b"\n",
                ]
            ),
        ),
        max_size=20,
    )

    inert = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")

    def run(
        name: str, strategy: Any, check: Callable[[Any], str | None], allowed: tuple[type[BaseException], ...] = ()
    ) -> dict[str, Any]:
        stats: dict[str, Any] = {"inputs": 0, "tracebacks": 0, "bad_outputs": 0, "first": []}

        @settings(
            max_examples=200,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(strategy)
        def one(value: Any) -> None:
            stats["inputs"] += 1
            try:
                problem = check(value)
            except allowed:
                return
            except Exception:
                stats["tracebacks"] += 1
                if len(stats["first"]) < 3:
                    stats["first"].append(traceback.format_exc(limit=3)[-600:])
                return
            if problem:
                stats["bad_outputs"] += 1
                if len(stats["first"]) < 3:
                    stats["first"].append(problem)

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            one()
        stats["seconds"] = seconds
        return {"target": name, **stats}

    def recipe_check(text: str) -> str | None:
        recipe = load_recipe("fuzz.yaml", text=text)
        for problem in recipe.problems:
            if inert.search(str(problem)):
                return f"problem not inert: {str(problem)[:80]!r}"
        return None

    def result_check(value: tuple[bytes, bytes, int, bool]) -> str | None:
        head, tail, size, whole = value
        scan = scan_result(head, tail, size, head_is_whole=whole)
        return None if scan.status in ("done", "incomplete", "invalid") else f"status {scan.status}"

    def frame_check(chunks: list[bytes]) -> str | None:
        reader = RecordReader()
        for chunk in chunks:
            reader.feed(chunk)
        return None

    def sanitizer_check(text: str) -> str | None:
        for out in (clean_line(text, 80), decode_line(text.encode("utf-8", "surrogatepass"), 80)):
            if inert.search(out):
                return f"not inert: {out!r}"
        return None

    return {
        "budget_s": seconds,
        "targets": [
            run("recipe loader", recipes(), recipe_check),
            run("result-file reader", results(), result_check),
            run("agent record parser", frames, frame_check, allowed=(AgentProtocolError,)),
            run("log sanitizer", noisy_text, sanitizer_check),
        ],
    }


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="stream,launch,fuzz")
    parser.add_argument("--transport", choices=("local", "ssh"), default="local")
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--launches", type=int, default=20)
    parser.add_argument("--fuzz-seconds", type=float, default=20.0)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    report: dict[str, Any] = {}
    if "stream" in parts:
        report["stream"] = asyncio.run(stream_kills(args.kills, args.transport))
        s = report["stream"]
        print(
            f"[figure] stream ({s['transport']}): {s['kills']} kills, {s['restarts']} restarts, "
            f"{s['lines_written']} lines: lost {s['lost']}, duplicated {s['duplicated']}, "
            f"out of order {s['out_of_order']}"
        )
    if "launch" in parts:
        report["launch"] = launch_kills(args.launches, args.transport)
        s = report["launch"]
        print(
            f"[figure] launch kills ({s['transport']}): {s['launches_killed']} consoles SIGKILLed: "
            f"jobs unknown to the store {s['jobs_unknown_to_the_store']}, "
            f"attempts left SUBMITTING {s['attempts_left_submitting']}"
        )
    if "fuzz" in parts:
        report["fuzz"] = fuzz(args.fuzz_seconds)
        for t in report["fuzz"]["targets"]:
            print(
                f"[figure] fuzz {t['target']}: {t['inputs']} inputs in {t['seconds']:g} s, "
                f"tracebacks {t['tracebacks']}, bad outputs {t['bad_outputs']}"
            )
            for first in t["first"]:
                print("    " + first.replace("\n", "\n    "))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
