"""The runner-ups of a plan: the cheapest deployment of each other family at the demand.

A **family** is an architecture and a chip per role: where prefill runs and on which chip,
whether relay decode runs (as its own pool, on which chip, or on the prefill GPUs), where
main decode runs and on which chip. Inside one datacenter (KV over RDMA) the architecture is
intra-DC PD; across two, PDD with relay decode, or cross-DC PD without it. Layouts (GPUs per
instance, context parallelism), counts, the link tier, the decode-side cache and the router
are the deployment's, chosen within the family as ``solve`` chooses them.

``runner_ups`` plans each family at the demand on the plan's own space restricted to it
(``Space.restricted``): the same count tables, the same relaxation, MILP, check-and-cut
loop and tie rule as the plan (``pddplan.plan.search``), so a runner-up is exactly what
``solve`` would return were the scenario limited to its family. The families are taken
cheapest bound first (``relaxed_optimum`` on each restricted space, a lower bound on its
cost), and the search stops once the next bound exceeds the ``top``-th cost found: the
families it skips cannot be among the ``top`` cheapest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pddplan.evaluation.evaluator import evaluate
from pddplan.evaluation.results import Evaluation
from pddplan.plan.bounds import relaxed_optimum
from pddplan.plan.counts import Requirements
from pddplan.plan.space import Choice, NoOptionsError, PoolOption, Space, State, describe
from pddplan.spec.fleet import Fleet
from pddplan.work import TimeLimitReached, tally, wall_clock

ON_PREFILL = "on prefill"
"""``Family.relay``'s value for relay decode hosted on the prefill instances."""


@dataclass(frozen=True)
class Family:
    """An architecture and a chip per role (see the module docstring)."""

    prefill: tuple[str, str]
    """(datacenter, chip)."""
    main: tuple[str, str]
    """(datacenter, chip)."""
    relay: tuple[str, str] | str | None
    """(datacenter, chip) of a relay-decode pool, ``ON_PREFILL``, or None (no relay
    decode)."""

    @classmethod
    def of(cls, choice: Choice) -> Family:
        """The family of a deployment the planner chose."""
        o = choice.options
        p, m, r = o["prefill"], o["main_decode"], o["relay_decode"]
        assert p is not None and m is not None
        relay: tuple[str, str] | str | None = None
        if r is not None and choice.instances["relay_decode"] > 0:
            relay = ON_PREFILL if r.host is not None else (r.datacenter, r.chip)
        return cls((p.datacenter, p.chip), (m.datacenter, m.chip), relay)

    @classmethod
    def of_fleet(cls, fleet: Fleet) -> Family:
        """The family of a planned fleet (one pool per role, as the planner makes them)."""
        by_role = {p.role: p for p in fleet.pools}
        p, m, r = by_role["prefill"], by_role["main_decode"], by_role.get("relay_decode")
        relay: tuple[str, str] | str | None = None
        if r is not None:
            relay = (r.datacenter, r.chip)
        elif p.hosts_relay_decode:
            relay = ON_PREFILL
        return cls((p.datacenter, p.chip), (m.datacenter, m.chip), relay)

    @property
    def intra_dc(self) -> bool:
        return self.prefill[0] == self.main[0]

    @property
    def architecture(self) -> str:
        """``intra-DC PD``, ``PDD``, ``PDD, RLD on P GPUs`` or ``cross-DC PD``."""
        if self.intra_dc:
            return "intra-DC PD" + ("" if self.relay is None else " + RLD")
        if self.relay is None:
            return "cross-DC PD"
        return "PDD, RLD on P GPUs" if self.relay == ON_PREFILL else "PDD"

    @property
    def label(self) -> str:
        """E.g. ``PDD: P h100-sxm + RLD h100-sxm (cluster-a), MD h200-sxm (cluster-b)``."""
        (p_dc, p_chip), (m_dc, m_chip) = self.prefill, self.main
        head = f"P {p_chip}"
        if isinstance(self.relay, tuple):
            head += f" + RLD {self.relay[1]}"
        if self.intra_dc:
            return f"{self.architecture}: {head} + MD {m_chip} ({p_dc})"
        return f"{self.architecture}: {head} ({p_dc}), MD {m_chip} ({m_dc})"

    def admits(self, o: PoolOption) -> bool:
        """Whether option ``o`` belongs to this family."""
        if o.role == "prefill":
            return (o.datacenter, o.chip) == self.prefill
        if o.role == "main_decode":
            return (o.datacenter, o.chip) == self.main
        if self.relay == ON_PREFILL:
            return o.host is not None and o.datacenter == self.prefill[0]
        return o.host is None and (o.datacenter, o.chip) == self.relay

    def carries(self, st: State) -> bool:
        """Whether transfer state ``st`` joins this family's prefill to its main decode."""
        if (st.p_dc, st.md_dc) != (self.prefill[0], self.main[0]):
            return False
        return st.gbps is not None or st.p_chip == self.prefill[1]

    def space(self, space: Space) -> Space:
        """``space`` restricted to this family (``Space.restricted``)."""
        return space.restricted(self.admits, self.carries, relay_required=self.relay is not None)


def families(space: Space) -> list[Family]:
    """Every family ``space`` can deploy: each prefill (datacenter, chip) with each main-decode
    one some transfer state joins it to, with each way of running relay decode beside that
    prefill (none; a pool of each relay-decode chip there; on the prefill GPUs where they
    may host it). Sorted, so the order is the same on every run."""
    out: set[Family] = set()
    opts = space.options
    prefill = {(o.datacenter, o.chip) for o in opts["prefill"]}
    main = {(o.datacenter, o.chip) for o in opts["main_decode"]}
    for p in prefill:
        relays: list[tuple[str, str] | str | None] = [None]
        relays += sorted({(o.datacenter, o.chip) for o in opts["relay_decode"]
                          if o.host is None and o.datacenter == p[0]})  # fmt: skip
        if any(o.host is not None and o.datacenter == p[0] and o.chip == p[1]
               for o in opts["relay_decode"]):  # fmt: skip
            relays.append(ON_PREFILL)
        for m in main:
            # relay decode hides a WAN transfer: inside one datacenter it is no family of
            # its own (the planner may still add it to an intra-DC plan)
            for r in [None] if p[0] == m[0] else relays:
                f = Family(p, m, r)
                if any(f.carries(st) for st in space.states):
                    out.add(f)
    return sorted(out, key=lambda f: (f.prefill, f.main, f.relay is not None, str(f.relay)))


@dataclass(frozen=True)
class RunnerUp:
    """The cheapest deployment of one family at the demand, as ``solve`` would plan it."""

    family: Family
    fleet: Fleet
    evaluation: Evaluation
    """At the demand: its cost, SLA capacity, TTFT."""
    deployment: str
    """Its pools, link and relay cut in one line (``pddplan.plan.space.describe``)."""

    @property
    def cost_per_hour_usd(self) -> float:
        cost = self.evaluation.cost_per_hour_usd
        return math.inf if cost is None else cost


@dataclass(frozen=True)
class RunnerUps:
    """``runner_ups``' answer: the runner-ups, cheapest first, and what was not planned."""

    rows: tuple[RunnerUp, ...]
    """The ``top`` cheapest, then the cheapest intra-DC one where none of those is
    (``intra_dc``)."""
    families: int
    """Families the scenario allows, the plan's own included."""
    unserved: tuple[Family, ...]
    """Families with no plan at the demand (not even the relaxation's, or none the
    evaluator confirms)."""
    stopped: str | None = None
    """What stopped the search before it proved these the cheapest (None: it did not)."""

    @property
    def intra_dc_allowed(self) -> bool:
        """Whether the scenario allows intra-DC PD at all (some datacenter may run both
        prefill and main decode)."""
        return any(r.family.intra_dc for r in self.rows) or any(f.intra_dc for f in self.unserved)


def runner_ups(
    space: Space,
    plan: Choice,
    rate: float,
    top: int,
    plan_family: Callable[[Space, float], tuple[Choice | None, float, float, str | None]],
    *,
    clock: Callable[[], float] = wall_clock,
    deadline: float = math.inf,
) -> RunnerUps:
    """The ``top`` cheapest families other than ``plan``'s, each with its cheapest deployment
    at ``rate`` (see the module docstring). ``plan_family(space, rate)`` plans one family's
    restricted space as ``solve`` does: (choice, $/hour, SLA capacity, stop reason), the
    choice None where it has no plan. ``deadline`` (on ``clock``): the solve's safety stop;
    past it the answer so far, with ``stopped`` said."""
    own = Family.of(plan)
    others = [f for f in families(space) if f != own]
    if top <= 0 or not others:
        return RunnerUps((), len(others) + 1, ())
    bounded: list[tuple[float, int, Family, Space]] = []
    unserved: list[Family] = []
    for i, f in enumerate(others):
        try:
            sub = f.space(space)
        except NoOptionsError:
            unserved.append(f)
            continue
        tally("runner_up_bounds")
        bound = relaxed_optimum(Requirements(sub, rate)).cost
        if math.isfinite(bound):
            bounded.append((bound, i, f, sub))
        else:  # not even the relaxation serves the rate
            unserved.append(f)
    bounded.sort(key=lambda x: (x[0], x[1]))
    found: list[RunnerUp] = []
    stopped = None

    def worth(bound: float, f: Family) -> bool:
        """Whether a family of cost at least ``bound`` can still be shown: among the
        ``top`` cheapest, or the cheapest intra-DC one (bounds come in order, costs are at
        least their bounds)."""
        if len(found) < top or bound <= found[top - 1].cost_per_hour_usd * (1 + 1e-9):
            return True
        intra = [r for r in found if r.family.intra_dc]
        return f.intra_dc and (not intra or bound <= intra[0].cost_per_hour_usd * (1 + 1e-9))

    for bound, _, f, sub in bounded:
        if not worth(bound, f):
            continue
        if clock() >= deadline:
            stopped = "the time limit"
            break
        try:
            choice, _, _, stop = plan_family(sub, rate)
        except TimeLimitReached:
            stopped = "the time limit"
            break
        tally("runner_up_plans")
        if choice is None:
            unserved.append(f)
        else:
            fleet = sub.fleet(choice, f"{f.architecture} runner-up")
            found.append(RunnerUp(f, fleet, evaluate(space.problem, fleet), describe(choice)))
            found.sort(key=lambda r: (r.cost_per_hour_usd, r.family.label))
        if stop is not None:
            stopped = stop
            break
    rows = found[:top]
    intra = next((r for r in found if r.family.intra_dc), None)
    if intra is not None and intra not in rows:
        rows.append(intra)
    unserved.sort(key=lambda f: f.label)
    return RunnerUps(tuple(rows), len(others) + 1, tuple(unserved), stopped)


__all__ = ["ON_PREFILL", "Family", "RunnerUp", "RunnerUps", "families", "runner_ups"]
