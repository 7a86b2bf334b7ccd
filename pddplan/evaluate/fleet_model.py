"""A fleet's rate-independent figures for the evaluator: its pools' instances and operating
points, the request classes with their decode-side cache hits, and their payloads and
prefill times (``pddplan.evaluate.evaluator`` adds the arrival rate)."""

from __future__ import annotations

import numpy as np

from pddplan import units
from pddplan.errors import InputError, WeightsDoNotFitError
from pddplan.model.instance import Instance, make_instance
from pddplan.model.queueing import pass_order
from pddplan.spec.calibration import resolve_calibration
from pddplan.spec.fleet import Fleet, Routing, md_cache_problem
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.llm import ModelSpec
from pddplan.spec.scenario import Scenario
from pddplan.workload.classes import RequestClass, md_caches, workload_classes


class FleetModel:
    """Everything about a fleet that does not depend on the arrival rate."""

    def __init__(
        self,
        scenario: Scenario,
        hw: HardwareCatalog,
        model: ModelSpec,
        fleet: Fleet,
        classes: list[RequestClass],
        memo: dict | None = None,
    ) -> None:
        self.s, self.hw, self.fleet = scenario, hw, fleet
        self.tpot_s = scenario.sla.tpot_ms * units.MS
        self.rho_max = scenario.search.max_utilization
        self.link_max = scenario.search.max_link_utilization
        self.w = np.array([c.weight for c in classes])
        self.inp = np.array([c.input_tokens for c in classes])
        self.out = np.array([c.output_tokens for c in classes])
        self.hit = np.array([c.p_hit for c in classes])
        problem = md_cache_problem(scenario, fleet)
        if problem:
            raise InputError(f"fleet {fleet.name}: md_cache_gb_per_gpu: {problem}")
        memo = {} if memo is None else memo
        self.memo = memo
        if "md_caches" not in memo:
            memo["md_caches"] = md_caches(scenario)
        gb = fleet.md_cache_gb_per_gpu
        self.md_hit = np.array(next(h for g, h in memo["md_caches"] if g == gb))
        md_reserve = (gb or 0.0) * units.GB  # per MD GPU
        self.roles: dict[str, list[tuple[object, Instance]]] = {
            r: [] for r in ("prefill", "relay_decode", "main_decode")
        }
        too_small = []
        for i, pool in enumerate(fleet.pools):
            key = ("instance", pool.chip, pool.gpus_per_instance)
            if key not in memo:
                try:
                    memo[key] = make_instance(
                        model,
                        hw.chips[pool.chip],
                        pool.gpus_per_instance,
                        resolve_calibration(hw, pool.chip, scenario.calibration),
                        kv_dtype=scenario.kv_dtype,
                        weight_dtype=scenario.weight_dtype,
                    )
                except WeightsDoNotFitError as e:
                    too_small.append(f"fleet {fleet.name}: pools[{i}] ({pool.role}): {e}")
                    continue
            self.roles[pool.role].append((pool, memo[key]))
        if too_small:
            raise WeightsDoNotFitError("\n".join(too_small))
        for role in ("prefill", "main_decode"):
            if not self.roles[role]:
                raise InputError(f"fleet {fleet.name}: no {role} pool")
        kv = self.roles["main_decode"][0][1].kv
        self.payload = np.array(
            [kv.transfer_bytes(L, h) for L, h in zip(self.inp, self.md_hit, strict=True)]
        )
        self.rdma_bytes = np.array([kv.transfer_bytes(L, 0.0) for L in self.inp])
        # prefill: latency alone and service time, per P pool and class
        self.p_figures, self.p_lat, self.p_svc, self.p_passes = [], [], [], []
        for pool, inst in self.roles["prefill"]:
            key = ("prefill", pool.chip, pool.gpus_per_instance)
            if key not in memo:
                memo[key] = inst.prefill_figures(self.inp, self.hit)
            self.p_figures.append(memo[key])
            if ("passes", *key[1:]) not in memo:  # what loaded_prefill_latency sorts
                memo[("passes", *key[1:])] = pass_order(memo[key], self.w)
            self.p_passes.append(memo[("passes", *key[1:])])
            self.p_lat.append(memo[key][0])
            self.p_svc.append(memo[key][1])
        p_caps = np.array(
            [
                pool.instances / float(self.w @ svc)
                for (pool, _), svc in zip(self.roles["prefill"], self.p_svc, strict=True)
            ]
        )
        self.p_share = p_caps / p_caps.sum()

        # MD's operating point: the largest batch meeting TPOT at MD's token-weighted context
        ctx = float(self.w @ ((self.inp + self.out / 2) * self.out) / (self.w @ self.out))

        def point(pool, inst: Instance, reserve_per_gpu: float) -> tuple[int, float]:
            key = ("decode", pool.chip, pool.gpus_per_instance, reserve_per_gpu)
            if key not in memo:
                reserve = reserve_per_gpu * pool.gpus_per_instance
                batch = inst.max_batch(ctx, tpot_s=self.tpot_s, reserved_bytes=reserve)
                memo[key] = (batch, inst.decode_step_s(max(batch, 1), ctx))
            return memo[key]

        self.md_points = {
            i: point(*pi, md_reserve) for i, pi in enumerate(self.roles["main_decode"])
        }
        # RLD's operating point at the same context (documented simplification: the planner
        # must not make RLD's step depend on which classes it relays); RLD keeps no cache
        self.rld_points = [point(*pi, 0.0) for pi in self.roles["relay_decode"]]

    def stall_seconds(self, pool_index: int, eager: np.ndarray, catch_up: np.ndarray) -> np.ndarray:
        """Per class: the MD extend step over its eager tokens (or one chunk of them where
        ``catch_up``)."""
        pool, inst = self.roles["main_decode"][pool_index]
        chunk = self.fleet.handoff.chunk_tokens
        # kept in the memo: a capacity search meets the same eager tokens at many rates
        key = ("stall", pool.chip, pool.gpus_per_instance, chunk, eager.dtype.str)
        key += (eager.tobytes(), catch_up.tobytes())
        if key not in self.memo:
            out = np.zeros_like(eager, dtype=float)
            k = np.nonzero(eager > 0)[0]
            tokens = np.where(catch_up[k], np.minimum(eager[k], chunk), eager[k])
            out[k] = inst.prefill_pass_s(tokens, self.inp[k])
            self.memo[key] = out
        return self.memo[key]

    # routing ------------------------------------------------------------------------------
    def pipelines(self, routing: Routing) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Boolean masks (direct, relay, singular) over classes."""
        if routing.relay_above_mb is None:
            relay = np.zeros_like(self.w, dtype=bool)
        else:
            relay = self.payload / 1e6 > routing.relay_above_mb  # same arithmetic as the cuts
        singular = relay & (self.out <= routing.singular_max_output_tokens)
        return ~relay, relay & ~singular, singular


def seeded_memo(
    classes: list[RequestClass],
    md_caches: list[tuple[float | None, list[float]]],
    instances: dict[tuple[str, int], Instance],
    prefill: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]],
) -> dict:
    """A ``memo`` for ``evaluate``/``sla_capacity`` that starts with figures a caller has
    already computed the same way: the classes, the decode-side cache choices, and per
    (chip, GPUs per instance) the instance and its per-class prefill latency and service
    time."""
    memo: dict = {"classes": classes, "md_caches": md_caches}
    for (chip, gpus), inst in instances.items():
        memo[("instance", chip, gpus)] = inst
    for (chip, gpus), figures in prefill.items():
        memo[("prefill", chip, gpus)] = figures
    return memo


def fleet_model(
    scenario: Scenario,
    hardware: HardwareCatalog,
    models: dict[str, ModelSpec],
    fleet: Fleet,
    memo: dict | None,
) -> FleetModel:
    """The rate-independent model of ``fleet``; ``memo`` keeps the classes and per-pool
    figures across calls on the same scenario."""
    memo = {} if memo is None else memo
    if "classes" not in memo:
        classes = workload_classes(scenario.workload)
        if sum(c.weight * c.output_tokens for c in classes) <= 0:
            raise InputError("the workload produces no output tokens: there is nothing to decode")
        memo["classes"] = classes
    return FleetModel(scenario, hardware, models[scenario.model], fleet, memo["classes"], memo)
