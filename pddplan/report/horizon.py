"""A plan over time in the terminal: the verdict against the two simple policies, what to buy
and reserve when (and by when to order it), the link's lease, what each period runs and
rents, and the cost month by month."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from pddplan.report.format import money
from pddplan.spec.scenario import ROLE_SHORT
from pddplan.spec.status import PlanStatus

if TYPE_CHECKING:
    from pddplan.plan.horizon import HorizonResult, PeriodPlan


def verdict(r: HorizonResult) -> list[Text]:
    """The total over the horizon and the saving against each simple policy."""
    if r.total_usd is None:
        return [Text(f"{r.scenario}: no plan over the horizon ({r.status})", style="bold red")]
    months = r.months
    lines = [
        Text(
            f"{r.scenario}: {money(r.total_usd, 0)} over {months} months "
            f"({money(r.total_usd / months, 0)}/month on average); {r.status}"
            + (f", gap {r.gap:.2%}" if r.gap else ""),
            style="green" if r.status == PlanStatus.OPTIMAL else "bold yellow",
        )
    ]
    for p in r.policies:
        if p.total_usd is None:
            lines.append(Text(f"{p.name}: {p.reason}"))
            continue
        saving = p.total_usd - r.total_usd
        lines.append(
            Text(
                f"Against {p.name} ({money(p.total_usd, 0)}): saves {money(saving, 0)} "
                f"({saving / p.total_usd:.0%})"
            )
        )
    return lines


def purchases_table(r: HorizonResult) -> Table:
    t = Table(title="What to buy and reserve", box=box.SIMPLE_HEAD)
    for c in ("what", "DC", "chip", "GPUs", "from month", "order by", "total"):
        t.add_column(c, justify="right" if c in ("GPUs", "from month", "order by") else "left")
    for p in r.purchases:
        order = "at once" if p.order_by_month <= 1 else f"month {p.order_by_month}"
        t.add_row(
            "buy", p.datacenter, p.chip, str(p.gpus), str(p.serves_from_month), order,
            money(p.usd, 0),
        )  # fmt: skip
    for x in r.reservations:
        t.add_row(
            f"reserve {x.term_months} mo", x.datacenter, x.chip, str(x.gpus), str(x.first_month),
            "at once" if x.first_month <= 1 else f"month {x.first_month}", money(x.usd, 0),
        )  # fmt: skip
    if not r.purchases and not r.reservations:
        t.add_row("nothing: every GPU is rented", "", "", "", "", "", "")
    return t


def _runs(pp: PeriodPlan) -> str:
    """A period's deployment in a few words: each pool's role, GPUs and chip."""
    d = pp.deployment
    if d is None:
        return "no demand"
    return " · ".join(
        f"{ROLE_SHORT[pool.role]} {pool.instances * pool.gpus_per_instance} {pool.chip}"
        for pool in d.fleet.pools
    )


def periods_table(r: HorizonResult) -> Table:
    """Each period: its months, hours a day, demand, what it runs, what it rents."""
    t = Table(title="What each period runs and rents", box=box.SIMPLE_HEAD)
    numeric = ("h/day", "req/s", "TTFT P90 s", "$/hour")
    for c in ("period", "months", "h/day", "req/s", "runs", "rented", "TTFT P90 s", "$/hour"):
        t.add_column(c, justify="right" if c in numeric else "left")
    for pp in r.periods:
        p = pp.period
        rented = " · ".join(f"{n} {chip}" for (_, chip), n in sorted(pp.rented.items()))
        p90 = f"{pp.evaluation.ttft_s['p90']:.2f}" if pp.evaluation is not None else "-"
        t.add_row(
            p.name, f"{p.tranche.first_month}-{p.tranche.last_month}", str(len(p.hours)),
            f"{p.rps:.3g}", _runs(pp), rented or "-", p90, f"{pp.usd_per_hour:,.2f}",
        )  # fmt: skip
    families = sorted({pp.deployment.family.label for pp in r.periods if pp.deployment})
    t.caption = (
        "$/hour: an hour of the period, every GPU held (owned, reserved, sunk run, rented) "
        "and the link; families run: " + "; ".join(families)
    )
    return t


def monthly_table(r: HorizonResult) -> Table:
    t = Table(title="Cost by month", box=box.SIMPLE_HEAD)
    t.add_column("months")
    t.add_column("USD/month", justify="right")
    start = 1
    for i in range(1, len(r.monthly_usd) + 1):
        if i == len(r.monthly_usd) or abs(r.monthly_usd[i] - r.monthly_usd[start - 1]) > 0.5:
            label = f"{start}" if start == i else f"{start}-{i}"
            t.add_row(label, money(r.monthly_usd[start - 1], 0))
            start = i + 1
    return t


def horizon_report(r: HorizonResult) -> Group:
    parts: list = verdict(r)
    if r.total_usd is not None:
        parts += [purchases_table(r)]
        if r.leases:
            tiers = sorted({(x.link, x.gbps) for x in r.leases})
            parts.append(
                Text(
                    "Link: "
                    + "; ".join(
                        f"{link} {gbps:g} Gbit/s in tranches "
                        + ", ".join(
                            str(x.tranche + 1) for x in r.leases if (x.link, x.gbps) == (link, gbps)
                        )
                        for link, gbps in tiers
                    )
                )
            )
        parts += [periods_table(r), monthly_table(r)]
    parts += [Text(f"note: {n}", style="yellow") for n in r.notes]
    parts.append(
        Text(
            f"{len(r.periods)} periods; {r.deployments} deployments from {r.family_plans} "
            f"family plans; MILP {r.variables} variables, {r.constraints} rows",
            style="dim",
        )
    )
    return Group(*parts)
