"""``pddplan compare``: every architecture asked the same question.

Two questions, each a section of the comparison (``AT``):

- **at equal demand**: each architecture's cheapest fleet (``min-cost``) for the scenario's
  demand x (1 + headroom), ranked by cost;
- **at equal budget**: each architecture's largest SLA capacity (``max-capacity``) within
  the same $/hour, ranked by capacity; its latency is compared at one rate (the smallest of
  the fleets' capacities) and at 50/75/100% of each fleet's own capacity.

The architectures are restrictions of the scenario, planned by ``solve_plan`` (same MILP,
same evaluator):

- ``intra-dc-homogeneous``: classic PD in one real datacenter, prefill and main decode on
  one of its chips, within its own limits: one row per (datacenter, chip);
- ``intra-dc-heterogeneous``: PD in one real datacenter that allows two or more chips,
  prefill and main decode on the chips it allows for each;
- ``hypothetical``: PD in a datacenter that does not exist, holding every chip with every
  datacenter's limits added up; shown for reference, never the baseline;
- ``cross-dc-naive``: prefill and main decode in different, linked datacenters; every
  request's whole context KV crosses the WAN (no relay decode, no decode-side cache);
- ``pdd``: the scenario as given.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from pddplan import units
from pddplan.errors import ArgumentError, InputError
from pddplan.evaluation.evaluator import Evaluator
from pddplan.model.problem import Problem
from pddplan.plan.results import PlanResult
from pddplan.plan.search import solve_plan
from pddplan.progress import Progress
from pddplan.spec.choices import MAX_CAPACITY, MIN_COST, Objective
from pddplan.spec.distributions import HitDist
from pddplan.spec.scenario import Datacenter, MdCacheOption, Role, Scenario
from pddplan.spec.status import EvalStatus

KINDS = ("intra-dc-homogeneous", "intra-dc-heterogeneous", "hypothetical", "cross-dc-naive", "pdd")
HYPOTHETICAL_DC = "hypothetical"
"""The datacenter of the ``hypothetical`` row."""
AT = ("demand", "budget")
OBJECTIVE_AT = {"demand": MIN_COST, "budget": MAX_CAPACITY}
LOAD_SHARES = (0.5, 0.75, 1.0)
"""Shares of its own SLA capacity at which each equal-budget fleet's TTFT P99 is shown."""


@dataclass(frozen=True)
class Candidate:
    """One architecture, placed (one row of a section)."""

    kind: str
    """One of ``KINDS``."""
    label: str
    """E.g. ``intra-DC h100-sxm in cluster-a``."""
    datacenter: str | None
    """The real datacenter of an intra-DC row."""
    chip: str | None
    """The chip of a homogeneous row."""
    plan: PlanResult | None
    reason: str | None = None
    """Why there is no plan (infeasible, or the architecture does not apply)."""
    relaxes: str | None = None
    """What the row allows that the scenario does not (``if cluster-b may also run
    prefill``), or None: its answer holds only under that relaxation."""
    problem: Problem | None = None
    """The restricted problem it was planned on."""
    ttft_p99_at_shares: tuple[float, ...] | None = None
    """Equal budget: TTFT P99 at ``LOAD_SHARES`` of its own SLA capacity (s)."""
    ttft_at_common_s: dict[str, float] | None = None
    """Equal budget: TTFT P50/P90/P99 at the section's common rate (s)."""

    @property
    def ok(self) -> bool:
        """It has a plan that meets the SLA at some rate (at equal budget, one below the
        demand counts: it is what the budget buys)."""
        e = self.plan.evaluation if self.plan is not None else None
        return self.reason is None and e is not None and e.status != EvalStatus.SLA_INFEASIBLE

    @property
    def cost_per_hour(self) -> float:
        e = self.plan.evaluation if self.plan is not None else None
        cost = e.cost_per_hour_usd if e is not None else None
        return cost if cost is not None else math.inf  # no price: ranks last

    @property
    def capacity_rps(self) -> float:
        e = self.plan.evaluation if self.plan is not None else None
        return e.sla_capacity_rps if e is not None else 0.0


@dataclass(frozen=True)
class Section:
    """Every architecture at one question (``AT``)."""

    at: str
    objective: Objective
    demand_rps: float
    planned_rps: float
    """The demand x (1 + headroom): what equal-demand fleets are sized for."""
    budget_usd_per_hour: float | None
    budget_source: str | None
    """Where the budget comes from: ``given``, ``the scenario's budget_usd_per_hour`` or
    ``the PDD equal-demand fleet's cost``."""
    rows: list[Candidate]
    common_rps: float | None
    """Equal budget: the rate every fleet's latency is compared at (the smallest SLA
    capacity among them)."""
    verdict: str

    @property
    def ranked(self) -> list[Candidate]:
        """The rows with a plan, best first by the question's measure (lowest cost at equal
        demand, highest capacity at equal budget; PDD first among equals, then row order).
        The hypothetical datacenter is not ranked: it does not exist."""
        ok = [c for c in self.rows if c.ok and c.kind != "hypothetical"]
        if self.at == "demand":
            return sorted(ok, key=lambda c: (c.cost_per_hour, c.kind != "pdd"))
        return sorted(ok, key=lambda c: (-c.capacity_rps, c.kind != "pdd"))

    def get(self, kind: str) -> list[Candidate]:
        return [c for c in self.rows if c.kind == kind]


@dataclass(frozen=True)
class Comparison:
    scenario: Scenario
    sections: list[Section]
    engine: dict[str, Any] = field(default_factory=dict)
    """The pass times every row assumes (``Problem.engine_summary``)."""

    def section(self, at: str) -> Section:
        return next(s for s in self.sections if s.at == at)


# --- the architectures as scenarios -----------------------------------------------------------
def _role_chips(dc: Datacenter, role: Role) -> tuple[str, ...]:
    return (dc.role_chips or {}).get(role) or dc.chips


def intra_dc(
    s: Scenario, dc_id: str, prefill_chips: list[str], decode_chips: list[str]
) -> Scenario:
    """``s`` as PD in its datacenter ``dc_id`` alone: prefill on ``prefill_chips``, main
    decode on ``decode_chips``, within that datacenter's limits; no relay decode, no WAN."""
    dc = s.datacenters[dc_id]
    chips = tuple(sorted(set(prefill_chips) | set(decode_chips)))
    here = dc.model_copy(
        update={
            "chips": chips,
            "roles": ("prefill", "main_decode"),
            "role_chips": {"prefill": tuple(prefill_chips), "main_decode": tuple(decode_chips)},
            "inventory": {c: n for c, n in dc.inventory.items() if c in chips},
        }
    )
    return s.model_copy(update={"datacenters": {dc_id: here}, "links": ()})


def _sum_or_none(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def hypothetical_dc(s: Scenario) -> Scenario:
    """``s`` as PD in one datacenter that does not exist: prefill on every chip the scenario
    allows for prefill, main decode on every chip it allows for main decode, every
    datacenter's limits added up (GPUs, power, owned inventory) and the worst PUE."""
    dcs = list(s.datacenters.values())
    p_chips = sorted({c for _, c in s.chips_for("prefill")})
    d_chips = sorted({c for _, c in s.chips_for("main_decode")})
    chips = sorted(set(p_chips) | set(d_chips))
    inventory: dict[str, int] = {}
    for dc in dcs:
        for chip, n in dc.inventory.items():
            if chip in chips:
                inventory[chip] = inventory.get(chip, 0) + n
    max_gpus = _sum_or_none([dc.max_gpus for dc in dcs])
    dc = Datacenter(
        chips=tuple(chips),
        roles=("prefill", "main_decode"),
        role_chips={"prefill": tuple(p_chips), "main_decode": tuple(d_chips)},
        max_gpus=None if max_gpus is None else int(max_gpus),
        max_power_kw=_sum_or_none([dc.max_power_kw for dc in dcs]),
        pue=max(dc.pue for dc in dcs),
        inventory=inventory,
    )
    return s.model_copy(update={"datacenters": {HYPOTHETICAL_DC: dc}, "links": ()})


def cross_dc_naive(s: Scenario) -> Scenario:
    """``s`` without relay decode and without a decode-side cache, main decode only in
    datacenters that do not also prefill. Raises ``InputError`` when no prefill
    datacenter is then linked to a main-decode one."""
    prefill_dcs = {d for d, dc in s.datacenters.items() if "prefill" in dc.roles}
    dcs = {}
    for dc_id, dc in s.datacenters.items():
        roles = [r for r in dc.roles if r != "relay_decode"]
        if dc_id in prefill_dcs and len(prefill_dcs) < len(s.datacenters):
            roles = [r for r in roles if r != "main_decode"]
        if not roles:
            continue
        role_chips = {r: c for r, c in (dc.role_chips or {}).items() if r in roles} or None
        dcs[dc_id] = dc.model_copy(update={"roles": tuple(roles), "role_chips": role_chips})
    links = tuple(x for x in s.links if all(d in dcs for d in x.between))
    w = s.workload
    if w.classes is not None:
        n = len(w.classes)
        w = w.model_copy(
            update={"classes": tuple(c.model_copy(update={"md_hit": None}) for c in w.classes)}
        )
        none = MdCacheOption(gb_per_gpu=0.0, md_hit=(0.0,) * n)
    elif w.prefix_hit is not None:
        w = w.model_copy(update={"md_prefix_hit": None})
        none = MdCacheOption(gb_per_gpu=0.0, md_prefix_hit=HitDist(dist="fixed", value=0.0))
    else:
        raise InputError("cross-dc-naive needs the workload as classes or distributions")
    data = s.model_dump()
    data.update(datacenters=dcs, links=links, workload=w, md_cache=(none,))
    try:
        return Scenario.model_validate(data)
    except ValidationError as e:
        raise InputError(
            "cross-dc-naive needs prefill and main decode in different, linked "
            f"datacenters: {e.errors()[0]['msg']}"
        ) from None


@dataclass(frozen=True)
class _Row:
    kind: str
    label: str
    datacenter: str | None
    chip: str | None
    build: Callable[[], Scenario]
    relaxes: str | None = None


def relaxation(dc_id: str, dc: Datacenter, prefill: list[str], decode: list[str]) -> str | None:
    """What running PD in datacenter ``dc_id`` with ``prefill`` and ``decode`` chips allows
    that the scenario does not: a role its ``roles`` leave out, or a chip its ``role_chips``
    keep from a role. None when the scenario allows it all."""
    what = []
    for role, chips in (("prefill", prefill), ("main_decode", decode)):
        name = ROLE_NAMES[role]
        if role not in dc.roles:
            what.append(f"{dc_id} may also run {name}")
            continue
        barred = [c for c in chips if c not in _role_chips(dc, role)]
        if barred:
            what.append(f"{' and '.join(barred)} may also run {name} in {dc_id}")
    return "if " + " and ".join(what) if what else None


def architectures(s: Scenario) -> list[_Row]:
    """The rows of a comparison, in the order they are shown. A row that relaxes the
    scenario (an intra-DC row in a datacenter whose roles or role chips do not allow PD
    there) says so in its label and carries the relaxation (``_Row.relaxes``)."""
    rows = []
    for dc_id, dc in s.datacenters.items():
        for chip in dc.chips:
            build = functools.partial(intra_dc, s, dc_id, [chip], [chip])
            relaxes = relaxation(dc_id, dc, [chip], [chip])
            label = f"intra-DC {chip} in {dc_id}" + (f" ({relaxes})" if relaxes else "")
            rows.append(_Row("intra-dc-homogeneous", label, dc_id, chip, build, relaxes))
        if len(dc.chips) >= 2:
            p, d = list(_role_chips(dc, "prefill")), list(_role_chips(dc, "main_decode"))
            build = functools.partial(intra_dc, s, dc_id, p, d)
            relaxes = relaxation(dc_id, dc, p, d)
            label = f"intra-DC mixed in {dc_id}" + (f" ({relaxes})" if relaxes else "")
            rows.append(_Row("intra-dc-heterogeneous", label, dc_id, None, build, relaxes))
    rows.append(
        _Row(
            "hypothetical", "hypothetical one-DC", None, None, functools.partial(hypothetical_dc, s)
        )
    )
    rows.append(
        _Row("cross-dc-naive", "cross-DC naive", None, None, functools.partial(cross_dc_naive, s))
    )
    rows.append(_Row("pdd", "PDD", None, None, functools.partial(_same, s)))
    return rows


def _same(s: Scenario) -> Scenario:
    return s


# --- planning each ----------------------------------------------------------------------------
def _why(plan: PlanResult, below_demand_ok: bool = False) -> str | None:
    """Why ``plan`` answers nothing (None when it does)."""
    e = plan.evaluation
    ok = (EvalStatus.OK, EvalStatus.BELOW_DEMAND) if below_demand_ok else (EvalStatus.OK,)
    if e is not None and e.status in ok:
        return None
    # each relaxation with the limit it relaxes: two of one key (TTFT P90 raised alone, and
    # P90 and P99 scaled together) read as a contradiction without it
    helpful = [
        f"{r.family}: {r.message}"
        for r in plan.relaxations
        if r.factor is not None or r.family == "options"
    ]
    if helpful:
        return "; ".join(helpful)
    if plan.relaxations:
        return "no single family of limits, relaxed up to x100, makes it feasible"
    return f"no plan (status {plan.status})"


def compare(
    problem: Problem,
    *,
    at: str = "both",
    budget_usd_per_hour: float | None = None,
    solver: str | None = None,
    time_limit_s: float | None = None,
    progress: Progress | None = None,
    explain: bool = True,
) -> Comparison:
    """Plan ``problem`` as every architecture at equal demand, at equal budget, or both
    (``at``: ``demand``, ``budget`` or ``both``). The budget is ``budget_usd_per_hour``,
    else the scenario's, else the PDD equal-demand fleet's cost. ``explain``: say how far
    an infeasible architecture's limits would need to move. ``progress``
    (``pddplan.progress``) hears the rows done, with the next row's name, before each
    row."""
    if at not in (*AT, "both"):
        raise ArgumentError("at", f"{{argument}} must be demand, budget or both, got '{at}'")
    if budget_usd_per_hour is not None and at == "demand":
        raise ArgumentError(
            "budget_usd_per_hour",
            "{argument} applies to the equal-budget question: --at budget or both",
        )
    if budget_usd_per_hour is not None and not (
        math.isfinite(budget_usd_per_hour) and budget_usd_per_hour > 0
    ):
        raise ArgumentError(
            "budget_usd_per_hour",
            f"{{argument}} must be a finite $/hour above 0, got {budget_usd_per_hour:g}",
        )
    s = problem.scenario
    demand = s.workload.arrival_rps or 0.0
    needs_demand = at in ("demand", "both") or (
        budget_usd_per_hour is None and s.budget_usd_per_hour is None
    )
    if needs_demand and not demand > 0:
        raise InputError(
            f"scenario {s.name}: workload.arrival_rps is {demand:g}; comparing at equal "
            "demand (min-cost) needs a demand above 0"
        )
    rows = architectures(s)

    questions = int(needs_demand) + int(at in ("budget", "both"))
    done = 0

    def step(text: str) -> None:
        """Report the row about to be planned, with the rows done of all (the work)."""
        nonlocal done
        if progress is not None:
            progress(done, questions * len(rows), text)
        done += 1

    def plan_all(question: str, budget: float | None) -> list[Candidate]:
        out = []
        for row in rows:
            step(f"{row.label} at equal {question}")
            try:
                restricted = row.build()
            except InputError as e:
                out.append(
                    Candidate(
                        row.kind, row.label, row.datacenter, row.chip, None, str(e),
                        relaxes=row.relaxes,
                    )
                )  # fmt: skip
                continue
            if budget is not None:
                restricted = restricted.model_copy(update={"budget_usd_per_hour": budget})
            sub = problem.with_scenario(restricted)
            plan = solve_plan(
                sub,
                objective=OBJECTIVE_AT[question],
                solver=solver,
                time_limit_s=time_limit_s,
                explain=explain,
                marginals=False,  # no row shows them
            )
            why = _why(plan, below_demand_ok=question == "budget")
            out.append(
                Candidate(
                    row.kind, row.label, row.datacenter, row.chip, plan, why, row.relaxes, sub
                )
            )
        return out

    sections = []
    planned = demand * (1 + s.headroom)
    pdd_cost: float | None = None
    if needs_demand:
        demand_rows = plan_all("demand", None)
        pdd = next(c for c in demand_rows if c.kind == "pdd")
        pdd_cost = pdd.cost_per_hour if pdd.ok else None
        if at in ("demand", "both"):
            section = Section("demand", MIN_COST, demand, planned, None, None, demand_rows,
                              None, "")  # fmt: skip
            sections.append(_with_verdict(section))
    if at in ("budget", "both"):
        if budget_usd_per_hour is not None:
            budget, source = budget_usd_per_hour, "given"
        elif s.budget_usd_per_hour is not None:
            budget, source = s.budget_usd_per_hour, "the scenario's budget_usd_per_hour"
        elif pdd_cost is not None and math.isfinite(pdd_cost):
            budget, source = pdd_cost, "the PDD equal-demand fleet's cost"
        else:
            raise InputError(
                f"scenario {s.name}: no budget to compare at: PDD has no equal-demand plan to "
                "take its cost from; give a budget (--budget)"
            )
        budget_rows = _latencies(plan_all("budget", budget))
        if budget_usd_per_hour is not None:
            _budget_buys_something(budget_rows, budget_usd_per_hour)
        ranked = [c for c in budget_rows if c.ok and c.kind != "hypothetical"]
        common = min((c.capacity_rps for c in ranked), default=None)
        budget_rows = [_at_common(c, common) for c in budget_rows]
        section = Section("budget", MAX_CAPACITY, demand, planned, budget, source,
                          budget_rows, common, "")  # fmt: skip
        sections.append(_with_verdict(section))
    if progress is not None:
        progress(done, done, "done")
    return Comparison(s, sections, problem.engine_summary())


def _budget_buys_something(rows: list[Candidate], budget: float) -> None:
    """Raise ``ArgumentError`` when the budget given buys no architecture a plan, with the
    cheapest plan's cost (the least budget any row's explanation found it needs)."""
    if any(c.ok and c.kind != "hypothetical" for c in rows):
        return
    needed = [
        r.needed[0]
        for c in rows
        if c.plan is not None and c.kind != "hypothetical"
        for r in c.plan.relaxations
        if r.family == "budget" and r.needed
    ]
    if not needed:
        return
    month = units.HOURS_PER_MONTH
    raise ArgumentError(
        "budget_usd_per_hour",
        f"{{argument}} ${budget:,.2f}/hour (${budget * month:,.0f}/month) is below every "
        f"architecture's cheapest plan: the cheapest costs ${min(needed):,.2f}/hour "
        f"(${min(needed) * month:,.0f}/month)",
    )


def _latencies(rows: list[Candidate]) -> list[Candidate]:
    """Each equal-budget fleet's TTFT P99 at ``LOAD_SHARES`` of its own SLA capacity."""
    out = []
    for c in rows:
        if not c.ok or c.problem is None or c.plan is None or c.plan.fleet is None:
            out.append(c)
            continue
        ev = Evaluator(c.problem, c.plan.fleet)
        p99 = tuple(ev.report(share * c.capacity_rps).ttft_s["p99"] for share in LOAD_SHARES)
        out.append(replace(c, ttft_p99_at_shares=p99))
    return out


def _at_common(c: Candidate, rate: float | None) -> Candidate:
    if not c.ok or rate is None or c.problem is None or c.plan is None or c.plan.fleet is None:
        return c
    e = Evaluator(c.problem, c.plan.fleet).report(rate)
    return replace(c, ttft_at_common_s={k: e.ttft_s[k] for k in ("p50", "p90", "p99")})


# --- the verdict ------------------------------------------------------------------------------
def _month(per_hour: float) -> str:
    return f"${per_hour * units.HOURS_PER_MONTH:,.0f}/month"


ROLE_NAMES = {"prefill": "prefill", "relay_decode": "relay decode", "main_decode": "main decode"}


def _parts(c: Candidate) -> dict[str, tuple[str, float]]:
    """Per role (and ``the WAN link``): what it holds, in words, and its $/hour."""
    e = c.plan.evaluation if c.plan is not None else None
    out: dict[str, tuple[str, float]] = {}
    if e is None:
        return out
    for role, name in ROLE_NAMES.items():
        pools = [p for p in e.pools if p.role == role]
        if pools:
            what = " + ".join(f"{p.gpus} {p.chip}" for p in pools)
            out[name] = (what, sum(p.cost_per_hour_usd or 0.0 for p in pools))
    link = sum(x.cost_per_hour_usd or 0.0 for x in e.links)
    if e.links:
        out["the WAN link"] = (" + ".join(f"{x.gbps:g} Gbit/s" for x in e.links), link)
    return out


def _pools(c: Candidate) -> tuple[tuple[str, str, str, int, int], ...]:
    """The fleet's pools, comparable across architectures."""
    fleet = c.plan.fleet if c.plan is not None else None
    if fleet is None:
        return ()
    return tuple(
        (p.datacenter, p.role, p.chip, p.gpus_per_instance, p.instances) for p in fleet.pools
    )


def _part(parts: dict[str, tuple[str, float]], key: str) -> str:
    what, cost = parts.get(key, ("none", 0.0))
    return f"{what} at ${cost:,.2f}/hour"


def _limit(c: Candidate) -> str:
    v = c.plan.verdict if c.plan is not None else None
    return v.limit if v is not None and v.limit else "no single limit"


def _with_verdict(section: Section) -> Section:
    text = verdict(section)
    ranked = section.ranked
    if ranked and ranked[0].relaxes:  # the answer holds only if the scenario is relaxed
        relaxes = ranked[0].relaxes
        text = f"{relaxes[0].upper()}{relaxes[1:]}: {text[0].lower()}{text[1:]}"
    return replace(section, verdict=text)


TIE = 0.005
"""Two figures within this share of each other are a tie."""


def verdict(section: Section) -> str:
    """One sentence: which architecture wins the section's question, by how much, and why
    (the part of the fleet whose cost differs most, or the limit that binds on each at its
    SLA capacity)."""
    ranked = section.ranked
    if not ranked:
        return "No architecture has a plan for this question."
    win = ranked[0]
    if len(ranked) == 1:
        return f"{win.label} is the only architecture with a plan."
    if section.at == "demand":
        measure = [c.cost_per_hour for c in ranked]
    else:
        measure = [-c.capacity_rps for c in ranked]
    tied = [
        c
        for c, m in zip(ranked, measure, strict=True)
        if abs(m - measure[0]) <= TIE * abs(measure[0])
    ]
    if len(tied) > 1:  # a tie: name them all, PDD first, and compare with the next one
        tied.sort(key=lambda c: c.kind != "pdd")
        rest = ranked[len(tied) :]
        head = " and ".join(c.label for c in tied)
        if section.at == "demand":
            text = f"At equal demand, {head} tie as cheapest at {_month(win.cost_per_hour)}"
        else:
            text = (
                f"At equal budget, {head} tie with the most capacity, {win.capacity_rps:,.3g} req/s"
            )
        if len({_pools(c) for c in tied}) == 1:
            text += " (the same fleet)"
        if not rest:
            return text + "."
        win, second = tied[0], rest[0]
        text += "; "
    else:
        win, second = ranked[0], ranked[1]
        text = ""
    pdd = next((c for c in ranked if c.kind == "pdd"), None)
    if section.at == "demand":
        saving = 1 - win.cost_per_hour / second.cost_per_hour
        a, b = _parts(win), _parts(second)
        parts = dict.fromkeys([*a, *b])  # in fleet order (a set's order would vary by run)
        gap = max(parts, key=lambda k: abs(b.get(k, ("", 0.0))[1] - a.get(k, ("", 0.0))[1]))
        if text:
            text += f"{saving:.0%} less than {second.label} ({_month(second.cost_per_hour)})"
        else:
            text = (
                f"At equal demand, {win.label} is cheapest: {_month(win.cost_per_hour)}, "
                f"{saving:.0%} less than {second.label} ({_month(second.cost_per_hour)})"
            )
        text += f"; the largest difference is {gap}: {_part(a, gap)} against {_part(b, gap)}."
        if pdd is not None and pdd not in (win, second, *tied):
            text += f" PDD costs {_month(pdd.cost_per_hour)}."
        return text
    more = win.capacity_rps / second.capacity_rps - 1 if second.capacity_rps else math.inf
    if text:
        text += f"{more:.0%} more than {second.label} ({second.capacity_rps:,.3g} req/s)"
    else:
        text = (
            f"At equal budget, {win.label} carries the most: {win.capacity_rps:,.3g} req/s, "
            f"{more:.0%} more than {second.label} ({second.capacity_rps:,.3g} req/s)"
        )
    if _limit(win) == _limit(second):
        text += f"; at its capacity {_limit(win)} binds on both."
    else:
        text += f"; at capacity {_limit(win)} binds on the first, {_limit(second)} on the second."
    if pdd is not None and pdd not in (win, second, *tied):
        text += f" PDD carries {pdd.capacity_rps:,.3g} req/s."
    return text


__all__ = [
    "AT",
    "KINDS",
    "Candidate",
    "Comparison",
    "Section",
    "compare",
    "cross_dc_naive",
    "hypothetical_dc",
    "intra_dc",
]
