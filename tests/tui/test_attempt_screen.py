"""The attempt detail screen, with the real local profile: real demo jobs, a real agent following real files."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from textual.widgets import DataTable

from console.clusters import local_profile
from console.engine import Engine
from console.events import AttemptChanged
from console.logwindow import MAX_CHARS
from console.scheduler import JobState, JobStatus
from console.store import AttemptRow
from screens.app import SrtConsole, make_app
from screens.attempt import AttemptScreen
from screens.dialogs import ConfirmDialog
from screens.messages import CoreUpdate
from screens.sweeps import SweepsScreen
from screens.widgets.findings import DiagnosisBanner, FindingsPanel
from screens.widgets.log_view import LogView
from screens.widgets.workers import WorkersPanel
from tests.conftest import RECIPES, ROOT
from tests.tui.helpers import showing, wait_for

SEED_LOGS = ROOT / "tests" / "data" / "logs" / "seed-39443"


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    monkeypatch.setenv("SRT_DEMO_SPEED", "4")
    data = tmp_path / "data"
    from console.store import Store

    return Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)


def finished_attempt(
    engine: Engine, output_dir: Path, job_id: str = "39443", state: JobState = JobState.FAILED
) -> AttemptRow:
    """An attempt whose job already ended, with its output dir at `output_dir`."""
    store = engine.store
    sweep = store.add_sweep("fixture", "local", ["fixture.yaml"])
    arm = store.add_arm(sweep, "dsv4-fp4-mi355x-atom-2p1d-dpa-tp8", "fixture.yaml", None, None, "name: x\n",
                        {"node_demand": 3, "total_gpus": 24})  # fmt: skip
    attempt = store.add_attempt(arm, "local", "demo", "name: x\n", [256])
    store.mark_submitted(attempt.id, job_id, str(output_dir), None)
    store.record_status(attempt.id, JobStatus(job_id, state, exit_code="1:0", nodelist="mi355x-a[01-03]",
                                              source="sacct"))  # fmt: skip
    return store.attempt(attempt.id)


async def open_attempt(app: SrtConsole, attempt_id: int) -> AttemptScreen:
    assert app.session is not None
    screen = AttemptScreen(app.session, attempt_id)
    await app.push_screen(screen)
    return screen


def log_view(app: SrtConsole) -> LogView:
    return app.screen.query_one(LogView)


async def test_doomed_2p1d_twin_from_the_sweeps_screen(engine: Engine) -> None:
    await engine.launch([str(RECIPES / "demo" / "mi355x-2p1d-dpa-tp8.yaml")], "local")
    app = make_app([RECIPES / "demo"], engine=engine)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("s")
        await wait_for(pilot, showing(pilot, SweepsScreen))
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count == 3)  # sweep, arm, attempt; the cursor on the attempt

        def state_of(row: int) -> str:
            return str(table.get_row_at(row)[1])

        # The sweep counts its doomed arm once; the arm and the attempt say doomed beside their state.
        await wait_for(pilot, lambda: "doomed" in state_of(0) and "doomed" in state_of(2), timeout=60)
        assert state_of(0) == "1 doomed" and state_of(2).startswith("RUNNING doomed")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, AttemptScreen))
        screen = app.screen
        assert isinstance(screen, AttemptScreen)
        banner = screen.query_one(DiagnosisBanner)

        def doomed() -> bool:
            d = banner.diagnosis
            return d is not None and d.verdict == "doomed" and d.root_cause is not None and d.deterministic

        await wait_for(pilot, doomed, timeout=60)
        assert banner.diagnosis is not None and banner.diagnosis.root_cause is not None
        assert banner.diagnosis.root_cause.id == "zmq-bind-in-use"
        shown = str(banner.render())
        assert "DOOMED" in shown and "zmq-bind-in-use" in shown and "deterministic" in shown and " c " in shown
        assert banner.has_class("-doomed")

        workers = screen.query_one(WorkersPanel)
        await wait_for(pilot, lambda: workers.stages() == dict.fromkeys(("prefill_w0", "prefill_w1", "decode_w0"),
                                                                         "failed"), timeout=30)  # fmt: skip
        findings = screen.query_one(FindingsPanel)
        assert any(r.signature == "zmq-bind-in-use" for r in findings.rows.values())

        view = log_view(app)
        await pilot.press("n")
        await wait_for(pilot, lambda: view.body.cursor_line_no is not None)
        file, line_no = view.current, view.body.cursor_line_no
        assert file is not None and line_no is not None
        assert line_no in view.body.marks[file]
        buf = view.body.buffers[file]
        assert "Address already in use" in buf.lines[line_no - buf.first_line_no] or view.body.marks[file][line_no]
        row = view.body.row_of(line_no)
        assert row is not None and view.body.scroll_y <= row < view.body.scroll_y + view.body.size.height

        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        plan = str(app.screen.query_one("#plan").render())
        attempt = engine.store.attempt(screen.attempt_id)
        assert f"job {attempt.job_id}" in plan and "3 node(s)" in plan
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, AttemptScreen))
        await wait_for(pilot, lambda: screen.attempt.state == "CANCELLED", timeout=30)
        assert "CANCELLED" in str(screen.query_one("#attempt-head").render())


async def test_seed_logs_findings_and_jump(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "outputs" / "39443"
    shutil.copytree(SEED_LOGS, out)
    attempt = finished_attempt(engine, out)
    app = make_app([], engine=engine)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        screen = await open_attempt(app, attempt.id)
        banner = screen.query_one(DiagnosisBanner)
        await wait_for(pilot, lambda: banner.diagnosis is not None and banner.diagnosis.root_cause is not None)
        assert banner.diagnosis is not None and banner.diagnosis.verdict == "failed"
        view = log_view(app)
        await wait_for(pilot, lambda: len(view.files) == 4)
        assert Path(view.files[0]).name == "sweep_39443.log"
        # Findings list: selecting a row jumps the log view to its first line.
        findings = screen.query_one(FindingsPanel)
        await wait_for(pilot, lambda: len(findings.rows) > 0)
        table = findings.query_one(DataTable)
        table.focus()
        await pilot.pause()
        target = findings.highlighted()
        assert target is not None
        await pilot.press("enter")
        await wait_for(
            pilot, lambda: view.body.cursor_line_no == target.first.line_no and view.current == target.first.file
        )
        # N goes back across files, n forward.
        await pilot.press("n")
        await wait_for(
            pilot, lambda: (view.current, view.body.cursor_line_no) != (target.first.file, target.first.line_no)
        )
        # Findings only: one row per marked line of the file shown.
        view.body.focus()
        await pilot.press("F")
        marked = [
            n
            for n in view.body.marks[view.current or ""]
            if view.body.buffers[view.current or ""].index_of(n) is not None
        ]
        assert view.body.row_count == len(marked) > 0
        assert view.body.visible_line_numbers() == sorted(marked)
        await pilot.press("F")
        assert view.body.row_count == len(view.body.buffers[view.current or ""].lines)
        # Switch files with ] and digits.
        await pilot.press("1")
        await wait_for(pilot, lambda: view.current is not None and view.current.endswith("sweep_39443.log"))
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: view.current == view.files[1])


async def test_search_and_filter(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "outputs" / "5001"
    (out / "logs").mkdir(parents=True)
    lines = [f"line {i:04d} {'needle' if i % 10 == 0 else 'hay'}" for i in range(1, 501)]
    (out / "logs" / "sweep_5001.log").write_text("\n".join(lines) + "\n")
    attempt = finished_attempt(engine, out, "5001", JobState.COMPLETED)
    app = make_app([], engine=engine)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        await open_attempt(app, attempt.id)
        view = log_view(app)
        await wait_for(pilot, lambda: view.current is not None and len(view.body.visible_line_numbers()) == 500)
        assert view.body.follow and view.body.line_at_row(view.body.row_count - 1) == 500

        await pilot.press("slash")
        await pilot.press(*"needle")
        assert len(view.body.match_line_numbers()) == 50
        await pilot.press("enter")
        first = view.body.cursor_line_no
        assert first is not None and first % 10 == 0
        await pilot.press("escape")
        await pilot.press("m")
        assert view.body.cursor_line_no == first + 10
        await pilot.press("M")
        assert view.body.cursor_line_no == first
        assert not view.body.follow  # a jump pauses following
        assert any("needle" in row for row in view.body.rendered_text())

        await pilot.press("f")
        await pilot.press(*"0 needle")  # lines 10, 100, 110 ... : "0 needle" ends lines whose number ends in 0
        await wait_for(pilot, lambda: view.body.row_count == 50)
        await pilot.press(*["backspace"] * 8)
        await pilot.press(*"0005")
        await wait_for(pilot, lambda: view.body.row_count == 1)
        assert view.body.visible_line_numbers() == [5]
        await pilot.press("escape")
        await pilot.press("f")
        prompt_value = app.screen.query_one("#log-prompt").value  # type: ignore[attr-defined]
        assert prompt_value == "0005"
        await pilot.press(*["backspace"] * 4, "enter")
        assert view.body.row_count == 500
        await pilot.press("t")
        assert view.body.follow

        # Scrolling up pauses following: new lines do not move the view; `t` follows the tail again.
        await pilot.press("up", "up")
        await wait_for(pilot, lambda: not view.body.follow)
        top = view.body.top_line_no()
        with open(out / "logs" / "sweep_5001.log", "a") as handle:
            handle.write("".join(f"line {i:04d} more\n" for i in range(501, 521)))
        buf = view.body.buffers[view.current or ""]
        await wait_for(pilot, lambda: buf.last_line_no == 520)
        view.body.flush_now()
        await pilot.pause()
        assert view.body.top_line_no() == top and not view.body.follow
        await pilot.press("t")
        await wait_for(pilot, lambda: view.body.follow and "line 0520 more" in view.body.rendered_text()[-1])


async def test_hostile_content_renders_inert_and_the_ui_stays_responsive(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "outputs" / "6001"
    logs = out / "logs"
    logs.mkdir(parents=True)
    (logs / "sweep_6001.log").write_text("sweep starting\n")
    attempt = finished_attempt(engine, out, "6001", JobState.FAILED)
    app = make_app([], engine=engine)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        await open_attempt(app, attempt.id)
        view = log_view(app)
        await wait_for(pilot, lambda: view.current is not None and view.body.row_count == 1)
        hostile = b"".join(
            [
                b"\x1b[31mred ansi\x1b[0m plain\n",
                b"\x1b]0;evil title\x07osc title \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\\n",
                b"[bold red]x[/] markup stays literal\n",
                b"nul\x00byte and bell\x07 and backspace\x08\n",
                b"bad utf8 \xff\xfe\xc3 end\n",
                b"clear screen \x1b[2J\x1b[H home\n",
            ]
        )
        with open(logs / "sweep_6001.log", "ab") as handle:
            handle.write(hostile)
        await wait_for(pilot, lambda: view.body.row_count == 7, timeout=20)
        with open(logs / "sweep_6001.log", "ab") as handle:
            handle.write(b"long " + b"A" * 10_000_000 + b"\nafter the long line\n")
        await wait_for(pilot, lambda: view.body.row_count == 9, timeout=30)
        view.body.flush_now()
        await pilot.pause()
        rows = view.body.rendered_text()
        joined = "\n".join(rows)
        assert "\x1b" not in joined and "\x00" not in joined and "\x07" not in joined
        assert "[bold red]x[/] markup stays literal" in joined
        assert "red ansi plain" in joined and "osc title link" in joined
        assert "\ufffd" in joined  # invalid UTF-8 shown as replacement characters
        buf = view.body.buffers[view.current or ""]
        long_line = buf.lines[buf.index_of(8) or 0]
        assert long_line.startswith("long AAAA") and len(long_line) <= MAX_CHARS + 40
        assert "chars]" in long_line
        assert all(len(line) <= MAX_CHARS + 40 for line in buf.lines)
        # Still responsive: a key is handled promptly.
        started = time.monotonic()
        await pilot.press("F")
        await wait_for(pilot, lambda: view.body.findings_only, timeout=2)
        assert time.monotonic() - started < 2


async def test_live_lines_are_coalesced_and_memory_is_bounded(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "outputs" / "7001"
    logs = out / "logs"
    logs.mkdir(parents=True)
    log = logs / "sweep_7001.log"
    log.write_text("".join(f"old {i}\n" for i in range(1, 30001)))
    attempt = finished_attempt(engine, out, "7001", JobState.COMPLETED)
    app = make_app([], engine=engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        screen = await open_attempt(app, attempt.id)
        view = screen.query_one(LogView)
        view.body.max_lines = 8000
        await wait_for(pilot, lambda: view.body.row_count > 0 and not view.body.buffers[view.current or ""].loading)
        buf = view.body.buffers[view.current or ""]
        assert buf.last_line_no == 30000 and buf.first_line_no > 1  # only the tail was read
        flushes = view.body.flushes
        with open(log, "a") as handle:
            for i in range(30001, 40001):
                handle.write(f"new {i}\n")
        await wait_for(pilot, lambda: buf.last_line_no == 40000, timeout=20)
        view.body.flush_now()
        assert len(buf.lines) <= 8000 + 8000 // 4
        assert view.body.flushes - flushes < 100  # 10,000 lines, a handful of refreshes
        assert view.body.line_at_row(view.body.row_count - 1) == 40000
        # Paging back: `o` reads older lines in, exactly numbered.
        first = buf.first_line_no
        await pilot.press("o")
        await wait_for(pilot, lambda: buf.first_line_no < first)
        assert buf.lines[0] == ("old" if buf.first_line_no <= 30000 else "new") + f" {buf.first_line_no}"
        # Scrolling to the top pages older lines in, keeping the rows on screen where they were.
        view.body.focus()
        top_before = buf.first_line_no
        await pilot.press("home")
        await wait_for(pilot, lambda: buf.first_line_no < top_before)
        assert view.body.top_line_no() == top_before
        # A line far above the held window (a finding, say) is reached by paging back to it.
        view.jump_to(view.current or "", 100)
        await wait_for(pilot, lambda: view.body.cursor_line_no == 100 and view.body.row_of(100) is not None)
        assert buf.lines[100 - buf.first_line_no] == "old 100"
        assert len(buf.lines) <= view.body.max_lines and buf.detached
        # Back to the tail: the newest lines come back and following resumes.
        await pilot.press("t")
        await wait_for(pilot, lambda: not buf.detached and buf.last_line_no == 40000)
        assert view.body.follow


async def test_paging_back_over_a_10_mb_line(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "outputs" / "8001"
    logs = out / "logs"
    logs.mkdir(parents=True)
    with open(logs / "sweep_8001.log", "wb") as handle:
        handle.write(b"first line\n" + b"[bold]" + b"B" * 10_000_000 + b"\x1b[2J\n")
        handle.write(b"".join(b"tail %d\n" % i for i in range(3, 103)))
    attempt = finished_attempt(engine, out, "8001", JobState.COMPLETED)
    app = make_app([], engine=engine)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        await open_attempt(app, attempt.id)
        view = log_view(app)
        await wait_for(pilot, lambda: view.current is not None and view.body.row_count > 0)
        buf = view.body.buffers[view.current or ""]
        await wait_for(pilot, lambda: not buf.loading and buf.last_line_no == 102)
        assert buf.first_line_no == 3 and buf.lines[0] == "tail 3"  # the long line is not in the tail read
        await pilot.press("o")
        await wait_for(pilot, lambda: buf.first_line_no == 2)
        long_line = buf.lines[0]
        assert long_line.startswith("[bold]BBBB") and long_line.endswith("bytes]") and len(long_line) <= MAX_CHARS
        await pilot.press("o")
        await wait_for(pilot, lambda: buf.first_line_no == 1)
        assert buf.lines[0] == "first line" and buf.at_start
        started = time.monotonic()
        await pilot.press("F")
        await wait_for(pilot, lambda: view.body.findings_only, timeout=2)
        assert time.monotonic() - started < 2


async def test_a_file_that_starts_over_is_read_again(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "outputs" / "8101"
    logs = out / "logs"
    logs.mkdir(parents=True)
    log = logs / "sweep_8101.log"
    log.write_text("".join(f"before {i}\n" for i in range(1, 51)))
    attempt = finished_attempt(engine, out, "8101", JobState.COMPLETED)
    app = make_app([], engine=engine)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        await open_attempt(app, attempt.id)
        view = log_view(app)
        await wait_for(pilot, lambda: view.current is not None and view.body.row_count == 50)
        log.write_text("".join(f"after {i}\n" for i in range(1, 6)))  # truncated and rewritten
        buf = view.body.buffers[view.current or ""]
        await wait_for(pilot, lambda: buf.lines == [f"after {i}" for i in range(1, 6)], timeout=20)
        assert buf.first_line_no == 1 and view.body.row_count == 5


async def test_a_finding_near_the_start_of_a_big_log(engine: Engine, tmp_path: Path) -> None:
    """The agent triages a big log (candidates + tail); `n` still reaches a finding far above the tail."""
    out = tmp_path / "outputs" / "8201"
    logs = out / "logs"
    logs.mkdir(parents=True)
    filler = b"[2026-08-21 10:00:01 DP0 TP0] Decode batch. #running-req: 64, gen throughput (token/s): 2345.67 #%d\n"
    with open(logs / "node1_decode_w0.out", "wb") as handle:
        handle.write(b"".join(filler % i for i in range(1, 5)))
        handle.write(b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total\n")
        handle.write(b"".join(filler % i for i in range(6, 60_001)))
    attempt = finished_attempt(engine, out, "8201", JobState.FAILED)
    app = make_app([], engine=engine)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        await open_attempt(app, attempt.id)
        view = log_view(app)
        await wait_for(pilot, lambda: view.current is not None and 5 in view.body.marks.get(view.current, {}))
        buf = view.body.buffers[view.current or ""]
        await wait_for(pilot, lambda: buf.loaded and not buf.loading and buf.last_line_no == 60_000)
        assert buf.first_line_no > 50_000  # only the tail is held
        await pilot.press("n")
        await wait_for(pilot, lambda: view.body.cursor_line_no == 5 and view.body.row_of(5) is not None)
        assert buf.lines[5 - buf.first_line_no].startswith("torch.OutOfMemoryError") and buf.detached
        assert buf.first_line_no == 1 and len(buf.lines) <= view.body.max_lines
        # Scrolling to the bottom of that window reads newer pages.
        last = buf.last_line_no
        view.body.focus()
        await pilot.press("end")
        await wait_for(pilot, lambda: buf.last_line_no > last)
        assert buf.lines[-1].endswith(f"#{buf.last_line_no}")
        await pilot.press("t")
        await wait_for(pilot, lambda: not buf.detached and buf.last_line_no == 60_000 and view.body.follow)


async def test_an_attempt_opened_before_submission_is_followed_once_submitted(engine: Engine, tmp_path: Path) -> None:
    store = engine.store
    sweep = store.add_sweep("fixture", "local", ["fixture.yaml"])
    arm = store.add_arm(sweep, "arm", "fixture.yaml", None, None, "name: x\n", {"node_demand": 1})
    attempt = store.add_attempt(arm, "local", "demo", "name: x\n", [1])
    app = make_app([], engine=engine)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        screen = await open_attempt(app, attempt.id)
        await pilot.pause()
        assert screen.view is None and "SUBMITTING" in str(screen.query_one("#attempt-head").render())
        out = tmp_path / "outputs" / "8301"
        (out / "logs").mkdir(parents=True)
        (out / "logs" / "sweep_8301.log").write_text("submitted and running\n")
        store.mark_submitted(attempt.id, "8301", str(out), None)
        screen.post_message(CoreUpdate(AttemptChanged(store.attempt(attempt.id))))
        view = log_view(app)
        await wait_for(pilot, lambda: view.body.row_count == 1, timeout=20)
        assert "submitted and running" in "\n".join(view.body.rendered_text())
        # The header follows the attempt (PENDING, or UNKNOWN once the scheduler was asked about this made-up job).
        await wait_for(
            pilot, lambda: store.attempt(attempt.id).state in str(screen.query_one("#attempt-head").render())
        )
        assert "SUBMITTING" not in str(screen.query_one("#attempt-head").render())


async def test_a_file_no_longer_followed_is_read_whole(engine: Engine, tmp_path: Path) -> None:
    out = tmp_path / "outputs" / "39443"
    shutil.copytree(SEED_LOGS, out)
    attempt = finished_attempt(engine, out)
    app = make_app([], engine=engine)
    async with app.run_test(size=(140, 45)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        assert app.monitor is not None
        screen = await open_attempt(app, attempt.id)
        view = log_view(app)
        await wait_for(pilot, lambda: len(view.files) == 4 and not (view.current or "").endswith("sweep_39443.log"))
        app.monitor.settle_s = 0  # the attempt ended "long ago"
        monitor = app.monitor
        await monitor.sync()
        assert str(out) in monitor._dirs  # pinned: followed while its screen is open
        monitor.unpin(attempt.id)  # as if nobody looked: the next sync stops following it
        await wait_for(pilot, lambda: str(out) not in monitor._dirs, timeout=10)
        await pilot.press("1")
        sweep_log = out / "logs" / "sweep_39443.log"
        buf = view.body.buffers[view.current or ""]
        await wait_for(pilot, lambda: buf.loaded and not buf.loading)
        lines = sweep_log.read_text().splitlines()
        assert buf.first_line_no == 1 and buf.lines == lines and buf.start_offset == 0
        assert screen._position(view.current or "") is None  # read whole: the stream's position is gone


async def test_live_lines_reach_only_the_attempt_screen(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every message a screen below the top one handles makes Textual repaint the whole top
    # screen: a followed log's lines (many batches a second) go to the attempt screen alone.
    from textual._compositor import Compositor

    from console.events import LogLines

    out = tmp_path / "outputs" / "7002"
    (out / "logs").mkdir(parents=True)
    log = out / "logs" / "node1_decode_w0.out"
    log.write_text("start\n")
    attempt = finished_attempt(engine, out, "7002", JobState.COMPLETED)
    received: dict[str, list[object]] = {"sweeps": [], "attempt": []}
    full_updates = 0
    render_full_update = Compositor.render_full_update

    def counted(self: Compositor, *args: object, **kwargs: object) -> object:
        nonlocal full_updates
        full_updates += 1
        return render_full_update(self, *args, **kwargs)  # type: ignore[arg-type]

    app = make_app([], engine=engine)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.monitor is not None)
        sweeps = SweepsScreen(app.session)
        await app.push_screen(sweeps)
        screen = await open_attempt(app, attempt.id)
        for name, target in (("sweeps", sweeps), ("attempt", screen)):
            post = target.post_message

            def spy(message: object, name: str = name, post: object = post) -> bool:
                if isinstance(message, CoreUpdate):
                    received[name].append(message.event)
                return post(message)  # type: ignore[operator, no-any-return]

            monkeypatch.setattr(target, "post_message", spy)
        view = screen.query_one(LogView)
        await wait_for(pilot, lambda: view.body.row_count > 0)
        monkeypatch.setattr(Compositor, "render_full_update", counted)
        flushes = view.body.flushes
        with open(log, "a") as handle:
            for i in range(40):
                handle.write("".join(f"line {i}.{k}\n" for k in range(50)))
                handle.flush()
                await pilot.pause(0.06)
        await wait_for(pilot, lambda: any("line 39.49" in row for row in view.body.rendered_text()), timeout=20)
        assert any(isinstance(e, LogLines) for e in received["attempt"])
        assert not any(isinstance(e, LogLines) for e in received["sweeps"])
        assert view.body.flushes - flushes >= 5
        assert full_updates <= (view.body.flushes - flushes) // 2
