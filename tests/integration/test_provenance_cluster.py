"""Provenance and pin checks against the real srtctl checkout of the test cluster, over real SSH
(profile `real`); a real mocker job from the serving stack."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from console.cli import main
from tests.conftest import RECIPES
from tests.integration.conftest import engine_for
from tests.integration.serving import mocker_recipe

pytestmark = pytest.mark.cluster


def _checkout_facts(checkout: Path) -> tuple[str | None, str | None]:
    """(pyproject version, git HEAD or None) of the checkout, read on this machine's side."""
    text = (checkout / "pyproject.toml").read_text()
    version = re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE)
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True)
    return (version.group(1) if version else None), (head.stdout.strip() if head.returncode == 0 else None)


def test_the_real_upstream_srtctl_refuses_an_atom_recipe_before_submission(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twin = str(RECIPES / "demo" / "mi355x-1p1d-tp8.yaml")
    # Without a flavour in the profile the recipe passes the console's own check (an unknown
    # flavour only warns); the checkout's own backends and frontends refuse it.
    config = json.loads((site / "config.yaml").read_text())
    config["clusters"]["real"].pop("srtctl_flavour", None)
    (site / "config.yaml").write_text(json.dumps(config))
    assert main(["launch", twin, "--cluster", "real", "--yes", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    kinds = {p["kind"] for p in doc["refused"][0]["pin_problems"]}
    assert {"backend", "frontend"} <= kinds
    assert engine_for(site).store.sweeps() == []
    # srtctl's own dry-run says no too; the pin check says why in the console's words first.
    assert main(["launch", twin, "--cluster", "real", "--dry-run"]) == 1
    assert "PIN CHECK FAILED: backend 'atom'" in capsys.readouterr().out


def test_a_real_srtctl_launch_records_its_checkout(
    site: Path, serving: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = site / "mocker-agg.yaml"
    recipe.write_text(mocker_recipe(serving, "prov-mocker-agg", time_limit="00:10:00"))
    version, head = _checkout_facts(serving.checkout)
    assert main(["launch", str(recipe), "--cluster", "real", "--yes", "--json"]) == 0
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    (attempt,) = json.loads(capsys.readouterr().out)["sweeps"][0]["arms"][0]["attempts"]
    prov = attempt["provenance"]
    assert (prov["launcher"], prov["simulated"], prov["srtctl"]) == ("srtctl", False, ".venv/bin/srtctl")
    checkout = prov["checkout"]
    assert checkout["path"] == str(serving.checkout) and checkout["version"] == version
    assert checkout["flavour"] == "upstream" and checkout["commit"] == head
    assert prov["image"] == "dynamo-mocker"
    assert [s["key"] for s in prov["scheduling"]] == ["partition", "account", "time_limit"]

    async def cancel() -> None:
        engine = engine_for(site)
        await engine.cancel(engine.store.attempts(live=True))
        await engine.wait([a.id for a in engine.store.attempts()], 0.5)
        await engine.close()

    asyncio.run(cancel())
