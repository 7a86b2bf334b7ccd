"""The built-in studies (``pddplan sweep --study``): their axes, and the demand study's steps
checked against independent solves at each side of every step, its journal and resume."""

from __future__ import annotations

import json

import pytest
from test_sweep import PAPER, SMALL

import pddplan
from pddplan import units
from pddplan.errors import InputError
from pddplan.sweeps.points import CLOCK_FIELDS, Settings
from pddplan.sweeps.studies import DEMAND_TOLERANCE, demand_study, study_axes


def _strip(run) -> str:
    out = []
    for p in run.points:
        d = {k: v for k, v in p.to_json().items() if k not in CLOCK_FIELDS}
        d["results"] = [{k: v for k, v in r.items() if k not in CLOCK_FIELDS}
                        for r in d["results"]]  # fmt: skip
        out.append(d)
    return json.dumps(out, sort_keys=True)


def test_price_premium_prices_the_md_chip_at_1_to_1_6_times_the_prefill_chip():
    problem = pddplan.load_scenario(PAPER)
    (axis,), metric = study_axes(problem, "price-premium")
    path, _, values = axis.partition("=")
    h100 = problem.scenario.prices_usd_per_gpu_hour["h100-sxm"]  # 2.69
    assert path == "prices_usd_per_gpu_hour.h200-sxm" and metric == "cost"
    prices = [float(v) for v in values.split(",")]
    assert prices[0] == pytest.approx(h100) and prices[-1] == pytest.approx(1.6 * h100)
    assert len(prices) == 13 and prices[1] == pytest.approx(1.05 * 2.69)


def test_bathtub_sweeps_the_mean_hit_to_0_99_judged_by_bcr():
    (axis,), metric = study_axes(pddplan.load_scenario(PAPER), "bathtub")
    assert axis.startswith("workload.prefix_hit.mean=0,") and axis.endswith(",0.99")
    assert metric == "bcr"


def test_price_premium_needs_a_second_chip():
    problem = pddplan.load_scenario(PAPER)
    one_chip = problem.derive({"datacenters.cluster-b.chips": ["h100-sxm"]})
    with pytest.raises(InputError, match="main-decode chip other than"):
        study_axes(one_chip, "price-premium")


def _demand(tmp_path=None, resume=False):
    problem = pddplan.load_scenario(SMALL)
    journal = None if tmp_path is None else tmp_path / "d.csv.journal.jsonl"
    return demand_study(problem, Settings("min-cost"), vary=["workload.arrival_rps=23,24"],
                        scenario_label="small", journal=journal, resume=resume)  # fmt: skip


def test_the_demand_step_is_where_independent_solves_change_fleet():
    run = _demand()
    (note,) = run.notes
    rates = [p.values["workload.arrival_rps"] for p in run.points]
    assert rates == sorted(rates) and rates[0] == 23 and rates[-1] == 24
    fleets = [p.results[0].fleet for p in run.points]
    k = next(i for i in range(len(fleets) - 1) if fleets[i] != fleets[i + 1])
    lo, hi = rates[k], rates[k + 1]
    assert hi / lo - 1 <= DEMAND_TOLERANCE
    assert f"step between {lo:g} and {hi:g} req/s" in note
    # one step only: every rate below it has the first fleet, every rate above the second
    assert set(fleets[: k + 1]) == {fleets[0]} and set(fleets[k + 1 :]) == {fleets[-1]}
    # the two sides, solved on their own (not through the study's runner)
    base = pddplan.load_scenario(SMALL)
    below = pddplan.solve(base.derive({"workload.arrival_rps": lo}), objective="min-cost")
    above = pddplan.solve(base.derive({"workload.arrival_rps": hi}), objective="min-cost")
    month = units.HOURS_PER_MONTH
    assert below.evaluation.cost_per_hour_usd < above.evaluation.cost_per_hour_usd
    assert f"${below.evaluation.cost_per_hour_usd * month:,.0f} -> " in note
    assert f"${above.evaluation.cost_per_hour_usd * month:,.0f}/month" in note


def test_the_demand_study_resumes_from_its_journal(tmp_path):
    full = _demand(tmp_path)
    journal = tmp_path / "d.csv.journal.jsonl"
    lines = journal.read_text().splitlines()
    assert len(lines) == len(full.points) + 1 and "sweep" in json.loads(lines[0])
    journal.write_text("\n".join(lines[:3]) + "\n")  # two rates planned, then Ctrl-C
    with pytest.raises(InputError, match="--resume"):
        _demand(tmp_path)
    again = _demand(tmp_path, resume=True)
    assert again.resumed == 2 and again.notes == full.notes
    assert _strip(again) == _strip(full)
