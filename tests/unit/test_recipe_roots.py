"""Which recipes the operator sees: the tree they work in, and the installed copy labelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.cli.recipes_cmd import default_recipe_roots
from console.paths import bundled_recipes_dir, local_recipe_tree, root_label
from tests.conftest import ROOT


@pytest.fixture(autouse=True)
def no_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SRT_CONSOLE_CONFIG", raising=False)


def test_an_srt_slurm_tree_lists_its_own_recipes_first(tmp_path: Path) -> None:
    tree = tmp_path / "srt-slurm"
    (tree / "recipes" / "h100").mkdir(parents=True)
    (tree / "srtslurm.yaml").write_text("default_account: a\n")
    work = tree / "recipes" / "h100"
    assert local_recipe_tree(work) == ((tree / "recipes").resolve(), "srt-slurm")
    roots, notes = default_recipe_roots(None, cwd=work)
    assert roots == [str((tree / "recipes").resolve()), str(bundled_recipes_dir())] and notes == []


def test_an_srt_console_checkout_lists_its_recipes_not_the_installed_copy(tmp_path: Path) -> None:
    roots, _ = default_recipe_roots(None, cwd=ROOT / "console")
    assert roots == [str((ROOT / "recipes").resolve())]
    elsewhere, _ = default_recipe_roots(None, cwd=tmp_path)
    assert elsewhere == [str(bundled_recipes_dir())]


def test_the_installed_copy_is_labelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installed = tmp_path / "site-packages" / "console" / "_bundled" / "recipes"
    installed.mkdir(parents=True)
    monkeypatch.setattr("console.paths.bundled_recipes_dir", lambda: installed)
    assert root_label(installed) == "recipes (bundled copy)"
    assert root_label(ROOT / "recipes") == "recipes"
