"""Plans over time, their inputs (issue 53): the ``horizon:`` section and its located errors,
the periods cut from it (hand-computed), how each GPU can be had (the acquisition catalog,
resolved per datacenter), ``solve`` planning it, and ``workload fit --by-hour``."""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import run_main
from hypothesis import given, settings
from hypothesis import strategies as st

import pddplan
from pddplan.errors import InputError
from pddplan.horizon import hour_groups, period_scenario, periods, tranches
from pddplan.io.catalogs import load_acquisition, load_hardware
from pddplan.io.scenario import load_scenario
from pddplan.spec.acquisition import AcquisitionCatalog, ChipAcquisition
from pddplan.workload.trace import fit_by_hour

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "scenarios" / "pdd-h100-h200-horizon.yaml"

BASE = textwrap.dedent("""\
    name: t
    model: llama-3.1-8b
    datacenters:
      a: {chips: [h100-sxm], roles: [prefill, relay_decode], inventory: {h100-sxm: 8}}
      b: {chips: [l40s], roles: [main_decode]}
    links:
      - between: [a, b]
        rtt_ms: 10
        tiers: [{gbps: 10, usd_per_month: 100}]
    workload:
      arrival_rps: 2
      input_tokens: {dist: fixed, value: 1000}
      output_tokens: {dist: fixed, value: 100}
      prefix_hit: {dist: beta, mean: 0.5, concentration: 2}
    sla: {ttft_p90_s: 1, ttft_p99_s: 2, tpot_ms: 50}
    electricity_usd_per_kwh: 0.1
""")
TWO_LEVEL = "[" + ", ".join(["1.0"] * 12 + ["0.5"] * 12) + "]"
"""Hours 0-11 at the peak, 12-23 at half of it."""
HORIZON = textwrap.dedent(f"""\
    horizon:
      months: 6
      monthly_growth: 0.1
      daily_profile: {TWO_LEVEL}
      supply:
        a:
          h100-sxm: {{max_gpus: 64, owned: {{lead_time_months: 2}}}}
""")


def _write(tmp_path: Path, horizon: str = HORIZON, base: str = BASE) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(base + horizon)
    return path


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def _errors(path: Path) -> list[str]:
    """``pddplan validate``'s error lines, after checking it failed cleanly (exit 2)."""
    result = run_main("validate", str(path))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith(f"Error: {path}:") for line in lines), lines
    return lines


# --- periods, by hand ---------------------------------------------------------------------
def test_a_two_level_profile_over_two_quarters_is_four_periods(tmp_path):
    """By hand: months 1-6 in quarters, 10% growth a month, 2 req/s at the peak of month 1.
    Quarter 1 is sized for month 3 (x 1.1^2 = 1.21), quarter 2 for month 6 (x 1.1^5 =
    1.61051). Hours 0-11 (factor 1) and 12-23 (factor 0.5) differ by 50% > 20%: two groups.
    Each group is 12 of 24 hours: 365 h a month, 1,095 h a quarter."""
    problem = load_scenario(_write(tmp_path))
    got = periods(problem.scenario)
    assert [p.name for p in got] == ["q1.g1", "q1.g2", "q2.g1", "q2.g2"]
    assert [p.hours for p in got] == [tuple(range(12)), tuple(range(12, 24))] * 2
    assert [p.rps for p in got] == pytest.approx([2.42, 1.21, 3.22102, 1.61051])
    assert [p.hours_per_month for p in got] == [365.0] * 4
    assert [p.weight_hours for p in got] == [1095.0] * 4
    assert [(p.tranche.first_month, p.tranche.last_month) for p in got] == [
        (1, 3),
        (1, 3),
        (4, 6),
        (4, 6),
    ]
    # the mean over the quarter's months: 2 x (1 + 1.1 + 1.21) / 3 at the peak hours
    assert got[0].mean_rps == pytest.approx(2 * 3.31 / 3)
    assert got[3].mean_rps == pytest.approx(1 * (1.331 + 1.4641 + 1.61051) / 3)
    assert [p.peak_hour for p in got] == [0, 12, 0, 12]
    assert got[1].workload is not None and got[1].workload.arrival_rps == pytest.approx(1.21)
    # a period is the scenario planned alone at its rate, without the horizon
    alone = period_scenario(problem.scenario, got[2])
    assert alone.horizon is None and alone.name == "t/q2.g1"
    assert alone.workload.arrival_rps == pytest.approx(3.22102)
    assert alone.workload.input_tokens == problem.scenario.workload.input_tokens


def test_a_flat_profile_without_growth_is_the_scenario_itself(tmp_path):
    """One tranche, one group, factor 1, no growth: the one period's scenario is the
    scenario without its horizon (what the horizon plan's one-period case must solve)."""
    flat = "horizon:\n  months: 3\n  daily_profile: [" + ", ".join(["1"] * 24) + "]\n"
    flat += "  supply: {a: {h100-sxm: {ways: [on_demand]}}}\n"
    problem = load_scenario(_write(tmp_path, flat))
    (only,) = periods(problem.scenario)
    assert (only.name, only.hours, only.rps, only.weight_hours) == (
        "q1.g1",
        tuple(range(24)),
        2.0,
        2190.0,
    )
    alone = period_scenario(problem.scenario, only)
    without = problem.scenario.model_copy(update={"horizon": None})
    assert alone.model_dump() == {**without.model_dump(), "name": "t/q1.g1"}


def test_hours_are_grouped_from_the_busiest_down_by_the_share():
    """Strictly less than the share of the group's highest joins it; equal loads always
    share a group, even at share 0; the groups come busiest first, each rising."""
    assert hour_groups([1.0, 0.8], 0.2) == ((0,), (1,))  # 0.2 below: not less than 20%
    assert hour_groups([1.0, 0.81], 0.2) == ((0, 1),)
    assert hour_groups([0.5, 1.0, 0.5, 0.25], 0.0) == ((1,), (0, 2), (3,))
    # greedy from the top: 1.0 opens, 0.9 and 0.85 join; 0.7 is 30% below: a new group
    assert hour_groups([0.7, 1.0, 0.85, 0.9, 0.6], 0.2) == ((1, 2, 3), (0, 4))
    assert hour_groups([0.0, 0.0, 1.0], 0.5) == ((2,), (0, 1))  # zero hours: one group
    with pytest.raises(ValueError, match="share"):
        hour_groups([1.0], 1.0)


@settings(max_examples=60, deadline=None)
@given(
    factors=st.lists(st.floats(min_value=0.01, max_value=1.0), min_size=24, max_size=24),
    share=st.floats(min_value=0.0, max_value=0.9),
)
def test_grouping_covers_every_hour_once_within_the_share_and_within_the_bound(factors, share):
    """Any profile: every hour in exactly one group; in each group no hour is below
    (1 - share) x the group's highest (unless equal to it); the groups come busiest first;
    and there are at most 1 + floor(ln(f_min / f_max) / ln(1 - share)) of them."""
    groups = hour_groups(factors, share)
    assert sorted(h for g in groups for h in g) == list(range(24))
    tops = [max(factors[h] for h in g) for g in groups]
    assert tops == sorted(tops, reverse=True)
    for g, top in zip(groups, tops, strict=True):
        assert all(factors[h] == top or factors[h] > top * (1 - share) for h in g)
    if share >= 0.01:  # below it, ln(1 - share) is too near 0 for the bound to mean much
        ratio = min(factors) / max(factors)
        assert len(groups) <= 1 + math.floor(math.log(ratio) / math.log(1 - share) + 1e-9)
    assert hour_groups(factors, share) == groups  # deterministic


def test_hours_of_no_load_are_a_period_of_no_demand(tmp_path):
    """Hours at factor 0 form one period with rps 0 and no workload: nothing to serve."""
    zeros = "horizon:\n  months: 3\n  daily_profile: " + _profile([1.0] * 12 + [0.0] * 12)
    zeros += "\n  supply: {a: {h100-sxm: {ways: [on_demand]}}}\n"
    problem = load_scenario(_write(tmp_path, zeros))
    busy, idle = periods(problem.scenario)
    assert (busy.rps, idle.rps, idle.hours, idle.workload) == (2.0, 0.0, tuple(range(12, 24)), None)
    with pytest.raises(ValueError, match="no demand"):
        period_scenario(problem.scenario, idle)


def test_overlays_split_the_hours_they_apply_to(tmp_path):
    """An overlay on the night hours 20-23 from month 4: quarter 1 is as without it; in
    quarter 2 hours 20-23 (factor 0.5) are a period of their own with the overlay's hit
    rate, and hours 12-19 keep the base workload."""
    overlay = HORIZON + textwrap.indent(
        textwrap.dedent("""\
            overlays:
              - name: night-batch
                from_month: 4
                hours: [20, 21, 22, 23]
                prefix_hit: {dist: fixed, value: 0.1}
        """),
        "  ",
    )
    problem = load_scenario(_write(tmp_path, overlay))
    got = periods(problem.scenario)
    assert [p.name for p in got] == ["q1.g1", "q1.g2", "q2.g1", "q2.g2", "q2.g3"]
    assert [p.hours for p in got[2:]] == [tuple(range(12)), tuple(range(12, 20)), (20, 21, 22, 23)]
    assert got[4].overlays == ("night-batch",) and got[3].overlays == ()
    assert got[4].workload is not None
    assert got[4].workload.prefix_hit is not None and got[4].workload.prefix_hit.value == 0.1
    assert got[4].weight_hours == pytest.approx(4 * 730 / 24 * 3)


def test_the_shipped_example_groups_into_forty_periods():
    """The bound issue 53 sets (at most ~40 periods for a 2-DC, 24-hour profile over 8
    quarters): 5 hour groups a quarter at group_share 0.2, which is
    1 + floor(ln(0.35) / ln(0.8)) = 5 for its lowest factor 0.35."""
    problem = load_scenario(EXAMPLE)
    h = problem.scenario.horizon
    assert h is not None and len(problem.scenario.datacenters) == 2
    got = periods(problem.scenario)
    assert len(tranches(h)) == 8 and len(got) == 40
    bound = 1 + math.floor(math.log(min(h.daily_profile)) / math.log(1 - h.group_share))
    assert len(got) <= 8 * bound == 40
    first = [p for p in got if p.tranche.index == 0]
    assert [p.hours for p in first] == [
        (9, 10, 11, 12, 13, 14, 15, 16, 17),
        (8, 18, 19, 20, 21, 22),
        (0, 7, 23),
        (1, 2, 5, 6),
        (3, 4),
    ]
    assert sum(len(p.hours) for p in first) == 24
    # the last quarter's busiest period: 4 req/s x 1.05^23 (month 24)
    assert got[35].rps == pytest.approx(4 * 1.05**23)
    assert periods(problem.scenario) == got  # deterministic


# --- how each GPU can be had ------------------------------------------------------------------
def test_the_example_prices_each_way_by_hand():
    """h100-sxm in cluster-a: $33,750 over 72 months of 730 h = $0.64212/h, + $0.342
    hosting + 0.7 kW x PUE 1.58 x $0.09 = $0.099540 power: $1.08366 an owned GPU-hour;
    reserved $1.94 (12 months) and $1.48 (36); on demand the scenario's $2.69."""
    inputs = pddplan.horizon_inputs(pddplan.load_scenario(EXAMPLE))
    h100 = inputs.options_for("cluster-a", "h100-sxm")
    assert h100.owned is not None
    assert h100.owned.power_usd_per_gpu_hour == pytest.approx(0.7 * 1.58 * 0.09)
    assert h100.owned.usd_per_gpu_hour == pytest.approx(33750 / (72 * 730) + 0.342 + 0.09954)
    assert [(r.term_months, r.usd_per_gpu_hour, r.min_gpus) for r in h100.reserved] == [
        (12, 1.94, 8),
        (36, 1.48, 8),
    ]
    assert h100.on_demand is not None and h100.on_demand.usd_per_gpu_hour == 2.69
    assert (
        h100.sources["on_demand.usd_per_gpu_hour"] == "scenario: prices_usd_per_gpu_hour.h100-sxm"
    )
    assert h100.sources["owned.capex_usd_per_gpu"].startswith("catalog: ")
    assert (h100.max_gpus, h100.sunk_gpus, h100.ways) == (
        512,
        0,
        ("owned", "reserved", "on_demand"),
    )
    assert [(o.datacenter, o.chip) for o in inputs.options] == [
        ("cluster-a", "h100-sxm"),
        ("cluster-a", "b200"),
        ("cluster-b", "h200-sxm"),
        ("cluster-b", "mi300x"),
    ]
    assert len(inputs.monthly_peaks) == 24 and inputs.monthly_peaks[0] == 4.0
    # ordered at the start, an H100 (9 months' lead) serves from month 10: quarter 4 (months
    # 10-12) is the first a purchase serves, ordered in month 1
    first = h100.owned.first_tranche(inputs.tranches)
    assert h100.owned.serves_from_month == 10 and first is not None
    assert (first.index, first.first_month, h100.owned.order_month(first)) == (3, 10, 1)
    assert inputs.tranches[0].hours == 3 * 730
    assert len(inputs.in_tranche(inputs.tranches[7])) == 5


def test_supply_overrides_the_catalog_per_datacenter(tmp_path):
    """The scenario's lead time replaces the catalog's; l40s has no catalog entry, so it
    can only be rented (the hardware catalog's $0.79); the 8 owned H100s are sunk, costing
    power (0.7 kW x 1 x $0.1) and the scenario's hosting (0, as solve charges them), while a
    bought one pays the catalog's $0.342 hosting."""
    problem = pddplan.load_scenario(_write(tmp_path))
    inputs = pddplan.horizon_inputs(problem)
    h100 = inputs.options_for("a", "h100-sxm")
    assert h100.owned is not None and h100.owned.lead_time_months == 2
    assert (
        h100.sources["owned.lead_time_months"]
        == "scenario: horizon.supply.a.h100-sxm.owned.lead_time_months"
    )
    assert (h100.sunk_gpus, h100.max_gpus) == (8, 64)
    assert h100.sunk_usd_per_gpu_hour == pytest.approx(0.07)
    assert h100.owned.hosting_usd_per_gpu_hour == 0.342
    l40s = inputs.options_for("b", "l40s")
    assert (l40s.ways, l40s.on_demand) == (("on_demand",), pddplan.horizon.OnDemandOption(0.79))


def test_every_catalog_figure_has_a_source():
    """The shipped catalog loads (its validator refuses an unsourced figure), and an entry
    whose figure has no citation is refused, naming it."""
    catalog = load_acquisition()
    assert {"h100-sxm", "h200-sxm", "b200", "mi300x"} <= set(catalog.chips)
    hardware = load_hardware()
    for chip, entry in catalog.chips.items():
        assert chip in hardware.chips
        assert all(text.strip() for text in entry.sources.values())
    entry = catalog.chips["h100-sxm"].model_dump()
    del entry["sources"]["owned.lead_time_months"]
    with pytest.raises(
        ValueError, match=re.escape("missing a citation for: owned.lead_time_months")
    ):
        ChipAcquisition.model_validate(entry)
    with pytest.raises(ValueError, match="increasing term_months"):
        AcquisitionCatalog.model_validate(
            {"chips": {"x": {"id": "x", "reserved": [{"term_months": 36, "usd_per_gpu_hour": 1},
                                                      {"term_months": 12, "usd_per_gpu_hour": 2}],
                             "sources": {}}}}
        )  # fmt: skip


# --- bad input: one located line each, exit 2 -------------------------------------------------
def _profile(values: list[float]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"


@pytest.mark.parametrize(
    ("horizon", "key", "message"),
    [
        (
            f"horizon:\n  daily_profile: {_profile([1.0] * 23)}\n",
            "daily_profile",
            "horizon.daily_profile: 24 factors, one per hour (hours 0-23), got 23",
        ),
        (
            f"horizon:\n  daily_profile: {_profile([1.0] * 23 + [-0.5])}\n",
            "daily_profile",
            "horizon.daily_profile[23]: input should be greater than or equal to 0, got -0.5",
        ),
        (
            f"horizon:\n  daily_profile: {_profile([1.0] * 23 + ['.nan'])}\n",  # type: ignore[list-item]
            "daily_profile",
            "horizon.daily_profile[23]: input should be a finite number, got nan",
        ),
        (
            f"horizon:\n  daily_profile: {_profile([120.0] * 12 + [60.0] * 12)}\n",
            "daily_profile",
            "horizon.daily_profile: the largest factor is 120 (hour 0); factors are relative "
            "to the peak hour, whose rate is workload.arrival_rps: the largest must be 1 "
            "(divide each by 120)",
        ),
        (
            f"horizon:\n  daily_profile: {TWO_LEVEL}\n  weekly_profile: [1, 1, 1, 1, 0.5]\n",
            "weekly_profile",
            "horizon.weekly_profile: 7 factors, one per day (days 0-6), got 5",
        ),
        (
            f"horizon:\n  months: 120\n  monthly_growth: 5\n  daily_profile: {TWO_LEVEL}\n",
            "monthly_growth",
            "horizon.monthly_growth: the demand grows to 7.96e+92 req/s by month 120 (2 req/s x "
            "(1 + 5)^119): past the ceiling of 1,000,000 req/s (docs/scenarios.md#input-limits); "
            "a growth rate is a share per month (0.05 for 5%)",
        ),
        (
            f"horizon:\n  monthly_growth: 1e300\n  daily_profile: {TWO_LEVEL}\n",
            "monthly_growth",
            "horizon.monthly_growth: the demand grows to no finite number by month 24",
        ),
        (
            f"horizon:\n  months: 9\n  daily_profile: {TWO_LEVEL}\n",
            "months",
            "horizon.months: h100-sxm in a: a lead time of 9 months (acquisition catalog) is as "
            "long as the 9-month horizon or longer: a GPU ordered in month 1 serves from month "
            "10; lengthen the horizon, or set horizon.supply.a.h100-sxm.ways without owned",
        ),
        (
            f"horizon:\n  daily_profile: {TWO_LEVEL}\n  supply:\n    a:\n"
            "      h100-sxm: {owned: {lead_time_months: 30}}\n",
            "lead_time_months",
            "horizon.supply.a.h100-sxm.owned.lead_time_months: h100-sxm in a: a lead time of 30 "
            "months is as long as the 24-month horizon or longer",
        ),
        (
            f"horizon:\n  daily_profile: {TWO_LEVEL}\n  supply:\n    a:\n"
            "      h100-sxm: {max_gpus: 4}\n",
            "max_gpus",
            "horizon.supply.a.h100-sxm.max_gpus: inventory of 4 GPUs is below the 8 h100-sxm a "
            "already owns (datacenters.a.inventory): the most it can hold counts the GPUs it has",
        ),
        (
            f"horizon:\n  daily_profile: {TWO_LEVEL}\n  supply:\n    b:\n      l40s:\n"
            "        max_gpus: 16\n        reserved:\n"
            "          - {term_months: 12, usd_per_gpu_hour: 0.5, min_gpus: 32}\n",
            "min_gpus",
            "horizon.supply.b.l40s.reserved[0].min_gpus: l40s in b: the 12-month reservation's "
            "minimum of 32 GPUs is above the inventory of 16",
        ),
        (
            f"horizon:\n  daily_profile: {TWO_LEVEL}\n  supply:\n    c: {{}}\n",
            "c:",
            "horizon.supply.c: no datacenter 'c' (datacenters: a, b)",
        ),
        (
            f"horizon:\n  daily_profile: {TWO_LEVEL}\n  overlays:\n"
            "    - {name: late, from_month: 30, prefix_hit: {dist: fixed, value: 0.2}}\n",
            "from_month",
            "horizon.overlays[0].from_month: month 30 is past the horizon's 24 months",
        ),
        (
            f"horizon:\n  daily_profile: {TWO_LEVEL}\n  overlays:\n"
            "    - {name: fast, arrival_rps: 9, prefix_hit: {dist: fixed, value: 0.2}}\n",
            "name: fast",
            "horizon.overlays[0]: an overlay gives no arrival_rps",
        ),
        (
            f"horizon:\n  daily_profile: {TWO_LEVEL}\n  overlays:\n"
            "    - {name: one, from_month: 1, to_month: 2, prefix_hit: {dist: fixed, value: 0.2}}\n",
            "name: one",
            "horizon.overlays[0]: months 1-2 hold no tranche's last month (3, 6, 9, 12, 15, "
            "18, 21, 24), the month each period is sized for: it would change no period",
        ),
    ],
    ids=[
        "23-hours", "negative", "nan", "not-relative", "week", "growth", "growth-inf",
        "lead-catalog", "lead-scenario", "below-owned", "reserved-min",
        "unknown-dc", "overlay-late", "overlay-rate", "overlay-unsized",
    ],
)  # fmt: skip
def test_bad_horizons_are_one_located_line_each(tmp_path, horizon, key, message):
    """The refusals the issue names, each at its own key's line, exit 2."""
    path = _write(tmp_path, horizon)
    (line,) = _errors(path)
    where = _line(path, key) if key != "months" or "months:" in horizon else _line(path, "horizon:")
    assert line.startswith(f"Error: {path}:{where}: {message}"), line


def test_a_catalog_reservation_above_the_inventory_is_named_at_the_inventory(tmp_path):
    """h100-sxm's catalog reservations hold at least 8 GPUs: an inventory of 4 (none owned
    here) cannot take one, said at the inventory the scenario gives."""
    base = BASE.replace(", inventory: {h100-sxm: 8}", "")
    horizon = f"horizon:\n  daily_profile: {TWO_LEVEL}\n  supply:\n    a:\n      h100-sxm: {{max_gpus: 4}}\n"
    path = _write(tmp_path, horizon, base)
    assert _errors(path) == [
        f"Error: {path}:{_line(path, 'max_gpus')}: horizon.supply.a.h100-sxm.max_gpus: h100-sxm in "
        "a: the inventory of 4 GPUs is below the acquisition catalog's reservation minimums (8 "
        "GPUs for 12 months, 8 GPUs for 36 months): give reserved terms of your own here, or "
        "ways without reserved"
    ]


def test_a_horizon_with_workload_variants_is_refused(tmp_path):
    variants = "workload_variants:\n  - {name: m1, must_meet: true, arrival_rps: 3}\n"
    path = _write(tmp_path, variants + HORIZON)
    (line,) = _errors(path)
    assert line == (
        f"Error: {path}:{_line(path, 'workload_variants')}: workload_variants: a scenario with a "
        "horizon gives its other workloads as horizon.overlays (by months and hours), not as "
        "workload_variants"
    )


def test_a_scenario_without_a_horizon_reads_and_writes_as_before():
    """No ``horizon`` key in the JSON of a scenario without one (plans, goldens, journals)."""
    problem = load_scenario(ROOT / "scenarios" / "pdd-h100-h200.yaml")
    assert problem.scenario.horizon is None
    assert "horizon" not in problem.scenario.model_dump(mode="json")
    assert "horizon" not in json.loads(problem.scenario.model_dump_json())
    assert "horizon" in pddplan.scenario_schema()["properties"]


# --- solve plans it ------------------------------------------------------------------------
@pytest.mark.slow
def test_solve_plans_the_horizon_and_beats_both_policies(horizon_solved):
    """``solve`` on the shipped example (the session's, ``conftest.horizon_solved``): exit
    0, a schedule at least as cheap as renting everything and as owning for the peak (both
    are restrictions of its MILP), every period with demand running a deployment whose SLA
    capacity covers it."""
    result = horizon_solved.run
    assert result.exit_code == 0, result.output
    assert "over 24 months" in result.stdout and "Against rent everything" in result.stdout
    view = json.loads(horizon_solved.plan.read_text())
    assert view["kind"] == "horizon" and view["status"] == "optimal"
    assert len(view["periods"]) == 40 and len(view["monthly_usd"]) == 24
    assert sum(view["monthly_usd"]) == pytest.approx(view["total_usd"], rel=1e-9)
    for p in view["policies"]:
        assert p["total_usd"] is None or p["total_usd"] >= view["total_usd"] * (1 - 1e-9)
    for p in view["periods"]:
        assert p["sla_capacity_rps"] >= p["rps"] * (1 - 1e-5)
    with pytest.raises(InputError, match="planned over its periods"):
        pddplan.solve(pddplan.load_scenario(EXAMPLE))
    with pytest.raises(pddplan.ArgumentError, match="has no horizon"):
        pddplan.horizon_inputs(pddplan.load_scenario(ROOT / "scenarios" / "pdd-h100-h200.yaml"))


@pytest.mark.slow
def test_one_period_is_the_plan_solve_gives(tmp_path):
    """The single-rate plan is the one-period case: the README's scenario with a horizon of
    one quarter, a flat day, no growth and GPUs only rented runs ``solve``'s deployment, at
    ``solve``'s cost times the quarter's hours (and the link's lease)."""
    readme = ROOT / "scenarios" / "pdd-h100-h200.yaml"
    data = yaml.safe_load(readme.read_text())
    data["horizon"] = {
        "months": 3,
        "tranche": "quarter",
        "daily_profile": [1.0] * 24,
        "supply": {
            dc: {chip: {"ways": ["on_demand"]} for chip in spec["chips"]}
            for dc, spec in data["datacenters"].items()
        },
    }
    path = tmp_path / "one-period.yaml"
    path.write_text(yaml.safe_dump(data))
    problem = pddplan.load_scenario(path)
    plan = pddplan.solve(pddplan.load_scenario(readme), top=0)
    got = pddplan.solve_horizon(problem)
    (period,) = got.periods
    assert period.deployment is not None
    assert period.deployment.fleet.pools == plan.fleet.pools
    assert period.deployment.fleet.links == plan.fleet.links
    (lease,) = got.leases  # the one tranche's: its tier for its 3 months
    assert lease.gbps == plan.fleet.links[0].gbps
    e = plan.evaluation
    gpus_usd_per_hour = e.cost_per_hour_usd - sum(lk.cost_per_hour_usd for lk in e.links)
    assert got.total_usd == pytest.approx(
        gpus_usd_per_hour * 3 * 730 + 3 * lease.usd_per_month, rel=1e-9
    )


# --- workload fit --by-hour -------------------------------------------------------------------
def _two_day_trace(path: Path) -> Path:
    """Two days from t = 0: in hour h of each day, h + 1 requests evenly spaced from the
    hour's start. The last request is day 2's hour 23 at 86,400 + 82,800 + 23 x 150 =
    172,650 s, so hour 23 is seen for 3,600 + 3,450 = 7,050 s, every other hour 7,200 s."""
    lines = []
    for day in range(2):
        for hour in range(24):
            n = hour + 1
            for i in range(n):
                t_ms = round((day * 86400 + hour * 3600 + i * 3600 / n) * 1000)
                lines.append(
                    json.dumps(
                        {"timestamp": t_ms, "input_length": 10, "output_length": 5, "hash_ids": [1]}
                    )
                )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_by_hour_fits_the_rate_of_each_hour_of_the_day(tmp_path):
    """By hand: hour h has 2(h + 1) requests over 7,200 s, hour 23 48 over 7,050 s, the
    peak (48 / 7,050 = 0.0068085 req/s against hour 22's 46 / 7,200 = 0.0063889)."""
    profile = fit_by_hour(_two_day_trace(tmp_path / "t.jsonl"))
    want = [2 * (h + 1) / 7200 for h in range(23)] + [48 / 7050]
    assert profile.rps == pytest.approx(want)
    assert profile.seconds == pytest.approx([7200.0] * 23 + [7050.0])
    assert profile.peak_hour == 23 and profile.peak_rps == pytest.approx(48 / 7050)
    assert profile.factors[23] == 1.0
    assert profile.factors[0] == pytest.approx((2 / 7200) / (48 / 7050))
    assert profile.requests == 2 * sum(range(1, 25)) == 600
    assert profile.mean_rps == pytest.approx(600 / 172650)


def test_by_hour_writes_a_horizon_block_a_scenario_takes(tmp_path):
    trace = _two_day_trace(tmp_path / "t.jsonl")
    out = tmp_path / "profile.yaml"
    result = run_main("workload", "fit", str(trace), "--by-hour", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "by hour of the day" in result.stdout and f"wrote {out}" in result.stderr
    block = yaml.safe_load(out.read_text())
    factors = block["horizon"]["daily_profile"]
    assert len(factors) == 24 and max(factors) == 1.0 and factors[23] == 1.0
    assert factors[0] == round((2 / 7200) / (48 / 7050), 3)
    # pasted into a scenario, it validates
    path = _write(
        tmp_path, "horizon:\n  months: 12\n  daily_profile: " + json.dumps(factors) + "\n"
    )
    assert run_main("validate", str(path)).exit_code == 0
    as_json = json.loads(run_main("workload", "fit", str(trace), "--by-hour", "--json").stdout)
    assert as_json["peak_hour"] == 23 and as_json["daily_profile"][23] == 1.0
    assert as_json["hours"][0] == {"hour": 0, "requests": 2, "seconds": 7200.0,
                                   "rps": 2 / 7200, "factor": pytest.approx(factors[0], abs=5e-4)}  # fmt: skip


def test_by_hour_refuses_a_trace_shorter_than_a_day(tmp_path):
    """The sample trace (240 s), and a trace one second short of a day, in one line."""
    sample = pddplan.sample_trace()
    result = run_main("workload", "fit", str(sample), "--by-hour")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"Error: {sample}: the trace spans 4.0 minutes, less than a day: an arrival rate by hour "
        "of the day needs at least 24 h of requests, so that every hour is seen (731 requests)"
    )
    short = tmp_path / "short.jsonl"
    rows = [
        {"timestamp": t, "input_length": 10, "output_length": 5, "hash_ids": [1]}
        for t in (0, 86_399_000)
    ]
    short.write_text("\n".join(map(json.dumps, rows)) + "\n")
    with pytest.raises(InputError, match=re.escape("spans 24.0 hours, less than a day")):
        fit_by_hour(short)
    rows[-1]["timestamp"] = 86_400_000  # a day exactly: accepted
    short.write_text("\n".join(map(json.dumps, rows)) + "\n")
    assert fit_by_hour(short).duration_s == 86400.0
    refused = run_main("workload", "fit", str(short), "--by-hour", "--window", "1d")
    assert refused.exit_code == 2 and "--by-hour: not with --window" in refused.stderr
    refused = run_main("workload", "fit", str(short), "--by-hour", "--cache-tokens", "1000")
    assert refused.exit_code == 2 and "--by-hour: not with --cache-tokens" in refused.stderr


def test_validate_and_the_catalog_listing_show_the_horizon():
    shown = run_main("validate", str(EXAMPLE))
    assert shown.exit_code == 0, shown.output
    assert "24 months in quarters; growth +5.0% a month" in " ".join(shown.stdout.split())
    listing = run_main("catalog", "acquisition", "--json")
    assert listing.exit_code == 0, listing.output
    rows = {row["chip"]: row for row in json.loads(listing.stdout)}
    h100 = rows["h100-sxm"]
    assert h100["owned"]["capex_usd_per_gpu"] == 33750
    assert h100["owned_usd_per_gpu_hour_before_power"] == pytest.approx(33750 / (72 * 730) + 0.342)
    assert h100["on_demand_usd_per_gpu_hour"] == 2.69
    paths = [f"owned.{k}" for k in h100["owned"]] + [
        f"reserved[{i}].{k}" for i, r in enumerate(h100["reserved"]) for k in r
    ]
    assert all(h100["sources"][k] for k in [*paths, "on_demand_usd_per_gpu_hour"])
    assert rows["l40s"]["owned"] is None and rows["l40s"]["reserved"] == []
