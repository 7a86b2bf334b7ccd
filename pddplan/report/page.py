"""The shareable report's content (``pddplan report``, ``solve --report``), built from a
plan file's JSON (``solve --out``) and, for the figures the file does not hold, figures the
caller computes (the TTFT distribution, ``pddplan.ttft_cdf``; a sweep's saved results,
``pddplan.read_sweep``). One ``Page`` of sections, each paragraphs, tables and figures,
which ``report.html`` and ``report.markdown`` write alike, so both formats say the same.

Numbers read as in the terminal report (``report.format``): $/month with thousands
separators, shares as percentages, seconds to two decimals.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pddplan import units
from pddplan.report.format import MISSING, money, num
from pddplan.report.tables import SEGMENT_LABELS
from pddplan.spec.choices import MAX_BCR, MAX_CAPACITY
from pddplan.spec.scenario import ROLE_SHORT

if TYPE_CHECKING:
    from pddplan.spec.scenario import Scenario
    from pddplan.sweeps.engine import SweepRun


@dataclass(frozen=True)
class Para:
    """A paragraph; ``kind``: ``lead`` (the verdict), ``note`` (quieter), ``warn``."""

    text: str
    kind: str = ""


@dataclass(frozen=True)
class Table:
    """A table: its heads, its rows of cells (text), which columns hold numbers (set
    right-aligned on a wide screen), a title above and a caption below."""

    heads: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: tuple[bool, ...]
    title: str = ""
    caption: str = ""


@dataclass(frozen=True)
class Image:
    png: bytes
    size: tuple[int, int]
    """Width, height in pixels."""


@dataclass(frozen=True)
class Figure:
    """A figure: its file name (``NAME.png`` beside a Markdown report), its caption, a
    text alternative that gives its figures, and its image, with one drawn for a narrow
    screen where the layout changes."""

    name: str
    caption: str
    alt: str
    wide: Image
    narrow: Image | None = None


Part = Para | Table | Figure


@dataclass(frozen=True)
class Section:
    id: str
    """The section's anchor (``#fleet``), the same in every report."""
    title: str
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class Page:
    title: str
    subtitle: str
    sections: tuple[Section, ...]
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def figures(self) -> list[Figure]:
        return [p for s in self.sections for p in s.parts if isinstance(p, Figure)]


PLAN_SECTIONS = (
    "verdict",
    "fleet",
    "costs",
    "runner-ups",
    "latency",
    "utilization",
    "sensitivity",
    "router",
    "about",
)
"""The sections of a plan's report, in order (``sweep`` comes before ``about`` when a
sweep's results are given)."""
SWEEP_SECTIONS = ("sweep", "about")
"""The sections of a sweep's report alone."""
ROLE_WORDS = "P prefill, RLD relay decode, MD main decode"


def _pct(x: float | None) -> str:
    return MISSING if x is None else f"{x:.0%}"


def _s(x: float | None) -> str:
    return MISSING if x is None or not math.isfinite(x) else f"{x:,.2f} s"


def _month(per_hour: float | None) -> str:
    return MISSING if per_hour is None else f"${per_hour * units.HOURS_PER_MONTH:,.0f}"


def _signed_money(x: float) -> str:
    return f"{'+' if x >= 0 else '-'}${abs(x):,.0f}"


def _figure(name: str, caption: str, alt: str, draw: Any, narrow: bool = True) -> Figure:
    """A report figure: ``draw(size)`` makes the matplotlib figure at a size, drawn wide
    and (``narrow``) phone-wide."""
    from pddplan.report import plots

    wide = Image(*plots.png(draw(plots.WIDE)))
    small = Image(*plots.png(draw(plots.NARROW))) if narrow else None
    return Figure(name, caption, alt, wide, small)


# --- a plan -------------------------------------------------------------------------------------
def plan_page(
    plan: dict[str, Any],
    scenario: Scenario,
    cdf: list[tuple[float, float]] | None,
    *,
    sweep: SweepRun | None = None,
    metric: str | None = None,
    version: str = "",
) -> Page:
    """A plan file's report: its verdict, fleet, costs, runner-ups, TTFT (by segment, and
    its distribution ``cdf`` at the demand: ``pddplan.ttft_cdf``), utilization,
    sensitivity and router rules, a sweep's figures when given, and where it came from.
    ``scenario``: the scenario the plan carries (``pddplan.plan_problem``'s)."""
    sections = [
        _verdict(plan, scenario),
        _fleet(plan, scenario),
        _costs(plan),
        _runner_ups(plan, scenario),
        _latency(plan, scenario, cdf),
        _utilization(plan, scenario),
        _sensitivity(plan),
        _router(plan),
    ]
    if sweep is not None:
        sections.append(sweep_section(sweep, metric))
    sections.append(_about(plan, version))
    demand = plan.get("demand_rps")
    return Page(
        title=f"Plan for {plan.get('scenario', '?')}",
        subtitle=f"{plan.get('model', '?')} at {num(demand, ',.4g')} req/s; objective "
        f"{plan.get('objective', '?')}; status {plan.get('status', '?')}",
        sections=tuple(sections),
        meta={"scenario": str(plan.get("scenario", "")), "kind": "plan"},
    )


def _objective_words(plan: dict[str, Any], scenario: Scenario) -> str:
    objective = plan.get("objective")
    if objective == MAX_BCR:
        return "the most SLA capacity per dollar"
    if objective == MAX_CAPACITY:
        budget = scenario.budget_usd_per_hour or 0.0
        return f"the most SLA capacity for ${budget * units.HOURS_PER_MONTH:,.0f}/month"
    return f"the cheapest fleet for {plan.get('planned_rps', 0.0):,.3g} req/s"


def key_figures(plan: dict[str, Any], scenario: Scenario) -> str:
    """The plan's TTFT and TPOT at the demand against the SLA, in a sentence."""
    sla, t, tpot = scenario.sla, plan["ttft_s"], plan["tpot_ms"]
    return (
        f"At {plan['demand_rps']:g} req/s: TTFT P90 {_s(t['p90'])} (SLA {sla.ttft_p90_s:g} s), "
        f"P99 {_s(t['p99'])} (SLA {sla.ttft_p99_s:g} s); TPOT {tpot['step']:.1f} ms, P99 gap "
        f"{tpot['p99']:.1f} ms (SLA {sla.tpot_ms:g} ms)."
    )


def _verdict(plan: dict[str, Any], scenario: Scenario) -> Section:
    from pddplan.plan.results import ErrorMargin

    parts: list[Part] = []
    verdict = plan.get("verdict") or {}
    if verdict.get("text"):
        parts.append(Para(verdict["text"], "lead"))
    margin = plan.get("error_margin")
    if isinstance(margin, dict):
        parts.append(Para(ErrorMargin(**margin).text, "warn"))
    else:
        parts.append(Para("Not priced at the 90th percentile of the model's error.", "note"))
    solver = plan.get("solver") or {}
    status = str(plan.get("status"))
    gap = solver.get("gap")
    if gap:
        status += f" (gap {gap:.2%})"
    if solver.get("stop_reason"):
        status += f", stopped at {solver['stop_reason']}"
    parts.append(Para(f"{plan.get('scenario')}: {_objective_words(plan, scenario)}; {status}."))
    parts.append(Para(key_figures(plan, scenario)))
    if plan.get("evaluation_status") not in (None, "ok"):
        parts.append(Para(f"Evaluation status: {plan['evaluation_status']}.", "warn"))
    parts += [Para(f"Binds at the SLA capacity: {b}.", "note") for b in plan.get("binding", [])]
    parts += [
        Para(f"Note: {n}", "warn")
        for n in [*plan.get("notes", []), *plan.get("idle_pools", []), *plan.get("left_out", [])]
    ]
    v = plan.get("verification")
    if isinstance(v, dict):
        word = "confirmed" if v.get("confirmed") else "NOT confirmed"
        parts.append(Para(f"Simulated (solve --verify): {word}. {v.get('message') or ''}".strip()))
    return Section("verdict", "Verdict", tuple(parts))


def _headroom(capacity: float, demand: float) -> str:
    if not demand:
        return "headroom —"
    h = capacity / demand - 1
    return f"{h + 1:,.3g}x the demand" if h >= 1 else f"headroom {h:+.0%}"


def _cache_text(plan: dict[str, Any]) -> str:
    c = plan.get("md_cache") or {}
    gb, hit, tiers = c.get("gb_per_gpu"), c.get("mean_hit"), c.get("tiers")
    if tiers:
        below = [f"{tiers[k]:g} GB {name}" for k, name in
                 (("dram_gb_per_gpu", "DRAM"), ("ssd_gb_per_gpu", "SSD")) if tiers.get(k)]  # fmt: skip
        size = "HBM" + "".join(f" + {x}" for x in below) + (" per MD GPU" if below else "")
    else:
        size = "from the workload" if gb is None else f"{gb:g} GB per MD GPU"
    return f"decode-side cache: {size}, mean MD hit {_pct(hit)}"


def _engine_note(plan: dict[str, Any]) -> str:
    engine = plan.get("engine") or {}
    if not engine:
        return ""
    q = engine.get("perf_quantile", 0.5)
    at = "" if q == 0.5 else f" at the error's P{q * 100:g}"
    return f" ({engine.get('id')} pass times{at})"


def _fleet(plan: dict[str, Any], scenario: Scenario) -> Section:
    rows = []
    for p in plan.get("pools", []):
        rows.append((p["datacenter"], ROLE_SHORT.get(p["role"], p["role"]), p["chip"],
                     p["layout"].replace("+", " + "), f"{p['instances']} × {p['gpus_per_instance']}",
                     num(p.get("cost_per_hour_usd"), ",.2f"), _pct(p.get("utilization")),
                     _pct(p.get("utilization_at_capacity"))))  # fmt: skip
    for x in plan.get("links", []):
        a, b = x["between"]
        rows.append((a, "WAN", f"to {b}", f"{x['gbps']:g} Gbit/s", "",
                     num(x.get("cost_per_hour_usd"), ",.2f"), _pct(x.get("utilization")),
                     _pct(x.get("utilization_at_capacity"))))  # fmt: skip
    demand, capacity = plan["demand_rps"], plan["sla_capacity_rps"]
    caption = (
        f"{ROLE_WORDS}; busy at the demand ({demand:g} req/s) and at the SLA capacity "
        f"({capacity:,.3g} req/s, {_headroom(capacity, demand)}), capped at "
        f"{scenario.search.max_utilization:.0%}; {_cache_text(plan)}. "
        f"{plan.get('total_gpus', 0):,} GPUs in all; deployment id {plan.get('deployment_id', MISSING)}."
    )
    table = Table(
        ("DC", "role", "chip", "layout", "instances × GPUs", "$/hour", "busy at demand",
         "busy at capacity"),
        tuple(rows),
        (False, False, False, False, True, True, True, True),
        title=f"Fleet {plan.get('name', '')}{_engine_note(plan)}",
        caption=caption,
    )  # fmt: skip
    return Section("fleet", "Fleet", (table,))


def _costs(plan: dict[str, Any]) -> Section:
    cost, demand = plan.get("cost_per_hour_usd"), plan["demand_rps"]
    rows = (
        ("cost per month", _month(cost)),
        ("cost per hour", money(cost)),
        ("SLA capacity vs demand", f"{plan['sla_capacity_rps']:,.2f} vs {demand:g} req/s"),
        ("BCR (capacity per $/hour)", num(plan.get("bcr"), ",.4f")),
        (f"$ per million output tokens at the demand ({demand:g} req/s)",
         money(plan.get("usd_per_million_output_tokens"))),
        ("$ per million output tokens at the SLA capacity",
         money(plan.get("usd_per_million_output_tokens_at_capacity"))),
    )  # fmt: skip
    from pddplan.report.plan import price_basis_text

    basis = price_basis_text(plan.get("price_basis") or {}, plan.get("owned_gpus") or 0)
    caption = f"{basis[:1].upper()}{basis[1:]}; a month is {units.HOURS_PER_MONTH:g} hours."
    return Section(
        "costs", "Costs", (Table(("figure", "value"), rows, (False, True), caption=caption),)
    )


def fleet_text(deployment: dict[str, Any]) -> str:
    """A deployment in a line: ``P 1 x 8 h100-sxm (east) + MD 1 x 8 a100-80g-sxm (west); 40
    Gbit/s east-west``."""
    pools = " + ".join(
        f"{ROLE_SHORT.get(p['role'], p['role'])} {p['instances']} x {p['gpus_per_instance']} "
        f"{p['chip']} ({p['datacenter']})"
        for p in deployment.get("pools", [])
    )
    links = ", ".join(
        f"{x['gbps']:g} Gbit/s {'-'.join(x['between'])}" for x in deployment.get("links", [])
    )
    return pools + (f"; {links}" if links else "")


def _runner_ups(plan: dict[str, Any], scenario: Scenario) -> Section:
    from pddplan.report.plan import intra_dc_note

    ru = plan.get("runner_ups")
    month = units.HOURS_PER_MONTH
    cost = plan.get("cost_per_hour_usd")
    capacity, p99 = plan["sla_capacity_rps"], plan["ttft_s"]["p99"]
    rows = [("plan", "this plan", _month(cost), f"{capacity:,.3g}", _s(p99),
             fleet_text(plan.get("deployment") or {}))]  # fmt: skip
    points = [("plan", capacity, (cost or 0.0) * month)]
    parts: list[Part] = []
    if not isinstance(ru, dict):
        parts.append(Para("No runner-ups were planned (solve --top 0).", "note"))
        ru = {"rows": [], "unserved": [], "stopped": None}
    for i, x in enumerate(ru.get("rows", []), 1):
        c = x.get("cost_per_hour_usd")
        money_cell = _month(c)
        if c is not None and cost is not None:
            money_cell += f" ({_signed_money((c - cost) * month)})"
        cap = x["sla_capacity_rps"]
        rows.append((str(i), x["family"]["label"], money_cell,
                     f"{cap:,.3g} ({cap - capacity:+,.2f})",
                     f"{_s(x['ttft_s']['p99'])} ({x['ttft_s']['p99'] - p99:+,.2f})",
                     x.get("deployment_text", "")))  # fmt: skip
        if c is not None:
            points.append((str(i), cap, c * month))
    table = Table(
        ("#", "family", "$/month", "SLA capacity, req/s", "TTFT P99 at the demand", "fleet"),
        tuple(rows),
        (True, False, True, True, True, False),
        title=f"Runner-ups at {plan.get('planned_rps', 0.0):,.3g} req/s, each family's cheapest",
        caption="In brackets: the difference from the plan. A family is an architecture "
        "and a chip per role; each row is that family's cheapest plan for the demand.",
    )
    parts.append(table)
    if ru.get("unserved"):
        names = "; ".join(f["label"] for f in ru["unserved"])
        parts.append(Para(f"No plan at the demand for {names}.", "note"))
    if not _intra_dc_allowed(scenario):
        parts.append(Para(intra_dc_note(scenario), "note"))
    if ru.get("stopped"):
        parts.append(
            Para(f"Runner-ups stopped at {ru['stopped']}: the list may miss some.", "warn")
        )
    if len(points) > 1:
        listed = "; ".join(
            f"{label}: {cap:,.3g} req/s, ${m:,.0f}/month" for label, cap, m in points
        )
        parts.append(_figure(
            "cost-capacity",
            "Cost against SLA capacity: the plan (star) and each runner-up (numbered as in "
            f"the table), in $/month; the dashed line is the demand ({plan['demand_rps']:g} "
            "req/s). Left of it a plan would not serve the demand; lower is cheaper.",
            f"Cost against SLA capacity. {listed}.",
            lambda size: _plots().cost_capacity_figure(points, plan["demand_rps"], size=size),
        ))  # fmt: skip
    return Section("runner-ups", "Runner-ups", tuple(parts))


def _intra_dc_allowed(scenario: Scenario) -> bool:
    return any(
        "prefill" in dc.roles and "main_decode" in dc.roles for dc in scenario.datacenters.values()
    )


def _plots() -> Any:
    from pddplan.report import plots

    return plots


def _latency(
    plan: dict[str, Any], scenario: Scenario, cdf: list[tuple[float, float]] | None
) -> Section:
    sla, t, tpot, demand = scenario.sla, plan["ttft_s"], plan["tpot_ms"], plan["demand_rps"]
    latency = Table(
        ("metric", "predicted", "SLA"),
        (
            ("TTFT P50", _s(t["p50"]), ""),
            ("TTFT P90", _s(t["p90"]), f"{sla.ttft_p90_s:g} s"),
            ("TTFT P99", _s(t["p99"]), f"{sla.ttft_p99_s:g} s"),
            ("TPOT (decode step)", f"{tpot['step']:.1f} ms", f"{sla.tpot_ms:g} ms"),
            ("TPOT P99 gap (handoff stalls)", f"{tpot['p99']:.1f} ms", f"{sla.tpot_ms:g} ms"),
        ),
        (False, True, True),
        title=f"Latency at the demand ({demand:g} req/s)",
    )
    columns = {
        f"at the demand, {demand:,.3g} req/s": plan.get("ttft_breakdown_s"),
        f"at the SLA capacity, {plan['sla_capacity_rps']:,.3g} req/s": plan.get(
            "ttft_breakdown_at_capacity_s"
        ),
    }
    shown = {k: v for k, v in columns.items() if isinstance(v, dict)}
    rows = [
        (label, *(_s(v.get(key)) for v in shown.values())) for key, label in SEGMENT_LABELS.items()
    ]
    totals = []
    for v in shown.values():
        values = [v.get(k) for k in SEGMENT_LABELS]
        totals.append(_s(sum(values)) if all(x is not None for x in values) else MISSING)  # type: ignore[arg-type]
    rows.append(("mean TTFT", *totals))
    segments = Table(
        ("segment", *shown),
        tuple(rows),
        (False, *(True for _ in shown)),
        title="TTFT by segment, mean",
        caption="Each segment's mean over the request mix; their sum is the mean TTFT. The "
        "queue waits for a prefill pass; the KV cache goes to main decode (over the WAN) or "
        "to relay decode (RDMA beside prefill); the first token is the decode side's first "
        "step.",
    )
    parts: list[Part] = [latency, segments]
    if cdf:
        bounds = {"p90": sla.ttft_p90_s, "p99": sla.ttft_p99_s}
        predicted = {"p90": t.get("p90"), "p99": t.get("p99")}
        alt = (
            f"TTFT distribution at {demand:g} req/s: P50 {_s(t['p50'])}, P90 {_s(t['p90'])}, "
            f"P99 {_s(t['p99'])}; the SLA's bounds P90 {sla.ttft_p90_s:g} s, P99 "
            f"{sla.ttft_p99_s:g} s."
        )
        parts.append(_figure(
            "ttft-distribution",
            f"The predicted TTFT distribution at the demand ({demand:g} req/s): the share of "
            "requests whose first token comes within a time, on a logit scale so that P90 and "
            f"P99 stand apart. Dashed: the SLA's bounds (P90 {sla.ttft_p90_s:g} s, P99 "
            f"{sla.ttft_p99_s:g} s); dots: the predicted P90 and P99. The curve must cross "
            "each dotted level left of its bound.",
            alt,
            lambda size: _plots().ttft_cdf_figure(cdf, bounds, predicted, demand, size=size),
        ))  # fmt: skip
    return Section("latency", "Time to first token", tuple(parts))


def _utilization(plan: dict[str, Any], scenario: Scenario) -> Section:
    rows: list[tuple[str, float | None, float | None]] = []
    for p in plan.get("pools", []):
        rows.append((f"{ROLE_SHORT.get(p['role'], p['role'])} {p['chip']} ({p['datacenter']})",
                     p.get("utilization"), p.get("utilization_at_capacity")))  # fmt: skip
    for x in plan.get("links", []):
        rows.append((f"WAN {'-'.join(x['between'])} {x['gbps']:g} Gbit/s", x.get("utilization"),
                     x.get("utilization_at_capacity")))  # fmt: skip
    cap = scenario.search.max_utilization
    table = Table(
        ("pool or link", "busy at the demand", "busy at the SLA capacity"),
        tuple((name, _pct(a), _pct(b)) for name, a, b in rows),
        (False, True, True),
    )
    alt = "Busy share of each pool and link: " + "; ".join(
        f"{name} {_pct(a)} at the demand, {_pct(b)} at capacity" for name, a, b in rows
    )
    figure = _figure(
        "utilization",
        f"How busy each pool and link is at the demand ({plan['demand_rps']:g} req/s) and at "
        f"the SLA capacity ({plan['sla_capacity_rps']:,.3g} req/s), against the {cap:.0%} cap "
        "the planner keeps every pool and link under.",
        alt + ".",
        lambda size: _plots().utilization_figure(rows, cap, size=size),
    )
    return Section("utilization", "Utilization", (table, figure))


def _sensitivity(plan: dict[str, Any]) -> Section:
    demand = plan["demand_rps"]
    rows = tuple(
        (m["change"], f"{m['d_cost_per_hour_usd'] * units.HOURS_PER_MONTH:+,.0f}",
         f"{m['d_sla_capacity_rps']:+,.2f}", _s(m.get("ttft_p99_s")),
         num(m.get("bcr"), ",.4f") if m.get("bcr") else MISSING)
        for m in plan.get("marginals", [])
    )  # fmt: skip
    if not rows:
        return Section(
            "sensitivity", "Sensitivity", (Para("No one-step changes were evaluated.", "note"),)
        )
    table = Table(
        (
            "change",
            "Δ $/month",
            "Δ SLA capacity, req/s",
            f"TTFT P99 at {demand:g} req/s",
            "BCR after",
        ),
        rows,
        (False, True, True, True, True),
        title="One step more or less",
        caption="Each change evaluated: + buys one purchase step more (or a link a tier up), "
        "- one less (or drops the pool); —: it meets the SLA at no rate.",
    )
    return Section("sensitivity", "Sensitivity", (table,))


def _router(plan: dict[str, Any]) -> Section:
    r = plan.get("routing") or {}
    rules: list[tuple[str, str]] = []
    if r.get("relay_above_mb") is None:
        rules.append(("relay through RLD", "never: every request P -> MD"))
    else:
        rules.append(("relay through RLD", f"WAN payload above {r['relay_above_mb']:,.2f} MB"))
        singular = r.get("singular_max_output_tokens")
        rules.append(
            ("finish on RLD (singular)", f"max_tokens <= {singular:,}" if singular else "never")
        )
        cu = r.get("catch_up_above_tokens")
        rules.append(("hand off to MD", "in one extend step" if cu is None else
                      f"in {r.get('chunk_tokens')}-token chunks above {cu:,} eager tokens"))  # fmt: skip
    names = {"p_md": "P -> MD", "p_rld_md": "P -> RLD -> MD", "singular": "P -> RLD (singular)"}
    for key, share in (plan.get("pipelines") or {}).items():
        rules.append((f"share {names.get(key, key)}",
                      f"{_pct(share['requests'])} of requests, {_pct(share['output_tokens'])} of tokens"))  # fmt: skip
    router = plan.get("router") or {}
    caption = f"RLD produces {plan.get('rld_token_share', 0.0):.2%} of output tokens."
    if router.get("payload_mb"):
        caption += (
            f" A request's WAN payload, MB: {router['payload_mb']}, with "
            f"kv_bytes_per_token {router.get('kv_bytes_per_token', 0):,.0f} and fixed_bytes "
            f"{router.get('fixed_bytes', 0):,.0f}."
        )
    table = Table(
        ("rule", "setting"), tuple(rules), (False, False), title="Router", caption=caption
    )
    return Section("router", "Router rules", (table,))


def _seconds_taken(x: Any) -> str:
    """A clock reading in seconds; a dash where the file holds none (a golden file's)."""
    return f"{x:.2f} s" if isinstance(x, int | float) and not isinstance(x, bool) else MISSING


def _about(plan: dict[str, Any], version: str) -> Section:
    solver = plan.get("solver") or {}
    rows = [
        *_file_rows(plan),
        ("deployment id", str(plan.get("deployment_id", MISSING))),
        *_engine_rows(plan),
        ("solver", f"{solver.get('solver', MISSING)}, {solver.get('status', MISSING)}, "
         + _seconds_taken(solver.get("seconds")) if solver else MISSING),
        ("written by", f"pddplan {version}".strip()),
    ]  # fmt: skip
    return _about_section(rows, plan.get("scenario_file") or {})


def _file_rows(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """The plan file's format and the scenario it holds (its path and fingerprint)."""
    held = plan.get("scenario_file") or {}
    return [
        ("plan file format", str(plan.get("format", MISSING))),
        ("scenario file", str(held.get("path", MISSING))),
        ("scenario fingerprint", str(held.get("fingerprint", MISSING))),
    ]


def _engine_rows(plan: dict[str, Any]) -> list[tuple[str, str]]:
    """The engine whose pass times the plan assumes, and the error quantile it assumed."""
    engine = plan.get("engine") or {}
    return [
        ("engine", f"{engine.get('name', MISSING)} {engine.get('version', '')}".strip()),
        ("error quantile assumed", f"{engine.get('perf_quantile', 0.5):g}"),
    ]


def _about_section(rows: list[tuple[str, str]], held: dict[str, Any]) -> Section:
    """The "where this comes from" section: ``rows``, with the options the command gave the
    scenario (``held``: the plan file's ``scenario_file``) after the first three."""
    options = held.get("options") or {}
    if options:
        rows.insert(
            3, ("options given to solve", ", ".join(f"{k}={v}" for k, v in options.items()))
        )
    return Section(
        "about", "Where this comes from", (Table(("item", "value"), tuple(rows), (False, False)),)
    )


# --- a robust plan (workload variants) ----------------------------------------------------------
ROBUST_SECTIONS = ("verdict", "fleet", "variants", "singles", "about")
"""The sections of a robust plan's report, in order."""


def robust_page(plan: dict[str, Any], scenario: Scenario, *, version: str = "") -> Page:
    """A robust plan file's report (``solve`` of a scenario with ``workload_variants``): the
    shared fleet's verdict, the fleet (as the first variant sees it), each variant at that
    fleet (its rate, SLA capacity, TTFT, TPOT, router, whether it meets the SLA), each
    variant's own plan under every variant with the price of robustness, and where it came
    from."""
    variants: dict[str, Any] = plan.get("variants") or {}
    if not variants:
        raise ValueError("the robust plan holds no variant")
    first = next(iter(variants.values()))["evaluation"]
    engine = plan.get("engine") or first.get("engine")
    shared = {**first, "deployment_id": plan.get("deployment_id"), "engine": engine}
    cost = plan.get("cost_per_hour_usd")
    holds = "holds" if plan.get("confirmed") else "does NOT hold"
    lead = (
        f"One fleet for {len(variants)} workload variants: {fleet_text(plan['deployment'])}; "
        f"{_month(cost)}/month. The SLA {holds} on every must-meet variant and on the weighted "
        "variants' mixture."
    )
    verdict = [
        Para(lead, "lead"),
        Para(
            f"{plan.get('scenario')}: min-cost over workload variants; status {plan.get('status')}."
        ),
    ]
    verdict += [Para(f"Note: {n}", "warn") for n in plan.get("notes", [])]
    fleet = _fleet(shared, scenario)
    fleet = Section(fleet.id, fleet.title, (*fleet.parts, Para(
        f"Busy shares are those of the first variant, {next(iter(variants))}; each variant's are "
        "in the next table.", "note")))  # fmt: skip
    rows = []
    for name, v in variants.items():
        e = v["evaluation"]
        kind = "must meet" if v.get("must_meet") else f"weight {v.get('weight'):g}"
        relay = (v.get("routing") or {}).get("relay_above_mb")
        rows.append((name + ("" if v.get("meets") else " (misses)"), kind,
                     f"{v['planned_rps']:,.2f}", f"{e['sla_capacity_rps']:,.2f}",
                     _s(e["ttft_s"]["p90"]), _s(e["ttft_s"]["p99"]),
                     f"{e['tpot_ms']['p99']:.1f} ms",
                     "never" if relay is None else f"> {relay:,.1f} MB"))  # fmt: skip
    sla = scenario.sla
    table = Table(
        ("variant", "kind", "rate req/s", "SLA capacity req/s", "TTFT P90", "TTFT P99",
         "TPOT P99", "relay if payload"),
        tuple(rows),
        (False, False, True, True, True, True, True, True),
        title="Each variant at the shared fleet",
        caption=f"SLA: TTFT P90 {sla.ttft_p90_s:g} s, P99 {sla.ttft_p99_s:g} s, TPOT "
        f"{sla.tpot_ms:g} ms; each variant's router is its own (the relay threshold shown).",
    )  # fmt: skip
    singles = []
    names = list(variants)
    for p in plan.get("single_variant_plans", []):
        under = {u["variant"]: u for u in p.get("under", [])}
        cells = []
        for n in names:
            u = under.get(n)
            if u is None:
                cells.append(MISSING)
            elif u.get("serves"):
                cells.append(f"ok {num(u.get('capacity_rps'), ',.2f')}")
            else:
                cells.append("breaks")
        singles.append((p["variant"], _month(p.get("cost_per_hour_usd")), *cells))
    price = plan.get("price_of_robustness_usd_per_hour")
    single_parts: list[Part] = []
    if singles:
        single_parts.append(Table(
            ("plan", "$/month", *names), tuple(singles),
            (False, True, *(True for _ in names)),
            title="Each variant planned alone, under every variant",
            caption="ok: it serves that variant (its SLA capacity, req/s); breaks: it does not. "
            "Price of robustness against the dearest single plan: "
            + (f"{_signed_money(price * units.HOURS_PER_MONTH)}/month" if price is not None else MISSING),
        ))  # fmt: skip
    else:
        single_parts.append(Para("Each variant's own plan was not made (time limit).", "note"))
    solver = {**(plan.get("solver") or {}), "status": plan.get("status")}
    about = {**plan, "engine": engine, "solver": solver}
    return Page(
        title=f"Robust plan for {plan.get('scenario', '?')}",
        subtitle=f"{plan.get('model', '?')}: one fleet for {len(variants)} workload variants; "
        f"status {plan.get('status', '?')}",
        sections=(
            Section("verdict", "Verdict", tuple(verdict)),
            fleet,
            Section("variants", "Each variant", (table,)),
            Section("singles", "Each variant alone", tuple(single_parts)),
            _about(about, version),
        ),
        meta={"scenario": str(plan.get("scenario", "")), "kind": "robust plan"},
    )


# --- a sweep ------------------------------------------------------------------------------------
MAX_SWEEP_ROWS = 60
"""Rows of a sweep's table a report shows (as the terminal table); the rest are counted."""


def sweep_section(run: SweepRun, metric: str | None = None) -> Section:
    """A sweep's saved results: what was varied, its figure (``plots.sweep_figure``), the
    break-evens and its rows."""
    from pddplan.report import plots
    from pddplan.report.sweeps import default_metric
    from pddplan.sweeps import analysis

    chosen = metric or default_metric(run)
    paths = [a.path for a in run.job.axes]
    varied = "; ".join(
        f"{analysis.axis_label(a.path)} ({a.path}): {len(a.values)} values" for a in run.job.axes
    )
    parts: list[Part] = [
        Para(
            f"Sweep of {run.job.scenario}: {len(run.points):,} of {run.total:,} points, "
            f"architectures {', '.join(run.job.settings.architectures)}; varied {varied}."
        )
    ]
    try:
        fig, kind = plots.sweep_figure(run, chosen)
    except ValueError as e:  # three or more axes: no figure fits
        parts.append(Para(f"No figure: {e}.", "note"))
    else:
        image = Image(*plots.png(fig, 90))
        rows_text = "; ".join(
            f"{r['architecture']} at {', '.join(f'{r[p]}' for p in paths)}: "
            f"{money(r['cost_per_month_usd'], 0)}/month"
            for r in analysis.rows(run)[:12]
        )
        parts.append(Figure(
            "sweep",
            f"The sweep's figure ({kind}), judged by {plots.PLOTTED[chosen][0]}: the planned "
            "points as markers; costs per month.",
            f"{kind}. {rows_text}.",
            image,
            Image(*plots.png(plots.narrow_sweep_figure(run, chosen))),
        ))  # fmt: skip
    evens = analysis.break_evens(run, chosen)
    parts += [Para(f"Break-even ({chosen}): {b.text()}.") for b in evens]
    parts += [Para(n, "note") for n in run.notes]
    rows = analysis.rows(run)
    cells = []
    for r in rows[:MAX_SWEEP_ROWS]:
        cells.append((
            *(f"{r[p]:g}" if isinstance(r[p], float) else str(r[p]) for p in paths),
            str(r["architecture"]),
            str(r["status"]),
            money(r["cost_per_month_usd"], 0),
            num(r["sla_capacity_rps"], ",.4g"),
            num(r["bcr"], ",.4g"),
            _s(r["ttft_p99_s"]),
            str(r["fleet"] or r["reason"] or MISSING),
        ))  # fmt: skip
    heads = (*(analysis.axis_label(p) for p in paths), "architecture", "status", "$/month",
             "SLA capacity, req/s", "BCR", "TTFT P99", "fleet or reason")  # fmt: skip
    more = (
        f" {len(rows) - MAX_SWEEP_ROWS:,} more rows are in the results file."
        if len(rows) > MAX_SWEEP_ROWS
        else ""
    )
    parts.append(Table(
        heads,
        tuple(cells),
        (*(True for _ in paths), False, False, True, True, True, True, False),
        title="Each point and architecture",
        caption="BCR: SLA capacity per $/hour; TTFT P99 at the point's demand." + more,
    ))  # fmt: skip
    return Section("sweep", "Sweep", tuple(parts))


def sweep_page(run: SweepRun, metric: str | None = None, *, version: str = "") -> Page:
    """A sweep's saved results alone (``pddplan report sweep.json``)."""
    identity = run.job.identity()
    about = Table(
        ("item", "value"),
        (
            ("scenario", run.job.scenario),
            ("scenario digest", run.job.scenario_digest[:16]),
            ("objective", str(identity["settings"].get("objective") or "the scenario's")),
            ("pass times", run.pass_times or MISSING),
            ("written by", f"pddplan {version}".strip()),
        ),
        (False, False),
    )
    return Page(
        title=f"Sweep of {run.job.scenario}",
        subtitle=f"{len(run.points):,} points; varied " + ", ".join(a.path for a in run.job.axes),
        sections=(sweep_section(run, metric), Section("about", "Where this comes from", (about,))),
        meta={"scenario": run.job.scenario, "kind": "sweep"},
    )


# --- a plan over time (a scenario's horizon) ----------------------------------------------------
HORIZON_SECTIONS = (
    "verdict",
    "purchases",
    "link",
    "periods",
    "capacity",
    "monthly",
    "notes",
    "about",
)
"""The sections of a plan over time's report, in order."""


def _chip_words(key: str) -> str:
    """``cluster-b/h200-sxm`` -> ``h200-sxm in cluster-b``."""
    dc, _, chip = key.partition("/")
    return f"{chip} in {dc}"


def _gpus_text(gpus: dict[str, int] | None) -> str:
    """GPUs per ``DC/CHIP`` in a cell: ``8 h200-sxm (cluster-b)``; a dash for none."""
    parts = []
    for key, n in sorted((gpus or {}).items()):
        dc, _, chip = key.partition("/")
        parts.append(f"{n:,} {chip} ({dc})")
    return "; ".join(parts) or MISSING


def _month_span(first: int, last: int) -> str:
    return f"{first}" if first == last else f"{first}-{last}"


def hours_text(hours: list[int]) -> str:
    """Hours of the day (0-23) as clock ranges: ``[9, ..., 17]`` -> ``9:00-18:00``; a run
    through midnight is one range (``[0, 1, 23]`` -> ``23:00-2:00``)."""
    runs: list[list[int]] = []
    for h in sorted(hours):
        if runs and h == runs[-1][1]:
            runs[-1][1] = h + 1
        else:
            runs.append([h, h + 1])
    if len(runs) > 1 and runs[0][0] == 0 and runs[-1][1] == 24:
        runs[0][0] = runs.pop()[0]
    return ", ".join(f"{a}:00-{b}:00" for a, b in runs)


def in_use(period: dict[str, Any]) -> dict[str, int]:
    """A period's deployment's GPUs by how they are had (``documents.HORIZON_KINDS``): of
    each chip it runs, the owned GPUs first, then the reserved (both are paid for whether
    run or not), the sunk ones it runs, and the rented the rest. Held GPUs beyond what it
    runs (owned ones idle in a quiet hour) are not counted."""
    out = {"sunk": 0, "owned": 0, "reserved": 0, "rented": 0}
    for chip, need in (period.get("gpus") or {}).items():
        owned = min((period.get("owned_gpus") or {}).get(chip, 0), need)
        reserved = min((period.get("reserved_gpus") or {}).get(chip, 0), need - owned)
        sunk = min((period.get("sunk_gpus") or {}).get(chip, 0), need - owned - reserved)
        out["owned"] += owned
        out["reserved"] += reserved
        out["sunk"] += sunk
        out["rented"] += need - owned - reserved - sunk
    return out


def capacity_by_kind(period: dict[str, Any]) -> dict[str, float]:
    """A period's SLA capacity (req/s) shared among how its GPUs are had, in proportion to
    the GPUs of each kind its deployment runs (``in_use``); none for a period without
    demand."""
    gpus = in_use(period)
    total = sum(gpus.values())
    capacity = period.get("sla_capacity_rps")
    if not total or capacity is None:
        return {}
    return {k: capacity * n / total for k, n in gpus.items() if n}


def policy_averages(view: dict[str, Any]) -> list[tuple[str, float | None]]:
    """The plan's and each simple policy's average cost a month over the horizon (total /
    months; None: the policy is infeasible)."""
    months = view["months"]
    total = view.get("total_usd")
    out: list[tuple[str, float | None]] = [
        ("this plan", total / months if total is not None else None)
    ]
    for p in view.get("policies", []):
        out.append((p["name"], p["total_usd"] / months if p["total_usd"] is not None else None))
    return out


def horizon_chart(view: dict[str, Any], size: tuple[float, float] | None = None) -> Any:
    """A plan over time's figure (``plots.horizon_figure``) from its view (``solve --out``):
    each period's SLA capacity by how its GPUs are had against its demand, and the cost of
    each month against the plan's and the policies' averages."""
    from pddplan.report import plots

    bars = [
        (p["months"][0], p["months"][1], p["rps"], capacity_by_kind(p)) for p in view["periods"]
    ]
    return plots.horizon_figure(
        bars,
        list(view["monthly_usd"]),
        policy_averages(view),
        size=size or plots.HORIZON_WIDE,
        title=f"{view.get('scenario', '')}: capacity by how its GPUs are had, and cost",
    )


def horizon_page(plan: dict[str, Any], scenario: Scenario, *, version: str = "") -> Page:
    """A plan over time's report (``solve`` of a scenario with a ``horizon:``; its file,
    ``solve --out``): the verdict against the two simple policies, what to buy and reserve
    and by when to order it, the link's leases, what each period runs, holds and costs, a
    figure of capacity against demand with the cost by month, the cost by month, the notes,
    and where it came from. ``scenario``: the one the plan carries."""
    if plan.get("total_usd") is None:
        raise ValueError("the plan over the horizon holds no schedule (no plan was found)")
    sections = (
        _horizon_verdict(plan, scenario),
        _horizon_purchases(plan),
        _horizon_link(plan),
        _horizon_periods(plan, scenario),
        _horizon_capacity(plan),
        _horizon_monthly(plan),
        Section("notes", "Notes", tuple(Para(n, "warn") for n in plan.get("notes", []))
                or (Para("No notes.", "note"),)),
        _horizon_about(plan, scenario, version),
    )  # fmt: skip
    return Page(
        title=f"Plan over time for {plan.get('scenario', '?')}",
        subtitle=f"{plan.get('model', '?')}: {plan['months']} months, {len(plan['periods'])} "
        f"periods; status {plan.get('status', '?')}",
        sections=sections,
        meta={"scenario": str(plan.get("scenario", "")), "kind": "horizon plan"},
    )


def _what_to_do(plan: dict[str, Any]) -> str:
    """What the schedule buys, reserves and rents, in a clause: ``Buy 16 b200 in cluster-a;
    reserve 32 h100-sxm in cluster-a for 12 months; rent up to 8 h200-sxm in cluster-b (in
    months 1-6)``."""
    bought: dict[str, int] = {}
    for p in plan.get("purchases", []):
        key = f"{p['datacenter']}/{p['chip']}"
        bought[key] = bought.get(key, 0) + p["gpus"]
    reserved: dict[tuple[str, int], int] = {}
    for x in plan.get("reservations", []):
        key2 = (f"{x['datacenter']}/{x['chip']}", x["term_months"])
        reserved[key2] = reserved.get(key2, 0) + x["gpus"]
    rented: dict[str, tuple[int, int, int]] = {}
    sunk: dict[str, int] = {}
    for p in plan["periods"]:
        for key, n in (p.get("rented_gpus") or {}).items():
            most, first, last = rented.get(key, (0, p["months"][0], p["months"][1]))
            rented[key] = (max(most, n), min(first, p["months"][0]), max(last, p["months"][1]))
        for key, n in (p.get("sunk_gpus") or {}).items():
            sunk[key] = max(sunk.get(key, 0), n)
    parts = []
    if sunk:
        parts.append("run up to " + ", ".join(
            f"{n:,} {_chip_words(k)} already owned" for k, n in sorted(sunk.items())))  # fmt: skip
    if bought:
        parts.append(
            "buy " + ", ".join(f"{n:,} {_chip_words(k)}" for k, n in sorted(bought.items()))
        )
    if reserved:
        parts.append("reserve " + ", ".join(
            f"{n:,} {_chip_words(k)} for {m} months" for (k, m), n in sorted(reserved.items())))  # fmt: skip
    if rented:
        parts.append("rent " + ", ".join(
            f"up to {n:,} {_chip_words(k)} (months {_month_span(a, b)})"
            for k, (n, a, b) in sorted(rented.items())))  # fmt: skip
    text = "; ".join(parts) if parts else "nothing to buy, reserve or rent"
    return text[:1].upper() + text[1:]


def _horizon_verdict(plan: dict[str, Any], scenario: Scenario) -> Section:
    total, months = plan["total_usd"], plan["months"]
    parts: list[Part] = [
        Para(
            f"{_what_to_do(plan)}: ${total:,.0f} over {months} months "
            f"(${total / months:,.0f}/month on average).",
            "lead",
        )
    ]
    for p in plan.get("policies", []):
        if p.get("total_usd") is None:
            parts.append(Para(f"Against {p['name']}: {p.get('reason') or 'no schedule'}.", "warn"))
            continue
        saving = p["total_usd"] - total
        share = saving / p["total_usd"] if p["total_usd"] else 0.0
        parts.append(
            Para(
                f"Against {p['name']} (${p['total_usd']:,.0f} over the horizon): it saves "
                f"${saving:,.0f} ({share:.0%})."
            )
        )
    status = str(plan.get("status"))
    if plan.get("gap"):
        status += f" (gap {plan['gap']:.2%})"
    parts.append(Para(f"{plan.get('scenario')}: the least total cost over {months} months of "
                      f"what to own, reserve and rent; {status}."))  # fmt: skip
    sla = scenario.sla
    short = [
        p["name"]
        for p in plan["periods"]
        if p.get("sla_capacity_rps") is not None and p["sla_capacity_rps"] < p["rps"] * (1 - 1e-6)
    ]
    if short:
        parts.append(Para(f"Below its demand at its SLA capacity: {', '.join(short)}.", "warn"))
    else:
        parts.append(Para(
            f"Every period's deployment serves its demand (its busiest hour in its tranche's "
            f"last month) within the SLA: TTFT P90 {sla.ttft_p90_s:g} s, P99 "
            f"{sla.ttft_p99_s:g} s, TPOT {sla.tpot_ms:g} ms."))  # fmt: skip
    return Section("verdict", "Verdict", tuple(parts))


def _order_by(month: int) -> str:
    return "at once" if month <= 1 else f"month {month}"


def _horizon_purchases(plan: dict[str, Any]) -> Section:
    rows = []
    for p in plan.get("purchases", []):
        rows.append(("buy", p["datacenter"], p["chip"], f"{p['gpus']:,}",
                     str(p["serves_from_month"]), _order_by(p["order_by_month"]),
                     f"${p['usd']:,.0f}"))  # fmt: skip
    for x in plan.get("reservations", []):
        rows.append((f"reserve {x['term_months']} months", x["datacenter"], x["chip"],
                     f"{x['gpus']:,}", str(x["first_month"]), _order_by(x["first_month"]),
                     f"${x['usd']:,.0f}"))  # fmt: skip
    if not rows:
        return Section("purchases", "What to buy and reserve",
                       (Para("Nothing to buy or reserve: every GPU is rented.", "note"),))  # fmt: skip
    table = Table(
        ("what", "DC", "chip", "GPUs", "serves from month", "order or commit by", "total"),
        tuple(rows),
        (False, False, False, True, True, True, True),
        caption="Order by: the month the order must be placed for the GPUs to serve from "
        "their first month, given the chip's lead time; a reservation is committed in the "
        "month it starts. Total: a purchase's hourly cost (amortized capex, hosting, power) "
        "from its first month to the horizon's end; a reservation's whole term, paid whether "
        "its GPUs run or not, past the horizon's end too.",
    )
    return Section("purchases", "What to buy and reserve", (table,))


def _horizon_link(plan: dict[str, Any]) -> Section:
    tranche_months = {p["tranche"]: tuple(p["months"]) for p in plan["periods"]}
    runs: list[list[Any]] = []  # link, Gbit/s, first month, last month, $/month
    for x in plan.get("link_leases", []):
        first, last = tranche_months.get(x["tranche"] + 1, (0, 0))
        if (
            runs
            and runs[-1][0] == x["link"]
            and runs[-1][1] == x["gbps"]
            and runs[-1][3] + 1 == first
        ):
            runs[-1][3] = last
        else:
            runs.append([x["link"], x["gbps"], first, last, x["usd_per_month"]])
    if not runs:
        return Section("link", "Link leases",
                       (Para("No WAN link is leased: every period runs within one datacenter.",
                             "note"),))  # fmt: skip
    rows = tuple(
        (link, f"{gbps:g} Gbit/s", _month_span(a, b), f"${usd:,.0f}", f"${usd * (b - a + 1):,.0f}")
        for link, gbps, a, b, usd in runs
    )
    table = Table(
        ("link", "tier", "months", "$/month", "over those months"),
        rows,
        (False, True, True, True, True),
        caption="Each tranche leases the tier its busiest period's deployment needs (a "
        "committed tier a tranche long; per-GB traffic, where a link has it, is in each "
        "period's hourly cost).",
    )
    return Section("link", "Link leases", (table,))


def _runs_text(deployment: dict[str, Any] | None) -> str:
    if not deployment:
        return "no demand"
    return " · ".join(
        f"{ROLE_SHORT.get(p['role'], p['role'])} "
        f"{p['instances'] * p['gpus_per_instance']:,} {p['chip']}"
        for p in deployment.get("pools", [])
    )


def _horizon_periods(plan: dict[str, Any], scenario: Scenario) -> Section:
    kinds = [
        k for k in ("owned", "reserved", "sunk", "rented")
        if any(p.get(f"{k}_gpus") for p in plan["periods"])
    ]  # fmt: skip
    words = {"owned": "owned, held", "reserved": "reserved, in force", "sunk": "sunk, run",
             "rented": "rented"}  # fmt: skip
    rows = []
    for p in plan["periods"]:
        t = p.get("ttft_s") or {}
        ttft = f"{_s(t.get('p90'))} / {_s(t.get('p99'))}" if t else MISSING
        rows.append((
            p["name"], _month_span(*p["months"]), hours_text(p["hours_of_day"]),
            f"{p['rps']:,.3g}", num(p.get("sla_capacity_rps"), ",.3g"),
            _runs_text(p.get("deployment")),
            *(_gpus_text(p.get(f"{k}_gpus")) for k in kinds),
            ttft, f"${p['usd_per_hour']:,.2f}",
        ))  # fmt: skip
    families = sorted({p["family"] for p in plan["periods"] if p.get("family")})
    sla = scenario.sla
    table = Table(
        ("period", "months", "hours of day", "demand, req/s", "SLA capacity, req/s", "runs",
         *(words[k] for k in kinds), "TTFT P90 / P99", "$/hour"),
        tuple(rows),
        (False, True, False, True, True, False, *(False for _ in kinds), True, True),
        caption=f"A period is some hours of the day in one tranche, sized for its busiest "
        f"hour in the tranche's last month (the demand). {ROLE_WORDS}. Owned GPUs are held "
        "every hour from their first month (idle where a quieter period runs fewer), "
        "reservations while in force; sunk GPUs (the scenario's inventory) and rented ones "
        "for the period's hours as its deployment runs them. TTFT at the demand (SLA: P90 "
        f"{sla.ttft_p90_s:g} s, P99 {sla.ttft_p99_s:g} s). $/hour: what an hour of the period "
        "costs: every GPU held, the link's lease, the decode-side cache. Families run: "
        + "; ".join(families) + ".",
    )  # fmt: skip
    return Section("periods", "Each period", (table,))


def _horizon_capacity(plan: dict[str, Any]) -> Section:
    from pddplan.report import plots

    by_tranche: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for p in plan["periods"]:
        by_tranche.setdefault((p["months"][0], p["months"][1]), []).append(p)
    lines = []
    for (a, b), ps in by_tranche.items():
        kinds: dict[str, float] = {}
        for p in ps:
            for k, v in capacity_by_kind(p).items():
                kinds[k] = max(kinds.get(k, 0.0), v)
        cost = plan["monthly_usd"][a - 1] if len(plan["monthly_usd"]) >= a else None
        held = ", ".join(f"{k} up to {v:,.3g}" for k, v in kinds.items())
        lines.append(f"Months {_month_span(a, b)}: demand {min(p['rps'] for p in ps):,.3g}-"
                     f"{max(p['rps'] for p in ps):,.3g} req/s; capacity {held or 'none'} req/s; "
                     f"{money(cost, 0)}/month")  # fmt: skip
    averages = "; ".join(
        f"{name} {money(v, 0)}/month" if v is not None else f"{name} infeasible"
        for name, v in policy_averages(plan)
    )
    figure = Figure(
        "capacity-and-cost",
        "Above: each period's SLA capacity, req/s, as a bar split by how its deployment's "
        "GPUs are had (sunk, owned, reserved, rented, in proportion to the GPUs of each it "
        "runs), its tranche's periods side by side, busiest first; the black mark is the "
        "period's demand (its busiest hour), which the bar must reach. Below: the cost of "
        "each month, $/month, against the average month of this plan and of each simple "
        "policy (their totals over the horizon / its months).",
        "Capacity by how the GPUs are had, against demand, and the cost by month. "
        + ". ".join(lines)
        + f". Averages: {averages}.",
        Image(*plots.png(horizon_chart(plan, plots.HORIZON_WIDE))),
        Image(*plots.png(horizon_chart(plan, plots.HORIZON_NARROW))),
    )
    return Section("capacity", "Capacity and cost over time", (figure,))


def _horizon_monthly(plan: dict[str, Any]) -> Section:
    monthly = plan["monthly_usd"]
    rows = []
    start = 0
    for i in range(1, len(monthly) + 1):
        if i == len(monthly) or abs(monthly[i] - monthly[start]) > 0.5:
            rows.append((_month_span(start + 1, i), f"${monthly[start]:,.0f}",
                         f"${monthly[start] * (i - start):,.0f}"))  # fmt: skip
            start = i
    parts: list[Part] = [Table(
        ("months", "$/month", "over those months"), tuple(rows), (True, True, True),
        caption="Each month: owned GPUs held (amortized capex, hosting, power), reservations "
        "in force, rented GPUs and the sunk GPUs run for their hours, the decode-side cache "
        "and the link's lease. A month is 730 hours.",
    )]  # fmt: skip
    months = plan["months"]
    policy_rows = []
    for name, average in policy_averages(plan):
        total = average * months if average is not None else None
        policy_rows.append((name, money(total, 0), money(average, 0)))
    past = plan["total_usd"] - sum(monthly)
    caption = "The two simple policies are the same schedule restricted: rent everything (no "
    caption += "purchase, no reservation), and own for the peak (each chip bought once, at "
    caption += "the first tranche its lead time allows, for the most any later period runs)."
    if past > 0.5:
        caption += (f" This plan's total holds ${past:,.0f} of reservation months past the "
                    "horizon's end, not in any month above.")  # fmt: skip
    parts.append(Table(
        ("schedule", "over the horizon", "average $/month"), tuple(policy_rows),
        (False, True, True), title="Against the simple policies", caption=caption,
    ))  # fmt: skip
    return Section("monthly", "Cost by month", tuple(parts))


def _horizon_about(plan: dict[str, Any], scenario: Scenario, version: str) -> Section:
    solver = plan.get("solver") or {}
    rows = [
        *_file_rows(plan),
        *_engine_rows(plan),
        ("solver", f"{solver.get('solver') or scenario.solver.name}, {plan.get('status', MISSING)}"),
        ("schedule MILP", f"{solver.get('variables', 0):,} variables, "
         f"{solver.get('constraints', 0):,} rows"),
        ("periods' menus", f"{solver.get('deployments', 0):,} deployments from "
         f"{solver.get('family_plans', 0):,} family plans"),
        ("written by", f"pddplan {version}".strip()),
    ]  # fmt: skip
    return _about_section(rows, plan.get("scenario_file") or {})
