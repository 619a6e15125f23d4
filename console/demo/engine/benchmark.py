"""The benchmark: sa-bench or the InferenceX custom contract, point by point, into result files."""

import json
import os
import time

from .commands import sa_bench_argv, sa_bench_gpus, shell_join
from .numbers import PointNumbers, fixed_seq_json, fmt_block, sa_bench_json
from .plan import Plan
from .steps import Interrupted, Steps
from .util import FRONTEND_PORT, LineLog, as_map, write_atomic

_REQUESTS_LOGGED = 64  # request lines the demo's frontend writes per benchmark run, at most


def namespace(plan: Plan, conc: int, prompts: int, rate: str, result: "tuple[str, str] | None") -> str:
    """benchmark_serving.py's parsed arguments, as it prints them."""
    b = plan.bench
    items = [
        ("backend", "dynamo"), ("base_url", None), ("host", "localhost"), ("port", FRONTEND_PORT),
        ("endpoint", "/v1/completions"), ("dataset", None), ("dataset_name", b.dataset_name),
        ("dataset_path", b.dataset_path or None), ("max_concurrency", conc),
        ("reuse_http_connections", b.reuse_http_connections), ("slow_down_servers", None),
        ("slow_down_sleep_time", 1.0), ("slow_down_wait_time", 60.0), ("model", plan.served_model),
        ("tokenizer", plan.tokenizer), ("best_of", 1), ("use_beam_search", False), ("num_prompts", prompts),
        ("logprobs", None), ("request_rate", float(rate)), ("burstiness", 1.0), ("seed", 0),
        ("trust_remote_code", True), ("disable_tqdm", True), ("profile", False), ("save_result", result is not None),
        ("metadata", None), ("result_dir", result[0] if result else None),
        ("result_filename", result[1] if result else None), ("ignore_eos", True),
        ("percentile_metrics", "ttft,tpot,itl,e2el"), ("metric_percentiles", "99"), ("goodput", None),
        ("sonnet_input_len", 550), ("sonnet_output_len", 150), ("sonnet_prefix_len", 200),
        ("sharegpt_output_len", None), ("random_input_len", plan.isl), ("random_output_len", plan.osl),
        ("random_range_ratio", float(b.random_range_ratio)), ("random_prefix_len", 0),
        ("use_chat_template", b.use_chat_template), ("random_num_workers", 0), ("hf_subset", None),
        ("hf_split", None), ("hf_output_len", None), ("tokenizer_mode", "auto"),
        ("custom_tokenizer", b.custom_tokenizer or None), ("served_model_name", None), ("lora_modules", None),
    ]  # type: list[tuple[str, object]]  # fmt: skip
    return "Namespace({})".format(", ".join(f"{k}={v!r}" for k, v in items))


def client_argv(plan: Plan, conc: int, prompts: int, rate: str) -> "list[str]":
    """The benchmark_serving.py command line bench.sh builds (without the result arguments)."""
    b = plan.bench
    argv = ["python3", "-u", "/srtctl-benchmarks/sa-bench/benchmark_serving.py", "--model", plan.served_model,
            "--tokenizer", plan.tokenizer, "--host", "localhost", "--port", str(FRONTEND_PORT), "--backend", "dynamo",
            "--endpoint", "/v1/completions", "--disable-tqdm", "--dataset-name", b.dataset_name]  # fmt: skip
    if b.dataset_path:
        argv += ["--dataset-path", b.dataset_path]
    argv += ["--num-prompts", str(prompts)]
    if b.dataset_name == "random":
        argv += ["--random-input-len", str(plan.isl), "--random-output-len", str(plan.osl),
                 "--random-range-ratio", b.random_range_ratio, "--random-num-workers", "0"]  # fmt: skip
    argv += ["--ignore-eos", "--request-rate", rate, "--percentile-metrics", "ttft,tpot,itl,e2el",
             "--max-concurrency", str(conc), "--trust-remote-code"]  # fmt: skip
    if b.reuse_http_connections:
        argv.append("--reuse-http-connections")
    if b.use_chat_template:
        argv.append("--use-chat-template")
    if b.custom_tokenizer:
        argv += ["--custom-tokenizer", b.custom_tokenizer]
    return argv


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
            self.info(f"Command: {shell_join(sa_bench_argv(plan))}")
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

    def served(self, numbers: PointNumbers, chat: bool = False) -> "str | None":
        """The dynamo frontend's lines for the requests of one client run (a sample of them); the
        first request's id."""
        if self.frontend is None:
            return None
        first = None
        count = 1 if chat else min(_REQUESTS_LOGGED, numbers.num_prompts + 1)  # + the initial test prompt
        elapsed = max(1, int(numbers.e2el))
        for _ in range(count):
            request_id, lines = self.frontend.request(chat, 19 if chat else 0, 10 if chat else self.plan.osl, elapsed)
            first = first or request_id
            self.frontend_write(lines)
        return first

    def client_run(self, numbers: PointNumbers, rate: str, result: "tuple[str, str] | None") -> None:
        """The head of one benchmark_serving.py run, up to the point where it measures."""
        self.bout(namespace(self.plan, numbers.conc, numbers.num_prompts, rate, result))
        self.bout("Starting initial single prompt test run...")
        self.bout("Initial test run completed. Starting main benchmark run...")
        self.bout(f"Traffic request rate: {float(rate)!r}")
        self.bout("Burstiness factor: 1.0 (Poisson process)")
        self.bout(f"Maximum request concurrency: {numbers.conc}")

    def sa_bench(self) -> bool:
        """bench.sh: a warmup run and a measured run per concurrency, each a benchmark_serving.py."""
        plan = self.plan
        b = plan.bench
        conc_text = "x".join(str(c) for c in plan.concurrencies)
        self.bout("All sa-bench deps already available — skipping venv setup")
        if b.use_chat_template and not b.custom_tokenizer:
            for text in (
                "notice: use_chat_template=true but no custom_tokenizer set.",
                "  Models without a jinja chat_template (e.g. DeepSeek-V4)",
                "  will fail fast in benchmark_serving.py with guidance.",
                "  For vLLM DSV4, set:",
                "    benchmark.custom_tokenizer:",
                "      sa_bench_tokenizers.vllm_deepseek_v4.VLLMDeepseekV4Tokenizer",
                "  For SGLang DSV4, set:",
                "    benchmark.custom_tokenizer:",
                "      sa_bench_tokenizers.sglang_deepseek_v4.SGLangDeepseekV4Tokenizer",
                "  Or set benchmark.use_chat_template: false to skip it.",
            ):
                self.bout("[sa-bench] " + text)
        mode = "pooled" if b.reuse_http_connections else "per_request"
        self.bout(
            f"SA-Bench Config: endpoint=http://localhost:{FRONTEND_PORT}; isl={plan.isl}; osl={plan.osl}; "
            f"concurrencies={conc_text}; req_rate={b.req_rate}; model={plan.served_model}; "
            f"dataset={b.dataset_name}; dataset_path={b.dataset_path}; http_connection_mode={mode}"
        )
        self.bout("Verifying endpoint...")
        request_id = self.served(PointNumbers(plan, 1, 1, 2), chat=True) or "demo"
        reply = (
            '{"id":"chatcmpl-' + request_id + '","choices":[{"index":0,"message":{"content":null,"refusal":null,'
            '"role":"assistant"},"finish_reason":"length","logprobs":null}],"created":' + str(int(time.time()))
            + ',"model":' + json.dumps(plan.served_model) + ',"object":"chat.completion"}'
        )  # fmt: skip
        self.bout(reply[:200])
        total, prefill, decode = sa_bench_gpus(plan)
        suffix = f"_ctx_{prefill}_gen_{decode}" if plan.disagg else ""
        result_dir = f"/logs/sa-bench_isl_{plan.isl}_osl_{plan.osl}"
        folder = os.path.join(self.logs, f"sa-bench_isl_{plan.isl}_osl_{plan.osl}")
        if not os.path.isdir(folder):
            os.makedirs(folder)
        for conc in plan.concurrencies:
            if b.num_warmup_mult > 0:
                warm = PointNumbers(plan, conc, conc * b.num_warmup_mult, 1)
                self.client_run(warm, "250", None)
                self.served(warm)
                for line in fmt_block(warm, ("99",)):
                    self.bout(line)
            name = f"results_concurrency_{conc}_gpus_{total}{suffix}.json"
            numbers = PointNumbers(plan, conc, conc * b.num_prompts_mult, 0)
            self.bout(f"Running benchmark with concurrency: {conc}")
            self.bout(time.strftime("%Y-%m-%d %H:%M:%S"))
            argv = client_argv(plan, conc, numbers.num_prompts, b.req_rate)
            self.bout(
                "+ " + shell_join([*argv, "--save-result", "--result-dir", result_dir, "--result-filename", name])
            )
            self.client_run(numbers, b.req_rate, (result_dir, name))
            if not self.measure(conc):
                self.bout(f"Error: benchmark_serving.py failed at concurrency {conc}: Server disconnected")
                return False
            self.served(numbers)
            write_atomic(os.path.join(folder, name), sa_bench_json(plan, numbers))
            for line in fmt_block(numbers, ("99",)):
                self.bout(line)
            self.done_points.append((conc, numbers))
            self.bout("+ set +x")
            self.bout(time.strftime("%Y-%m-%d %H:%M:%S"))
            self.bout(f"Completed benchmark with concurrency: {conc}")
            self.bout("-" * 41)
        self.bout(f"SA-Bench complete. Results in {result_dir}")
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
