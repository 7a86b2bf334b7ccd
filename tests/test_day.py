"""A day of a plan over time through the simulator (issue 53): instances leaving (nothing
new, they drain) and joining (work at once), a decode-side cache resized, arrivals that
follow the hours' rates, the union of a day's deployments, and the replay end to end: per
hour, the requests its rate gives, the joins and departures the schedule makes, the SLA
within the docs' bands; a flat day agrees with the steady-state simulator."""

from __future__ import annotations

import itertools
import json
import textwrap
from array import array
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA, SMALL, problem_of, run_main, triple

import pddplan
from pddplan.io.fleet import load_fleet
from pddplan.io.scenario import load_scenario
from pddplan.simulation.cache import ChainCache
from pddplan.simulation.day import HourPlan, _timed, _union, replay_day
from pddplan.simulation.engine import Simulation
from pddplan.spec.fleet import Fleet, Routing
from pddplan.workload.sessions import SessionOptions, SessionSource


@pytest.fixture(scope="module")
def small():
    s, hw, models = triple(load_scenario(SMALL))
    problem = problem_of(s, hw, models)
    fleet = load_fleet(DATA / "fleets" / "small.yaml", problem)
    return problem, fleet.model_copy(update={"routing": Routing(relay_above_mb=None)})


# --- instances leave and join -----------------------------------------------------------------
def _run(problem, fleet, changes, end_s=400.0):
    """``fleet`` at 8 req/s until ``end_s``, with ``changes`` (time, {pool: active}) applied
    and a checkpoint at each ``marks`` time; returns the checkpoints, the arrivals and the
    finished requests."""
    src = SessionSource(problem.scenario.workload, None, SessionOptions(8.0, 0.8, 0.04), seed=0)
    sim = Simulation(problem, fleet, block_tokens=src.block_tokens, chain_ids=True)
    marks = {}
    for t, active in changes:
        sim.ev.at(t, lambda a: sim.scale(a), active)
    for t in (100.0, 160.0, 260.0, 300.0, 399.0):
        sim.ev.at(t, lambda t: marks.__setitem__(t, sim.checkpoint()), t)
    sim.start(itertools.takewhile(lambda r: r[0] < end_s, src))
    sim.advance()
    arrivals, _, rows = sim.take_records()
    marks["end"] = sim.checkpoint()
    return marks, arrivals, rows


def test_leaving_instances_take_nothing_new_and_drain_and_joining_ones_take_work(small):
    """At 100 s half the decode instances and one of the two prefill instances leave: by
    160 s they have finished what they held and do no more work (their counters stand
    still) while the others go on; at 260 s they join again and work. Every request that
    arrived is served."""
    problem, fleet = small
    leave = {("prefill", 0): 1, ("main_decode", 0): 4}
    back = {("prefill", 0): 2, ("main_decode", 0): 8}
    marks, arrivals, rows = _run(problem, fleet, [(100.0, leave), (260.0, back)])
    assert len(rows) == len(arrivals) > 2500

    def prefill_busy(mark):
        return marks[mark].counters["p"]

    def tokens(mark):
        return [d[0] for d in marks[mark].counters["d"]]

    # leaving: the second prefill instance and MD instances 4-7 stand still from 160 s
    assert prefill_busy(160.0)[1] == prefill_busy(260.0)[1]
    assert tokens(160.0)[4:] == tokens(260.0)[4:]
    assert prefill_busy(160.0)[0] < prefill_busy(260.0)[0]
    assert all(a < b for a, b in zip(tokens(160.0)[:4], tokens(260.0)[:4], strict=True))
    # joined again at 260 s: they work
    assert prefill_busy(300.0)[1] > prefill_busy(260.0)[1]
    assert all(a < b for a, b in zip(tokens(260.0)[4:], tokens(300.0)[4:], strict=True))


def test_a_pool_with_no_instance_left_still_serves_what_is_routed_to_it(small):
    """Every decode instance leaves for good at 100 s (a schedule never does this: every
    hour runs a deployment): what was routed to the datacenter, and what still comes, is
    taken by the leaving instances where none is active, so every request is served."""
    problem, fleet = small
    marks, arrivals, rows = _run(problem, fleet, [(100.0, {("main_decode", 0): 0})], end_s=200.0)
    assert len(rows) == len(arrivals)  # the decode side drained everything
    assert marks["end"].time_s > 200.0


def test_resizing_a_cache_evicts_the_least_recently_used_blocks():
    """Room for 6 blocks holding chains [0 1 2] then [3 4 5]; shrunk to 4 the older chain's
    tail goes first (its last two blocks, the prefix [0] stays); grown back, the room is
    empty: nothing comes back."""
    c = ChainCache(6)
    c.insert(array("i", [0, 1, 2]))
    c.insert(array("i", [3, 4, 5]))
    c.resize(4)
    assert c.resident_blocks == 4 and c.evicted_blocks == 2
    assert c.lookup(array("i", [0, 1, 2])) == 1 and c.lookup(array("i", [3, 4, 5])) == 3
    c.resize(8)
    assert c.resident_blocks == 4 and c.lookup(array("i", [0, 1, 2])) == 1
    with pytest.raises(ValueError):
        ChainCache(None).resize(3)


# --- the day's arrivals and deployments -------------------------------------------------------
def test_arrivals_follow_each_hours_rate():
    """A sampled clock at 2 req/s, one arrival every 0.5 s: two 100 s segments at 1 and 3
    req/s get 100 and 300 arrivals, evenly spaced at their own rates; a segment at 0 gets
    none and the stream ends at the last bound."""
    u = ((0.5 * i, 10, 5, array("i")) for i in range(10_000))
    times = np.array([r[0] for r in _timed(u, [0.0, 100.0, 150.0, 250.0], [1.0, 0.0, 3.0], 2.0)])
    assert ((times >= 0) & (times < 100)).sum() == 100
    assert ((times >= 100) & (times < 150)).sum() == 0
    assert ((times >= 150) & (times < 250)).sum() == 300
    assert np.diff(times[:100]) == pytest.approx(1.0)
    assert np.diff(times[101:]) == pytest.approx(1 / 3)


def _fleet(md: int, md_gpus: int = 1, gbps: float = 40.0) -> Fleet:
    return Fleet.model_validate(
        {
            "name": "f",
            "pools": [
                {"datacenter": "east", "role": "prefill", "chip": "h100-sxm",
                 "gpus_per_instance": 1, "instances": 2},
                {"datacenter": "west", "role": "main_decode", "chip": "a100-80g-sxm",
                 "gpus_per_instance": md_gpus, "instances": md},
            ],
            "links": [{"between": ["east", "west"], "gbps": gbps}],
        }
    )  # fmt: skip


def test_the_union_holds_every_pool_at_its_most_instances():
    """Three deployments: 8 x 1-GPU MD, 4 x 1-GPU MD, 2 x 2-GPU MD: the union has the
    prefill pool, the 1-GPU MD pool at 8 and the 2-GPU one at 2 (another layout is another
    pool), the link at its most; each deployment's instances per union pool."""
    fleets = {"a": _fleet(8), "b": _fleet(4, gbps=100.0), "c": _fleet(2, md_gpus=2)}
    union, counts = _union(fleets, {frozenset({"east", "west"}): 25.0})
    assert [(p.role, p.gpus_per_instance, p.instances) for p in union.pools] == [
        ("prefill", 1, 2), ("main_decode", 1, 8), ("main_decode", 2, 2),
    ]  # fmt: skip
    assert counts == {"a": [2, 8, 0], "b": [2, 4, 0], "c": [2, 0, 2]}
    assert union.links[0].gbps == 100.0


# --- a day replayed end to end -----------------------------------------------------------------
HORIZON_BASE = textwrap.dedent("""\
    name: day
    model: llama-3.1-8b
    datacenters:
      a: {chips: [h100-sxm], roles: [prefill, relay_decode]}
      b: {chips: [l40s], roles: [main_decode]}
    links:
      - between: [a, b]
        rtt_ms: 10
        tiers: [{gbps: 10, usd_per_month: 100}, {gbps: 40, usd_per_month: 300}]
    workload:
      arrival_rps: 20
      input_tokens: {dist: fixed, value: 2000}
      output_tokens: {dist: fixed, value: 200}
      prefix_hit: {dist: beta, mean: 0.5, concentration: 2}
    sla: {ttft_p90_s: 1, ttft_p99_s: 2, tpot_ms: 50}
    electricity_usd_per_kwh: 0.1
    horizon:
      months: 3
      tranche: quarter
      daily_profile: PROFILE
      supply:
        a: {h100-sxm: {ways: [on_demand]}}
        b: {l40s: {ways: [on_demand]}}
""")


def _scenario(tmp_path: Path, profile: list[float]) -> Path:
    path = tmp_path / "day.yaml"
    path.write_text(HORIZON_BASE.replace("PROFILE", json.dumps(profile)))
    return path


@pytest.mark.slow
def test_a_day_replays_the_schedule_hour_by_hour(tmp_path):
    """Hours 0-11 at the peak, 12-23 at a quarter of it: two periods, two deployments (their
    relay decode in another layout).
    Replayed with 120 s hours: each hour's requests are its rate x 120 s within 4 standard
    deviations (Poisson), the deployment changes at hour 12 (and back at hour 0, after the
    warm-up of hour 23) with the joins and departures the two deployments differ by, the
    SLA holds hour by hour, the same seed gives the same day, and the CLI's JSON from the
    saved plan is the API's."""
    path = _scenario(tmp_path, [1.0] * 12 + [0.25] * 12)
    problem = pddplan.load_scenario(path)
    plan = pddplan.solve_horizon(problem)
    assert plan.total_usd is not None
    runs = {pp.period.hours: pp.deployment for pp in plan.periods}
    peak, night = runs[tuple(range(12))], runs[tuple(range(12, 24))]
    assert peak is not None and night is not None
    day = pddplan.replay_day(problem, plan, hour_s=120.0)
    assert day.holds, [h.misses for h in day.hours]
    for h in day.hours:
        want = h.rate_rps * 120.0
        assert abs(h.requests - want) <= 4 * want**0.5, (h.hour, h.requests, want)

    def count(fleet, role):
        return {(p.chip, p.gpus_per_instance): p.instances for p in fleet.pools if p.role == role}

    only_peak = only_night = 0
    for role in ("prefill", "relay_decode", "main_decode"):
        a, b = count(peak.fleet, role), count(night.fleet, role)
        only_peak += sum(max(a.get(k, 0) - b.get(k, 0), 0) for k in a.keys() | b.keys())
        only_night += sum(max(b.get(k, 0) - a.get(k, 0), 0) for k in a.keys() | b.keys())
    assert only_peak + only_night > 0  # the two deployments differ
    assert (day.hours[12].joined, day.hours[12].left) == (only_night, only_peak)
    assert (day.hours[0].joined, day.hours[0].left) == (only_peak, only_night)
    assert all(h.joined == h.left == 0 for h in day.hours if h.hour not in (0, 12))

    def gpus(fleet):
        return sum(p.instances * p.gpus_per_instance for p in fleet.pools)

    assert (day.hours[0].gpus, day.hours[12].gpus) == (gpus(peak.fleet), gpus(night.fleet))
    again = pddplan.replay_day(problem, plan, hour_s=120.0)
    assert again == day
    # the CLI on the saved plan: the same day
    out = tmp_path / "plan.json"
    assert run_main("solve", str(path), "--out", str(out), "-q").exit_code == 0
    result = run_main(
        "simulate", str(path), "--plan", str(out), "--hour-seconds", "120", "--json", "-q"
    )
    assert result.exit_code == 0, result.output
    view = json.loads(result.stdout)
    assert view["holds"] and view["requests"] == day.requests
    assert [h["ttft_s"]["p90"]["value"] for h in view["hours"]] == [
        pytest.approx(h.ttft_s["p90"].value) for h in day.hours
    ]


@pytest.mark.slow
def test_a_flat_day_agrees_with_the_steady_state_simulator(tmp_path):
    """A flat profile: one period, one deployment all day, nothing joins or leaves; the
    day's TTFT P90 and P99 (all hours' requests) agree with ``simulate`` on that deployment
    at the same rate within the docs' bands (10% and 15%): the time change, the union and
    the hour boundaries change nothing at a steady rate."""
    path = _scenario(tmp_path, [1.0] * 24)
    problem = pddplan.load_scenario(path)
    plan = pddplan.solve_horizon(problem)
    (period,) = plan.periods
    assert period.deployment is not None
    day = pddplan.replay_day(problem, plan, hour_s=150.0)
    assert all(h.joined == h.left == 0 for h in day.hours)
    steady = pddplan.simulate(problem, period.deployment.fleet, rate_rps=period.period.rps)
    # the day's percentiles over every hour, from the per-hour samples' sizes and figures,
    # are bounded by the hours' spread; compare the median hour's with the steady run's
    p90 = float(np.median([h.ttft_s["p90"].value for h in day.hours]))
    p99 = float(np.median([h.ttft_s["p99"].value for h in day.hours]))
    assert p90 == pytest.approx(steady.ttft_s["p90"].simulated, rel=0.10)
    assert p99 == pytest.approx(steady.ttft_s["p99"].simulated, rel=0.15)


def test_simulate_on_a_horizon_refuses_what_a_day_does_not_take(tmp_path):
    """--fleet (a day runs the schedule's deployments) on a scenario with a horizon, and
    --tranche on one without: one line each, exit 2; a tranche outside the horizon, an hour
    of no length (both before any planning), and a plan file that is not a plan over time,
    likewise."""
    path = _scenario(tmp_path, [1.0] * 24)
    got = run_main("simulate", str(path), "--fleet", str(DATA / "fleets" / "small.yaml"))
    assert got.exit_code == 2 and "--fleet" in got.stderr and "has a horizon" in got.stderr
    got = run_main("simulate", str(SMALL), "--fleet", str(DATA / "fleets" / "small.yaml"),
                   "--tranche", "1")  # fmt: skip
    assert got.exit_code == 2 and "--tranche" in got.stderr and "has none" in got.stderr
    for flag, value, message in (
        ("--tranche", "2", "--tranche must be a tranche from 1 to 1, got 2"),
        ("--hour-seconds", "0", "--hour-seconds must be above 0 seconds, got 0"),
    ):  # refused before the horizon is planned (there is no --plan)
        got = run_main("simulate", str(path), flag, value)
        assert got.exit_code == 2 and message in got.stderr, got.output
    plan = tmp_path / "not-a-day.json"
    plan.write_text(json.dumps({"deployment": {}}))
    got = run_main("simulate", str(path), "--plan", str(plan))
    assert got.exit_code == 2 and "not a plan over time" in got.stderr
    for result in (got,):
        assert "Traceback" not in result.output


def test_replay_day_refuses_a_tranche_outside_the_horizon(tmp_path):
    problem = pddplan.load_scenario(_scenario(tmp_path, [1.0] * 24))
    with pytest.raises(pddplan.ArgumentError, match="tranche from 1 to 1"):
        pddplan.replay_day(problem, {"periods": [], "link_leases": []}, tranche=2)
    with pytest.raises(ValueError, match="24 hours"):
        replay_day(problem, [HourPlan(0, "p", None, 1.0)])


def test_a_tranche_with_an_overlay_is_refused_at_its_line(tmp_path):
    """A day's replay samples the base workload: a tranche where an overlay changes it in
    some hours is refused, located at ``horizon.overlays``."""
    path = _scenario(tmp_path, [1.0] * 24)
    path.write_text(
        path.read_text()
        + "  overlays:\n    - {name: night, hours: [20, 21], prefix_hit: {dist: fixed, value: 0.1}}\n"
    )
    problem = pddplan.load_scenario(path)
    with pytest.raises(
        pddplan.InputError,
        match=r"day.yaml:\d+: horizon.overlays: overlay night applies in hours 20-21",
    ):
        pddplan.replay_day(problem, {"periods": [], "link_leases": []})
