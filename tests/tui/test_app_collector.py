"""The program moves what its start-up made out of the cyclic collector's sight once the UI is
up (a full collection of it all stalled frames under a busy log); an app a test makes does not."""

from __future__ import annotations

import gc

from screens.app import make_app
from tests.tui.helpers import wait_for


async def test_the_program_freezes_its_start_up_objects_once_the_ui_is_up() -> None:
    assert gc.get_freeze_count() == 0
    app = make_app([])
    async with app.run_test() as pilot:
        await pilot.pause()
        assert gc.get_freeze_count() == 0  # not by default: a test's app would never be freed
    app = make_app([])
    app.settle_collector = True  # as screens.app.run sets it
    try:
        async with app.run_test() as pilot:
            await wait_for(pilot, lambda: gc.get_freeze_count() > 0)
            assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
