"""Two-batch overlap, context parallelism and the prefill MFU's derivation, by hand
(issue 18): the pass and step times are the roofline of what runs side by side plus what
cannot overlap, built from the pieces the other tests check."""

from __future__ import annotations

import pytest
from conftest import DOMESTIC

from pddplan import units
from pddplan.model.instance import make_instance
from pddplan.spec.calibration import (
    DEFAULT_DECODE_COMM_HIDDEN,
    DEFAULT_DECODE_OVERLAP_SLOWDOWN,
    DEFAULT_PREFILL_COMM_HIDDEN,
    DEFAULT_PREFILL_OVERLAP_SLOWDOWN,
    CalibrationOverride,
    CalibrationSpec,
    resolve_calibration,
)


def _instance(models, hardware, chip="h800", gpus=32, context_parallel=False, **knobs):
    spec = CalibrationSpec(default=CalibrationOverride(**knobs))
    cal = resolve_calibration(hardware, chip, spec)
    model, spec_chip = models["deepseek-v3"], hardware.chips[chip]
    return make_instance(
        model, spec_chip, gpus, cal, kv_dtype="bf16", context_parallel=context_parallel
    )


def test_the_defaults_are_the_sources_arithmetic():
    assert pytest.approx(1 - 2.40 / 30.55, abs=0.005) == DEFAULT_PREFILL_COMM_HIDDEN
    assert pytest.approx(1 - 0.365 / 1.100, abs=0.005) == DEFAULT_DECODE_COMM_HIDDEN
    assert pytest.approx(132 / 108) == DEFAULT_PREFILL_OVERLAP_SLOWDOWN
    assert pytest.approx(1.040 / 0.781, abs=0.005) == DEFAULT_DECODE_OVERLAP_SLOWDOWN


def test_a_full_prefill_pass_with_and_without_two_batch_overlap(models, hardware):
    """A full pass of 8,192 tokens on each of 32 ranks. Without overlap: max(compute,
    memory) + the all-to-all + latency + overhead. With it: compute x 1.222 and the weights
    read per micro-batch beside 92% of the all-to-all, plus the 8% that shows, latency and
    overhead."""
    full = [[(8192.0, 0.0, 0.0)]] * 32
    none = _instance(models, hardware, overlap="none")
    tbo = _instance(models, hardware, overlap="two-batch")
    tokens = 8192.0 * 32
    volume, latency = (float(x) for x in none._collectives_s(tokens))
    overhead = none.cal.efficiency.step_overhead_ms * units.MS
    attn = 32 * 8192 * none.kv.attention_flops(4096, prefill=True)
    compute = float(none._compute_s(tokens, attn, none.cal.efficiency.prefill_mfu, groups=32))
    kv = none.kv.resident_bytes(8192) * none._kv_copies
    memory = (kv + float(none._weights_read_per_gpu(tokens))) / none._hbm_rate
    assert none.batched_pass_s(full) == pytest.approx(
        max(compute, memory) + volume + latency + overhead, rel=1e-9
    )
    memory2 = (kv + 2 * float(tbo._weights_read_per_gpu(tokens / 2))) / tbo._hbm_rate
    expected = max(compute * 132 / 108, memory2, 0.92 * volume) + 0.08 * volume + latency + overhead
    assert tbo.batched_pass_s(full) == pytest.approx(expected, rel=1e-9)
    assert tbo.batched_pass_s(full) < 0.7 * none.batched_pass_s(full)  # it pays here


def test_a_decode_step_takes_the_faster_of_the_two(models, hardware):
    """``auto`` decodes with two-batch overlap only where it is faster: not at a small batch
    (the weights read twice, GEMMs at half the batch), yes at a large one (the all-to-all)."""
    auto = _instance(models, hardware, gpus=144)
    none = _instance(models, hardware, gpus=144, overlap="none")
    tbo = _instance(models, hardware, gpus=144, overlap="two-batch")
    for batch in (144, 2_000, 14_000):
        expected = min(none.decode_step_s(batch, 5000), tbo.decode_step_s(batch, 5000))
        assert auto.decode_step_s(batch, 5000) == pytest.approx(expected, rel=1e-12)
    assert none.decode_step_s(144, 5000) < tbo.decode_step_s(144, 5000)
    assert tbo.decode_step_s(14_000, 5000) < none.decode_step_s(14_000, 5000)


def test_dense_layouts_do_not_overlap_by_default(models, hardware):
    cal = resolve_calibration(hardware, "h100-sxm")
    inst = make_instance(models["llama-3.1-70b"], hardware.chips["h100-sxm"], 8, cal)
    assert inst._micro == 1 and inst._decode_modes == ((1, 0.0, 1.0),)


def test_prefill_mfu_is_deepseeks_profile_compute_time(models, hardware):
    """The Hopper ``prefill_mfu`` is pddplan's FLOPs for DeepSeek's profiled pass (H800,
    EP32, 16,384 tokens of 4K prompts per GPU, balanced routing) over the profile's compute
    time: 31.33 ms a layer on 108 of 132 SMs, 61 layers (docs/validation.md)."""
    inst = _instance(models, hardware, ep_imbalance=1.0)
    tokens = 16384 * 32
    attn = tokens * inst.kv.attention_flops(2048, prefill=True)
    at_peak = float(inst._compute_s(tokens, attn, 1.0, groups=32))
    measured = 31.33e-3 * 61 * 108 / 132
    assert at_peak / measured == pytest.approx(inst.cal.efficiency.prefill_mfu, abs=0.005)


def test_context_parallelism_splits_one_prompt_over_every_rank(models, hardware):
    """CP16 on 16 H100: one attention group (the whole instance), a chunk budget of
    16 x 8,192 tokens, and each pass pays the ring of the context's KV: (cp - 1) / cp of it
    over the link 16 GPUs span (two 8-GPU nodes: the NIC) at the collective efficiency."""
    dp = _instance(models, hardware, chip="h100-sxm", gpus=16)
    cp = _instance(models, hardware, chip="h100-sxm", gpus=16, context_parallel=True)
    assert cp.layout.label == "CP16+EP16" and dp.layout.label == "DP16+EP16"
    assert cp.attention_groups == 1 and dp.attention_groups == 16
    assert cp.chunk_tokens == 16 * 8192
    context = cp.kv.resident_bytes(100_000) * cp._kv_copies
    link = hardware.chips["h100-sxm"].nic_bytes_per_s * cp.cal.efficiency.collective_efficiency
    assert cp._ring_s(context) == pytest.approx(context * 15 / 16 / link)
    assert dp._ring_s(context) == 0.0
    # a long prompt alone: attention on 16 GPUs instead of one
    assert cp.prefill_latency_s(127_000, 0.0) < dp.prefill_latency_s(127_000, 0.0) / 8
    # full passes: the same work spread the same way, plus the ring
    assert cp.prefill_service_s(4096, 0.5) >= dp.prefill_service_s(4096, 0.5) * (1 - 1e-9)


def test_context_parallelism_needs_two_attention_groups(models, hardware):
    cal = resolve_calibration(hardware, "h100-sxm")
    chip = hardware.chips["h100-sxm"]
    with pytest.raises(ValueError, match="one attention group"):
        make_instance(models["llama-3.1-70b"], chip, 8, cal, context_parallel=True)


@pytest.mark.slow
def test_the_planner_chooses_context_parallelism_where_the_tail_needs_it():
    """domestic-910c-h20 with its TTFT P99 bound at 10 s: with data-parallel attention one
    910C prefills a 127K-token prompt for minutes, and no fleet of DP layouts meets the
    bound; context-parallel layouts do, and the planner takes one."""
    import pddplan

    problem = pddplan.load_scenario(DOMESTIC)
    tight = problem.derive({"sla.ttft_p99_s": 10})
    plan = pddplan.solve(tight)
    assert plan.fleet is not None and plan.evaluation is not None
    prefill = [p for p in plan.fleet.pools if p.role == "prefill"]
    assert prefill and all(p.context_parallel for p in prefill)
    assert plan.evaluation.ttft_s["p99"] <= 10 * (1 + 1e-9)
    dp_only = pddplan.solve(tight.derive({"search.context_parallel": [False]}))
    assert dp_only.status == "infeasible"
