"""The terminal UI under load: 64 worker logs each growing by 1,000 lines a second.

A held demo job is launched (`srt-console launch`, on this machine or, with ``--transport ssh``,
on the local test cluster over SSH: tests/cluster/up.sh), --files worker logs are created in its
logs folder and a writer process appends --rate lines a second to each (SGLang decode lines, in
50 ms batches) for --duration seconds. The console runs in a real pseudo-terminal, opened on the
job's attempt screen; the bench reads every byte it writes to the terminal (so the figures are
what an operator's terminal receives), and measures, in one run:

- key press -> frame: from writing a key to the pty until the terminal receives the frame that
  shows its effect: `w` (wrap on: the status line says so) and `2`/`3` (show another worker's
  log: its lines arrive); first half of the run;
- append -> line on screen: a marker line appended to the shown worker log, with the log view
  filtered on the marker's word (an unfiltered view following 1,000 lines a second shows a line
  for a few ms at most): second half of the run;
- write -> finding on screen: a failure line appended to a worker log, until the findings
  title counts it; all along. srtctl's own monitor (``srtctl monitor``, the peer) runs in a second
  pty on the same job's outputs (over SSH on the login node with --transport ssh), opened on the
  job's detail view; for each failure line, when (and whether) its worker panel shows it;
- memory: resident size of the console's process tree every 5 s (first minute, end, growth).

    .venv/bin/python benchmarks/bench_ui_load.py [--transport local|ssh] [--duration 600] [--files 64]
        [--rate 1000] [--srtctl PATH] [--peer-python PATH] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import multiprocessing
import os
import pty
import re
import select
import shlex
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from console.store import Store  # noqa: E402  (after the path set-up above)

COLS, ROWS = 160, 50
PEER_PYTHON = "/work/srtctl-dev/venv/bin/python"
"""--transport local: an interpreter with srtctl installed (from ../shared/upstream/)."""
CLUSTER_SRTCTL = "~/srt-slurm/.venv/bin/srtctl"
"""--transport ssh: srtctl on the login node (tests/cluster/stack.sh installs it there)."""
FAILURES = [
    "zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5557')",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB",
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled system error",
]
FINDINGS_RE = re.compile(rb"findings: (\d+) line")
"""The findings panel's title: how many finding lines it counts."""


# ---------------------------------------------------------------------------- the load


def worker_names(files: int) -> list[str]:
    half = files // 2
    names = [f"node{i + 2:02d}_prefill_w{i}.out" for i in range(half)]
    return names + [f"node{half + i + 2:02d}_decode_w{i}.out" for i in range(files - half)]


def tag(name: str) -> str:
    """A word each of a file's lines carries (and nothing else on screen does)."""
    m = re.match(r"node\d+_(prefill|decode)_w(\d+)\.out", name)
    assert m is not None
    return f"src={m.group(1)[0]}{int(m.group(2)):02d}"


def writer(logs: str, names: list[str], rate: int, stop_at: float, report: Any) -> None:
    """Append ``rate`` lines a second to each file, in 50 ms batches, until ``stop_at``."""
    tick = 0.05
    per_tick = max(1, round(rate * tick))
    handles = [os.open(os.path.join(logs, n), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) for n in names]
    prefixes = [
        f"[2026-12-01 10:00:01 DP{i % 8} TP{i % 8}] {tag(n)} Decode batch. #running-req: 64, #token: 81234, "
        f"token usage: 0.41, cuda graph: True, gen throughput (token/s): 2345.67, #queue-req: 0, n="
        for i, n in enumerate(names)
    ]
    written = late = 0
    n = 0
    next_at = time.monotonic()
    while time.monotonic() < stop_at:
        for fd, prefix in zip(handles, prefixes, strict=True):
            os.write(fd, "".join(f"{prefix}{n + k}\n" for k in range(per_tick)).encode())
        n += per_tick
        written += per_tick * len(handles)
        next_at += tick
        pause = next_at - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        else:
            late += 1
    for fd in handles:
        os.close(fd)
    report.put({"lines": written, "late_ticks": late})


def append_line(path: Path, text: str) -> float:
    """One line appended (one write, O_APPEND: never inside the writer's batches); when."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        at = time.monotonic()
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)
    return at


# ---------------------------------------------------------------------------- a terminal


class Pty:
    """A program on a pseudo-terminal, its output drained all the time (a full pty would stall
    the program), and the first time each awaited word arrives after it was asked for."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.fd = master
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                                     env={**env, "TERM": "xterm-256color"}, start_new_session=True,
                                     close_fds=True)  # fmt: skip
        os.close(slave)
        self.lock = threading.Lock()
        self.watch: dict[bytes, float | None] = {}
        self.tail = b""
        self.received = 0
        self.last_text = b""  # the last 1 MB, for messages and the screen at the end
        self.count: int | None = None  # the last "findings: N line(s)" drawn
        self._stop = False
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while not self._stop:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 1 << 16)
            except OSError:
                return
            now = time.monotonic()
            if not data:
                return
            with self.lock:
                self.received += len(data)
                window = self.tail + data
                for word, seen in self.watch.items():
                    if seen is None and word in window:
                        self.watch[word] = now
                counts = FINDINGS_RE.findall(window)
                if counts:
                    self.count = int(counts[-1])
                self.tail = window[-256:]
                self.last_text = (self.last_text + data)[-(1 << 20) :]

    def expect(self, word: str) -> None:
        with self.lock:
            self.watch[word.encode()] = None

    def seen(self, word: str, timeout: float) -> float | None:
        """When ``word`` arrived (after :meth:`expect`), or None after ``timeout`` s."""
        key = word.encode()
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                at = self.watch.get(key)
            if at is not None or time.monotonic() > deadline or self.proc.poll() is not None:
                with self.lock:
                    self.watch.pop(key, None)
                return at
            time.sleep(0.002)

    def press(self, keys: str) -> float:
        at = time.monotonic()
        os.write(self.fd, keys.encode())
        return at

    def screen(self) -> list[str]:
        """What the terminal shows now: the program is made to draw it whole (a resize), and that
        frame is replayed."""
        for cols in (COLS - 1, COLS):
            fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, cols, 0, 0))
            with contextlib.suppress(ProcessLookupError):  # not its controlling terminal: no signal of its own
                os.killpg(self.proc.pid, signal.SIGWINCH)
            time.sleep(1.0)
            if cols == COLS - 1:
                with self.lock:
                    self.last_text = b""
        with self.lock:
            return screen_text(self.last_text)

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._stop = True
        self.thread.join(2)
        os.close(self.fd)


def screen_text(output: bytes) -> list[str]:
    """What a terminal shows after ``output`` (its last bytes replayed; clean text)."""
    import pyte

    from console.sanitize import clean_line

    screen = pyte.Screen(COLS, ROWS)
    pyte.ByteStream(screen).feed(output)
    return [clean_line(row.rstrip(), COLS) for row in screen.display if row.strip()]


def tree_rss_kb(pid: int) -> int:
    """Resident size of a process and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        ppid = int(fields.get("PPid", "0").strip())
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = int(fields.get("VmRSS", "0 kB").split()[0]) if "VmRSS" in fields else 0
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo.extend(children.get(p, []))
    return total


# ---------------------------------------------------------------------------- the run


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def summary(samples: list[float | None]) -> dict[str, Any]:
    got = [s * 1000 for s in samples if s is not None]
    out: dict[str, Any] = {"probes": len(samples), "shown": len(got)}
    if got:
        out |= {"p50_ms": round(statistics.median(got), 1), "p99_ms": round(percentile(got, 0.99), 1),
                "max_ms": round(max(got), 1)}  # fmt: skip
    return out


def console_env(data: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRT_CONSOLE")}
    env |= {"SRT_CONSOLE_DATA": str(data), "SRT_CONSOLE_CONFIG": str(config), "ESCDELAY": "25"}
    return env


def ssh_config(path: Path) -> tuple[str, list[str]]:
    """The test cluster as a profile; the ssh command line for the login node."""
    from _cluster import cluster_env

    env = cluster_env()
    config = {"clusters": {"bench": {
        "ssh": {"host": env["SRT_CLUSTER_SSH_HOST"], "port": int(env["SRT_CLUSTER_SSH_PORT"]),
                "user": env["SRT_CLUSTER_SSH_USER"], "identity_file": env["SRT_CLUSTER_SSH_IDENTITY"],
                "known_hosts": env["SRT_CLUSTER_SSH_KNOWN_HOSTS"]},
        "launcher": "demo", "python": "/usr/bin/python3", "partition": env["SRT_CLUSTER_PARTITION"],
        "workdir": f"{env['SRT_CLUSTER_WORKDIR']}/bench-ui-load"}}}  # fmt: skip
    path.write_text(json.dumps(config))
    ssh = ["ssh", "-F", "/dev/null", "-tt", "-p", env["SRT_CLUSTER_SSH_PORT"], "-i", env["SRT_CLUSTER_SSH_IDENTITY"],
           "-o", f"UserKnownHostsFile={env['SRT_CLUSTER_SSH_KNOWN_HOSTS']}", "-o", "StrictHostKeyChecking=yes",
           f"{env['SRT_CLUSTER_SSH_USER']}@{env['SRT_CLUSTER_SSH_HOST']}"]  # fmt: skip
    return "bench", ssh


def launch(tmp: Path, env: dict[str, str], cluster: str | None, hold_s: float) -> tuple[int, Path]:
    """A demo job held in start-up for ``hold_s``; (attempt id, its output dir)."""
    quick = (ROOT / "recipes" / "demo" / "quick.yaml").read_text()
    recipe = tmp / "hold.yaml"
    recipe.write_text(quick.replace("startup_seconds: 2", f"startup_seconds: {int(hold_s)}"))
    argv = [sys.executable, "-m", "screens", "launch", str(recipe), "--yes", "--json"]
    if cluster:
        argv += ["--cluster", cluster]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
    if out.returncode != 0:
        raise SystemExit(f"launch failed ({out.returncode}): {out.stdout}{out.stderr}")
    store = Store(Path(env["SRT_CONSOLE_DATA"]) / "console.sqlite3")
    deadline = time.monotonic() + 300
    while True:
        # A poll records RUNNING and the output dir.
        subprocess.run([sys.executable, "-m", "screens", "status"], env=env, capture_output=True, timeout=120,
                       check=False)  # fmt: skip
        (attempt,) = store.attempts()
        if attempt.state == "RUNNING" and attempt.output_dir and Path(attempt.output_dir, "logs").is_dir():
            return attempt.id, Path(attempt.output_dir)
        if time.monotonic() > deadline:
            raise SystemExit(f"the held job did not start: {attempt.state}")
        time.sleep(0.5)


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-ui-load-", dir=args.scratch))
    data, config = tmp / "data", tmp / "config.yaml"
    cluster: str | None = None
    ssh: list[str] = []
    if args.transport == "ssh":
        cluster, ssh = ssh_config(config)
    env = console_env(data, config)
    hold = args.duration + 600
    attempt_id, out = launch(tmp, env, cluster, hold)
    logs = out / "logs"
    names = worker_names(args.files)
    for name in names:  # all there before the console opens: the file keys 2 and 3 stay put
        (logs / name).write_text(f"[2026-12-01 10:00:00] {tag(name)} worker starting\n")
    stop_at = time.monotonic() + args.warmup + args.duration
    reports: multiprocessing.Queue[dict[str, int]] = multiprocessing.Queue()
    load = multiprocessing.Process(target=writer, args=(str(logs), names, args.rate, stop_at, reports))
    load.start()

    ui = Pty([sys.executable, str(ROOT / "benchmarks" / "_ui_target.py"), str(attempt_id)], env)
    peer: Pty | None = None
    # srtctl monitor shows worker files sorted by name; its first one is the one its detail view shows.
    peer_file = sorted(p.name for p in logs.glob("*.out") if p.name != "benchmark.out")[0]
    sweep_log = f"sweep_{out.name}.log"
    if args.transport == "ssh":
        # `srtctl monitor` takes no options (its argparse drops them: "unrecognized arguments");
        # it reads ./outputs.
        command = f"cd {shlex.quote(str(out.parent.parent))} && {args.srtctl} monitor"
        peer = Pty([*ssh, command], dict(os.environ))
    elif Path(args.peer_python).exists():
        peer = Pty([args.peer_python, "-m", "srtctl.cli.monitor", "--outputs", str(out.parent), "--all"],
                   dict(os.environ))  # fmt: skip
    figures: dict[str, Any] = {"transport": args.transport, "files": args.files, "rate_per_file": args.rate,
                               "duration_s": args.duration}  # fmt: skip
    keys_wrap: list[float | None] = []
    keys_file: list[float | None] = []
    appended: list[float | None] = []
    finding: dict[str, list[float | None]] = {"busy": [], "quiet": []}
    peer_finding: dict[str, list[float | None]] = {"busy": [], "quiet": []}
    rss: list[tuple[float, int]] = []
    try:
        ui.expect("findings:")
        if ui.seen("findings:", 120) is None:
            raise SystemExit("the attempt screen did not open:\n" + ui.last_text.decode(errors="replace")[-2000:])
        if peer is not None:
            job = out.name
            peer.expect(job)
            if peer.seen(job, 60) is not None:
                time.sleep(1.0)  # its job list is drawn; enter opens the first (only) job's detail view
                peer.press("\r")
        time.sleep(args.warmup)
        started = time.monotonic()
        half = started + args.duration / 2
        shown = 1  # file key: 2 -> the first worker log, 3 -> the second
        next_rss = started
        probe = 0
        filtered = False
        while time.monotonic() < started + args.duration:
            now = time.monotonic()
            if now >= next_rss:
                rss.append((round(now - started, 1), tree_rss_kb(ui.proc.pid)))
                next_rss += 5
            probe += 1
            if not args.no_findings:
                # write -> finding, in turn: in srtctl monitor's shown worker log (under load), in the
                # sweep log (quiet: srtctl's own), in another worker log
                kind = ("busy", "quiet", "busy")[probe % 3]
                target = (peer_file, sweep_log, names[probe % len(names)])[probe % 3]
                before = ui.count or 0
                word = f"qz{probe:06d}"
                expected = f"findings: {before + 1} line"
                ui.expect(expected)
                watch_peer = peer is not None and target in (peer_file, sweep_log)
                if watch_peer:
                    assert peer is not None
                    peer.expect(word)
                line = f"[2026-12-01 10:00:02 DP0 TP0] {word} {FAILURES[probe % len(FAILURES)]}"
                at = append_line(logs / target, line)
                got = ui.seen(expected, 5.0)
                finding[kind].append(None if got is None else got - at)
                if watch_peer:
                    assert peer is not None
                    seen = peer.seen(word, max(0.0, at + 3.0 - time.monotonic()))
                    peer_finding[kind].append(None if seen is None else seen - at)
            if time.monotonic() < half:
                # key -> frame: wrap on (then off, not timed), then the other worker log
                ui.expect("· wrap")
                pressed = ui.press("w")
                got = ui.seen("· wrap", 5.0)
                keys_wrap.append(None if got is None else got - pressed)
                ui.press("w")
                time.sleep(0.2)
                shown = 2 if shown == 1 else 1
                word = tag(names[shown - 1]) + " "
                ui.expect(word)
                pressed = ui.press(str(shown + 1))
                got = ui.seen(word, 5.0)
                keys_file.append(None if got is None else got - pressed)
            else:
                if not filtered:
                    ui.press("f")
                    time.sleep(0.3)
                    ui.press("latency-probe\r")
                    time.sleep(0.5)
                    filtered = True
                word = f"zq{probe:06d}"
                ui.expect(word)
                at = append_line(logs / names[shown - 1], f"[2026-12-01 10:00:03] latency-probe {word}")
                got = ui.seen(word, 5.0)
                appended.append(None if got is None else got - at)
            time.sleep(max(0.0, args.every - (time.monotonic() - now)))
        rss.append((round(time.monotonic() - started, 1), tree_rss_kb(ui.proc.pid)))
        figures["screen_at_end"] = ui.screen()
    finally:
        ui.close()
        if peer is not None:
            peer.close()
        load.join(args.warmup + args.duration + 30)
        with contextlib.suppress(Exception):
            figures["load"] = reports.get(timeout=5)
        subprocess.run([sys.executable, "-m", "screens", "cancel", "a1.1", "--yes"], env=env, capture_output=True,
                       timeout=120, check=False)  # fmt: skip
        for name in names:  # gigabytes of load
            with contextlib.suppress(OSError):
                (logs / name).unlink()
    figures["key_wrap"] = summary(keys_wrap)
    figures["key_file"] = summary(keys_file)
    figures["append_to_screen"] = summary(appended)
    figures["write_to_finding_worker_log"] = summary(finding["busy"])
    figures["write_to_finding_sweep_log"] = summary(finding["quiet"])
    if peer is not None:
        figures["peer_srtctl_monitor_worker_log"] = summary(peer_finding["busy"])
        figures["peer_srtctl_monitor_sweep_log"] = summary(peer_finding["quiet"])
        figures["peer_screen_at_end"] = screen_text(peer.last_text)
    first_minute = [kb for t, kb in rss if t <= 60] or [rss[0][1]]
    figures["rss_mb"] = {"first_minute": round(max(first_minute) / 1024, 1), "end": round(rss[-1][1] / 1024, 1),
                         "max": round(max(kb for _, kb in rss) / 1024, 1), "samples": len(rss),
                         "series": [(t, round(kb / 1024, 1)) for t, kb in rss]}  # fmt: skip
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", choices=("local", "ssh"), default="local")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of measurement under load")
    parser.add_argument("--warmup", type=float, default=15.0, help="seconds of load before measuring")
    parser.add_argument("--files", type=int, default=64)
    parser.add_argument("--rate", type=int, default=1000, help="lines a second appended to each file")
    parser.add_argument("--no-findings", action="store_true", help="no failure lines: keys and appends only")
    parser.add_argument("--every", type=float, default=1.0, help="seconds between probe rounds")
    parser.add_argument("--srtctl", default=CLUSTER_SRTCTL, help="--transport ssh: srtctl on the login node")
    parser.add_argument("--peer-python", default=PEER_PYTHON, help="--transport local: python with srtctl")
    parser.add_argument("--scratch", default=None, help="where the job's data goes (gigabytes)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures = run(args)
    for key, value in figures.items():
        print(f"{key:>32}: {value}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
