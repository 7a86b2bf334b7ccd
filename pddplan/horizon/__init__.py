"""Plans over time, their inputs: a scenario's ``horizon:`` cut into periods (tranche x
hour-of-day group, each with the demand it must serve and its weight in cost: ``periods``),
and how each GPU can be had in each datacenter (owned, reserved, on demand: ``acquisition``),
gathered for the horizon planner in ``HorizonInputs`` (``inputs``). Pure functions of the
validated spec: no files, no solver. May import: ``spec``, ``units``, ``errors``."""

from pddplan.horizon.acquisition import (
    ChipOptions,
    OnDemandOption,
    OwnedOption,
    ReservedOption,
    acquisition_options,
    acquisition_problems,
)
from pddplan.horizon.inputs import HorizonInputs, horizon_inputs
from pddplan.horizon.periods import (
    Period,
    Tranche,
    hour_groups,
    monthly_peaks,
    period_scenario,
    periods,
    tranches,
)

__all__ = [
    "ChipOptions",
    "HorizonInputs",
    "OnDemandOption",
    "OwnedOption",
    "Period",
    "ReservedOption",
    "Tranche",
    "acquisition_options",
    "acquisition_problems",
    "horizon_inputs",
    "hour_groups",
    "monthly_peaks",
    "period_scenario",
    "periods",
    "tranches",
]
