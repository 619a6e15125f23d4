"""The `srt-console` program: the terminal UI with no command, the core's headless commands otherwise."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from console.cli import main as cli_main


def _open_ui(roots: list[Path], notes: list[str], config_path: str | None) -> int:
    from screens.app import run  # Textual is imported only when the UI is asked for

    return run(roots=roots, notes=notes, config_path=config_path)


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(argv, ui=_open_ui)


if __name__ == "__main__":
    sys.exit(main())
