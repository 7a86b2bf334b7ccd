"""The tiered decode-side cache: its prices and fetch overlap by hand, the planner's sizing
rule against the curve it sizes by, the evaluator's hit at the fleet's capacity, and bad
input located."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import H100_H200, ROOT, SMALL

from pddplan.errors import InputError
from pddplan.evaluation.evaluator import _with_fetch
from pddplan.io.catalogs import load_hardware
from pddplan.io.scenario import load_scenario
from pddplan.model.md_cache import (
    KEPT_SHARES,
    Tiers,
    instance_tiers,
    tier_hits,
    tiers_usd_per_gpu_hour,
)
from pddplan.plan.counts import Requirements
from pddplan.plan.space import Space
from pddplan.spec.fleet import CacheSizes, Fleet, Pool


def test_tier_prices_by_hand():
    # 256 GB DRAM x $0.434 + 3,840 GB SSD x $0.0099 per GB-month, over 730 hours
    hw = load_hardware(None)
    assert tiers_usd_per_gpu_hour(hw, 256, 0) == pytest.approx(256 * 0.434 / 730)
    assert tiers_usd_per_gpu_hour(hw, 256, 3840) == pytest.approx(
        (256 * 0.434 + 3840 * 0.0099) / 730
    )
    assert tiers_usd_per_gpu_hour(hw, 0, 0) == 0.0


def test_instance_tiers_in_tokens_by_hand():
    # 8 GPUs x 256 GB of DRAM at 100 KB a token: 20.48M tokens; HBM's 1 GB: 10,000
    hbm, dram, ssd = instance_tiers(1e9, 8, 256, 0, 1e5)
    assert (hbm, dram, ssd) == pytest.approx((1e4, 2.048e7, 0.0))


def test_the_kv_is_complete_at_the_later_of_suffix_and_fetch():
    # half the hits in HBM (no fetch), half in DRAM (2 s for the first class, 0.5 s for the
    # second): the suffix takes 1 s, so the first class waits 0.5 x 1 + 0.5 x 2 = 1.5 s
    sent = np.array([1.0, 1.0])
    fetch = [(0.5, np.zeros(2)), (0.5, np.array([2.0, 0.5]))]
    assert _with_fetch(sent, fetch) == pytest.approx([1.5, 1.0])


def test_tier_hits_split_the_kept_reuses_by_tier():
    curve = load_scenario(H100_H200).reuse
    rate = 4.0
    need = curve.capacity_for(0.95, rate)
    tiers = Tiers(need / 4, need / 4, need / 2, 50e9, 6.6e9)
    got = tier_hits(curve, tiers, rate)
    assert got.kept >= 0.95
    assert sum(got.shares) == pytest.approx(1.0)
    hbm_alone = curve.hit_share(need / 4, rate)
    assert got.shares[0] == pytest.approx(hbm_alone / got.kept)


def test_planner_sizes_main_decode_to_hold_the_kept_share():
    """For each kept share, the MD count the planner requires is the smallest whose cache
    (HBM plus DRAM) holds ``capacity_for(share)`` at the rate, and a fleet of that many
    keeps at least that share in the evaluator's terms."""
    problem = load_scenario(H100_H200)
    space = Space(problem)
    rate = 12.0
    req = Requirements(space, rate)
    bpt = problem.kv.bytes_per_token
    md = next(o for o in space.options["main_decode"] if o.store == 1)  # 256 GB of DRAM
    per_instance = sum(instance_tiers(md.instance.kv_capacity_bytes(), md.gpus, 256, 0, bpt))
    for st in (s for s in space.states if s.store == 1 and s.received_by(md)):
        kept = st.md.kept
        n = req._n_cache(md, st)
        need = problem.reuse.capacity_for(kept, rate)
        if kept == 0:
            assert n == 1
            continue
        assert n * per_instance >= need * (1 - 1e-9)
        assert n == 1 or (n - 1) * per_instance < need
        tiers = Tiers(n * per_instance, 0.0, 0.0, 1.0, 1.0)
        assert tier_hits(problem.reuse, tiers, rate).kept >= kept
    assert {s.md.kept for s in space.states if s.store == 1} == set(KEPT_SHARES)


def _fleet(dram: float) -> Fleet:
    return Fleet(
        name="t",
        pools=(
            Pool(
                datacenter="cluster-a",
                role="prefill",
                chip="h100-sxm",
                gpus_per_instance=16,
                instances=1,
            ),
            Pool(
                datacenter="cluster-b",
                role="main_decode",
                chip="h200-sxm",
                gpus_per_instance=8,
                instances=1,
            ),
        ),
        links=({"between": ("cluster-a", "cluster-b"), "gbps": 100},),
        md_cache_tiers=CacheSizes(dram_gb_per_gpu=dram),
    )


def test_evaluated_hit_rises_with_the_dram_and_costs_its_price():
    from pddplan.api import evaluate

    problem = load_scenario(H100_H200)
    small, big = evaluate(problem, _fleet(0.0)), evaluate(problem, _fleet(256.0))
    assert big.md_cache["mean_hit"] > small.md_cache["mean_hit"]
    assert big.md_cache["tiers"] == {"dram_gb_per_gpu": 256.0, "ssd_gb_per_gpu": 0.0}
    extra = 8 * 256 * 0.434 / 730  # 8 MD GPUs' DRAM
    assert big.cost_per_hour_usd - small.cost_per_hour_usd == pytest.approx(extra)


def _problems_with_catalog(tmp_path, old: str, new: str) -> list[str]:
    """The load errors of the paper scenario over a copy of the hardware catalog with
    ``old`` replaced by ``new``."""
    catalog = (ROOT / "catalogs" / "hardware.yaml").read_text()
    changed = catalog.replace(old, new, 1)
    assert changed != catalog
    (tmp_path / "hw.yaml").write_text(changed)
    text = H100_H200.read_text().replace("\nsla:", "\ncatalogs: {hardware: hw.yaml}\n\nsla:", 1)
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(InputError) as err:
        load_scenario(tmp_path / "s.yaml")
    return err.value.problems


def test_a_tier_without_a_price_is_located(tmp_path):
    [line] = _problems_with_catalog(tmp_path, "usd_per_gb_month: 0.434", "usd_per_gb_month: null")
    assert "s.yaml:" in line and "md_cache[1].dram_gb_per_gpu: 256 GB of dram per GPU" in line
    assert "cache_tiers.dram.usd_per_gb_month as null" in line


def test_fleet_tiers_against_a_measured_scenario_are_located(tmp_path):
    from pddplan.io.fleet import load_fleet

    problem = load_scenario(SMALL)
    path = tmp_path / "f.yaml"
    path.write_text(
        "name: f\npools:\n  - {datacenter: east, role: prefill, chip: h100-sxm, "
        "gpus_per_instance: 8, instances: 1}\nmd_cache_tiers: {dram_gb_per_gpu: 64}\n"
    )
    with pytest.raises(InputError) as err:
        load_fleet(path, problem)
    assert any("f.yaml:" in p and "md_cache_tiers: scenario" in p for p in err.value.problems)


def test_a_negative_tier_bandwidth_is_located(tmp_path):
    [line] = _problems_with_catalog(tmp_path, "read_gb_s_per_gpu: 6.6", "read_gb_s_per_gpu: -6.6")
    assert "hw.yaml:" in line and "cache_tiers.ssd.read_gb_s_per_gpu: input should be" in line
