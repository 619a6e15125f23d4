"""Recipe loading, validation and expansion, checked against srtctl's documented behaviour."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from console.recipes import load_recipe, load_targets, parse_concurrencies, split_target
from console.recipes.flavours import FORK, UPSTREAM
from tests.conftest import RECIPES, SEED_DIR

Write = Callable[..., Path]

DISAGG = """
name: dsr1-fp8-1p2d
model: {path: deepseek-r1, container: sglang-v0.5.8, precision: fp8}
resources: {gpu_type: gb200, gpus_per_node: 4, prefill_nodes: 1, prefill_workers: 1,
            decode_nodes: 2, decode_workers: 1}
slurm: {time_limit: "02:00:00"}
frontend: {type: dynamo, enable_multiple_frontends: false}
backend:
  type: sglang
  prefill_environment: {TORCH_DISTRIBUTED_DEFAULT_TIMEOUT: "1800"}
  sglang_config:
    prefill: {tp-size: 4, disaggregation-mode: prefill}
    decode:  {tp-size: 8, disaggregation-mode: decode}
benchmark: {type: sa-bench, isl: 8192, osl: 1024, concurrencies: "4x8x16x32", req_rate: inf}
health_check: {max_attempts: 360, interval_seconds: 10}
"""

OVERRIDES = """
base:
  name: qwen-agg
  model: {path: "hf:Qwen/Qwen3-32B", container: /shared/sglang.sqsh, precision: bf16}
  resources: {gpu_type: h100, gpus_per_node: 8, agg_nodes: 1, agg_workers: 4}
  frontend: {type: sglang, enable_multiple_frontends: false}
  backend: {type: sglang, sglang_config: {aggregated: {tp-size: 2, mem-fraction-static: 0.85}}}
  benchmark: {type: sa-bench, isl: 1024, osl: 1024, concurrencies: [8, 32, 128], req_rate: inf}
override_small:
  benchmark: {concurrencies: "4x8"}
zip_override_tp:
  resources: {agg_workers: [4, 2]}
  backend: {sglang_config: {aggregated: {tp-size: [2, 4]}}}
  benchmark: {concurrencies: [[8, 32], [16, 64, 256]]}
"""


def only_arm(path: Path, selector: str | None = None, flavour=None):
    recipe = load_recipe(path, selector, flavour=flavour)
    assert recipe.ok, [str(p) for p in recipe.problems]
    assert len(recipe.arms) == 1
    return recipe.arms[0]


# --- the seed and the bundled library -----------------------------------------------------


def test_seed_arms_have_node_demand_and_grids_of_the_seed() -> None:
    one = only_arm(SEED_DIR / "1p1d-tp8.yaml")
    two = only_arm(SEED_DIR / "2p1d-dpa-tp8.yaml")
    assert (one.topology.node_demand, two.topology.node_demand) == (2, 3)
    assert one.concurrencies == (4, 8, 16, 32, 64, 128)
    assert two.concurrencies == (256, 512, 768, 1024, 2048)
    for arm in (one, two):
        assert (arm.backend, arm.frontend, arm.benchmark) == ("atom", "atomesh", "custom")
        assert (arm.isl, arm.osl) == (8192, 1024)
        assert arm.config["backend"]["mooncake_protocol"] == "tcp"
        pins = {p.value for p in arm.pins}
        assert "rocm/atom-dev:nightly_202608251555" in pins
        assert "4e0848dcdf94f3d4be0c1e3ce51db99bc93f8b8c" in pins
    assert two.topology.dp_attention == {"prefill": True}
    assert (two.topology.gpus_of("prefill"), two.topology.gpus_of("decode")) == (16, 8)


def test_demo_twins_match_the_seed_topology_and_grid() -> None:
    for seed, twin in (("1p1d-tp8", "mi355x-1p1d-tp8"), ("2p1d-dpa-tp8", "mi355x-2p1d-dpa-tp8")):
        a, b = only_arm(SEED_DIR / f"{seed}.yaml"), only_arm(RECIPES / "demo" / f"{twin}.yaml")
        assert a.topology == b.topology
        assert a.concurrencies == b.concurrencies
    faults = only_arm(RECIPES / "demo" / "mi355x-2p1d-dpa-tp8.yaml").config["demo"]["faults"]
    assert [f["type"] for f in faults] == ["zmq-bind"]


def test_every_bundled_recipe_is_valid() -> None:
    recipes = load_targets([RECIPES])
    assert len(recipes) >= 9
    assert [str(p) for r in recipes for p in r.errors] == []
    # The ATOM recipes run on the fork's srtctl only, and say so while the flavour is not known.
    warned = {Path(r.path).name for r in recipes for p in r.warnings}
    assert warned == {"1p1d-tp8.yaml", "2p1d-dpa-tp8.yaml", "mi355x-1p1d-tp8.yaml", "mi355x-2p1d-dpa-tp8.yaml"}
    assert all("a backend of the fork's srtctl" in p.message for r in recipes for p in r.warnings)
    demo_faults = {f["type"] for r in recipes for a in r.arms for f in a.config.get("demo", {}).get("faults", [])}
    assert demo_faults == {"zmq-bind", "oom-graph-capture", "health-hang", "crash-at-concurrency",
                           "flake-first-attempt"}  # fmt: skip


# --- topology -----------------------------------------------------------------------------


def test_disagg_topology_and_tp(write_recipe: Write) -> None:
    arm = only_arm(write_recipe(DISAGG))
    topo = arm.topology
    assert arm.mode == "disagg"
    assert [(r.name, r.workers, r.nodes, r.gpus_per_worker) for r in topo.roles] == [
        ("prefill", 1, 1, 4),
        ("decode", 1, 2, 8),
    ]
    assert topo.node_demand == 3
    assert topo.tp == {"prefill": 4, "decode": 8}
    assert arm.summary()["prefill_gpus"] == 4 and arm.summary()["decode_gpus"] == 8


def test_gpus_per_node_defaults_to_four(write_recipe: Write) -> None:
    arm = only_arm(write_recipe(DISAGG.replace("gpus_per_node: 4, ", "")))
    assert arm.topology.gpus_per_node == 4
    assert arm.topology.gpus_of("decode") == 8  # 2 nodes x 4 GPUs, one worker


def test_dedicated_nodes_add_to_node_demand(write_recipe: Write) -> None:
    text = DISAGG + "infra: {etcd_nats_dedicated_node: true}\n"
    text = text.replace("req_rate: inf}", "req_rate: inf, client_dedicated_node: true}")
    arm = only_arm(write_recipe(text))
    assert arm.topology.worker_nodes == 3
    # srtctl gives the etcd/NATS and benchmark-client roles one shared node...
    assert arm.topology.dedicated == ("etcd-nats+benchmark",)
    assert arm.topology.node_demand == 4
    # ...and one each with colocate_with_frontend: false.
    apart = only_arm(write_recipe(text.replace("client_dedicated_node: true", "client_dedicated_node: true, "
                                               "colocate_with_frontend: false")))  # fmt: skip
    assert apart.topology.dedicated == ("etcd-nats", "benchmark") and apart.topology.node_demand == 5


def test_vllm_colocation_packs_prefill_and_decode(write_recipe: Write) -> None:
    packing = (
        "type: vllm\n  allow_prefill_decode_colocation: true\n  allow_prefill_decode_colocation_across_nodes: on\n"
    )
    text = DISAGG.replace("type: sglang\n", packing).replace("sglang_config", "vllm_config")
    text = text.replace("decode_nodes: 2, decode_workers: 1", "decode_nodes: 1, decode_workers: 3, gpus_per_decode: 1")
    arm = only_arm(write_recipe(text), flavour=UPSTREAM)
    assert arm.topology.node_count == 2 and arm.topology.node_demand == 2  # 4 + 3 GPUs on 4-GPU nodes


def test_decode_sharing_prefill_nodes(write_recipe: Write) -> None:
    text = DISAGG.replace("decode_nodes: 2", "decode_nodes: 0")
    arm = only_arm(write_recipe(text))
    decode = arm.topology.role("decode")
    assert decode is not None and decode.colocated and decode.gpus_per_worker == 4
    assert arm.topology.node_demand == 1


def test_schema_2_layout_matches_v1(write_recipe: Write) -> None:
    v1 = only_arm(
        write_recipe(
            """
        name: qwen3-atomesh-1p1d
        model: {path: "hf:Qwen/Qwen3-0.6B", container: rocm/atom:latest, precision: bf16}
        resources: {gpu_type: mi355x, gpus_per_node: 8, prefill_nodes: 1, prefill_workers: 1,
                    gpus_per_prefill: 1, decode_nodes: 1, decode_workers: 1, gpus_per_decode: 1}
        frontend: {type: atomesh, enable_multiple_frontends: false}
        backend: {type: atom, connector: mooncake, mooncake_protocol: tcp,
                  atom_config: {decode: {max-num-seqs: 256}}}
        benchmark: {type: sa-bench, isl: 128, osl: 128, concurrencies: "4x8"}
        """,
            "v1.yaml",
        )
    )
    v2 = only_arm(
        write_recipe(
            """
        schema: 2
        name: qwen3-atomesh-1p1d
        model: {path: "hf:Qwen/Qwen3-0.6B", container: rocm/atom:latest, precision: bf16}
        resources: {gpu_type: mi355x, gpus_per_node: 8}
        engine: {type: atom, mooncake_protocol: tcp}
        frontend: {type: atomesh, enable_multiple_frontends: false}
        roles:
          prefill: {nodes: 1, workers: 1, gpus: 1}
          decode:  {nodes: 1, workers: 1, gpus: 1, args: {max-num-seqs: 256}}
        benchmark: {type: sa-bench, isl: 128, osl: 128, concurrencies: "4x8"}
        """,
            "v2.yaml",
        )
    )
    assert v2.schema == 2 and v1.schema == 1
    assert v1.topology == v2.topology
    assert (v2.backend, v2.frontend, v2.concurrencies) == ("atom", "atomesh", (4, 8))


# --- overrides and sweeps -------------------------------------------------------------------


def test_override_file_without_selector_excludes_base(write_recipe: Write) -> None:
    recipe = load_recipe(write_recipe(OVERRIDES))
    assert recipe.ok, [str(p) for p in recipe.problems]
    assert [a.name for a in recipe.arms] == ["qwen-agg_small", "qwen-agg_tp_0", "qwen-agg_tp_1"]
    small, tp0, tp1 = recipe.arms
    assert small.concurrencies == (4, 8)
    assert tp0.concurrencies == (8, 32) and tp1.concurrencies == (16, 64, 256)
    assert tp1.topology.role("agg").workers == 2  # type: ignore[union-attr]
    assert tp1.topology.tp == {"agg": 4}
    # lists replace, dicts merge: the base's other sglang flags survive
    assert tp1.config["backend"]["sglang_config"]["aggregated"]["mem-fraction-static"] == 0.85
    assert [a.selector for a in recipe.arms] == ["override_small", "zip_override_tp[0]", "zip_override_tp[1]"]


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("base", ["qwen-agg"]),
        ("override_small", ["qwen-agg_small"]),
        ("zip_override_tp[1]", ["qwen-agg_tp_1"]),
        ("zip_*", ["qwen-agg_tp_0", "qwen-agg_tp_1"]),
        ("*", ["qwen-agg_small", "qwen-agg_tp_0", "qwen-agg_tp_1"]),
    ],
)
def test_override_selectors(write_recipe: Write, selector: str, names: list[str]) -> None:
    path = write_recipe(OVERRIDES)
    recipe = load_targets([f"{path}:{selector}"])[0]
    assert [a.name for a in recipe.arms] == names


def test_override_null_deletes_and_name_overrides(write_recipe: Write) -> None:
    text = OVERRIDES + "override_plain:\n  name: custom-name\n  backend: {sglang_config: null}\n"
    recipe = load_recipe(write_recipe(text), "override_plain")
    (arm,) = recipe.arms
    assert arm.name == "custom-name"
    assert "sglang_config" not in arm.config["backend"]


def test_unknown_selector_is_an_error(write_recipe: Write) -> None:
    recipe = load_recipe(write_recipe(OVERRIDES), "override_nope")
    assert not recipe.ok
    assert "override_nope" in str(recipe.errors[0]) and "override_small" in str(recipe.errors[0])


def test_zip_lengths_must_match(write_recipe: Write) -> None:
    path = write_recipe(OVERRIDES.replace("[2, 4]", "[2, 4, 8]"))
    (error,) = load_recipe(path).errors
    assert error.line == 12 and error.field == "zip_override_tp.backend.sglang_config.aggregated.tp-size"
    assert "different lengths" in error.message


def test_selector_on_plain_file_is_ignored_with_a_warning(write_recipe: Write) -> None:
    recipe = load_recipe(write_recipe(DISAGG), "override_x")
    assert recipe.ok and len(recipe.arms) == 1
    assert any("ignored" in p.message for p in recipe.warnings)


def test_sweep_is_a_cartesian_product_named_like_srtctl(write_recipe: Write) -> None:
    text = OVERRIDES.split("override_small")[0].replace("base:\n", "")
    text = "\n".join(line[2:] for line in text.splitlines())
    text = text.replace("mem-fraction-static: 0.85", 'mem-fraction-static: "{mem}"')
    text += "\nsweep:\n  mem: [0.85, 0.9]\n  chunk: [4096, 8192]\n"
    recipe = load_recipe(write_recipe(text))
    assert recipe.ok, [str(p) for p in recipe.problems]
    assert [a.name for a in recipe.arms] == [
        "qwen-agg_mem0.85_chunk4096",
        "qwen-agg_mem0.85_chunk8192",
        "qwen-agg_mem0.9_chunk4096",
        "qwen-agg_mem0.9_chunk8192",
    ]
    # As srtctl does, a placeholder becomes the value's text (a whole-string list stays a list).
    assert recipe.arms[2].config["backend"]["sglang_config"]["aggregated"]["mem-fraction-static"] == "0.9"
    assert recipe.arms[2].params == {"mem": 0.9, "chunk": 4096}
    assert "sweep" not in recipe.arms[0].config


@pytest.mark.parametrize(
    ("raw", "points"),
    [([128, 256], [128, 256]), (["8192"], [8192]), ("256", [256]), ("4x8x16", [4, 8, 16]), (4, [4]),
     ([8, "16x32"], [8, 16, 32]), (None, [])],
)  # fmt: skip
def test_concurrency_spellings(raw: object, points: list[int]) -> None:
    assert parse_concurrencies(raw) == points


def test_split_target_on_last_colon(tmp_path: Path) -> None:
    assert split_target("a/b.yaml:zip_override_x[2]") == ("a/b.yaml", "zip_override_x[2]")
    weird = tmp_path / "odd:name.yaml"
    weird.write_text("x: 1\n")
    assert split_target(str(weird)) == (str(weird), None)


# --- problems: path:line: field: message, never a traceback ---------------------------------


@pytest.mark.parametrize(
    ("old", "new", "line", "field", "needle"),
    [
        ("slurm: {", "slurmm: {", 5, "slurmm", "unknown key (did you mean 'slurm'?)"),
        ("prefill_nodes: 1", "prefil_nodes: 1", 3, "resources.prefil_nodes", "unknown key"),
        ("prefill_nodes: 1", 'prefill_nodes: "one"', 3, "resources.prefill_nodes", "expected an integer"),
        ("interval_seconds: 10", "interval_seconds: [10]", 14, "health_check.interval_seconds", "expected an integer"),
        ("enable_multiple_frontends: false", "enable_multiple_frontends: 3", 6,
         "frontend.enable_multiple_frontends", "expected true or false"),
        ("path: deepseek-r1, ", "", 2, "model.path", "is required"),
        ('time_limit: "02:00:00"', "time_limit: 120", 5, "slurm.time_limit", "expected a string"),
        ("type: sglang", "type: sglangx", 8, "backend.type", "is not a backend of upstream srtctl"),
        ("type: dynamo", "type: vllm", 6, "frontend.type", "frontend vllm needs backend vllm"),
        ("tp-size: 4,", "tp-size: 4, bogus: {",  12, "", "not valid YAML"),
    ],
)  # fmt: skip
def test_broken_recipes_name_file_line_and_field(
    write_recipe: Write, old: str, new: str, line: int, field: str, needle: str
) -> None:
    assert old in DISAGG
    path = write_recipe(DISAGG.replace(old, new, 1))
    recipe = load_recipe(path, flavour=UPSTREAM)
    assert not recipe.ok
    matching = [p for p in recipe.errors if p.field == field and needle in p.message]
    assert matching, [str(p) for p in recipe.errors]
    assert matching[0].line == line
    assert str(matching[0]).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize(
    ("old", "new", "field", "stage", "needle"),
    [
        ("type: sa-bench", "type: sa-bench-x", "benchmark.type", "benchmark", "is not a benchmark of upstream"),
        ("isl: 8192, ", "", "benchmark.isl", "benchmark", "is required for sa-bench"),
        ("type: dynamo", "type: atomesh", "frontend.type", "frontend", "is not a frontend of upstream"),
        ("decode_workers: 1}", "decode_workers: 1, gpus_per_decode: 16}", "resources", "placement", "do not fit"),
    ],
)  # fmt: skip
def test_what_srtctl_refuses_only_once_the_job_runs_is_a_warning(
    write_recipe: Write, old: str, new: str, field: str, stage: str, needle: str
) -> None:
    recipe = load_recipe(write_recipe(DISAGG.replace(old, new, 1)), flavour=UPSTREAM)
    assert recipe.ok, [str(p) for p in recipe.errors]
    (warning,) = [p for p in recipe.warnings if p.kind == f"job-start:{stage}"]
    assert warning.field == field and needle in warning.message
    assert "srtctl accepts the recipe, but the job stops" in warning.message


def test_a_concurrency_list_srtctl_cannot_read_is_a_warning_upstream(write_recipe: Write) -> None:
    path = write_recipe(DISAGG.replace('"4x8x16x32"', '"4xabc"'))
    recipe = load_recipe(path, flavour=UPSTREAM)
    assert recipe.ok and any("not a concurrency list" in p.message for p in recipe.warnings)
    assert not load_recipe(path, flavour=FORK).ok


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (("type: dynamo", "type: atomesh"), "frontend atomesh needs backend atom"),
        (("type: sglang\n", "type: atom\n"), "backend atom needs frontend atomesh"),
        (("type: dynamo", "type: vllm"), "frontend vllm needs backend vllm"),
        (("gpus_per_node: 4, prefill_nodes: 1", "gpus_per_node: 4, gpus_per_prefill: 8, prefill_nodes: 1"),
         "do not fit"),
    ],
)  # fmt: skip
def test_cross_field_rules_of_the_fork(write_recipe: Write, change: tuple[str, str], needle: str) -> None:
    text = DISAGG.replace(*change, 1)
    if "type: atom\n" in text:  # atom keys: drop the sglang-only block
        text = text.split("  sglang_config:")[0] + "benchmark: {type: manual}\n"
    recipe = load_recipe(write_recipe(text), flavour=FORK)
    assert any(needle in p.message for p in recipe.errors), [str(p) for p in recipe.problems]


def test_custom_benchmark_needs_a_command(write_recipe: Write) -> None:
    text = DISAGG.replace('{type: sa-bench, isl: 8192, osl: 1024, concurrencies: "4x8x16x32", req_rate: inf}',
                          "{type: custom, env: {CONCURRENCIES: 4x8}}")  # fmt: skip
    (error,) = load_recipe(write_recipe(text), flavour=FORK).errors
    assert error.field == "benchmark.command" and error.line == 13
    upstream = load_recipe(write_recipe(text), flavour=UPSTREAM)
    assert upstream.ok and [p.kind for p in upstream.warnings] == ["job-start:benchmark"]


def test_schema_2_keys_without_schema_2(write_recipe: Write) -> None:
    recipe = load_recipe(write_recipe(DISAGG + "roles: {agg: {nodes: 1}}\n"), flavour=FORK)
    assert any("schema: 2" in p.message for p in recipe.errors)


def test_override_key_is_blamed_on_its_own_line(write_recipe: Write) -> None:
    text = OVERRIDES.replace('concurrencies: "4x8"', 'concurrencies: "4x8", bogus: 1')
    recipe = load_recipe(write_recipe(text), flavour=UPSTREAM)
    (error,) = recipe.errors
    assert (error.line, error.field) == (9, "benchmark.bogus")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty file"),
        (b"   \n# only a comment\n", "empty"),
        (b"- a\n- b\n", "a recipe is a YAML mapping"),
        (b"name: [unclosed\n", "not valid YAML"),
        (b"\x7fELF\x02\x01\x00\x00binary", "binary file"),
        (b"name: caf\xe9\n", "not UTF-8"),
        (b"a: 1\n---\nb: 2\n", "several YAML documents"),
        (b"key: *undefined_alias\n", "not valid YAML"),
    ],
)
def test_files_that_are_not_recipes(tmp_path: Path, content: bytes, needle: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    recipe = load_recipe(path)
    assert not recipe.ok and recipe.arms == ()
    assert needle in recipe.errors[0].message
    assert str(recipe.errors[0]).startswith(str(path))


def test_missing_path_and_directory(tmp_path: Path) -> None:
    (missing,) = load_targets([tmp_path / "nope.yaml"])
    assert "no such file" in missing.errors[0].message
    assert "is a directory" in load_recipe(tmp_path).errors[0].message


def test_mutated_recipes_never_raise() -> None:
    """Byte-level damage to a real recipe yields problems, never an exception."""
    original = (SEED_DIR / "2p1d-dpa-tp8.yaml").read_bytes()
    rng = random.Random(7)
    for _ in range(300):
        data = bytearray(original)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(data))
            op = rng.random()
            if op < 0.4:
                data[pos] = rng.choice(b" :-[]{}#'\"\n\tx1&*!|>%@`")
            elif op < 0.7:
                del data[pos : pos + rng.randint(1, 40)]
            else:
                data[pos:pos] = bytes(rng.choice(b"\n :{[") for _ in range(rng.randint(1, 5)))
        text = bytes(data).decode("utf-8", "replace")
        recipe = load_recipe("mutated.yaml", text=text)
        for problem in recipe.problems:
            assert problem.path == "mutated.yaml" and problem.message


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    (error,) = load_recipe(path).errors
    assert "aliases nested too deep" in error.message
