"""What the benchmarks that use the local test cluster (tests/cluster/up.sh) read of it."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

BASE = Path(os.environ.get("SRT_CLUSTER_BASE") or "/var/lib/srt-console-cluster")
ENV_FILE = BASE / "cluster.env"


def cluster_env() -> dict[str, str]:
    """The KEY=VALUE lines up.sh writes (values may be shell-quoted)."""
    values = {}
    for line in ENV_FILE.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            (word,) = shlex.split(line)
            key, _, value = word.partition("=")
            values[key] = value
    return values
