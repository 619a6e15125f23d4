"""Shared fixtures: where the checkout's bundled recipes are, and a recipe writer."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"
SEED_DIR = RECIPES / "mi355x" / "dsv4-fp4-atom-disagg"


@pytest.fixture
def write_recipe(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a dedented recipe text into tmp_path and return its path."""

    def write(text: str, name: str = "recipe.yaml") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    return write


# The real srtctl (upstream srt-slurm), as tests/run.sh installs it for the test cluster's user.
REAL_SRTCTL = Path("/var/lib/srt-console-cluster/home/hpcuser/srt-slurm/.venv/bin/srtctl")


@pytest.fixture(scope="session")
def real_srtctl() -> Path:
    """The `srtctl` executable of a real srt-slurm install: $SRT_REAL_SRTCTL, else the test
    cluster's. Skipped with the reason when it is missing; under CI that is a failure."""
    path = Path(os.environ.get("SRT_REAL_SRTCTL") or REAL_SRTCTL)
    if not (path.is_file() and os.access(path, os.X_OK)):
        reason = (
            f"the real srtctl is not installed at {path}: bash tests/run.sh installs it, "
            "or point SRT_REAL_SRTCTL at an srtctl executable"
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@pytest.fixture(autouse=True, scope="session")
def _own_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    """What the console keeps in the user's cache folder (the prefilter's databases) goes to a
    folder of this run, for the programs the tests start too."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))
