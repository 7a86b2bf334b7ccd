"""A fleet's rate-independent figures for the evaluator: its pools' instances and operating
points, the request classes with their decode-side cache hits, and their payloads and
prefill times (``pddplan.evaluation.evaluator`` adds the arrival rate). The tables behind them
are the problem's (``pddplan.model.problem``), computed once per problem."""

from __future__ import annotations

import numpy as np

from pddplan import units
from pddplan.errors import InputError, WeightsDoNotFitError
from pddplan.model.instance import Instance, PrefillFigures
from pddplan.model.problem import Problem
from pddplan.model.queueing import PassOrder
from pddplan.model.relay import relay_pace
from pddplan.spec.fleet import Fleet, Pool, Routing, md_cache_problem


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
        problem_text = md_cache_problem(scenario, fleet)
        if problem_text:
            raise InputError(f"fleet {fleet.name}: md_cache_gb_per_gpu: {problem_text}")
        gb = fleet.md_cache_gb_per_gpu
        self.md_hit = problem.md_hits(gb)
        self.roles: dict[str, list[tuple[Pool, Instance]]] = {
            r: [] for r in ("prefill", "relay_decode", "main_decode")
        }
        too_small = []
        for i, pool in enumerate(fleet.pools):
            try:
                inst = problem.instance(pool.chip, pool.gpus_per_instance, pool.context_parallel)
            except WeightsDoNotFitError as e:
                too_small.append(f"fleet {fleet.name}: pools[{i}] ({pool.role}): {e}")
                continue
            except InputError as e:  # context parallelism where there is one attention group
                raise InputError(f"fleet {fleet.name}: pools[{i}].context_parallel: {e}") from None
            self.roles[pool.role].append((pool, inst))
        if too_small:
            raise WeightsDoNotFitError(too_small)
        for role in ("prefill", "main_decode"):
            if not self.roles[role]:
                raise InputError(f"fleet {fleet.name}: no {role} pool")
        kv = problem.kv
        self.payload = np.array(
            [kv.transfer_bytes(L, h) for L, h in zip(self.inp, self.md_hit, strict=True)]
        )
        self.rdma_bytes = np.array([kv.transfer_bytes(L, 0.0) for L in self.inp])
        # prefill: latency alone and service time, per P pool and class
        self.p_figures: list[PrefillFigures] = []
        self.p_passes: list[PassOrder] = []
        for pool, _ in self.roles["prefill"]:
            key = (pool.chip, pool.gpus_per_instance, pool.context_parallel)
            self.p_figures.append(problem.prefill_figures(*key))
            self.p_passes.append(problem.pass_order(*key))
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
            i: problem.decode_point(pool.chip, pool.gpus_per_instance, gb or 0.0)
            for i, (pool, _) in enumerate(self.roles["main_decode"])
        }
        # RLD's largest batch at the same context (its step then meets TPOT; it runs at its
        # own batch's step, ``relay_pace``); RLD keeps no cache
        self.rld_points = [
            problem.decode_point(pool.chip, pool.gpus_per_instance)
            for pool, _ in self.roles["relay_decode"]
        ]
        slots = np.array(
            [pool.instances * b for (pool, _), (b, _) in zip(
                self.roles["relay_decode"], self.rld_points, strict=True
            )],
            dtype=float,
        )  # fmt: skip
        self.rld_share = slots / slots.sum() if slots.sum() > 0 else np.zeros(len(slots))
        """Each RLD pool's share of the relayed traffic: by its batch slots."""

    def relay_pace(self, relay_seconds: float, singular_tokens: float) -> list[tuple[float, float]]:
        """Per RLD pool: its step seconds and batch per instance at steady state
        (``pddplan.model.relay``), when relayed requests bring ``relay_seconds`` of WAN
        transfer per second and singular ones ``singular_tokens`` tokens per second, split
        over the pools by their batch slots (``rld_share``)."""
        out = []
        for (pool, _), share in zip(self.roles["relay_decode"], self.rld_share, strict=True):
            steps = self.problem.decode_steps(pool.chip, pool.gpus_per_instance)
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
    def pipelines(self, routing: Routing) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Boolean masks (direct, relay, singular) over classes."""
        if routing.relay_above_mb is None:
            relay = np.zeros_like(self.w, dtype=bool)
        else:
            relay = self.payload / 1e6 > routing.relay_above_mb  # same arithmetic as the cuts
        singular = relay & (self.out <= routing.singular_max_output_tokens)
        return ~relay, relay & ~singular, singular
