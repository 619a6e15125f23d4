"""`srt-console recipes` and `srt-console check`, run in-process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from console.cli import main
from tests.conftest import RECIPES, SEED_DIR

ARM_KEYS = {"name", "mode", "backend", "frontend", "benchmark", "isl", "osl", "concurrencies", "worker_nodes",
            "node_demand", "prefill_gpus", "decode_gpus", "agg_gpus"}  # fmt: skip


@pytest.fixture(autouse=True)
def no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SRT_CONSOLE_CONFIG", raising=False)


def test_recipes_json_lists_bundled_arms(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipes", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"path", "ok", "errors", "arms"} <= set(doc["recipes"][0])
    arms = {a["name"]: a for r in doc["recipes"] for a in r["arms"]}
    assert all(set(a) >= ARM_KEYS for a in arms.values())
    seed = arms["dsv4-fp4-mi355x-atom-2p1d-dpa-tp8"]
    assert (seed["mode"], seed["node_demand"], seed["prefill_gpus"], seed["decode_gpus"]) == ("disagg", 3, 16, 8)


def test_recipes_reads_configured_recipe_dirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], write_recipe: Callable[..., Path]
) -> None:
    extra = write_recipe((SEED_DIR / "1p1d-tp8.yaml").read_text(), "mine/extra.yaml")
    config = tmp_path / "config.yaml"
    config.write_text(f"recipe_dirs:\n  - {extra.parent}\n  - {tmp_path / 'missing'}\n")
    assert main(["--config", str(config), "recipes", "--json"]) == 0
    captured = capsys.readouterr()
    paths = [r["path"] for r in json.loads(captured.out)["recipes"]]
    assert str(extra) in paths and any(p.startswith(str(RECIPES)) for p in paths)
    assert "missing is not a directory" in captured.err


def test_recipes_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recipes", str(SEED_DIR)]) == 0
    out = capsys.readouterr().out
    assert "dsv4-fp4-mi355x-atom-2p1d-dpa-tp8" in out and "2P DPA TP8 + 1D TP8" in out
    assert "256, 512, 768, 1024, 2048" in out


def test_check_valid_and_broken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(SEED_DIR)]) == 0
    assert "2p1d-dpa-tp8.yaml: ok (1 arm)" in capsys.readouterr().out

    bad = tmp_path / "bad.yaml"
    bad.write_text((SEED_DIR / "1p1d-tp8.yaml").read_text().replace("gpu_type: mi355x", "gpu_type: [mi355x]"))
    empty = tmp_path / "empty.yaml"
    empty.write_bytes(b"")
    assert main(["check", str(bad), str(empty), str(SEED_DIR / "1p1d-tp8.yaml")]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:12: resources.gpu_type: expected a string, got list" in out
    assert f"{empty}:1: empty file" in out


def test_check_json_and_selector(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--json", f"{SEED_DIR / '1p1d-tp8.yaml'}:override_x"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is True and "ignored" in doc["recipes"][0]["warnings"][0]
    assert main(["check", str(tmp_path / "absent.yaml")]) == 1
