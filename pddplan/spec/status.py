"""What a plan's search proved: one vocabulary for the API, the command line and JSON."""

from __future__ import annotations

from enum import StrEnum


class PlanStatus(StrEnum):
    """The status of ``solve``'s answer (``docs/milp.md``, "Statuses")."""

    OPTIMAL = "optimal"
    """Proven within the stated tolerance (the MILP's gap, max-BCR's ``bcr_tolerance``) and
    confirmed by the evaluator: it serves the rate it was planned for."""
    WORK_LIMIT = "work_limit"
    """The search used up a work budget (``solver.node_limit`` in a MILP,
    ``solver.rate_points``, or the check-and-cut rounds) before it proved its answer: the
    best confirmed plan found, with its gap, or no plan if none was confirmed by then. The
    budgets count work, so the answer is the same on any machine."""
    TIME_LIMIT = "time_limit"
    """The wall-clock safety stop (``solver.time_limit_s``, ``--time-limit``) ended the
    search: the best confirmed plan found by then, with its gap, or none. How far a search
    gets in a time depends on the machine, so the answer may differ on a faster one."""
    INFEASIBLE = "infeasible"
    """No plan serves the demand within the scenario's limits; the relaxations say which
    limit binds and by how much."""

    @property
    def stopped(self) -> bool:
        """Whether the search stopped before it proved its answer."""
        return self in (PlanStatus.WORK_LIMIT, PlanStatus.TIME_LIMIT)


class MilpStatus(StrEnum):
    """How one MILP solve ended (``pddplan.plan.solver``): the solver's word, which the
    search turns into a ``PlanStatus``."""

    OPTIMAL = "optimal"
    NODE_LIMIT = "node_limit"
    """Stopped at ``solver.node_limit`` with a feasible solution."""
    NODE_LIMIT_NO_INCUMBENT = "node_limit_no_incumbent"
    TIME_LIMIT = "time_limit"
    """Stopped at the time limit with a feasible solution."""
    TIME_LIMIT_NO_INCUMBENT = "time_limit_no_incumbent"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"

    @property
    def stopped(self) -> bool:
        """Whether the solve stopped early with a feasible solution."""
        return self in (MilpStatus.NODE_LIMIT, MilpStatus.TIME_LIMIT)

    @property
    def on_nodes(self) -> bool:
        """Whether the node limit stopped it (with a solution or without)."""
        return self in (MilpStatus.NODE_LIMIT, MilpStatus.NODE_LIMIT_NO_INCUMBENT)

    @property
    def on_time(self) -> bool:
        """Whether the time limit stopped it (with a solution or without)."""
        return self in (MilpStatus.TIME_LIMIT, MilpStatus.TIME_LIMIT_NO_INCUMBENT)


class EvalStatus(StrEnum):
    """What ``evaluate`` found of a fleet at the scenario's demand (``Evaluation.status``)."""

    OK = "ok"
    """Within every limit at the demand."""
    BELOW_DEMAND = "below_demand"
    """Within every limit at some rate, but its SLA capacity is below the demand."""
    SLA_INFEASIBLE = "sla_infeasible"
    """Within every limit at no rate."""


SIM_TIME_LIMIT = "time_limit"
"""A simulation's verdict when its wall-clock safety stop ended it: none
(``pddplan.simulation.steady``)."""


class PointStatus(StrEnum):
    """A sweep point's outcome (``pddplan.sweeps.points.PointResult.status``)."""

    OK = "ok"
    """Planned: each architecture's row is in ``results``."""
    INVALID = "invalid"
    """Its scenario does not validate (``reason`` says why)."""
    ERROR = "error"
    """Planning it raised (``reason``: the error); a bug to report."""
    INTERRUPTED = "interrupted"
    """Stopped by Ctrl-C before it finished; not journalled, so a resume plans it."""


class RowStatus(StrEnum):
    """One architecture's row at a sweep point (``ArchResult.status``): an evaluation's
    status when it has a plan (``EvalStatus``), else why not."""

    OK = EvalStatus.OK.value
    BELOW_DEMAND = EvalStatus.BELOW_DEMAND.value
    SLA_INFEASIBLE = EvalStatus.SLA_INFEASIBLE.value
    INFEASIBLE = PlanStatus.INFEASIBLE.value
    """No plan: ``reason`` says which limit binds."""
    NOT_APPLICABLE = "not_applicable"
    """The scenario has no such architecture."""
    ERROR = "error"
