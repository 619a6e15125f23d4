"""The terminal UI opened straight on one attempt's screen (bench_ui_load.py runs it in a pty).

    python benchmarks/_ui_target.py ATTEMPT_ID      (SRT_CONSOLE_DATA / SRT_CONSOLE_CONFIG as usual)

The app, session and screen are the ones `srt-console` builds; only the operator's walk from
the recipes screen to the attempt (s, the sweep, the attempt, enter) is skipped.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.session import Session
from screens.app import SrtConsole
from screens.attempt import AttemptScreen


class OnAttempt(SrtConsole):
    def __init__(self, session: Session, attempt_id: int) -> None:
        super().__init__([], [], session)
        self.attempt_id = attempt_id

    def on_mount(self) -> None:
        # Runs before SrtConsole.on_mount (Textual calls both): open the attempt once that one
        # has pushed the recipes screen.
        self.call_after_refresh(self._open)

    def _open(self) -> None:
        assert self.session is not None
        self.push_screen(AttemptScreen(self.session, self.attempt_id))


def main() -> int:
    attempt_id = int(sys.argv[1])
    app = OnAttempt(Session.open(None), attempt_id)
    app.settle_collector = True  # as `srt-console` runs it
    app.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
