"""Load time of a recipe library the size of a full srt-slurm checkout (~600 files).

Writes a synthetic library into a temporary folder (plain recipes, override files with zip
groups, sweeps; sizes like srt-slurm's), loads it the way `srt-console recipes` does, and
prints the figures. Usage: python benchmarks/bench_recipes.py [--files 600] [--repeat 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console.recipes import load_targets

PLAIN = """\
# generated recipe {i}
name: bench-{i}
model: {{path: deepseek-r1, container: sglang-v0.5.{i}, precision: fp8}}
resources: {{gpu_type: gb200, gpus_per_node: 4, prefill_nodes: {p}, prefill_workers: {p},
            decode_nodes: {d}, decode_workers: 1}}
slurm: {{time_limit: "02:00:00"}}
frontend: {{type: dynamo, enable_multiple_frontends: false}}
backend:
  type: sglang
  prefill_environment: {{TORCH_DISTRIBUTED_DEFAULT_TIMEOUT: "1800", SGLANG_COMMIT: abcdef1}}
  decode_environment: {{TORCH_DISTRIBUTED_DEFAULT_TIMEOUT: "1800"}}
  sglang_config:
    prefill:
      served-model-name: deepseek-ai/DeepSeek-R1
      tp-size: 4
      disaggregation-mode: prefill
      disaggregation-transfer-backend: nixl
      mem-fraction-static: 0.8
      chunked-prefill-size: 16384
    decode:
      served-model-name: deepseek-ai/DeepSeek-R1
      tp-size: {tp}
      disaggregation-mode: decode
      disaggregation-transfer-backend: nixl
      mem-fraction-static: 0.85
      cuda-graph-max-bs: 256
benchmark: {{type: sa-bench, isl: 8192, osl: 1024, concurrencies: "4x8x16x32x64x128", req_rate: inf}}
health_check: {{max_attempts: 360, interval_seconds: 10}}
"""

OVERRIDE = """\
base:
  name: qwen-agg-{i}
  model: {{path: "hf:Qwen/Qwen3-32B", container: /shared/sglang.sqsh, precision: bf16}}
  resources: {{gpu_type: h100, gpus_per_node: 8, agg_nodes: 1, agg_workers: 4}}
  frontend: {{type: sglang, enable_multiple_frontends: false}}
  backend: {{type: sglang, sglang_config: {{aggregated: {{tp-size: 2, mem-fraction-static: 0.85}}}}}}
  benchmark: {{type: sa-bench, isl: 1024, osl: 1024, concurrencies: [8, 32, 128], req_rate: inf}}
override_small:
  benchmark: {{concurrencies: "4x8"}}
zip_override_tp:
  resources: {{agg_workers: [4, 2]}}
  backend: {{sglang_config: {{aggregated: {{tp-size: [2, 4]}}}}}}
  benchmark: {{concurrencies: [[8, 32], [16, 64, 256]]}}
"""


def write_library(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"model{i % 12}" / ("gb200" if i % 3 else "h100")
        folder.mkdir(parents=True, exist_ok=True)
        if i % 10 == 0:
            text = OVERRIDE.format(i=i)
        else:
            text = PLAIN.format(i=i, p=1 + i % 3, d=1 + i % 4, tp=4 * (1 + i % 4))
            if i % 10 == 5:
                text = text.replace("mem-fraction-static: 0.85", 'mem-fraction-static: "{mem}"')
                text += "sweep:\n  mem: [0.8, 0.85, 0.9]\n"
        (folder / f"recipe-{i:04d}.yaml").write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_library(root, args.files)
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            recipes = load_targets([root])
            times.append(time.perf_counter() - start)
        arms = sum(len(r.arms) for r in recipes)
        bad = sum(1 for r in recipes if not r.ok)
    figures = {
        "files": len(recipes),
        "arms": arms,
        "invalid": bad,
        "load_s_median": round(statistics.median(times), 4),
        "load_s_min": round(min(times), 4),
        "per_file_ms": round(1000 * statistics.median(times) / max(len(recipes), 1), 3),
    }
    for key, value in figures.items():
        print(f"{key:>14}: {value}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
