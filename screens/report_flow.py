"""The report from the UI (`v`): the same Markdown as `srt-console report`, saved beside the
exports and copied to the clipboard (OSC 52: the terminal decides whether to accept it)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from textual.screen import Screen

from console.report import ReportError, gather_report, render_markdown
from console.session import Session


def report_path(directory: Path, target: str) -> Path:
    return directory / f"srt-report-{target.replace(':', '-')}-{time.strftime('%Y%m%d-%H%M%S')}.md"


async def save_report(screen: Screen[Any], session: Session, target: str, directory: Path | None = None) -> Path | None:
    """Write the report of ``target`` (s2, a3, a3.1) and copy it; the path, or None on failure."""
    try:
        markdown = render_markdown(await gather_report(session, target))
    except ReportError as exc:
        screen.notify(f"no report: {exc}", severity="error")
        return None
    path = report_path(directory or Path.cwd(), target)
    try:
        path.write_text(markdown, encoding="utf-8")
    except OSError as exc:
        screen.notify(f"report not saved: {exc.strerror or exc}", severity="error")
        return None
    screen.app.copy_to_clipboard(markdown)
    screen.notify(f"Report of {target} saved to {path} and copied to the clipboard", timeout=8)
    return path
