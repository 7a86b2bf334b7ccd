"""The serving engines' launch commands for a pool: their parallelism, KV-cache, batch,
chunk, disaggregation and multi-node flags, at pinned releases, and what each cannot launch.

Every flag written here is one the engine's own argument parser defines at the release in
``RELEASES``: ``tests/data/engines/*.json`` holds those parsers' flags (made by
``benchmarks/engine_flags.py`` from the released wheels), and ``tests/test_export.py``
parses every generated command with them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pddplan.deploy.launch import PoolLaunch

RELEASES = {
    "sglang": (
        "0.5.21",
        "https://github.com/sgl-project/sglang/blob/v0.5.21/python/sglang/srt/server_args.py",
    ),
    "vllm": (
        "0.31.0",
        "https://github.com/vllm-project/vllm/blob/v0.31.0/vllm/engine/arg_utils.py",
    ),
    "dynamo": (
        "1.6.1",
        "https://github.com/ai-dynamo/dynamo/blob/v1.6.1/components/src/dynamo/sglang/args.py",
    ),
}
"""Each engine's pinned release and the file its flags are defined in. SGLang 0.5.21 and
vLLM 0.31.0 are the releases Dynamo 1.6.1 pins for its ``sglang`` and ``vllm`` extras (its
wheel's metadata), so one set of commands runs alone or under Dynamo."""

IMAGES = {"sglang": "lmsysorg/sglang:v0.5.21", "vllm": "vllm/vllm-openai:v0.31.0"}
"""The container image of each release: the projects' own repositories on Docker Hub
(``lmsysorg/sglang``, ``vllm/vllm-openai``, as their docs name them), tagged by release as
they tag them; that these exact tags exist was not checked (no registry is reachable from
where the tests run): check before deploying."""

KV_DTYPES = {
    "sglang": {"bf16": "bf16", "fp8": "fp8_e4m3"},
    "vllm": {"bf16": "bfloat16", "fp8": "fp8"},
}
"""The scenario's KV dtype in each engine's words (SGLang ``--kv-cache-dtype``'s choices;
vLLM's ``CacheDType``: ``fp8`` is E4M3)."""

PORT = {"sglang": 30000, "vllm": 8000}
"""Each engine's default HTTP port, written out."""
DIST_PORT = 5000
"""SGLang's ``--dist-init-addr`` port, vLLM's ``--master-port`` (any free port will do)."""
DP_RPC_PORT = 13345
"""vLLM's ``--data-parallel-rpc-port`` default (``vllm/config/parallel.py``)."""

NODE_RANK = "${NODE_RANK}"
LEADER_ADDR = "${LEADER_ADDR}"
"""Placeholders of a multi-node instance's command, filled by whoever starts each host: its
rank (0 on the leader) and the leader's address (docs/export.md#multi-node-instances)."""

CP_ONE_NODE_SOURCE = (
    "sglang v0.5.21 python/sglang/srt/arg_groups/deepseek_v4_hook.py: 'Context parallel "
    "only supports single machine (tp_size <= 8). Cross-machine CP has precision issues.'"
)


@dataclass(frozen=True)
class Command:
    """A launch command: the program, its flags (name, value or None for a switch) and the
    placeholders it uses."""

    program: tuple[str, ...]
    flags: list[tuple[str, str | None]] = field(default_factory=list)

    def add(self, name: str, value: object = None) -> None:
        self.flags.append((name, None if value is None else str(value)))

    def argv(self) -> list[str]:
        out = list(self.program)
        for name, value in self.flags:
            out.append(name)
            if value is not None:
                out.append(value)
        return out


def cannot_launch(pool: PoolLaunch, engine: str) -> list[str]:
    """What of ``pool`` ``engine`` cannot launch, one line each: the pool, the part of the
    layout or the chip, and the engine's nearest option; [] when it can."""
    where = f"pool {pool.name} ({pool.layout.label} on {pool.gpus} x {pool.chip.id})"
    lines = []
    if pool.chip.vendor not in ("NVIDIA", "AMD"):
        nearest = {
            "sglang": "SGLang's Ascend NPU build (--device npu), not its CUDA/ROCm images",
            "vllm": "the vllm-ascend plugin, a separate build",
        }.get(engine, "an engine build for that chip")
        lines.append(
            f"{where}: {engine} {RELEASES[engine if engine in RELEASES else 'sglang'][0]}'s "
            f"CUDA/ROCm builds do not run on {pool.chip.vendor} {pool.chip.name}; nearest: "
            f"{nearest}"
        )
    if pool.hosts_relay_decode:
        lines.append(
            f"{where}: relay decode hosted on prefill passes: no engine runs decode tokens in "
            "a disaggregated prefill instance's passes; nearest: a relay_decode pool of its "
            "own (--disaggregation-mode decode), planned with relay_decode_on_prefill: [false]"
        )
    if pool.layout.cp > 1 and engine in ("sglang", "dynamo") and pool.nodes > 1:
        lines.append(
            f"{where}: context parallelism CP{pool.layout.cp} across {pool.nodes} nodes: "
            f"SGLang {RELEASES['sglang'][0]} runs prefill context parallelism within one "
            f"node ({CP_ONE_NODE_SOURCE}); nearest: --attn-cp-size "
            f"{pool.gpus_per_node} on {pool.gpus_per_node}-GPU instances, or vllm "
            "(--prefill-context-parallel-size)"
        )
    return lines


def sglang_command(pool: PoolLaunch, model_id: str, program: tuple[str, ...]) -> Command:
    """SGLang's ``launch_server`` for one instance of ``pool`` (each host of a multi-node
    instance runs it with its own ``NODE_RANK``)."""
    lay = pool.layout
    c = Command(program)
    c.add("--model-path", model_id)
    c.add("--host", "0.0.0.0")
    c.add("--port", PORT["sglang"])
    c.add("--tp-size", pool.gpus)  # SGLang's tp_size is the instance's world size
    if pool.attention_dp > 1:
        c.add("--dp-size", pool.attention_dp)
        c.add("--enable-dp-attention")
    if lay.cp > 1:
        c.add("--attn-cp-size", lay.cp)
        c.add("--enable-prefill-cp")
        c.add("--cp-strategy", "interleave")
    if lay.ep > 1:
        c.add("--ep-size", lay.ep)
    c.add("--kv-cache-dtype", KV_DTYPES["sglang"][pool.kv_dtype])
    if pool.role == "prefill":
        # under DP attention SGLang gives each attention group chunked_prefill_size / dp
        # (python/sglang/srt/arg_groups/parallel_hook.py at v0.5.21)
        c.add("--chunked-prefill-size", pool.chunk_tokens * pool.attention_dp)
        c.add("--disaggregation-mode", "prefill")
    else:
        if pool.batch is not None:  # the instance's total; SGLang splits it over DP ranks
            c.add("--max-running-requests", pool.batch)
        c.add("--disaggregation-mode", "decode")
    c.add("--disaggregation-transfer-backend", "mooncake")
    if pool.nodes > 1:
        c.add("--nnodes", pool.nodes)
        c.add("--node-rank", NODE_RANK)
        c.add("--dist-init-addr", f"{LEADER_ADDR}:{DIST_PORT}")
    return c


def vllm_command(pool: PoolLaunch, model_id: str) -> Command:
    """``vllm serve`` for one instance of ``pool``: attention data-parallel groups are vLLM's
    data-parallel ranks (each its own engine core, so its own batch and token budget),
    tensor and prefill context parallelism inside each, experts over all of them."""
    lay = pool.layout
    c = Command(("vllm", "serve", model_id))
    c.add("--host", "0.0.0.0")
    c.add("--port", PORT["vllm"])
    dp = pool.attention_dp
    c.add("--tensor-parallel-size", lay.attn_tp if lay.ep > 1 else pool.gpus)
    if lay.cp > 1:
        c.add("--prefill-context-parallel-size", lay.cp)
    if dp > 1:
        c.add("--data-parallel-size", dp)
    if lay.ep > 1:
        c.add("--enable-expert-parallel")
    c.add("--kv-cache-dtype", KV_DTYPES["vllm"][pool.kv_dtype])
    if pool.batch is not None:  # per rank, never above the plan's (the most meeting TPOT)
        c.add("--max-num-seqs", max(1, pool.batch // dp))
    c.add("--max-num-batched-tokens", pool.chunk_tokens)
    c.add("--enable-chunked-prefill")
    c.add(
        "--kv-transfer-config",
        json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":")),
    )
    if pool.nodes > 1:
        width = lay.attn_tp * lay.cp if lay.ep > 1 else pool.gpus  # GPUs of one DP rank
        if dp > 1 and width <= pool.node_gpus:  # DP ranks spread over the hosts
            local = pool.node_gpus // width
            c.add("--data-parallel-size-local", local)
            c.add("--data-parallel-start-rank", "${DP_START_RANK}")
            c.add("--data-parallel-address", LEADER_ADDR)
            c.add("--data-parallel-rpc-port", DP_RPC_PORT)
        else:  # one rank's world spans hosts
            c.add("--nnodes", pool.nodes)
            c.add("--node-rank", NODE_RANK)
            c.add("--master-addr", LEADER_ADDR)
            c.add("--master-port", DIST_PORT)
    return c


def vllm_dp_local(pool: PoolLaunch) -> int | None:
    """Data-parallel ranks per host of a multi-host vLLM instance whose ranks each fit one
    host (its script sets ``DP_START_RANK`` = ``NODE_RANK`` x this); None otherwise."""
    lay = pool.layout
    width = lay.attn_tp * lay.cp if lay.ep > 1 else pool.gpus
    if pool.nodes > 1 and pool.attention_dp > 1 and width <= pool.node_gpus:
        return pool.node_gpus // width
    return None
