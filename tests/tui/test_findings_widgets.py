"""The banner, the findings list and the workers table redraw only what changed: a busy job's
diagnosis arrives many times a second, and the banner's and the hint's height follow their text
(each update of them is a layout pass of the whole screen)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import Vertical

from console.signatures import default_matcher
from console.triage import Triage
from screens.widgets.findings import DiagnosisBanner, FindingsPanel
from screens.widgets.workers import WorkersPanel

WORKER = "logs/node1_decode_w0.out"
OOM = "[2026-12-01 10:00:02 DP0 TP0] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
NCCL = (
    "[2026-12-01 10:00:03 DP0 TP0] RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317,"
    " unhandled system error"
)


class Host(App[None]):
    def compose(self) -> ComposeResult:
        with Vertical():
            yield DiagnosisBanner(id="banner")
            yield WorkersPanel(id="workers")
            yield FindingsPanel(id="findings")


def counting(widget: object, name: str) -> list[object]:
    calls: list[object] = []
    original = getattr(widget, name)

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return original(*args, **kwargs)

    setattr(widget, name, spy)
    return calls


async def test_an_unchanged_diagnosis_redraws_nothing_and_a_change_redraws_it() -> None:
    triage = Triage(default_matcher())
    triage.feed(WORKER, ["[2026-12-01 10:00:01] Load weight begin.", OOM])
    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        banner = app.query_one(DiagnosisBanner)
        panel = app.query_one(FindingsPanel)
        workers = app.query_one(WorkersPanel)
        updates = counting(banner, "update")
        cells = counting(panel.query_one("DataTable"), "update_cell")
        rows = counting(panel.query_one("DataTable"), "add_row")

        def show() -> None:
            diagnosis = triage.diagnose("FAILED")
            root = diagnosis.root_cause
            banner.show(diagnosis, cancellable=False)
            workers.update_snapshot(triage.snapshot("FAILED"))
            panel.update_groups(triage.groups, root.id if root else None, root.first if root else None)

        show()
        await pilot.pause()
        assert len(updates) == 1 and len(rows) == 1 and banner.has_class("-failed")
        assert "gpu-oom" in str(banner.render())
        show()  # the same again: nothing redrawn
        await pilot.pause()
        assert (len(updates), len(rows), len(cells)) == (1, 1, 0)
        triage.feed(WORKER, [OOM])  # one more line of the same group: its count changes
        show()
        assert len(rows) == 1 and cells and len(updates) == 2
        triage.feed(WORKER, [NCCL])  # another signature: a new row
        show()
        assert len(rows) == 2
        banner.show(None, cancellable=False)
        assert not banner.has_class("-failed") and len(updates) == 3
