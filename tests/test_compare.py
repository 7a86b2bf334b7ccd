"""pddplan compare: the architectures, the paper's cost arithmetic, the price sweep, and
rent/buy pricing."""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import H100_H200, ONE_CLASS, PAPER_FLEETS, ROOT, SMALL, problem_of, run_main, triple

from pddplan.cli.compare import parse_sweep
from pddplan.errors import InputError
from pddplan.io.fleet import load_fleet
from pddplan.io.scenario import load_scenario
from pddplan.model.pricing import HOURS_PER_YEAR, fleet_cost, gpu_price
from pddplan.plan import compare as compare_module
from pddplan.plan.compare import (
    HYPOTHETICAL_DC,
    OBJECTIVE_AT,
    Comparison,
    architectures,
    compare,
    cross_dc_naive,
    verdict,
)
from pddplan.plan.search import solve_plan
from pddplan.sweeps.prices import price_sweep, with_price

H100 = 2.69  # the scenario's H100 rent, USD per GPU-hour


# --- the paper's two fleets and its cost arithmetic --------------------------------------------
@pytest.mark.parametrize(
    ("premium", "with_line", "saving_pct"),
    [(1.2, False, 7.5), (1.3, False, 3.9), (1.2, True, 7.1), (1.3, True, 3.5)],
)
def test_paper_cost_arithmetic(premium, with_line, saving_pct):
    """88 H100 against 43 H100 + 32 H200 (+ the line, priced at a third of an H100): PDD is
    7.5% / 3.9% cheaper without the line at a 20% / 30% H200 premium, 7.1% / 3.5% with it."""
    s, hw, _ = triple(load_scenario(PAPER_FLEETS))
    s = with_price(s, "h200-sxm", H100 * premium)
    # the paper compares GPUs and the line: the decode-side cache's DRAM at no price
    s = s.model_copy(update={"cache_tier_prices_usd_per_gb_month": {"dram": 0.0, "ssd": 0.0}})
    intra = load_fleet(ROOT / "fleets" / "paper-intra-dc-88xh100.yaml", problem_of(s, hw))
    pdd = load_fleet(ROOT / "fleets" / "paper-pdd-43xh100-32xh200.yaml", problem_of(s, hw))
    if not with_line:
        pdd = pdd.model_copy(update={"links": ()})
    intra_cost, pdd_cost = (
        fleet_cost(problem_of(s, hw), intra).total,
        fleet_cost(problem_of(s, hw), pdd).total,
    )
    assert intra_cost == pytest.approx(88 * H100)
    line = H100 / 3 if with_line else 0.0
    assert pdd_cost == pytest.approx(43 * H100 + 32 * H100 * premium + line, abs=1e-3)
    assert round(100 * (1 - pdd_cost / intra_cost), 1) == saving_pct


def test_paper_fleets_cannot_hold_the_weights_and_say_so():
    """8-GPU H100 instances cannot hold DeepSeek-V4-Pro: a plain finding, one line per pool,
    and --cost-only still prices the fleet."""
    fleet = ROOT / "fleets" / "paper-pdd-43xh100-32xh200.yaml"
    r = run_main("evaluate", str(PAPER_FLEETS), "--fleet", str(fleet))
    assert r.exit_code == 2
    assert "pools[0] (prefill): deepseek-v4-pro" in r.output and "does not fit 8 x h100" in r.output
    assert "pools[1] (relay_decode)" in r.output and "--cost-only still prices" in r.output
    assert "Traceback" not in r.output
    r = run_main("evaluate", str(PAPER_FLEETS), "--fleet", str(fleet), "--cost-only", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["total_gpus"] == 75
    dram = 32 * 256 * 0.434 / 730  # the decode-side cache's host DRAM (cache_tiers)
    assert data["cost_per_hour_usd"] == pytest.approx(43 * H100 + 32 * 3.36 + 654.57 / 730 + dram)
    assert data["price_basis"] == {"h100-sxm": "rent", "h200-sxm": "rent"}


# --- rent, buy and owned inventory ---------------------------------------------------------------
def test_buy_basis_and_owned_inventory_by_hand(tmp_path):
    """Bought H200: $36,500 over 5 years is $0.8333/h; 0.7 kW x PUE 1.2 x $0.10 = $0.084/h;
    hosting $0.20/h: $1.1173/h. 16 owned H200 cost only $0.284/h each."""
    text = PAPER_FLEETS.read_text().replace(
        "prices_usd_per_gpu_hour:\n  h100-sxm: 2.69",
        "gpu_purchase:\n  h200-sxm: {capex_usd_per_gpu: 36500, amortization_years: 5}\n"
        "electricity_usd_per_kwh: 0.10\nhosting_usd_per_gpu_hour: 0.20\n"
        "prices_usd_per_gpu_hour:\n  h100-sxm: 2.69",
    )
    text = text.replace("  h200-sxm: 3.36 ", "  # h200 bought ")
    text = text.replace(
        "    roles: [main_decode]\n",
        "    roles: [main_decode]\n    pue: 1.2\n    inventory: {h200-sxm: 16}\n",
    )
    path = tmp_path / "buy.yaml"
    path.write_text(text)
    s, hw, _ = triple(load_scenario(path))
    price = gpu_price(problem_of(s, hw), "h200-sxm", "cluster-b")
    tdp_kw = hw.chips["h200-sxm"].tdp_w / 1000
    running = tdp_kw * 1.2 * 0.10 + 0.20
    assert price.basis == "buy"
    assert price.full == pytest.approx(36500 / (5 * HOURS_PER_YEAR) + running)
    assert price.running == pytest.approx(running)
    fleet = load_fleet(ROOT / "fleets" / "paper-pdd-43xh100-32xh200.yaml", problem_of(s, hw))
    cost = fleet_cost(problem_of(s, hw), fleet)
    assert cost.owned_gpus == [0, 0, 16]
    dram = 32 * 256 * 0.434 / 730  # the 32 MD GPUs' 256 GB of host DRAM each (cache_tiers)
    assert cost.pools[2] == pytest.approx(16 * price.full + 16 * running + dram)
    assert cost.basis == {"h100-sxm": "rent", "h200-sxm": "buy"}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "prices_usd_per_gpu_hour:\n  h100-sxm: 2.69",
            "gpu_purchase: {h100-sxm: {capex_usd_per_gpu: 30000, amortization_years: 4}}\n"
            "prices_usd_per_gpu_hour:\n  h100-sxm: 2.69",
            "give each chip one basis",
        ),
        (
            "    roles: [main_decode]\n",
            "    roles: [main_decode]\n    inventory: {h200-sxm: 8}\n",
            "electricity_usd_per_kwh is needed to price the running cost of owned inventory",
        ),
    ],
)
def test_pricing_errors_are_located(tmp_path, old, new, message):
    path = tmp_path / "s.yaml"
    text = PAPER_FLEETS.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError) as err:
        load_scenario(path)
    assert any(message in p for p in err.value.problems), err.value.problems


# --- the architectures -------------------------------------------------------------------------
def test_intra_dc_rows_live_in_one_real_datacenter_within_its_limits():
    s, _, _ = triple(load_scenario(SMALL))
    rows = architectures(s)
    intra = [r for r in rows if r.kind == "intra-dc-homogeneous"]
    assert {(r.datacenter, r.chip) for r in intra} == {
        (dc_id, chip) for dc_id, dc in s.datacenters.items() for chip in dc.chips
    }
    for r in intra:
        one = r.build()
        assert list(one.datacenters) == [r.datacenter] and one.links == ()
        dc, real = one.datacenters[r.datacenter], s.datacenters[r.datacenter]
        assert dc.chips == (r.chip,) and set(dc.roles) == {"prefill", "main_decode"}
        assert (dc.max_gpus, dc.max_power_kw, dc.pue) == (
            real.max_gpus,
            real.max_power_kw,
            real.pue,
        )
    # a mixed row only where a datacenter allows two chips or more
    mixed = {r.datacenter for r in rows if r.kind == "intra-dc-heterogeneous"}
    assert mixed == {d for d, dc in s.datacenters.items() if len(dc.chips) >= 2}
    hypo = next(r for r in rows if r.kind == "hypothetical").build()
    assert list(hypo.datacenters) == [HYPOTHETICAL_DC]
    assert hypo.datacenters[HYPOTHETICAL_DC].max_gpus == sum(
        d.max_gpus for d in s.datacenters.values()
    )
    naive = cross_dc_naive(s)
    assert all("relay_decode" not in d.roles for d in naive.datacenters.values())
    assert [o.gb_per_gpu for o in naive.md_cache] == [0.0]
    assert naive.md_cache[0].md_prefix_hit.value == 0.0


HEARD: list[tuple[int, int | None, str]] = []
"""What ``small_comparison``'s progress callback heard."""


@pytest.fixture(scope="module")
def small_comparison():
    problem = load_scenario(SMALL)
    return problem, compare(problem, explain=False, progress=lambda *a: HEARD.append(a))


@pytest.mark.slow
def test_progress_counts_the_rows_against_all_of_them(small_comparison):
    """Each row is announced before it is planned, with the rows done and the rows in all
    (both questions), so the command line's time left has a real denominator; the last
    report is every row done."""
    _, c = small_comparison
    total = sum(len(section.rows) for section in c.sections)
    assert [(done, n) for done, n, _ in HEARD] == [(i, total) for i in range(total + 1)]
    rows = [f"{r.label} at equal {section.at}" for section in c.sections for r in section.rows]
    assert [text for _, _, text in HEARD] == [*rows, "done"]


@pytest.mark.slow  # over 5 s on the 2-core machine; CI runs it (pytest -m slow)
def test_compare_respects_every_datacenters_gpu_limit(tmp_path):
    """With west's GPUs capped at 8, no intra-DC row in west may plan more than 8 (the old
    pooled baseline took both datacenters' GPUs), at either question."""
    text = SMALL.read_text()
    assert "max_gpus: 64" in text
    path = tmp_path / "small.yaml"
    path.write_text(text.replace("max_gpus: 64", "max_gpus: 8", 1))
    problem = load_scenario(path)
    capped = {d: dc.max_gpus for d, dc in problem.scenario.datacenters.items()}
    c = compare(problem, explain=False)
    for section in c.sections:
        for row in section.rows:
            if row.datacenter is None or row.plan is None or row.plan.fleet is None:
                continue
            used = sum(p.gpus_per_instance * p.instances for p in row.plan.fleet.pools)
            assert used <= capped[row.datacenter], (section.at, row.label, used)
            assert {p.datacenter for p in row.plan.fleet.pools} == {row.datacenter}


@pytest.mark.slow
@pytest.mark.parametrize("at", ["demand", "budget"])
def test_each_row_is_the_plan_computed_directly(small_comparison, at):
    """A section's rows are the plans ``solve_plan`` makes for the restricted scenario:
    min cost at the demand, max capacity within the budget (the PDD equal-demand cost)."""
    problem, c = small_comparison
    section = c.section(at)
    budget = c.section("demand").get("pdd")[0].cost_per_hour if at == "budget" else None
    assert section.budget_usd_per_hour == budget
    if at == "budget":
        assert section.budget_source == "the PDD equal-demand fleet's cost"
    for row, arch in zip(section.rows, architectures(problem.scenario), strict=True):
        assert row.label == arch.label
        try:
            s = arch.build()
        except InputError:
            assert row.plan is None
            continue
        if budget is not None:
            s = s.model_copy(update={"budget_usd_per_hour": budget})
        direct = solve_plan(problem.with_scenario(s), objective=OBJECTIVE_AT[at], explain=False)
        if direct.evaluation is None:
            assert row.plan is None or row.plan.evaluation is None
            continue
        e = row.plan.evaluation
        assert e.cost_per_hour_usd == pytest.approx(direct.evaluation.cost_per_hour_usd)
        assert e.sla_capacity_rps == pytest.approx(direct.evaluation.sla_capacity_rps)
        if at == "budget" and row.ok:
            assert e.cost_per_hour_usd <= budget * (1 + 1e-9)


@pytest.mark.slow
def test_sections_rank_by_their_own_measure(small_comparison):
    _, c = small_comparison
    demand, budget = c.section("demand"), c.section("budget")
    costs = [r.cost_per_hour for r in demand.ranked]
    assert costs == sorted(costs)
    capacities = [r.capacity_rps for r in budget.ranked]
    assert capacities == sorted(capacities, reverse=True)
    assert all(r.kind != "hypothetical" for r in demand.ranked + budget.ranked)
    # the verdict names the winner and the figure that decides it
    assert demand.ranked[0].label in demand.verdict and "cheapest" in demand.verdict
    assert budget.ranked[0].label in budget.verdict and "req/s" in budget.verdict
    # latency at one common rate: the smallest capacity among the equal-budget fleets
    assert budget.common_rps == pytest.approx(min(capacities))
    for r in budget.ranked:
        assert r.ttft_at_common_s is not None and len(r.ttft_p99_at_shares) == 3
        assert list(r.ttft_p99_at_shares) == sorted(r.ttft_p99_at_shares)  # busier, slower


def _candidate(kind, label, parts, capacity=30.0, limit=None):
    """A stand-in row: its plan's pools (role, chip, GPUs, $/hour) and links ($/hour), with
    the evaluation fields the views read."""
    from types import SimpleNamespace as NS

    pools = [
        NS(
            role=r,
            chip=c,
            gpus=g,
            cost_per_hour_usd=x,
            datacenter="a",
            gpus_per_instance=g,
            instances=1,
        )
        for r, c, g, x in parts["pools"]
    ]
    links = [NS(gbps=g, cost_per_hour_usd=x, between=("a", "b")) for g, x in parts.get("links", [])]
    cost = sum(p.cost_per_hour_usd for p in pools) + sum(x.cost_per_hour_usd for x in links)
    e = NS(
        cost_per_hour_usd=cost, status="ok", sla_capacity_rps=capacity, pools=pools, links=links,
        bcr=capacity / cost if cost else None, ttft_s={"p50": 1.0, "p90": 2.0, "p99": 3.0},
        rld_token_share=0.0, usd_per_million_output_tokens=None, md_cache={"gb_per_gpu": None},
    )  # fmt: skip
    fleet = NS(pools=pools)
    plan = NS(evaluation=e, fleet=fleet, verdict=NS(limit=limit), status="optimal")
    return compare_module.Candidate(kind, label, None, None, plan)


def _section(at, rows):
    return compare_module.Section(at, compare_module.OBJECTIVE_AT[at], 4, 4, None, None, rows,
                                  None, "")  # fmt: skip


def test_the_verdict_names_the_winner_the_margin_and_the_part_that_differs():
    """PDD at $10/hour (prefill $5, main decode $4, link $1) against a baseline at $20/hour
    (prefill $5, main decode $15): PDD is cheapest, 50% less, and main decode is the
    difference ($4 against $15). The hypothetical row, cheaper still, is not the winner."""
    pdd = _candidate("pdd", "PDD", {"pools": [("prefill", "h100", 16, 5.0),
                     ("main_decode", "h200", 8, 4.0)], "links": [(100, 1.0)]})  # fmt: skip
    base = _candidate("intra-dc-homogeneous", "intra-DC h100 in a",
                      {"pools": [("prefill", "h100", 16, 5.0), ("main_decode", "h100", 32, 15.0)]})  # fmt: skip
    hypo = _candidate(
        "hypothetical", "hypothetical one-DC", {"pools": [("prefill", "h100", 8, 2.0)]}
    )
    text = verdict(_section("demand", [base, hypo, pdd]))
    assert text == (
        "At equal demand, PDD is cheapest: $7,300/month, 50% less than intra-DC h100 in a "
        "($14,600/month); the largest difference is main decode: 8 h200 at $4.00/hour "
        "against 32 h100 at $15.00/hour."
    )


def test_the_verdict_calls_a_tie_a_tie():
    parts = {"pools": [("prefill", "h100", 16, 5.0), ("main_decode", "h200", 8, 4.0)]}
    pdd = _candidate("pdd", "PDD", parts, capacity=6.0, limit="the TTFT P90 bound 4 s")
    naive = _candidate("cross-dc-naive", "cross-DC naive", parts, capacity=6.0,
                       limit="the TTFT P90 bound 4 s")  # fmt: skip
    small = _candidate("intra-dc-homogeneous", "intra-DC h200 in b", parts, capacity=3.0,
                       limit="the 90% utilization cap of main_decode h200 in b")  # fmt: skip
    text = verdict(_section("budget", [naive, small, pdd]))
    assert text.startswith(
        "At equal budget, PDD and cross-DC naive tie with the most capacity, 6 req/s (the same "
        "fleet); 100% more than intra-DC h200 in b (3 req/s)"
    )


def test_sections_render_a_free_fleet_and_a_lone_hypothetical_row():
    """A best fleet at $0/hour (owned GPUs, no running cost) has no ratio to compare with;
    a section where only the hypothetical row has a plan ranks nothing. Both render."""
    from pddplan.report import documents, views

    free = _candidate(
        "intra-dc-homogeneous", "intra-DC l40s in a", {"pools": [("prefill", "l40s", 8, 0.0)]}
    )
    paid = _candidate("pdd", "PDD", {"pools": [("prefill", "h100", 8, 10.0)]})
    view = views.section_view(_section("demand", [paid, free]))
    by = {r["label"]: r for r in view["rows"]}
    assert by["intra-DC l40s in a"]["rank"] == 1 and by["PDD"]["vs_best"] is None
    heads, rows = documents.section_rows(view)
    assert rows[1][heads.index("vs best")] == "—"
    hypo = _candidate(
        "hypothetical", "hypothetical one-DC", {"pools": [("prefill", "h100", 8, 2.0)]}
    )
    lone = _section("budget", [hypo])
    view = views.section_view(lone)
    assert view["rows"][0]["rank"] is None and verdict(lone).startswith("No architecture")
    heads, rows = documents.section_rows(view)
    assert rows[0][0] == "ref"


@pytest.mark.slow  # over 5 s on the 2-core machine; CI runs it (pytest -m slow)
def test_compare_json_csv_md():
    """Every row appears; an infeasible one says why while the others print."""
    r = run_main("compare", str(SMALL), "--at", "demand", "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    (section,) = data["sections"]
    assert section["at"] == "demand" and section["objective"] == "min-cost"
    by = {x["label"]: x for x in section["rows"]}
    naive = by["cross-DC naive"]
    assert naive["status"] == "infeasible" and "req/s" in naive["reason"]
    l40s = "intra-DC l40s in west (if west may also run prefill)"
    assert by[l40s]["relaxes"] == "if west may also run prefill" and by["PDD"]["relaxes"] is None
    for label in (l40s, "PDD"):
        x = by[label]
        for key in ("fleet", "total_gpus", "cost_per_hour_usd", "sla_capacity_rps", "rank"):
            assert x[key] is not None, (label, key)
        assert x["sla_capacity_rps"] >= section["demand_rps"]
    assert by["PDD"]["wan_gbps"] > 0 and by[l40s]["wan_gbps"] == 0
    assert by["hypothetical one-DC"]["rank"] is None  # never ranked
    assert section["ranking"][0] in section["verdict"]

    r = run_main("compare", str(SMALL), "--at", "demand", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert [x["label"] for x in rows] == [x["label"] for x in section["rows"]]
    pdd = next(x for x in rows if x["kind"] == "pdd")
    assert float(pdd["cost_per_hour_usd"]) == pytest.approx(by["PDD"]["cost_per_hour_usd"])

    r = run_main("compare", str(SMALL), "--at", "demand", "--format", "md")
    assert "## Comparison" in r.output and "### At equal demand" in r.output
    assert "cross-DC naive: infeasible" in r.output


@pytest.mark.slow  # over 5 s on the 2-core machine; CI runs it (pytest -m slow)
def test_compare_budget_section_names_its_budget():
    r = run_main("compare", str(SMALL), "--at", "budget", "--budget", "40", "--format", "json")
    assert r.exit_code == 0, r.output
    (section,) = json.loads(r.output)["sections"]
    assert section["budget_usd_per_hour"] == 40 and section["budget_source"] == "given"
    r = run_main("compare", str(SMALL), "--at", "budget")
    assert "At equal budget ($36.75/hour, PDD's equal-demand cost)" in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "xml"], "'xml' is not one of 'table', 'json', 'md', 'csv'"),
        (["--price-sweep", "h100-sxm=3:2:0.1"], "needs 0 < LO <= HI and STEP > 0"),
        (["--price-sweep", "h100-sxm=3:4"], "expected CHIP=LO:HI:STEP"),
        (["--price-sweep", "b200=3:4:0.5"], "chip 'b200' is not used anywhere"),
        (["--at", "cost"], "'cost' is not one of 'demand', 'budget', 'both'"),
        (["--budget", "0"], "--budget must be a finite $/hour above 0, got 0"),
        (["--at", "demand", "--budget", "40"], "--budget applies to the equal-budget question"),
    ],
)
def test_compare_bad_input_is_one_line(args, message):
    r = run_main("compare", str(SMALL), *args)
    assert r.exit_code == 2
    assert message in r.output and "Traceback" not in r.output
    assert len([x for x in r.output.splitlines() if x.startswith("Error:")]) == 1


def test_parse_sweep():
    assert parse_sweep("h200-sxm=3:3.5:0.25") == ("h200-sxm", [3.0, 3.25, 3.5])
    assert parse_sweep("h200-sxm=3:3:1") == ("h200-sxm", [3.0])


def test_break_even_is_bisected(monkeypatch):
    """With PDD at $(10 + 10 p)/hour and the cheapest baseline at $25/hour, PDD is cheaper
    below p = 1.5: the search brackets it between the swept 1.0 and 2.0 and bisects to
    within 1/64."""
    problem = load_scenario(SMALL)

    def fake(derived, *_, **__):
        scenario = derived.scenario
        p = scenario.prices_usd_per_gpu_hour["l40s"]
        cost = {"pdd": 10 + 10 * p, "intra-dc-homogeneous": 25.0}
        rows = [
            compare_module.Candidate(kind, kind, None, None, _plan_costing(cost[kind]))
            for kind in cost
        ]
        section = compare_module.Section("demand", "min-cost", 20, 20, None, None, rows, None, "")
        return Comparison(scenario, [section])

    monkeypatch.setattr("pddplan.sweeps.prices.compare", fake)
    sweep = price_sweep(problem, "l40s", [0.0 + 1e-9, 1.0, 2.0, 3.0])
    assert sweep.bracket == (1.0, 2.0)
    assert sweep.break_even == pytest.approx(1.5, abs=1 / 64)
    assert [p.pdd_wins for p in sweep.points] == [True, True, False, False]


def _plan_costing(per_hour: float):
    """A stand-in plan whose evaluation costs ``per_hour`` and meets the SLA."""
    from types import SimpleNamespace

    e = SimpleNamespace(cost_per_hour_usd=per_hour, status="ok", sla_capacity_rps=30.0)
    return SimpleNamespace(evaluation=e, fleet=None, verdict=None, status="optimal")


@pytest.mark.slow  # over 5 s on the 2-core machine; CI runs it (pytest -m slow)
def test_compare_price_sweep_runs_end_to_end():
    r = run_main(
        "compare",
        str(SMALL),
        "--at",
        "demand",
        "--format",
        "json",
        "--price-sweep",
        "l40s=0.8:1.6:0.8",
    )
    assert r.exit_code == 0, r.output
    sweep = json.loads(r.output)["price_sweep"]
    assert [p["price_usd_per_gpu_hour"] for p in sweep["points"]][:2] == [0.8, 1.6]
    assert all(p["pdd_cost_per_hour_usd"] is not None for p in sweep["points"])
    if sweep["break_even_usd_per_gpu_hour"] is not None:
        lo, hi = sweep["bracket"]
        assert lo <= sweep["break_even_usd_per_gpu_hour"] <= hi


def test_egress_is_billed_on_the_demand_traffic(tmp_path):
    """A tier at $3,000/month plus $0.01/GB: the MILP and the evaluator both bill
    3000 / 730 + 0.01 x (20 req/s x mean payload) x 3600 / 1e9 per hour."""
    from pddplan.evaluation.evaluator import evaluate
    from pddplan.plan import milp
    from pddplan.plan.counts import Requirements
    from pddplan.plan.space import Space

    text = SMALL.read_text()
    for old, new in (
        ("{gbps: 10, usd_per_month: 1000}", "{gbps: 10, usd_per_month: 1000, usd_per_gb: 0.02}"),
        ("{gbps: 40, usd_per_month: 3000}", "{gbps: 40, usd_per_month: 3000, usd_per_gb: 0.01}"),
    ):
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / "egress.yaml"
    path.write_text(text)
    s, hw, models = triple(load_scenario(path))
    space = Space(problem_of(s, hw, models))
    out = milp.min_cost(Requirements(space, s.workload.arrival_rps))
    st = out.choice.state
    e = evaluate(problem_of(s, hw, models), space.fleet(out.choice, "plan"))
    assert e.cost_per_hour_usd == pytest.approx(out.cost_per_hour, rel=1e-9)
    per_gb = {10: 0.02, 40: 0.01}[st.gbps]
    monthly = {10: 1000, 40: 3000}[st.gbps]
    mean_payload = float(space.w @ space.payloads[st.cache])
    expected = monthly / 730 + per_gb * 20 * mean_payload * 3600 / 1e9
    assert e.links[0].cost_per_hour_usd == pytest.approx(expected, rel=1e-6)


# --- rows that relax the scenario, and their files --------------------------------------------
def test_a_row_that_relaxes_the_scenario_says_so():
    """pdd-h100-h200's cluster-b may only run main decode and cluster-a only prefill and
    relay decode: their intra-DC rows are relaxations, and their labels say which."""
    s = load_scenario(H100_H200).scenario
    rows = {r.label: r.relaxes for r in compare_module.architectures(s)}
    assert rows["intra-DC h200-sxm in cluster-b (if cluster-b may also run prefill)"] == (
        "if cluster-b may also run prefill"
    )
    assert rows["intra-DC h100-sxm in cluster-a (if cluster-a may also run main decode)"] == (
        "if cluster-a may also run main decode"
    )
    assert rows["PDD"] is None and rows["cross-DC naive"] is None


def test_the_verdict_names_the_relaxation_its_winner_needs(monkeypatch):
    section = compare_module.Section(
        "demand", "min-cost", 1.0, 1.0, None, None,
        [
            compare_module.Candidate("intra-dc-homogeneous", "intra-DC x in b (if b may also run prefill)",
                                     "b", "x", _plan_costing(1.0), relaxes="if b may also run prefill"),
            compare_module.Candidate("pdd", "PDD", None, None, _plan_costing(2.0)),
        ],
        None, "",
    )  # fmt: skip
    monkeypatch.setattr(compare_module, "verdict", lambda section: "At equal demand, it wins.")
    text = compare_module._with_verdict(section).verdict
    assert text == "If b may also run prefill: at equal demand, it wins."


@pytest.mark.slow  # over 1 s: the default run's time (README)
def test_out_fleets_writes_each_row_and_evaluate_reproduces_it(tmp_path):
    """Each row's fleet and the scenario it was planned on: ``evaluate`` on the pair gives
    the row's SLA capacity and cost (to 1e-9)."""
    scenario = ONE_CLASS
    folder = tmp_path / "fleets"
    r = run_main("compare", str(scenario), "--at", "demand", "--format", "json",
                 "--out-fleets", str(folder))  # fmt: skip
    assert r.exit_code == 0, r.output
    rows = [x for x in json.loads(r.stdout)["sections"][0]["rows"] if "fleet" in x]
    fleets = sorted(folder.glob("*.fleet.yaml"))
    assert len(fleets) == len(rows) >= 2
    for row, fleet in zip(rows, fleets, strict=True):
        pair = fleet.with_name(fleet.name.replace(".fleet.yaml", ".scenario.yaml"))
        e = run_main("evaluate", str(pair), "--fleet", str(fleet), "--json")
        assert e.exit_code == 0, e.output
        got = json.loads(e.stdout)
        assert got["sla_capacity_rps"] == pytest.approx(row["sla_capacity_rps"], rel=1e-9)
        assert got["cost_per_hour_usd"] == pytest.approx(row["cost_per_hour_usd"], rel=1e-9)


@pytest.mark.parametrize("kind", ["file", "under-a-file"])
def test_out_fleets_that_cannot_be_written_is_one_line_before_any_planning(tmp_path, kind):
    blocker = tmp_path / "taken"
    blocker.write_text("x")
    target = blocker if kind == "file" else blocker / "sub"
    r = run_main("compare", str(H100_H200),
                 "--out-fleets", str(target))  # fmt: skip
    assert r.exit_code == 2
    errors = [x for x in r.output.splitlines() if x.startswith("Error")]
    assert len(errors) == 1 and "--out-fleets" in errors[0], r.output
    assert "planning" not in r.output
