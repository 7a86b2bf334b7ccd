"""The per-instance figures ``pddplan perf`` prints for one request shape (prefill latency
and throughput, the largest decode batch, KV sizes), from ``pddplan.model.instance``'s cost functions."""

from __future__ import annotations

from dataclasses import dataclass

from pddplan import units
from pddplan.errors import ArgumentError
from pddplan.model.instance import Instance


@dataclass(frozen=True, slots=True)
class InstancePerf:
    """The per-instance figures ``pddplan perf`` prints and the planner uses."""

    model: str
    chip: str
    gpus: int
    layout: str
    weight_dtype: str
    kv_dtype: str
    weight_gb_per_gpu: float
    kv_capacity_gb: float
    input_tokens: int
    hit_rate: float
    output_tokens: int
    prefill_seconds: float
    """Prefill latency of this request alone."""
    prefill_tokens_per_s_per_gpu: float
    """Uncached (computed) tokens per second per GPU with passes full of such requests."""
    prefill_input_tokens_per_s_per_gpu: float
    """The same throughput counted in input tokens (cached ones included)."""
    decode_context_tokens: float
    tpot_ms: float | None
    max_batch_by_memory: int
    max_batch: int
    decode_batch: int
    decode_step_ms: float
    decode_tokens_per_s_per_gpu: float
    kv_bytes_per_token: float
    kv_fixed_bytes_per_request: float
    kv_transfer_bytes: float
    """KV a destination lacking ``dest_hit_rate`` of the context must receive."""
    dest_hit_rate: float
    engine: str = ""
    """The engine profile whose pass times these are (``pddplan.api.instance_figures``)."""


def analyze_instance(
    inst: Instance,
    *,
    input_tokens: int,
    hit_rate: float,
    output_tokens: int,
    tpot_ms: float | None = None,
    batch: int | None = None,
    dest_hit_rate: float = 0.0,
    reserved_bytes: float = 0.0,
) -> InstancePerf:
    """Every per-instance figure for one request shape.

    Decode runs at the mean context over the output (input + output / 2), at ``batch`` if
    given, else at the largest batch that fits memory and meets ``tpot_ms``.
    """
    g = inst.layout.gpus
    prefill_s = inst.prefill_latency_s(input_tokens, hit_rate)
    service_s = inst.prefill_service_s(input_tokens, hit_rate)
    new_tokens = sum(t for t, _ in inst.prefill_chunks(input_tokens, hit_rate))
    ctx = input_tokens + output_tokens / 2
    tpot_s = tpot_ms * units.MS if tpot_ms is not None else None
    by_memory = inst.max_batch(ctx, reserved_bytes=reserved_bytes)
    best = inst.max_batch(ctx, tpot_s=tpot_s, reserved_bytes=reserved_bytes)
    if batch is not None and batch > by_memory:
        raise ArgumentError(
            "batch",
            f"{{argument}} {batch}: only {by_memory} sequences of {ctx:,.0f} tokens fit in the "
            f"instance's KV memory ({inst.kv_capacity_bytes(reserved_bytes) / units.GB:,.1f} GB)",
        )
    run = batch if batch is not None else max(best, 1)
    step_s = inst.decode_step_s(run, ctx)
    serving = batch is not None or best > 0
    return InstancePerf(
        model=inst.model.id,
        chip=inst.chip.id,
        gpus=g,
        layout=inst.layout.label,
        weight_dtype=inst.weight_dtype,
        kv_dtype=inst.kv.dtype,
        weight_gb_per_gpu=inst.weight_bytes_per_gpu / units.GB,
        kv_capacity_gb=inst.kv_capacity_bytes(reserved_bytes) / units.GB,
        input_tokens=input_tokens,
        hit_rate=hit_rate,
        output_tokens=output_tokens,
        prefill_seconds=prefill_s,
        prefill_tokens_per_s_per_gpu=new_tokens / service_s / g if service_s else 0.0,
        prefill_input_tokens_per_s_per_gpu=input_tokens / service_s / g if service_s else 0.0,
        decode_context_tokens=ctx,
        tpot_ms=tpot_ms,
        max_batch_by_memory=by_memory,
        max_batch=best,
        decode_batch=run,
        decode_step_ms=step_s / units.MS,
        decode_tokens_per_s_per_gpu=run / step_s / g if serving else 0.0,
        kv_bytes_per_token=inst.kv.bytes_per_token,
        kv_fixed_bytes_per_request=inst.kv.fixed_bytes,
        kv_transfer_bytes=inst.kv.transfer_bytes(input_tokens, dest_hit_rate),
        dest_hit_rate=dest_hit_rate,
    )
