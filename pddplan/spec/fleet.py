"""A deployment to evaluate: pools of instances, link tiers, and optionally the router's
thresholds. Loaded from YAML (``--fleet``) by ``pddplan.io.fleet.load_fleet``."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from pddplan.spec.base import Frozen
from pddplan.spec.limits import MAX_GPUS, MAX_LINK_GBPS
from pddplan.spec.scenario import ROLE_SHORT, Role, Scenario

PosInt = Annotated[int, Field(ge=1, le=MAX_GPUS)]


class Pool(Frozen):
    """``instances`` instances of ``gpus_per_instance`` GPUs of ``chip`` in one role."""

    datacenter: str
    role: Role
    chip: str
    gpus_per_instance: PosInt
    instances: PosInt
    context_parallel: bool = False
    """Prefill only: each prompt's attention is split over every attention group of an
    instance (a long prompt's latency falls; each pass pays the ring exchange of its KV)."""
    attention_tp: PosInt | None = None
    """Prefill only: the attention's tensor-parallel width (each prompt's heads split over
    that many GPUs, the instance's other GPUs more attention groups); None: the model's own
    (``pddplan.model.instance.layout_for``: data-parallel for MLA and compressed attention)."""
    hosts_relay_decode: bool = False
    """Prefill only: the instances also run relay decode, its tokens piggybacked on their
    chunked-prefill passes, whose chunk then keeps each pass within the TPOT bound
    (``pddplan.model.colocation``); no GPUs of its own."""

    @model_serializer(mode="wrap")
    def _without_default_width(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """``attention_tp`` written only where it is set, so a fleet of the model's own
        layouts reads (and hashes to a deployment id) as it did before the field existed."""
        data: dict[str, Any] = handler(self)
        if data.get("attention_tp") is None:
            data.pop("attention_tp", None)
        return data

    @model_validator(mode="after")
    def _within_gpu_limit(self) -> Pool:
        gpus = self.instances * self.gpus_per_instance
        if gpus > MAX_GPUS:
            raise ValueError(
                f"{self.instances:,} instances x {self.gpus_per_instance} GPUs = {gpus:,} GPUs: "
                f"at most {MAX_GPUS:,} in a pool"
            )
        return self

    @model_validator(mode="after")
    def _prefill_only(self) -> Pool:
        for name in ("context_parallel", "hosts_relay_decode", "attention_tp"):
            if getattr(self, name) and self.role != "prefill":
                raise ValueError(f"{name} is for prefill pools, not {self.role}")
        if self.attention_tp is not None and (self.context_parallel or self.hosts_relay_decode):
            raise ValueError(
                "attention_tp needs context_parallel and hosts_relay_decode false: it is "
                "the other way to split a prompt's attention"
            )
        if self.context_parallel and self.hosts_relay_decode:
            raise ValueError(
                "hosts_relay_decode needs context_parallel false: hosted decode tokens ride "
                "data-parallel attention groups"
            )
        return self


class LinkChoice(Frozen):
    """The bandwidth bought on one WAN link."""

    between: tuple[str, str]
    gbps: Annotated[float, Field(gt=0, le=MAX_LINK_GBPS)]


class Routing(Frozen):
    """The router's rule. Requests whose WAN payload (the KV MD lacks, plus the fixed state)
    exceeds ``relay_above_mb`` go P -> RLD -> MD; the rest go P -> MD. Requests whose
    (predicted) output is at most ``singular_max_output_tokens`` and that would be relayed
    finish on RLD (the singular path)."""

    relay_above_mb: Annotated[float, Field(ge=0)] | None = None
    """None relays nothing."""
    singular_max_output_tokens: Annotated[int, Field(ge=0)] = 0
    """0 disables the singular path."""


class Handoff(Frozen):
    """How RLD hands a relayed request to MD (extend-decode): in one MD extend step over all
    its eager tokens (one-shot), or in chunks of ``chunk_tokens`` (catch-up: more, smaller
    stalls). Requests with more than ``catch_up_above_tokens`` eager tokens catch up."""

    catch_up_above_tokens: Annotated[int, Field(ge=0)] | None = None
    """None: every handoff is one-shot; 0: every handoff catches up."""
    chunk_tokens: PosInt = 64
    """Catch-up hands over this many eager tokens per chunk (one MD stall each)."""


class CacheSizes(Frozen):
    """A decode-side cache's tiers below HBM, per main-decode GPU (GB)."""

    dram_gb_per_gpu: Annotated[float, Field(ge=0)] = 0.0
    ssd_gb_per_gpu: Annotated[float, Field(ge=0)] = 0.0


class Fleet(Frozen):
    """A deployment: pools, link tiers, and optionally routing and handoff settings.
    Without ``routing`` the evaluator chooses the relay threshold that serves the most."""

    name: str
    pools: tuple[Pool, ...] = Field(min_length=1)
    links: tuple[LinkChoice, ...] = ()
    routing: Routing | None = None
    handoff: Handoff = Handoff()
    md_cache_gb_per_gpu: Annotated[float, Field(ge=0)] | None = None
    """HBM each main-decode GPU reserves for the decode-side cache: one of the scenario's
    measured-hit ``md_cache`` options (required when the scenario has them)."""
    md_cache_tiers: CacheSizes | None = None
    """The decode-side cache's tiers below HBM per main-decode GPU, where the scenario's
    ``md_cache`` options are tiers (absent: HBM alone). Any sizes may be evaluated."""


def md_cache_problem(scenario: Scenario, fleet: Fleet) -> tuple[str, str] | None:
    """What is wrong with ``fleet``'s decode-side cache for ``scenario``, as (key, problem);
    None when it fits the scenario's ``md_cache`` options."""
    gb, tiers = fleet.md_cache_gb_per_gpu, fleet.md_cache_tiers
    options = scenario.md_cache
    if options is None or not options[0].measured:
        if gb is not None:
            kind = "no md_cache options" if options is None else "tiered md_cache options"
            return "md_cache_gb_per_gpu", f"scenario {scenario.name} has {kind}; leave it out"
        if tiers is not None and options is None:
            return (
                "md_cache_tiers",
                f"scenario {scenario.name} has no md_cache options (MD hits come from its "
                "workload); leave it out",
            )
        return None
    if tiers is not None:
        return (
            "md_cache_tiers",
            f"scenario {scenario.name}'s md_cache options have measured hits; give "
            "md_cache_gb_per_gpu instead",
        )
    sizes = [o.gb_per_gpu for o in options]
    if gb in sizes:
        return None
    allowed = ", ".join(f"{x:g}" for x in sizes)
    got = "nothing" if gb is None else f"{gb:g}"
    return (
        "md_cache_gb_per_gpu",
        f"must be one of scenario {scenario.name}'s md_cache sizes ({allowed} GB/GPU), got {got}",
    )


def deployment_parts(fleet: Fleet) -> dict[str, str]:
    """A deployment in words, part by part, so that two deployments that differ in anything
    but their names differ in some part:

    - ``pools``: each pool as ``ROLE instances x GPUs chip@datacenter``, with its layout
      where it is not the model's own (``CP``, ``attention TP4``) and ``hosting RLD`` where
      relay decode runs on its instances;
    - ``links``: each link's bandwidth (``10 Gbit/s``; empty without a link);
    - ``router``: the relay threshold (``relay above 63.6 MB``, ``relay nothing``, ``relay
      all``) and the singular path (``singular <= 128 tokens``); ``router: best`` for a
      fleet without one (the evaluator picks the threshold);
    - ``handoff``: ``catch-up above N tokens`` and the chunk, where not the default
      one-shot handoff in 64-token chunks (empty there);
    - ``cache``: the decode-side cache reserved or its tiers (empty without one).

    Thresholds and sizes are written to six significant digits, so two deployments apart
    by less read the same: a table that names deployments by their text keys them by
    their identity too (``pddplan.io.plan_file.deployment_fingerprint``)."""
    pools = []
    for p in fleet.pools:
        text = f"{ROLE_SHORT[p.role]} {p.instances}x{p.gpus_per_instance} {p.chip}@{p.datacenter}"
        if p.context_parallel:
            text += " CP"
        if p.attention_tp is not None:
            text += f" attention TP{p.attention_tp}"
        if p.hosts_relay_decode:
            text += " hosting RLD"
        pools.append(text)
    links = ", ".join(f"{x.gbps:.6g} Gbit/s {'-'.join(x.between)}" for x in fleet.links)
    r = fleet.routing
    if r is None:
        router = "router: best"
    else:
        relay = r.relay_above_mb
        router = (
            "relay nothing"
            if relay is None
            else "relay all"
            if relay == 0
            else f"relay above {relay:.6g} MB"
        )
        if r.singular_max_output_tokens:
            router += f", singular <= {r.singular_max_output_tokens} tokens"
    h = fleet.handoff
    handoff = ""
    if h.catch_up_above_tokens is not None:
        handoff = (
            f"catch-up above {h.catch_up_above_tokens} tokens in {h.chunk_tokens}-token chunks"
        )
    elif h != Handoff():
        handoff = f"one-shot handoff ({h.chunk_tokens}-token chunks)"
    cache = ""
    if fleet.md_cache_gb_per_gpu is not None:
        cache = f"MD cache {fleet.md_cache_gb_per_gpu:.6g} GB/GPU"
    elif fleet.md_cache_tiers is not None:
        t = fleet.md_cache_tiers
        cache = f"MD cache DRAM {t.dram_gb_per_gpu:.6g} + SSD {t.ssd_gb_per_gpu:.6g} GB/GPU"
    return {
        "pools": " + ".join(pools),
        "links": links,
        "router": router,
        "handoff": handoff,
        "cache": cache,
    }


def deployment_line(fleet: Fleet) -> str:
    """``deployment_parts`` in one line, its non-empty parts joined by ``; ``:
    ``P 1x16 h100-sxm@a + RLD 1x16 h100-sxm@a + MD 1x8 h200-sxm@b; 10 Gbit/s; relay above
    63.6 MB``."""
    return "; ".join(x for x in deployment_parts(fleet).values() if x)


def hardware_line(fleet: Fleet) -> str:
    """What a deployment buys, in one line: its pools, links and decode-side cache
    (``deployment_parts``), not the router or the handoff, which cost nothing."""
    parts = deployment_parts(fleet)
    return "; ".join(x for x in (parts["pools"], parts["links"], parts["cache"]) if x)
