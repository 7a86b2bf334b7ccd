"""How each GPU can be had over a horizon (``catalogs/acquisition.yaml``): bought and owned
(capex amortized over a life, hosting, a lead time) or reserved for a term at an hourly
price with a minimum count. Renting on demand is the hardware catalog's
``price_usd_per_hour`` (or the scenario's ``prices_usd_per_gpu_hour``), so it is not
repeated here.

Every figure carries a source, keyed by its path in the entry (``owned.capex_usd_per_gpu``,
``reserved[0].usd_per_gpu_hour``); a figure that is an assumption says so in its source
(``assumption: ...``). The validator refuses an entry with an unsourced figure, as the
hardware catalog does."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from pddplan.spec.base import Frozen
from pddplan.spec.limits import MAX_GPUS, MAX_TERM_MONTHS, MAX_USD
from pddplan.spec.readonly import ReadOnlyDict

Months = Annotated[int, Field(ge=1, le=MAX_TERM_MONTHS)]
LeadMonths = Annotated[int, Field(ge=0, le=MAX_TERM_MONTHS)]
Usd = Annotated[float, Field(ge=0, le=MAX_USD)]
PositiveUsd = Annotated[float, Field(gt=0, le=MAX_USD)]
Gpus = Annotated[int, Field(ge=0, le=MAX_GPUS)]


class OwnedTerms(Frozen):
    """Buying a GPU (its share of the server, NVSwitch and NICs): paid once, spread straight
    over its life, plus hosting; power is priced apart (the chip's ``tdp_w`` x the
    datacenter's ``pue`` x the scenario's ``electricity_usd_per_kwh``)."""

    capex_usd_per_gpu: PositiveUsd
    """Purchase price per GPU, its share of the whole server included (USD)."""
    amortization_months: Months
    """Months the capex is spread over, straight-line with no salvage value."""
    hosting_usd_per_gpu_hour: Usd
    """Rack space, cooling and operations per GPU-hour (colocation), power excluded."""
    lead_time_months: LeadMonths
    """Months from the order to the GPU serving: one ordered at the start of month m serves
    from month m + lead_time_months."""


class ReservedTerm(Frozen):
    """A commitment to rent GPUs for ``term_months`` at a discount: paid every hour of the
    term whether used or not."""

    term_months: Months
    """Length of the commitment (months)."""
    usd_per_gpu_hour: PositiveUsd
    """Price per GPU-hour over the whole term."""
    min_gpus: Gpus = 0
    """The fewest GPUs one reservation may hold (a node, a rack)."""


class ChipAcquisition(Frozen):
    """The ways to have one chip besides renting it on demand."""

    id: str
    owned: OwnedTerms | None = None
    """Buying it; None where the chip cannot be bought on this basis."""
    reserved: tuple[ReservedTerm, ...] = ()
    """Reservation terms on offer, in increasing ``term_months``."""
    sources: dict[str, str]
    """A citation for each figure, keyed by its path (``owned.capex_usd_per_gpu``,
    ``reserved[1].usd_per_gpu_hour``); an assumption says ``assumption: ...``."""
    notes: str | None = None

    @model_validator(mode="after")
    def _sourced_and_ordered(self) -> ChipAcquisition:
        terms = [r.term_months for r in self.reserved]
        if terms != sorted(set(terms)):
            raise ValueError(
                f"reserved terms must be in increasing term_months without repeats, got {terms}"
            )
        missing = [p for p in figure_paths(self) if not self.sources.get(p, "").strip()]
        if missing:
            raise ValueError(f"sources is missing a citation for: {', '.join(missing)}")
        unknown = sorted(set(self.sources) - set(figure_paths(self)))
        if unknown:
            raise ValueError(
                f"sources cites figures this entry does not have: {', '.join(unknown)}"
            )
        return self


def figure_paths(entry: ChipAcquisition) -> list[str]:
    """The path of every figure of ``entry`` (each needs a source), in field order."""
    out: list[str] = []
    if entry.owned is not None:
        out += [f"owned.{k}" for k in OwnedTerms.model_fields]
    for i, _ in enumerate(entry.reserved):
        out += [f"reserved[{i}].{k}" for k in ReservedTerm.model_fields]
    return out


class AcquisitionCatalog(Frozen):
    """``catalogs/acquisition.yaml``: how each chip can be had, by chip id."""

    chips: dict[str, ChipAcquisition]

    @model_validator(mode="after")
    def _read_only(self) -> AcquisitionCatalog:
        object.__setattr__(self, "chips", ReadOnlyDict(self.chips))  # shared by every caller
        return self

    def terms(self, chip: str) -> ChipAcquisition | None:
        """The entry for ``chip``, or None (then it can only be rented on demand)."""
        return self.chips.get(chip)
