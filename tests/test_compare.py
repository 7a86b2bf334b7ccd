"""pddplan compare: the architectures, the paper's cost arithmetic, the price sweep, and
rent/buy pricing."""

from __future__ import annotations

import csv
import io
import json

import pytest
from conftest import ROOT, problem_of, run_main, triple
from typer.testing import CliRunner

from pddplan.cli.app import app
from pddplan.errors import InputError
from pddplan.io.fleet import load_fleet
from pddplan.io.scenario import load_scenario
from pddplan.model.pricing import HOURS_PER_YEAR, fleet_cost, gpu_price
from pddplan.plan import compare as compare_module
from pddplan.plan.compare import (
    INTRA_DC,
    Comparison,
    cross_dc_naive,
    intra_dc,
    parse_sweep,
    price_sweep,
    with_price,
)

runner = CliRunner()
SMALL = ROOT / "scenarios" / "small-llama-8b.yaml"
PAPER_FLEETS = ROOT / "scenarios" / "pdd-paper-fleets.yaml"
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
    r = runner.invoke(app, ["evaluate", str(PAPER_FLEETS), "--fleet", str(fleet)])
    assert r.exit_code == 2
    assert "pools[0] (prefill): deepseek-v4-pro" in r.output and "does not fit 8 x h100" in r.output
    assert "pools[1] (relay_decode)" in r.output and "--cost-only still prices" in r.output
    assert "Traceback" not in r.output
    r = runner.invoke(
        app, ["evaluate", str(PAPER_FLEETS), "--fleet", str(fleet), "--cost-only", "--json"]
    )
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["total_gpus"] == 75
    assert data["cost_per_hour_usd"] == pytest.approx(43 * H100 + 32 * 3.36 + 654.57 / 730)
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
    assert cost.pools[2] == pytest.approx(16 * price.full + 16 * running)
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
def test_architectures_restrict_the_scenario():
    s, _, _ = triple(load_scenario(SMALL))
    one = intra_dc(s, ["h100-sxm"], ["h100-sxm"])
    assert list(one.datacenters) == [INTRA_DC] and one.links == ()
    dc = one.datacenters[INTRA_DC]
    assert dc.max_gpus == sum(d.max_gpus for d in s.datacenters.values())
    hetero = intra_dc(s, ["h100-sxm"], ["l40s", "a100-80g-sxm"])
    assert hetero.chips_for("main_decode") == [(INTRA_DC, "l40s"), (INTRA_DC, "a100-80g-sxm")]
    assert hetero.chips_for("prefill") == [(INTRA_DC, "h100-sxm")]
    naive = cross_dc_naive(s)
    assert all("relay_decode" not in d.roles for d in naive.datacenters.values())
    assert [o.gb_per_gpu for o in naive.md_cache] == [0.0]
    assert naive.md_cache[0].md_prefix_hit.value == 0.0


def test_compare_json_csv_md():
    """Every architecture appears; an infeasible one says why while the others print."""
    r = runner.invoke(app, ["compare", str(SMALL), "--objective", "min-cost", "--format", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    names = [a["name"] for a in data["architectures"]]
    assert names == ["intra-dc-homogeneous", "intra-dc-heterogeneous", "cross-dc-naive", "pdd"]
    by = {a["name"]: a for a in data["architectures"]}
    naive = by["cross-dc-naive"]
    assert naive["status"] == "infeasible" and "req/s" in naive["reason"]
    for name in ("intra-dc-homogeneous", "intra-dc-heterogeneous", "pdd"):
        a = by[name]
        for key in ("fleet", "total_gpus", "cost_per_hour_usd", "sla_capacity_rps", "bcr"):
            assert a[key] is not None, (name, key)
        assert set(a["ttft_s"]) == {"p50", "p90", "p99"}
        assert a["sla_capacity_rps"] >= a["demand_rps"]
    assert by["pdd"]["wan_gbps"] > 0 and by["intra-dc-heterogeneous"]["wan_gbps"] == 0
    chips = [c["chip"] for c in by["intra-dc-homogeneous"]["by_chip"]]
    assert sorted(chips) == ["a100-80g-sxm", "h100-sxm", "l40s"]
    best = data["best_intra_dc"]
    assert by[best]["bcr_vs_best_intra_dc"] == pytest.approx(1.0)

    r = runner.invoke(app, ["compare", str(SMALL), "--objective", "min-cost", "--format", "csv"])
    rows = list(csv.DictReader(io.StringIO(r.output)))
    assert [x["name"] for x in rows] == names
    assert float(rows[3]["cost_per_hour_usd"]) == pytest.approx(by["pdd"]["cost_per_hour_usd"])

    r = runner.invoke(app, ["compare", str(SMALL), "--objective", "min-cost", "--format", "md"])
    assert "## Comparison" in r.output and "| status | optimal |" in r.output
    assert "Cross-DC naive: infeasible" in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "xml"], "'xml' is not one of 'table', 'json', 'md', 'csv'"),
        (["--price-sweep", "h100-sxm=3:2:0.1"], "needs 0 < LO <= HI and STEP > 0"),
        (["--price-sweep", "h100-sxm=3:4"], "expected CHIP=LO:HI:STEP"),
        (["--price-sweep", "b200=3:4:0.5"], "chip 'b200' is not used anywhere"),
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
    """With PDD's BCR 1 / (1 + p) and the best baseline's 0.4, PDD wins below p = 1.5: the
    search brackets it between the swept 1.0 and 2.0 and bisects to within 1/64."""
    problem = load_scenario(SMALL)

    def fake(derived, *_, **__):
        scenario = derived.scenario
        p = scenario.prices_usd_per_gpu_hour["l40s"]
        results = [
            compare_module.ArchitectureResult(name, None) for name in compare_module.ARCHITECTURES
        ]
        c = Comparison(scenario, "max-bcr", results)
        monkeypatch.setattr(
            compare_module.ArchitectureResult,
            "bcr",
            property(lambda a: 1 / (1 + p) if a.name == "pdd" else 0.4),
        )
        return c

    monkeypatch.setattr(compare_module, "compare", fake)
    sweep = price_sweep(problem, "l40s", [0.0 + 1e-9, 1.0, 2.0, 3.0])
    assert sweep.bracket == (1.0, 2.0)
    assert sweep.break_even == pytest.approx(1.5, abs=1 / 64)
    assert [p.pdd_wins for p in sweep.points] == [True, True, False, False]


def test_compare_price_sweep_runs_end_to_end():
    r = runner.invoke(
        app,
        [
            "compare",
            str(SMALL),
            "--objective",
            "min-cost",
            "--format",
            "json",
            "--price-sweep",
            "l40s=0.8:1.6:0.8",
        ],
    )
    assert r.exit_code == 0, r.output
    sweep = json.loads(r.output)["price_sweep"]
    assert [p["price_usd_per_gpu_hour"] for p in sweep["points"]][:2] == [0.8, 1.6]
    assert all(p["pdd_bcr"] is not None for p in sweep["points"])
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
