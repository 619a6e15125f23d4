"""The real serving pipeline on the test cluster, for tests: the real srtctl checkout that
tests/cluster/stack.sh installed for the cluster's user, a tokenizer-only model directory (made
here, with the tokenizers library of the cluster's Dynamo image), and upstream-style recipes of
Dynamo's mocker engine behind Dynamo's frontend, benchmarked by sa-bench.
"""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tests.integration.conftest import ClusterInfo, cluster_base

# Every listener binds and advertises the cluster's loopback (Dynamo advertises the host's
# address otherwise; the cluster's namespace has no other, this makes it explicit).
LOOPBACK_ENV = {
    "DYN_TCP_RPC_HOST": "127.0.0.1",
    "DYN_EVENT_PLANE_HOST": "127.0.0.1",
    "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1",
}

_MAKE_MODEL = r"""
import json, pathlib, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
words = ("the quick brown fox jumps over the lazy dog while benchmark clients measure serving "
         "tokens through prefill and decode workers of a cluster").split()
corpus = [" ".join(words[i:] + words[:i]) for i in range(len(words))] * 20
tok = Tokenizer(models.BPE(unk_token="<unk>"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"],
                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
tok.train_from_iterator(corpus, trainer)
tok.save(str(out / "tokenizer.json"))
(out / "tokenizer_config.json").write_text(json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
    "unk_token": "<unk>", "model_max_length": 4096,
    "chat_template": "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:",
}))
(out / "config.json").write_text(json.dumps({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": tok.get_vocab_size(),
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
    "intermediate_size": 128, "max_position_embeddings": 4096, "bos_token_id": 1, "eos_token_id": 2,
}))
"""


@dataclass(frozen=True)
class Stack:
    checkout: Path  # the real srt-slurm checkout of the cluster's user
    image_python: Path  # python of the Dynamo image (has tokenizers)
    model: Path  # a tokenizer-only model directory, readable by the cluster's user
    user: str

    @property
    def model_name(self) -> str:
        return self.model.name


def stack_for(cluster: ClusterInfo) -> Stack:
    base = cluster_base()
    checkout = Path(cluster.workdir) / "srt-slurm"
    image_python = base / "images" / "dynamo" / "bin" / "python"
    assert (checkout / ".venv" / "bin" / "srtctl").exists(), f"no srtctl in {checkout}: did stack.sh run?"
    model = Path(cluster.workdir) / "models" / "tiny-tokenizer"
    if not (model / "tokenizer.json").exists():
        tmp = model.with_name(model.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run([str(image_python), "-c", _MAKE_MODEL, str(tmp)], check=True, capture_output=True, timeout=120)
        tmp.rename(model)
        for p in [model.parent, model, *model.iterdir()]:
            shutil.chown(p, cluster.user, cluster.user)
    return Stack(checkout=checkout, image_python=image_python, model=model, user=cluster.user)


def mocker_recipe(
    stack: Stack,
    name: str,
    *,
    topology: str = "agg",
    concurrencies: list[int] | None = None,
    isl: int = 64,
    osl: int = 32,
    speedup: float = 5.0,
    container: str = "dynamo-mocker",
    extra: str = "",
    mode_args: dict[str, str] | None = None,
    time_limit: str | None = None,
) -> str:
    """An upstream srtctl recipe of the mocker engine: `agg` (one aggregated worker) or `1p1d`."""
    grid = concurrencies or [1, 2]
    args = {"model-name": stack.model_name, **(mode_args or {})}
    flags = ", ".join(f"{k}: {v}" for k, v in args.items())
    if topology == "agg":
        resources = "agg_nodes: 1\n  agg_workers: 1"
        per_mode = f"aggregated: {{{flags}}}"
    elif topology == "1p1d":
        resources = "prefill_nodes: 1\n  prefill_workers: 1\n  decode_nodes: 1\n  decode_workers: 1"
        per_mode = f"prefill: {{{flags}}}\n    decode: {{{flags}}}"
    else:
        raise ValueError(topology)
    env = "\n".join(f"  {k}: {v}" for k, v in LOOPBACK_ENV.items())
    slurm = f'slurm:\n  time_limit: "{time_limit}"\n' if time_limit else ""
    text = f"""\
name: {name}
model:
  path: {stack.model}
  container: {container}
  precision: bf16
resources:
  gpu_type: h100
  gpus_per_node: 8
  {resources}
frontend:
  type: dynamo
  enable_multiple_frontends: false
dynamo:
  install: false
backend:
  type: mocker
  speedup_ratio: {speedup}
  engine_type: vllm
  mocker_config:
    {per_mode}
environment:
{env}
benchmark:
  type: sa-bench
  isl: {isl}
  osl: {osl}
  concurrencies: {grid}
  use_chat_template: false
health_check:
  max_attempts: 90
  interval_seconds: 2
{slurm}"""
    return text + textwrap.dedent(extra)
