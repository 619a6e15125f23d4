"""Hostile input: recipe text that holds escape sequences, names with control characters,
symbolic links out of the dirs a reader was given, link loops, FIFOs, unknown users in paths,
numbers no float holds. Each gets a clear message; nothing hangs, nothing leaks, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.agent import listing
from console.cli import main
from console.config import load_config
from console.describe import shown
from console.recipes import load_recipe, load_targets
from console.results import discover_results, read_local_points
from console.sanitize import has_controls
from console.triage import diagnose_output_dir
from screens.widgets.recipe_preview import numbered_yaml
from screens.widgets.recipe_tree import display_path
from tests.conftest import RECIPES, ROOT

QUICK = (RECIPES / "demo" / "quick.yaml").read_text()
# OSC 52 (clipboard write), OSC 0 (window title), screen clear, bidi override.
HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;owned\x07\x1b[2J\u202e"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SRT_DEMO_SPEED", "8")
    return tmp_path


def hostile_recipe(tmp_path: Path, name: str = f"evil{HOSTILE}") -> Path:
    """quick.yaml with the escapes in its name, in a key and in a value."""
    text = QUICK.replace("name: demo-quick", f"name: {json.dumps(name)}")
    text = text.replace(
        "precision: bf16", f"precision: {json.dumps('bf16' + HOSTILE)}\n  {json.dumps('k' + HOSTILE)}: 1"
    )
    path = tmp_path / "recipes" / "evil.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def assert_inert(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, repr(text)


# --------------------------------------------------------------------------- recipe text


def test_check_and_recipes_never_print_a_recipes_escapes(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = hostile_recipe(env)
    assert main(["check", str(path)]) == 1  # the name is refused
    out = capsys.readouterr()
    assert_inert(out.out + out.err)
    assert "name: holds control characters" in out.out
    assert main(["recipes", str(path.parent)]) == 0
    out = capsys.readouterr()
    assert_inert(out.out + out.err)
    assert "  evil " in out.out  # the arm keeps its readable part


def test_launch_refuses_a_control_character_name_and_prints_nothing_raw(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = hostile_recipe(env)
    assert main(["launch", str(path), "--yes"]) == 1
    out = capsys.readouterr()
    assert_inert(out.out + out.err)
    assert "nothing was submitted" in out.err
    assert main(["status"]) == 0
    assert_inert(capsys.readouterr().out)


@pytest.mark.parametrize("name", ["two\nlines", "tab\there", "bell\x07", "rtl\u202ename"])
def test_a_name_with_control_characters_is_an_error_at_check(tmp_path: Path, name: str) -> None:
    recipe = load_recipe(hostile_recipe(tmp_path, name))
    assert not recipe.ok
    assert any(p.field == "name" and "control characters" in p.message for p in recipe.errors)


def test_a_launch_with_a_line_break_in_a_name_never_stops_half_way(env: Path) -> None:
    """Even past check (a plan made before the rule), each arm is submitted or fails on its own."""
    import asyncio

    from console.clusters import local_profile
    from console.engine import Engine
    from console.store import Store

    good = load_recipe(RECIPES / "demo" / "quick.yaml")
    bad = load_recipe(hostile_recipe(env, "line\nbreak"))
    arms = [good.arms[0], bad.arms[0], good.arms[0]]
    data = env / "data"
    engine = Engine(Store(data / "console.sqlite3"), {"local": local_profile(data)}, data)

    async def scenario() -> list[str]:
        sweep = await engine.launch(["x.yaml"], "local", planned=([good], arms))
        states = [a.state for arm in engine.store.arms(sweep) for a in engine.store.attempts(arm.id)]
        await engine.cancel(engine.store.attempts(live=True))
        await engine.close()
        return states

    states = asyncio.run(scenario())
    assert len(states) == 3 and "SUBMITTING" not in states
    assert states[0] == "PENDING" and states[2] == "PENDING"


def test_display_helpers_make_recipe_text_inert(tmp_path: Path) -> None:
    path = hostile_recipe(tmp_path)
    recipe = load_recipe(path)
    assert_inert(shown(recipe.arms[0].name))
    for problem in recipe.problems:
        assert_inert(str(problem))
    assert_inert(numbered_yaml(recipe.text).plain)
    weird = tmp_path / f"x{HOSTILE}.yaml"
    assert_inert(display_path(str(weird), [tmp_path]))
    assert has_controls(recipe.arms[0].name) and not has_controls(shown(recipe.arms[0].name))


# --------------------------------------------------------------------------- paths


def test_recipe_folder_with_a_link_out_a_loop_and_a_fifo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "ok.yaml").write_text(QUICK)
    secret = tmp_path / "shadow"
    secret.write_text("root:SECRET-HASH:19000:0:99999:7:::\n")
    (folder / "evil.yaml").symlink_to(secret)
    (folder / "loop.yaml").symlink_to(folder / "loop.yaml")
    os.mkfifo(folder / "pipe.yaml")
    # In a child process with a deadline: a FIFO that is opened for reading would hang it.
    for command in (["check", str(folder)], ["recipes", str(folder)], ["recipes", "--json", str(folder)]):
        done = subprocess.run(
            [sys.executable, "-m", "console", *command], capture_output=True, text=True, timeout=60, cwd=ROOT,
            env={**os.environ, "SRT_CONSOLE_DATA": str(tmp_path / "data")},
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        assert "SECRET" not in done.stdout + done.stderr
        text = done.stdout + done.stderr
        assert "evil.yaml" in text and "loop.yaml" in text and "pipe.yaml" in text
    by_name = {Path(r.path).name: r for r in load_targets([str(folder)])}
    assert by_name["ok.yaml"].ok
    assert "symbolic link out of" in str(by_name["evil.yaml"].errors[0])
    assert "not a regular file" in str(by_name["pipe.yaml"].errors[0])
    assert "symbolic links" in str(by_name["loop.yaml"].errors[0]).lower()
    # Named on its own, a linked file is read: the operator chose it.
    assert not load_recipe(folder / "evil.yaml").ok


def test_recipes_in_a_folder_with_a_symlink_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    (tmp_path / "ok.yaml").write_text(QUICK)
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    monkeypatch.chdir(tmp_path)
    assert main(["recipes", "."]) == 0
    out = capsys.readouterr().out
    assert "ok.yaml" in out and "loop.yaml" in out


def test_an_unknown_user_in_recipe_dirs_is_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("recipe_dirs:\n  - ~nosuchuser-srt/x\n")
    loaded = load_config(config)
    assert any("no user 'nosuchuser-srt'" in p for p in loaded.problems)
    assert main(["--config", str(config), "recipes"]) == 0
    assert "no user 'nosuchuser-srt'" in capsys.readouterr().err
    assert main(["--config", str(config), "status"]) == 0


def _job_with_links(tmp_path: Path) -> tuple[Path, Path]:
    job = tmp_path / "job"
    real = ROOT / "tests" / "data" / "real-srtctl" / "1p1d-completed"
    subprocess.run(["cp", "-r", str(real), str(job)], check=True)
    secret = tmp_path / "shadow"
    secret.write_text("root:SECRET-HASH:19000:0:99999:7:::\nerror: CUDA out of memory\n")
    (job / "logs" / "x.out").symlink_to(secret)
    (job / "logs" / "loop").symlink_to(job / "logs" / "loop")
    (job / "logs" / "results_concurrency_8.json").symlink_to(job / "logs" / "results_concurrency_8.json")
    leak = tmp_path / "elsewhere.json"
    leak.write_text("{}")
    sub = next(p for p in (job / "logs").iterdir() if p.is_dir() and p.name.startswith("sa-bench"))
    (sub / "results_concurrency_64_gpus_16_ctx_8_gen_8.json").symlink_to(leak)
    return job, secret


def test_scan_and_results_stay_inside_the_job_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job, _secret = _job_with_links(tmp_path)
    assert main(["scan", str(job)]) == 0
    out = capsys.readouterr()
    assert "SECRET" not in out.out + out.err
    assert "skipped" in out.err and "x.out" in out.err
    assert "oom" not in out.out.lower()
    diagnosis = diagnose_output_dir(job, "COMPLETED")
    assert diagnosis is not None and diagnosis.verdict == "healthy"
    # One bad entry hides nothing else: the three real points are there, the link out is not.
    points = read_local_points(str(job))
    assert sorted(p.concurrency for p in points.points) == [1, 2, 4]
    skipped: list[tuple[str, str]] = []
    listing(str(job), "logs", 2, skipped)
    assert {os.path.basename(p) for p, _ in skipped} >= {
        "x.out", "results_concurrency_8.json", "results_concurrency_64_gpus_16_ctx_8_gen_8.json",
    }  # fmt: skip
    assert sorted(rf.concurrency or 0 for rf in discover_results(job) if rf.kind != "rollup") == [1, 2, 4]


# --------------------------------------------------------------------------- result files


def _result(concurrency: int, throughput: str) -> bytes:
    doc = {
        "date": "20250101", "backend": "sglang", "num_prompts": 10, "max_concurrency": concurrency,
        "completed": 10, "total_input_tokens": 100, "total_output_tokens": 100, "duration": 1.0,
        "request_throughput": 10.0, "total_token_throughput": 200.0, "mean_ttft_ms": 1.0,
        "median_ttft_ms": 1.0, "p99_ttft_ms": 1.0, "mean_tpot_ms": 1.0, "median_tpot_ms": 1.0, "p99_tpot_ms": 1.0,
    }  # fmt: skip
    text = json.dumps(doc)[:-1] + f', "output_throughput": {throughput}}}'
    return text.encode()


def test_a_huge_integer_makes_one_point_invalid_and_keeps_the_others(tmp_path: Path) -> None:
    logs = tmp_path / "job" / "logs"
    logs.mkdir(parents=True)
    (logs / "results_concurrency_1.json").write_bytes(_result(1, "100.5"))
    (logs / "results_concurrency_2.json").write_bytes(_result(2, "1" + "0" * 400))
    points = {p.concurrency: p for p in read_local_points(str(tmp_path / "job")).points}
    assert points[1].status == "done"
    assert points[2].status == "invalid"
    assert "out of range" in (points[2].invalid_reason or "") and "output_throughput" in (
        points[2].invalid_reason or ""
    )
