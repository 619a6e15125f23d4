"""srt-console's own recipe sections, read the same whatever srtctl runs the recipe.

Only the demo launcher reads `demo:`; the srtctl launcher removes it before srtctl sees a
recipe, so no flavour's schema is asked about it.
"""

from __future__ import annotations

from console.recipes.spec import Bool, Fields, Int, ListOf, Num, Spec, Str

DEMO_FAULTS = ("zmq-bind", "oom-graph-capture", "health-hang", "crash-at-concurrency", "flake-first-attempt")

FAULT = Fields(
    {
        "type": Str(*DEMO_FAULTS), "role": Str("prefill", "decode", "agg"), "concurrency": Int(1),
        "rank": Int(), "worker": Int(), "message": Str(), "exit": Bool(), "once": Bool(),
    },
    required=("type",),
)  # fmt: skip
DEMO = Fields(
    {
        "startup_seconds": Num(0), "point_seconds": Num(0), "shards": Int(1), "graph_batches": Int(1),
        "seed": Int(), "faults": ListOf(FAULT), "tok_s_per_gpu": Num(0), "health_seconds": Num(0),
    }
)  # fmt: skip

OWN: dict[str, Spec] = {"demo": DEMO}
