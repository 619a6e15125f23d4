"""`check` for the upstream flavour agrees with the real srtctl, recipe by recipe.

The corpus (tests/data/srtctl-differential/) covers every backend, frontend and benchmark type
of upstream srtctl, overrides, zip groups, sweeps, concurrency spellings, the conversions its
loader makes, type errors, unknown keys, the fork's layout and impossible topologies. Each
file's name says what srtctl does with it: `ok-` accepted, `late-` accepted but refused once
the job runs, `bad-` refused at submission. The real srtctl (its dry-run, run once over the
whole corpus) is checked against those names, and the console against the real srtctl: its
verdict, the stage at which a job would stop, and each job's node count (`#SBATCH --nodes`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from console.model import Recipe
from console.recipes import load_recipe, split_target
from console.recipes.flavours import UPSTREAM
from tests.srtctl_verdicts import run_verdicts

CORPUS = Path(__file__).resolve().parents[1] / "data" / "srtctl-differential"
# Targets with a selector, and what srtctl does with them.
SELECTED = {
    "ok-override.yaml:override_small": "ok",
    "ok-override.yaml:zip_override_tp[1]": "ok",
    "ok-override.yaml:zip_override_tp": "ok",
    "ok-override.yaml:override_*": "ok",
    "ok-override.yaml:base": "ok",
    "bad-override-type-error.yaml:override_ok": "ok",
    "bad-override-type-error.yaml:override_bad": "bad",
    "ok-override.yaml:override_nope": "bad",
    "ok-override.yaml:zip_override_tp[5]": "bad",
    "ok-sglang-agg.yaml:override_x": "ok",  # a selector on a plain file is ignored
}
FILES = sorted(p.name for p in CORPUS.glob("*.yaml"))
TARGETS = FILES + list(SELECTED)


def expected(target: str) -> str:
    return SELECTED.get(target) or target.split("-", 1)[0]


def console_verdict(target: str) -> tuple[str, list[str], Recipe]:
    path, selector = split_target(str(CORPUS / target))
    recipe = load_recipe(path, selector, flavour=UPSTREAM)
    stages = sorted({p.kind.split(":", 1)[1] for p in recipe.warnings if p.kind.startswith("job-start:")})
    if not recipe.ok:
        return "bad", stages, recipe
    return ("late" if stages else "ok"), stages, recipe


def srtctl_verdict(row: dict[str, Any]) -> tuple[str, list[str]]:
    stages = sorted({m.split(":", 1)[0] for job in row["jobs"] for m in job["job_start"]})
    if not row["accepted"]:
        return "bad", stages
    return ("late" if stages else "ok"), stages


@pytest.fixture(scope="module")
def verdicts(real_srtctl: Path) -> dict[str, dict[str, Any]]:
    rows = run_verdicts(real_srtctl, [str(CORPUS / t) for t in TARGETS], timeout=120)
    return {str(Path(t).relative_to(CORPUS)): row for t, row in rows.items()}


def test_the_corpus_covers_what_it_claims() -> None:
    kinds = {expected(t) for t in TARGETS}
    assert kinds == {"ok", "late", "bad"}
    assert len(FILES) >= 100
    text = "\n".join((CORPUS / f).read_text() for f in FILES)
    for needle in ("type: mocker", "speedup_ratio", "engine_type", "type: gsm8k-bench", "type: trtllm",
                   "type: vllm", "trtllm_serve", "zip_override_", "override_", "sweep:", "schema: 2",
                   "type: atom", "concurrencies: 256", "lock:"):  # fmt: skip
        assert needle in text, needle


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
def test_check_agrees_with_the_real_srtctl(verdicts: dict[str, dict[str, Any]], target: str) -> None:
    row = verdicts[target]
    real, real_stages = srtctl_verdict(row)
    assert real == expected(target), f"srtctl: {row['error'] or row['jobs']}"
    mine, my_stages, recipe = console_verdict(target)
    problems = [str(p) for p in recipe.problems]
    assert mine == real, f"srtctl says {real} ({row['error'] or real_stages}); the console: {problems}"
    if row["accepted"]:
        assert my_stages == real_stages, f"srtctl stops the job at {row['jobs']}; the console: {problems}"
        # One arm per job, each asking for the nodes of srtctl's own job script.
        assert sorted(a.topology.node_demand for a in recipe.arms) == sorted(j["nodes"] for j in row["jobs"])
