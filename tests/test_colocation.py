"""Relay decode on prefill instances (``pddplan.model.colocation``): the host point's bounds,
its arithmetic by hand, the fleet that evaluates, the planner's choice and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import PAPER_FLEETS, ROOT, problem_of, run_main, triple

from pddplan.api import evaluate, load_fleet, load_scenario
from pddplan.errors import InputError
from pddplan.model.colocation import MIN_CHUNK, HostPoint, host_point, mixed_pass_s
from pddplan.plan.search import solve_plan
from pddplan.plan.space import describe
from pddplan.spec.fleet import Pool

COLOCATED = ROOT / "fleets" / "paper-pdd-colocated-48xh100-32xh200.yaml"


@pytest.fixture(scope="module")
def paper():
    return load_scenario(PAPER_FLEETS)


def test_chunk_and_batch_are_the_largest_within_the_tpot_bound(paper):
    inst = paper.instance("h100-sxm", 16)
    ctx, longest = paper.decode_context_tokens, float(paper.arrays.inp.max())
    tpot = paper.scenario.sla.tpot_ms / 1000
    point = host_point(inst, ctx, longest, tpot)
    assert point is not None

    def worst(chunk: int, batch: int) -> float:  # the last chunk of the longest prompt
        return mixed_pass_s(inst, chunk, batch, ctx, max(longest - chunk, 0.0))

    assert MIN_CHUNK <= point.chunk_tokens <= inst.chunk_tokens
    assert worst(point.chunk_tokens, point.batch) <= tpot
    assert (
        point.chunk_tokens == inst.chunk_tokens or worst(point.chunk_tokens + 1, point.batch) > tpot
    )
    per_seq = inst.kv.resident_bytes(ctx)
    by_memory = int((inst.kv_capacity_bytes() - inst.attention_groups * per_seq) // per_seq)
    assert point.batch <= by_memory
    assert point.batch == by_memory or worst(MIN_CHUNK, point.batch + 1) > tpot
    # the table: 0 and the largest batch, each pass at least the one without hosted tokens
    assert point.batches[0] == 0 and point.batches[-1] == point.batch
    assert np.all(np.diff(point.mixed_s) >= 0) and point.stretch(0) == 1.0
    # an interpolated row against the pass itself (the pass is close to affine in the batch)
    b = int(point.batches[1] + point.batches[2]) // 2 + 1
    exact = mixed_pass_s(inst, point.chunk_tokens, b, ctx, ctx) / point.mixed_s[0]
    assert point.stretch(b) == pytest.approx(exact, rel=2e-3)


def test_no_pass_of_the_table_exceeds_the_bound_with_long_chunks(hardware, models):
    """Where the chunk is long beside the prompts, the decode context (input plus half the
    output) is longer than any chunk's prefix can be (the longest prompt less a chunk); a
    table priced with chunks there ran past the TPOT bound the chunk was sized for (45.8
    ms against 44.3 on this scenario's 8 x H100), which the planner's pace bands accepted
    and the evaluator's P99 gap did not (6 check-and-cut rounds at twice its demand).
    Every row is now within the bound."""
    from test_enumerate import random_scenario

    problem = problem_of(random_scenario(20), hardware, models)
    ctx, longest = problem.decode_context_tokens, float(problem.arrays.inp.max())
    tpot = problem.scenario.sla.tpot_ms / 1000
    for gpus in (4, 8):
        inst = problem.instance("h100-sxm", gpus, role="prefill")
        point = host_point(inst, ctx, longest, tpot)
        assert point is not None
        assert ctx > longest - point.chunk_tokens  # the case: the context past any prefix
        assert point.mixed_s.max() <= tpot


def test_a_bound_no_pass_can_meet_hosts_nothing(paper):
    inst = paper.instance("h100-sxm", 16)
    ctx = paper.decode_context_tokens
    one = mixed_pass_s(inst, MIN_CHUNK, 1, ctx, max(float(paper.arrays.inp.max()) - MIN_CHUNK, 0))
    assert host_point(inst, ctx, float(paper.arrays.inp.max()), one * 0.99) is None
    assert host_point(inst, ctx, float(paper.arrays.inp.max()), one * 1.01) is not None


HAND = HostPoint(
    chunk_tokens=100,
    batch=4,
    batches=np.array([0.0, 1.0, 2.0, 4.0]),
    mixed_s=np.array([0.040, 0.041, 0.042, 0.044]),
    decode_s=np.array([0.0, 0.010, 0.012, 0.016]),
    kv_bytes_per_sequence=1.0,
)


def test_stretch_steps_and_gaps_by_hand():
    assert HAND.stretch(2) == pytest.approx(0.042 / 0.040)
    assert HAND.stretch(3) == pytest.approx(0.043 / 0.040)  # interpolated
    assert HAND.stretch(10) == pytest.approx(0.044 / 0.040)  # at most the largest batch
    batches, seconds = HAND.steps(0.25)  # 0.25 x mixed + 0.75 x plain decode
    assert list(batches) == [1.0, 2.0, 4.0]
    assert seconds == pytest.approx([0.01775, 0.0195, 0.023])
    # half busy at batch 2: tokens come at 0.5/0.042 per s in mixed passes, 0.5/0.012 plain
    (mixed, in_mixed), (plain, in_plain) = HAND.gaps(2, 0.5)
    assert (mixed, plain) == (pytest.approx(0.042), pytest.approx(0.012))
    assert in_mixed == pytest.approx(0.012 / 0.054) and in_mixed + in_plain == pytest.approx(1)


@pytest.mark.slow
def test_the_colocated_paper_fleet_evaluates_with_free_relay_decode(paper):
    fleet = load_fleet(COLOCATED, paper)
    e = evaluate(paper, fleet)
    assert e.status == "ok" and e.sla_capacity_rps > paper.scenario.workload.arrival_rps
    rld = next(p for p in e.pools if p.role == "relay_decode")
    prefill = next(p for p in e.pools if p.role == "prefill")
    assert rld.gpus == 0 and rld.cost_per_hour_usd == 0 and rld.layout.startswith("on prefill")
    assert prefill.gpus == 48
    assert prefill.cost_per_hour_usd == pytest.approx(48 * 2.69)  # the scenario's H100 rent
    assert e.tpot_ms["p99"] <= paper.scenario.sla.tpot_ms


def test_the_papers_43_h100_fleet_names_what_is_missing():
    run = run_main(
        "evaluate",
        str(PAPER_FLEETS),
        "--fleet",
        str(ROOT / "fleets" / "paper-pdd-43xh100-32xh200.yaml"),
    )
    err = run.stderr.replace("\n", " ")
    assert run.exit_code == 2 and "Traceback" not in err
    assert "the 43 h100-sxm of cluster-a's prefill and relay_decode pools make 2 x 16 + 11" in err
    assert "hosts_relay_decode: true" in err


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        (
            {"role": "main_decode", "chip": "h200-sxm", "gpus_per_instance": 8},
            "hosts_relay_decode is for prefill pools, not main_decode",
        ),
        (
            {
                "role": "prefill",
                "chip": "h100-sxm",
                "gpus_per_instance": 16,
                "context_parallel": True,
            },
            "hosts_relay_decode needs context_parallel false",
        ),
    ],
)
def test_bad_hosting_pools_are_refused(pool, message):
    with pytest.raises(ValueError, match=message):
        Pool(datacenter="cluster-a", instances=1, hosts_relay_decode=True, **pool)


def test_a_host_that_cannot_meet_the_bound_is_a_located_error(paper):
    s, hw, models = triple(paper)
    tight = s.model_copy(update={"sla": s.sla.model_copy(update={"tpot_ms": 5.0})})
    problem = problem_of(tight, hw, models)
    fleet = load_fleet(COLOCATED, paper)
    with pytest.raises(
        InputError, match=r"pools\[0\]\.hosts_relay_decode: 16 x h100-sxm cannot host"
    ):
        evaluate(problem, fleet)


@pytest.mark.slow
def test_the_planner_hosts_relay_decode_where_it_is_cheaper(paper):
    s, hw, models = triple(paper)
    hosted = solve_plan(paper, explain=False)
    alone = s.model_copy(
        update={"search": s.search.model_copy(update={"relay_decode_on_prefill": (False,)})}
    )
    separate = solve_plan(problem_of(alone, hw, models), explain=False)
    assert hosted.status == separate.status == "optimal"
    assert hosted.evaluation.cost_per_hour_usd < separate.evaluation.cost_per_hour_usd
    assert any(p.hosts_relay_decode for p in hosted.fleet.pools)
    assert not any(p.hosts_relay_decode for p in separate.fleet.pools)
    assert not any(p.role == "relay_decode" for p in hosted.fleet.pools)


@pytest.mark.slow
def test_the_simulator_hosts_relay_decode_on_the_prefill_passes(paper):
    """At its SLA capacity the co-located fleet's simulated TTFT and goodput agree with the
    analytic model (measured with a full run: P90 -1%, P99 +4%, goodput +0%; a short fixed
    run here, so the tolerance is wider), and the hosted sequences do decode."""
    from pddplan.simulation.run import simulate
    from pddplan.simulation.steady import RunLength

    fleet = load_fleet(COLOCATED, paper)
    r = simulate(paper, fleet, length=RunLength(6_000), seed=1)
    assert r.rld_token_share.simulated > 0 and r.pipelines["p_rld_md"] > 0
    for q in ("p90", "p99"):
        f = r.ttft_s[q]
        assert f.simulated == pytest.approx(f.predicted, rel=0.2), q
    assert r.goodput_rps.simulated == pytest.approx(r.goodput_rps.predicted, rel=0.06)
    assert r.rld_token_share.simulated == pytest.approx(r.rld_token_share.predicted, rel=0.2)


@pytest.mark.parametrize("seed", [0, 2, 8])
def test_a_hosting_prefill_option_is_only_bought_as_a_host(seed, hardware, models, monkeypatch):
    """A prefill option that may host relay decode is counted at the chunk a host runs; the
    fleet of a plan that buys it without relay decode on its instances is the plain
    option's (``Space.fleet``), whose counts differ. With the hosting options' counts made
    far the cheapest (1 instance everywhere), neither the relaxation nor the MILP may buy
    one but as a host: relay decode on its instances, at a cut that relays. (On
    ``pdd-paper-fleets`` at 33.5 req/s the relaxation bought 4 x 16 H100 at the hosting
    chunk with no relay decode; the plain fleet serves 21.0 req/s: a check-and-cut round.)"""
    from test_enumerate import random_scenario

    from pddplan.plan import milp
    from pddplan.plan.bounds import relaxed_optimum
    from pddplan.plan.counts import Requirements
    from pddplan.plan.space import Space

    real = Requirements.prefill_within

    def hosts_cheaply(self, o, st, singular=None, *, first_s, most=np.inf):
        if o.hosting:
            return np.full(len(self.space.cuts), o.unit_step)
        return real(self, o, st, singular, first_s=first_s, most=most)

    monkeypatch.setattr(Requirements, "prefill_within", hosts_cheaply)
    s = random_scenario(seed)
    space = Space(problem_of(s, hardware, models))
    assert any(o.hosting for o in space.options["prefill"])
    req = Requirements(space, s.workload.arrival_rps)
    choices = list(relaxed_optimum(req, None).choices)
    choices.append(milp.min_cost(req).choice)
    for c in choices:
        assert c is not None
        p, rld = c.options["prefill"], c.options["relay_decode"]
        fleet = space.fleet(c, "plan")
        hosts = any(pool.hosts_relay_decode for pool in fleet.pools)
        assert hosts == p.hosting, describe(c)
        if p.hosting:
            assert rld is not None and rld.host == p.key and c.instances["relay_decode"] > 0
            j = space.cuts.index(c.cut)
            assert space.relay_matrix[c.state.cache][j].any(), describe(c)  # it relays
    # with hosts this cheap, a host is bought (the rule above is not met by buying none)
    assert any(c.options["prefill"].hosting for c in choices)


def test_a_host_buys_the_instances_its_relay_decode_needs(hardware, models, monkeypatch):
    """Relay decode on a host's instances is one per instance: where it needs more than
    the host's own count, the host buys that many (the MILP's ``relay_within_host``, brute
    force's one per instance). The relaxation left such cells out and, with counts where
    the hosted relay decode always needs one more, found no plan (cost inf) where the MILP
    has one at $18.96/h; now both find it."""
    from test_enumerate import random_scenario

    from pddplan.plan import milp
    from pddplan.plan.bounds import relaxed_optimum
    from pddplan.plan.counts import Requirements
    from pddplan.plan.space import Space

    real_relay = Requirements.relay_all

    def only_hosts(self, o, st, singular=None, *, first_s, most=np.inf):
        n = o.unit_step if o.hosting else o.max_instances + 1  # plain options serve nothing
        return np.full(len(self.space.cuts), n)

    def one_more(self, o, st, band):
        rows = real_relay(self, o, st, band)
        if o.host is None:
            return rows
        host = next(p for p in self.space.options["prefill"] if p.key == o.host)
        return np.where(rows > 0, host.unit_step + 1, 0)

    monkeypatch.setattr(Requirements, "prefill_within", only_hosts)
    monkeypatch.setattr(Requirements, "relay_all", one_more)
    s = random_scenario(8)
    space = Space(problem_of(s, hardware, models))
    req = Requirements(space, s.workload.arrival_rps)
    relaxed, out = relaxed_optimum(req), milp.min_cost(req)
    assert out.cost_per_hour == pytest.approx(18.96, abs=0.005)
    assert relaxed.cost == pytest.approx(out.cost_per_hour, rel=1e-9)
    assert relaxed.exact  # its plan: no datacenter limit binds here
    for c in relaxed.choices:
        assert c.options["relay_decode"].host == c.options["prefill"].key
        assert c.instances["prefill"] >= c.instances["relay_decode"] > 0
