"""``fingerprint_<mode>_w<i>.json``: the runtime a worker ran in, as srtctl's capture script records it.

srtctl runs the capture in each worker's container before the engine starts. The demo's
workers run on this machine, so its fingerprint is this machine's: no GPU, no frameworks or
packages of an inference image, the environment srtctl gave the worker.
"""

import datetime
import json
import os
import platform
import socket

from .util import write_atomic

_ENV_PREFIXES = ("CUDA_", "TORCH_", "PYTORCH_", "NCCL_", "VLLM_", "SGLANG_", "SGL_", "TRTLLM_", "TRT_LLM_",
                 "TENSORRT_", "HF_", "TRANSFORMERS_", "DYN_", "NVIDIA_", "OMPI_", "UCX_", "NVSHMEM_")  # fmt: skip
_SECRETS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
SLURM_CPU_KEYS = ("SLURM_CPUS_ON_NODE", "SLURM_CPUS_PER_GPU", "SLURM_CPUS_PER_TASK", "SLURM_JOB_CPUS_PER_NODE")


def cpu_model() -> "str | None":
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    for raw in text.splitlines():
        key, sep, value = raw.partition(":")
        if sep and key.strip().lower() in ("model name", "cpu model", "hardware") and value.strip():
            return value.strip()
    return None


def affinity() -> "tuple[int | None, str | None]":
    """(count, cpuset list such as ``0-3,8``) of this process's CPU affinity."""
    try:
        ids = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None, None
    if not ids:
        return None, None
    ranges = []
    start = prev = ids[0]
    for cpu in [*ids[1:], -1]:
        if cpu == prev + 1:
            prev = cpu
            continue
        ranges.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return len(ids), ",".join(ranges)


def os_name() -> str:
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for raw in f:
                if raw.startswith("PRETTY_NAME="):
                    return raw.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def capture(env: "dict[str, str]") -> "dict[str, object]":
    count, cpus = affinity()
    # What srtctl set for the worker (the image's own variables are not the demo's to know).
    shown = {}  # type: dict[str, str]
    for key in sorted(env):
        if key.startswith(_ENV_PREFIXES):
            shown[key] = "***REDACTED***" if any(s in key.upper() for s in _SECRETS) else env[key]
    return {
        "hostname": socket.gethostname(),
        "timestamp": datetime.datetime.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"),
        "arch": platform.machine(),
        "os": os_name(),
        "cpu": {
            "model": cpu_model() or "unavailable",
            "logical_cpus": os.cpu_count(),
            "affinity_cpus": count,
            "affinity_list": cpus,
            "slurm": {k: os.environ[k] for k in SLURM_CPU_KEYS if k in os.environ},
        },
        "gpu": {"available": False},
        "python_version": platform.python_version(),
        "cuda_version": "unavailable",
        "nccl_version": "unavailable",
        "frameworks": {},
        "model": None,
        "env": shown,
        "pip_packages": {},
    }


def write_fingerprint(path: str, env: "dict[str, str]") -> None:
    write_atomic(path, (json.dumps(capture(env), indent=2) + "\n").encode("utf-8"))


def load_fingerprints(logs: str) -> "dict[str, object]":
    """Every worker's fingerprint in the log dir, by ``<mode>_w<i>``, in name order."""
    out = {}  # type: dict[str, object]
    try:
        names = sorted(n for n in os.listdir(logs) if n.startswith("fingerprint_") and n.endswith(".json"))
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(logs, name), encoding="utf-8") as f:
                out[name[len("fingerprint_") : -len(".json")]] = json.load(f)
        except (OSError, ValueError):
            continue
    return out
