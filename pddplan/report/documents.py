"""Plain-text documents of ``pddplan compare``: the side-by-side rows every format shares,
CSV for spreadsheets and a Markdown document to paste into a procurement review. They are
built from ``views.comparison_view`` (numbers only), so every format shows the same
figures."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

from pddplan import units
from pddplan.report.format import money, num

if TYPE_CHECKING:
    from pddplan.spec.scenario import Scenario

NAMES = {
    "intra-dc-homogeneous": "Intra-DC homogeneous",
    "intra-dc-heterogeneous": "Intra-DC heterogeneous",
    "cross-dc-naive": "Cross-DC naive",
    "pdd": "PDD",
}


def comparison_rows(view: dict[str, Any]) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """(column heads, rows of (metric, one cell per architecture)) for the side-by-side
    table. An architecture without a plan shows ``infeasible`` and its reason."""
    archs = view["architectures"]
    heads = [NAMES.get(a["name"], a["name"]) for a in archs]

    def row(metric: str, cell) -> tuple[str, list[str]]:
        return metric, [cell(a) if a["status"] != "infeasible" else "—" for a in archs]

    rows = [
        ("status", [a["status"] for a in archs]),
        row("GPUs", lambda a: ", ".join(f"{n} {c}" for c, n in a["gpus_by_chip"].items())),
        row("cost/hour", lambda a: money(a["cost_per_hour_usd"])),
        row("cost/month", lambda a: money(a["cost_per_month_usd"], 0)),
        row(
            "capacity vs demand, req/s",
            lambda a: f"{a['sla_capacity_rps']:,.2f} vs {a['demand_rps']:g}",
        ),
        row("BCR, req/s per $/h", lambda a: num(a["bcr"], ".4f")),
        row("BCR vs best intra-DC", lambda a: num(a["bcr_vs_best_intra_dc"], ".3f")),
        *(
            row(f"TTFT {k.upper()}, s", lambda a, k=k: f"{a['ttft_s'][k]:.2f}")
            for k in ("p50", "p90", "p99")
        ),
        row("WAN", lambda a: "none" if not a["link_tiers"] else f"{a['wan_gbps']:g} Gbps"),
        row("RLD token share", lambda a: f"{a['rld_token_share']:.1%}"),
        row("$ per M output tokens", lambda a: money(a["usd_per_million_output_tokens"])),
    ]
    return heads, rows


def infeasible_notes(view: dict[str, Any]) -> list[str]:
    """One line per architecture without a plan: its name and why."""
    return [
        f"{NAMES.get(a['name'], a['name'])}: infeasible: {a.get('reason') or 'no plan'}"
        for a in view["architectures"]
        if a["status"] == "infeasible"
    ]


def comparison_csv(view: dict[str, Any]) -> str:
    """One line per architecture, machine-friendly columns (numbers unformatted)."""
    columns = [
        "name",
        "status",
        "chip",
        "total_gpus",
        "gpus_by_chip",
        "cost_per_hour_usd",
        "cost_per_month_usd",
        "demand_rps",
        "sla_capacity_rps",
        "bcr",
        "bcr_vs_best_intra_dc",
        "ttft_p50_s",
        "ttft_p90_s",
        "ttft_p99_s",
        "wan_gbps",
        "link_tiers",
        "rld_token_share",
        "usd_per_million_output_tokens",
        "reason",
    ]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, columns, lineterminator="\n")
    writer.writeheader()
    for a in view["architectures"]:
        flat = {k: a.get(k) for k in columns}
        if "ttft_s" in a:
            for k in ("p50", "p90", "p99"):
                flat[f"ttft_{k}_s"] = a["ttft_s"][k]
        if "gpus_by_chip" in a:
            flat["gpus_by_chip"] = "; ".join(f"{c}={n}" for c, n in a["gpus_by_chip"].items())
            flat["link_tiers"] = "; ".join(a["link_tiers"])
        writer.writerow(flat)
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
        f"- Objective: {view['objective']}, solved for every architecture by the same MILP and "
        "scored by the same evaluator.",
    ]
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
        "- Intra-DC baselines plan in one datacenter with every datacenter's limits added "
        "up; cross-DC naive ships each request's whole context KV over the WAN, with no "
        "relay decode and no decode-side cache.",
        "- Every figure in the scenario file cites its source or says `assumption`; see the file.",
        "",
        "## Comparison",
        "",
    ]
    heads, rows = comparison_rows(view)
    parts.append(_md_table(["", *heads], [[m, *cells] for m, cells in rows]))
    notes = infeasible_notes(view)
    if notes:
        parts += ["", *(f"- {n}" for n in notes)]
    best = view.get("best_intra_dc")
    if best:
        parts += ["", f"BCR is relative to the best intra-DC baseline ({NAMES[best]})."]
    sweep = view.get("price_sweep")
    if sweep:
        parts += ["", *sweep_markdown(sweep)]
    return "\n".join(parts) + "\n"


def sweep_markdown(sweep: dict[str, Any]) -> list[str]:
    rows = [
        [
            f"${p['price_usd_per_gpu_hour']:.4g}",
            num(p["pdd_bcr"], ".4f"),
            NAMES.get(p["best_baseline"], p["best_baseline"] or "—"),
            num(p["best_baseline_bcr"], ".4f"),
            "PDD" if p["pdd_wins"] else "baseline",
        ]
        for p in sweep["points"]
    ]
    out = [
        f"## Price sensitivity: {sweep['chip']}",
        "",
        _md_table(["USD per GPU-hour", "PDD BCR", "best baseline", "its BCR", "higher BCR"], rows),
        "",
    ]
    out.append(break_even_text(sweep))
    return out


def break_even_text(sweep: dict[str, Any]) -> str:
    chip = sweep["chip"]
    if sweep["break_even_usd_per_gpu_hour"] is None:
        wins = {p["pdd_wins"] for p in sweep["points"]}
        who = "PDD" if wins == {True} else "the best baseline"
        return f"No break-even in the swept range: {who} has the higher BCR at every {chip} price."
    lo, hi = sweep["bracket"]
    return (
        f"Break-even: PDD and the best baseline have equal BCR at {chip} = "
        f"${sweep['break_even_usd_per_gpu_hour']:.4g} per GPU-hour (between the swept "
        f"${lo:.4g} and ${hi:.4g})."
    )
