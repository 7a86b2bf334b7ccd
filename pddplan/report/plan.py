"""A plan and a fleet in the terminal: the scenario summary, ``solve``'s report (verdict,
fleet, costs, the solver's work), ``evaluate``'s, the cost breakdown and the robust plan's."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from pddplan import units
from pddplan.report.format import money, num
from pddplan.report.tables import breakdown_table, grid
from pddplan.spec.choices import MAX_BCR, MAX_CAPACITY
from pddplan.spec.scenario import ROLE_SHORT, TAIL_BUDGETS
from pddplan.spec.status import EvalStatus, PlanStatus

if TYPE_CHECKING:
    from pddplan.evaluation.results import Evaluation
    from pddplan.model.pricing import FleetCost
    from pddplan.plan.results import ErrorMargin, PlanResult
    from pddplan.plan.robust import RobustResult
    from pddplan.spec.fleet import Fleet
    from pddplan.spec.scenario import Scenario


def scenario_summary(s: Scenario, path: str) -> Table:
    """What a valid scenario contains."""
    t = Table(title=f"{path}: valid", box=box.SIMPLE_HEAD)
    t.add_column("section")
    t.add_column("content", overflow="fold")
    t.add_row("name", s.name)
    t.add_row("model", f"{s.model} (KV {s.kv_dtype or 'model default'})")
    for dc_id, dc in s.datacenters.items():
        limits = ", ".join(
            x
            for x in (
                dc.max_gpus and f"max {dc.max_gpus} GPUs",
                dc.max_power_kw and f"max {dc.max_power_kw:g} kW",
            )
            if x
        )
        t.add_row(
            f"datacenter {dc_id}",
            f"{'/'.join(dc.roles)} on {', '.join(dc.chips)}" + (f"; {limits}" if limits else ""),
        )
    for link in s.links:
        tiers = ", ".join(f"{x.gbps:g}" for x in link.tiers)
        t.add_row(
            f"link {link.between[0]}-{link.between[1]}",
            f"RTT {link.rtt_ms:g} ms; tiers {tiers} Gbps",
        )
    w = s.workload
    t.add_row("workload", f"trace {w.trace.file}" if w.trace else f"{w.arrival_rps:g} req/s")
    for v in s.workload_variants or ():
        kind = "must meet" if v.must_meet else f"weight {v.weight:g}"
        given = ", ".join(v.changes()) or "nothing (the base workload)"
        t.add_row(f"variant {v.name}", f"{kind}; changes {given}")
    h = s.horizon
    if h is not None:
        low, high = min(h.daily_profile), max(h.daily_profile)
        t.add_row(
            "horizon",
            f"{h.months} months in {h.tranche}s; growth {h.monthly_growth:+.1%} a month; "
            f"daily profile {low:g}-{high:g} of the peak; hours within {h.group_share:.0%} "
            "share a period (not planned by solve yet)",
        )
    t.add_row(
        "SLA",
        f"TTFT P90 {s.sla.ttft_p90_s:g} s, P99 {s.sla.ttft_p99_s:g} s; TPOT {s.sla.tpot_ms:g} ms",
    )
    t.add_row("objective", s.objective)
    e = s.engine
    if e is not None and not isinstance(e, str):  # per role (a name: as every report says)
        named = [f"{k} {v}" for k in ("prefill", "relay_decode", "main_decode", "default")
                 if (v := getattr(e, k)) is not None]  # fmt: skip
        rest = "" if e.default or len(named) == 3 else "; roles not named: the catalog's default"
        t.add_row("engine", f"per role: {', '.join(named)}{rest}")
    return t


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def _s(x: float | None) -> str:
    return "—" if x is None or x == float("inf") else f"{x:,.2f} s"


def _headroom(headroom: float | None) -> str:
    """``headroom +55%``, or for a fleet far above the demand ``28x the demand``."""
    if headroom is None:
        return "headroom —"
    if headroom >= 1:
        return f"{headroom + 1:,.3g}x the demand"
    return f"headroom {headroom:+.0%}"


def engine_note(engine: dict[str, Any]) -> str:
    """`` (sglang pass times)``, with the error quantile where it is not the fit's centre."""
    if not engine:
        return ""
    q = engine.get("perf_quantile", 0.5)
    at = "" if q == 0.5 else f" at the error's P{q * 100:g}"
    if "label" in engine:  # an engine per role
        return f" (pass times: {engine['label']}{at})"
    return f" ({engine['id']} pass times{at})"


def fleet_table(e: Evaluation, s: Scenario, *, links: bool = False) -> Table:
    """The pools (and with ``links``, each WAN link as a row), busy at the demand and at
    the SLA capacity; the caption says what the abbreviations and columns mean."""
    fleet = grid(
        f"Fleet {e.fleet}{engine_note(e.engine)}",
        ("DC", "role", "chip", "layout", "inst. ×\nGPUs", "$/hour", "busy at\ndemand",
         "busy at\ncapacity"),
        text=3,
    )  # fmt: skip
    cap = s.search.max_utilization
    for p in e.pools:
        fleet.add_row(
            p.datacenter,
            ROLE_SHORT[p.role],
            p.chip,
            p.layout.replace("+", " + "),
            f"{p.instances} × {p.gpus_per_instance}",
            num(p.cost_per_hour_usd, ",.2f"),
            _pct(p.utilization),
            _pct(p.utilization_at_capacity),
        )
    if links:
        for x in e.links:
            fleet.add_row(
                x.between[0],
                "WAN",
                f"to {x.between[1]}",
                f"{x.gbps:g} Gbit/s",
                "",
                num(x.cost_per_hour_usd, ",.2f"),
                _pct(x.utilization),
                _pct(x.utilization_at_capacity),
            )
    headroom = e.sla_capacity_rps / e.demand_rps - 1 if e.demand_rps else None
    fleet.caption = (
        "P prefill, RLD relay decode, MD main decode; busy at the demand "
        f"({e.demand_rps:g} req/s) and at the SLA capacity ({e.sla_capacity_rps:,.3g} req/s, "
        + _headroom(headroom)
        + f"), capped at {cap:.0%}; "
        + cache_text(e)
    )
    fleet.caption_justify = "left"
    return fleet


def cache_text(e: Evaluation) -> str:
    """The decode-side cache in words: its size per MD GPU and the mean hit it gives."""
    gb, hit, tiers = e.md_cache["gb_per_gpu"], e.md_cache["mean_hit"], e.md_cache.get("tiers")
    if tiers is not None:
        below = [f"{tiers[k]:g} GB {name}" for k, name in (
            ("dram_gb_per_gpu", "DRAM"), ("ssd_gb_per_gpu", "SSD")) if tiers[k]
        ]  # fmt: skip
        size = "HBM" + "".join(f" + {x}" for x in below) + (" per MD GPU" if below else "")
    else:
        size = "from the workload" if gb is None else f"{gb:g} GB per MD GPU"
    return f"decode-side cache: {size}, mean MD hit {_pct(hit)}"


def links_table(e: Evaluation) -> Table | Text:
    """The WAN links (a line when there is none)."""
    if not e.links:
        return Text(f"no WAN link; {cache_text(e)}")
    links = grid(
        "WAN links", ("between", "Gbit/s", "busy at\ndemand", "busy at\ncapacity", "$/hour")
    )
    for x in e.links:
        links.add_row(
            f"{x.between[0]} - {x.between[1]}",
            f"{x.gbps:g}",
            _pct(x.utilization),
            _pct(x.utilization_at_capacity),
            num(x.cost_per_hour_usd, ",.2f"),
        )
    links.caption = cache_text(e)
    return links


def routing_table(e: Evaluation) -> Table:
    """The router's rules, one a row, and the share of requests and tokens each pipeline
    takes."""
    r = e.routing
    rules = grid("Router", ("rule", "setting"), text=1)
    if r["relay_above_mb"] is None:
        rules.add_row("relay through RLD", "never: every request P -> MD")
    else:
        rules.add_row("relay through RLD", f"WAN payload above {r['relay_above_mb']:,.2f} MB")
        singular = r["singular_max_output_tokens"]
        rules.add_row(
            "finish on RLD (singular)",
            f"max_tokens <= {singular:,}" if singular else "never",
        )
        cu = r.get("catch_up_above_tokens")
        rules.add_row(
            "hand off to MD",
            "in one extend step"
            if cu is None
            else f"in {r['chunk_tokens']}-token chunks above {cu:,} eager tokens",
        )
    names = {"p_md": "P -> MD", "p_rld_md": "P -> RLD -> MD", "singular": "P -> RLD (singular)"}
    for key, share in e.pipelines.items():
        rules.add_row(
            f"share {names[key]}",
            f"{_pct(share['requests'])} of requests, {_pct(share['output_tokens'])} of tokens",
        )
    rules.caption = f"RLD produces {e.rld_token_share:.2%} of output tokens"
    return rules


def latency_table(e: Evaluation, s: Scenario) -> Table:
    """TTFT percentiles and TPOT at the demand against the SLA."""
    latency = grid(
        f"Latency at the demand ({e.demand_rps:g} req/s)", ("metric", "predicted", "SLA")
    )
    latency.add_row("TTFT P50", _s(e.ttft_s["p50"]), "")
    latency.add_row("TTFT P90", _s(e.ttft_s["p90"]), f"{s.sla.ttft_p90_s:g} s")
    latency.add_row("TTFT P99", _s(e.ttft_s["p99"]), f"{s.sla.ttft_p99_s:g} s")
    latency.add_row("TPOT (decode step)", f"{e.tpot_ms['step']:.1f} ms", f"{s.sla.tpot_ms:g} ms")
    latency.add_row(
        "TPOT P99 gap (handoff stalls)", f"{e.tpot_ms['p99']:.1f} ms", f"{s.sla.tpot_ms:g} ms"
    )
    return latency


def breakdown(e: Evaluation) -> Table:
    """The mean TTFT by segment at the demand and at the SLA capacity."""
    return breakdown_table(
        "TTFT by segment, mean",
        {
            f"at {e.demand_rps:,.3g} req/s": e.ttft_breakdown_s,
            f"at capacity, {e.sla_capacity_rps:,.3g}": e.ttft_breakdown_at_capacity_s,
        },
    )


def economics_table(e: Evaluation) -> Table:
    """Cost per hour and month, capacity, BCR and the cost per million output tokens at the
    demand and at the SLA capacity; the caption says how each chip is priced."""
    econ = grid("Economics", ("figure", "value"))
    cost = e.cost_per_hour_usd
    econ.add_row("cost per hour", f"${cost:,.2f}" if cost is not None else "— (missing prices)")
    econ.add_row(
        "cost per month", f"${cost * units.HOURS_PER_MONTH:,.0f}" if cost is not None else "—"
    )
    econ.add_row("SLA capacity vs demand", f"{e.sla_capacity_rps:,.2f} vs {e.demand_rps:g} req/s")
    econ.add_row("BCR (capacity per $/hour)", num(e.bcr, ",.4f"))
    econ.add_row(
        f"$ per M output tokens at {e.demand_rps:g} req/s", money(e.usd_per_million_output_tokens)
    )
    econ.add_row(
        "$ per M output tokens at capacity", money(e.usd_per_million_output_tokens_at_capacity)
    )
    econ.caption = price_basis_text(e.price_basis, e.owned_gpus)
    econ.caption_justify = "left"
    return econ


def status_lines(e: Evaluation) -> list[Text]:
    """Whether the fleet serves the demand, what binds at its SLA capacity, and notes."""
    style = "green" if e.status == EvalStatus.OK else "red"
    words = {
        EvalStatus.OK: "serves the demand within the SLA",
        EvalStatus.BELOW_DEMAND: "below the demand: its SLA capacity is less",
        EvalStatus.SLA_INFEASIBLE: "meets the SLA at no rate",
    }
    lines = [Text(f"status: {e.status} ({words.get(EvalStatus(e.status), e.status)})", style=style)]
    lines += [Text(f"binds at SLA capacity: {b}") for b in e.binding]
    lines += [Text(f"note: {n}", style="yellow") for n in e.notes]
    return lines


def evaluation_report(e: Evaluation, s: Scenario) -> Group:
    """``pddplan evaluate``: fleet, links, router, latency, the TTFT by segment, economics,
    status and binding limits."""
    return Group(
        fleet_table(e, s),
        links_table(e),
        routing_table(e),
        latency_table(e, s),
        breakdown(e),
        economics_table(e),
        *status_lines(e),
    )


def key_figures(e: Evaluation, s: Scenario) -> Text:
    """The plan against its SLA and what it costs, in two sentences (the compact view)."""
    sla = s.sla
    cost = e.cost_per_hour_usd
    text = (
        f"At {e.demand_rps:g} req/s: TTFT P90 {_s(e.ttft_s['p90'])} (SLA {sla.ttft_p90_s:g} s), "
        f"P99 {_s(e.ttft_s['p99'])} (SLA {sla.ttft_p99_s:g} s); TPOT {e.tpot_ms['step']:.1f} ms, "
        f"P99 gap {e.tpot_ms['p99']:.1f} ms (SLA {sla.tpot_ms:g} ms)."
    )
    if cost is not None:
        text += (
            f"\nCost ${cost * units.HOURS_PER_MONTH:,.0f}/month (${cost:,.2f}/hour): "
            f"{money(e.usd_per_million_output_tokens)} per million output tokens at the "
            f"demand, {money(e.usd_per_million_output_tokens_at_capacity)} at the SLA capacity."
        )
    return Text(text)


def price_basis_text(basis: dict[str, str], owned_gpus: int) -> str:
    """Which prices the costs use, in words."""
    words = {"rent": "rent per GPU-hour", "buy": "bought: amortized capex + power + hosting"}
    text = "prices: " + "; ".join(f"{c} {words[b]}" for c, b in basis.items())
    if owned_gpus:
        text += f"; {owned_gpus} owned GPUs at running cost (power + hosting)"
    return text


DETAILS = ("routing", "latency", "breakdown", "economics", "marginals", "bcr", "solver")
"""The sections ``solve`` shows beyond its compact view, in the order shown
(``--details``: all of them, or those named)."""


def detail_sections(names: str) -> tuple[str, ...]:
    """``--details``' value (``all``, or section names separated by commas) as sections in
    the order shown; ValueError names an unknown one and lists them."""
    asked = [x.strip() for x in names.split(",") if x.strip()]
    if not asked:
        raise ValueError(f"name a section: {', '.join(DETAILS)}, or all")
    unknown = [x for x in asked if x not in (*DETAILS, "all")]
    if unknown:
        raise ValueError(
            f"unknown section '{unknown[0]}'; the sections are {', '.join(DETAILS)} (or all)"
        )
    if "all" in asked:
        return DETAILS
    return tuple(x for x in DETAILS if x in asked)


def status_words(r: PlanResult, s: Scenario) -> str:
    """What the search proved, in words: ``optimal``; ``optimal within 1% of the proven
    bound (gap 0.88%)`` (max BCR's plateau); ``best found at the time limit, gap 2.1%``."""
    st = r.stats
    gap = f"gap {st.gap:.2%}" if st.gap is not None else "no gap proven"
    if r.status == PlanStatus.OPTIMAL:
        shown = st.gap is not None and round(st.gap, 4) > 0  # a gap that prints as 0.00% is none
        if st.objective == MAX_BCR and shown:
            return f"{PlanStatus.OPTIMAL} within {s.search.bcr_plateau:.0%} of the proven bound ({gap})"
        if shown:
            return f"{PlanStatus.OPTIMAL} within the MILP's tolerance ({gap})"
        return PlanStatus.OPTIMAL.value
    if r.status == PlanStatus.TIME_LIMIT:
        return (
            f"best found at the time limit, {gap}"
            if r.fleet is not None
            else "no plan found by the time limit"
        )
    if r.status == PlanStatus.WORK_LIMIT:
        return (
            f"best found within the work budgets, {gap}"
            if r.fleet is not None
            else "no plan found within the work budgets"
        )
    return PlanStatus.INFEASIBLE.value


def _objective_words(r: PlanResult, s: Scenario) -> str:
    if r.stats.objective == MAX_BCR:
        return "the most SLA capacity per dollar"
    if r.stats.objective == MAX_CAPACITY:
        budget = s.budget_usd_per_hour or 0.0
        return f"the most SLA capacity for ${budget * units.HOURS_PER_MONTH:,.0f}/month"
    return f"the cheapest fleet for {r.planned_rps:,.3g} req/s"


def plan_report(
    r: PlanResult,
    s: Scenario,
    margin: ErrorMargin | None = None,
    details: tuple[str, ...] = (),
) -> Group:
    """``pddplan solve``: the compact view (verdict, the error's margin, what the search
    proved, the fleet with its links, the figures against the SLA, notes on idle pools,
    the runner-ups), then the ``details`` sections asked for (``DETAILS``); without a
    plan, why."""
    st = r.stats
    parts: list[Any] = []
    if r.verdict is not None:
        parts.append(Text(r.verdict.text, style="bold"))
    if margin is not None:
        parts.append(Text(margin.text, style="yellow"))
    method = "; brute force (--method enumerate)" if r.method != "milp" else ""
    parts.append(
        Text(
            f"{r.scenario}: {_objective_words(r, s)}; {status_words(r, s)}{method}",
            style="green" if r.status == PlanStatus.OPTIMAL else "bold yellow",
        )
    )
    if r.status.stopped:
        parts.append(Text(stop_note(r.status, st.stop_reason, r.fleet is not None), style="yellow"))
    e = r.evaluation
    if e is not None:
        parts.append(fleet_table(e, s, links=True))
        parts.append(key_figures(e, s))
        if e.status != EvalStatus.OK or len(e.binding) > 1 or e.notes:
            parts += status_lines(e)
    parts += [Text(f"note: {n}", style="yellow") for n in [*r.idle, *r.left_out]]
    if r.runner_ups is not None:
        parts += runner_ups(r, s)
    if r.relaxations:
        parts.append(_relaxations(r))
    sections: dict[str, Callable[[], list[Any]]] = {
        "routing": lambda: [routing_table(e)] if e is not None else [],
        "latency": lambda: [latency_table(e, s)] if e is not None else [],
        "breakdown": lambda: [breakdown(e)] if e is not None else [],
        "economics": lambda: [economics_table(e), *status_lines(e)] if e is not None else [],
        "marginals": lambda: [_marginals(r)] if r.marginals else [],
        "bcr": lambda: (
            [_bcr_steps(r, s)]
            if r.bcr_steps
            else [Text("bcr: BCR against cost is for --objective max-bcr", style="dim")]
        ),
        "solver": lambda: [_solver(r)],
    }
    for name in details:
        parts += sections[name]()
    if not details and e is not None:
        parts.append(
            Text(
                "More: --details all, or --details SECTION,... (solve --help lists them)",
                style="dim",
            )
        )
    return Group(*parts)


def runner_ups(r: PlanResult, s: Scenario) -> list[Any]:
    """The cheapest plan of each other family at the demand, cheapest first: each its family,
    cost, SLA capacity, TTFT P99 at the demand and what it gives up against the plan, then
    its deployment; the families without a plan, and where the scenario allows no intra-DC
    PD, what ``compare`` relaxes to plan it."""
    ru, e = r.runner_ups, r.evaluation
    if ru is None or e is None:
        return []
    lines: list[Any] = []
    head = f"Runner-ups at {r.planned_rps:,.3g} req/s, each family's cheapest"
    head += " (against the plan):" if ru.rows else ": none"
    lines.append(Text(head, style="bold"))
    for i, x in enumerate(ru.rows, 1):
        lines.append(Text(f"{i}. {x.family.label}"))
        lines.append(Padding(Text(_against(x.evaluation, e)), (0, 0, 0, 3)))
        lines.append(Padding(Text(x.deployment, style="dim"), (0, 0, 0, 3)))
    if ru.unserved:
        names = "; ".join(f.label for f in ru.unserved)
        lines.append(Text(f"No plan at the demand for {names}.", style="dim"))
    if not ru.intra_dc_allowed:
        lines.append(Text(intra_dc_note(s), style="dim"))
    if ru.stopped:
        lines.append(
            Text(f"Runner-ups stopped at {ru.stopped}: the list may miss some.", style="yellow")
        )
    return lines


def _against(x: Evaluation, plan: Evaluation) -> str:
    """A runner-up's cost, SLA capacity and TTFT P99 at the demand, each with its difference
    from the plan's in brackets: what it gives up, or gains."""
    month = units.HOURS_PER_MONTH
    parts = []
    if x.cost_per_hour_usd is not None:
        cost = f"${x.cost_per_hour_usd * month:,.0f}/month"
        if plan.cost_per_hour_usd is not None:
            d = (x.cost_per_hour_usd - plan.cost_per_hour_usd) * month
            cost += f" ({'+' if d >= 0 else '-'}${abs(d):,.0f})"
        parts.append(cost)
    d = x.sla_capacity_rps - plan.sla_capacity_rps
    parts.append(f"{x.sla_capacity_rps:,.3g} req/s ({d:+,.2f})")
    d = x.ttft_s["p99"] - plan.ttft_s["p99"]
    parts.append(f"TTFT P99 {_s(x.ttft_s['p99'])} ({d:+,.2f})")
    return ", ".join(parts)


def intra_dc_note(s: Scenario) -> str:
    """Why ``solve`` lists no intra-DC PD, and what ``compare`` relaxes to plan it."""
    pd = [
        d for d, dc in s.datacenters.items() if "prefill" in dc.roles and "main_decode" in dc.roles
    ]
    if pd:
        return f"Intra-DC PD in {', '.join(pd)} has no plan at the demand."
    lacking = "; ".join(
        f"{d} runs no {' and no '.join(r.replace('_', ' ') for r in ('prefill', 'main_decode') if r not in dc.roles)}"
        for d, dc in s.datacenters.items()
    )
    return (
        f"No intra-DC PD in this scenario ({lacking}): `pddplan compare` plans it with those "
        "roles allowed."
    )


def _relaxations(r: PlanResult) -> Table:
    t = Table(
        title="Why it is infeasible: the smallest relaxation of each limit", box=box.SIMPLE_HEAD
    )
    for col in ("limit relaxed", "factor", "what it takes"):
        t.add_column(col, justify="right" if col == "factor" else "left")
    unhelpful: dict[str, list[str]] = {}  # message -> the limits it is said of
    for relax in r.relaxations:
        if relax.factor is None and relax.family != "options" and relax.keys:
            unhelpful.setdefault(relax.message, []).append(relax.family)
            continue
        t.add_row(relax.family, f"{relax.factor:.3g}" if relax.factor else "—", relax.message)
    for message, families in unhelpful.items():
        if len(families) > 1:
            message = message.replace("relaxing it alone", "relaxing any one alone")
        t.add_row(", ".join(families), "—", message)
    return t


def _marginals(r: PlanResult) -> Table:
    e = r.evaluation
    demand = f"{e.demand_rps:g}" if e is not None else "the demand"
    m = grid(
        "One step more or less",
        ("change", "Δ $/month", "Δ SLA cap.\nreq/s", f"TTFT P99\nat {demand}", "BCR after"),
        text=0,
    )
    for change in r.marginals:
        m.add_row(
            change.change,
            f"{change.d_cost_per_hour_usd * units.HOURS_PER_MONTH:+,.0f}",
            f"{change.d_sla_capacity_rps:+,.2f}",
            _s(change.ttft_p99_s),
            num(change.bcr, ",.4f") if change.bcr else "—",
        )
    m.caption = (
        "each change evaluated: + buys one purchase step more, - one less (or drops the "
        "pool); —: it meets the SLA at no rate"
    )
    m.caption_justify = "left"
    return m


def _bcr_steps(r: PlanResult, s: Scenario) -> Table:
    st = r.stats
    steps = grid("BCR against cost", ("$/hour", "SLA capacity\nreq/s", "BCR", "deployment"), text=3)
    for x in r.bcr_steps:
        mark = " <- plan" if x.plan else ""
        steps.add_row(
            f"{x.cost_per_hour_usd:,.2f}",
            f"{x.sla_capacity_rps:,.2f}",
            f"{x.bcr:.4f}{mark}",
            x.deployment,
        )
    plateau = s.search.bcr_plateau
    bound = st.bcr_bound
    steps.caption = (
        f"the plans the search evaluated; the plan: the cheapest within {plateau:.0%} of "
        f"the proven bound {num(bound, '.4f')}"
    )
    if bound and st.bcr_best and (bound - st.bcr_best) / bound > plateau:
        steps.caption += (
            f"; the best found ({st.bcr_best:.4f}) is more than {plateau:.0%} below the "
            "bound: the search stopped early"
        )
    return steps


def _solver(r: PlanResult) -> Table:
    st = r.stats
    solver = _solver_table(st.solver, st.status)
    solver.add_row("time", f"{st.seconds:.2f} s")
    solver.add_row("MILP solves", str(st.milp_solves))
    if st.settled:
        solver.add_row("rates settled without a MILP", str(st.settled))
    solver.add_row("check-and-cut rounds", str(st.check_rounds))
    if st.rate_point_budget:  # the MILP's search (not --method enumerate)
        solver.add_row("rates priced", f"{st.rate_points:,} of {st.rate_point_budget:,}")
        if st.milp_solves:
            solver.add_row("MILP nodes", f"{st.milp_nodes:,}")
            solver.add_row("node limit per MILP", f"{st.node_limit:,}")
    for rejected in st.rejected:
        solver.add_row(
            "rejected",
            f"{rejected.deployment}: {rejected.sla_capacity_rps:,.3g} of "
            f"{rejected.rate_rps:,.3g} req/s",
        )
    if st.objective == MAX_BCR:
        solver.add_row("Dinkelbach iterations", str(st.iterations))
        bound = st.bcr_bound
        proven = bound is not None and math.isfinite(bound)
        solver.add_row("BCR upper bound", num(bound, ",.5f") if proven else "none proven")
    elif st.objective == MAX_CAPACITY:
        solver.add_row("rates tried", str(st.iterations))
    solver.add_row("gap", f"{st.gap:.3%}" if st.gap is not None else "—")
    if st.gap_note:
        solver.caption = f"No gap or bound: {st.gap_note}."
        solver.caption_justify = "left"
    if st.milp_solves:
        solver.add_row("model size", f"{st.variables} variables, {st.constraints} constraints")
    ru = r.runner_ups
    if ru is not None:
        solver.add_row("families", f"{ru.families}, {len(ru.rows)} runner-ups shown")
    return solver


def stop_note(status: PlanStatus, reason: str | None, has_plan: bool) -> str:
    """What a search that stopped before proving its answer returned, and whether the
    answer would be the same on another machine."""
    found = "the best plan found, not proven optimal" if has_plan else "no plan found by then"
    if status == PlanStatus.TIME_LIMIT:
        return (
            f"Stopped at {reason or 'the time limit'}: {found}. How far a search gets in a "
            "time depends on the machine: the answer may differ on a faster one."
        )
    return (
        f"Stopped at {reason or 'a work budget'}: {found}. The budgets count work, so the "
        "answer is the same on any machine."
    )


def _solver_table(backend: str, status: str) -> Table:
    """The solver's figures, its backend and status first (the caller adds the rest)."""
    t = Table(title="Solver", box=box.SIMPLE_HEAD)
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_row("backend", backend)
    t.add_row("status", status)
    return t


def cost_report(fleet: Fleet, cost: FleetCost) -> Table:
    """``pddplan evaluate --cost-only``: what the deployment costs, pool by pool."""
    t = Table(title=f"Cost of {fleet.name}", box=box.SIMPLE_HEAD)
    for col in ("DC", "role", "chip", "GPUs", "owned", "$/hour"):
        t.add_column(col, justify="left" if col in ("DC", "role", "chip") else "right")
    for p, c, owned in zip(fleet.pools, cost.pools, cost.owned_gpus, strict=True):
        gpus = p.gpus_per_instance * p.instances
        t.add_row(p.datacenter, ROLE_SHORT[p.role], p.chip, str(gpus), str(owned), num(c, ",.2f"))
    for x, c in zip(fleet.links, cost.links, strict=True):
        t.add_row("-".join(x.between), "link", f"{x.gbps:g} Gbps", "", "", num(c, ",.2f"))
    total = cost.total
    gpus = sum(p.gpus_per_instance * p.instances for p in fleet.pools)
    t.add_row("total", "", "", str(gpus), str(sum(cost.owned_gpus)), num(total, ",.2f"))
    month = "—" if total is None else f"${total * units.HOURS_PER_MONTH:,.0f}"
    t.caption = (
        f"per month {month}; "
        + price_basis_text(cost.basis, sum(cost.owned_gpus))
        + ("; no price for " + ", ".join(cost.missing) if cost.missing else "")
        + "; egress per GB not included (no traffic without an evaluation)"
    )
    return t


def robust_report(r: RobustResult, s: Scenario) -> Group:
    """``pddplan solve`` for a scenario with workload variants: the shared fleet, each
    variant at it (latency against the SLA, utilizations, headroom), the weighted
    variants' mixture, the price of robustness and the single-variant plans under every
    variant."""
    parts: list[Any] = []
    month = units.HOURS_PER_MONTH
    if r.cost_per_hour_usd is None or not r.variants:
        parts.append(Text(f"{r.scenario}: no robust plan (status {r.status})", style="bold yellow"))
        parts += [Text(n) for n in r.notes]
        return Group(*parts)
    fleet = r.variants[0].fleet
    basis = r.variants[0].evaluation.price_basis
    bought = "; ".join(
        f"{'buy' if basis.get(p.chip) == 'buy' else 'rent'} {p.instances} x "
        f"{p.gpus_per_instance} {p.chip} ({p.role}) in {p.datacenter}"
        for p in fleet.pools
    )
    owned = r.variants[0].evaluation.owned_gpus
    if owned:
        bought += f" ({owned} of these GPUs already owned)"
    links = ", ".join(f"lease {x.gbps:g} Gbit/s {'-'.join(x.between)}" for x in fleet.links)
    verdict = "holds" if r.confirmed else "does NOT hold"
    parts.append(
        Text(
            f"{bought[:1].upper()}{bought[1:]}; {links}: ${r.cost_per_hour_usd * month:,.0f}/month. One fleet for "
            f"{len(r.variants)} workload variants; the SLA {verdict} on every must-meet "
            "variant and on the weighted variants' mixture.",
            style="bold",
        )
    )
    parts.append(
        Text(
            f"{r.scenario}: objective min-cost over workload variants, status {r.status}",
            style="green" if r.status == PlanStatus.OPTIMAL else "bold yellow",
        )
    )
    t = grid(
        "Each variant at the shared fleet",
        ("variant", "kind", "rate\nreq/s", "SLA cap.\nreq/s", "TTFT P90\ns", "TTFT P99\ns",
         "TPOT P99\nms", "busy\nP/RLD/MD"),
        text=1,
    )  # fmt: skip
    routers = grid("Each variant's router", ("variant", "relay if payload", "singular if out"))
    for v in r.variants:
        e = v.evaluation
        kind = "must" if v.weight is None else f"w{v.weight:g} x{v.tail_scale:g}"
        busy = {p.role: p.utilization for p in e.pools}
        t.add_row(
            v.name + ("" if v.meets else " (misses)"),
            kind,
            f"{v.rate_rps:,.2f}",
            f"{e.sla_capacity_rps:,.2f}",
            f"{e.ttft_s['p90']:.2f}",
            f"{e.ttft_s['p99']:.2f}",
            f"{e.tpot_ms['p99']:.1f}",
            "/".join(
                f"{busy[role]:.0%}" if role in busy else "—"
                for role in ("prefill", "relay_decode", "main_decode")
            ),
        )
        routing = e.routing
        relay = routing["relay_above_mb"]
        routers.add_row(
            v.name,
            "never" if relay is None else f"> {relay:,.1f} MB",
            f"<= {routing['singular_max_output_tokens']} tokens"
            if relay is not None and routing["singular_max_output_tokens"]
            else "—",
        )
    caption = (
        f"SLA: TTFT P90 {s.sla.ttft_p90_s:g} s, P99 {s.sla.ttft_p99_s:g} s, TPOT "
        f"{s.sla.tpot_ms:g} ms. SLA cap.: the capacity under that variant (its headroom "
        "over the rate); busy: each role's pool at the rate. w x: a weighted variant's "
        "weight and the share of the tail budgets it was planned for"
    )
    if r.mixture is not None:
        (_, b90), (_, b99) = TAIL_BUDGETS
        caption += (
            f". Weighted mixture: {r.mixture[0]:.2%} of requests above the TTFT P90 bound "
            f"(budget {b90:.0%}), {r.mixture[1]:.3%} above P99 (budget {b99:.0%}); a weighted "
            "variant's share is one that fits the budgets, not the only one"
        )
    t.caption = caption
    t.caption_justify = "left"
    parts += [t, routers]
    if r.singles:
        names = [v.name for v in r.variants]
        c = grid("Each variant planned alone, under every variant", ("plan", "$/month", *names))
        breaks: dict[str, str] = {}
        for p in r.singles:
            cells = []
            for u in names:
                check = next((x for x in p.under if x.variant == u), None)
                if check is None:
                    cells.append("—")
                elif check.serves:
                    cells.append(f"ok {num(check.capacity_rps, ',.2f')}")
                else:
                    mark = breaks.setdefault(_first_limit(check.breaks), f"[{len(breaks) + 1}]")
                    cells.append(f"breaks {mark}")
            cost = num(
                p.cost_per_hour_usd * month if p.cost_per_hour_usd is not None else None, ",.0f"
            )
            c.add_row(p.name, cost, *cells)
        price = r.price_of_robustness_usd_per_hour
        c.caption = (
            "each plan's hardware with the routing that serves the variant, if any (ok: its "
            "SLA capacity, req/s). Price of robustness against the dearest single plan: "
            + (
                f"{'+' if price >= 0 else '-'}${abs(price) * month:,.0f}/month"
                if price is not None
                else "—"
            )
            + "".join(f". {mark}: {limit}" for limit, mark in breaks.items())
        )
        c.caption_justify = "left"
        parts.append(c)
    solver = _solver_table(r.solver, r.status)
    solver.add_row("time (counts and MILP)", f"{r.seconds:.2f} s")
    solver.add_row("gap", f"{r.gap:.3%}" if r.gap is not None else "—")
    solver.add_row(
        "model size",
        f"{r.variables} variables, {r.constraints} constraints"
        if r.variables
        else "none: a single plan met the bound",
    )
    parts.append(solver)
    parts += [Text(n) for n in r.notes]
    return Group(*parts)


def _first_limit(failures: str) -> str:
    """The first limit of a '; '-joined failure list, shortened for a cell."""
    first = failures.split("; ")[0] if failures else "no routing serves it"
    return first.removeprefix("the ")
