"""KV bytes per token, by hand, for every shipped model (issue #2)."""

from __future__ import annotations

import pytest

from pddplan.model.kv import KvModel

# (model, bf16 bytes/token, fp8 bytes/token), each worked out from the config values.
KV_BYTES_PER_TOKEN = [
    ("llama-3.1-8b", 2 * 32 * 8 * 128 * 2, 2 * 32 * 8 * 128),  # 131,072 / 65,536
    ("llama-3.1-70b", 327_680, 163_840),  # 2 x 80 x 8 x 128 x 2
    ("llama-3.1-405b", 2 * 126 * 8 * 128 * 2, 2 * 126 * 8 * 128),  # 516,096 / 258,048
    ("qwen3-32b", 2 * 64 * 8 * 128 * 2, 2 * 64 * 8 * 128),  # 262,144 / 131,072
    ("qwen3-235b-a22b", 2 * 94 * 4 * 128 * 2, 2 * 94 * 4 * 128),  # 192,512 / 96,256
    ("qwen3-30b-a3b", 2 * 48 * 4 * 128 * 2, 2 * 48 * 4 * 128),  # 98,304 / 49,152
    ("qwen2.5-72b", 2 * 80 * 8 * 128 * 2, 2 * 80 * 8 * 128),  # 327,680 / 163,840
    ("glm-4.5", 2 * 92 * 8 * 128 * 2, 2 * 92 * 8 * 128),  # 376,832 / 188,416
    ("deepseek-v3", 61 * (512 + 64) * 2, 61 * (512 + 64)),  # MLA: 70,272 / 35,136
    ("kimi-k2", 61 * (512 + 64) * 2, 61 * (512 + 64)),  # MLA: 70,272 / 35,136
    # DSA: the FlashMLA entry (bf16 1152 B, fp8 656 B) plus one indexer key per layer
    # (128 dims: bf16 256 B, fp8 128 B + a 4 B fp32 scale).
    ("deepseek-v3.2", 61 * (1152 + 256), 61 * (656 + 132)),  # 85,888 / 48,068
    # Compressed: 30 CSA layers (1 entry + 1 indexer key per 4 tokens), 31 HCA layers
    # (1 entry per 128 tokens); entries 1024 B bf16 / 584 B fp8.
    (
        "deepseek-v4-pro",
        30 * (1024 + 256) / 4 + 31 * 1024 / 128,
        30 * (584 + 132) / 4 + 31 * 584 / 128,
    ),
]


@pytest.mark.parametrize(("model_id", "bf16", "fp8"), KV_BYTES_PER_TOKEN)
def test_kv_bytes_per_token(models, model_id, bf16, fp8):
    m = models[model_id]
    assert KvModel(m, "bf16").bytes_per_token == pytest.approx(bf16)
    assert KvModel(m, "fp8").bytes_per_token == pytest.approx(fp8)


def test_every_shipped_model_is_pinned(models):
    assert {m for m, _, _ in KV_BYTES_PER_TOKEN} == set(models)


def test_deepseek_v4_window_and_amortized_bytes_match_the_design_brief(models):
    """DESIGN.md: ~5.5 KB per token amortized plus ~4.6 MB of window per request (FP8);
    61 layers x 128 window tokens x 584 B = 4,559,872 B."""
    kv = KvModel(models["deepseek-v4-pro"], "fp8")
    assert kv.fixed_bytes == 61 * 128 * 584 == 4_559_872
    assert kv.bytes_per_token == pytest.approx(5511.4375)


def test_dense_models_have_no_fixed_state(models):
    assert KvModel(models["llama-3.1-70b"], "bf16").fixed_bytes == 0


def test_transfer_carries_only_what_the_destination_lacks_plus_fixed_state(models):
    """64K context, destination holds 90%: 6,553.6 tokens x 5,511.4375 B + 4,559,872 B."""
    kv = KvModel(models["deepseek-v4-pro"], "fp8")
    assert kv.transfer_bytes(65_536, dest_hit_rate=0.9) == pytest.approx(
        4_559_872 + 65_536 * 0.1 * 5511.4375
    )
    assert kv.transfer_bytes(65_536, dest_hit_rate=1.0) == kv.fixed_bytes


def test_design_brief_kv_example_80_requests_at_64k(models):
    """DESIGN.md: 80 concurrent 64K requests of DeepSeek-V4-Pro hold ~23 GB of KV (FP8).

    The brief's figure matches the attention entries alone: 80 x (64,000 x 4,521.4 B +
    4,559,872 B) = 23.5 GB, where 4,521.4 = 30 x 584 / 4 + 31 x 584 / 128. We also count the
    CSA layers' indexer keys (30 x 132 / 4 = 990 B per token), which gives 28.6 GB."""
    kv = KvModel(models["deepseek-v4-pro"], "fp8")
    entries_only = 30 * 584 / 4 + 31 * 584 / 128
    assert 80 * (64_000 * entries_only + kv.fixed_bytes) / 1e9 == pytest.approx(23.51, abs=0.01)
    assert 80 * kv.resident_bytes(64_000) / 1e9 == pytest.approx(28.58, abs=0.01)


def test_sparse_decode_reads_the_selection_not_the_whole_context(models):
    """DSA reads index_topk entries per layer plus every indexer key: at 100K tokens that is
    61 x (2048 x 656 + 100,000 x 132) B, far below the 61 x 788 x 100,000 B it stores."""
    kv = KvModel(models["deepseek-v3.2"], "fp8")
    assert kv.decode_read_bytes(100_000) == pytest.approx(61 * (2048 * 656 + 100_000 * 132))
    assert kv.decode_read_bytes(100_000) < 0.25 * kv.resident_bytes(100_000)


def test_dense_decode_reads_every_entry(models):
    kv = KvModel(models["llama-3.1-70b"], "bf16")
    assert kv.decode_read_bytes(4096) == kv.resident_bytes(4096) == 327_680 * 4096


def test_compressed_decode_reads_window_topk_and_hca(models):
    """V4 at 64K context, FP8: CSA layers read 128 window + 1024 selected entries and score
    16,384 indexer keys; HCA layers read 128 window + 512 compressed entries."""
    kv = KvModel(models["deepseek-v4-pro"], "fp8")
    csa = (128 + 1024) * 584 + 16_384 * 132
    hca = (128 + 512) * 584
    assert kv.decode_read_bytes(65_536) == pytest.approx(30 * csa + 31 * hca)


def test_override_wins(models):
    m = models["llama-3.1-8b"].model_copy(update={"kv_bytes_per_token_override": {"fp8": 1000.0}})
    assert KvModel(m, "fp8").bytes_per_token == 1000.0
    assert KvModel(m, "bf16").bytes_per_token == 131_072
