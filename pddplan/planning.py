"""The planner's view of a scenario: every choice it may make, and what each choice needs.

Choices (``Space``, independent of the arrival rate):

- **pool options** per role: (datacenter, chip, GPUs per instance) where the role is allowed,
  the weights fit, and (for decode roles) some batch meets the TPOT bound;
- **transfer states**: where MD sits relative to P, and over what: a WAN link tier between
  two datacenters, or RDMA inside one (then the state also names the prefill chip, whose NIC
  sends the KV);
- **router settings**: the relay cut (requests whose WAN payload exceeds it go through RLD),
  the singular cut (relayed requests with at most this many output tokens finish on RLD) and
  the catch-up cut (handoffs with more eager tokens than this catch up in chunks).

At an arrival rate (``Space.at``), every nonlinear part of the model (queueing tails, TCP
transfer times under load, the P99 inter-token gap) is evaluated here, once per combination
of choices, into **minimum instance counts**: the smallest number of instances of a pool
option that meets every limit of its role, for each relay cut. The MILP (``pddplan.milp``)
only sees these integers, so nothing nonlinear reaches the solver. Each count follows the
evaluator's semantics (``docs/model.md``), computed here independently of ``evaluate.py``;
the cross-check tests hold the two together.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from pddplan import units
from pddplan.calibration import resolve_calibration
from pddplan.classes import md_caches, workload_classes
from pddplan.errors import InputError
from pddplan.evaluate import TAIL_BUDGETS
from pddplan.fleet import Fleet, Handoff, LinkChoice, Pool, Routing
from pddplan.hardware import HardwareCatalog
from pddplan.llm import ModelSpec
from pddplan.network import (
    link_bytes_per_s,
    rdma_transfer_s,
    wan_queueing_mean_s,
    wan_transfer_s_many,
)
from pddplan.perf import Instance, PrefillFigures, instance_fits, make_instance
from pddplan.pricing import gpu_price, link_usd_per_hour, owned_discount
from pddplan.queueing import loaded_prefill_latency, prefill_wait_tail
from pddplan.scenario import ROLES, Link, LinkTier, Role, Scenario


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

    @cached_property
    def key(self) -> str:
        return f"{self.role}.{self.datacenter}.{self.chip}.x{self.gpus}"

    @property
    def usd_per_instance_hour(self) -> float:
        return self.usd_per_gpu_hour * self.gpus


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
    cache_gb: float | None = None
    """Its HBM reserve per MD GPU (None without ``md_cache`` options)."""
    tier: LinkTier | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        cache = "" if self.cache_gb is None else f".md{self.cache_gb:g}GB"
        if self.gbps is None:
            return f"{self.p_dc}.rdma.{self.p_chip}{cache}"
        return f"{self.p_dc}-{self.md_dc}.{self.gbps:g}G{cache}"


@dataclass(frozen=True)
class Choice:
    """One point of the planner's decision space (what the MILP returns)."""

    options: dict[Role, PoolOption | None]
    instances: dict[Role, int]
    state: State
    cut: float | None
    singular: int
    catch_up: int | None


class Space:
    """Every choice the planner may make for ``scenario`` (see the module docstring)."""

    def __init__(
        self, scenario: Scenario, hardware: HardwareCatalog, models: dict[str, ModelSpec]
    ) -> None:
        self.scenario, self.hw = scenario, hardware
        self.model = models[scenario.model]
        self.classes = classes = workload_classes(scenario.workload)
        self.w = np.array([c.weight for c in classes])
        self.inp = np.array([c.input_tokens for c in classes])
        self.out = np.array([c.output_tokens for c in classes])
        self.hit = np.array([c.p_hit for c in classes])
        self.caches = [(gb, np.array(h)) for gb, h in md_caches(scenario)]
        """Decode-side cache choices: (HBM GB per MD GPU or None, each class's MD hit)."""
        if float(self.w @ self.out) <= 0:
            raise InputError("the workload produces no output tokens: there is nothing to decode")
        self.tpot_s = scenario.sla.tpot_ms * units.MS
        self.rho = scenario.search.max_utilization
        self.link_rho = scenario.search.max_link_utilization
        # decode operating context: token-weighted mean context (as the evaluator)
        self.ctx = float(self.w @ ((self.inp + self.out / 2) * self.out) / (self.w @ self.out))
        self.options: dict[Role, list[PoolOption]] = {r: self._options(r) for r in ROLES}
        for role in ("prefill", "main_decode"):
            if not self.options[role]:
                raise NoOptionsError(
                    f"scenario {scenario.name}: no {role} option: no allowed chip, at the "
                    f"searched sizes {list(scenario.search.sizes())}, holds "
                    f"{self.model.id}'s weights within the datacenter limits"
                    + (" and meets the TPOT bound" if role == "main_decode" else "")
                )
        kv = self.options["main_decode"][0].instance.kv
        self.payloads = [
            np.array([kv.transfer_bytes(L, h) for L, h in zip(self.inp, hits, strict=True)])
            for _, hits in self.caches
        ]
        """Per cache choice: each class's WAN payload (what MD's cache lacks, plus state)."""
        self.rdma_bytes = np.array([kv.transfer_bytes(L, 0.0) for L in self.inp])
        self.states = self._states()
        self.owned: dict[tuple[str, str], tuple[int, float]] = {
            (dc_id, chip): (n, owned_discount(scenario, hardware, dc_id, chip))
            for dc_id, dc in scenario.datacenters.items()
            for chip, n in dc.inventory.items()
            if any(o.datacenter == dc_id and o.chip == chip for r in ROLES for o in self.options[r])
        }
        """(datacenter, chip) -> (GPUs owned there, USD per GPU-hour an owned one saves)."""
        self.cuts = relay_cuts(np.concatenate(self.payloads))
        self.relay_matrix = [
            np.array([self.relayed(c, k) for c in self.cuts]) for k in range(len(self.caches))
        ]
        """Per cache choice: cuts x classes, which classes each cut relays."""
        self.relay_float = [m.astype(float) for m in self.relay_matrix]
        self.relays_any = np.any([m.any(axis=1) for m in self.relay_matrix], axis=0)
        """Per cut: whether it relays anything under some cache choice."""
        self._md_points: dict[tuple[str, int], tuple[int, float]] = {}
        search = scenario.search
        self.singular_cuts: tuple[int, ...] = (
            search.singular_max_output_tokens
            if search.singular_max_output_tokens is not None
            else default_singular_cuts(self.out)
        )
        self.catch_up_cuts = search.catch_up_above_tokens
        self.chunk_tokens = search.handoff_chunk_tokens
        self._prefill: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}

    # --- choices ----------------------------------------------------------------------------
    def _options(self, role: Role) -> list[PoolOption]:
        s, hw = self.scenario, self.hw
        out = []
        for dc_id, chip_id in s.chips_for(role):
            dc, chip = s.datacenters[dc_id], hw.chips[chip_id]
            cal = resolve_calibration(hw, chip_id, s.calibration)
            price = gpu_price(s, hw, chip_id, dc_id).full
            for g in s.search.sizes():
                if not instance_fits(self.model, chip, g, cal, weight_dtype=s.weight_dtype):
                    continue
                inst = make_instance(
                    self.model, chip, g, cal, kv_dtype=s.kv_dtype, weight_dtype=s.weight_dtype
                )
                batch, step = 0, 0.0
                if role != "prefill":
                    batch = inst.max_batch(self.ctx, tpot_s=self.tpot_s)
                    if batch == 0:
                        continue
                    step = inst.decode_step_s(batch, self.ctx)
                limit_gpus = min(
                    x for x in (dc.max_gpus, s.search.max_gpus_per_pool) if x is not None
                )
                unit = math.lcm(g, chip.purchase_unit_gpus) // g
                most = (limit_gpus // g) // unit * unit
                if most < 1:
                    continue
                out.append(
                    PoolOption(role, dc_id, chip_id, g, inst, price, unit, most, batch, step)
                )
        return out

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

        out = [
            replace(st, cache=k, cache_gb=gb, usd_per_hour=usd_per_hour(st, k))
            for st in out
            for k, (gb, _) in enumerate(self.caches)
        ]
        if not out:
            raise InputError(
                f"scenario {s.name}: no prefill option is in, or linked to, the datacenter "
                "of a main_decode option"
            )
        return out

    def relayed(self, cut: float | None, cache: int = 0) -> np.ndarray:
        """Classes the relay cut sends through RLD under a cache choice (same arithmetic as
        the evaluator)."""
        if cut is None:
            return np.zeros_like(self.w, dtype=bool)
        return self.payloads[cache] / 1e6 > cut

    def pools_cost(self, pools: list[tuple[PoolOption | None, int]]) -> float:
        """USD per hour of (option, instances) pools, owned GPUs at their running cost."""
        total, used = 0.0, {}
        for o, n in pools:
            if o is not None:
                total += o.usd_per_instance_hour * n
                key = (o.datacenter, o.chip)
                used[key] = used.get(key, 0) + o.gpus * n
        for key, gpus in used.items():
            if key in self.owned:
                owned, discount = self.owned[key]
                total -= discount * min(gpus, owned)
        return total

    def md_point(self, o: PoolOption, st: State) -> tuple[int, float]:
        """Main decode's (batch, step seconds) on ``o`` with the HBM ``st``'s cache choice
        reserves (batch 0: nothing fits)."""
        if st.cache_gb is None:
            return o.batch, o.step_s
        key = (o.key, st.cache)
        if key not in self._md_points:
            reserve = st.cache_gb * units.GB * o.gpus
            batch = o.instance.max_batch(self.ctx, tpot_s=self.tpot_s, reserved_bytes=reserve)
            self._md_points[key] = (batch, o.instance.decode_step_s(max(batch, 1), self.ctx))
        return self._md_points[key]

    def at(self, rate_rps: float) -> Requirements:
        """The minimum-count tables at ``rate_rps``."""
        return Requirements(self, rate_rps)

    def prefill_times(self, option: PoolOption) -> PrefillFigures:
        """Per class: the prefill latency alone and the service time, on ``option`` (and
        each pass alone)."""
        key = (option.chip, option.gpus)  # the same in every datacenter
        if key not in self._prefill:
            self._prefill[key] = option.instance.prefill_figures(self.inp, self.hit)
        return self._prefill[key]

    def fleet(self, choice: Choice, name: str) -> Fleet:
        """The deployment a choice describes (pools with instances, the link, the router)."""
        pools = [
            Pool(
                datacenter=o.datacenter,
                role=o.role,
                chip=o.chip,
                gpus_per_instance=o.gpus,
                instances=choice.instances[role],
            )
            for role, o in choice.options.items()
            if o is not None and choice.instances[role] > 0
        ]
        links = ()
        if choice.state.gbps is not None:
            links = (LinkChoice(between=choice.state.link.between, gbps=choice.state.gbps),)
        return Fleet(
            name=name,
            pools=tuple(pools),
            links=links,
            routing=Routing(relay_above_mb=choice.cut, singular_max_output_tokens=choice.singular),
            handoff=Handoff(catch_up_above_tokens=choice.catch_up, chunk_tokens=self.chunk_tokens),
            md_cache_gb_per_gpu=choice.state.cache_gb,
        )


def relay_cuts(payload_bytes: np.ndarray) -> list[float | None]:
    """Candidate relay thresholds in MB: None (relay nothing), then each distinct payload
    below the largest (relaying every class above it), then 0 (relay everything). Relaying
    is therefore monotone in the WAN payload: a threshold rule a router can apply."""
    distinct = sorted({float(x) for x in payload_bytes / 1e6}, reverse=True)
    cuts: list[float | None] = [None, *distinct[1:]]
    if distinct[-1] > 0:
        cuts.append(0.0)
    return cuts


def default_singular_cuts(out_tokens: np.ndarray) -> tuple[int, ...]:
    """0 (no singular path) and the two shortest output classes, rounded up."""
    shortest = sorted({math.ceil(x) for x in out_tokens})[:2]
    return (0, *(x for x in shortest if x > 0))


# --- minimum counts at one arrival rate -------------------------------------------------------
class Requirements:
    """Minimum instance counts at one arrival rate, per combination of choices, as arrays
    over the relay cuts (``space.cuts``). A count above the option's ``max_instances`` (it is
    ``max_instances + 1``) marks a combination that no allowed count makes feasible."""

    def __init__(self, space: Space, rate: float) -> None:
        self.space, self.rate = space, rate
        self.wan: dict[str, np.ndarray] = {}
        """Per state: each class's P->MD transfer time plus the first token's way back."""
        self.wan_queueing: dict[str, np.ndarray] = {}
        """Per state: the part of ``wan`` other flows add (``wan_queueing_mean_s``)."""
        self.feasible_states: list[State] = []
        """States whose link stays within its utilization cap at this rate."""
        for st in space.states:
            self.wan[st.key], u = self._wan(st)
            self.wan_queueing[st.key] = self._queueing(st, u)
            if u <= space.link_rho:
                self.feasible_states.append(st)
        self._p: dict[tuple[str, str], np.ndarray] = {}
        self._r: dict[tuple[str, str, int], np.ndarray] = {}
        self._m: dict[tuple[str, str, int, int | None], np.ndarray] = {}
        self._handoffs: dict[tuple[str, str, int | None], tuple[np.ndarray, np.ndarray]] = {}

    def _wan(self, st: State) -> tuple[np.ndarray, float]:
        sp = self.space
        payload = sp.payloads[st.cache]
        if st.gbps is None:
            nic = sp.hw.chips[st.p_chip].nic_bytes_per_s
            return rdma_transfer_s(payload, nic_bytes_per_s=nic), 0.0
        goodput = link_bytes_per_s(st.gbps, st.link.tcp_efficiency)
        flow = self.rate * 1.0 * 1.0 * float(sp.w @ payload)
        u = flow / goodput
        share = goodput * max(0.0, 1.0 - u)
        rtt = st.link.rtt_ms * units.MS
        return wan_transfer_s_many(payload, rtt_s=rtt, share_bytes_per_s=share) + rtt / 2, u

    def _queueing(self, st: State, u: float) -> np.ndarray:
        sp = self.space
        payload = sp.payloads[st.cache]
        if st.gbps is None:
            return np.zeros_like(payload)
        goodput = link_bytes_per_s(st.gbps, st.link.tcp_efficiency)
        return wan_queueing_mean_s(payload, goodput_bytes_per_s=goodput, utilization=u)

    @cached_property
    def eager(self) -> dict[str, np.ndarray]:
        """Per state: tokens RLD decodes (at the TPOT pace) while a class's KV crosses."""
        sp = self.space
        return {k: np.minimum(sp.out, np.ceil(v / sp.tpot_s)) for k, v in self.wan.items()}

    # dominance ----------------------------------------------------------------------------
    def undominated(self, role: Role) -> list[PoolOption]:
        """The options of ``role`` no other option of the same role and datacenter dominates.

        A dominates B when, for every combination of transfer state, singular cut, catch-up
        cut and relay cut, A's minimum count costs no more, and uses no more GPUs and no more
        power, than B's (a count above the maximum counts as infinite), and B's chip has no
        GPUs owned there, or is A's chip (owned GPUs cost less than the full price compared
        here, and a chip's cost only grows with its GPUs). Swapping B for A in any plan then
        keeps it feasible and no dearer, so the MILP needs only the undominated options. Of
        options equal in all three, the first by key stays."""
        sp = self.space
        if not self.feasible_states:
            return list(sp.options[role])
        inventory = {dc: set(d.inventory) for dc, d in sp.scenario.datacenters.items()}
        figures = {}
        for o in sp.options[role]:
            n = np.concatenate([self._counts(o, st) for st in self.feasible_states]).astype(float)
            n[n > o.max_instances] = np.inf
            kw = sp.hw.chips[o.chip].tdp_w * o.gpus
            figures[o.key] = np.stack([n * o.usd_per_instance_hour, n * o.gpus, n * kw])
        kept = []
        for b in sp.options[role]:
            fb = figures[b.key]
            dominated = any(
                a is not b
                and a.datacenter == b.datacenter
                and (a.chip == b.chip or b.chip not in inventory[b.datacenter])
                and bool(np.all(figures[a.key] <= fb))
                and (bool(np.any(figures[a.key] < fb)) or a.key < b.key)
                for a in sp.options[role]
            )
            if not dominated:
                kept.append(b)
        return kept

    def _counts(self, o: PoolOption, st: State) -> np.ndarray:
        """Every minimum count of ``o`` in state ``st`` (over the other cuts), or counts
        above the maximum where ``o`` cannot serve that state."""
        sp = self.space
        if o.role == "prefill":
            if o.datacenter == st.p_dc and (st.p_chip is None or st.p_chip == o.chip):
                return self.prefill(o, st)
            return np.full(len(sp.cuts), o.max_instances + 1)
        if o.role == "relay_decode":
            if o.datacenter == st.p_dc:
                return np.concatenate([self.relay(o, st, x) for x in sp.singular_cuts])
            return np.full(len(sp.cuts) * len(sp.singular_cuts), o.max_instances + 1)
        if o.datacenter == st.md_dc:
            return np.concatenate(
                [self.main(o, st, x, h) for x in sp.singular_cuts for h in sp.catch_up_cuts]
            )
        combos = len(sp.cuts) * len(sp.singular_cuts) * len(sp.catch_up_cuts)
        return np.full(combos, o.max_instances + 1)

    # prefill ------------------------------------------------------------------------------
    def prefill_utilization_floor(self, o: PoolOption) -> int:
        """Smallest P count within the utilization cap (a lower bound on ``prefill``)."""
        sp = self.space
        svc_sum = float(sp.w @ sp.prefill_times(o)[1])
        need = _smallest(
            lambda n: self.rate * 1.0 * svc_sum / n <= sp.rho,
            np.array([self.rate * svc_sum / sp.rho]),
        )
        return int(min(_round_up(need, o)[0], o.max_instances))

    def prefill(self, o: PoolOption, st: State) -> np.ndarray:
        """Smallest P count meeting utilization and both TTFT tail budgets, per relay cut."""
        key = (o.key, st.key)
        if key not in self._p:
            self._p[key] = self._prefill(o, st)
        return self._p[key]

    def _prefill(self, o: PoolOption, st: State) -> np.ndarray:
        sp, lam = self.space, self.rate
        figures = sp.prefill_times(o)
        svc = figures.service
        svc_sum = float(sp.w @ svc)
        cv2 = float(sp.w @ (svc - svc_sum) ** 2) / svc_sum**2
        nic = sp.hw.chips[o.chip].nic_bytes_per_s
        queueing = self.wan_queueing[st.key]
        # the first token: one step at the bound; the link's queueing is the random part
        with np.errstate(invalid="ignore"):  # a saturated link: inf - inf
            fixed = np.where(np.isfinite(queueing), self.wan[st.key] - queueing, np.inf)
        rest_direct = fixed + sp.tpot_s
        rest_relay = rdma_transfer_s(sp.rdma_bytes, nic_bytes_per_s=nic) + sp.tpot_s
        rests = np.where(sp.relay_matrix[st.cache], rest_relay, rest_direct)  # cuts x classes
        extra = np.where(sp.relay_matrix[st.cache], 0.0, queueing)
        bounds = (sp.scenario.sla.ttft_p90_s, sp.scenario.sla.ttft_p99_s)

        groups = o.instance.attention_groups

        def meets(n: int, rows: np.ndarray) -> np.ndarray:
            util = lam * 1.0 * svc_sum / n
            if util > sp.rho:
                return np.zeros(len(rows), dtype=bool)
            ok = np.ones(len(rows), dtype=bool)
            loaded = loaded_prefill_latency(figures, sp.w, groups=groups, utilization=util)
            for (_, budget), bound in zip(TAIL_BUDGETS, bounds, strict=True):
                tail = prefill_wait_tail(
                    bound - loaded - rests[rows],
                    instances=n,
                    groups=groups,
                    utilization=min(util, 1.0),
                    mean_service_s=svc_sum,
                    service_cv2=cv2,
                    extra_mean_s=extra[rows],
                )
                ok &= tail @ sp.w <= budget + 1e-12
            return ok

        need = np.full(len(sp.cuts), o.max_instances + 1)
        todo = np.nonzero(meets(o.max_instances, np.arange(len(sp.cuts))))[0]
        n = max(1, math.ceil(lam * svc_sum / sp.rho) - 1)
        while len(todo):  # every cut left is met at max_instances, so this ends there
            ok = meets(n, todo)
            need[todo[ok]] = n
            todo = todo[~ok]
            n += 1
        return _round_up(need, o)

    # relay decode ---------------------------------------------------------------------------
    def relay(self, o: PoolOption, st: State, singular: int) -> np.ndarray:
        """Smallest RLD count for its token load, per relay cut (0 where nothing relays)."""
        key = (o.key, st.key, singular)
        if key not in self._r:
            sp = self.space
            # per cut: the relayed classes' RLD tokens (all of a singular one's, else eager)
            short = sp.out <= singular
            tokens = np.where(short, sp.out, self.eager[st.key])
            load = self.rate * (sp.relay_float[st.cache] @ (sp.w * tokens))
            need = _smallest(
                lambda n: load / (n * o.batch / o.step_s) <= sp.rho,
                load * o.step_s / (o.batch * sp.rho),
            )
            relays = sp.relay_matrix[st.cache].any(axis=1)
            self._r[key] = _round_up(np.where(relays, need, 0), o)
        return self._r[key]

    # main decode ----------------------------------------------------------------------------
    def main(self, o: PoolOption, st: State, singular: int, catch_up: int | None) -> np.ndarray:
        """Smallest MD count for its tokens plus handoff stalls, and for the P99 inter-token
        gap, per relay cut."""
        key = (o.key, st.key, singular, catch_up)
        if key not in self._m:
            self._m[key] = self._main(o, st, singular, catch_up)
        return self._m[key]

    def _handoff(self, o: PoolOption, st: State, catch_up: int | None):
        """Per class, if relayed (not singular): MD stalls per request and seconds each."""
        key = (o.key, st.key, catch_up)
        if key not in self._handoffs:
            sp = self.space
            chunk = sp.chunk_tokens
            eager = self.eager[st.key]
            cu = eager > catch_up if catch_up is not None else np.zeros(len(sp.w), dtype=bool)
            stalls = np.where(eager > 0, np.where(cu, np.ceil(eager / chunk), 1.0), 0.0)
            stall = np.zeros(len(sp.w))
            k = np.nonzero(eager > 0)[0]
            tokens = np.where(cu[k], np.minimum(eager[k], chunk), eager[k])
            stall[k] = o.instance.prefill_pass_s(tokens, sp.inp[k])
            self._handoffs[key] = (stalls, stall)
        return self._handoffs[key]

    def _main(self, o: PoolOption, st: State, singular: int, catch_up: int | None) -> np.ndarray:
        sp, lam = self.space, self.rate
        eager, out, w = self.eager[st.key], sp.out, sp.w
        stalls, stall = self._handoff(o, st, catch_up)
        # per cut (rows of the relay matrix R): MD's tokens are every class's output less
        # the relayed classes' eager tokens, less all of a singular class's; relayed classes
        # that are not singular stall MD at the handoff
        handed = ~(out <= singular)  # relayed classes MD takes over
        relay = sp.relay_float[st.cache]
        batch, step = sp.md_point(o, st)
        if batch == 0:  # the cache leaves no room for a running request
            return np.full(len(sp.cuts), o.max_instances + 1)
        md_tokens = float(w @ out) - relay @ (w * np.where(handed, eager, out))
        stall_busy = relay @ (w * handed * stalls * stall)
        busy = lam * md_tokens * step / batch + lam * stall_busy
        n_util = _smallest(lambda n: busy / n <= sp.rho, busy / sp.rho)
        bad = stall > sp.tpot_s * (1 + 1e-9) - step
        stalled = lam * step * (relay @ (w * handed * stalls * bad))
        n_gap = _smallest(lambda n: stalled / n <= 0.01, stalled / 0.01)
        return _round_up(np.maximum(np.maximum(n_util, n_gap), 1), o)


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


def _round_up(need: np.ndarray, o: PoolOption) -> np.ndarray:
    """Counts rounded up to the option's purchase step; past its maximum: maximum + 1."""
    need = np.asarray(need, dtype=int)
    rounded = -(-need // o.unit_step) * o.unit_step
    return np.where(rounded > o.max_instances, o.max_instances + 1, rounded)
