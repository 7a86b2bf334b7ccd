"""A fleet's rate-independent figures for the evaluator: its pools' instances and operating
points, the request classes with their decode-side cache hits, and their payloads and
prefill times (``pddplan.evaluation.evaluator`` adds the arrival rate). The tables behind them
are the problem's (``pddplan.model.problem``), computed once per problem."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from pddplan import units
from pddplan.errors import InputError, WeightsDoNotFitError
from pddplan.model.colocation import MIN_CHUNK, HostPoint
from pddplan.model.instance import Instance, PrefillFigures
from pddplan.model.md_cache import Tiers, fetch_seconds, instance_tiers, tier_hits, tier_reads
from pddplan.model.prefill_queue import PassOrder
from pddplan.model.problem import Problem
from pddplan.model.relay import relay_pace
from pddplan.model.routing import RelaySplit, relay_split
from pddplan.spec.fleet import CacheSizes, Fleet, Pool, Routing, md_cache_problem


@dataclass(frozen=True)
class CacheAt:
    """The decode-side cache at one arrival rate (``FleetModel.cache_at``)."""

    hits: dict[str, np.ndarray]
    """Per MD datacenter: each class's MD hit."""
    payloads: dict[str, np.ndarray]
    """Per MD datacenter: each class's WAN payload (bytes)."""
    fetch: dict[str, list[tuple[float, np.ndarray]]]
    """Per MD datacenter, per tier the hits come from: its share, each class's fetch (s)."""
    mean_hit: np.ndarray
    """Each class's MD hit over the datacenters (by their shares): what sets the payloads
    the router's threshold compares."""


class FleetModel:
    """Everything about a fleet that does not depend on the arrival rate."""

    def __init__(self, problem: Problem, fleet: Fleet) -> None:
        scenario = problem.scenario
        self.problem, self.s, self.hw, self.fleet = problem, scenario, problem.hardware, fleet
        self.tpot_s = scenario.sla.tpot_ms * units.MS
        self.rho_max = scenario.search.max_utilization
        self.link_max = scenario.search.max_link_utilization
        if problem.output_tokens_per_request <= 0:
            raise InputError("the workload produces no output tokens: there is nothing to decode")
        a = problem.arrays
        self.w, self.inp, self.out, self.hit = a.w, a.inp, a.out, a.hit
        self.out_points = a.out_points
        self._splits: dict[tuple[bytes, float | None], RelaySplit] = {}
        cache_problem = md_cache_problem(scenario, fleet)
        if cache_problem:
            raise InputError(f"fleet {fleet.name}: {cache_problem[0]}: {cache_problem[1]}")
        gb = fleet.md_cache_gb_per_gpu
        options = scenario.md_cache
        self.tiered = options is not None and not options[0].measured
        self._gb = gb
        self.roles: dict[str, list[tuple[Pool, Instance]]] = {
            r: [] for r in ("prefill", "relay_decode", "main_decode")
        }
        too_small = []
        for i, pool in enumerate(fleet.pools):
            try:
                inst = problem.instance(
                    pool.chip,
                    pool.gpus_per_instance,
                    pool.context_parallel,
                    pool.attention_tp,
                    role=pool.role,
                )
            except WeightsDoNotFitError as e:
                too_small.append(f"fleet {fleet.name}: pools[{i}] ({pool.role}): {e}")
                continue
            except (
                InputError
            ) as e:  # a layout with nothing to split, or a width that does not divide
                what = "attention_tp" if pool.attention_tp is not None else "context_parallel"
                raise InputError(f"fleet {fleet.name}: pools[{i}].{what}: {e}") from None
            self.roles[pool.role].append((pool, inst))
        if too_small:
            raise WeightsDoNotFitError(too_small + _relay_hint(problem, fleet))
        for role in ("prefill", "main_decode"):
            if not self.roles[role]:
                raise InputError(f"fleet {fleet.name}: no {role} pool")
        self.hosts: dict[int, tuple[int, HostPoint]] = {}
        """Per RLD pool hosted on prefill instances (its index in ``roles``): the prefill
        pool's index and how it hosts (``pddplan.model.colocation``)."""
        for j, (pool, inst) in enumerate(list(self.roles["prefill"])):
            if not pool.hosts_relay_decode:
                continue
            point = problem.host_point(pool.chip, pool.gpus_per_instance, pool.context_parallel)
            if point is None:
                i = fleet.pools.index(pool)
                raise InputError(
                    f"fleet {fleet.name}: pools[{i}].hosts_relay_decode: {pool.gpus_per_instance}"
                    f" x {pool.chip} cannot host relay decode: no sequence of "
                    f"{problem.decode_context_tokens:,.0f} tokens fits beside its prompts, or "
                    f"one decode token beside a {MIN_CHUNK}-token chunk at the end of the "
                    f"longest prompt ({problem.arrays.inp.max():,.0f} tokens) takes longer than "
                    f"the TPOT bound {scenario.sla.tpot_ms:g} ms; use a relay_decode pool"
                )
            self.hosts[len(self.roles["relay_decode"])] = (j, point)
            hosted = pool.model_copy(update={"role": "relay_decode", "hosts_relay_decode": False})
            self.roles["relay_decode"].append((hosted, inst))
            # the host's passes run at the chunk that keeps them within the TPOT bound
            key = (pool.chip, pool.gpus_per_instance, pool.context_parallel)
            self.roles["prefill"][j] = (pool, problem.host_instance(*key))
        kv = problem.kv
        self.rdma_bytes = np.array([kv.transfer_bytes(L, 0.0) for L in self.inp])
        # prefill: latency alone and service time, per P pool and class
        self.p_figures: list[PrefillFigures] = []
        self.p_passes: list[PassOrder] = []
        for pool, _ in self.roles["prefill"]:
            key = (pool.chip, pool.gpus_per_instance, pool.context_parallel)
            hosting, tp = pool.hosts_relay_decode, pool.attention_tp
            self.p_figures.append(problem.prefill_figures(*key, hosting, tp))
            self.p_passes.append(problem.pass_order(*key, hosting, tp))
        self.p_lat = [f.latency for f in self.p_figures]
        self.p_svc = [f.service for f in self.p_figures]
        p_caps = np.array(
            [
                pool.instances / float(self.w @ svc)
                for (pool, _), svc in zip(self.roles["prefill"], self.p_svc, strict=True)
            ]
        )
        self.p_share = p_caps / p_caps.sum()
        # MD's operating point: the largest batch meeting TPOT at MD's token-weighted
        # context, with the decode-side cache's HBM held back
        self.md_points = {
            i: problem.decode_point(pool.chip, pool.gpus_per_instance, gb or 0.0, role=pool.role)
            for i, (pool, _) in enumerate(self.roles["main_decode"])
        }
        self.md_steps = [
            problem.decode_steps(pool.chip, pool.gpus_per_instance, role=pool.role)
            for pool, _ in self.roles["main_decode"]
        ]
        """Per MD pool: its step at every batch up to its largest (its admission queue)."""
        self.md_first = [
            problem.first_step_s(pool.chip, pool.gpus_per_instance, gb or 0.0)
            for pool, _ in self.roles["main_decode"]
        ]
        """Per MD pool: a request's first step there, from its admission to its first token
        (``Problem.first_step_s``, as the planner charges it)."""
        self.md_dcs = sorted({p.datacenter for p, _ in self.roles["main_decode"]})
        self.tiers = self._tiers() if self.tiered else {}
        """A tiered cache's capacity per MD datacenter (``pddplan.model.md_cache``)."""
        # RLD's largest batch at the same context (its step then meets TPOT; it runs at its
        # own batch's step, ``relay_pace``); RLD keeps no cache
        self.rld_points = [
            (self.hosts[i][1].batch, float(self.hosts[i][1].mixed_s[-1]))
            if i in self.hosts
            else problem.decode_point(pool.chip, pool.gpus_per_instance, role=pool.role)
            for i, (pool, _) in enumerate(self.roles["relay_decode"])
        ]
        slots = np.array(
            [pool.instances * b for (pool, _), (b, _) in zip(
                self.roles["relay_decode"], self.rld_points, strict=True
            )],
            dtype=float,
        )  # fmt: skip
        self.rld_share = slots / slots.sum() if slots.sum() > 0 else np.zeros(len(slots))
        """Each RLD pool's share of the relayed traffic: by its batch slots."""

    @cached_property
    def md_hit(self) -> np.ndarray:
        """Each class's MD hit: the scenario's for a measured cache; a tiered cache's at the
        scenario's demand, which only sets the relay thresholds ``_best_routing`` tries
        (and the report's pipelines at the demand): a state takes its hits at its own rate
        (``cache_at``), so a fleet's capacity under a router does not depend on the demand."""
        if not self.tiered:
            return self.problem.md_hits(self._gb)
        rate = self.s.workload.arrival_rps or 1.0
        return self.cache_at(rate, self.md_dc_shares).mean_hit

    @cached_property
    def payload(self) -> np.ndarray:
        """Each class's WAN payload at ``md_hit`` (bytes)."""
        return np.asarray(self.problem.kv.transfer_bytes(self.inp, self.md_hit))

    @property
    def md_dc_shares(self) -> dict[str, float]:
        """Each MD datacenter's share of the requests: its decode capacity's."""
        caps = {dc: 0.0 for dc in self.md_dcs}
        for (pool, _), (b, t) in zip(
            self.roles["main_decode"], self.md_points.values(), strict=True
        ):
            caps[pool.datacenter] += pool.instances * b / t if b else 0.0
        total = sum(caps.values())
        return {dc: c / total if total else 1.0 / len(caps) for dc, c in caps.items()}

    def _tiers(self) -> dict[str, Tiers]:
        sizes = self.fleet.md_cache_tiers or CacheSizes()
        bpt, out = self.problem.kv.bytes_per_token, {}
        for dc in self.md_dcs:
            pools = [(p, i) for p, i in self.roles["main_decode"] if p.datacenter == dc]
            caps = np.zeros(3)
            for pool, inst in pools:
                caps += pool.instances * np.array(
                    instance_tiers(
                        inst.kv_capacity_bytes(), pool.gpus_per_instance,
                        sizes.dram_gb_per_gpu, sizes.ssd_gb_per_gpu, bpt,
                    )
                )  # fmt: skip
            reads = [tier_reads(self.hw, inst.chip) for _, inst in pools]
            hbm, dram, ssd = (float(x) for x in caps)
            out[dc] = Tiers(hbm, dram, ssd, min(r[0] for r in reads), min(r[1] for r in reads))
        return out

    def cache_at(self, rate_rps: float, dc_share: dict[str, float]) -> CacheAt:
        """The decode-side cache at ``rate_rps``: per MD datacenter (with ``dc_share`` of
        the requests), each class's MD hit, WAN payload and, per tier the hits come from,
        its share and fetch seconds. A tiered cache's hits follow its capacity at that
        datacenter's rate (``pddplan.model.md_cache.tier_hits``); other caches' are fixed."""
        kv = self.problem.kv
        hits, fetch = {}, {}
        for dc in self.md_dcs:
            if not self.tiered:
                hits[dc] = self.md_hit
                fetch[dc] = [(1.0, np.zeros_like(self.w))]
                continue
            dc_rate = rate_rps * dc_share[dc]
            got = tier_hits(self.problem.reuse_between(dc_rate), self.tiers[dc], dc_rate)
            hits[dc] = self.hit * got.kept
            hit_bytes = kv.bytes_per_token * self.inp * hits[dc]
            fetch[dc] = fetch_seconds(hit_bytes, self.tiers[dc], got.shares)
        payloads = {dc: np.asarray(kv.transfer_bytes(self.inp, h)) for dc, h in hits.items()}
        mean_hit = sum((dc_share[dc] * hits[dc] for dc in self.md_dcs), np.zeros_like(self.w))
        return CacheAt(hits, payloads, fetch, mean_hit)

    def relay_pace(
        self, relay_seconds: float, singular_tokens: float, prefill_busy: list[float]
    ) -> list[tuple[float, float]]:
        """Per RLD pool: its step seconds and batch per instance at steady state
        (``pddplan.model.relay``), when relayed requests bring ``relay_seconds`` of WAN
        transfer per second and singular ones ``singular_tokens`` tokens per second, split
        over the pools by their batch slots (``rld_share``). A pool hosted on prefill
        instances steps at its mixed passes while its host is busy (``prefill_busy``, per
        prefill pool), at plain decode steps otherwise."""
        out = []
        for i, ((pool, _), share) in enumerate(
            zip(self.roles["relay_decode"], self.rld_share, strict=True)
        ):
            if i in self.hosts:
                j, point = self.hosts[i]
                steps = point.steps(prefill_busy[j])
            else:
                steps = self.problem.decode_steps(pool.chip, pool.gpus_per_instance, role=pool.role)
            step, batch = relay_pace(
                steps, relay_seconds * share, singular_tokens * share, pool.instances
            )
            out.append((float(step), float(batch)))
        return out

    def stall_seconds(self, pool_index: int, eager: np.ndarray, catch_up: np.ndarray) -> np.ndarray:
        """Per class: the MD extend step over its eager tokens (or one chunk of them where
        ``catch_up``)."""
        pool, _ = self.roles["main_decode"][pool_index]
        chunk = self.fleet.handoff.chunk_tokens
        out = np.zeros_like(eager, dtype=float)
        k = np.nonzero(eager > 0)[0]
        tokens = np.where(catch_up[k], np.minimum(eager[k], chunk), eager[k])
        out[k] = self.problem.extend_pass_s(pool.chip, pool.gpus_per_instance, tokens, k)
        return out

    # routing ------------------------------------------------------------------------------
    def pipelines(
        self, routing: Routing, hits: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per class, the shares of its requests (direct, relay, singular) when they hit
        ``hits`` at main decode (default: the workload's): the router compares each
        request's own WAN payload with the threshold (``pddplan.model.routing.relay_shares``,
        as the planner's cuts)."""
        by = self.md_hit if hits is None else hits
        relay = self._split(by, routing.relay_above_mb).shares[0]
        singular = relay * (self.out <= routing.singular_max_output_tokens)
        return 1.0 - relay, relay - singular, singular

    def _split(self, hits: np.ndarray, cut_mb: float | None) -> RelaySplit:
        """``relay_split`` at one threshold, kept per (hits, threshold): every state of a
        fleet without a tiered cache routes at the same hits, and ``pipelines`` and
        ``direct_payloads`` read the same split."""
        key = (hits.tobytes(), cut_mb)
        split = self._splits.get(key)
        if split is None:
            split = self._splits[key] = relay_split(self.problem, hits, [cut_mb])
        return split

    def direct_payloads(self, routing: Routing, hits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per class, the mean payload of its requests sent straight to MD and their
        standard deviation, as multiples of the class's mean payload at ``hits``: the
        router relays a class's larger payloads (``pddplan.model.routing.relay_split``)."""
        split = self._split(hits, routing.relay_above_mb)
        mean = np.asarray(self.problem.kv.transfer_bytes(self.inp, hits))

        def per_mean(x: np.ndarray, empty: float) -> np.ndarray:  # a class shipping nothing
            return np.divide(x, mean, out=np.full_like(mean, empty), where=mean > 0)

        return per_mean(split.below_bytes[0], 1.0), per_mean(split.below_sd_bytes[0], 0.0)


def _relay_hint(problem: Problem, fleet: Fleet) -> list[str]:
    """Where a relay-decode pool cannot hold the weights: what its datacenter's prefill and
    relay GPUs of that chip make in whole instances of the smallest size that fits, and that
    relay decode on the prefill instances needs no GPUs of its own."""
    out = []
    for i, pool in enumerate(fleet.pools):
        if pool.role != "relay_decode" or problem.fits(
            pool.chip, pool.gpus_per_instance, role=pool.role
        ):
            continue
        size = next(
            (g for g in (2**k for k in range(11)) if problem.fits(pool.chip, g, role=pool.role)),
            None,
        )
        if size is None:
            continue
        beside = [
            p
            for p in fleet.pools
            if p.datacenter == pool.datacenter
            and p.chip == pool.chip
            and p.role in ("prefill", "relay_decode")
        ]
        gpus = sum(p.gpus_per_instance * p.instances for p in beside)
        whole, left = divmod(gpus, size)
        out.append(
            f"fleet {fleet.name}: pools[{i}] (relay_decode): the {gpus} {pool.chip} of "
            f"{pool.datacenter}'s prefill and relay_decode pools make {whole} x {size}"
            + (f" + {left}" if left else "")
            + " GPUs in whole instances of the smallest size that holds the weights; relay "
            "decode can run on the prefill instances with no GPUs of its own: drop this pool "
            "and set hosts_relay_decode: true on a prefill pool"
        )
    return out
