"""The built-in studies (``pddplan sweep --study``): their axes, and the demand study's steps
checked against independent solves at each side of every step, its journal and resume."""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import PAPER_FLEETS, SMALL

import pddplan
from pddplan import units
from pddplan.errors import InputError
from pddplan.sweeps.journal import unseal
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
    problem = pddplan.load_scenario(PAPER_FLEETS)
    (axis,), metric = study_axes(problem, "price-premium")
    path, _, values = axis.partition("=")
    h100 = problem.scenario.prices_usd_per_gpu_hour["h100-sxm"]  # 2.69
    assert path == "prices_usd_per_gpu_hour.h200-sxm" and metric == "cost"
    prices = [float(v) for v in values.split(",")]
    assert prices[0] == pytest.approx(h100) and prices[-1] == pytest.approx(1.6 * h100)
    assert len(prices) == 13 and prices[1] == pytest.approx(1.05 * 2.69)


def test_bathtub_sweeps_the_mean_hit_to_0_99_judged_by_bcr():
    (axis,), metric = study_axes(pddplan.load_scenario(PAPER_FLEETS), "bathtub")
    assert axis.startswith("workload.prefix_hit.mean=0,") and axis.endswith(",0.99")
    assert metric == "bcr"


def test_price_premium_needs_a_second_chip():
    problem = pddplan.load_scenario(PAPER_FLEETS)
    one_chip = problem.derive({"datacenters.cluster-b.chips": ["h100-sxm"]})
    with pytest.raises(InputError, match="main-decode chip other than"):
        study_axes(one_chip, "price-premium")


def _demand(tmp_path=None, resume=False):
    # the catalog's figures (``ideal``): where the steps below are
    problem = pddplan.load_scenario(SMALL).derive({"engine": "ideal"})
    journal = None if tmp_path is None else tmp_path / "d.csv.journal.jsonl"
    return demand_study(problem, Settings("min-cost"), vary=["workload.arrival_rps=23,24"],
                        scenario_label="small", journal=journal, resume=resume)  # fmt: skip


@pytest.mark.slow
def test_the_demand_steps_are_where_independent_solves_change_fleet():
    """Between 23 and 24 req/s small-llama-8b's cheapest fleet changes twice: its L40S main
    decode gives way to A100 (whose faster first decode step keeps the TTFT P99 within
    bound), then to L40S again beside a relay-decode pool. Each step the study notes is
    bracketed within ``DEMAND_TOLERANCE`` by rates planned on either side, the fleet is the
    same between steps, and independent solves at a step's two sides cost what the note
    says."""
    run = _demand()
    rates = [p.values["workload.arrival_rps"] for p in run.points]
    assert rates == sorted(rates) and rates[0] == 23 and rates[-1] == 24
    fleets = [p.results[0].fleet for p in run.points]
    steps = [i for i in range(len(fleets) - 1) if fleets[i] != fleets[i + 1]]
    assert len(steps) == len(run.notes) == 2
    base = pddplan.load_scenario(SMALL).derive({"engine": "ideal"})
    month = units.HOURS_PER_MONTH
    costs = []
    for k, note in zip(steps, run.notes, strict=True):
        lo, hi = rates[k], rates[k + 1]
        assert hi / lo - 1 <= DEMAND_TOLERANCE
        assert f"step between {lo:g} and {hi:g} req/s" in note
        # the two sides, solved on their own (not through the study's runner)
        below = pddplan.solve(base.derive({"workload.arrival_rps": lo}), objective="min-cost")
        above = pddplan.solve(base.derive({"workload.arrival_rps": hi}), objective="min-cost")
        assert below.evaluation.cost_per_hour_usd < above.evaluation.cost_per_hour_usd
        assert f"${below.evaluation.cost_per_hour_usd * month:,.0f} -> " in note
        assert f"${above.evaluation.cost_per_hour_usd * month:,.0f}/month" in note
        costs += [below.evaluation.cost_per_hour_usd, above.evaluation.cost_per_hour_usd]
    # one fleet from step to step: the planned points change fleet only at the steps
    edges = [0, *(k + 1 for k in steps), len(fleets)]
    assert all(len(set(fleets[a:b])) == 1 for a, b in itertools.pairwise(edges))
    assert costs == sorted(costs)


@pytest.mark.slow
def test_the_demand_study_resumes_from_its_journal(tmp_path):
    full = _demand(tmp_path)
    journal = tmp_path / "d.csv.journal.jsonl"
    lines = journal.read_text().splitlines()
    assert len(lines) == len(full.points) + 1 and "sweep" in unseal(lines[0].encode())
    journal.write_text("\n".join(lines[:3]) + "\n")  # two rates planned, then Ctrl-C
    with pytest.raises(InputError, match="--resume"):
        _demand(tmp_path)
    again = _demand(tmp_path, resume=True)
    assert again.resumed == 2 and again.notes == full.notes
    assert _strip(again) == _strip(full)
