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
from pddplan.io.catalogs import load_engines

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
    "trtllm": (
        "commit 00209af",
        "https://github.com/NVIDIA/TensorRT-LLM/blob/00209af149e7774406881a37283dce303571eb11/"
        "tensorrt_llm/commands/serve.py",
    ),
    "dynamo-trtllm": (
        "1.6.1",
        "https://github.com/ai-dynamo/dynamo/blob/v1.6.1/components/src/dynamo/trtllm/backend_args.py",
    ),
}
"""Each engine's pinned release and the file its flags are defined in. SGLang 0.5.21 and
vLLM 0.31.0 are the releases Dynamo 1.6.1 pins for its ``sglang`` and ``vllm`` extras (its
wheel's metadata), so one set of commands runs alone or under Dynamo. Dynamo 1.6.1 pins
TensorRT-LLM 1.3.0rc29 for its ``trtllm`` extra; that tag's source could not be read where
these were written (tests/data/engines/README.md), so ``trtllm-serve``'s flags are pinned by
the commit of the ``serve.py`` they were read from instead."""

IMAGES = {
    "sglang": "lmsysorg/sglang:v0.5.21",
    "vllm": "vllm/vllm-openai:v0.31.0",
    "dynamo-sglang": "nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.6.1",
    "dynamo-trtllm": "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1",
}
"""The container image of each release. The Dynamo runtime images are the ones Dynamo 1.6.1's
own deployment templates name (``ai_dynamo-1.6.1`` wheel:
``dynamo/profiler/templates/dgd/sglang/disagg.yaml`` and ``.../trtllm/disagg.yaml``:
``image: nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1``). ``lmsysorg/sglang`` and
``vllm/vllm-openai`` are the repositories the projects' docs name, tagged ``v{release}``;
public repositories (found through a code index, 2026-12-07) record
``lmsysorg/sglang:v0.5.21`` (multi-arch index) pushed 2026-10-01 as
``sha256:b1259f3ea3275f66237c498ea388919729018bc9f01c3d638391e06e2cf3f469``, and pin
``vllm/vllm-openai:v0.31.0@sha256:c1c9f6fd…`` (CUDA 13.0: an R580+ driver). None was checked
against the registries themselves (none is reachable from here): docs/export.md#images."""

KV_DTYPES = {
    "sglang": {"bf16": "bf16", "fp8": "fp8_e4m3"},
    "vllm": {"bf16": "bfloat16", "fp8": "fp8"},
    "trtllm": {"bf16": "auto", "fp8": "fp8"},
}
"""The scenario's KV dtype in each engine's words (SGLang ``--kv-cache-dtype``'s choices;
vLLM's ``CacheDType``: ``fp8`` is E4M3; TensorRT-LLM's ``kv_cache_config.dtype``, one of
``auto``, ``fp8``, ``nvfp4`` (``_VALID_KV_CACHE_DTYPES``, its PyTorch model loader): it has
no ``bfloat16``, ``auto`` keeps the checkpoint's dtype, bf16 for a bf16 checkpoint)."""

PORT = {"sglang": 30000, "vllm": 8000, "trtllm": 8000}
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
    sglang = load_engines().engines["sglang"].launch  # the shipped release's limits
    if (
        pool.layout.cp > 1
        and engine in ("sglang", "dynamo")
        and sglang.context_parallel(pool.attention, pool.gpus)
    ):
        lines.append(
            f"{where}: context parallelism CP{pool.layout.cp} across {pool.nodes} nodes: "
            f"SGLang {RELEASES['sglang'][0]} runs {pool.attention} attention's prefill context "
            f"parallelism within one node ({CP_ONE_NODE_SOURCE}); nearest: --attn-cp-size "
            f"{pool.gpus_per_node} on {pool.gpus_per_node}-GPU instances, or vllm "
            "(--prefill-context-parallel-size)"
        )
    if engine == "trtllm":
        lines += _trtllm_cannot(pool, where)
    return lines


HELIX_SOURCE = (
    "TensorRT-LLM 1.3.0rc26 docs, features/helix.html: 'Helix is a context parallelism (CP) "
    "technique for the decode/generation phase', 'designed for generation servers in a "
    "disaggregated ... deployment'"
)
ATTENTION_DP_SOURCE = (
    "Dynamo 1.6.1 dynamo/trtllm/backend_args.py, --enable-attention-dp: 'When enabled, "
    "attention_dp_size equals tensor_parallel_size'"
)


def _trtllm_cannot(pool: PoolLaunch, where: str) -> list[str]:
    """What of ``pool`` TensorRT-LLM cannot launch: AMD chips, context parallelism (its CP
    in disaggregated serving, Helix, is for generation servers; its other CP types are not
    mapped), attention data parallelism with tensor-parallel attention groups."""
    lay, g = pool.layout, pool.gpus
    lines = []
    if pool.chip.vendor == "AMD":
        lines.append(
            f"{where}: TensorRT-LLM runs on NVIDIA GPUs only, not on {pool.chip.name}; "
            "nearest: sglang or vllm (ROCm builds)"
        )
    if lay.cp > 1:
        lines.append(
            f"{where}: context parallelism CP{lay.cp} on {pool.role.replace('_', ' ')}: "
            f"TensorRT-LLM's context parallelism for disaggregated serving is Helix, for "
            f"generation servers ({HELIX_SOURCE}); pddplan maps no prefill CP onto it; "
            f"nearest: --tp_size {g} with enable_attention_dp "
            f"(DP{g}+EP{g}) on the same {g} GPUs, or vllm (--prefill-context-parallel-size)"
        )
    elif pool.attention_dp > 1 and lay.attn_tp > 1:
        lines.append(
            f"{where}: attention DP{pool.attention_dp} x TP{lay.attn_tp}: TensorRT-LLM's "
            f"attention data parallelism runs one attention rank per GPU "
            f"({ATTENTION_DP_SOURCE}); nearest: DP{g}+EP{g} (--tp_size {g}, "
            f"enable_attention_dp) or TP{g}, or sglang/vllm (--dp-size {pool.attention_dp})"
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


TRTLLM_TRANSCEIVER = "NIXL"
"""``cache_transceiver_config.backend`` of every TensorRT-LLM pool (one of ``DEFAULT``,
``UCX``, ``NIXL``, ``MOONCAKE``, ``MPI``): NIXL, as the vLLM commands' ``NixlConnector``."""
TRTLLM_LAUNCH = ("mpirun", "--allow-run-as-root")
"""How a TensorRT-LLM instance over several hosts starts: one MPI world from its leader host
(``trtllm-llmapi-launch`` makes each rank join the server's MPI session)."""
HOSTS = "${HOSTS}"
"""Placeholder of a multi-host TensorRT-LLM command: the instance's hosts as MPI's ``-H``
list (``host1:8,host2:8``)."""


def trtllm_options(pool: PoolLaunch) -> dict[str, object]:
    """The LLM-API options of one instance of ``pool`` (the YAML of ``trtllm-serve --config``,
    of Dynamo's ``--extra-engine-args``): attention data parallelism, the KV cache's dtype,
    the disaggregation transceiver, chunked prefill."""
    options: dict[str, object] = {
        "enable_attention_dp": pool.attention_dp > 1,
        "kv_cache_config": {"dtype": KV_DTYPES["trtllm"][pool.kv_dtype]},
        "cache_transceiver_config": {"backend": TRTLLM_TRANSCEIVER},
        "enable_chunked_prefill": True,
    }
    return options


def trtllm_batch(pool: PoolLaunch) -> int | None:
    """``max_batch_size`` per attention-DP rank: the instance's batch over its ranks, rounded
    down as vLLM's; None on prefill. Each rank runs its own KV cache and batch (Dynamo 1.6 docs,
    DP rank routing: "multiple attention DP ranks run within a single worker, each with its own
    KV cache"); were the limit the instance's instead, this would be lower than the plan's
    batch, never above it."""
    if pool.batch is None:
        return None
    return max(1, pool.batch // pool.attention_dp)


def trtllm_command(pool: PoolLaunch, model_id: str, config: str) -> Command:
    """``trtllm-serve`` for one instance of ``pool`` (``config``: its LLM-API YAML's path);
    across hosts, started once from the leader under ``mpirun`` with ``trtllm-llmapi-launch``."""
    lay = pool.layout
    program: tuple[str, ...] = ("trtllm-serve", model_id)
    if pool.nodes > 1:
        program = (
            *TRTLLM_LAUNCH,
            "-np",
            str(pool.gpus),
            "-H",
            HOSTS,
            "trtllm-llmapi-launch",
            *program,
        )
    c = Command(program)
    c.add("--host", "0.0.0.0")
    c.add("--port", PORT["trtllm"])
    c.add("--backend", "pytorch")
    c.add("--tp_size", pool.gpus)  # attention DP or TP over the instance; experts over EP
    if lay.ep > 1:
        c.add("--ep_size", lay.ep)
    c.add("--gpus_per_node", pool.node_gpus)
    batch = trtllm_batch(pool)
    if batch is not None:
        c.add("--max_batch_size", batch)
    c.add("--max_num_tokens", pool.chunk_tokens)
    c.add("--config", config)
    return c


def dynamo_trtllm_command(pool: PoolLaunch, model_id: str, config: str) -> Command:
    """Dynamo's TensorRT-LLM worker (``python3 -m dynamo.trtllm``) for one instance of
    ``pool``: its own flags for the layout and limits, the LLM-API YAML for the rest."""
    lay = pool.layout
    c = Command(("python3", "-m", "dynamo.trtllm"))
    c.add("--model-path", model_id)
    c.add("--tensor-parallel-size", pool.gpus)
    if lay.ep > 1:
        c.add("--expert-parallel-size", lay.ep)
    if pool.attention_dp > 1:
        c.add("--enable-attention-dp")
    c.add("--gpus-per-node", pool.node_gpus)
    batch = trtllm_batch(pool)
    if batch is not None:
        c.add("--max-batch-size", batch)
    c.add("--max-num-tokens", pool.chunk_tokens)
    c.add("--extra-engine-args", config)
    c.add("--disaggregation-mode", "prefill" if pool.role == "prefill" else "decode")
    return c
