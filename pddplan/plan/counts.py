"""Minimum instance counts at one arrival rate (``Requirements(space, rate)``).

Every nonlinear part of the model (queueing tails, TCP transfer times under load, the P99
inter-token gap) is evaluated here, once per combination of choices, into the smallest
number of instances of a pool option that meets every limit of its role, for each relay
cut. The MILP (``pddplan.plan.milp``) and the max-BCR search's relaxation (``pddplan.plan.bounds``)
only see these integers. Each count follows the evaluator's semantics (``docs/model.md``): a
prefill pool's load and tail is the evaluator's own object (``PrefillPoolLoad``), the rest
is computed here; the cross-check tests hold the two together, and the search confirms every
plan with the evaluator (``pddplan.plan.search``, check and cut).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from pddplan import units
from pddplan.model.admission import ADMISSION_GRID
from pddplan.model.kv import session_working_set_bytes
from pddplan.model.md_cache import instance_tiers
from pddplan.model.network import TcpPath, link_bytes_per_s, rdma_transfer_s, wan_times
from pddplan.model.prefill_pool import PrefillPoolLoad
from pddplan.model.relay import eager_tokens, relay_pace, step_at
from pddplan.plan.space import NO_RLD, Band
from pddplan.spec.scenario import MD_ADMISSION_SHARE, TAIL_BUDGETS, Role
from pddplan.work import tally

if TYPE_CHECKING:
    from pddplan.plan.space import PoolOption, Space, State


class PoolKey(NamedTuple):
    """A prefill pool the counts try: its layout (chip, GPUs per instance, context
    parallelism, whether it hosts relay decode), its passes' stretch and its count."""

    chip: str
    gpus: int
    context_parallel: bool
    hosting: bool
    stretch: float
    instances: int
    attention_tp: int | None = None


OptionKey = str
"""A pool option's key (``PoolOption.key``)."""
TwinKey = str
"""The key a transfer state's figures are kept under (``Requirements.twins``)."""
BandKey = str
"""A pace band's key (``Band.key``)."""


@dataclass
class ScaledCounts:
    """The counts that depend on the tail budgets' scale (``Requirements.tail_scale``)."""

    prefill: dict[tuple[OptionKey, TwinKey, int | None, float], np.ndarray] = field(
        default_factory=dict
    )
    """(option, state twin, singular cut or None, MD's first step s) -> per relay cut, the
    smallest prefill count (``Requirements.prefill``)."""
    main: dict[tuple[OptionKey, TwinKey, BandKey], np.ndarray] = field(default_factory=dict)
    """(option, state twin, pace band) -> per cut combination, the smallest main-decode
    count (``Requirements.main_all``)."""
    scans: dict[tuple, _PrefillScan] = field(default_factory=dict)
    """(option, state twin, singular cut or None, MD's first steps) -> a prefill count
    search stopped short (``Requirements.prefill_within``), to go on from: a runner-up's
    restricted space asks for more of the counts the plan's search stopped. Not pickled
    (a search in progress is a generator): a copy searches those counts from the start."""

    least: dict[tuple, tuple] = field(default_factory=dict)
    """Per space (its options, states and whether relay decode is required): a least-cost
    cell of the relaxation found at this rate at some prices, as (state key, per role the
    option key and count). Its total at other prices bounds the least there from above
    (``pddplan.plan.bounds``): a price sweep's later points prune without a first pass."""

    def __getstate__(self) -> dict:
        return {**self.__dict__, "scans": {}}


@dataclass
class CountMemo:
    """One rate's count tables, kept on the problem (``Problem.memo``): they depend on no
    price, so every problem with the same physical inputs and space structure shares them
    (a sweep's prices); those that depend on the tail budgets' scale are in
    ``ScaledCounts``, one per scale (``scale_one`` at 1: a weighted variant's tables at
    several scales share the rest)."""

    scale_one: ScaledCounts = field(default_factory=ScaledCounts)
    pools: dict[PoolKey, PrefillPoolLoad] = field(default_factory=dict)
    """Per prefill layout, stretch and count: the pool's load at this rate (the same in
    every transfer state)."""
    relay: dict[tuple[OptionKey, TwinKey, BandKey], np.ndarray] = field(default_factory=dict)
    """(option, state twin, pace band) -> per singular cut and relay cut, the smallest
    relay-decode count (``Requirements.relay_all``)."""
    handoffs: dict[tuple, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    tokens: dict[tuple[OptionKey, int, TwinKey], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict
    )
    loads: dict[tuple[TwinKey, int], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """(state twin, singular cut) -> relay decode's load per relay cut (``_load``)."""
    eager: dict[tuple[TwinKey, BandKey], np.ndarray] = field(default_factory=dict)
    caches: dict[tuple[OptionKey, TwinKey], int] = field(default_factory=dict)
    floors: dict[OptionKey, int] = field(default_factory=dict)
    """Per prefill option: its smallest count within the utilization cap
    (``Requirements.prefill_utilization_floor``)."""


class _PrefillScan:
    """A prefill count search (``Requirements._prefill``, a generator) that can stop before
    a count and go on from there: the counts it has found (``need``, raw, flattened over
    first steps and cuts, ``cuts`` per first step; ``max_instances + 1`` where none yet),
    the entries still open (``todo``) and, once it has ended, ``result``."""

    def __init__(
        self,
        steps: Generator[tuple[int, np.ndarray, np.ndarray], None, list[np.ndarray]],
        cuts: int,
    ) -> None:
        self.steps, self.cuts = steps, cuts
        self.next_n: float = -math.inf
        """The count it tries next."""
        self.need = np.zeros(0, dtype=int)
        self.todo = np.zeros(0, dtype=int)
        self.result: list[np.ndarray] | None = None

    def run(self, most: float | np.ndarray, row: int) -> None:
        """Search on while the next count to try is at most ``most`` (per cut, where an
        array) for a cut of first step ``row`` still open."""
        while self.result is None:
            if self.next_n > -math.inf:  # started: is the next count worth trying?
                open_ = self.todo[self.todo // self.cuts == row] % self.cuts
                if not len(open_):
                    return
                limit = float(np.max(most[open_])) if isinstance(most, np.ndarray) else most
                if self.next_n > limit:
                    return
            try:
                self.next_n, self.need, self.todo = next(self.steps)
            except StopIteration as end:
                self.result = end.value


class Requirements:
    """Minimum instance counts at one arrival rate, per combination of choices, as arrays
    over the relay cuts (``space.cuts``). A count above the option's ``max_instances`` (it is
    ``max_instances + 1``) marks a combination that no allowed count makes feasible."""

    def __init__(self, space: Space, rate: float, tail_scale: float = 1.0) -> None:
        self.space, self.rate = space, rate
        self.tail_scale = tail_scale
        """The share of the TTFT tail budgets (``TAIL_BUDGETS``) these counts keep to: 1 for
        a plan's own; a weighted workload variant's may be more or less, its mixture with
        the others' within the budgets (``pddplan.plan.milp.Variant``)."""
        self.wan: dict[str, np.ndarray] = {}
        """Per state's twin (``twins``): each class's P->MD transfer time plus the first
        token's way back."""
        self.wan_queueing: dict[str, np.ndarray] = {}
        """Per state's twin: the part of ``wan`` other flows add (``wan_queueing_mean_s``)."""
        self.feasible_states: list[State] = []
        """States whose link stays within its utilization cap at this rate."""
        self.twins: dict[str, str] = {}
        """Per state: the key its transfer figures are kept under, shared by every state
        with the same transfer times (the same transfer and payloads, with fetches from a
        lower tier that end before the suffix arrives): WAN times, prefill and relay counts
        depend on nothing else of a state's."""
        sent: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}
        canonical: dict[tuple[str, bytes], str] = {}
        for st in space.states:
            if st.twin not in sent:  # st.twin: the transfer and payloads
                sent[st.twin] = self._sent(st)
            times, queueing, u = sent[st.twin]
            # a lower tier's hit reaches HBM while the suffix crosses: the later of the two
            wan = np.maximum(times, space.fetch_s[st.cache])
            twin = canonical.setdefault((st.twin, wan.tobytes()), st.key)
            self.twins[st.key] = twin
            if twin == st.key:
                self.wan[twin], self.wan_queueing[twin] = wan, queueing
            if u <= space.link_rho:
                self.feasible_states.append(st)
        self._combos = [(x, h) for x in space.singular_cuts for h in space.catch_up_cuts]
        self._kept: dict[Role, list[PoolOption]] = {}  # ``undominated``, per role
        # the memos depend on no price: shared by every problem with the same physical
        # inputs and structure at this rate (``CountMemo``)
        memo = space.problem.memo("counts", (space.structure, rate), CountMemo)
        scaled = (
            memo.scale_one
            if tail_scale == 1.0
            else space.problem.memo("counts", (space.structure, rate, tail_scale), ScaledCounts)
        )
        self._p = scaled.prefill
        self._scans = scaled.scans
        self.least_cells = scaled.least
        """``ScaledCounts.least``: read and written by ``pddplan.plan.bounds``."""
        self._m = scaled.main
        self._pools = memo.pools
        self._r = memo.relay
        self._handoffs = memo.handoffs
        self._tokens = memo.tokens
        self._loads = memo.loads
        self._eager = memo.eager
        self._caches = memo.caches
        self._floors = memo.floors

    def _sent(self, st: State) -> tuple[np.ndarray, np.ndarray, float]:
        """Per class: the P->MD transfer time and the part of it other flows add; the
        link's load."""
        sp = self.space
        payload = sp.payloads[st.cache]
        if st.gbps is None:
            nic = sp.hw.chips[st.sender].nic_bytes_per_s
            return rdma_transfer_s(payload, nic_bytes_per_s=nic), np.zeros_like(payload), 0.0
        goodput = link_bytes_per_s(st.gbps, st.wan.tcp_efficiency)
        u = self.rate * float(sp.w @ payload) / goodput
        path = TcpPath.of(st.wan)
        return (*wan_times(payload, path=path, goodput_bytes_per_s=goodput, utilization=u), u)

    def _load(self, st: State, singular: int) -> tuple[np.ndarray, np.ndarray]:
        """Per relay cut: the relayed requests' WAN seconds per second (what they hold RLD
        for) and the singular ones' output tokens per second (what RLD decodes of them)."""
        key = (self.twins[st.key], singular)
        if key not in self._loads:
            sp, lam = self.space, self.rate
            relay, single = sp.relay_float[st.cache], sp.out <= singular
            self._loads[key] = (
                lam * relay @ (sp.w * np.where(single, 0.0, self.wan[self.twins[st.key]])),
                lam * relay @ (sp.w * np.where(single, sp.out, 0.0)),
            )
        return self._loads[key]

    def eager(self, st: State, band: Band) -> np.ndarray:
        """Per class: the tokens RLD decodes while its KV crosses, at the band's step
        ceiling (the fewest the band allows); 0 without RLD."""
        key = (self.twins[st.key], band.key)
        if key not in self._eager:
            sp = self.space
            if band.index < 0:
                self._eager[key] = np.zeros(len(sp.w))
            else:
                limit = np.ceil(self.wan[self.twins[st.key]] / band.step_s)
                self._eager[key] = eager_tokens(sp.out, sp.out_points, limit)
        return self._eager[key]

    def eager_most(self, st: State) -> np.ndarray:
        """Per class: the most eager tokens any RLD can make, at the fastest step any RLD
        option takes; what the handoffs are counted with, in every band."""
        fastest = Band(len(self.space.bands), self.space.fastest_rld_step_s)
        return self.eager(st, fastest) if fastest.step_s > 0 else self.eager(st, NO_RLD)

    # dominance ----------------------------------------------------------------------------
    def undominated(self, role: Role) -> list[PoolOption]:
        """The options of ``role`` no other option of the same role and datacenter dominates.

        A dominates B when, for every combination of transfer state, RLD pace band,
        singular cut, catch-up cut and relay cut, A's minimum count costs no more, and uses
        no more GPUs and no more power, than B's (a count above the maximum counts as
        infinite), and B's chip has no GPUs owned there, or is A's chip (owned GPUs cost
        less than the full price compared here, and a chip's cost only grows with its
        GPUs), and A can stand where B does: relay decode on prefill instances only on the
        same host (a separate pool never stands for it, nor it for one), and a prefill
        option that hosts relay decode (used only with relay decode on its instances, at a
        cut that relays) neither stands for another option nor another for it (its relay
        decode, which its figures leave out, goes with it). Swapping B for A in any plan
        then keeps it feasible and no dearer, so the MILP needs only the undominated
        options. Of options equal in all three (and, for main decode, in the prefill counts
        its first step sets), the fastest first step, then the first by key, stays."""
        sp = self.space
        if not self.feasible_states:
            return list(sp.options[role])
        if role not in self._kept:
            self._kept[role] = undominated(sp, sp.options[role], [self.figures(role)])
        return list(self._kept[role])

    def figures(self, role: Role, states: list[State] | None = None) -> dict[str, np.ndarray]:
        """Per option of ``role``: the cost per hour, GPUs and power of each of its minimum
        counts over ``states`` (default: the feasible ones) and every other choice, infinite
        above its maximum; for a main-decode option the prefill counts its first step sets
        too (``_prefill_behind``). What ``undominated`` compares."""
        sp = self.space
        states = states or self.feasible_states
        out = {}
        for o in sp.options[role]:
            if o.hosting:
                continue  # a host is never compared (``undominated``)
            n = np.concatenate([self._counts(o, st) for st in states]).astype(float)
            n[n > o.max_instances] = np.inf
            kw = sp.hw.chips[o.chip].tdp_w * o.bought_gpus
            per = np.array([o.usd_per_instance_hour, o.bought_gpus, kw])[:, None]
            with np.errstate(invalid="ignore"):  # infinite counts of a free option: infinite
                out[o.key] = np.where(np.isinf(n), np.inf, n * per).ravel()
            if role == "main_decode":
                out[o.key] = np.concatenate([out[o.key], self._prefill_behind(o, states)])
        return out

    def _prefill_behind(self, m: PoolOption, states: list[State]) -> np.ndarray:
        """What main-decode option ``m``'s first step does to prefill: per state, every
        prefill option's counts (per singular cut where it may host relay decode) with
        ``m``'s first step; above any count where ``m`` does not receive. An MD option that
        dominates another on its own figures does so only if these are no larger too."""
        sp = self.space
        out = []
        for st in states:
            senders = [
                (p, s)
                for p in sp.options["prefill"]
                if st.sent_by(p)
                for s in (sp.singular_cuts if p.hosting else [None])
            ]
            if not st.received_by(m):
                out.append(np.full(len(senders) * len(sp.cuts), np.inf))
                continue
            f = sp.first_step_s(m, st)
            out += [self.prefill(p, st, s, first_s=f).astype(float) for p, s in senders]
        return np.concatenate(out) if out else np.zeros(0)

    def _counts(self, o: PoolOption, st: State) -> np.ndarray:
        """Every minimum count of ``o`` in state ``st`` (over the other choices), or counts
        above the maximum where ``o`` cannot serve that state."""
        sp = self.space
        if o.role == "prefill":  # per first step of the MD options receiving in st
            if st.sent_by(o):
                return np.concatenate([self.prefill(o, st, first_s=f) for f in sp.first_steps(st)])
            return np.full(len(sp.cuts) * len(sp.first_steps(st)), o.max_instances + 1)
        if o.role == "relay_decode":
            if o.datacenter == st.p_dc:
                return np.concatenate([self.relay_all(o, st, b).ravel() for b in sp.bands])
            return np.full(
                len(sp.cuts) * len(sp.singular_cuts) * len(sp.bands), o.max_instances + 1
            )
        bands = self.bands()
        if st.received_by(o):
            return np.concatenate([self.main_all(o, st, b).ravel() for b in bands])
        combos = len(sp.cuts) * len(self._combos) * len(bands)
        return np.full(combos, o.max_instances + 1)

    # prefill ------------------------------------------------------------------------------
    def prefill_utilization_floor(self, o: PoolOption) -> int:
        """Smallest P count within the utilization cap (a lower bound on ``prefill``);
        kept: the relaxation asks it of each option in every transfer state."""
        if o.key not in self._floors:
            sp = self.space
            svc_sum = float(sp.w @ sp.prefill_times(o)[1])
            need = _smallest(
                lambda n: self.rate * 1.0 * svc_sum / n <= sp.rho,
                np.array([self.rate * svc_sum / sp.rho]),
            )
            self._floors[o.key] = int(min(_round_up(need, o)[0], o.max_instances))
        return self._floors[o.key]

    def prefill(
        self, o: PoolOption, st: State, singular: int | None = None, *, first_s: float
    ) -> np.ndarray:
        """Smallest P count meeting utilization and both TTFT tail budgets, per relay cut,
        with main decode's first step (``Space.first_step_s``) taking ``first_s`` of a
        direct request's TTFT (the TPOT bound, relay decode's, of a relayed one's).
        An option that may host relay decode is counted as hosting it at singular cut
        ``singular``: its passes stretch by the hosted batch its instances then carry
        (``host_stretch``); with None, not stretched (a lower bound on those counts)."""
        return self.prefill_within(o, st, singular, first_s=first_s)

    def prefill_within(
        self,
        o: PoolOption,
        st: State,
        singular: int | None = None,
        *,
        first_s: float,
        most: float | np.ndarray = math.inf,
    ) -> np.ndarray:
        """``prefill`` where it is at most ``most`` instances (before rounding to the
        purchase step; per relay cut, where an array); ``max_instances + 1`` where it is
        more, without searching past ``most``: what the relaxation asks of an option that
        costs more than the least plan past that count, or at a cut no plan of its pairing
        can use (``pddplan.plan.bounds``). The search stops there and goes on from there
        when asked for more (``_PrefillScan``)."""
        singular = singular if o.hosting else None
        twin = self.twins[st.key]
        key = (o.key, twin, singular, first_s)
        if key in self._p:
            return self._p[key]
        # every first step of the state in one search
        firsts = tuple(sorted({*self.space.first_steps(st), first_s}))
        at = (o.key, twin, singular, firsts)
        scan = self._scans.get(at)
        if scan is None:
            scan = _PrefillScan(self._prefill(o, st, singular, list(firsts)), len(self.space.cuts))
            self._scans[at] = scan
        row = firsts.index(first_s)
        try:
            scan.run(most, row)
        except BaseException:  # the time limit, Ctrl-C: a search cut short starts again
            del self._scans[at]
            raise
        if scan.result is None:  # stopped at ``most``: the counts found so far
            return _round_up(scan.need.reshape(len(firsts), -1)[row], o)
        for f, need in zip(firsts, scan.result, strict=True):
            self._p[(o.key, twin, singular, f)] = need
        del self._scans[at]
        return self._p[key]

    def prefill_known(
        self, o: PoolOption, st: State, singular: int | None = None, *, first_s: float
    ) -> bool:
        """Whether ``prefill`` at these arguments is searched to its end already (kept: a
        price sweep's later points, a second search at one rate)."""
        singular = singular if o.hosting else None
        return (o.key, self.twins[st.key], singular, first_s) in self._p

    def prefill_least(self, o: PoolOption, st: State, singular: int | None = None) -> np.ndarray:
        """``prefill`` with the fastest first step of the main-decode options receiving in
        ``st``: a lower bound on ``o``'s count whichever of them the plan buys."""
        return self.prefill(o, st, singular, first_s=min(self.space.first_steps(st)))

    def host_stretch(self, o: PoolOption, st: State, singular: int | None, n: int) -> np.ndarray:
        """Per relay cut, how much longer each pass of ``n`` instances of a hosting prefill
        option runs (``HostPoint.stretch``) at the batch relay decode's load (at singular
        cut ``singular``) gives each, as the evaluator prices it: relay decode's pace at
        its steps while prefill is busy its share of the time before the stretch. 1 for
        other options, with ``singular`` None, and where nothing relays."""
        sp = self.space
        if not o.hosting or singular is None:
            return np.ones(len(sp.cuts))
        point = sp.host_point(o)
        busy = min(self.pool(o, 1.0, n).utilization, 1.0)
        relay_s, tokens = self._load(st, singular)
        return np.asarray(point.stretch(relay_pace(point.steps(busy), relay_s, tokens, n)[1]))

    def pool(self, o: PoolOption, stretch: float, n: int) -> PrefillPoolLoad:
        """``n`` instances of prefill option ``o`` at this rate, every pass ``stretch``
        times longer (``PrefillPoolLoad``: the evaluator's model of the pool); kept, since
        it is the same in every transfer state."""
        key = PoolKey(o.chip, o.gpus, o.context_parallel, o.hosting, stretch, n, o.attention_tp)
        load = self._pools.get(key)
        if load is None:
            sp = self.space
            load = PrefillPoolLoad(
                sp.prefill_times(o), sp.prefill_passes(o), sp.w, self.rate / n, n,
                o.instance.attention_groups, stretch,
            )  # fmt: skip
            self._pools[key] = load
        return load

    def _prefill(
        self, o: PoolOption, st: State, singular: int | None, firsts: list[float]
    ) -> Generator[tuple[int, np.ndarray, np.ndarray], None, list[np.ndarray]]:
        """``prefill`` at each of ``firsts``: one search over the count, each count's tails
        evaluated for every first step at once (rows per first step). A generator
        (``_PrefillScan`` runs it): before each count it tries, it yields that count, the
        counts found so far (``max_instances + 1`` where none yet) and the entries still
        open; it returns them found, rounded to the purchase step."""
        tally("count_searches")
        sp, lam = self.space, self.rate
        nf, ncut = len(firsts), len(sp.cuts)
        base = sp.prefill_times(o)
        nic = sp.hw.chips[o.chip].nic_bytes_per_s
        queueing = self.wan_queueing[self.twins[st.key]]
        # the link's queueing is the random part of the transfer
        with np.errstate(invalid="ignore"):  # a saturated link: inf - inf
            fixed = np.where(np.isfinite(queueing), self.wan[self.twins[st.key]] - queueing, np.inf)
        # a class's tail depends on the cut only through whether the cut relays it: rows
        # (P90 direct, P90 relayed, P99 direct, P99 relayed), combined per cut below
        rest_relay = rdma_transfer_s(sp.rdma_bytes, nic_bytes_per_s=nic)
        # the first token: MD's first step on the direct rows, at most the TPOT bound (relay
        # decode's step) on the relayed ones; the four rows once per first step
        rests = np.concatenate(
            [np.stack([fixed, rest_relay] * 2) + np.array([[f], [sp.tpot_s]] * 2) for f in firsts]
        )
        extra = np.tile(np.stack([queueing, np.zeros_like(queueing)] * 2), (nf, 1))
        sla = sp.scenario.sla
        bounds = np.tile(
            [[sla.ttft_p90_s], [sla.ttft_p90_s], [sla.ttft_p99_s], [sla.ttft_p99_s]], (nf, 1)
        )
        # MD's admission queue holds up at most its share of each budget (``_main``)
        budgets = (
            np.array([b for _, b in TAIL_BUDGETS]) * self.tail_scale * (1 - MD_ADMISSION_SHARE)
            + 1e-12
        )
        relayed = sp.relay_float[st.cache]  # cuts x classes
        base_sum = float(sp.w @ base.service)

        tried: dict[int, np.ndarray] = {}

        def meets(n: int) -> np.ndarray:
            """Per first step and cut, flattened: whether ``n`` instances meet utilization
            and both tail budgets, each cut at its own stretch (``stretched_meets``)."""
            if n not in tried:
                stretch = self.host_stretch(o, st, singular, n)
                tried[n] = stretched_meets(lambda s: _meets(n, s), stretch, nf).ravel()
            return tried[n]

        def _meets(n: int, stretch: float) -> np.ndarray:
            # the pool's load and tail, as the evaluator prices them (``PrefillPoolLoad``);
            # the same in every transfer state the option sends in: built once
            load = self.pool(o, stretch, n)
            if load.utilization > sp.rho:
                return np.zeros((nf, ncut), dtype=bool)
            tail = load.tail(bounds - rests, extra_mean_s=extra)
            tail = tail.reshape(nf, 4, -1) * sp.w
            direct, relay = tail[:, 0::2], tail[:, 1::2]  # first steps x (P90, P99) x classes
            # first steps x cuts x (P90, P99)
            per_cut = direct.sum(axis=2)[:, None, :] + np.einsum(
                "ck,fqk->fcq", relayed, relay - direct
            )
            return np.all(per_cut <= budgets, axis=2)

        # counts found at other rates are hints (they grow with the rate): a lower rate's
        # as the first count to try, once no fewer instances are seen to do; a higher
        # rate's as a sign that max_instances does. Counts only grow with n, so the result
        # is the smallest count in [cold, max_instances] either way.
        # (counts at other rates bound these only at the plan's own budgets)
        hinted = self.tail_scale == 1.0
        if hinted:
            hints = [sp.prefill_needs(o, st, lam, singular, f) for f in firsts]
            lower = np.concatenate([lo for lo, _ in hints])
            upper = np.concatenate([up for _, up in hints])
        else:
            lower = np.ones(nf * ncut, dtype=int)
            upper = np.full(nf * ncut, o.max_instances + 1)
        need = np.full(nf * ncut, o.max_instances + 1)
        todo = np.arange(nf * ncut)
        if (upper > o.max_instances).any():
            todo = todo[meets(o.max_instances)]
        cold = max(1, math.ceil(lam * base_sum / sp.rho) - 1)
        n = max(cold, int(lower[todo].min())) if len(todo) else cold
        if n > cold and meets(n - 1)[todo].any():
            n = cold  # the hint was wrong
        while len(todo) and n <= o.max_instances:
            yield n, need, todo
            ok = meets(n)[todo]
            need[todo[ok]] = n
            todo = todo[~ok]
            n += 1
        needs = list(need.reshape(nf, ncut))
        if hinted:
            for f, each in zip(firsts, needs, strict=True):
                sp.remember_prefill_needs(o, st, lam, each, singular, f)
        return [_round_up(each, o) for each in needs]

    # relay decode ---------------------------------------------------------------------------
    def relay(self, o: PoolOption, st: State, singular: int, band: Band) -> np.ndarray:
        """Smallest RLD count whose batch stays within the utilization cap of its largest
        and within the batch that keeps its step under the band's ceiling, per relay cut (0
        where nothing relays)."""
        return self.relay_all(o, st, band)[self.space.singular_cuts.index(singular)]

    def relay_all(self, o: PoolOption, st: State, band: Band) -> np.ndarray:
        """``relay`` for every singular cut (``space.singular_cuts``): one row each."""
        key = (o.key, self.twins[st.key], band.key)
        if key not in self._r:
            for b, rows in zip(self.space.bands, self._relay(o, st), strict=True):
                self._r[(o.key, self.twins[st.key], b.key)] = rows
        return self._r[key]

    def _relay(self, o: PoolOption, st: State) -> list[np.ndarray]:
        """``relay_all`` for every pace band at once: RLD's batch at a count does not depend
        on the band, only the batch ceiling it must stay within does."""
        sp = self.space
        steps = sp.decode_steps(o)
        batches, seconds = steps
        # per band, the largest batch whose step is within its ceiling (steps grow with it)
        within = np.array(
            [
                float(np.interp(b.step_s, seconds, batches)) if b.step_s >= seconds[0] else 0.0
                for b in sp.bands
            ]
        )
        caps = np.minimum(sp.rho * o.batch, within)[:, None]  # bands x 1
        relays = sp.relay_matrix[st.cache].any(axis=1)
        usable = caps[:, 0] > 0
        rows = np.zeros((len(sp.bands), len(sp.singular_cuts), len(sp.cuts)))
        rows[~usable] = np.where(relays, o.max_instances + 1, 0)
        cap = caps[usable]
        for i, x in enumerate(sp.singular_cuts):
            relay_s, tokens = self._load(st, x)

            def fits(n: np.ndarray, relay_s=relay_s, tokens=tokens) -> np.ndarray:
                return relay_pace(steps, relay_s, tokens, n)[1] <= cap * (1 + 1e-12)

            # the fixed point's batch is within cap when (R + S step(cap)) / n is: the
            # estimate, and the count, when steps grow linearly with the batch
            estimate = (relay_s + tokens * step_at(steps, cap)) / cap
            n = _smallest(fits, estimate)
            rows[usable, i] = _round_up(np.where(relays, n, 0), o)
        return list(rows.astype(int))

    # main decode ----------------------------------------------------------------------------
    def bands(self) -> list[Band]:
        """The pace bands a plan may be in: none (no RLD), or one of ``space.bands``."""
        return [NO_RLD, *self.space.bands]

    def main(
        self, o: PoolOption, st: State, singular: int, catch_up: int | None, band: Band = NO_RLD
    ) -> np.ndarray:
        """Smallest MD count for its tokens plus handoff stalls, and for the P99 inter-token
        gap, per relay cut, with relay decode in pace ``band``: MD's tokens are counted with
        the band's eager tokens (its step ceiling's: the fewest), its handoffs with the most
        any RLD makes (``eager_most``), so the count holds wherever in the band RLD runs."""
        return self.main_all(o, st, band)[self.combo_index(singular, catch_up)]

    def combo_index(self, singular: int, catch_up: int | None) -> int:
        """The row of (``singular``, ``catch_up``) in ``main_all``."""
        return self._combos.index((singular, catch_up))

    def main_all(self, o: PoolOption, st: State, band: Band = NO_RLD) -> np.ndarray:
        """``main`` for every (singular, catch-up) cut: one row each, singular cut major
        (``space.singular_cuts`` x ``space.catch_up_cuts``)."""
        key = (o.key, st.key, band.key)
        if key not in self._m:
            bands = self.bands()
            rows = self._main(o, st, bands)
            if self.space.bands:
                # without RLD a cut that relays is infeasible whatever MD buys: take the
                # slowest band's counts there, so that the MILP's rows for the two coincide
                relays = self.space.relay_matrix[st.cache].any(axis=1)
                rows[0] = np.where(relays, rows[-1], rows[0])
            for b, r in zip(bands, rows, strict=True):
                self._m[(o.key, st.key, b.key)] = r
        return self._m[key]

    def _handoff(self, o: PoolOption, st: State, catch_up: int | None, band: Band):
        """Per class, if relayed (not singular): MD stalls per request and seconds each, at
        the most eager tokens (none without RLD)."""
        key = (o.key, self.twins[st.key], catch_up, band.index < 0)
        if key not in self._handoffs:
            sp = self.space
            chunk = sp.chunk_tokens
            eager = self.eager(st, NO_RLD) if band.index < 0 else self.eager_most(st)
            cu = eager > catch_up if catch_up is not None else np.zeros(len(sp.w), dtype=bool)
            stalls = np.where(eager > 0, np.where(cu, np.ceil(eager / chunk), 1.0), 0.0)
            stall = np.zeros(len(sp.w))
            k = np.nonzero(eager > 0)[0]
            tokens = np.where(cu[k], np.minimum(eager[k], chunk), eager[k])
            stall[k] = sp.extend_pass_s(o, tokens, k)
            self._handoffs[key] = (stalls, stall)
        return self._handoffs[key]

    def _main(self, o: PoolOption, st: State, bands: list[Band]) -> list[np.ndarray]:
        """``main_all`` for each of ``bands``, in one search."""
        sp, lam, combos = self.space, self.rate, self._combos
        batch, step = sp.md_point(o, st)
        if batch == 0:  # the cache leaves no room for a running request
            return [np.full((len(combos), len(sp.cuts)), o.max_instances + 1) for _ in bands]
        relay = sp.relay_float[st.cache]
        # per (band, singular, catch-up) row: MD's tokens per request per cut, and per
        # class the stall seconds (and stalls past the bound) of a request MD takes over;
        # the classes' sums over each cut's relayed ones in two matrix products
        tokens, stall_s, bad_stalls = [], [], []
        for band in bands:
            handoffs = {}  # per catch-up cut: stalls, stall seconds, stalls past the bound
            for h in sp.catch_up_cuts:
                stalls, stall = self._handoff(o, st, h, band)
                handoffs[h] = stalls, stall, stall > sp.tpot_s * (1 + 1e-9) - step
            for singular, catch_up in combos:
                stalls, stall, bad = handoffs[catch_up]
                md_tokens, w_handed = self._md_tokens(st, singular, band)
                w_stalls = w_handed * stalls
                tokens.append(md_tokens)
                stall_s.append(w_stalls * stall)
                bad_stalls.append(w_stalls * bad)
        busy = lam * np.array(tokens) * step / batch + lam * (relay @ np.array(stall_s).T).T
        stalled = lam * step * (relay @ np.array(bad_stalls).T).T
        # one search for every row: utilization rows, then P99-gap rows (at most 1% of
        # steps stalled); the search is elementwise, so stacking does not change a count
        load = np.concatenate([busy, stalled])
        rows = len(busy)
        cap = np.repeat([sp.rho, 0.01], rows)[:, None]
        n = _smallest(lambda n: load / n <= cap, load / cap)
        need = np.maximum(n[:rows], n[rows:])
        # the requests that go straight to MD wait for a decode slot (``md_admission``):
        # the share that waits at all stays within MD's share of the tightest tail budget
        direct = 1.0 - relay @ sp.w / float(sp.w.sum())  # per cut
        allowed = MD_ADMISSION_SHARE * min(b for _, b in TAIL_BUDGETS) * self.tail_scale
        offered = busy * batch
        direct_rows = np.broadcast_to(direct, busy.shape)

        def admits(n: np.ndarray) -> np.ndarray:
            # pooled over the largest power of two <= n instances (fewer pooled wait more),
            # at the tabulated utilization at or above the load
            util = busy / n
            i = np.minimum(np.searchsorted(ADMISSION_GRID, util), len(ADMISSION_GRID) - 1)
            # (frexp's exponent: exact for counts below 2^53)
            pooled = np.left_shift(1, np.frexp(n)[1].astype(np.int64) - 1)
            p_wait = np.ones(n.shape)
            for p in np.unique(pooled):
                at = pooled == p
                p_wait[at] = sp.md_wait_table(o, batch, int(p))[i[at]]
            p_wait[util >= ADMISSION_GRID[-1]] = 1.0
            return p_wait * direct_rows <= allowed * (1 + 1e-9)

        # Erlang C (a slower chain: every part-full batch at the full batch's step) falls
        # below any level within ~8 standard deviations of the load's slots (Halfin-Whitt:
        # C ~ e^(-beta^2 / 2) at beta standard deviations): the bisection's top
        most = np.ceil((offered + 8 * np.sqrt(offered) + 8) / batch)
        need = _bisect_smallest(admits, np.maximum(need, 1), np.maximum(most, need))
        need = _round_up(np.maximum(need, self._n_cache(o, st)), o)
        return list(need.reshape(len(bands), len(combos), len(sp.cuts)))

    def _md_tokens(self, st: State, singular: int, band: Band) -> tuple[np.ndarray, np.ndarray]:
        """Per cut, MD's tokens per request: every class's output less the relayed classes'
        eager tokens (the band's), less all of a singular class's; and per class, its weight
        where MD takes it over if relayed (not singular), else 0. The same for every MD
        option and catch-up cut, so computed once per state, singular cut and band."""
        key = (self.twins[st.key], singular, band.key)
        if key not in self._tokens:
            sp = self.space
            eager, out, w = self.eager(st, band), sp.out, sp.w
            handed = ~(out <= singular)  # relayed classes MD takes over
            relay = sp.relay_float[st.cache]
            md_tokens = float(w @ out) - relay @ (w * np.where(handed, eager, out))
            # a cut that relays every token leaves MD none: rounding must not make it < 0
            # (a negative load would reach sqrt and an int cast as NaN)
            md_tokens = np.maximum(md_tokens, 0.0)
            self._tokens[key] = (md_tokens, w * handed)
        return self._tokens[key]

    def _n_cache(self, o: PoolOption, st: State) -> int:
        """Smallest MD count whose cache holds what the state's cache choice needs (1
        without one): a tiered choice, the capacity that keeps its share of the reused
        contexts at this rate (Che's approximation, ``pddplan.model.md_cache``); a
        measured-hit choice with the workload's ``turn_interval_s``, every open session's
        context. The same for every singular and catch-up cut."""
        key = (o.key, st.key)
        if key not in self._caches:
            sp, lam = self.space, self.rate
            need = per_instance = 0.0
            c = st.md
            interval = sp.scenario.workload.turn_interval_s
            if c is not None and c.tiered and c.kept:
                bpt = sp.problem.kv.bytes_per_token
                need = sp.problem.reuse_at(lam).capacity_for(c.kept, lam) * bpt
                per_instance = bpt * sum(
                    instance_tiers(o.instance.kv_capacity_bytes(), o.gpus, c.dram_gb, c.ssd_gb, bpt)
                )
            elif st.cache_gb and interval is not None:  # the cache holds the open sessions
                need = session_working_set_bytes(lam, interval, float(sp.w @ sp.rdma_bytes))
                per_instance = st.cache_gb * units.GB * o.gpus
            n_cache = 1
            if need > 0:
                fits = _smallest(
                    lambda n: need <= n * per_instance * (1 + 1e-9), np.array([need / per_instance])
                )
                n_cache = int(fits[0])
            self._caches[key] = n_cache
        return self._caches[key]


def _smallest(ok: Callable[[np.ndarray], np.ndarray], estimate: np.ndarray) -> np.ndarray:
    """Elementwise, the smallest n >= 1 with ``ok(n)`` (``ok`` monotone in n), starting from
    ``ceil(estimate)`` and stepping by one past rounding error."""
    n = np.maximum(np.ceil(np.asarray(estimate, dtype=float)), 1).astype(np.int64)
    while True:
        down = (n > 1) & ok(np.maximum(n - 1, 1))
        if not down.any():
            break
        n[down] -= 1
    while True:
        up = ~ok(n)
        if not up.any():
            return n
        n[up] += 1


def _bisect_smallest(
    ok: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """Elementwise, the smallest n in [lo, hi] with ``ok(n)`` (``ok`` monotone in n, true
    at ``hi``; ``lo`` where it already holds), by bisection."""
    lo, hi = np.asarray(lo, dtype=np.int64).copy(), np.asarray(hi, dtype=np.int64).copy()
    hi = np.maximum(hi, lo)
    done = ok(lo)
    hi[done] = lo[done]
    while True:
        open_ = lo < hi
        if not open_.any():
            return hi
        mid = (lo + hi) // 2
        good = ok(mid) & open_
        hi = np.where(good, mid, hi)
        lo = np.where(open_ & ~good, mid + 1, lo)


def stretched_meets(
    meets_at: Callable[[float], np.ndarray], stretch: np.ndarray, rows: int
) -> np.ndarray:
    """``meets_at(s)`` (rows x cuts: whether the pool meets every limit with each pass ``s``
    times longer) read for each cut at its own ``stretch[cut]``, without evaluating every
    distinct stretch: a longer pass never helps (every time the tail sums grows with it,
    and so does the busy share; ``tests/test_counts.py`` checks it on the paper's
    options), so a cut that meets the limits at a stretch at least its own meets them at
    its own, and one
    that misses them at a stretch at most its own misses them there too. Stretches are
    tried largest first (where every cut meets them: one evaluation), then smallest, then
    by bisection over the distinct values of the cuts still open: ``O(log k)``
    evaluations for ``k`` distinct stretches, where the direct way took ``k``."""
    values, index = np.unique(stretch, return_inverse=True)
    index = np.broadcast_to(index.reshape(1, -1), (rows, len(stretch)))
    out = np.zeros((rows, len(stretch)), dtype=bool)

    def solve(lo: int, hi: int, open_: np.ndarray, pick: str) -> None:
        """Decide the ``open_`` entries, whose stretch index is in [lo, hi]."""
        if not open_.any():
            return
        k = {"hi": hi, "lo": lo}.get(pick, (lo + hi) // 2)
        ok = meets_at(float(values[k]))
        out[open_ & ok & (index <= k)] = True
        solve(k + 1, hi, open_ & ok & (index > k), "mid")
        solve(lo, k - 1, open_ & ~ok & (index < k), "lo" if pick == "hi" else "mid")

    solve(0, len(values) - 1, np.ones_like(out), "hi")
    return out


def _round_up(need: np.ndarray, o: PoolOption) -> np.ndarray:
    """Counts rounded up to the option's purchase step; past its maximum: maximum + 1."""
    need = np.asarray(need, dtype=int)
    rounded = -(-need // o.unit_step) * o.unit_step
    return np.where(rounded > o.max_instances, o.max_instances + 1, rounded)


def undominated(
    space: Space, options: list[PoolOption], figures: list[dict[str, np.ndarray]]
) -> list[PoolOption]:
    """The ``options`` (of one role) no other of them dominates in every one of
    ``figures`` (``Requirements.figures``, one per table: a robust plan's variants and
    tail scales, or one; ``Requirements.undominated`` states the rule)."""
    assert figures, "dominance needs at least one table of figures"
    inventory = {dc: set(d.inventory) for dc, d in space.scenario.datacenters.items()}

    def preferred(o: PoolOption) -> tuple[float, str]:
        """Of options equal in every figure, which stays: for main decode the fastest
        first step (the plan's TTFT, and so its capacity, is the better for it), then the
        first by key."""
        if o.role != "main_decode":
            return 0.0, o.key
        firsts = [space.first_step_s(o, st) for st in space.states if st.received_by(o)]
        return max(firsts, default=math.inf), o.key

    def dominates(a: PoolOption, b: PoolOption) -> bool:
        if not (
            a.datacenter == b.datacenter
            and (a.chip == b.chip or b.chip not in inventory[b.datacenter])
            and a.host == b.host
            and not (a.hosting or b.hosting)
        ):
            return False
        strictly = False
        for f in figures:  # table by table: most pairs fail at the first
            fa, fb = f[a.key], f[b.key]
            if not np.all(fa <= fb):
                return False
            strictly = strictly or bool(np.any(fa < fb))
        return strictly or preferred(a) < preferred(b)

    kept = []
    for b in options:
        dominated = any(a is not b and dominates(a, b) for a in options)
        if not dominated:
            kept.append(b)
    return kept
