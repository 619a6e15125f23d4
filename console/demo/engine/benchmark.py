"""The benchmark: sa-bench or the InferenceX custom contract, point by point, into result files."""

import json
import os
import time

from .numbers import PointNumbers, fixed_seq_json, fmt_block, sa_bench_json
from .steps import Interrupted, Steps
from .util import FRONTEND_PORT, LineLog, as_map, write_atomic


class BenchmarkSteps(Steps):
    def run_benchmark(self) -> bool:
        plan = self.plan
        self.bench_log = LineLog(os.path.join(self.logs, "benchmark.out"))
        custom = plan.benchmark == "custom"
        runner = "Custom" if custom else ("SA-Bench" if plan.benchmark == "sa-bench" else plan.benchmark)
        self.info(f"Running {runner} benchmark")
        if custom:
            self.info("Script: bash -lc <benchmark.command>")
            self.info(
                "Command: {}".format(
                    " ".join(str(as_map(plan.config.get("benchmark")).get("command") or "").split())[:300]
                )
            )
        else:
            self.info("Script: /srtctl-benchmarks/sa-bench/bench.sh")
            self.info(
                "Command: bash /srtctl-benchmarks/sa-bench/bench.sh http://localhost:{} {} {} {} inf".format(
                    FRONTEND_PORT, plan.isl, plan.osl, "x".join(str(c) for c in plan.concurrencies)
                )
            )
        self.info("Log: {}".format(os.path.join(self.logs, "benchmark.out")))
        ok = self.custom_benchmark() if custom else self.sa_bench()
        if not ok and not self.stop_event.is_set():
            self.error("Benchmark failed with exit code 1")
        return ok

    def bout(self, text: str) -> None:
        assert self.bench_log is not None
        self.bench_log.write(text)

    def measure(self, conc: int) -> bool:
        """Let one point run for point_seconds; False when a worker died meanwhile."""
        self.control.set_point(conc)
        crash = [f for f in self.plan.faults_of("crash-at-concurrency") if f.concurrency == conc]
        deadline = time.time() + self.plan.point_seconds / self.speed
        # A worker told to crash at this point dies mid-measurement; wait for it (bounded).
        hard = deadline + (30.0 if crash else 0.0)
        while True:
            if self.check_workers():
                return False
            now = time.time()
            if now >= deadline and not crash:
                return True
            if now >= hard:
                return True
            self.stop_event.wait(0.05)
            if self.stop_event.is_set():
                raise Interrupted()

    def sa_bench(self) -> bool:
        plan = self.plan
        conc_text = "x".join(str(c) for c in plan.concurrencies)
        self.bout(
            f"SA-Bench Config: endpoint=http://localhost:{FRONTEND_PORT}; "
            f"isl={plan.isl}; osl={plan.osl}; concurrencies={conc_text}; req_rate=inf; "
            f"model={plan.served_model}; dataset=random; random_range_ratio=0.8; num_prompts_mult=10; num_warmup_mult=2"
        )
        self.bout("Verifying endpoint...")
        reply = '{"id":"chatcmpl-demo","object":"chat.completion","created":' + str(int(time.time()))
        self.bout((reply + ',"model":' + json.dumps(plan.served_model) + ',"choices":[{"index":0,"message":')[:200])
        total = plan.total_gpus
        suffix = ""
        if plan.disagg:
            suffix = "_ctx_{}_gen_{}".format(plan.gpus_of("prefill"), plan.gpus_of("decode"))
        folder = os.path.join(self.logs, f"sa-bench_isl_{plan.isl}_osl_{plan.osl}")
        if not os.path.isdir(folder):
            os.makedirs(folder)
        for conc in plan.concurrencies:
            warm = PointNumbers(plan, conc, conc * 2, 1)
            self.bout("Traffic request rate: 250.0")
            self.bout("Burstiness factor: 1.0 (Poisson process)")
            self.bout(f"Maximum request concurrency: {conc}")
            for line in fmt_block(warm, ("99",)):
                self.bout(line)
            self.bout(f"Running benchmark with concurrency: {conc}")
            self.bout(time.strftime("%a %b %d %H:%M:%S %Z %Y"))
            self.bout(
                "+ python3 -u /srtctl-benchmarks/sa-bench/benchmark_serving.py "
                f"--model {plan.served_model} --backend dynamo "
                f"--base-url http://localhost:{FRONTEND_PORT} --dataset-name random "
                f"--random-input-len {plan.isl} --random-output-len {plan.osl} "
                f"--random-range-ratio 0.8 --num-prompts {conc * 10} --max-concurrency {conc} --request-rate inf "
                "--percentile-metrics ttft,tpot,itl,e2el --save-result "
                f"--result-dir /logs/sa-bench_isl_{plan.isl}_osl_{plan.osl} "
                f"--result-filename results_concurrency_{conc}_gpus_{total}{suffix}.json"
            )
            self.bout("Traffic request rate: inf")
            self.bout("Burstiness factor: 1.0 (Poisson process)")
            self.bout(f"Maximum request concurrency: {conc}")
            if not self.measure(conc):
                self.bout(f"Error: benchmark_serving.py failed at concurrency {conc}: Server disconnected")
                return False
            numbers = PointNumbers(plan, conc, conc * 10, 0)
            name = f"results_concurrency_{conc}_gpus_{total}{suffix}.json"
            write_atomic(os.path.join(folder, name), sa_bench_json(plan, numbers))
            for line in fmt_block(numbers, ("99",)):
                self.bout(line)
            self.done_points.append((conc, numbers))
            self.bout(time.strftime("%a %b %d %H:%M:%S %Z %Y"))
            self.bout(f"Completed benchmark with concurrency: {conc}")
            self.bout("-" * 41)
        self.bout(f"SA-Bench complete. Results in /logs/sa-bench_isl_{plan.isl}_osl_{plan.osl}")
        return True

    def custom_benchmark(self) -> bool:
        plan = self.plan
        stem = plan.bench_env.get("RESULT_STEM") or plan.name
        folder = os.path.join(self.results_root, self.job_id, "fixed-seq")
        if not os.path.isdir(folder):
            os.makedirs(folder)
        for conc in plan.concurrencies:
            self.bout(
                f"Namespace(backend='openai-chat', base_url='http://{self.head}:{FRONTEND_PORT}', "
                "endpoint='/v1/chat/completions', "
                f"dataset_name='random', model='{plan.served_model}', "
                f"num_prompts={conc * 2}, max_concurrency={conc}, request_rate=inf, "
                f"random_input_len={plan.isl}, random_output_len={plan.osl}, "
                f"random_range_ratio=1.0, num_warmups={conc}, "
                "percentile_metrics='ttft,tpot,itl,e2el', metric_percentiles='90,99,99.9', save_result=True)"
            )
            self.bout("Starting initial single prompt test run...")
            self.bout("Initial test run completed. Starting main benchmark run...")
            self.bout(f"Warming up with {conc} requests...")
            self.bout("Warmup completed.")
            self.bout("Traffic request rate: inf")
            self.bout("Burstiness factor: 1.0 (Poisson process)")
            self.bout(f"Maximum request concurrency: {conc}")
            started = time.time()
            if not self.measure(conc):
                self.bout("Traceback (most recent call last):")
                self.bout("aiohttp.client_exceptions.ServerDisconnectedError: Server disconnected")
                return False
            numbers = PointNumbers(plan, conc, conc * 2, 0)
            name = f"{stem}-isl{plan.isl}-osl{plan.osl}-c{conc}.json"
            write_atomic(os.path.join(folder, name), fixed_seq_json(plan, numbers, started))
            for line in fmt_block(numbers, ("90", "99", "99.9")):
                self.bout(line)
            self.done_points.append((conc, numbers))
        return True

    # ------------------------------------------------------------- cleanup
