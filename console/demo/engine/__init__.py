"""The demo engine: one srtctl job, simulated faithfully, inside ``<outputs>/<jobid>/``.

A stdlib-only package (``zmq`` is imported only for the ZMQ bind fault) that runs under the
system ``python3`` (3.6+) of a login or compute node. It is shipped as one zipapp file
(``console/demo/bundle.py``) and run as ``python3 srt-demo-engine-<id>.pyz <command> ...``;
it never imports the console. Its modules: ``plan`` (the arm, its faults, workers placed on
nodes), ``numbers`` (the throughput/latency model and result files), ``worker`` (node tasks),
``steps``/``startup``/``benchmark``/``cleanup``/``orchestrator`` (the job), ``commands`` (what
srtctl starts: commands, environments), ``records`` (``<JOBID>.json``, the resource snapshot, the
lockfile), ``fingerprint``, ``rollup`` (sa-bench's), ``infra`` (``infra.out``), ``dynamo`` (the
mocker's and the Dynamo frontend's log lines), ``cli``.

What it writes is checked against a job dir of the real srtctl with Dynamo's mocker
(tests/unit/test_demo_vs_real.py): the layout, the lines the console reads, the result files.

Commands:

``orchestrator``  run by the batch script: writes what srtctl writes (``config.yaml``,
                  ``sbatch_script.sh``, ``<JOBID>.json``, ``recipe.lock.yaml``, the sweep log
                  lines of srtctl on stdout), starts the workers (``srun`` on Slurm,
                  subprocesses otherwise), waits for health, runs the benchmark and cleans up.
``node``          one task per worker node (``srun --ntasks-per-node=1``): runs every worker
                  segment placed on that node, each writing ``logs/<node>_<mode>_w<i>.out``.

The orchestrator and the node tasks talk through files in ``control-<JOBID>/`` beside the plan
(worker status, the concurrency being measured, a stop flag), which works on one machine and
on a shared cluster file system alike; the job dir holds only what srtctl's would.

The plan file (``--plan``) is JSON: ``{"name", "recipe_path", "config", "backend", "frontend", "benchmark",
"isl", "osl", "concurrencies", "gpus_per_node", "roles": [{"name", "workers", "nodes",
"gpus_per_worker", "colocated", "dp_attention", "tp"}], "model", "container", "precision",
"gpu_type"}``; a bare srtctl config (v1 resources) is accepted too. ``config.demo`` holds
``startup_seconds``, ``point_seconds``, ``shards``, ``graph_batches``, ``seed``,
``tok_s_per_gpu`` and ``faults``.
"""

from .numbers import PointNumbers
from .plan import Plan, place
from .yamlout import to_yaml

__all__ = ["Plan", "PointNumbers", "place", "to_yaml"]
