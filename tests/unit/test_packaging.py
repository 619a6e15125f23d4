"""The package as users get it: console/ stays headless, and the wheel carries recipes and assets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT

HYGIENE = """
import importlib, pkgutil, sys
import console
names = sorted(m.name for m in pkgutil.walk_packages(console.__path__, "console.") if not m.name.endswith("__main__"))
for name in names:
    importlib.import_module(name)
leaked = sorted(m for m in sys.modules if m == "textual" or m.startswith(("textual.", "screens")))
print(len(names), leaked)
"""


def test_console_never_imports_textual() -> None:
    out = subprocess.run([sys.executable, "-c", HYGIENE], capture_output=True, text=True, cwd=ROOT, check=True)
    count, leaked = out.stdout.split(" ", 1)
    assert int(count) >= 10
    assert leaked.strip() == "[]"


def test_layering_contracts_hold() -> None:
    """pyproject's import-linter contracts: console never imports screens or textual, screens
    never import the demo engine."""
    tool = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(tool)], capture_output=True, text=True, cwd=ROOT, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 kept, 0 broken" in out.stdout


@pytest.mark.slow
def test_wheel_ships_recipes_and_assets(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("srt_console-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    subprocess.run([bin_dir / "pip", "install", "--quiet", str(wheel)], check=True, capture_output=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    out = subprocess.run(
        [bin_dir / "srt-console", "recipes", "--json"], cwd=outside, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    recipes = json.loads(out.stdout)["recipes"]
    assert all(str(env_dir) in r["path"] for r in recipes), "recipes must come from the installed wheel"
    arms = {a["name"]: a for r in recipes for a in r["arms"]}
    one, two = arms["dsv4-fp4-mi355x-atom-1p1d-tp8"], arms["dsv4-fp4-mi355x-atom-2p1d-dpa-tp8"]
    assert (one["node_demand"], two["node_demand"]) == (2, 3)
    assert one["concurrencies"] == [4, 8, 16, 32, 64, 128]
    assert two["concurrencies"] == [256, 512, 768, 1024, 2048]
    installed = subprocess.run(
        [bin_dir / "python", "-c", "from console.paths import asset; print(asset('console.tcss').is_file())"],
        cwd=outside, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert installed.stdout.strip() == "True"
