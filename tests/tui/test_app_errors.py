"""Failures surface in the UI: a background task of any screen that ends in error, and a
tracking error, are shown to the operator."""

from __future__ import annotations

from pathlib import Path

from console.clusters import local_profile
from console.engine import Engine
from console.events import TrackingError
from console.store import Store
from screens.app import make_app
from tests.tui.helpers import wait_for


def _engine(tmp_path: Path) -> Engine:
    data = tmp_path / "data"
    return Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)


def _messages(app: object) -> list[str]:
    return [n.message for n in app._notifications]  # type: ignore[attr-defined]


async def test_a_screens_worker_that_fails_is_shown(tmp_path: Path) -> None:
    app = make_app([], engine=_engine(tmp_path))
    async with app.run_test() as pilot:

        async def export() -> None:
            raise PermissionError("results.csv: read-only file system")

        app.screen.run_worker(export(), name="export results", exit_on_error=False)
        await wait_for(pilot, lambda: any("export results failed" in m for m in _messages(app)))
        (shown,) = [m for m in _messages(app) if "export results" in m]
        assert "PermissionError: results.csv: read-only file system" in shown
        assert app.is_running  # reported, not fatal


async def test_a_tracking_error_is_shown(tmp_path: Path) -> None:
    app = make_app([], engine=_engine(tmp_path))
    async with app.run_test() as pilot:
        assert app.engine is not None
        app.engine._emit(TrackingError("mi355x", "RuntimeError: a bug in the poll"))
        await wait_for(pilot, lambda: any("a bug in the poll" in m for m in _messages(app)))
        assert any(m.startswith("mi355x: ") for m in _messages(app))


def test_every_screen_and_widget_that_runs_workers_reports_their_errors() -> None:
    import importlib
    import inspect
    import pkgutil

    import screens
    from screens.app import SrtConsole
    from screens.messages import ReportsWorkerErrors

    runners = []
    for info in pkgutil.walk_packages(screens.__path__, "screens."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or cls is SrtConsole:
                continue
            # Textual's @work wraps the method (functools.wraps).
            methods = [fn for name, fn in vars(cls).items() if inspect.isfunction(fn) and not name.startswith("__")]
            if any(hasattr(fn, "__wrapped__") for fn in methods):
                runners.append(cls)
    assert len(runners) >= 5
    assert [c.__name__ for c in runners if not issubclass(c, ReportsWorkerErrors)] == []
