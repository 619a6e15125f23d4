"""The numbers of one point (a simple throughput/latency model) and the result files written from them."""

import json
import random
import time

from .plan import Plan

# --------------------------------------------------------------------------- the numbers


class PointNumbers:
    """A simple deterministic throughput/latency model for one concurrency point."""

    def __init__(self, plan: Plan, conc: int, num_prompts: int, salt: int) -> None:
        rng = random.Random(plan.seed * 1000003 + conc * 7919 + salt)
        self.rng = rng
        gpus = max(1, plan.total_gpus)
        isl, osl = plan.isl, plan.osl
        half = 16.0 * max(1.0, gpus / 8.0)
        peak_total = plan.tok_s_per_gpu * gpus
        total = peak_total * conc / (conc + half) * rng.uniform(0.97, 1.03)
        self.output_tps = total * osl / float(isl + osl)
        self.total_tps = total
        self.conc = conc
        self.num_prompts = num_prompts
        self.completed = num_prompts
        self.input_tokens = num_prompts * isl
        self.output_tokens = num_prompts * osl
        self.duration = self.output_tokens / self.output_tps
        self.request_tps = num_prompts / self.duration
        self.tpot = 1000.0 * conc / self.output_tps * rng.uniform(0.95, 1.0)
        self.ttft = (30.0 + isl * 0.012) * (1.0 + conc / 64.0) * rng.uniform(0.95, 1.05)
        self.itl = self.tpot * 0.99
        self.e2el = self.ttft + self.tpot * (osl - 1)
        self.peak_tps = self.output_tps * rng.uniform(1.15, 1.35)

    def stats(self, mean: float, spread: float) -> "dict[str, float]":
        return {
            "mean": mean,
            "median": mean * (1.0 - spread * 0.1),
            "std": mean * spread * 0.5,
            "p90": mean * (1.0 + spread * 1.2),
            "p99": mean * (1.0 + spread * 2.5),
            "p99.9": mean * (1.0 + spread * 3.5),
        }

    def metrics(self) -> "dict[str, dict[str, float]]":
        return {
            "ttft": self.stats(self.ttft, 0.35),
            "tpot": self.stats(self.tpot, 0.08),
            "itl": self.stats(self.itl, 0.25),
            "e2el": self.stats(self.e2el, 0.1),
        }

    def per_request(self, osl: int) -> "tuple[list[float], list[list[float]]]":
        rng = self.rng
        ttfts = [round(self.ttft / 1000.0 * rng.uniform(0.6, 1.6), 6) for _ in range(self.num_prompts)]
        base = self.itl / 1000.0
        itls = [[round(base * rng.uniform(0.7, 1.4), 6) for _ in range(max(0, osl - 1))] for _ in ttfts]
        return ttfts, itls


def fmt_block(n: PointNumbers, percentiles: "tuple[str, ...]") -> "list[str]":
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    lines.append("{:<40} {:<10}".format("Successful requests:", n.completed))
    lines.append("{:<40} {:<10.2f}".format("Benchmark duration (s):", n.duration))
    lines.append("{:<40} {:<10}".format("Total input tokens:", n.input_tokens))
    lines.append("{:<40} {:<10}".format("Total generated tokens:", n.output_tokens))
    lines.append("{:<40} {:<10.2f}".format("Request throughput (req/s):", n.request_tps))
    lines.append("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", n.output_tps))
    if "99" in percentiles and len(percentiles) == 1:
        lines.append("{:<40} {:<10.2f}".format("Peak output token throughput (tok/s):", n.peak_tps))
    lines.append("{:<40} {:<10.2f}".format("Total Token throughput (tok/s):", n.total_tps))
    metrics = n.metrics()
    titles = (
        ("ttft", "Time to First Token", "TTFT"),
        ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
        ("itl", "Inter-token Latency", "ITL"),
        ("e2el", "End-to-end Latency", "E2EL"),
    )
    for key, title, short in titles:
        lines.append("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        stats = metrics[key]
        lines.append("{:<40} {:<10.2f}".format(f"Mean {short} (ms):", stats["mean"]))
        lines.append("{:<40} {:<10.2f}".format(f"Median {short} (ms):", stats["median"]))
        for p in percentiles:
            lines.append("{:<40} {:<10.2f}".format(f"P{p} {short} (ms):", stats["p" + p]))
    lines.append("=" * 50)
    return lines


def json_float(value: float) -> float:
    return round(value, 6)


def sa_bench_json(plan: Plan, n: PointNumbers) -> bytes:
    """One line, no newline, in sa-bench's benchmark_serving key order, per-request arrays included."""
    ttfts, itls = n.per_request(plan.osl)
    words = ("the", "model", "writes", "tokens", "for", "a", "demo", "benchmark")
    text = " ".join(words[i % len(words)] for i in range(max(1, min(plan.osl, 64))))
    head = [
        ("date", time.strftime("%Y%m%d-%H%M%S")),
        ("backend", "dynamo"),
        ("model_id", plan.served_model),
        ("tokenizer_id", plan.tokenizer),
        ("best_of", 1),
        ("num_prompts", n.num_prompts),
        ("request_rate", "inf"),
        ("burstiness", 1.0),
        ("max_concurrency", n.conc),
        ("duration", json_float(n.duration)),
        ("completed", n.completed),
        ("total_input_tokens", n.input_tokens),
        ("total_output_tokens", n.output_tokens),
        ("request_throughput", json_float(n.request_tps)),
        ("request_goodput", None),
        ("output_throughput", json_float(n.output_tps)),
        ("peak_output_tokens_per_s", json_float(n.peak_tps)),
        ("total_token_throughput", json_float(n.total_tps)),
        ("input_lens", [plan.isl] * n.num_prompts),
        ("output_lens", [plan.osl] * n.num_prompts),
        ("ttfts", ttfts),
        ("itls", itls),
        ("generated_texts", [text] * n.num_prompts),
        ("errors", [""] * n.num_prompts),
    ]
    metrics = n.metrics()
    for key in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p99"):
            head.append((f"{stat}_{key}_ms", json_float(metrics[key][stat])))
    head.append(("reuse_http_connections", False))
    return ordered_json(head)


def fixed_seq_json(plan: Plan, n: PointNumbers, started: float) -> bytes:
    """InferenceX's benchmark_serving result: ``request_goodput:`` key, p90/p99/p99.9, no per-request detail."""
    items = [
        ("date", time.strftime("%Y%m%d-%H%M%S")),
        ("backend", "openai-chat"),
        ("model_id", plan.served_model),
        ("tokenizer_id", plan.served_model),
        ("best_of", 1),
        ("num_prompts", n.num_prompts),
        ("request_rate", "inf"),
        ("burstiness", 1.0),
        ("max_concurrency", n.conc),
        ("duration", json_float(n.duration)),
        ("benchmark_start_time_unix", json_float(started)),
        ("benchmark_end_time_unix", json_float(started + n.duration)),
        ("completed", n.completed),
        ("total_input_tokens", n.input_tokens),
        ("total_output_tokens", n.output_tokens),
        ("request_throughput", json_float(n.request_tps)),
        ("request_goodput:", None),
        ("output_throughput", json_float(n.output_tps)),
        ("total_token_throughput", json_float(n.total_tps)),
        ("input_lens", [plan.isl] * n.num_prompts),
        ("output_lens", [plan.osl] * n.num_prompts),
    ]  # type: list[tuple[str, object]]
    metrics = n.metrics()
    for key in ("ttft", "tpot", "itl", "e2el"):
        for stat in ("mean", "median", "std", "p90", "p99", "p99.9"):
            items.append((f"{stat}_{key}_ms", json_float(metrics[key][stat])))
    return ordered_json(items)


def ordered_json(items: "list[tuple[str, object]]") -> bytes:
    parts = [json.dumps(k) + ": " + json.dumps(v) for k, v in items]
    return ("{" + ", ".join(parts) + "}").encode("utf-8")
