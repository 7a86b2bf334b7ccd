"""The per-instance roofline model against numbers worked out by hand (issue #2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pddplan.errors import WeightsDoNotFitError
from pddplan.model.figures import analyze_instance
from pddplan.model.instance import Instance, layout_for, make_instance
from pddplan.spec.calibration import resolve_calibration

TOY_WEIGHT_BYTES = 32_456_704 * 2  # bf16
TOY_KV_PER_TOKEN = 2 * 2 * 2 * 128 * 2  # K+V x layers x kv_heads x head_dim x bf16 = 2,048 B


def test_toy_decode_step_by_hand(toy_model, toy_chip, toy_cal):
    """Batch 1 at 1,000 tokens of context, one GPU, no overhead or collectives.

    Bytes: weights read per step are everything but the input embedding:
    2 x (2,621,440 + 12,582,912) + 1,000 x 1,024 = 31,432,704 params = 62,865,408 B, plus KV
    1,000 x 2,048 = 2,048,000 B; total 64,913,408 B at 1 TB/s x 0.5 = 129.826816 us.
    FLOPs: 2 x 32,456,704 + attention 2 layers x 1,000 x (2 x 8 heads x 2 x 128) = 73,105,408
    at 100 TFLOPS x 0.5 = 1.46 us. Memory-bound: 0.129826816 ms.
    """
    inst = make_instance(toy_model, toy_chip, 1, toy_cal)
    assert inst.decode_step_s(1, 1000) == pytest.approx(129.826816e-6)


def test_toy_prefill_pass_by_hand(toy_model, toy_chip, toy_cal):
    """1,000 new tokens, no prefix, one GPU.

    FLOPs: 2 x 32,456,704 x 1,000 = 64,913,408,000 plus attention at mean context 500:
    1,000 x 2 layers x 500 x 4,096 = 4,096,000,000; total 69,009,408,000 at 50 TFLOP/s =
    1.38018816 ms. Bytes: 62,865,408 weights + 2,048,000 KV = 0.13 ms: compute-bound.
    """
    inst = make_instance(toy_model, toy_chip, 1, toy_cal)
    assert inst.prefill_pass_s(1000, 0) == pytest.approx(1.38018816e-3)
    assert inst.prefill_latency_s(1000, 0.0) == pytest.approx(1.38018816e-3)


def test_prefill_reads_weights_once_per_pass_not_per_request(toy_model, toy_chip, toy_cal):
    """Alone, 8 tokens make a memory-bound pass: it pays the whole weight read. Inside a full
    8,192-token pass the request pays 8/8,192 of the weight read and becomes compute-bound:
    8 x 2 x 32,456,704 + attention 8 x 2 layers x 4 x 4,096 = 519,569,408 FLOPs at
    50 TFLOP/s = 10.39 us."""
    inst = make_instance(toy_model, toy_chip, 1, toy_cal)
    alone = inst.prefill_latency_s(8, 0.0)
    shared = inst.prefill_service_s(8, 0.0)
    weights_s = 62_865_408 / 0.5e12
    assert alone == pytest.approx(weights_s + 8 * TOY_KV_PER_TOKEN / 0.5e12)
    assert shared == pytest.approx(519_569_408 / 50e12)


def test_largest_batch_by_memory_toy(toy_model, toy_chip, toy_cal):
    """100 GB x 0.9 usable - 64,913,408 B weights = 89,935,086,592 B; / (1,000 x 2,048 B)
    = 43,913.6 sequences."""
    inst = make_instance(toy_model, toy_chip, 1, toy_cal)
    assert inst.max_batch(1000) == 43_913


def test_largest_batch_llama_8b_on_h100(models, hardware):
    """80 GB x 0.9 = 72 GB usable; weights 8.03e9 x 2 B = 16.06 GB; 55.94 GB of KV.
    8,192 in + 512 out: mean context 8,448 tokens x 131,072 B = 1,107,296,256 B per sequence;
    55.94e9 / 1.107e9 = 50.5 -> 50."""
    cal = resolve_calibration(hardware, "h100-sxm")
    inst = make_instance(models["llama-3.1-8b"], hardware.chips["h100-sxm"], 1, cal)
    perf = analyze_instance(inst, input_tokens=8192, hit_rate=0.0, output_tokens=512)
    assert perf.max_batch == perf.max_batch_by_memory == 50


def test_llama_8b_batch_one_step_is_weight_bytes_over_bandwidth(models, hardware):
    """STYLE.md's hand check: one 8B bf16 decode step on one H100 is about weight bytes / HBM
    bandwidth: 15.0e9 B read (all but the input embedding: 16.06e9 - 128,256 x 4,096 x 2)
    / (3.35e12 x 0.8) = 5.60 ms, plus KV of 1,000 tokens (0.05 ms) and the 1 ms step
    overhead of the hopper family."""
    cal = resolve_calibration(hardware, "h100-sxm")
    inst = make_instance(models["llama-3.1-8b"], hardware.chips["h100-sxm"], 1, cal)
    read = 8.03e9 * 2 - 128_256 * 4096 * 2 + 1000 * 131_072
    assert inst.decode_step_s(1, 1000) == pytest.approx(read / (3.35e12 * 0.8) + 1e-3)


def test_tpot_bound_caps_the_batch(models, hardware):
    cal = resolve_calibration(hardware, "h100-sxm")
    inst = make_instance(models["llama-3.1-70b"], hardware.chips["h100-sxm"], 8, cal)
    loose = inst.max_batch(4096)
    tight = inst.max_batch(4096, tpot_s=0.025)
    assert 0 < tight < loose
    assert inst.decode_step_s(tight, 4096) <= 0.025 < inst.decode_step_s(tight + 1, 4096)
    assert inst.max_batch(4096, tpot_s=1e-4) == 0  # not even one sequence


def test_reserved_cache_lowers_the_batch(models, hardware):
    cal = resolve_calibration(hardware, "h200-sxm")
    inst = make_instance(models["llama-3.1-70b"], hardware.chips["h200-sxm"], 8, cal)
    assert inst.max_batch(8192, reserved_bytes=300e9) < inst.max_batch(8192)


def test_refuses_sizes_that_cannot_hold_the_weights(models, hardware):
    cal = resolve_calibration(hardware, "h100-sxm")
    with pytest.raises(
        WeightsDoNotFitError, match=r"smallest power-of-two size that fits is 16 GPUs"
    ):
        make_instance(models["deepseek-v3"], hardware.chips["h100-sxm"], 4, cal)


def test_layouts(models, hardware):
    h100 = hardware.chips["h100-sxm"]
    assert layout_for(models["llama-3.1-70b"], h100, 8).label == "TP8"
    assert layout_for(models["deepseek-v3"], h100, 32).label == "DP32+EP32"
    # GQA attention is no wider than the KV heads (4), so 16 GPUs run 4 attention groups
    assert layout_for(models["qwen3-235b-a22b"], h100, 16).label == "DP4xTP4+EP16"
    assert layout_for(models["glm-4.5"], h100, 8).label == "TP8+EP8"


def test_multi_node_instances_pay_for_the_slower_link(models, hardware):
    """The same per-GPU work split over 16 GPUs crosses the NIC (50 GB/s) instead of NVLink
    (450 GB/s): a TP16 decode step of a dense model is slower than TP8's."""
    cal = resolve_calibration(hardware, "h100-sxm")
    m, chip = models["llama-3.1-405b"], hardware.chips["h100-sxm"]
    tp16 = make_instance(m, chip, 16, cal)
    assert tp16._link(16)[0] < tp16._link(8)[0]
    fp8 = make_instance(m, chip, 8, cal, weight_dtype="fp8", kv_dtype="fp8")
    fp8_16 = make_instance(m, chip, 16, cal, weight_dtype="fp8", kv_dtype="fp8")
    assert fp8_16.decode_step_s(64, 2048) > 0.5 * fp8.decode_step_s(64, 2048)


def test_moe_decode_reads_only_touched_experts(models, hardware):
    """Batch 1 of DeepSeek-V3 touches 8 of 256 experts per layer: far fewer bytes than at
    batch 512, where nearly every expert is hit."""
    cal = resolve_calibration(hardware, "h800")
    inst = make_instance(models["deepseek-v3"], hardware.chips["h800"], 16, cal)
    assert inst._weights_read_per_gpu(1) < 0.3 * inst._weights_read_per_gpu(512)
    assert inst._experts_touched_per_gpu(1) == pytest.approx(1.3 * 16 * (1 - (1 - 8 / 256)))


def test_ep_imbalance_slows_moe_decode(models, hardware):
    from pddplan.spec.calibration import CalibrationOverride, CalibrationSpec

    m, chip = models["deepseek-v3"], hardware.chips["h800"]
    even = resolve_calibration(
        hardware, "h800", CalibrationSpec(default=CalibrationOverride(ep_imbalance=1.0))
    )
    skew = resolve_calibration(
        hardware, "h800", CalibrationSpec(default=CalibrationOverride(ep_imbalance=2.0))
    )
    a, b = make_instance(m, chip, 16, even), make_instance(m, chip, 16, skew)
    assert b.decode_step_s(256, 4096) > a.decode_step_s(256, 4096)


# --- properties ----------------------------------------------------------------------------
PAIRS = [
    ("llama-3.1-70b", "h100-sxm", 8),
    ("deepseek-v3", "h800", 32),
    ("deepseek-v4-pro", "h200-sxm", 16),
    ("qwen3-235b-a22b", "mi300x", 8),
    ("deepseek-v3.2", "b200", 8),
    ("llama-3.1-8b", "l40s", 1),
]


def _inst(models, hardware, i: int) -> Instance:
    model, chip, gpus = PAIRS[i]
    return make_instance(
        models[model], hardware.chips[chip], gpus, resolve_calibration(hardware, chip)
    )


@given(
    i=st.integers(0, len(PAIRS) - 1),
    batch=st.integers(1, 4096),
    more=st.integers(1, 4096),
    ctx=st.integers(1, 200_000),
)
def test_decode_step_never_falls_as_batch_grows(models, hardware, i, batch, more, ctx):
    """Decode step time is non-decreasing in the batch."""
    inst = _inst(models, hardware, i)
    assert inst.decode_step_s(batch + more, ctx) >= inst.decode_step_s(batch, ctx)


@given(
    i=st.integers(0, len(PAIRS) - 1),
    tokens=st.integers(1, 200_000),
    lo=st.floats(0, 1),
    hi=st.floats(0, 1),
)
def test_higher_hit_rate_never_raises_prefill_time(models, hardware, i, tokens, lo, hi):
    """With the prefix cache in HBM, a higher hit rate never raises prefill latency or cost."""
    lo, hi = min(lo, hi), max(lo, hi)
    inst = _inst(models, hardware, i)
    assert inst.prefill_latency_s(tokens, hi) <= inst.prefill_latency_s(tokens, lo) * (1 + 1e-12)
    assert inst.prefill_service_s(tokens, hi) <= inst.prefill_service_s(tokens, lo) * (1 + 1e-12)


@given(i=st.integers(0, len(PAIRS) - 1), extra_gb=st.floats(0, 500), ctx=st.integers(1, 200_000))
def test_more_hbm_never_lowers_the_largest_batch(models, hardware, i, extra_gb, ctx):
    """More HBM (same everything else) never lowers the largest batch."""
    inst = _inst(models, hardware, i)
    bigger_chip = inst.chip.model_copy(update={"hbm_gb": inst.chip.hbm_gb + extra_gb})
    bigger = make_instance(inst.model, bigger_chip, inst.layout.gpus, inst.cal)
    assert bigger.max_batch(ctx, tpot_s=0.05) >= inst.max_batch(ctx, tpot_s=0.05)
    assert bigger.max_batch(ctx) >= inst.max_batch(ctx)


def test_weight_bytes_agree_with_the_per_gpu_parts(models, hardware):
    """One GPU (no replication) stores exactly what `model show` calls weight_bytes, also
    for Kimi-K2 whose config shapes exceed its rounded 1T card figure (regression)."""
    from pddplan.model.params import weight_bytes

    big = hardware.chips["h200-sxm"].model_copy(update={"hbm_gb": 1e5})
    for model_id in ("kimi-k2", "deepseek-v4-pro", "llama-3.1-70b"):
        m = models[model_id]
        inst = make_instance(m, big, 1, resolve_calibration(hardware, "h200-sxm"))
        assert inst.weight_bytes_per_gpu == pytest.approx(weight_bytes(m))


def test_full_passes_spread_attention_over_all_gpus(models, hardware):
    """Regression: a request whose uncached part fills whole 8,192-token chunks is served in
    full passes, where attention spreads over every GPU; only its latency alone keeps the
    attention on one data-parallel rank. Long prompts therefore cost the same per token in
    full passes as short ones do, give or take the longer context."""
    cal = resolve_calibration(hardware, "h100-sxm")
    inst = make_instance(models["deepseek-v4-pro"], hardware.chips["h100-sxm"], 16, cal)
    per_token_8k = inst.prefill_service_s(8192, 0.0) / 8192
    per_token_16k = inst.prefill_service_s(16384, 0.0) / 16384
    assert per_token_16k < 1.5 * per_token_8k
    assert inst.prefill_latency_s(8192, 0.0) > 4 * inst.prefill_service_s(8192, 0.0)


@pytest.mark.parametrize("prefix_cache", ["hbm", "host"])
def test_prefill_figures_equal_the_per_request_functions(models, hardware, prefix_cache):
    """The vectorized figures the planner and the evaluator use are the per-request ones."""
    import numpy as np

    base = resolve_calibration(hardware, "h200-sxm")
    knobs = base.knobs.model_copy(
        update={"prefix_cache": prefix_cache, "prefill_chunk_tokens": 2048}
    )
    cal = base.model_copy(update={"knobs": knobs})
    inst = make_instance(models["deepseek-v3"], hardware.chips["h200-sxm"], 16, cal)
    inputs = np.array([100.0, 2048.0, 5000.5, 64000.0])
    hits = np.array([0.0, 0.5, 0.97, 1.0])
    lat, svc, pass_s, owner, new, room, fill, _ = inst.prefill_figures(inputs, hits)
    assert np.bincount(owner, weights=pass_s) == pytest.approx(lat, rel=1e-12)
    # part-full passes (``PassFill``): a full chunk of company is the full-pass service
    assert fill.first[:, -1] + fill.rest[:, -1] == pytest.approx(svc, rel=1e-12)
    for k, (length, hit) in enumerate(zip(inputs, hits, strict=True)):
        assert lat[k] == pytest.approx(inst.prefill_latency_s(length, hit), rel=1e-12)
        assert svc[k] == pytest.approx(inst.prefill_service_s(length, hit), rel=1e-12)
        chunks = inst.prefill_chunks(length, hit)
        assert new[k] == pytest.approx(sum(t for t, _ in chunks))
        assert room[k] == pytest.approx(len(chunks) * inst.chunk_tokens - new[k])
    # by hand: 100 tokens, no hit, one pass of 2,048 per group; 5,000.5 at 97%: the floor
    # of 4,850.485 cached, 150.015 new
    assert new[0] == 100 and room[0] == 2048 * inst.layout.cp - 100
    assert new[2] == pytest.approx(5000.5 - 4850)
