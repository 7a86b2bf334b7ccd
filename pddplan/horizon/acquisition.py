"""How each GPU can be had, per datacenter and chip, over a horizon: the acquisition catalog's
terms, the hardware catalog's (or the scenario's) on-demand price, and the scenario's
``horizon.supply`` laid over them, resolved into one typed object per (datacenter, chip).

Resolution order for each figure (later wins):

- **owned**: the acquisition catalog's ``owned`` terms; the scenario's ``gpu_purchase.CHIP``
  (``capex_usd_per_gpu``; ``amortization_years`` x 12; its ``hosting_usd_per_gpu_hour``) and
  its top-level ``hosting_usd_per_gpu_hour`` where above 0 (the default 0 reads as not
  given); then ``horizon.supply.DC.CHIP.owned``. Power per GPU-hour is ``tdp_w / 1000 x pue
  x electricity_usd_per_kwh`` (the datacenter's PUE).
- **reserved**: the catalog's terms, or ``horizon.supply.DC.CHIP.reserved`` (which replaces
  them all).
- **on demand**: ``horizon.supply.DC.CHIP.on_demand_usd_per_gpu_hour``; else
  ``prices_usd_per_gpu_hour.CHIP``; else the hardware catalog's ``price_usd_per_hour``.
- ``horizon.supply.DC.CHIP.ways`` keeps only the ways it lists.

Today's ``datacenters.DC.inventory`` is sunk capacity: ``sunk_gpus`` owned GPUs that cost
only their running cost, serving from month 1: power plus the hosting ``solve`` charges them
today (the chip's ``gpu_purchase`` hosting, else the scenario's ``hosting_usd_per_gpu_hour``),
unless ``horizon.supply.DC.CHIP.owned.hosting_usd_per_gpu_hour`` says otherwise."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pddplan.spec.acquisition import AcquisitionCatalog, ChipAcquisition, OwnedTerms
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.horizon import WAYS, ChipSupply
from pddplan.spec.scenario import Scenario
from pddplan.spec.source import Loc
from pddplan.units import HOURS_PER_MONTH

if TYPE_CHECKING:
    from pddplan.horizon.periods import Tranche

HOURS_PER_YEAR_MONTHS = 12
"""Months in a year (``gpu_purchase.amortization_years`` to months)."""


@dataclass(frozen=True)
class OwnedOption:
    """Buying GPUs: paid once, then owned from ``lead_time_months`` after the order."""

    capex_usd_per_gpu: float
    amortization_months: int
    hosting_usd_per_gpu_hour: float
    power_usd_per_gpu_hour: float
    """``tdp_w / 1000 x pue x electricity_usd_per_kwh``."""
    lead_time_months: int

    @property
    def capex_usd_per_gpu_hour(self) -> float:
        """The capex spread straight over its life: capex / (months x 730 h)."""
        return self.capex_usd_per_gpu / (self.amortization_months * HOURS_PER_MONTH)

    @property
    def usd_per_gpu_hour(self) -> float:
        """What an owned GPU costs an hour over its life: amortized capex + hosting + power."""
        return (
            self.capex_usd_per_gpu_hour
            + self.hosting_usd_per_gpu_hour
            + self.power_usd_per_gpu_hour
        )

    @property
    def serves_from_month(self) -> int:
        """The first month (1-based) a GPU ordered at the horizon's start serves in."""
        return 1 + self.lead_time_months

    def first_tranche(self, tranches: Sequence[Tranche]) -> Tranche | None:
        """The first tranche a purchase can serve from: the first whose first month is at
        least ``serves_from_month`` (a tranche's purchase is ordered ``lead_time_months``
        before its first month). None where no tranche is that late."""
        return next((t for t in tranches if t.first_month >= self.serves_from_month), None)

    def order_month(self, tranche: Tranche) -> int:
        """When a purchase serving from ``tranche`` must be ordered: ``lead_time_months``
        before its first month (0 or less: before the horizon starts, so too late)."""
        return tranche.first_month - self.lead_time_months


@dataclass(frozen=True)
class ReservedOption:
    """A reservation: ``min_gpus`` or more GPUs for ``term_months`` from a tranche's first
    month, paid every hour of the term whether used or not (a term may run past the
    horizon's end: whether that tail is counted is the planner's to state)."""

    term_months: int
    usd_per_gpu_hour: float
    min_gpus: int


@dataclass(frozen=True)
class OnDemandOption:
    """Renting by the hour, only in the hours used."""

    usd_per_gpu_hour: float


@dataclass(frozen=True)
class ChipOptions:
    """Every way one chip can be had in one datacenter."""

    datacenter: str
    chip: str
    sunk_gpus: int
    """GPUs already owned (``datacenters.DC.inventory``): capex sunk, serving from month 1."""
    sunk_usd_per_gpu_hour: float
    """Their running cost: power + hosting (0 where none are owned and no price is known)."""
    max_gpus: int | None
    """Inventory: the most GPUs of this chip here in any period, all ways together (None:
    only the datacenter's ``max_gpus`` bounds it)."""
    owned: OwnedOption | None
    reserved: tuple[ReservedOption, ...]
    on_demand: OnDemandOption | None
    sources: Mapping[str, str] = field(default_factory=dict)
    """Where each figure came from: ``catalog: ...`` (the acquisition catalog's citation),
    ``scenario: KEY.PATH`` or ``hardware catalog: ...``, keyed as ``owned.capex_usd_per_gpu``,
    ``reserved[0].usd_per_gpu_hour``, ``on_demand.usd_per_gpu_hour``."""

    @property
    def ways(self) -> tuple[str, ...]:
        """The ways on offer, in ``WAYS`` order."""
        have = {"owned": self.owned, "reserved": self.reserved or None, "on_demand": self.on_demand}
        return tuple(w for w in WAYS if have[w] is not None)


def acquisition_options(
    scenario: Scenario, hardware: HardwareCatalog, catalog: AcquisitionCatalog
) -> tuple[ChipOptions, ...]:
    """One ``ChipOptions`` per (datacenter, chip) of ``scenario``, in the scenario's order
    (datacenters, then each one's ``chips``). Without a horizon, the same with no supply
    overrides. Expects a scenario ``acquisition_problems`` finds nothing wrong with."""
    supply = scenario.horizon.supply if scenario.horizon is not None else {}
    out = []
    for dc_id, dc in scenario.datacenters.items():
        for chip in dc.chips:
            out.append(
                _options(scenario, hardware, catalog, dc_id, chip, supply.get(dc_id, {}).get(chip))
            )
    return tuple(out)


def _options(
    s: Scenario,
    hw: HardwareCatalog,
    catalog: AcquisitionCatalog,
    dc_id: str,
    chip: str,
    supply: ChipSupply | None,
) -> ChipOptions:
    dc = s.datacenters[dc_id]
    entry = catalog.terms(chip)
    sources: dict[str, str] = {}
    where = f"horizon.supply.{dc_id}.{chip}"
    power = 0.0
    if s.electricity_usd_per_kwh is not None and chip in hw.chips:
        power = hw.chips[chip].tdp_w / 1000 * dc.pue * s.electricity_usd_per_kwh
    owned = _owned(s, entry, chip, supply, where, sources)
    owned_option = None
    if owned is not None:
        owned_option = OwnedOption(
            capex_usd_per_gpu=owned.capex_usd_per_gpu,
            amortization_months=owned.amortization_months,
            hosting_usd_per_gpu_hour=owned.hosting_usd_per_gpu_hour,
            power_usd_per_gpu_hour=power,
            lead_time_months=owned.lead_time_months,
        )
    if supply is not None and supply.reserved is not None:
        terms = supply.reserved
        for i in range(len(terms)):
            for k in ("term_months", "usd_per_gpu_hour", "min_gpus"):
                sources[f"reserved[{i}].{k}"] = f"scenario: {where}.reserved[{i}].{k}"
    else:
        terms = entry.reserved if entry is not None else ()
        for i in range(len(terms)):
            for k in ("term_months", "usd_per_gpu_hour", "min_gpus"):
                sources[f"reserved[{i}].{k}"] = f"catalog: {entry.sources[f'reserved[{i}].{k}']}"  # type: ignore[union-attr]
    reserved = tuple(ReservedOption(t.term_months, t.usd_per_gpu_hour, t.min_gpus) for t in terms)
    on_demand = _on_demand(s, hw, chip, supply, where, sources)
    ways = supply.ways if supply is not None and supply.ways is not None else None
    if ways is not None:
        owned_option = owned_option if "owned" in ways else None
        reserved = reserved if "reserved" in ways else ()
        on_demand = on_demand if "on_demand" in ways else None
    hosting = _hosting(s, chip, supply)
    return ChipOptions(
        datacenter=dc_id,
        chip=chip,
        sunk_gpus=dc.inventory.get(chip, 0),
        sunk_usd_per_gpu_hour=power + hosting,
        max_gpus=supply.max_gpus if supply is not None else None,
        owned=owned_option,
        reserved=reserved,
        on_demand=on_demand,
        sources=sources,
    )


def _owned(
    s: Scenario,
    entry: ChipAcquisition | None,
    chip: str,
    supply: ChipSupply | None,
    where: str,
    sources: dict[str, str],
) -> OwnedTerms | None:
    """The owned terms after every layer, or None where no layer gives a whole set."""
    values: dict[str, float | int] = {}
    if entry is not None and entry.owned is not None:
        for k, v in entry.owned:
            values[k] = v
            sources[f"owned.{k}"] = f"catalog: {entry.sources[f'owned.{k}']}"
    bought = s.gpu_purchase.get(chip)
    if bought is not None:
        values["capex_usd_per_gpu"] = bought.capex_usd_per_gpu
        values["amortization_months"] = round(bought.amortization_years * HOURS_PER_YEAR_MONTHS)
        sources["owned.capex_usd_per_gpu"] = f"scenario: gpu_purchase.{chip}.capex_usd_per_gpu"
        sources["owned.amortization_months"] = (
            f"scenario: gpu_purchase.{chip}.amortization_years x 12"
        )
        if bought.hosting_usd_per_gpu_hour is not None:
            values["hosting_usd_per_gpu_hour"] = bought.hosting_usd_per_gpu_hour
            sources["owned.hosting_usd_per_gpu_hour"] = (
                f"scenario: gpu_purchase.{chip}.hosting_usd_per_gpu_hour"
            )
    if s.hosting_usd_per_gpu_hour > 0 and (
        bought is None or bought.hosting_usd_per_gpu_hour is None
    ):
        values["hosting_usd_per_gpu_hour"] = s.hosting_usd_per_gpu_hour
        sources["owned.hosting_usd_per_gpu_hour"] = "scenario: hosting_usd_per_gpu_hour"
    if supply is not None and supply.owned is not None:
        for k, v in supply.owned.given().items():
            values[k] = v
            sources[f"owned.{k}"] = f"scenario: {where}.owned.{k}"
    if set(values) != set(OwnedTerms.model_fields):
        for k in OwnedTerms.model_fields:
            sources.pop(f"owned.{k}", None)
        return None
    return OwnedTerms.model_validate(values)


def _on_demand(
    s: Scenario,
    hw: HardwareCatalog,
    chip: str,
    supply: ChipSupply | None,
    where: str,
    sources: dict[str, str],
) -> OnDemandOption | None:
    key = "on_demand.usd_per_gpu_hour"
    if supply is not None and supply.on_demand_usd_per_gpu_hour is not None:
        sources[key] = f"scenario: {where}.on_demand_usd_per_gpu_hour"
        return OnDemandOption(supply.on_demand_usd_per_gpu_hour)
    if chip in s.prices_usd_per_gpu_hour:
        sources[key] = f"scenario: prices_usd_per_gpu_hour.{chip}"
        return OnDemandOption(s.prices_usd_per_gpu_hour[chip])
    spec = hw.chips.get(chip)
    if spec is not None and spec.price_usd_per_hour is not None:
        sources[key] = f"hardware catalog: {spec.sources.get('price_usd_per_hour', chip)}"
        return OnDemandOption(spec.price_usd_per_hour)
    return None


def _hosting(s: Scenario, chip: str, supply: ChipSupply | None) -> float:
    """Hosting per GPU-hour of the sunk (already owned) GPUs: the scenario's own figure for
    this datacenter (``horizon.supply``), else what ``solve`` charges owned inventory today
    (``pddplan.model.pricing.gpu_price``: the chip's ``gpu_purchase`` hosting, else the
    scenario's ``hosting_usd_per_gpu_hour``), so that a one-period horizon prices them as
    ``solve`` does."""
    given = supply.owned if supply is not None else None
    if given is not None and given.hosting_usd_per_gpu_hour is not None:
        return given.hosting_usd_per_gpu_hour
    bought = s.gpu_purchase.get(chip)
    if bought is not None and bought.hosting_usd_per_gpu_hour is not None:
        return bought.hosting_usd_per_gpu_hour
    return s.hosting_usd_per_gpu_hour


def acquisition_problems(
    scenario: Scenario, hardware: HardwareCatalog, catalog: AcquisitionCatalog
) -> list[tuple[Loc, str]]:
    """What is wrong with how ``scenario``'s horizon may have its GPUs, each with its key
    path: a lead time as long as the horizon or longer (a GPU ordered in month 1 would not
    serve within it); a reservation whose minimum is above the inventory; a reservation
    longer than the horizon is fine (it is paid to its end); a chip that no way prices;
    owned GPUs without an electricity price. None without a horizon."""
    h = scenario.horizon
    if h is None:
        return []
    out: list[tuple[Loc, str]] = []
    for o in acquisition_options(scenario, hardware, catalog):
        where: Loc = ("horizon", "supply", o.datacenter, o.chip)
        supply = h.supply.get(o.datacenter, {}).get(o.chip)
        if o.owned is not None and o.owned.lead_time_months >= h.months:
            given = (
                supply is not None
                and supply.owned is not None
                and supply.owned.lead_time_months is not None
            )
            loc: Loc = (*where, "owned", "lead_time_months") if given else ("horizon", "months")
            said = "" if given else " (acquisition catalog)"
            out.append(
                (
                    loc,
                    f"{o.chip} in {o.datacenter}: a lead time of {o.owned.lead_time_months} "
                    f"months{said} is as long as the {h.months}-month horizon or longer: a GPU "
                    f"ordered in month 1 serves from month {o.owned.lead_time_months + 1}; "
                    f"lengthen the horizon, or set horizon.supply.{o.datacenter}.{o.chip}.ways "
                    "without owned",
                )
            )
        above = [
            (i, r)
            for i, r in enumerate(o.reserved)
            if o.max_gpus is not None and r.min_gpus > o.max_gpus
        ]
        if supply is not None and supply.reserved is not None:  # each at its own key
            for i, r in above:
                out.append(
                    (
                        (*where, "reserved", i, "min_gpus"),
                        f"{o.chip} in {o.datacenter}: the {r.term_months}-month reservation's "
                        f"minimum of {r.min_gpus} GPUs is above the inventory of {o.max_gpus}",
                    )
                )
        elif above:  # the catalog's terms: one line, at the inventory
            terms = ", ".join(f"{r.min_gpus} GPUs for {r.term_months} months" for _, r in above)
            out.append(
                (
                    (*where, "max_gpus"),
                    f"{o.chip} in {o.datacenter}: the inventory of {o.max_gpus} GPUs is below the "
                    f"acquisition catalog's reservation minimums ({terms}): give reserved terms "
                    "of your own here, or ways without reserved",
                )
            )
        if not o.ways and not o.sunk_gpus:
            dc_loc: Loc = ("datacenters", o.datacenter, "chips")
            out.append(
                (
                    where if supply is not None else dc_loc,
                    f"{o.chip} in {o.datacenter} cannot be had over the horizon: no way prices it "
                    f"(set prices_usd_per_gpu_hour.{o.chip}, or horizon.supply.{o.datacenter}."
                    f"{o.chip}.on_demand_usd_per_gpu_hour, owned or reserved)",
                )
            )
    owns = any(
        o.owned is not None or o.sunk_gpus for o in acquisition_options(scenario, hardware, catalog)
    )
    if owns and scenario.electricity_usd_per_kwh is None:
        out.append(
            (
                ("horizon",),
                "electricity_usd_per_kwh is needed to price the power of GPUs owned over the "
                "horizon (bought, or datacenters' inventory)",
            )
        )
    return out
