"""Which srtctl runs a recipe: detecting it, setting it per profile, and what each verdict is."""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from console.cli import main
from console.clusters import load_profiles
from console.config import load_config
from console.recipes import load_recipe, load_targets
from console.recipes.flavours import FORK, UPSTREAM, Flavour, checkout_version, detect_flavour
from tests.conftest import RECIPES, ROOT, SEED_DIR

Write = Callable[..., Path]
UPSTREAM_TARBALL = ROOT.parent / "shared" / "upstream" / "srt-slurm-c88ef731.tar.gz"

AGG = """
name: agg
model: {path: /models/m, container: /c/sglang.sqsh, precision: bf16}
resources: {gpu_type: h100, gpus_per_node: 4, agg_nodes: 1, agg_workers: 1}
frontend: {type: sglang, enable_multiple_frontends: false}
backend: {type: sglang, sglang_config: {aggregated: {tp-size: 4}}}
benchmark: {type: sa-bench, isl: 1024, osl: 256, concurrencies: "1x4", req_rate: inf}
"""
SCHEMA_2 = """
schema: 2
name: atom-v2
model: {path: /m, container: rocm/atom, precision: fp4}
resources: {gpu_type: mi355x, gpus_per_node: 8}
engine: {type: atom, mooncake_protocol: tcp}
frontend: {type: atomesh, enable_multiple_frontends: false}
roles:
  prefill: {nodes: 1, workers: 1, gpus: 8}
  decode: {nodes: 1, workers: 1, gpus: 8, args: {max-num-seqs: 256}}
benchmark: {type: custom, command: "true"}
"""
BUNDLED_ATOM = sorted([*SEED_DIR.glob("*.yaml"), RECIPES / "demo" / "mi355x-1p1d-tp8.yaml",
                       RECIPES / "demo" / "mi355x-2p1d-dpa-tp8.yaml"])  # fmt: skip


# --- detection from a checkout ---------------------------------------------------------------


def test_detects_the_real_upstream_checkout() -> None:
    if not UPSTREAM_TARBALL.exists():
        pytest.skip(f"{UPSTREAM_TARBALL} is not here")
    with tarfile.open(UPSTREAM_TARBALL) as tar:
        names = [m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name]
        pyproject = tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith("/pyproject.toml")))
        assert pyproject is not None
        text = pyproject.read().decode()
    assert detect_flavour(names, text) == Flavour("upstream", "0.3.0")
    assert detect_flavour(names) == UPSTREAM


def test_detects_the_fork_by_its_own_files() -> None:
    fork = ["src/srtctl/cli/submit.py", "src/srtctl/core/schema.py", "./src/srtctl/backends/atom.py"]
    assert detect_flavour(fork) == FORK
    assert detect_flavour(fork, '[project]\nname = "srtctl"\nversion = "0.3.1"\n') == Flavour("fork", "0.3.1")
    assert detect_flavour(["README.md", "recipes/a.yaml"]) is None  # not an srtctl checkout


def test_checkout_version_reads_the_project_table_only() -> None:
    text = '[tool.x]\nversion = "9"\n\n[project]\nname = "srtctl"\nversion = "0.3.0"\n\n[tool.y]\nversion = "8"\n'
    assert checkout_version(text) == "0.3.0"
    assert checkout_version("[tool.x]\nversion = '1'\n") is None


# --- the profile's srtctl_flavour ----------------------------------------------------------------


def test_profile_sets_the_flavour_and_wins_over_detection(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "clusters:\n"
        "  amd: {ssh: amd-login, srt_slurm: ~/srt-slurm, srtctl_flavour: fork}\n"
        "  nv: {ssh: nv-login, srt_slurm: ~/srt-slurm}\n"
        "  bad: {ssh: x, srt_slurm: ~/s, srtctl_flavour: nvidia}\n"
    )
    profiles, problems = load_profiles(load_config(str(config)), tmp_path)
    assert profiles["amd"].flavour() == FORK
    assert profiles["amd"].flavour(Flavour("fork", "0.3.1")) == Flavour("fork", "0.3.1")  # keeps the version
    assert profiles["amd"].flavour(UPSTREAM) == FORK  # the operator's setting wins
    assert profiles["nv"].flavour() is None and profiles["nv"].flavour(UPSTREAM) == UPSTREAM
    assert profiles["local"].flavour(UPSTREAM) is None  # the demo launcher runs no srtctl
    assert "bad" not in profiles
    assert any("srtctl_flavour: 'nvidia' is not one of: upstream, fork" in p for p in problems), problems


# --- the bundled fork recipes ------------------------------------------------------------------


@pytest.mark.parametrize("path", BUNDLED_ATOM, ids=lambda p: p.name)
def test_bundled_atom_recipes_are_the_forks(path: Path) -> None:
    assert load_recipe(path, flavour=FORK).problems == ()
    upstream = load_recipe(path, flavour=UPSTREAM)
    (error,) = upstream.errors  # one flavour problem, not a list of unknown keys
    assert error.field == "backend.type" and error.kind == ""
    assert "'atom' is a backend of the fork's srtctl (SemiAnalysisAI/srt-slurm), not of upstream srtctl" in (
        error.message
    )


def test_schema_2_is_the_forks_layout(write_recipe: Write) -> None:
    path = write_recipe(SCHEMA_2)
    assert load_recipe(path, flavour=FORK).problems == ()
    (error,) = load_recipe(path, flavour=UPSTREAM).errors
    assert error.field == "schema" and "is the recipe layout of the fork's srtctl" in error.message
    unknown = load_recipe(path)
    assert unknown.ok and [p.severity for p in unknown.problems] == ["warning"]


# --- when the flavour is not known -------------------------------------------------------------


def test_an_unknown_key_never_blocks_when_the_flavour_is_not_known(write_recipe: Write) -> None:
    path = write_recipe(AGG + "telemetry: {enabled: false, provider: dcgm}\n")
    recipe = load_recipe(path)
    assert recipe.ok
    (warning,) = recipe.warnings
    assert warning.field == "telemetry.provider"
    assert "in no srtctl schema the console knows" in warning.message
    assert "upstream srtctl (NVIDIA/srt-slurm 0.3.0, c88ef731)" in warning.message
    assert "SemiAnalysisAI/srt-slurm" in warning.message
    (error,) = load_recipe(path, flavour=UPSTREAM).errors
    assert error.kind == "unknown" and "upstream srtctl (NVIDIA/srt-slurm 0.3.0, c88ef731) refuses it" in (
        error.message
    )
    fork = load_recipe(path, flavour=FORK)
    assert fork.ok and "not in the fork's srtctl" in fork.warnings[0].message


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("req_rate: inf}", "req_rate: inf, tokenizer_mode: slow}", "benchmark.tokenizer_mode"),
        ("agg_workers: 1}", "agg_workers: 1, agg_critical: false}", "resources.agg_critical"),
        ("precision: bf16}", "precision: bf16}\nhost_setup: {commands: [nvidia-smi -lgc 1980]}", "host_setup"),
    ],
)
def test_a_key_of_one_flavour_says_whose_it_is(write_recipe: Write, old: str, new: str, field: str) -> None:
    path = write_recipe(AGG.replace(old, new))
    (warning,) = load_recipe(path).warnings
    assert warning.field == field
    assert warning.message == "unknown key of upstream srtctl (the fork's srtctl has it)"
    (error,) = load_recipe(path, flavour=UPSTREAM).errors
    assert "(the fork's srtctl has it)" in error.message
    assert load_recipe(path, flavour=FORK).problems == ()


def test_type_errors_stay_errors_only_where_every_flavour_refuses_them(write_recipe: Write) -> None:
    both = write_recipe(AGG.replace("agg_workers: 1", "agg_workers: many"), "both.yaml")
    for flavour in (None, UPSTREAM, FORK):
        (error,) = load_recipe(both, flavour=flavour).errors
        assert error.field == "resources.agg_workers" and "expected an integer" in error.message
    # Workers that do not fit: the fork refuses the recipe, upstream accepts it and fails at job start.
    crowded = write_recipe(AGG.replace("agg_workers: 1}", "agg_workers: 2, gpus_per_agg: 4}"), "crowded.yaml")
    assert any("do not fit" in p.message for p in load_recipe(crowded, flavour=FORK).errors)
    upstream = load_recipe(crowded, flavour=UPSTREAM)
    assert upstream.ok and [p.kind for p in upstream.warnings] == ["job-start:placement"]
    unknown = load_recipe(crowded)
    assert unknown.ok
    assert any(
        "do not fit" in p.message and "[refused by the fork's srtctl only]" in p.message for p in unknown.warnings
    )


def test_another_version_of_upstream_makes_unknown_keys_warnings(write_recipe: Write) -> None:
    path = write_recipe(AGG + "slurmm: {partition: x}\n")
    assert not load_recipe(path, flavour=Flavour("upstream", "0.3.0")).ok
    newer = load_recipe(path, flavour=Flavour("upstream", "0.4.0"))
    assert newer.ok
    assert "the cluster runs 0.4.0" in newer.warnings[0].message and "dry-run decides" in newer.warnings[0].message


def test_srtctls_conversions_are_accepted(write_recipe: Write) -> None:
    text = AGG.replace("gpus_per_node: 4", 'gpus_per_node: "4"').replace("enable_multiple_frontends: false",
                                                                       "enable_multiple_frontends: no")  # fmt: skip
    recipe = load_recipe(write_recipe(text), flavour=UPSTREAM)
    assert recipe.ok and recipe.problems == ()
    assert recipe.arms[0].topology.gpus_per_node == 4


# --- check and launch follow the flavour --------------------------------------------------------


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    config = tmp_path / "config.yaml"
    config.write_text(
        "clusters:\n"
        "  nv: {ssh: {host: 127.0.0.1, port: 9}, srt_slurm: /nonexistent, srtctl_flavour: upstream}\n"
        "  other: {ssh: {host: 127.0.0.1, port: 9}, srt_slurm: /nonexistent}\n"
    )
    monkeypatch.setenv("SRT_CONSOLE_CONFIG", str(config))
    return tmp_path


def test_check_follows_the_flavour_asked_for(
    isolated: Path, write_recipe: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(write_recipe(AGG + "telemetry: {provider: dcgm}\n"))
    assert main(["check", path]) == 0
    assert "checked against every srtctl flavour the console knows" in capsys.readouterr().err
    assert main(["check", "--flavour", "upstream", path]) == 1
    captured = capsys.readouterr()
    assert "telemetry.provider: unknown key: upstream srtctl" in captured.out
    assert "checked against upstream srtctl (NVIDIA/srt-slurm 0.3.0, c88ef731)" in captured.err
    assert main(["check", "--cluster", "nv", path]) == 1
    capsys.readouterr()
    assert main(["check", "--cluster", "other", "--json", path]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["flavour"] is None and doc["recipes"][0]["warnings"]
    assert main(["check", "--cluster", "nosuch", path]) == 2
    assert "unknown cluster 'nosuch'" in capsys.readouterr().err


def test_launch_checks_for_the_clusters_srtctl(
    isolated: Path, write_recipe: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(write_recipe(AGG + "telemetry: {provider: dcgm}\n"))
    assert main(["launch", path, "--cluster", "nv"]) == 1
    err = capsys.readouterr().err
    assert "the recipes have errors; nothing was submitted" in err and "telemetry.provider" in err
    # A profile that does not say which srtctl: the unknown key does not stop the launch (it gets
    # as far as asking for confirmation, which a script without --yes cannot give).
    assert main(["launch", path, "--cluster", "other"]) == 1
    assert "not a terminal: add --yes" in capsys.readouterr().err


def test_every_bundled_recipe_loads_for_every_flavour() -> None:
    for flavour in (None, FORK):
        assert [str(p) for r in load_targets([RECIPES], flavour=flavour) for p in r.errors] == []
