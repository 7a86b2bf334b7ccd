"""``compare`` in the terminal: each section's ranked rows, the latency rows, the verdict
and the price sweep, from the comparison's view."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text

from pddplan.report.documents import (
    LINK_NOTE,
    LINK_PARTS,
    break_even_text,
    infeasible_notes,
    latency_rows,
    section_rows,
    section_title,
    sweep_rows,
)
from pddplan.report.tables import grid


def _stacked(label: str) -> str:
    """An architecture's label on two lines, before its datacenter (``... in <dc>``)."""
    return label.replace(" in ", "\nin ", 1)


def comparison_report(view: dict[str, Any]) -> Group:
    """``pddplan compare``: one table per question (equal demand, equal budget), each with
    its verdict (and, at equal budget, the latency table), then the price sweep if any."""
    parts: list[Any] = []
    engine = view.get("engine")
    if engine:
        q = engine.get("perf_quantile", 0.5)
        at = "the fit's centre" if q == 0.5 else f"the {q * 100:g}th percentile of its error"
        which = engine.get("label") or f"{engine['name']} ({engine['id']})"  # label: per role
        parts.append(Text(f"Pass times: {which}, at {at}.", style="dim"))
    for section in view["sections"]:
        heads, rows = section_rows(section)
        # a row that relaxes the scenario: its label marked, the relaxation in the caption
        # (the full label would wrap over several lines at 80 columns)
        relaxed = {x["label"]: x["relaxes"] for x in section["rows"] if x.get("relaxes")}

        def short(label: str, relaxed: dict[str, str] = relaxed) -> str:
            why = relaxed.get(label)
            return label if why is None else label.replace(f" ({why})", "") + " *"

        # the WAN link goes under the architecture, in lines that never wrap (nor does the
        # architecture: the other columns' headers break first)
        link = heads.index("WAN link")
        t = grid("", heads[:link] + heads[link + 1 :], text=None, left=1)
        for r in rows:
            cells = [_stacked(short(c)) if j == 1 else c for j, c in enumerate(r)]
            if len(cells) > link:
                wan = cells.pop(link)
                if wan not in ("—", ""):
                    rate, *rest = wan.split(LINK_PARTS)
                    cells[1] += f"\nWAN {rate},\n" + ", ".join(rest)
            t.add_row(*cells)
        captions = []
        if any(len(r) > link and r[link] not in ("—", "") for r in rows):
            captions.append(LINK_NOTE)
        if relaxed:
            captions.append("* relaxes the scenario: " + "; ".join(dict.fromkeys(relaxed.values())))
        t.caption = "\n".join(captions) or None
        t.caption_justify = "left"
        parts += [Text(section_title(section), style="bold"), t]
        parts += [Text(n, style="yellow") for n in infeasible_notes(section)]
        if section["at"] == "budget":
            heads, rows = latency_rows(section)
            t = grid("TTFT at one rate, and at each fleet's own load", heads, text=None)
            for r in rows:
                t.add_row(_stacked(short(r[0])), *r[1:])
            parts.append(t)
        parts.append(Text(section["verdict"], style="bold"))
    sweep = view.get("price_sweep")
    if sweep:
        heads, rows = sweep_rows(sweep)
        s = grid(f"Price sweep: {sweep['chip']}", heads, text=2, left=0)  # the baseline wraps
        for r in rows:
            s.add_row(*r)
        s.caption = break_even_text(sweep)
        parts.append(s)
    return Group(*parts)
