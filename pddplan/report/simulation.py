"""Rich renderables for ``pddplan simulate`` and ``pddplan solve --verify`` (the report
layer, like ``pddplan.report.plan``): they read the JSON views, so the terminal and ``--json``
show the same figures."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from pddplan.report.format import num
from pddplan.report.tables import breakdown_table, grid
from pddplan.spec.scenario import ROLE_SHORT

LABELS = {"p_hit": "prefill-side hit (mean)", "md_hit": "decode-side hit (mean)"}


def _fmt(x: float | None, unit: str) -> str:
    if x is None:
        return "—"
    if unit == "%":
        return f"{x:.1%}"
    if unit == "s":
        return f"{x:,.3f}"
    return num(x, ",.4g")


def _short(pool: str) -> str:
    """``main_decode h200-sxm in cluster-b`` as ``MD h200-sxm in cluster-b`` (the fleet
    table's role labels), so that a row fits 80 columns."""
    role, _, rest = pool.partition(" ")
    return f"{ROLE_SHORT.get(role, role)} {rest}"


def _err(x: float | None) -> str:
    return "—" if x is None else f"{x:+.0%}"


def _interval(bounds: list[float | None], unit: str) -> str:
    lo, hi = bounds
    if lo is None and hi is None:
        return "—"
    return f"[{_fmt(lo, unit)}, {'inf' if hi is None else _fmt(hi, unit)}]"


def verdict_line(v: dict[str, Any]) -> Text:
    """The simulation's verdict on the SLA, first: what decides it."""
    sla = v["sla"]
    bounds = (
        f"TTFT P90 <= {sla['ttft_p90_s']:g} s, P99 <= {sla['ttft_p99_s']:g} s, "
        f"TPOT P99 <= {sla['tpot_ms']:g} ms"
    )
    if v["verdict"] == "confirmed":
        return Text(
            f"SLA confirmed at steady state ({bounds}: every 95% upper bound within it)",
            style="green",
        )
    style = "bold red" if v["verdict"] == "missed" else "bold yellow"
    return Text(f"SLA {v['verdict']}: " + "; ".join(v["reasons"]), style=style)


def steady_state_line(v: dict[str, Any]) -> Text:
    """How the run reached steady state, how much it measured and why it stopped."""
    st = v["steady_state"]
    parts = []
    if st["warm_start_requests"]:
        parts.append(
            f"warm start {st['warm_start_requests']:,} requests "
            f"({st['warm_start_s']:,.0f} s) through the caches"
        )
    parts.append(f"warm-up {st['warmup_requests']:,} requests ({st['warmup_s']:,.0f} s)")
    parts.append(
        f"measured {st['measured_requests']:,} requests over {st['measured_s']:,.0f} s in "
        f"{st['batches']} batches of {st['batch_requests']:,}"
    )
    p99 = v["ttft_s"]["p99"]
    hi = v["ttft_ci_s"]["p99"][1]
    precision = f" (TTFT P99 ±{hi / p99 - 1:.1%})" if p99 and hi else ""
    parts.append(f"stopped: {st['stopped']}{precision}, {st['wall_s']:.1f} s")
    text = "; ".join(parts)
    if st["problems"]:
        text += "\nnot at steady state: " + "; ".join(st["problems"])
    return Text(text, style="dim" if not st["problems"] else "yellow")


def simulation_table(v: dict[str, Any]) -> Table:
    """Simulated vs analytic, one figure per row."""
    t = grid(
        f"Simulated vs analytic at {v['rate_rps']:,.2f} req/s",
        ("figure", "simulated", "95% CI", "analytic", "error"),
    )
    pred, err = v["predicted"], v["relative_error"]
    for k in ("p50", "p90", "p99"):
        t.add_row(
            f"TTFT {k.upper()}, s",
            _fmt(v["ttft_s"][k], "s"),
            _interval(v["ttft_ci_s"][k], "s"),
            _fmt(pred["ttft_s"][k], "s"),
            _err(err["ttft_s"][k]),
        )
    for k in ("p50", "p99"):
        t.add_row(
            f"inter-token gap {k.upper()}, ms",
            _fmt(v["tpot_ms"][k], ""),
            _interval(v["tpot_ci_ms"][k], "") if k in v["tpot_ci_ms"] else "",
            _fmt(pred["tpot_ms"][k], ""),
            _err(err["tpot_ms"][k]),
        )
    t.add_row(
        "SLA goodput, req/s",
        _fmt(v["goodput_rps"], ""),
        "",
        _fmt(pred["goodput_rps"], ""),
        _err(err["goodput_rps"]),
    )
    rows = [("RLD token share", "rld_token_share", None)]
    rows += [(f"link {k} busy", "link_utilization", k) for k in v["link_utilization"]]
    rows += [(f"{_short(k)} busy", "pool_utilization", k) for k in v["pool_utilization"]]
    rows += [(LABELS[k], k, None) for k in ("p_hit", "md_hit")]
    for label, key, sub in rows:
        sim, ana, e = v[key], pred[key], err[key]
        if sub is not None:
            sim, ana, e = sim[sub], ana[sub], e[sub]
        t.add_row(label, _fmt(sim, "%"), "", _fmt(ana, "%"), _err(e))
    return t


def simulation_report(v: dict[str, Any]) -> Group:
    head = Text(
        f"{v['scenario']}: fleet {v['fleet']}, "
        + ("sampled sessions" if v["source"] == "sessions" else f"the trace {v['source']}")
        + f", seed {v['seed']}; "
        f"analytic: {v['predicted_from']}"
        + (f"; {v['engine']} pass times" if v.get("engine") else "")
    )
    paths = v["pipelines"]
    routes = Text(
        f"pipelines: P -> MD {paths['p_md']:.0%}, P -> RLD -> MD {paths['p_rld_md']:.0%}, "
        f"singular {paths['singular']:.0%}; {v['handoffs']:,} handoffs, "
        f"{v['handoff_stall_ms']:,.1f} ms MD stall each"
    )
    both = v["ttft_breakdown_s"]
    breakdown = breakdown_table(
        f"TTFT by segment, mean s, at {v['rate_rps']:,.2f} req/s",
        {"analytic": {k: x["analytic"] for k, x in both.items()},
         "simulated": {k: x["simulated"] for k, x in both.items()}},
    )  # fmt: skip
    tb = v["ttft_tail_breakdown_s"]
    tail = Text(
        f"TTFT above its P90, on average: {tb['queue']:.2f} s prefill queue, "
        f"{tb['prefill']:.2f} s prefill passes, "
        f"{tb['transfer']:.2f} s KV transfer, {tb['decode']:.2f} s to the first token"
    )
    speed = Text(
        f"{v['events']:,} events in {v['wall_seconds']:.2f} s "
        f"({v['events_per_second'] or 0:,.0f} events/s)",
        style="dim",
    )
    note = Text(
        "error = (analytic - simulated) / simulated; 95% CI: batch means, log scale",
        style="dim",
    )
    return Group(
        verdict_line(v),
        head,
        steady_state_line(v),
        simulation_table(v),
        note,
        breakdown,
        routes,
        tail,
        speed,
    )


def verification_report(v: dict[str, Any]) -> Group:
    t = grid(
        "Verification: plan, simulate, tighten",
        (
            "#",
            "planning ×\nP90/P99/TPOT\ncaps/link/hit",
            "GPUs",
            "$/hour",
            "load\nreq/s",
            "sim TTFT s\nP90/P99",
            "sim gap\nP99 ms",
            "verdict",
        ),
    )
    for st in v["iterations"]:
        f = st["planning_factors"]
        factors = "\n".join(  # two lines, to keep the table narrow
            "/".join(f"{f[k]:.2f}" for k in keys)
            for keys in (
                ("ttft_p90", "ttft_p99", "tpot"),
                ("utilization", "link_utilization", "md_hit"),
            )
        )
        sim = st["simulation"]
        if sim is None:
            t.add_row(str(st["iteration"]), factors, "—", "—", "—", "—", "—", st["status"])
            continue
        t.add_row(
            str(st["iteration"]),
            factors,
            f"{st['gpus']:,}",
            num(st["cost_per_hour_usd"], ",.2f"),
            num(st["load_rps"], ",.2f"),
            f"{sim['ttft_s']['p90']:.2f}/{sim['ttft_s']['p99']:.2f}",
            num(sim["tpot_ms"]["p99"], ",.1f"),
            sim["verdict"],
        )
    style = "green" if v["confirmed"] else "bold red"
    parts: list[Any] = [t, Text(v["message"], style=style)]
    check = v.get("at_capacity")
    if check is not None:
        c = grid(
            f"The model at the SLA capacity, {check['rate_rps']:,.2f} req/s (no verdict: the "
            "tail sits on the bound there)",
            ("TTFT", "simulated s\n95% interval", "analytic s", "error", "band"),
        )
        for key, f in check["ttft_s"].items():
            mark = "" if f["within"] is None else (" within" if f["within"] else " OUTSIDE")
            c.add_row(
                key.upper(),
                f"{f['simulated']:.3g} [{num(f['low'], '.3g')}, {num(f['high'], '.3g')}]",
                num(f["analytic"], ".3g"),
                num(f["error"], "+.0%"),
                f"±{f['band']:.0%}{mark}",
            )
        parts.append(c)
    return Group(*parts)


def day_report(view: dict[str, Any]) -> Group:
    """A day of a plan over time (``views.day_view``): the verdict, then one row per hour."""
    sla = view["sla"]
    hours = view["hours"]
    missed = [h for h in hours if not h["holds"]]
    head = (
        f"{view['scenario']}, a day of {view['tranche']}: the SLA holds in every hour"
        if not missed
        else f"{view['scenario']}, a day of {view['tranche']}: the SLA misses in "
        f"{len(missed)} of 24 hours (first: hour {missed[0]['hour']}, "
        + "; ".join(missed[0]["misses"])
        + ")"
    )
    t = Table(
        title=f"Hour by hour (TTFT P90 <= {sla['ttft_p90_s']:g} s, P99 <= "
        f"{sla['ttft_p99_s']:g} s, TPOT P99 <= {sla['tpot_ms']:g} ms, each within its band)",
        box=None,
    )
    for c in ("hour", "period", "req/s", "requests", "GPUs", "+/-", "P90 s", "model",
              "P99 s", "model", "TPOT ms", ""):  # fmt: skip
        t.add_column(c, justify="left" if c in ("period", "") else "right")
    for h in hours:
        ttft, model = h["ttft_s"], h["analytic_ttft_s"]
        change = f"+{h['joined']}/-{h['left']}" if h["joined"] or h["left"] else ""
        t.add_row(
            str(h["hour"]), h["period"], f"{h['rate_rps']:.3g}", f"{h['requests']:,}",
            str(h["gpus"]), change, _fmt(ttft["p90"]["value"], "s"), _fmt(model.get("p90"), "s"),
            _fmt(ttft["p99"]["value"], "s"), _fmt(model.get("p99"), "s"),
            num(h["tpot_p99_ms"], ".3g"), "holds" if h["holds"] else "misses",
        )  # fmt: skip
    foot = Text(
        f"{view['requests']:,} requests, {view['events']:,} events; each hour "
        f"{view['hour_s']:g} simulated s, after a warm-up of {view['warmup_s']:g} s of the "
        f"day's last hour; seed {view['seed']}; +/-: instances joining/leaving at the hour's "
        "start; model: the analytic figure for the hour's deployment at its rate",
        style="dim",
    )
    return Group(Text(head, style="green" if not missed else "bold red"), t, foot)
