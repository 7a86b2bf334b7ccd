"""Demand over time: a scenario's ``horizon:`` section (docs/scenarios.md#horizon).

The scenario's ``workload.arrival_rps`` is the demand at the **peak hour of the peak day of
the first month**: the daily profile gives each hour's rate relative to it (its largest
factor is 1), the weekly profile each day's (its largest factor is 1), and the demand grows
by ``monthly_growth`` a month, compounding, so month ``m`` (1-based) peaks at
``arrival_rps x (1 + monthly_growth) ** (m - 1)``. A scenario without the section is the
first month's peak, as it always was.

``pddplan.horizon`` cuts the horizon into periods (tranche x hour-of-day group) and resolves
how each GPU can be had; these classes only hold and check the section's fields. Checks that
need the rest of the scenario (the rate, the datacenters, the workload an overlay lays over)
are ``horizon_problems``; those that need the acquisition catalog are
``pddplan.horizon.acquisition.acquisition_problems``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from pddplan.spec.acquisition import LeadMonths, Months, PositiveUsd, ReservedTerm, Usd
from pddplan.spec.base import Frozen
from pddplan.spec.limits import MAX_ARRIVAL_RPS, MAX_GPUS, MAX_HORIZON_MONTHS
from pddplan.spec.source import Loc
from pddplan.spec.workloads import _WorkloadKeys

if TYPE_CHECKING:
    from pddplan.spec.scenario import Scenario

HOURS_PER_DAY = 24
DAYS_PER_WEEK = 7
PEAK_TOLERANCE = 1e-6
"""A profile's largest factor must be 1 within this."""
TRANCHE_MONTHS: Mapping[str, int] = {"month": 1, "quarter": 3, "half-year": 6, "year": 12}
"""How long each tranche is: purchases and reservations start at a tranche's first month."""
TRANCHE_LETTER: Mapping[str, str] = {"month": "m", "quarter": "q", "half-year": "h", "year": "y"}
"""The letter a period's name starts with (``q3.g2``: quarter 3, hour group 2)."""
WAYS = ("owned", "reserved", "on_demand")
"""The ways a GPU can be had, in the order a plan reports them."""
Way = Literal["owned", "reserved", "on_demand"]
Factor = Annotated[float, Field(ge=0)]
Hour = Annotated[int, Field(ge=0, le=HOURS_PER_DAY - 1)]
Month = Annotated[int, Field(ge=1, le=MAX_HORIZON_MONTHS)]
Slug = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_\-]*$")]


def _profile(values: tuple[float, ...], length: int, unit: str, first: int) -> tuple[float, ...]:
    """``values`` checked as a profile of ``length`` factors whose largest is 1 (the peak)."""
    if len(values) != length:
        raise ValueError(
            f"{length} factors, one per {unit} ({unit}s {first}-{first + length - 1}), "
            f"got {len(values)}"
        )
    peak = max(values)
    if abs(peak - 1.0) > PEAK_TOLERANCE:
        at = values.index(peak) + first
        raise ValueError(
            f"the largest factor is {peak:g} ({unit} {at}); factors are relative to the peak "
            f"{unit}, whose rate is workload.arrival_rps: the largest must be 1 (divide each "
            f"by {peak:g})"
        )
    return values


class OwnedOverride(Frozen):
    """A scenario's change to the acquisition catalog's ``owned`` terms for one chip in one
    datacenter: the keys it gives replace the catalog's (``OwnedTerms``, same units)."""

    capex_usd_per_gpu: PositiveUsd | None = None
    amortization_months: Months | None = None
    hosting_usd_per_gpu_hour: Usd | None = None
    lead_time_months: LeadMonths | None = None

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in self if v is not None}


class ChipSupply(Frozen):
    """How one chip can be had in one datacenter over the horizon, where the scenario says
    more than (or otherwise than) the catalogs."""

    max_gpus: Annotated[int, Field(ge=0, le=MAX_GPUS)] | None = None
    """Inventory: the most GPUs of this chip this datacenter can hold in any period, however
    had (owned, already or bought; reserved; rented). None: no limit but the datacenter's."""
    ways: tuple[Way, ...] | None = None
    """The ways the chip may be had here (default: each the catalogs price)."""
    owned: OwnedOverride | None = None
    """Changes to the catalog's purchase terms here."""
    reserved: tuple[ReservedTerm, ...] | None = None
    """The reservation terms on offer here, replacing the catalog's."""
    on_demand_usd_per_gpu_hour: PositiveUsd | None = None
    """The on-demand price here, instead of ``prices_usd_per_gpu_hour`` or the catalog's."""

    @field_validator("ways")
    @classmethod
    def _distinct(cls, ways: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if ways is not None and (not ways or len(set(ways)) != len(ways)):
            raise ValueError(f"give each way once, at least one (of {', '.join(WAYS)})")
        return ways

    @field_validator("reserved")
    @classmethod
    def _ordered(cls, terms: tuple[ReservedTerm, ...] | None) -> tuple[ReservedTerm, ...] | None:
        months = [t.term_months for t in terms or ()]
        if months != sorted(set(months)):
            raise ValueError(
                f"reserved terms must be in increasing term_months without repeats, got {months}"
            )
        return terms


class PeriodOverlay(_WorkloadKeys):
    """A change to the workload for some months and hours of the horizon (a new tenant's
    mix from month 7, say, or night-time batch traffic): an overlay of ``workload`` as a
    ``workload_variants`` entry is, without ``arrival_rps`` (the rate comes from the
    profiles and growth) and without a ``trace`` (give the classes ``workload fit`` writes)."""

    name: Slug
    """A unique name: lower-case letters, digits, ``-`` and ``_``."""
    from_month: Month = 1
    """The first month (1-based) it applies in."""
    to_month: Month | None = None
    """The last month it applies in (default: the horizon's last)."""
    hours: tuple[Hour, ...] | None = None
    """The hours of the day (0-23) it applies in (default: all)."""

    @model_validator(mode="after")
    def _keys(self) -> PeriodOverlay:
        if self.arrival_rps is not None:
            raise ValueError(
                "an overlay gives no arrival_rps: a period's rate is workload.arrival_rps x "
                "its hour's daily_profile factor x the growth to its month"
            )
        if self.trace is not None:
            raise ValueError(
                "an overlay gives no trace: fit it once (pddplan workload fit TRACE --out) "
                "and give its classes"
            )
        if self.to_month is not None and self.to_month < self.from_month:
            raise ValueError(f"to_month ({self.to_month}) is before from_month ({self.from_month})")
        if self.hours is not None and (not self.hours or len(set(self.hours)) != len(self.hours)):
            raise ValueError("hours: give each hour (0-23) once, at least one")
        if not self.changes():
            raise ValueError("an overlay changes no workload key: give the keys it changes")
        return self

    def changes(self) -> dict[str, Any]:
        """The workload keys this overlay gives."""
        return {
            k: getattr(self, k) for k in _WorkloadKeys.model_fields if getattr(self, k) is not None
        }

    def applies(self, month: int, hour: int, months: int) -> bool:
        """Whether it changes the workload in ``month`` (1-based) at ``hour``."""
        last = self.to_month if self.to_month is not None else months
        return self.from_month <= month <= last and (self.hours is None or hour in self.hours)


class Horizon(Frozen):
    """Demand over time and how GPUs can be had over it (docs/scenarios.md#horizon)."""

    months: Month = 24
    """Months planned, from the scenario's first month (1-based months 1..months)."""
    tranche: Literal["month", "quarter", "half-year", "year"] = "quarter"
    """How often GPUs may be bought or reserved: at the first month of each tranche (the
    last tranche is shorter where ``months`` is not a multiple of it)."""
    daily_profile: tuple[Factor, ...]
    """24 factors, hours 0-23: each hour's arrival rate / the peak hour's (largest 1)."""
    weekly_profile: tuple[Factor, ...] | None = None
    """7 factors, days 0-6 (0 = the week's first day as the trace or the user counts it):
    each day's rate / the peak day's (largest 1). It changes the mean load a period carries,
    not the peak it is sized for (rentals are decided per hour of the day, the same every
    day, so they serve the peak day)."""
    monthly_growth: Annotated[float, Field(gt=-1)] = 0.0
    """Growth of the demand per month, compounding (0.05: +5% a month; negative: decline)."""
    group_share: Annotated[float, Field(ge=0, lt=1)] = 0.2
    """Hours whose load differs from their group's highest by less than this share of it are
    one period, sized for that highest hour (0: only equal hours share a period)."""
    supply: dict[str, dict[str, ChipSupply]] = Field(default_factory=dict)
    """Per datacenter, per chip: inventory and the scenario's own acquisition terms."""
    overlays: tuple[PeriodOverlay, ...] | None = None
    """Workload changes for some months and hours, laid over ``workload`` in list order."""
    acquisition_catalog: Path | None = None
    """An acquisition catalog to use instead of the shipped ``catalogs/acquisition.yaml``
    (relative to the scenario file)."""

    @field_validator("daily_profile")
    @classmethod
    def _day(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        return _profile(values, HOURS_PER_DAY, "hour", 0)

    @field_validator("weekly_profile")
    @classmethod
    def _week(cls, values: tuple[float, ...] | None) -> tuple[float, ...] | None:
        return None if values is None else _profile(values, DAYS_PER_WEEK, "day", 0)

    @property
    def tranche_months(self) -> int:
        """Months per tranche (3 for ``quarter``)."""
        return TRANCHE_MONTHS[self.tranche]

    def growth(self, month: int) -> float:
        """The demand of 1-based ``month`` over the first month's: (1 + growth) ** (month - 1)."""
        return float((1.0 + self.monthly_growth) ** (month - 1))

    def weekly_mean(self) -> float:
        """The mean day's rate over the peak day's (1 without a weekly profile)."""
        week = self.weekly_profile
        return 1.0 if week is None else math.fsum(week) / len(week)


def horizon_problems(scenario: Scenario) -> list[tuple[Loc, str]]:
    """What is wrong with ``scenario``'s horizon against the rest of the scenario, each with
    its key path: growth that takes the demand past ``MAX_ARRIVAL_RPS`` (or to no finite
    number) within the horizon; supply for a datacenter or chip the scenario does not have,
    an inventory below the GPUs already owned, or a way the datacenter offers that is not
    priced; overlays named twice, outside the horizon, or that make no valid workload. A
    scenario without a horizon has none. (The acquisition catalog's checks are
    ``pddplan.horizon.acquisition.acquisition_problems``.)"""
    h = scenario.horizon
    if h is None:
        return []
    out: list[tuple[Loc, str]] = []
    if scenario.workload_variants is not None:
        out.append(
            (
                ("workload_variants",),
                "a scenario with a horizon gives its other workloads as horizon.overlays (by "
                "months and hours), not as workload_variants",
            )
        )
    rate = scenario.workload.arrival_rps
    if rate is not None:
        try:
            peak = rate * h.growth(h.months)
        except OverflowError:
            peak = math.inf
        if not math.isfinite(peak) or peak > MAX_ARRIVAL_RPS:
            shown = "no finite number" if not math.isfinite(peak) else f"{peak:.3g} req/s"
            out.append(
                (
                    ("horizon", "monthly_growth"),
                    f"the demand grows to {shown} by month {h.months} ({rate:g} req/s x "
                    f"(1 + {h.monthly_growth:g})^{h.months - 1}): past the ceiling of "
                    f"{MAX_ARRIVAL_RPS:,.0f} req/s (docs/scenarios.md#input-limits); a "
                    "growth rate is a share per month (0.05 for 5%)",
                )
            )
    for dc_id, chips in h.supply.items():
        dc = scenario.datacenters.get(dc_id)
        if dc is None:
            known = ", ".join(scenario.datacenters)
            out.append(
                (("horizon", "supply", dc_id), f"no datacenter '{dc_id}' (datacenters: {known})")
            )
            continue
        for chip, supply in chips.items():
            loc: Loc = ("horizon", "supply", dc_id, chip)
            if chip not in dc.chips:
                out.append((loc, f"{dc_id} has no chip '{chip}' (chips: {', '.join(dc.chips)})"))
                continue
            owned = dc.inventory.get(chip, 0)
            if supply.max_gpus is not None and supply.max_gpus < owned:
                out.append(
                    (
                        (*loc, "max_gpus"),
                        f"inventory of {supply.max_gpus} GPUs is below the {owned} {chip} "
                        f"{dc_id} already owns (datacenters.{dc_id}.inventory): the most it can "
                        "hold counts the GPUs it has",
                    )
                )
    out += _overlay_problems(scenario)
    return out


def _overlay_problems(scenario: Scenario) -> list[tuple[Loc, str]]:
    from pddplan.spec.scenario import WorkloadVariant, _variant_scenario, resolve_variant

    h = scenario.horizon
    assert h is not None
    out: list[tuple[Loc, str]] = []
    if h.overlays is not None and not h.overlays:
        return [(("horizon", "overlays"), "an empty list: give at least one, or leave it out")]
    first: dict[str, int] = {}
    tranche = h.tranche_months
    sizing = {min((k + 1) * tranche, h.months) for k in range(math.ceil(h.months / tranche))}
    for i, o in enumerate(h.overlays or ()):
        loc: Loc = ("horizon", "overlays", i)
        if o.name in first:
            out.append(
                (
                    (*loc, "name"),
                    f"'{o.name}' is the name of horizon.overlays[{first[o.name]}] too; give each "
                    "overlay its own name",
                )
            )
        first.setdefault(o.name, i)
        last = o.to_month if o.to_month is not None else h.months
        if o.from_month > h.months or last > h.months:
            key = "from_month" if o.from_month > h.months else "to_month"
            out.append(
                (
                    (*loc, key),
                    f"month {getattr(o, key)} is past the horizon's {h.months} months",
                )
            )
            continue
        if not any(o.from_month <= m <= last for m in sizing):
            ends = ", ".join(str(m) for m in sorted(sizing))
            out.append(
                (
                    loc,
                    f"months {o.from_month}-{last} hold no tranche's last month ({ends}), the "
                    "month each period is sized for: it would change no period",
                )
            )
            continue
        variant = WorkloadVariant(name=o.name, **o.changes())
        try:
            resolve_variant(scenario.workload, variant)
        except ValueError as e:
            out.append((loc, f"over the base workload: {e}"))
            continue
        try:  # the rest of the scenario must take it (md_cache's hits per class, say)
            _variant_scenario(scenario.model_copy(update={"workload_variants": None}), variant)
        except ValueError as e:
            out.append((loc, str(e)))
    return out
