"""What a plan's search proved: one vocabulary for the API, the command line and JSON."""

from __future__ import annotations

from enum import StrEnum


class PlanStatus(StrEnum):
    """The status of ``solve``'s answer (``docs/milp.md``, "Statuses")."""

    OPTIMAL = "optimal"
    """Proven within the stated tolerance (the MILP's gap, max-BCR's ``bcr_tolerance``) and
    confirmed by the evaluator: it serves the rate it was planned for."""
    TIME_LIMIT = "time_limit"
    """The search stopped (its time limit, its work limits, or the check-and-cut rounds ran
    out) before it proved its answer: the best confirmed plan found, with its gap, or no
    plan if none was confirmed by then."""
    INFEASIBLE = "infeasible"
    """No plan serves the demand within the scenario's limits; the relaxations say which
    limit binds and by how much."""
