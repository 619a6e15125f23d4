"""The demo engine and the real pipeline, both run now on the test cluster, on the same recipe.

tests/unit/test_demo_vs_real.py compares the demo with a job dir the real srtctl wrote earlier;
here both run side by side through the console (the real srtctl with Dynamo's mocker on profile
`real`, the demo engine with sbatch/srun on profile `testcluster`) and the same comparisons are
made on the two fresh job dirs: layout, what the console derives, worker and frontend files,
result files, rollup, benchmark.out and the sweep log.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import engine_for
from tests.integration.serving import Stack
from tests.unit import test_demo_vs_real as compare

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

COMPARISONS = (
    compare.test_output_layout_is_the_real_one,
    compare.test_job_records_have_the_real_schema,
    compare.test_stages_readiness_and_workers_the_console_derives_are_the_real_ones,
    compare.test_worker_and_frontend_files_are_the_real_ones,
    compare.test_infra_log_has_the_real_setup_lines,
    compare.test_result_files_have_the_real_schema,
    compare.test_rollup_is_the_real_one,
    compare.test_benchmark_out_has_the_real_structure,
    compare.test_sweep_log_has_srtctls_real_lines,
)


def test_demo_and_real_runs_of_one_recipe_compare_equal(site: Path, serving: Stack) -> None:
    # The recipe the captured real job ran, with this cluster's model directory.
    config = yaml.safe_load(compare.RECIPE.read_text())
    config["model"]["path"] = str(serving.model)
    served = serving.model_name
    for mode in ("prefill", "decode"):
        config["backend"]["mocker_config"][mode]["model-name"] = served
    recipe = site / "same-recipe.yaml"
    recipe.write_text(yaml.safe_dump(config, sort_keys=False))

    async def scenario() -> dict[str, compare.Job]:
        engine = engine_for(site)
        jobs: dict[str, compare.Job] = {}
        for cluster in ("real", "testcluster"):
            sweep = await engine.launch([str(recipe)], cluster)
            (attempt,) = [a for arm in engine.store.arms(sweep) for a in engine.store.attempts(arm.id)]
            assert attempt.job_id, attempt.error
            (final,) = await asyncio.wait_for(engine.wait([attempt.id], 0.5), 300)
            assert final.state == "COMPLETED", final
            jobs[cluster] = compare.Job(Path(final.output_dir or ""), final.job_id or "")
        await engine.close()
        return jobs

    jobs = asyncio.run(scenario())
    failed = []
    for check in COMPARISONS:
        try:
            check(jobs["testcluster"], jobs["real"])
        except AssertionError as exc:
            failed.append(f"{check.__name__}: {str(exc)[:1500]}")
    assert not failed, "\n\n".join(failed)
