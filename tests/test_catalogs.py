"""The shipped catalogs: coverage, sourcing, and the validation that keeps them honest."""

from __future__ import annotations

from pathlib import Path

import pytest

from pddplan.errors import InputError
from pddplan.io.catalogs import load_hardware, load_models
from pddplan.model.params import param_breakdown

REQUIRED_CHIPS = {
    "a100-80g-sxm",
    "h100-sxm",
    "h100-pcie",
    "h800",
    "h20",
    "h200-sxm",
    "b200",
    "gb200",
    "l40s",
    "l20",
    "mi300x",
    "mi325x",
    "ascend-910b",
    "ascend-910c",
}
REQUIRED_MODELS = {
    "deepseek-v3",
    "deepseek-v4-pro",
    "kimi-k2",
    "qwen3-235b-a22b",
    "qwen3-32b",
    "llama-3.1-70b",
    "llama-3.1-8b",
    "glm-4.5",
}


def test_required_chips_and_models_are_shipped(hardware, models):
    assert set(hardware.chips) >= REQUIRED_CHIPS
    assert set(models) >= REQUIRED_MODELS


def test_every_chip_figure_and_efficiency_factor_cites_a_source(hardware):
    numeric = (
        "bf16_tflops",
        "fp8_tflops",
        "hbm_gb",
        "hbm_bandwidth_tb_s",
        "scaleup_bandwidth_gb_s",
        "scaleup_domain_gpus",
        "nic_gbps",
        "host_link_gb_s",
        "tdp_w",
        "purchase_unit_gpus",
        "price_usd_per_hour",
    )
    for chip in hardware.chips.values():
        for key in numeric:
            if getattr(chip, key) is not None:
                assert chip.sources.get(key, "").strip(), f"{chip.id}.{key} has no source"
        if chip.price_usd_per_hour is not None:
            assert chip.price_date, chip.id
    for family, eff in hardware.efficiency_defaults.items():
        for key in ("prefill_mfu", "decode_mfu", "decode_hbm_efficiency", "collective_efficiency"):
            assert eff.sources.get(key, "").strip(), f"{family}.{key} has no source"


def test_ascend_uncertainty_is_stated(hardware):
    assert hardware.chips["ascend-910c"].uncertain
    assert hardware.chips["ascend-910b"].uncertain


def test_datasheet_figures(hardware):
    """Spot checks against datasheets: H100 SXM 989.4 dense BF16 TFLOPS (1,979 sparse / 2),
    3.35 TB/s; H800 NVLink 400 GB/s bidirectional = 200 per direction; H20 148 dense BF16."""
    h100, h800, h20 = (hardware.chips[c] for c in ("h100-sxm", "h800", "h20"))
    assert h100.bf16_tflops == pytest.approx(989.4, rel=1e-3)
    assert h100.hbm_bandwidth_tb_s == pytest.approx(3.35)
    assert h800.scaleup_bandwidth_gb_s == pytest.approx(200)
    assert h20.bf16_tflops == pytest.approx(148, rel=0.01)
    assert hardware.chips["gb200"].scaleup_domain_gpus == 72
    assert hardware.chips["a100-80g-sxm"].fp8_tflops is None


@pytest.mark.parametrize("model_id", [*sorted(REQUIRED_MODELS), "qwen3-30b-a3b", "llama-3.1-405b"])
def test_config_shapes_explain_the_model_card(models, model_id):
    """Shapes from config.json reproduce the model card's active parameters within 5% (the
    stated figures stay authoritative; the breakdown only splits them)."""
    m = models[model_id]
    p = param_breakdown(m)
    shapes_active = p.attention + p.dense_mlp + p.embeddings + p.routed_active
    assert shapes_active / 1e9 == pytest.approx(m.active_params_b, rel=0.05)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "catalog.yaml"
    path.write_text(text)
    return path


def test_a_figure_without_a_source_is_rejected(tmp_path):
    shipped = Path(str(load_hardware.__globals__["_shipped"]("hardware.yaml"))).read_text()
    broken = shipped.replace('      hbm_gb: "', '      hbm_gbX: "', 1)
    with pytest.raises(InputError, match=r"sources is missing a citation for: hbm_gb"):
        load_hardware(_write(tmp_path, broken))


def test_model_catalog_errors_are_located(tmp_path):
    text = (
        "models:\n  bad:\n    hf_id: x\n    source: y\n    attention: gqa\n"
        "    num_hidden_layers: 0\n    hidden_size: 8\n    intermediate_size: 8\n"
        "    num_attention_heads: 2\n    num_key_value_heads: 2\n    head_dim: 4\n"
        "    vocab_size: 10\n    total_params_b: 1\n    active_params_b: 2\n"
        "    weight_dtype: bf16\n    kv_dtype: int3\n    num_layers: 4\n"
    )
    with pytest.raises(InputError) as err:
        load_models(_write(tmp_path, text))
    text = "\n".join(err.value.problems)
    assert (
        ":6: models.bad.num_hidden_layers: input should be greater than or equal to 1, got 0"
        in text
    )
    assert "models.bad.kv_dtype" in text and "'int3'" in text
    assert "unknown key 'num_layers'; did you mean 'num_hidden_layers'?" in text


def test_a_catalog_is_shared_read_only_and_read_again_when_its_file_changes(tmp_path):
    """The catalogs are read once per version of their file and shared by every caller:
    no caller can change the shared copy, and an edited file is read again (its path alone
    would hand back the old one)."""
    import os
    import pickle

    shipped = Path(str(load_models.__globals__["_shipped"]("models.yaml"))).read_text()
    path = _write(tmp_path, shipped)
    first = load_models(path)
    assert load_models(path) is first  # read once
    with pytest.raises(TypeError, match="read-only"):
        first["mine"] = first["llama-3.1-8b"]
    with pytest.raises(TypeError, match="read-only"):
        load_hardware().chips.pop("h100-sxm")
    assert pickle.loads(pickle.dumps(first)) == first
    edited = shipped.replace("total_params_b: 8.03", "total_params_b: 8.5", 1)
    assert edited != shipped
    path.write_text(edited)
    stat = path.stat()  # the same second and size on a coarse clock: the time moved on
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert load_models(path)["llama-3.1-8b"].total_params_b == 8.5
