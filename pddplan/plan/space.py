"""The planner's view of a scenario: every choice it may make, and what each choice needs.

Choices (``Space``, independent of the arrival rate):

- **pool options** per role: (datacenter, chip, GPUs per instance) where the role is allowed,
  the weights fit, and (for decode roles) some batch meets the TPOT bound;
- **transfer states**: where MD sits relative to P, and over what: a WAN link tier between
  two datacenters, or RDMA inside one (then the state also names the prefill chip, whose NIC
  sends the KV);
- **router settings**: the relay cut (requests whose WAN payload exceeds it go through RLD),
  the singular cut (relayed requests with at most this many output tokens finish on RLD) and
  the catch-up cut (handoffs with more eager tokens than this catch up in chunks);
- **RLD pace bands** (``Band``): the step relay decode runs at lies below one band's
  ceiling: its batch (its requests over its instances) is small enough, so its count large
  enough; the step sets the eager tokens main decode is spared.

At an arrival rate, ``pddplan.plan.counts.Requirements`` evaluates every nonlinear part of the model into
**minimum instance counts** (``pddplan.plan.counts``): the smallest number of instances of
a pool option that meets every limit of its role, for each relay cut. The MILP
(``pddplan.plan.milp``) only sees these integers, so nothing nonlinear reaches the solver.
"""

from __future__ import annotations

import bisect
import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from pddplan import units
from pddplan.errors import InputError, WeightsDoNotFitError
from pddplan.model.admission import ADMISSION_GRID, md_wait_probability
from pddplan.model.colocation import HostPoint
from pddplan.model.instance import Instance, PrefillFigures
from pddplan.model.md_cache import CacheChoice, tier_reads
from pddplan.model.prefill_queue import PassOrder
from pddplan.model.pricing import gpu_price, link_usd_per_hour, owned_discount
from pddplan.model.problem import Problem
from pddplan.model.routing import relay_shares
from pddplan.spec.engine import DP_OVER_TP, RELAY_ON_OTHER_ENGINE, RELAY_ON_PREFILL
from pddplan.spec.fleet import CacheSizes, Fleet, Handoff, LinkChoice, Pool, Routing
from pddplan.spec.scenario import ROLE_SHORT, ROLES, Link, LinkTier, Role
from pddplan.workload.classes import output_class_edges


class NoOptionsError(InputError):
    """No allowed chip and size can serve a role (weights, or the TPOT bound): the scenario
    is infeasible before any counting."""


@dataclass(frozen=True)
class PoolOption:
    """Instances of ``gpus`` x ``chip`` in ``datacenter``, serving ``role``."""

    role: Role
    datacenter: str
    chip: str
    gpus: int
    instance: Instance = field(repr=False, compare=False)
    usd_per_gpu_hour: float
    unit_step: int
    """Instances come in multiples of this (the chip's purchase unit over ``gpus``)."""
    max_instances: int
    batch: int = 0
    """Decode roles: the largest batch meeting TPOT at the planning context."""
    step_s: float = 0.0
    context_parallel: bool = False
    """Prefill: each prompt's attention split over the instance's attention groups."""
    attention_tp: int | None = None
    """Prefill: its attention tensor-parallel over this many GPUs (each prompt's heads split
    over them) where the engine cannot split it by context (None: the model's own)."""
    store: int | None = None
    """Main decode with a tiered cache: its ``md_cache`` option (whose tiers the price
    includes)."""
    hosting: bool = False
    """Prefill: a host, whose instances carry relay decode (the option of ``host`` its
    key), so their passes run at the chunk that keeps them within the TPOT bound, each
    carrying the hosted tokens (``pddplan.model.colocation``). The planner buys it only
    with that relay decode, at a cut that relays: without, the fleet is the plain
    option's."""
    host: str | None = None
    """Relay decode on prefill instances: the key of the hosting prefill option. Its
    instances are the host's (at most one per host instance) and cost nothing."""

    @cached_property
    def key(self) -> str:
        cp = ".cp" if self.context_parallel else ""
        cp += "" if self.attention_tp is None else f".tp{self.attention_tp}"
        store = "" if self.store is None else f".s{self.store}"
        hosted = ".hosting" if self.hosting else ".on-prefill" if self.host else ""
        return f"{self.role}.{self.datacenter}.{self.chip}.x{self.gpus}{cp}{store}{hosted}"

    @property
    def bought_gpus(self) -> int:
        """GPUs one instance adds to the datacenter's (a hosted relay decode's are its
        host's)."""
        return 0 if self.host is not None else self.gpus

    @property
    def usd_per_instance_hour(self) -> float:
        return self.usd_per_gpu_hour * self.bought_gpus


PACE_BANDS = 6
"""Relay decode's pace bands: step ceilings spread geometrically from the fastest step any
RLD option takes (one sequence a batch) to the slowest it may take (its largest batch)."""


@dataclass(frozen=True)
class Band:
    """Relay decode runs at a step of at most ``step_s`` (its batch per instance small
    enough for that, so its count large enough for its load); ``NO_RLD`` (index -1): a plan
    without relay decode. The step sets the eager tokens each relayed request makes."""

    index: int
    step_s: float

    @property
    def key(self) -> str:
        return "none" if self.index < 0 else f"pace{self.index}"


NO_RLD = Band(-1, 0.0)


def pace_bands(fastest_s: float, slowest_s: float, count: int = PACE_BANDS) -> list[Band]:
    """``count`` bands with step ceilings from ``fastest_s`` to ``slowest_s`` (one band when
    they are equal)."""
    if slowest_s <= fastest_s * (1 + 1e-9):
        return [Band(0, slowest_s)]
    return [Band(i, float(x)) for i, x in enumerate(np.geomspace(fastest_s, slowest_s, count))]


@dataclass(frozen=True)
class State:
    """How KV reaches main decode: over ``gbps`` of the link ``p_dc``-``md_dc``, or by RDMA
    inside one datacenter from a ``p_chip`` prefill pool (``gbps`` None)."""

    p_dc: str
    md_dc: str
    gbps: float | None = None
    p_chip: str | None = None
    link: Link | None = field(default=None, repr=False, compare=False)
    usd_per_hour: float = 0.0
    cache: int = 0
    """Index of the decode-side cache choice (``Space.caches``)."""
    md: CacheChoice | None = field(default=None, repr=False, compare=False)
    """That choice (None before the states are made)."""
    tier: LinkTier | None = field(default=None, repr=False, compare=False)
    twin: str = ""
    """The transfer and its payloads: states of one transfer whose cache choices give
    equal payloads (one kept share under several tiers) share it, and with it their WAN
    times (``Requirements.twins``)."""

    @property
    def cache_gb(self) -> float | None:
        """The cache choice's HBM reserve per MD GPU (None: nothing reserved)."""
        return self.md.reserve_gb if self.md is not None else None

    @property
    def store(self) -> int | None:
        """The tiered ``md_cache`` option whose MD instances this state needs (None: any)."""
        return self.md.option if self.md is not None and self.md.tiered else None

    @cached_property  # a dictionary key on every count lookup
    def key(self) -> str:
        cache = self.md.key if self.md is not None else ""
        if self.gbps is None:
            return f"{self.p_dc}.rdma.{self.p_chip}{cache}"
        return f"{self.p_dc}-{self.md_dc}.{self.gbps:g}G{cache}"

    @property
    def wan(self) -> Link:
        """The WAN link KV crosses (a state over RDMA has none)."""
        if self.link is None:
            raise ValueError(f"transfer state {self.key} is RDMA inside one datacenter")
        return self.link

    @property
    def sender(self) -> str:
        """The prefill chip whose NIC sends the KV of an RDMA state."""
        if self.p_chip is None:
            raise ValueError(f"transfer state {self.key} crosses a WAN link")
        return self.p_chip

    def sent_by(self, o: PoolOption) -> bool:
        """Whether prefill option ``o`` is this state's sender (in ``p_dc``, and of
        ``p_chip`` for an RDMA state)."""
        return o.datacenter == self.p_dc and (self.p_chip is None or self.p_chip == o.chip)

    def received_by(self, o: PoolOption) -> bool:
        """Whether main-decode option ``o`` receives this state's KV (in ``md_dc``, with
        the state's tiered cache where it has one)."""
        return o.datacenter == self.md_dc and o.store == self.store


@dataclass(frozen=True)
class Choice:
    """One point of the planner's decision space (what the MILP returns)."""

    options: dict[Role, PoolOption | None]
    instances: dict[Role, int]
    state: State
    cut: float | None
    singular: int
    catch_up: int | None
    band: Band = field(default_factory=lambda: NO_RLD)
    """Relay decode's count band (``NO_RLD`` without relay decode)."""


def hardware_key(choice: Choice) -> tuple:
    """What a choice buys, without its router: the transfer state and each role's option
    and count. The check-and-cut loop rejects deployments by it (``pddplan.plan.search``)."""
    return (
        choice.state.key,
        tuple((o.key, choice.instances[role]) for role, o in choice.options.items() if o),
    )


def describe(choice: Choice) -> str:
    """A deployment in one line: each pool's role, count, layout and chip, the link, the
    router's relay cut."""
    pools = [
        f"{ROLE_SHORT[role]} {choice.instances[role]} x {o.gpus} {o.chip}"
        + (" (on P)" if o.host is not None else "")
        + (" CP" if o.context_parallel else "")
        + (f" TP{o.attention_tp} attention" if o.attention_tp is not None else "")
        for role, o in choice.options.items()
        if o is not None and choice.instances[role] > 0
    ]
    st = choice.state
    link = f"{st.gbps:g} Gbps" if st.gbps is not None else "RDMA"
    cut = "relay nothing" if choice.cut is None else f"relay above {choice.cut:,.1f} MB"
    return f"{' + '.join(pools)}; {link}; {cut}"


class Space:
    """Every choice the planner may make for ``scenario`` (see the module docstring)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self._fleets: dict[tuple, Fleet] = {}
        """``fleet``'s deployments, by what each is built from."""
        scenario, hardware = problem.scenario, problem.hardware
        self.scenario, self.hw, self.model = scenario, hardware, problem.model
        self.classes = problem.classes
        a = problem.arrays
        self.w, self.inp, self.out, self.hit = a.w, a.inp, a.out, a.hit
        self.out_points = a.out_points
        self.caches = problem.md_caches
        """Decode-side cache choices (``pddplan.model.md_cache.CacheChoice``)."""
        if problem.output_tokens_per_request <= 0:
            raise InputError("the workload produces no output tokens: there is nothing to decode")
        self.tpot_s = scenario.sla.tpot_ms * units.MS
        self.rho = scenario.search.max_utilization
        self.link_rho = scenario.search.max_link_utilization
        # decode operating context: token-weighted mean context (as the evaluator)
        self.ctx = problem.decode_context_tokens
        self.left_out: dict[tuple[str, str], dict[str, list[int]]] = {}
        """What each role's engine release cannot launch (``EngineProfile.launch``), left
        out of the search: per (engine label, reason), per chip, the instance sizes
        (``left_out_lines`` words them)."""
        self.options: dict[Role, list[PoolOption]] = {r: self._options(r) for r in ROLES}
        self.options["relay_decode"] += self._hosted(self.options["prefill"])
        for role in ("prefill", "main_decode"):
            if not self.options[role]:
                raise NoOptionsError(
                    f"scenario {scenario.name}: no {role} option: "
                    + "; ".join(self._why_no_option(role))
                )
        kv = problem.kv
        self.payloads = [
            np.array([kv.transfer_bytes(L, h) for L, h in zip(self.inp, hits, strict=True)])
            for hits in (c.hits for c in self.caches)
        ]
        """Per cache choice: each class's WAN payload (what MD's cache lacks, plus state)."""
        self.rdma_bytes = np.array([kv.transfer_bytes(L, 0.0) for L in self.inp])
        self.fetch_s = [self._fetch_s(c) for c in self.caches]
        """Per cache choice: each class's fetch of its hit into HBM, taken from the choice's
        lowest tier at the slowest main-decode chip's read (DRAM or SSD; HBM alone: 0)."""
        self.states = self._states()
        self.owned: dict[tuple[str, str], tuple[int, float]] = {
            (dc_id, chip): (n, owned_discount(problem, dc_id, chip))
            for dc_id, dc in scenario.datacenters.items()
            for chip, n in dc.inventory.items()
            if any(o.datacenter == dc_id and o.chip == chip for r in ROLES for o in self.options[r])
        }
        """(datacenter, chip) -> (GPUs owned there, USD per GPU-hour an owned one saves)."""
        self.cuts = relay_cuts(np.concatenate(self.payloads))
        self.relay_float = [self._relay_shares(c.hits) for c in self.caches]
        """Per cache choice: cuts x classes, the share of each class's requests each cut
        relays (``pddplan.model.routing.relay_shares``: the router compares each request's
        payload); kept on the problem, since no price moves it (a price sweep's spaces share
        them)."""
        self.relay_matrix = [m > 0 for m in self.relay_float]
        """Per cache choice: cuts x classes, whether each cut relays any of the class."""
        self.relays_any = np.any([m.any(axis=1) for m in self.relay_matrix], axis=0)
        """Per cut: whether it relays anything under some cache choice."""
        search = scenario.search
        self.singular_cuts: tuple[int, ...] = (
            search.singular_max_output_tokens
            if search.singular_max_output_tokens is not None
            else default_singular_cuts(self.out, output_class_edges(scenario.workload))
        )
        self.catch_up_cuts = search.catch_up_above_tokens
        self.chunk_tokens = search.handoff_chunk_tokens
        rld = self.options["relay_decode"]
        self.fastest_rld_step_s = min((self.decode_steps(o)[1][0] for o in rld), default=0.0)
        """The fastest step any RLD option takes (one sequence a batch)."""
        slowest = max((o.step_s for o in rld), default=0.0)
        self.bands: list[Band] = pace_bands(self.fastest_rld_step_s, slowest) if rld else []
        """Relay decode's pace bands (``NO_RLD`` aside)."""
        self.relay_required = False
        """Whether every plan must have relay decode (a ``restricted`` space's family that
        has it): the pace band "none" is then not a choice."""
        self._prefill_needs: dict[tuple, list[tuple[float, np.ndarray]]] = {}
        self._first_steps: dict[str, dict[float, list[PoolOption]]] = {}
        self._md_waits: dict[tuple[str, int, int, int], np.ndarray] = {}

    def restricted(
        self,
        keep_option: Callable[[PoolOption], bool],
        keep_state: Callable[[State], bool],
        *,
        relay_required: bool = False,
    ) -> Space:
        """This space with only the options and transfer states kept, and with relay decode
        required or not (``pddplan.plan.alternatives``: one family of deployments). It keeps
        this space's ``structure``, so its count tables are this space's (``Requirements``
        shares them through ``Problem.memo``): a count depends on its own option, state and
        cuts, never on which other options exist. Raises ``NoOptionsError`` when it leaves
        prefill or main decode without an option."""
        structure = self.structure  # computed before the copy, so the copy shares it
        sub = copy.copy(self)
        sub.options = {r: [o for o in self.options[r] if keep_option(o)] for r in ROLES}
        for role in ("prefill", "main_decode"):
            if not sub.options[role]:
                raise NoOptionsError(f"the restriction leaves no {role} option")
        sub.states = [st for st in self.states if keep_state(st)]
        sub.relay_required = relay_required
        sub._first_steps = {}  # per state, the main-decode options kept
        sub.__dict__["structure"] = structure
        return sub

    def _relay_shares(self, hits: np.ndarray) -> np.ndarray:
        """``pddplan.model.routing.relay_shares`` at these cuts, kept on the problem (no price
        moves it) and read-only (every space derived alike shares it)."""
        problem, cuts = self.problem, self.cuts

        def make() -> np.ndarray:
            shares = relay_shares(problem, hits, cuts)
            shares.flags.writeable = False
            return shares

        return problem.memo("counts", ("relay_shares", hits.tobytes(), tuple(cuts)), make)

    @cached_property
    def structure(self) -> tuple:
        """What a count is keyed on beyond its option, state and cut keys: every option's
        key with its instance limits and step, the transfer states, the cuts and the pace
        bands. Two spaces of problems whose physical inputs agree (``Problem.memo``)
        and whose structures are equal give equal counts whatever their prices."""
        return (
            tuple(
                (o.key, o.max_instances, o.unit_step, o.batch, o.step_s)
                for r in ROLES
                for o in self.options[r]
            ),
            tuple((st.key, st.twin) for st in self.states),
            tuple(self.cuts),
            self.singular_cuts,
            self.catch_up_cuts,
            tuple(b.step_s for b in self.bands),
        )

    # --- choices ----------------------------------------------------------------------------
    def _options(self, role: Role) -> list[PoolOption]:
        s, hw, problem = self.scenario, self.hw, self.problem
        out = []
        # tiered cache options: main decode's instances come with one option's tiers
        stores = {c.option: c.usd_per_gpu_hour for c in self.caches if c.tiered}
        launch = problem.engine_for(role).launch
        for dc_id, chip_id in s.chips_for(role):
            dc, chip = s.datacenters[dc_id], hw.chips[chip_id]
            price = gpu_price(problem, chip_id, dc_id).full
            for g in s.search.sizes():
                if not problem.fits(chip_id, g, role=role):
                    continue
                inst = problem.instance(chip_id, g, role=role)
                batch, step = 0, 0.0
                if role != "prefill":
                    batch, step = problem.decode_point(chip_id, g, role=role)
                    if batch == 0:
                        continue
                limit_gpus = min(
                    x for x in (dc.max_gpus, s.search.max_gpus_per_pool) if x is not None
                )
                unit = math.lcm(g, chip.purchase_unit_gpus) // g
                most = (limit_gpus // g) // unit * unit
                if most < 1:
                    continue
                option = PoolOption(role, dc_id, chip_id, g, inst, price, unit, most, batch, step)
                if role == "main_decode" and stores:
                    out += [
                        replace(option, store=i, usd_per_gpu_hour=price + extra)
                        for i, extra in stores.items()
                    ]
                    continue
                layouts = s.search.context_parallel
                split = role == "prefill" and True in layouts and inst.attention_groups >= 2
                if split and (why := launch.context_parallel(self.model.attention, g)):
                    self._leave_out(role, why, chip_id, g)
                    split = False
                    if (heads := self._heads_split(option)) is not None:
                        out.append(heads)
                    if False not in layouts:
                        continue
                if not split or False in layouts:  # one attention group: as it is
                    out.append(option)
                    out += self._hosting(option)
                if split:
                    cp = problem.instance(chip_id, g, context_parallel=True, role=role)
                    out.append(replace(option, instance=cp, context_parallel=True))
        return out

    def _why_no_option(self, role: Role) -> list[str]:
        """Per allowed (datacenter, chip): what rules it out for ``role``, the weights, the
        TPOT bound, or the smallest purchase that holds them against the GPU limit."""
        s, problem, out = self.scenario, self.problem, []
        sizes = s.search.sizes()
        for dc_id, chip_id in s.chips_for(role):
            dc, chip = s.datacenters[dc_id], self.hw.chips[chip_id]
            held = [g for g in sizes if problem.fits(chip_id, g, role=role)]
            if not held:
                out.append(
                    f"{chip_id} in {dc_id} holds {self.model.id}'s weights at none of the "
                    f"searched sizes {list(sizes)} GPUs per instance"
                )
                continue
            if role != "prefill":
                held = [g for g in held if problem.decode_point(chip_id, g, role=role)[0] > 0]
                if not held:
                    out.append(
                        f"{chip_id} in {dc_id} meets the TPOT bound ({s.sla.tpot_ms:g} ms) "
                        "at none of the sizes that hold the weights"
                    )
                    continue
            g = min(held)
            per_dc = dc.max_gpus if dc.max_gpus is not None else math.inf
            limit, key = min(
                (per_dc, f"datacenters.{dc_id}.max_gpus"),
                (s.search.max_gpus_per_pool, "search.max_gpus_per_pool"),
            )
            bought = math.lcm(g, chip.purchase_unit_gpus)
            if g > limit:
                why = f"needs {g} GPUs per instance to hold {self.model.id}'s weights"
            else:
                why = (
                    f"holds the weights on {g} GPU{'s' if g > 1 else ''} but is bought in "
                    f"{chip.purchase_unit_gpus}-GPU units, so a pool takes {bought} GPUs"
                )
            out.append(f"{chip_id} in {dc_id} {why}; {key} is {int(limit):,}")
        return out or ["no chip is allowed for it in any datacenter (datacenters.*.roles)"]

    def _hosting(self, option: PoolOption) -> list[PoolOption]:
        """A prefill option's variant whose instances may host relay decode, where the
        scenario lets the planner place it there and the instance can
        (``Problem.host_point``)."""
        s, problem = self.scenario, self.problem
        dc = s.datacenters[option.datacenter]
        if (
            option.role != "prefill"
            or True not in s.search.relay_decode_on_prefill
            or "relay_decode" not in dc.roles
            or problem.host_point(option.chip, option.gpus) is None
        ):
            return []
        for role in ("prefill", "relay_decode"):
            if not problem.engine_for(role).launch.relay_decode_on_prefill:
                self._leave_out(role, RELAY_ON_PREFILL, option.chip, option.gpus)
                return []
        if problem.engine_for("prefill").id != problem.engine_for("relay_decode").id:
            self._leave_out("relay_decode", RELAY_ON_OTHER_ENGINE, option.chip, option.gpus)
            return []
        return [
            replace(option, instance=problem.host_instance(option.chip, option.gpus), hosting=True)
        ]

    def _heads_split(self, option: PoolOption) -> PoolOption | None:
        """In place of context parallelism the engine cannot launch: ``option`` with its
        attention tensor-parallel over the widest power of two of GPUs inside one scale-up
        domain (each prompt's heads split over them), or over the whole instance where the
        engine runs no tensor-parallel attention groups side by side, where that is wider
        than the model's own layout; None otherwise."""
        g = option.gpus
        width = 1 << (min(g, self.hw.chips[option.chip].scaleup_domain_gpus).bit_length() - 1)
        if why := self.problem.engine_for(option.role).launch.attention_groups(g, width):
            self._leave_out(option.role, why, option.chip, g)
            width = g  # one attention group over the whole instance
        if width <= option.instance.layout.attn_tp or g % width:
            return None
        try:
            inst = self.problem.instance(option.chip, g, attention_tp=width, role=option.role)
        except (InputError, WeightsDoNotFitError):
            return None
        return replace(option, instance=inst, attention_tp=width)

    def _leave_out(self, role: Role, reason: str, chip: str, gpus: int) -> None:
        """Leave ``gpus`` x ``chip`` out for ``reason``, a limit of ``role``'s engine."""
        label = self.problem.engine_for(role).label
        if reason == RELAY_ON_OTHER_ENGINE:
            label = (
                f"{self.problem.engine_for('prefill').label} (prefill) with "
                f"{self.problem.engine_for('relay_decode').label} (relay_decode)"
            )
        sizes = self.left_out.setdefault((label, reason), {}).setdefault(chip, [])
        if gpus not in sizes:
            sizes.append(gpus)

    def left_out_lines(self) -> list[str]:
        """One line per engine and reason its release removed layouts from the search: what
        it cannot launch, on which instances, and what the planner tried instead."""
        out = []
        for (label, reason), chips in self.left_out.items():
            where = "; ".join(
                f"{' and '.join(map(str, sorted(sizes)))} x {chip}" for chip, sizes in chips.items()
            )
            whole = any(r == DP_OVER_TP and x == label for x, r in self.left_out)
            inside = "over the whole instance" if whole else "inside a host"
            instead = {
                RELAY_ON_PREFILL: "relay decode planned as a pool of its own",
                RELAY_ON_OTHER_ENGINE: "relay decode planned as a pool of its own",
                DP_OVER_TP: "one attention group over the whole instance instead",
            }.get(reason, f"their attention heads split {inside} instead")
            out.append(f"{label} cannot launch {reason} ({where}): {instead}")
        return out

    def _hosted(self, prefill: list[PoolOption]) -> list[PoolOption]:
        """Relay decode on each hosting prefill option's instances: free, one instance per
        host instance, at the host's batch and its mixed pass at that batch."""
        out = []
        for p in prefill:
            if not p.hosting:
                continue
            point = self.host_point(p)
            out.append(
                replace(
                    p,
                    role="relay_decode",
                    usd_per_gpu_hour=0.0,
                    unit_step=1,
                    batch=point.batch,
                    step_s=float(point.mixed_s[-1]),
                    hosting=False,
                    host=p.key,
                )
            )
        return out

    def host_point(self, o: PoolOption) -> HostPoint:
        """How a hosting prefill option, or a hosted relay decode's host, hosts."""
        point = self.problem.host_point(o.chip, o.gpus)
        if point is None or not (o.hosting or o.host is not None):
            raise ValueError(f"{o.key} does not host relay decode")
        return point

    def _states(self) -> list[State]:
        s = self.scenario
        p_dcs = sorted({o.datacenter for o in self.options["prefill"]})
        md_dcs = sorted({o.datacenter for o in self.options["main_decode"]})
        out = []
        for a in p_dcs:
            for b in md_dcs:
                if a == b:
                    chips = sorted({o.chip for o in self.options["prefill"] if o.datacenter == a})
                    out += [State(a, b, None, c) for c in chips]
                    continue
                link = next((x for x in s.links if set(x.between) == {a, b}), None)
                if link is None:
                    continue
                out += [State(a, b, tier.gbps, None, link, tier=tier) for tier in link.tiers]
        demand = s.workload.arrival_rps or 0.0

        def usd_per_hour(st: State, k: int) -> float:
            """The tier's price, its egress billed on the demand's traffic (RDMA: free)."""
            if st.tier is None:
                return 0.0
            return link_usd_per_hour(st.tier, demand * float(self.w @ self.payloads[k]))

        same = [  # per cache choice: the first with equal payloads
            next(j for j in range(k + 1) if np.array_equal(self.payloads[j], self.payloads[k]))
            for k in range(len(self.caches))
        ]
        out = [
            replace(st, cache=k, md=c, usd_per_hour=usd_per_hour(st, k), twin=f"{st.key}~{same[k]}")
            for st in out
            for k, c in enumerate(self.caches)
        ]
        if not out:
            raise InputError(
                f"scenario {s.name}: no prefill option is in, or linked to, the datacenter "
                "of a main_decode option"
            )
        return out

    def _fetch_s(self, c: CacheChoice) -> np.ndarray:
        if not c.tiered or not (c.dram_gb or c.ssd_gb):
            return np.zeros_like(self.inp)
        reads = [tier_reads(self.hw, self.hw.chips[o.chip]) for o in self.options["main_decode"]]
        read = min(ssd if c.ssd_gb else dram for dram, ssd in reads)
        hit_bytes = c.hits * self.inp * self.problem.kv.bytes_per_token
        return hit_bytes / read if read > 0 else np.where(hit_bytes > 0, np.inf, 0.0)

    def relayed(self, cut: float | None, cache: int = 0) -> np.ndarray:
        """Per class, the share of its requests the relay cut sends through RLD under a
        cache choice (the evaluator's arithmetic, ``pddplan.model.routing.relay_shares``)."""
        if cut is None:
            return np.zeros_like(self.w)
        return self.relay_float[cache][self.cuts.index(cut)]

    def within_limits(self, usage: list[tuple[str, str, int]]) -> bool:
        """Whether GPUs used, as (datacenter, chip, GPUs), respect every datacenter's
        ``max_gpus`` and ``max_power_kw`` (TDP x PUE)."""
        for dc_id, dc in self.scenario.datacenters.items():
            here = [(chip, n) for d, chip, n in usage if d == dc_id]
            if dc.max_gpus is not None and sum(n for _, n in here) > dc.max_gpus:
                return False
            if dc.max_power_kw is not None:
                kw = sum(n * self.hw.chips[chip].tdp_w / 1000 * dc.pue for chip, n in here)
                if kw > dc.max_power_kw * (1 + 1e-12):
                    return False
        return True

    def pools_cost(self, pools: list[tuple[PoolOption | None, int]]) -> float:
        """USD per hour of (option, instances) pools, owned GPUs at their running cost."""
        total, used = 0.0, dict[tuple[str, str], int]()
        for o, n in pools:
            if o is not None:
                total += o.usd_per_instance_hour * n
                key = (o.datacenter, o.chip)
                used[key] = used.get(key, 0) + o.bought_gpus * n
        for key, gpus in used.items():
            if key in self.owned:
                owned, discount = self.owned[key]
                total -= discount * min(gpus, owned)
        return total

    def decode_steps(self, o: PoolOption) -> tuple[np.ndarray, np.ndarray]:
        """``o``'s (batches, decode steps) up to its largest batch (relay decode's pace,
        ``Problem.decode_steps``); hosted on prefill instances, their mixed passes, as if
        prefill were always busy (the slower step, so the count holds at any load)."""
        if o.host is not None:
            return self.host_point(o).steps(1.0)
        return self.problem.decode_steps(o.chip, o.gpus, role=o.role)

    def md_wait_table(self, o: PoolOption, batch: int, instances: int) -> np.ndarray:
        """The share of MD's arrivals that wait for a slot on ``instances`` instances of
        ``o`` at ``batch``, at each utilization of ``ADMISSION_GRID`` (``md_wait_probability``);
        kept for every rate the search tries."""
        key = (o.chip, o.gpus, batch, instances)
        if key not in self._md_waits:
            self._md_waits[key] = md_wait_probability(
                batch,
                instances,
                self.problem.decode_steps(o.chip, o.gpus, role="main_decode"),
                ADMISSION_GRID,
            )
        return self._md_waits[key]

    def md_point(self, o: PoolOption, st: State) -> tuple[int, float]:
        """Main decode's (batch, step seconds) on ``o`` with the HBM ``st``'s cache choice
        reserves (batch 0: nothing fits)."""
        if st.cache_gb is None:
            return o.batch, o.step_s
        return self.problem.decode_point(o.chip, o.gpus, st.cache_gb, role="main_decode")

    def extend_pass_s(self, o: PoolOption, tokens: np.ndarray, k: np.ndarray) -> np.ndarray:
        """``o``'s pass over ``tokens`` new tokens on top of classes ``k``'s inputs (an MD
        handoff stall)."""
        return self.problem.extend_pass_s(o.chip, o.gpus, tokens, k)

    def first_step_s(self, o: PoolOption, st: State) -> float:
        """A request's first step at main-decode option ``o`` in state ``st`` (with its cache
        choice's HBM held back): ``Problem.first_step_s``, the figure the evaluator takes
        for a pool of ``o``."""
        return self.problem.first_step_s(o.chip, o.gpus, st.cache_gb or 0.0)

    def first_steps(self, st: State) -> dict[float, list[PoolOption]]:
        """The main-decode options receiving in ``st`` by their first step
        (``first_step_s``), fastest first: the prefill counts of ``st`` differ only
        between these groups."""
        key = st.key
        if key not in self._first_steps:
            groups: dict[float, list[PoolOption]] = {}
            for o in self.options["main_decode"]:
                if st.received_by(o):
                    groups.setdefault(self.first_step_s(o, st), []).append(o)
            self._first_steps[key] = dict(sorted(groups.items()))
        return self._first_steps[key]

    def prefill_needs(
        self,
        o: PoolOption,
        st: State,
        rate: float,
        singular: int | None = None,
        first_s: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per relay cut, bounds on ``o``'s minimum prefill count in state ``st`` at ``rate``
        (with MD's first step ``first_s``) from the counts found at other rates (they do not
        decrease with the rate): the nearest rate below gives the lower, the nearest above
        the upper (``max_instances + 1``: unknown). Counts before rounding to the purchase
        step."""
        found = self._prefill_needs.get((o.key, st.key, singular, first_s), [])
        i = bisect.bisect_left(found, rate, key=lambda e: e[0])
        unknown = np.full(len(self.cuts), o.max_instances + 1)
        if i < len(found) and found[i][0] == rate:
            return found[i][1], found[i][1]
        lower = found[i - 1][1] if i > 0 else np.ones(len(self.cuts), dtype=int)
        upper = found[i][1] if i < len(found) else unknown
        return lower, upper

    def remember_prefill_needs(
        self,
        o: PoolOption,
        st: State,
        rate: float,
        need: np.ndarray,
        singular: int | None = None,
        first_s: float | None = None,
    ) -> None:
        """Keep ``o``'s minimum prefill counts at ``rate`` (at singular cut ``singular``,
        hosting relay decode; with MD's first step ``first_s``) for ``prefill_needs``."""
        found = self._prefill_needs.setdefault((o.key, st.key, singular, first_s), [])
        bisect.insort(found, (rate, need), key=lambda e: e[0])

    def prefill_times(self, option: PoolOption) -> PrefillFigures:
        """Per class: the prefill latency alone and the service time, on ``option`` (and
        each pass alone); a hosting option's at its hosting chunk, before the hosted
        tokens' stretch (``Requirements.host_stretch``)."""
        o = option
        return self.problem.prefill_figures(
            o.chip, o.gpus, o.context_parallel, o.hosting, o.attention_tp
        )

    def prefill_passes(self, option: PoolOption) -> PassOrder:
        """``option``'s prefill passes in the order ``loaded_prefill_latency`` needs them."""
        o = option
        return self.problem.pass_order(
            o.chip, o.gpus, o.context_parallel, o.hosting, o.attention_tp
        )

    def fleet(self, choice: Choice, name: str) -> Fleet:
        """The deployment a choice describes (pools with instances, the link, the router),
        built once per distinct deployment and name: the search asks for the same ones many
        times (each router setting it scores, each capacity it looks up), and validating a
        ``Fleet`` took 0.26 ms a call under a profiler (a price sweep's point asked for 155,
        half of them repeats)."""
        st = choice.state
        key = (
            name,
            st.key,
            st.cache,
            st.gbps,
            tuple(
                (role, o.key if o is not None else None, choice.instances[role])
                for role, o in choice.options.items()
            ),
            choice.cut,
            choice.singular,
            choice.catch_up,
        )
        fleet = self._fleets.get(key)
        if fleet is None:
            fleet = self._fleets[key] = self._fleet(choice, name)
        return fleet

    def _fleet(self, choice: Choice, name: str) -> Fleet:
        rld = choice.options["relay_decode"]
        hosted = rld is not None and rld.host is not None and choice.instances["relay_decode"] > 0
        pools = [
            Pool(
                datacenter=o.datacenter,
                role=o.role,
                chip=o.chip,
                gpus_per_instance=o.gpus,
                instances=choice.instances[role],
                context_parallel=o.context_parallel,
                attention_tp=o.attention_tp,
                hosts_relay_decode=hosted and role == "prefill",
            )
            for role, o in choice.options.items()
            if o is not None and choice.instances[role] > 0 and o.host is None
        ]
        links: tuple[LinkChoice, ...] = ()
        if choice.state.gbps is not None:
            links = (LinkChoice(between=choice.state.wan.between, gbps=choice.state.gbps),)
        # a cut that relays nothing of the planned payloads is "relay nothing" to the router:
        # the evaluator's payloads (a tiered cache's hits at the rate) may put a class above
        # the number, and a fleet without relay decode must relay nothing
        relays = choice.cut is not None and bool(self.relayed(choice.cut, choice.state.cache).any())
        cut = choice.cut if relays and rld is not None else None
        return Fleet(
            name=name,
            pools=tuple(pools),
            links=links,
            routing=Routing(relay_above_mb=cut, singular_max_output_tokens=choice.singular),
            handoff=Handoff(catch_up_above_tokens=choice.catch_up, chunk_tokens=self.chunk_tokens),
            md_cache_gb_per_gpu=choice.state.cache_gb,
            md_cache_tiers=self._tiers(choice.state),
        )

    def _tiers(self, st: State) -> CacheSizes | None:
        c = st.md
        if c is None or not c.tiered:
            return None
        return CacheSizes(dram_gb_per_gpu=c.dram_gb, ssd_gb_per_gpu=c.ssd_gb)


def relay_cuts(payload_bytes: np.ndarray) -> list[float | None]:
    """Candidate relay thresholds in MB: None (relay nothing), then each distinct class
    payload below the largest, then 0 (relay everything). A threshold relays each request
    whose own payload is above it (a rule a router can apply), so part of each class whose
    payloads spread across it (``pddplan.model.routing.relay_shares``)."""
    distinct = sorted({float(x) for x in payload_bytes / 1e6}, reverse=True)
    cuts: list[float | None] = [None, *distinct[1:]]
    if distinct[-1] > 0:
        cuts.append(0.0)
    return cuts


def default_singular_cuts(out_tokens: np.ndarray, edges: tuple[float, ...] = ()) -> tuple[int, ...]:
    """0 (no singular path) and the two shortest output classes: the upper ends of their
    slices (``output_class_edges``, rounded down) where the workload has them, else their
    lengths, rounded up.

    The router applies the cut to each request's own output, the model to each class's
    mean: only a cut at a slice's end sends every request of a class the way its mean
    goes. (A cut at the mean of a class whose outputs spread across it, as the defaults
    were, sends the class's longer part to MD while the model keeps all of it on relay
    decode: on ``pdd-paper-fleets`` 652 tokens, 15.3% of requests singular in the model
    against 12.5% simulated, and main decode 4 points busier than the plan says.)"""
    if edges:
        shortest = sorted({math.floor(x) for x in edges})[:2]
    else:
        shortest = sorted({math.ceil(x) for x in out_tokens})[:2]
    return (0, *(x for x in shortest if x > 0))
