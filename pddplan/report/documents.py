"""Plain-text documents of ``pddplan compare``: the section rows every format shares,
CSV for spreadsheets and a Markdown document to paste into a procurement review. They are
built from ``views.comparison_view`` (numbers only), so every format shows the same
figures. And the schedule of a plan over time as CSV (``solve --csv``), from
``views.horizon_view``."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

from pddplan import units
from pddplan.report.format import money, num, sig

if TYPE_CHECKING:
    from pddplan.spec.scenario import Scenario


def section_title(section: dict[str, Any]) -> str:
    """What a section asks, with its demand or budget."""
    if section["at"] == "demand":
        planned = section["planned_rps"]
        extra = f" x (1 + headroom) = {planned:g} req/s" if planned != section["demand_rps"] else ""
        return (
            f"At equal demand ({section['demand_rps']:g} req/s{extra}): each one's cheapest fleet"
        )
    source = {"the PDD equal-demand fleet's cost": "PDD's equal-demand cost"}.get(
        section["budget_source"], section["budget_source"]
    )
    return (
        f"At equal budget (${section['budget_usd_per_hour']:,.2f}/hour, {source}): "
        "each one's most capacity"
    )


def section_rows(section: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(column heads, one row of cells per architecture) for a section's table: the ranked
    rows best first, the hypothetical one (``ref``), then those without a plan, which show
    their status (the reasons are ``infeasible_notes``)."""
    demand = section["at"] == "demand"
    heads = ["#", "architecture", "GPUs", "$/month", "WAN link"]
    heads += (
        ["vs best", "capacity req/s", "TTFT P99 s"] if demand else ["capacity req/s", "vs best"]
    )
    rows = []
    for r in _planned(section):
        rank = "ref" if r["rank"] is None else str(r["rank"])
        cells = [rank, r["label"], f"{r['total_gpus']:,}", money(r["cost_per_month_usd"], 0)]
        cells.append(_link_cell(r))
        vs = "best" if r["rank"] == 1 else num(r["vs_best"], "+.0%")
        capacity = sig(r["sla_capacity_rps"])
        cells += [vs, capacity, sig(r["ttft_s"]["p99"])] if demand else [capacity, vs]
        rows.append(cells)
    for r in section["rows"]:
        if "rank" not in r:
            rows.append(["—", r["label"], r["status"], *([""] * (len(heads) - 3))])
    return heads, rows


LINK_PARTS = " · "
"""Between the parts of a WAN link cell (the terminal table stacks them)."""
LINK_NOTE = (
    "WAN link: the leased tier, its price per month, and how busy it is at the SLA capacity."
)


def _link_cell(r: dict[str, Any]) -> str:
    """The WAN link a plan leases: its rate, what it costs a month, and how busy it is at
    the plan's SLA capacity (the busiest link, if several); "—" within one datacenter."""
    if not r["link_tiers"]:
        return "—"
    parts = [f"{r['wan_gbps']:g} Gbps", f"{money(r['link_cost_per_month_usd'], 0)}/mo"]
    if r["link_utilization_at_capacity"] is not None:
        parts.append(f"{r['link_utilization_at_capacity']:.0%} busy")
    return LINK_PARTS.join(parts)


def _planned(section: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows with a plan: the ranked ones best first, then the hypothetical one (``ref``:
    for reference, never ranked)."""
    rows = [r for r in section["rows"] if "rank" in r]
    return sorted(rows, key=lambda r: (r["rank"] is None, r["rank"] or 0))


def latency_rows(section: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """An equal-budget section's latency at one operating point: TTFT at the common rate
    (the smallest of the fleets' SLA capacities), and TTFT P99 at 50/75/100% of each
    fleet's own capacity."""
    rate = section["common_rate_rps"]
    at = "(no ranked fleet)" if rate is None else f"at {rate:,.3g} req/s"
    heads = ["architecture", f"P50/P90/P99 s {at}", "P99 s at 50/75/100%"]
    rows = []
    for r in _planned(section):
        t = r.get("ttft_at_common_rate_s")
        common = "—" if t is None else "/".join(sig(t[k]) for k in ("p50", "p90", "p99"))
        shares = "/".join(sig(x) for x in r["ttft_p99_at_capacity_share_s"].values())
        rows.append([r["label"], common, shares])
    return heads, rows


def infeasible_notes(section: dict[str, Any]) -> list[str]:
    """One line per architecture without a plan: its name and why."""
    return [
        f"{r['label']}: infeasible: {r.get('reason') or 'no plan'}"
        for r in section["rows"]
        if "rank" not in r
    ]


def comparison_csv(view: dict[str, Any]) -> str:
    """One line per (question, architecture), machine-friendly columns (numbers
    unformatted)."""
    columns = [
        "at",
        "kind",
        "label",
        "datacenter",
        "chip",
        "status",
        "rank",
        "total_gpus",
        "gpus_by_chip",
        "cost_per_hour_usd",
        "cost_per_month_usd",
        "demand_rps",
        "budget_usd_per_hour",
        "sla_capacity_rps",
        "vs_best",
        "bcr",
        "ttft_p50_s",
        "ttft_p90_s",
        "ttft_p99_s",
        "ttft_p99_at_common_rate_s",
        "wan_gbps",
        "link_tiers",
        "link_cost_per_month_usd",
        "link_utilization_at_capacity",
        "rld_token_share",
        "usd_per_million_output_tokens",
        "limit",
        "reason",
    ]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, columns, lineterminator="\n")
    writer.writeheader()
    for section in view["sections"]:
        for r in section["rows"]:
            flat = {k: r.get(k) for k in columns}
            flat |= {
                "at": section["at"],
                "demand_rps": section["demand_rps"],
                "budget_usd_per_hour": section["budget_usd_per_hour"],
            }
            if "ttft_s" in r:
                for k in ("p50", "p90", "p99"):
                    flat[f"ttft_{k}_s"] = r["ttft_s"][k]
            if "ttft_at_common_rate_s" in r:
                flat["ttft_p99_at_common_rate_s"] = r["ttft_at_common_rate_s"]["p99"]
            if "gpus_by_chip" in r:
                flat["gpus_by_chip"] = "; ".join(f"{c}={n}" for c, n in r["gpus_by_chip"].items())
                flat["link_tiers"] = "; ".join(r["link_tiers"])
            writer.writerow(flat)
    return buf.getvalue()


HORIZON_KINDS = ("sunk", "owned", "reserved", "rented")
"""How a plan over time has its GPUs, in the order its CSV columns and its figure give
them: sunk (the scenario's inventory, run), owned (bought, held), reserved (in force),
rented (for the period's hours)."""
HORIZON_COLUMNS = (
    "period",
    "tranche",
    "first_month",
    "last_month",
    "hours_of_day",
    "hours_per_month",
    "demand_rps",
    "family",
    "sla_capacity_rps",
)
"""A horizon schedule's CSV columns before those per (datacenter, chip)."""
HORIZON_TAIL = ("ttft_p90_s", "ttft_p99_s", "usd_per_hour")
"""... and after them."""


def horizon_chips(view: dict[str, Any]) -> list[str]:
    """The ``DC/CHIP`` keys any period of a horizon view runs or holds, sorted."""
    keys = {"gpus", *(f"{k}_gpus" for k in HORIZON_KINDS)}
    return sorted({c for p in view["periods"] for k in keys for c in p.get(k) or {}})


def horizon_csv(view: dict[str, Any]) -> str:
    """A plan over time's schedule (``views.horizon_view``), one row per period in the
    view's order (tranche by tranche, busiest first): its tranche and months, its hours of
    the day (space-separated, 0-23), hours a month, demand, the family it runs and its SLA
    capacity; per ``DC/CHIP`` the GPUs its deployment runs (``gpus:DC/CHIP``) and those
    sunk in use, owned held, reserved in force and rented (``sunk_gpus:DC/CHIP``, ...); its
    TTFT P90/P99 at the demand and what an hour of it costs. Numbers as the JSON has them;
    an empty cell where a period has no demand (no deployment)."""
    chips = horizon_chips(view)
    per_chip = [f"{k}:{c}" for c in chips for k in ("gpus", *(f"{k}_gpus" for k in HORIZON_KINDS))]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*HORIZON_COLUMNS, *per_chip, *HORIZON_TAIL])
    for p in view["periods"]:
        ttft = p.get("ttft_s") or {}
        row = [
            p["name"],
            p["tranche"],
            p["months"][0],
            p["months"][1],
            " ".join(str(h) for h in p["hours_of_day"]),
            p["hours_per_month"],
            p["rps"],
            p["family"],
            p["sla_capacity_rps"],
        ]
        for c in chips:
            row += [
                (p.get(k) or {}).get(c, 0) for k in ("gpus", *(f"{k}_gpus" for k in HORIZON_KINDS))
            ]
        row += [ttft.get("p90"), ttft.get("p99"), p["usd_per_hour"]]
        writer.writerow(["" if x is None else x for x in row])
    return buf.getvalue()


def _md_table(heads: list[str], rows: list[list[str]]) -> str:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return "\n".join(
        [line(heads), "|" + "|".join("---" for _ in heads) + "|", *(line(r) for r in rows)]
    )


def comparison_markdown(view: dict[str, Any], scenario: Scenario, source: str) -> str:
    """A review document: scenario summary, assumptions, the comparison and the break-even."""
    s = scenario
    parts = [f"# Architecture comparison: {s.name}", ""]
    if s.description:
        parts += [s.description.strip(), ""]
    parts += [
        "## Scenario",
        "",
        f"- Scenario file: `{source}`; model `{s.model}`.",
        f"- Demand: {s.workload.arrival_rps:g} req/s. SLA: TTFT P90 {s.sla.ttft_p90_s:g} s, "
        f"P99 {s.sla.ttft_p99_s:g} s; TPOT {s.sla.tpot_ms:g} ms.",
        f"- Headroom: {s.headroom:.0%}. Every architecture is planned by the same MILP and "
        "scored by the same evaluator: at equal demand its cheapest fleet (min-cost), at "
        "equal budget its largest SLA capacity (max-capacity).",
    ]
    engine = view.get("engine")
    if engine:
        which = (
            f"{engine['name']} (`{engine['id']}`, {engine['version']})"
            if "label" not in engine  # an engine per role: each with its roles
            else f"{engine['label']} ({engine['name']}; {engine['version']})"
        )
        parts.append(
            f"- Pass times: {which} at the "
            f"{engine['perf_quantile'] * 100:g}th percentile of the model's held-out error "
            "(docs/validation.md)."
        )
    for dc_id, dc in s.datacenters.items():
        limits = [f"max {dc.max_gpus} GPUs" if dc.max_gpus else "", f"PUE {dc.pue:g}"]
        parts.append(
            f"- Datacenter `{dc_id}`: {', '.join(dc.roles)} on {', '.join(dc.chips)}"
            f" ({'; '.join(x for x in limits if x)})."
        )
    for link in s.links:
        tiers = ", ".join(f"{t.gbps:g} Gbps ${t.usd_per_month:,.0f}/month" for t in link.tiers)
        parts.append(f"- Link {' - '.join(link.between)}: RTT {link.rtt_ms:g} ms; tiers {tiers}.")
    prices = ", ".join(f"{c} ${p:g}" for c, p in sorted(s.prices_usd_per_gpu_hour.items()))
    parts.append(f"- Rented GPUs, USD per GPU-hour: {prices or 'the catalog list prices'}.")
    for chip, buy in sorted(s.gpu_purchase.items()):
        parts.append(
            f"- Bought {chip}: ${buy.capex_usd_per_gpu:,.0f} per GPU over "
            f"{buy.amortization_years:g} years, plus power and hosting."
        )
    owned = [
        f"{n} {chip} in {dc_id}"
        for dc_id, dc in s.datacenters.items()
        for chip, n in dc.inventory.items()
    ]
    parts += [
        "",
        "## Assumptions",
        "",
        "- GPU costs: rent per GPU-hour, or for bought chips capex / (years x 8,760 h) plus "
        "power (TDP x PUE x electricity price) plus hosting"
        + (f"; owned GPUs ({', '.join(owned)}) at power and hosting only" if owned else "")
        + ".",
        f"- Links: the tier's monthly price ({units.HOURS_PER_MONTH:g} hours per month) plus "
        "any per-GB egress on the traffic at the demand.",
        f"- Pools run at most {s.search.max_utilization:.0%} busy; links at most "
        f"{s.search.max_link_utilization:.0%}.",
        "- Intra-DC baselines plan in one real datacenter, on its chips and within its own "
        "limits (one row per datacenter and chip, and a mixed row where a datacenter allows "
        "two chips or more); the hypothetical one-DC row holds every chip with every "
        "datacenter's limits added up, for reference only. Cross-DC naive ships each "
        "request's whole context KV over the WAN, with no relay decode and no decode-side "
        "cache.",
        "- Every figure in the scenario file cites its source or says `assumption`; see the file.",
        "",
        "## Comparison",
        "",
    ]
    for section in view["sections"]:
        heads, rows = section_rows(section)
        parts += [f"### {section_title(section)}", "", _md_table(heads, rows)]
        if any(r[heads.index("WAN link")] not in ("—", "") for r in rows if len(r) == len(heads)):
            parts += ["", LINK_NOTE]
        notes = infeasible_notes(section)
        parts += ["", *(f"- {n}" for n in notes)] if notes else []
        if section["at"] == "budget":
            heads, rows = latency_rows(section)
            parts += ["", "TTFT, one operating point and each fleet's own load:", ""]
            parts += [_md_table(heads, rows)]
        parts += ["", f"**{section['verdict']}**", ""]
    sweep = view.get("price_sweep")
    if sweep:
        parts += ["", *sweep_markdown(sweep)]
    return "\n".join(parts) + "\n"


def sweep_markdown(sweep: dict[str, Any]) -> list[str]:
    heads, rows = sweep_rows(sweep)
    out = [f"## Price sensitivity: {sweep['chip']}", "", _md_table(heads, rows), ""]
    out.append(break_even_text(sweep))
    return out


def sweep_rows(sweep: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The price sweep's table: PDD's and the cheapest baseline's equal-demand cost."""
    heads = ["USD/GPU-hour", "PDD $/month", "cheapest baseline", "its $/month", "cheaper"]
    month = units.HOURS_PER_MONTH
    rows = [
        [
            f"{p['price_usd_per_gpu_hour']:.4g}",
            money(_times(p["pdd_cost_per_hour_usd"], month), 0),
            p["cheapest_baseline"] or "—",
            money(_times(p["cheapest_baseline_cost_per_hour_usd"], month), 0),
            "PDD" if p["pdd_wins"] else "baseline",
        ]
        for p in sweep["points"]
    ]
    return heads, rows


def _times(x: float | None, k: float) -> float | None:
    return None if x is None else x * k


def break_even_text(sweep: dict[str, Any]) -> str:
    chip = sweep["chip"]
    if sweep["break_even_usd_per_gpu_hour"] is None:
        wins = {p["pdd_wins"] for p in sweep["points"]}
        who = "PDD" if wins == {True} else "the cheapest baseline"
        return f"No break-even in the swept range: {who} is cheaper at every {chip} price."
    lo, hi = sweep["bracket"]
    return (
        f"Break-even: PDD and the cheapest baseline cost the same at {chip} = "
        f"${sweep['break_even_usd_per_gpu_hour']:.4g} per GPU-hour (between the swept "
        f"${lo:.4g} and ${hi:.4g})."
    )
