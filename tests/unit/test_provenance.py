"""Provenance and pin checks for real: the site probe and git against a checkout made here, through
the local transport; demo launches on the `local` profile."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from console.cli import main
from console.clusters import Profile, local_profile
from console.engine import Engine, build_runtime
from console.launch_plan import plan_arms
from console.pin_checks import same_commit
from console.provenance import Provenance
from console.recipes import load_recipe
from console.srtctl_site import commit_relations, probe_site
from console.store import Store
from console.transport.local import LocalTransport
from tests.conftest import RECIPES

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                         env={**os.environ, **GIT_ENV})  # fmt: skip
    return out.stdout.strip()


class Checkout:
    """An upstream-shaped srt-slurm checkout: an older commit, HEAD, and a commit on another branch."""

    def __init__(self, root: Path) -> None:
        self.path = root
        src = root / "src" / "srtctl"
        for kind, names in (("backends", ("sglang", "trtllm", "vllm", "mocker")),
                            ("frontends", ("dynamo", "sglang", "trtllm_serve", "vllm"))):  # fmt: skip
            (src / kind).mkdir(parents=True)
            for name in ("__init__", "base", *names):
                (src / kind / f"{name}.py").write_text("")
        (root / "pyproject.toml").write_text('[project]\nname = "srtctl"\nversion = "0.9.1"\n')
        (root / "srtslurm.yaml").write_text("default_partition: batch\ndefault_account: bench\n")
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "older")
        self.older = git(root, "rev-parse", "HEAD")
        git(root, "checkout", "-q", "-b", "other")
        (root / "README.md").write_text("other branch\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "elsewhere")
        self.elsewhere = git(root, "rev-parse", "HEAD")
        git(root, "checkout", "-q", "main")
        (root / "Makefile").write_text("setup:\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "head")
        self.head = git(root, "rev-parse", "HEAD")


@pytest.fixture
def checkout(tmp_path: Path) -> Checkout:
    return Checkout(tmp_path / "srt-slurm")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SRT_CONSOLE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("SRT_DEMO_SPEED", "8")
    return tmp_path / "data"


def site_profile(tmp_path: Path, checkout: Checkout, commit: str | None = None) -> Profile:
    return Profile(name="site", launcher="srtctl", ssh=None, scheduler="slurm", workdir=str(tmp_path / "work"),
                   outputs=None, results=None, srt_slurm=str(checkout.path), srtctl="srtctl-is-not-installed-here",
                   srt_slurm_commit=commit)  # fmt: skip


def sglang_recipe(tmp_path: Path, comment: str = "") -> Path:
    path = tmp_path / "agg.yaml"
    path.write_text(textwrap.dedent(f"""\
        # A plain upstream recipe.
        {comment}
        name: agg-sglang
        model: {{path: qwen3-32b, container: lmsysorg/sglang:v0.5.4, precision: bf16}}
        resources: {{gpu_type: h100, gpus_per_node: 8, agg_nodes: 1, agg_workers: 1}}
        backend:
          type: sglang
          aggregated_environment: {{SGLANG_COMMIT: 0123456789abcdef0123456789abcdef01234567}}
        benchmark: {{type: sa-bench, isl: 1024, osl: 1024, concurrencies: "4x8"}}
        """))  # fmt: skip
    return path


def write_config(tmp_path: Path, checkout: Checkout, commit: str | None) -> None:
    cfg = tmp_path / "xdg" / "srt-console" / "config.yaml"
    cfg.parent.mkdir(parents=True, exist_ok=True)
    extra = f"\n    srt_slurm_commit: {commit}" if commit else ""
    cfg.write_text(f"clusters:\n  site:\n    srt_slurm: {checkout.path}\n    workdir: {tmp_path / 'work'}{extra}\n")


def test_probe_reads_the_checkout_and_its_types(checkout: Checkout) -> None:
    async def scenario() -> None:
        transport = LocalTransport("site")
        site = await probe_site(transport, str(checkout.path))
        assert (site.commit, site.dirty, site.version, site.flavour) == (checkout.head, False, "0.9.1", "upstream")
        assert site.backends == ("mocker", "sglang", "trtllm", "vllm")
        assert site.frontends == ("dynamo", "sglang", "trtllm_serve", "vllm")
        relations = await commit_relations(transport, str(checkout.path),
                                           [checkout.older[:9], checkout.elsewhere, "deadbeefdeadbeef"])  # fmt: skip
        assert relations[checkout.older[:9]].relation == "contained"
        assert relations[checkout.older[:9]].full == checkout.older
        assert relations[checkout.elsewhere].relation == "known"
        assert relations["deadbeefdeadbeef"].relation == "unknown"
        await transport.close()

    asyncio.run(scenario())


def test_same_commit_needs_seven_digits() -> None:
    full = "4e0848dcdf94f3d4be0c1e3ce51db99bc93f8b8c"
    assert same_commit(full, full[:7]) and same_commit(full[:12].upper(), full)
    assert not same_commit(full, full[:6]) and not same_commit(full, "4e0848dcdf94f3d4be0c1e3ce51db99bc93f8b8d")


def test_pin_mismatch_is_shown_with_the_commits_side_by_side(tmp_path: Path, checkout: Checkout) -> None:
    recipe = load_recipe(sglang_recipe(tmp_path, f"# srt-slurm: {checkout.elsewhere[:10]}"))
    (arm,) = recipe.arms

    async def scenario() -> None:
        runtime = build_runtime(site_profile(tmp_path, checkout, checkout.older), tmp_path / "data")
        (plan,) = await plan_arms(runtime, [arm], dry_run=False)
        await runtime.transport.close()
        by_source = {p.message.split(" states ")[0]: p for p in plan.pin_problems if p.kind == "commit"}
        recipe_problem = by_source["srt-slurm commit mismatch: recipe (comment line 2)"]
        assert recipe_problem.blocking and "does not contain it" in recipe_problem.message
        profile_problem = by_source["srt-slurm commit differs: profile site (srt_slurm_commit)"]
        assert not profile_problem.blocking and "newer and contains it" in profile_problem.message
        assert recipe_problem.commits == (
            ("recipe (comment line 2)", checkout.elsewhere[:10]),
            ("profile site (srt_slurm_commit)", checkout.older),
            (f"cluster checkout {checkout.path}", checkout.head),
        )
        assert plan.blocking and [p.kind for p in plan.pin_problems] == ["commit", "commit"]

    asyncio.run(scenario())


def test_matching_pins_and_a_clean_checkout_raise_nothing(tmp_path: Path, checkout: Checkout) -> None:
    recipe = load_recipe(sglang_recipe(tmp_path, f"# srt-slurm: {checkout.head[:7]}"))

    async def scenario() -> None:
        runtime = build_runtime(site_profile(tmp_path, checkout, checkout.head), tmp_path / "data")
        (plan,) = await plan_arms(runtime, list(recipe.arms), dry_run=False)
        await runtime.transport.close()
        assert plan.pin_problems == [] and not plan.blocking
        assert [(s.key, s.value, s.source) for s in plan.settings][:2] == [
            ("partition", "batch", "srtslurm.yaml"), ("account", "bench", "srtslurm.yaml")]  # fmt: skip

    asyncio.run(scenario())


def test_cli_launch_refuses_a_pin_mismatch_before_submitting(
    tmp_path: Path, checkout: Checkout, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, checkout, checkout.elsewhere[:12])
    code = main(["launch", str(sglang_recipe(tmp_path)), "--cluster", "site", "--yes"])
    out, err = capsys.readouterr()
    assert code == 1 and "nothing was submitted" in err
    assert "✗ agg-sglang: srt-slurm commit mismatch: profile site (srt_slurm_commit)" in out
    assert checkout.head in out and checkout.elsewhere[:12] in out
    assert Store(data_dir / "console.sqlite3").sweeps() == []


def test_cli_launch_refuses_an_atom_recipe_on_upstream(
    tmp_path: Path, checkout: Checkout, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, checkout, None)
    code = main(["launch", str(RECIPES / "demo" / "mi355x-1p1d-tp8.yaml"), "--cluster", "site", "--yes", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1
    (refused,) = doc["refused"]
    kinds = {p["kind"]: p for p in refused["pin_problems"]}
    assert set(kinds) == {"backend", "frontend"} and all(p["blocking"] for p in kinds.values())
    backend = kinds["backend"]["message"]
    assert "backend 'atom' is not supported by the cluster's srtctl 0.9.1 (upstream flavour" in backend
    assert "frontend 'atomesh'" in kinds["frontend"]["message"]
    assert Store(data_dir / "console.sqlite3").sweeps() == []
    # The dry-run shows the same, and says no.
    assert main(["launch", str(RECIPES / "demo" / "mi355x-1p1d-tp8.yaml"), "--cluster", "site", "--dry-run"]) == 1
    assert "PIN CHECK FAILED: backend 'atom'" in capsys.readouterr().out


def test_srtctl_launch_records_what_the_checkout_holds(tmp_path: Path, checkout: Checkout) -> None:
    (checkout.path / "Makefile").write_text("setup: edited\n")  # a local change
    profile = site_profile(tmp_path, checkout)
    data = tmp_path / "data"

    async def scenario() -> None:
        engine = Engine(Store(data / "console.sqlite3"), {"site": profile}, data)
        sweep = await engine.launch([str(RECIPES / "demo" / "mi355x-2p1d-dpa-tp8.yaml")], "site")
        (attempt,) = [a for arm in engine.store.arms(sweep) for a in engine.store.attempts(arm.id)]
        await engine.close()
        # srtctl cannot run here, so nothing was submitted; what would have run is recorded.
        assert attempt.state == "SUBMIT_FAILED" and attempt.provenance is not None
        prov = Provenance.from_json(attempt.provenance)
        assert prov.checkout == {"path": str(checkout.path), "exists": True, "commit": checkout.head, "dirty": True,
                                 "version": "0.9.1", "flavour": "upstream"}  # fmt: skip
        assert (prov.launcher, prov.simulated, prov.srtctl) == ("srtctl", False, "srtctl-is-not-installed-here")
        assert prov.image == "rocm/atom-dev:nightly_202608251555"
        assert {"name": "ATOM_COMMIT", "value": "4e0848dcdf94f3d4be0c1e3ce51db99bc93f8b8c",
                "source": "backend.prefill_environment.ATOM_COMMIT"} in prov.pins  # fmt: skip
        assert "demo:" not in prov.resolved_recipe and "name: demo-dsv4-fp4" in prov.resolved_recipe
        assert prov.recipe_sha256 == hashlib.sha256(prov.resolved_recipe.encode()).hexdigest()
        assert [(s["key"], s["value"], s["source"]) for s in prov.scheduling] == [
            ("partition", "batch", "srtslurm.yaml"), ("account", "bench", "srtslurm.yaml"),
            ("time_limit", "04:00:00", "recipe")]  # fmt: skip
        assert f"srt-slurm {checkout.head[:12]} (local changes)" in prov.summary()

    asyncio.run(scenario())


def test_demo_launch_records_simulated_provenance(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from console import __version__
    from console.demo.bundle import engine_name

    assert main(["launch", str(RECIPES / "demo" / "quick.yaml"), "--yes", "--wait", "--json"]) == 0
    capsys.readouterr()
    assert main(["status", "--json"]) == 0
    (attempt,) = json.loads(capsys.readouterr().out)["sweeps"][0]["arms"][0]["attempts"]
    prov = attempt["provenance"]
    assert (prov["launcher"], prov["simulated"], prov["engine"]) == ("demo", True, engine_name())
    assert prov["console_version"] == __version__ and prov["checkout"] is None
    assert "resolved_recipe" not in prov  # status keeps it short: the digest only
    (stored,) = Store(data_dir / "console.sqlite3").attempts()
    assert prov["recipe_sha256"] == hashlib.sha256(stored.config_yaml.encode()).hexdigest()
    assert prov["scheduling"] == [s.as_dict() for s in _local_scheduling(data_dir)]


def _local_scheduling(data_dir: Path) -> list:  # type: ignore[type-arg]
    from console.launchers import scheduling

    (arm,) = load_recipe(RECIPES / "demo" / "quick.yaml").arms
    return scheduling(arm.config, local_profile(data_dir))
