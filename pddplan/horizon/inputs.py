"""Everything the horizon planner needs, in one object: the tranches, the periods and how each
GPU can be had (``HorizonInputs``)."""

from __future__ import annotations

from dataclasses import dataclass

from pddplan.horizon.acquisition import ChipOptions, acquisition_options
from pddplan.horizon.periods import Period, Tranche, monthly_peaks, periods, tranches
from pddplan.spec.acquisition import AcquisitionCatalog
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.horizon import Horizon
from pddplan.spec.scenario import Scenario


@dataclass(frozen=True)
class HorizonInputs:
    """A horizon, cut and priced: what a horizon plan decides over."""

    horizon: Horizon
    tranches: tuple[Tranche, ...]
    """Purchases and reservations start at a tranche's first month."""
    periods: tuple[Period, ...]
    """Tranche x hour group, by tranche then busiest first (``pddplan.horizon.periods``)."""
    options: tuple[ChipOptions, ...]
    """How each (datacenter, chip) can be had, in the scenario's order."""
    monthly_peaks: tuple[float, ...]
    """Each month's peak-hour demand, requests/s (month 1 first)."""

    def options_for(self, datacenter: str, chip: str) -> ChipOptions:
        """The options of one (datacenter, chip); ``KeyError`` where the scenario has none."""
        for o in self.options:
            if o.datacenter == datacenter and o.chip == chip:
                return o
        raise KeyError((datacenter, chip))

    def in_tranche(self, tranche: Tranche) -> tuple[Period, ...]:
        """The periods of one tranche, busiest first."""
        return tuple(p for p in self.periods if p.tranche.index == tranche.index)


def horizon_inputs(
    scenario: Scenario, hardware: HardwareCatalog, catalog: AcquisitionCatalog
) -> HorizonInputs:
    """``scenario``'s horizon cut into periods and priced. Raises ``ValueError`` for a
    scenario without a horizon. Expects a loaded scenario (``pddplan.load_scenario``
    checks ``horizon_problems`` and ``acquisition_problems``)."""
    h = scenario.horizon
    if h is None:
        raise ValueError(f"scenario {scenario.name} has no horizon")
    return HorizonInputs(
        horizon=h,
        tranches=tranches(h),
        periods=periods(scenario),
        options=acquisition_options(scenario, hardware, catalog),
        monthly_peaks=monthly_peaks(scenario),
    )
