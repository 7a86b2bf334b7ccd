"""Robust plans (``pddplan.plan.robust``): one set of hardware for every workload variant,
each with its own routing; the weighted variants' tail budgets shared on their mixture.
Tiny MILPs worked by hand, and the planner on a shipped scenario's variants."""

from __future__ import annotations

import io
import json
import textwrap

import numpy as np
import pytest
from conftest import SMALL, run_main
from test_solve import _HandTables

import pddplan
from pddplan.plan import milp
from pddplan.plan.counts import Requirements
from pddplan.plan.space import Space

_HAND = _HandTables(max_gpus_a=None)
A, B = _HAND.space.options["prefill"]
(R,), (M,) = _HAND.space.options["relay_decode"], _HAND.space.options["main_decode"]
SLOW, FAST = _HAND.slow, _HAND.fast
"""Per instance: a $8, b $20, r $5, m $4 an hour; the slow link $1, the fast one $6."""


class _Tables(_HandTables):
    """``test_solve``'s hand tables with counts given per (option, "slow" | "fast") and relay
    cut [none, all]."""

    def __init__(self, need: dict[tuple[str, str], list[int]]) -> None:
        super().__init__(max_gpus_a=None)
        self.need = need

    def _table(self, o, st):
        return np.array(self.need[(o.chip, "slow" if st.key == SLOW.key else "fast")])

    def figures(self, role, states):
        """Each count's cost and GPUs (what dominance compares), infinite above the maximum."""
        out = {}
        for o in self.space.options[role]:
            n = np.concatenate([self._table(o, st) for st in states]).astype(float)
            n[n > o.max_instances] = np.inf
            out[o.key] = np.array([n * o.usd_per_instance_hour, n * o.bought_gpus])
        return out


BASE = {
    ("a", "slow"): [3, 2], ("a", "fast"): [2, 2], ("b", "slow"): [1, 1], ("b", "fast"): [1, 1],
    ("m", "slow"): [2, 1], ("m", "fast"): [2, 2], ("r", "slow"): [0, 1], ("r", "fast"): [0, 1],
}  # fmt: skip


def test_one_fleet_for_two_must_meet_variants_by_hand():
    """V1 alone: 2 a + r + m on the slow link, relaying ($26). V2 (b dear, a and m hungrier)
    alone: 2 a + r + 2 m on the fast link, relaying ($35). Together, on the slow link: V1
    either way, V2 relaying: 3 a + r + 2 m + 1 = $38; on the fast link V1 needs 3 m
    (2 a + r + 3 m + 6 = $39); b needs 3 under V2 ($69 and up). Optimum $38: dearer than
    either alone, V2 relaying."""
    v1 = {**BASE, ("m", "fast"): [3, 3]}
    v2 = {**BASE, ("a", "slow"): [4, 3], ("a", "fast"): [3, 2], ("b", "slow"): [3, 3],
          ("b", "fast"): [3, 3], ("m", "slow"): [2, 2]}  # fmt: skip
    alone = [milp.min_cost(variants=[milp.Variant(n, {1.0: _Tables(t)})]) for n, t in
             (("v1", v1), ("v2", v2))]  # fmt: skip
    assert [x.cost_per_hour for x in alone] == pytest.approx([26.0, 35.0])
    out = milp.min_cost(
        variants=[milp.Variant("v1", {1.0: _Tables(v1)}), milp.Variant("v2", {1.0: _Tables(v2)})]
    )
    assert out.status == "optimal" and out.cost_per_hour == pytest.approx(38.0)
    c1, c2 = out.choices
    assert c1.instances == c2.instances == {"prefill": 3, "relay_decode": 1, "main_decode": 2}
    assert c1.state == c2.state == SLOW and c2.cut == 0.0
    assert c1.options["prefill"].chip == "a"


def test_the_mixture_lets_one_weighted_variant_take_more_of_the_budget():
    """Two variants of weight 1/2. Prefill a's count on the slow link without relay, by the
    share of the tail budgets planned for: W1 4, 3, 2, 2 at 0.5, 1, 1.5, 2; W2 2 at every
    share. Each at its own budgets (1, 1) needs 3 a (3 a + 2 m + 1 = $33), so b + 2 m + 1
    = $29 is cheapest; W1 at 1.5 and W2 at 0.5 (1/2 x 1.5 + 1/2 x 0.5 = 1) need 2 a:
    2 a + 2 m + 1 = $25."""
    w1 = {x: {**BASE, ("a", "slow"): [n, 2]} for x, n in ((0.5, 4), (1.0, 3), (1.5, 2), (2.0, 2))}
    w2 = {x: {**BASE, ("a", "slow"): [2, 2]} for x in (0.5, 1.0, 1.5, 2.0)}
    for t in (*w1.values(), *w2.values()):  # no relay decode, no fast link: only a's count
        t[("r", "slow")] = t[("r", "fast")] = [0, 99]
        t[("a", "fast")] = t[("m", "fast")] = [99, 99]
    variants = [
        milp.Variant("w1", {x: _Tables(t) for x, t in w1.items()}, 0.5),
        milp.Variant("w2", {x: _Tables(t) for x, t in w2.items()}, 0.5),
    ]
    out = milp.min_cost(variants=variants)
    assert out.cost_per_hour == pytest.approx(2 * 8 + 2 * 4 + 1)
    assert out.scales == (1.5, 0.5)
    # weights summing to 1 within validation's tolerance, a little over: the same plan
    over = [milp.Variant(v.name, v.tables, 0.5000004) for v in variants]
    assert milp.min_cost(variants=over).cost_per_hour == pytest.approx(out.cost_per_hour)
    must = [milp.Variant(v.name, {1.0: v.tables[1.0]}) for v in variants]
    alone = milp.min_cost(variants=must)
    assert alone.cost_per_hour == pytest.approx(20 + 2 * 4 + 1)
    assert alone.choice.options["prefill"].chip == "b"


def test_fixed_hardware_leaves_only_the_routing():
    """V2's hardware alone (2 a + r + 2 m, fast link) under V1: V1 is served (relaying or
    not); the slow-link plan of V1 alone (2 a + r + m) under V2 is not (V2 needs 3 a)."""
    v1 = BASE
    v2 = {**BASE, ("a", "slow"): [4, 3], ("a", "fast"): [3, 2], ("b", "slow"): [3, 3],
          ("b", "fast"): [3, 3], ("m", "slow"): [2, 2]}  # fmt: skip
    plan2 = milp.min_cost(variants=[milp.Variant("v2", {1.0: _Tables(v2)})]).choice
    plan1 = milp.min_cost(variants=[milp.Variant("v1", {1.0: _Tables(v1)})]).choice
    served = milp.min_cost(variants=[milp.Variant("v1", {1.0: _Tables(v1)})], hardware=plan2)
    assert served.status == "optimal" and served.cost_per_hour == pytest.approx(35.0)
    broken = milp.min_cost(variants=[milp.Variant("v2", {1.0: _Tables(v2)})], hardware=plan1)
    assert broken.choice is None and broken.status == "infeasible"


# --- the planner on a scenario ----------------------------------------------------------------
VARIANTS = textwrap.dedent("""\
    workload_variants:
      - {name: calm, must_meet: true, prefix_hit: {dist: beta, mean: 0.6, concentration: 3}}
      - {name: busy, must_meet: true, arrival_rps: 22}
      - {name: low-hit, weight: 0.5, prefix_hit: {dist: beta, mean: 0.33, concentration: 3}}
      - {name: usual, weight: 0.5}
""")


@pytest.fixture(scope="module")
def small_variants(tmp_path_factory):
    path = tmp_path_factory.mktemp("robust") / "small-variants.yaml"
    path.write_text((SMALL).read_text() + VARIANTS)
    problem = pddplan.load_scenario(path)
    return path, problem, pddplan.solve_robust(problem)


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
def test_the_robust_plan_serves_every_variant_and_costs_at_least_each_alone(small_variants):
    _, _, r = small_variants
    assert r.status == "optimal" and r.confirmed
    singles = [p.cost_per_hour_usd for p in r.singles]
    assert all(c is not None for c in singles)
    # it serves each must-meet variant at its own budgets: no cheaper than its plan alone (a
    # weighted variant alone is planned at its own budgets, which the robust plan may loosen)
    must = [p.cost_per_hour_usd for p, v in zip(r.singles, r.variants, strict=True) if v.must_meet]
    assert r.cost_per_hour_usd >= max(must) - 1e-9
    assert r.price_of_robustness_usd_per_hour == pytest.approx(r.cost_per_hour_usd - max(singles))
    # one set of hardware: every variant's fleet has the same pools and links
    pools = {tuple((p.role, p.chip, p.instances) for p in v.fleet.pools) for v in r.variants}
    assert len(pools) == 1 and len({v.fleet.links for v in r.variants}) == 1
    for v in r.variants:
        e = v.evaluation
        if v.must_meet:  # its own budgets: the evaluator's capacity reaches its rate
            assert e.sla_capacity_rps >= v.rate_rps * (1 - 1e-5)
    # the weighted mixture is within the budgets
    weighted = [v for v in r.variants if v.weight is not None]
    assert sum(v.weight * v.tail_scale for v in weighted) <= 1 + 1e-9
    assert r.mixture[0] <= 0.10 + 1e-9 and r.mixture[1] <= 0.01 + 1e-9


def test_the_weighted_plans_bound_only_where_the_must_meet_ones_leave_a_gap(
    small_variants, monkeypatch
):
    """Every variant's own plan costs the same here, so the must-meet ones bound the robust
    cost at its start: the weighted variants are not planned again at a looser share."""
    from pddplan.plan import robust

    _, problem, _ = small_variants
    solved, inside = [], []
    original, own = robust._Run.min_cost, robust._Run.own

    def spy(self, **kwargs):
        # a plan, not the routing of a plan's hardware, nor the MILP ``own`` falls back on
        if kwargs.get("hardware") is None and not inside:
            solved.append([next(iter(v.tables.values())).tail_scale for v in kwargs["variants"]])
        return original(self, **kwargs)

    def spy_own(self, variant):  # a variant's own plan: the relaxation's or the MILP's
        solved.append([variant.tables[1.0].tail_scale])
        inside.append(1)
        try:
            return own(self, variant)
        finally:
            inside.pop()

    monkeypatch.setattr(robust._Run, "min_cost", spy)
    monkeypatch.setattr(robust._Run, "own", spy_own)
    m = robust.robust_milp(problem, problem.variants(), "cbc", deadline=float("inf"))
    assert m.outcome.status == "optimal"
    # four own plans; the robust MILP is not run: the start costs the bound
    assert solved == [[1.0]] * 4 and m.outcome.solves == 0


def test_the_loosest_share_the_mixture_allows():
    """sum w x scale <= sum w with the others at their tightest (0.5): two weights of 1/2
    allow 1.5 each; three of 1/3 allow 2; one weighted variant alone only its own budgets."""
    from pddplan.plan.robust import _loosest

    grid = dict.fromkeys((0.5, 1.0, 1.5, 2.0))
    must = milp.Variant("m", {1.0: None})
    two = [must] + [milp.Variant(f"w{i}", grid, 0.5) for i in range(2)]
    assert _loosest(two) == [1.0, 1.5, 1.5]
    assert _loosest([milp.Variant(f"w{i}", grid, 1 / 3) for i in range(3)]) == [2.0] * 3
    assert _loosest([must, milp.Variant("w", grid, 1.0)]) == [1.0, 1.0]


def test_the_lower_bound_takes_the_proven_plans_only():
    from pddplan.plan.robust import _lower

    def plan(status, cost):
        return milp.MilpOutcome(status, None, cost, None, None, 0.0, 0, 0, 0)

    got = _lower([plan("optimal", 10.0), plan("time_limit", 12.0), plan("infeasible", None)])
    assert got == 10.0
    assert _lower([plan("time_limit", 12.0)]) is None and _lower([]) is None


def test_a_variant_is_reported_at_its_planned_rate_with_headroom_counted_once(
    small_variants, tmp_path
):
    """With headroom 0.5 a variant's rate is its demand x 1.5; its evaluation, made at that
    rate, is the planned load itself (not that rate x 1.5 again)."""
    from pddplan.plan.robust import _at_shared

    _, _, r = small_variants
    path = tmp_path / "headroom.yaml"
    text = (SMALL).read_text() + "headroom: 0.5\n"
    path.write_text(text + VARIANTS)
    v, vp = pddplan.load_scenario(path).variants()[0]
    got = _at_shared(v, vp, r.variants[0].fleet, 1.0)
    assert got.rate_rps == pytest.approx(vp.scenario.workload.arrival_rps * 1.5)
    assert got.evaluation.demand_rps == pytest.approx(got.rate_rps)
    assert got.evaluation.planned_rps == pytest.approx(got.rate_rps)
    assert got.evaluation.ttft_planned_s is None


def test_each_single_plan_is_checked_under_every_variant(small_variants):
    _, _, r = small_variants
    names = [v.name for v in r.variants]
    for p in r.singles:
        assert [c.variant for c in p.under] == names
        own = next(c for c in p.under if c.variant == p.name)
        assert own.serves  # a plan serves the variant it was made for
        for c in p.under:
            assert c.serves == (c.capacity_rps is not None)
            assert c.serves or c.breaks
    # the dearest single plan's hardware, where it serves every variant, is robust: the
    # robust plan then costs no more
    dearest = max(r.singles, key=lambda p: p.cost_per_hour_usd)
    if all(c.serves for c in dearest.under):
        assert r.cost_per_hour_usd <= dearest.cost_per_hour_usd + 1e-9


@pytest.mark.slow
def test_solve_writes_a_robust_plan_that_simulate_reads_per_variant(small_variants, tmp_path):
    path, problem, _ = small_variants
    out = tmp_path / "plan.json"
    run = run_main("solve", str(path), "--out", str(out), "--json")
    assert run.exit_code == 0, run.stderr
    plan = json.loads(out.read_text())
    assert plan["robust"] and set(plan["variants"]) == {"calm", "busy", "low-hit", "usual"}
    for name, v in plan["variants"].items():
        fleet = pddplan.load_fleet(out, pddplan.variant_problem(problem, name), variant=name)
        assert fleet.routing.model_dump(mode="json") == v["routing"]
    bad = run_main("evaluate", str(path), "--plan", str(out), "--variant", "nope")
    assert bad.exit_code == 2 and "no variant 'nope'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_variants_plan_for_min_cost_only(small_variants):
    path, _, _ = small_variants
    run = run_main("solve", str(path), "--objective", "max-bcr")
    assert run.exit_code == 2 and "min-cost only" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_variant_no_plan_serves_alone_is_named_with_its_relaxation(tmp_path):
    path = tmp_path / "too-busy.yaml"
    text = VARIANTS.replace("arrival_rps: 22", "arrival_rps: 400")
    path.write_text((SMALL).read_text() + text)
    run = run_main("solve", str(path))
    assert run.exit_code == 2, run.stdout
    (line,) = run.stderr.strip().splitlines()
    assert f"{path.name}:" in line and "workload_variants[1]" in line and "variant busy" in line
    assert "no plan serves it even alone" in line and "Traceback" not in run.stderr


def test_the_report_fits_80_columns(small_variants):
    """Every figure whole at 80 columns: no cell cut to an ellipsis."""
    from rich.console import Console

    from pddplan.report import plan as report_plan

    _, problem, r = small_variants
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(report_plan.robust_report(r, problem.scenario))
    text = console.export_text()
    assert "…" not in text
    for v in r.variants:
        assert f"{v.rate_rps:,.2f}" in text and f"{v.evaluation.sla_capacity_rps:,.2f}" in text
    flat = " ".join(text.split())  # captions wrap
    assert "Weighted mixture" in flat and "Price of robustness" in flat


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
@pytest.mark.parametrize("seed", range(4))
def test_the_robust_milp_matches_brute_force_over_the_hardware(seed):
    """Random hand tables for two must-meet variants: every purchase (prefill option and
    count, relay decode or not, main-decode count, link) is tried, each variant routed by
    the MILP with that hardware fixed; the cheapest that serves both is the robust optimum."""
    import itertools

    from pddplan.plan.space import Choice

    rng = np.random.default_rng(seed)

    def tables() -> dict[tuple[str, str], list[int]]:
        out = {}
        for key in ("a", "b", "m"):
            for st in ("slow", "fast"):
                none = int(rng.integers(1, 5))
                out[(key, st)] = [none, max(1, none - int(rng.integers(0, 2)))]
        out[("r", "slow")] = out[("r", "fast")] = [0, 1]
        return out

    variants = [milp.Variant(f"v{i}", {1.0: _Tables(tables())}) for i in range(2)]
    best = None
    for p, n_p, n_r, n_m, st in itertools.product(
        (A, B), range(1, 5), (0, 1), range(1, 5), (SLOW, FAST)
    ):
        hw = Choice(
            {"prefill": p, "relay_decode": R if n_r else None, "main_decode": M},
            {"prefill": n_p, "relay_decode": n_r, "main_decode": n_m},
            st,
            None,
            0,
            None,
        )
        cost = sum(
            o.usd_per_instance_hour * n
            for o, n in ((p, n_p), (R, n_r), (M, n_m))
            if n
        ) + st.usd_per_hour  # fmt: skip
        if best is not None and cost >= best:
            continue
        if all(milp.min_cost(variants=[v], hardware=hw).choice is not None for v in variants):
            best = cost
    out = milp.min_cost(variants=variants)
    assert out.status == "optimal" and out.cost_per_hour == pytest.approx(best)


def test_a_robust_milp_stopped_early_says_by_what():
    """Its node limit is counted work (``work_limit``, the same on any machine); the time
    limit is the safety stop (``time_limit``); with or without a plan alike."""
    from pddplan.plan.robust import _status
    from pddplan.spec.status import MilpStatus as M

    assert _status(M.NODE_LIMIT) == _status(M.NODE_LIMIT_NO_INCUMBENT) == "work_limit"
    assert _status(M.TIME_LIMIT) == _status(M.TIME_LIMIT_NO_INCUMBENT) == "time_limit"
    assert _status(M.OPTIMAL) == "optimal" and _status(M.INFEASIBLE) == "infeasible"


@pytest.mark.slow  # a MILP per variant beside the relaxation
def test_an_exact_relaxation_is_each_variants_own_plan_at_the_milps_cost(small_variants):
    """Where no datacenter limit binds, a variant's own plan is the relaxation's, with no
    MILP run, and costs what the MILP's optimum costs."""
    from pddplan.plan import robust
    from pddplan.work import counted

    _, problem, _ = small_variants
    run = robust._Run("cbc", 100_000, float("inf"), lambda: 0.0)
    for v, vp in problem.variants():
        table = Requirements(Space(vp), robust._rate(vp))
        variant = milp.Variant(v.name, {1.0: table})
        with counted() as work:
            own = run.own(variant)
        assert own.status == "optimal" and work["milp_solves"] == 0, v.name
        solved = run.min_cost(variants=[variant])
        assert own.cost_per_hour == pytest.approx(solved.cost_per_hour, rel=1e-12)
