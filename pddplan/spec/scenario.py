"""The scenario: what to plan for. Loaded from YAML by ``pddplan.io.scenario``; these classes
validate each field on its own, and ``loaders.load_scenario`` checks the cross-references
(model and chip ids, link endpoints, roles, fit) against the catalogs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    Discriminator,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    Tag,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from pddplan.spec.base import Frozen, with_field_docs
from pddplan.spec.calibration import CalibrationSpec
from pddplan.spec.choices import Objective, SolverName
from pddplan.spec.distributions import HitDist
from pddplan.spec.engine import IDEAL
from pddplan.spec.horizon import Horizon
from pddplan.spec.limits import (
    MAX_CLASSES,
    MAX_GPUS,
    MAX_LINK_GBPS,
    MAX_RTT_MS,
    MAX_TIME_LIMIT_S,
    MAX_TOKENS,
    MAX_TPOT_MS,
    MAX_TTFT_S,
    MAX_USD,
    MAX_VARIANTS,
    relay_table_bytes,
)
from pddplan.spec.llm import Dtype, KvDtype
from pddplan.spec.source import Loc, fmt_loc, quote
from pddplan.spec.workloads import ClassSpec as ClassSpec  # re-exported: its old home
from pddplan.spec.workloads import TraceRef as TraceRef
from pddplan.spec.workloads import _WorkloadKeys

Role = Literal["prefill", "relay_decode", "main_decode"]

ROLES: tuple[Role, ...] = ("prefill", "relay_decode", "main_decode")
ROLE_SHORT: dict[str, str] = {"prefill": "P", "relay_decode": "RLD", "main_decode": "MD"}
"""Each role as tables and one-line deployments write it."""
Positive = Annotated[float, Field(gt=0)]
GpuCount = Annotated[int, Field(ge=1, le=MAX_GPUS)]
Tokens = Annotated[float, Field(ge=0, le=MAX_TOKENS)]
Usd = Annotated[float, Field(ge=0, le=MAX_USD)]
PositiveUsd = Annotated[float, Field(gt=0, le=MAX_USD)]
Id = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")]


class Datacenter(Frozen):
    """One datacenter: which chips may be placed there, in which roles, within which limits."""

    chips: tuple[str, ...] = Field(min_length=1)
    roles: tuple[Role, ...] = Field(min_length=1)
    max_gpus: GpuCount | None = None
    max_power_kw: Positive | None = None
    pue: Annotated[float, Field(ge=1)] = 1.0
    """Power usage effectiveness: facility power / IT power, for ``max_power_kw``."""
    inventory: dict[str, GpuCount] = Field(default_factory=dict)
    """GPUs already owned here, by chip id: they cost only their running cost (power and
    hosting; their capex is sunk). More of the chip may be bought or rented at full price."""
    role_chips: dict[Role, tuple[str, ...]] | None = None
    """Chips each role may use here (default: any of ``chips`` for every role)."""

    @model_validator(mode="after")
    def _inventory_is_allowed(self) -> Datacenter:
        extra = sorted(set(self.inventory) - set(self.chips))
        if extra:
            raise ValueError(
                f"inventory names chips not in this datacenter's chips: {', '.join(extra)} "
                f"(chips: {', '.join(self.chips)})"
            )
        for role, chips in (self.role_chips or {}).items():
            if role not in self.roles:
                raise ValueError(f"role_chips names role '{role}', not one of roles here")
            extra = sorted(set(chips) - set(self.chips))
            if extra:
                raise ValueError(
                    f"role_chips.{role} names chips not in this datacenter's chips: "
                    f"{', '.join(extra)} (chips: {', '.join(self.chips)})"
                )
        if len(set(self.roles)) != len(self.roles):
            raise ValueError("roles lists a role twice")
        return self


class LinkTier(Frozen):
    """One purchasable bandwidth tier of a WAN link: a monthly price, a price per GB of
    egress, or both."""

    gbps: Annotated[float, Field(gt=0, le=MAX_LINK_GBPS)]
    usd_per_month: Usd = 0.0
    usd_per_gb: Usd = 0.0
    """Egress price per GB (1e9 bytes) carried, billed on the traffic at the demand."""


HANDOFF_LOSS_RATE = 6.86e-6
"""The random loss rate that makes one warm CUBIC flow at 30 ms RTT move the PDD paper's
100-token KV handoff (4,649 KB) in its measured mean of 185 ms (DESIGN.md section 2):
fitted, with every other ``Tcp`` figure fixed at its sourced default
(``tests/test_network.py`` refits it; docs/model.md shows the fit)."""


class Tcp(Frozen):
    """How a KV transfer crosses a WAN link: TCP flows (docs/model.md, "WAN transfers")."""

    congestion_control: Literal["cubic", "reno"] = "cubic"
    """Linux's default since 2.6.19 is CUBIC (RFC 8312); Reno follows Mathis et al. 1997."""
    mss_bytes: Annotated[int, Field(ge=1)] = 1448
    """Maximum segment size: a 1,500 B Ethernet MTU less 20 B IP, 20 B TCP and 12 B of the
    timestamp option."""
    initial_window_segments: Annotated[int, Field(ge=1)] = 10
    """RFC 6928's initial window (Linux's default since 2.6.39)."""
    window_max_bytes: Annotated[int, Field(ge=1)] = 6_291_456
    """The window ceiling: Linux's default ``net.ipv4.tcp_rmem`` maximum, 6 MiB (about
    1.68 Gbit/s per flow at 30 ms)."""
    loss_rate: Annotated[float, Field(ge=0, lt=1)] = HANDOFF_LOSS_RATE
    """Random segment loss probability on the path."""
    streams: Annotated[int, Field(ge=1)] = 1
    """Parallel TCP connections one transfer is split over."""
    slow_start_after_idle: bool = False
    """Whether a transfer starts from the initial window (Linux's
    ``net.ipv4.tcp_slow_start_after_idle``, 1 by default) or keeps the window its
    connection had open. The paper's 185 ms handoff is below what any restart allows (265
    ms for 4,649 KB at 30 ms on one flow), so its connections kept their windows."""
    min_rto_ms: Annotated[float, Field(ge=0)] = 200.0
    """The retransmission timeout a tail loss waits (Linux's ``TCP_RTO_MIN``, 200 ms)."""


class Link(Frozen):
    """A WAN link between two datacenters (TCP over Ethernet)."""

    between: tuple[str, str]
    rtt_ms: Annotated[float, Field(gt=0, le=MAX_RTT_MS)]
    tcp_efficiency: Annotated[float, Field(gt=0, le=1)] = 0.9
    """Goodput / line rate for long TCP flows (headers, congestion control)."""
    tcp: Tcp = Tcp()
    """Each transfer's TCP flows: their window and loss caps and how they start."""
    tiers: tuple[LinkTier, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _valid(self) -> Link:
        if self.between[0] == self.between[1]:
            raise ValueError(f"a link joins two different datacenters, got {self.between[0]} twice")
        speeds = [t.gbps for t in self.tiers]
        if speeds != sorted(set(speeds)):
            raise ValueError(
                f"tiers must be in increasing gbps order without repeats, got {speeds}"
            )
        return self


class Workload(_WorkloadKeys):
    """Arrivals, lengths and prefix-cache hit rates; or a trace to fit them from."""

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        dists = ("input_tokens", "output_tokens", "prefix_hit")
        given = [k for k in (*dists, "md_prefix_hit") if getattr(self, k) is not None]
        if self.trace is not None:
            if given or self.classes:
                raise ValueError("give a trace, or classes, or distributions, not several")
            return self
        if self.arrival_rps is None:
            raise ValueError("give arrival_rps (or a trace to fit it from)")
        if self.classes is not None:
            if given:
                raise ValueError(
                    f"give classes or distributions, not both (found {', '.join(given)})"
                )
            if len(self.classes) > MAX_CLASSES:
                gib = relay_table_bytes(len(self.classes)) / 2**30
                raise ValueError(
                    f"{len(self.classes):,} classes: at most {MAX_CLASSES:,} (the planner's "
                    f"relay tables grow as classes squared: {gib:.2g} GiB per MD cache option "
                    "here); merge classes of similar length and hit rate"
                )
            total = sum(c.weight for c in self.classes)
            if abs(total - 1.0) > 1e-6:
                raise ValueError(f"class weights sum to {total:.6g}; they must sum to 1")
            return self
        missing = [k for k in dists if k not in given]
        if missing:
            raise ValueError(f"give {', '.join(missing)} (or classes, or a trace to fit them from)")
        return self


WORKLOAD_SOURCES: dict[str, tuple[str, ...]] = {
    "distributions": ("input_tokens", "output_tokens", "prefix_hit", "md_prefix_hit"),
    "classes": ("classes",),
    "trace": ("trace",),
}
"""The three ways to give a workload's requests, by the keys that give each."""
VARIANT_WEIGHT_TOLERANCE = 1e-6
"""The weights of a scenario's weighted variants must sum to 1 within this."""
Slug = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_\-]*$")]


class WorkloadVariant(_WorkloadKeys):
    """One workload the plan may have to serve besides the base ``workload`` (a month, a
    tenant mix): an overlay, so it gives only the workload keys it changes. A key it gives
    replaces the base's whole value; a key it leaves out keeps the base's. Giving the
    requests another way than the base (classes or a trace over distributions, say) drops
    the base's way of giving them, and a trace of its own brings its own rate unless the
    variant gives ``arrival_rps`` (``resolve_variant``)."""

    name: Slug
    """A unique name: lower-case letters, digits, ``-`` and ``_``."""
    weight: Annotated[float, Field(gt=0, le=1)] | None = None
    """This variant's share of the requests the SLA is measured over (the weights of weighted
    variants sum to 1): the mixture of their TTFT tails weighs each by it."""
    must_meet: bool = False
    """Whether every plan must serve this variant within the SLA (instead of a weight)."""

    def changes(self) -> dict[str, Any]:
        """The workload keys this variant gives (those it leaves out are None)."""
        return {
            k: getattr(self, k) for k in _WorkloadKeys.model_fields if getattr(self, k) is not None
        }


def _sources_of(keys: Iterable[str]) -> set[str]:
    given = set(keys)
    return {kind for kind, names in WORKLOAD_SOURCES.items() if given & set(names)}


def resolve_variant(base: Workload, variant: WorkloadVariant) -> Workload:
    """The whole workload of ``variant``: ``base`` with the variant's keys laid over it.

    Raises ``ValueError`` (the reason, one sentence) when the result is not a workload, e.g.
    a variant that gives ``prefix_hit`` alone over a base given as classes."""
    changes = variant.changes()
    merged = {k: getattr(base, k) for k in _WorkloadKeys.model_fields}
    base_sources = _sources_of(k for k, v in merged.items() if v is not None)
    new_sources = _sources_of(changes)
    if new_sources and new_sources != base_sources:
        for names in WORKLOAD_SOURCES.values():
            merged.update(dict.fromkeys(names))
    if "trace" in new_sources:  # a trace of its own brings its own rate
        merged["arrival_rps"] = None
    merged.update(changes)
    try:
        return Workload.model_validate(merged)
    except ValidationError as e:
        reasons = [
            str(err["msg"]).removeprefix("Value error, ") for err in e.errors(include_url=False)
        ]
        raise ValueError("; ".join(reasons)) from None


def too_many_variants(count: int) -> str:
    """The message for ``count`` variants, more than ``MAX_VARIANTS``."""
    return (
        f"{count:,} variants: at most {MAX_VARIANTS} (the robust plan's MILP grows faster "
        "than the variants, and each variant's own plan is checked under every other); "
        "merge similar windows (a longer workload fit --window)"
    )


def variant_problems(variants: Sequence[WorkloadVariant] | None) -> list[tuple[Loc, str]]:
    """What is wrong with a scenario's variants taken together, each with its key path: an
    empty list, more than ``MAX_VARIANTS``, a name given twice, a variant with neither or
    both of a weight and ``must_meet``, and weights that do not sum to 1. None (no
    variants) is fine."""
    out: list[tuple[Loc, str]] = []
    key = "workload_variants"
    if variants is None:
        return out
    if not variants:
        return [((key,), "an empty list: give at least one variant, or leave the key out")]
    if len(variants) > MAX_VARIANTS:
        return [((key,), too_many_variants(len(variants)))]
    first: dict[str, int] = {}
    for i, v in enumerate(variants):
        if v.name in first:
            out.append(
                (
                    (key, i, "name"),
                    f"'{v.name}' is the name of workload_variants[{first[v.name]}] too; "
                    "give each variant its own name",
                )
            )
        first.setdefault(v.name, i)
    if not any(v.must_meet or v.weight is not None for v in variants):
        out.append(
            (
                (key,),
                "no variant is must_meet and none has a weight: give each variant a weight "
                "(its share of the requests; the weights sum to 1) or must_meet: true",
            )
        )
        return out
    for i, v in enumerate(variants):
        if v.must_meet and v.weight is not None:
            out.append(
                (
                    (key, i, "weight"),
                    f"variant '{v.name}' is must_meet and has a weight {v.weight:g}: give "
                    "one of the two (must_meet: true, served in full; or a weight, its share "
                    "of the time)",
                )
            )
        elif not v.must_meet and v.weight is None:
            out.append(
                (
                    (key, i),
                    f"variant '{v.name}' has no weight and is not must_meet: give a weight "
                    "(its share of the requests; the weights sum to 1) or must_meet: true",
                )
            )
    weighted = [v for v in variants if v.weight is not None]
    total = sum(v.weight or 0.0 for v in weighted)
    if weighted and abs(total - 1.0) > VARIANT_WEIGHT_TOLERANCE:
        parts = ", ".join(f"{v.name} {v.weight:g}" for v in weighted)
        out.append(
            (
                (key,),
                f"the variants' weights sum to {total:.6g} ({parts}); they must sum to 1 "
                f"within {VARIANT_WEIGHT_TOLERANCE:g}",
            )
        )
    return out


class GpuPurchase(Frozen):
    """Buying a chip instead of renting it: capex amortized over its life, plus running
    costs (power at the datacenter's PUE, and hosting)."""

    capex_usd_per_gpu: PositiveUsd
    amortization_years: Positive
    hosting_usd_per_gpu_hour: Usd | None = None
    """Rack space, cooling, operations (default: the scenario's ``hosting_usd_per_gpu_hour``)."""


class MdCacheOption(Frozen):
    """One decode-side (MD) prefix cache the planner may pick (one per plan), in one of two
    forms:

    - **tiers** (no hit given): the cache is HBM shared with running requests, then
      ``dram_gb_per_gpu`` of host DRAM and ``ssd_gb_per_gpu`` of SSD per main-decode GPU,
      priced by the hardware catalog's ``cache_tiers``; its hit rate follows from its
      capacity by the workload's reuse curve (``docs/model.md``, "The decode-side cache");
    - **a measured hit** (``md_prefix_hit`` or ``md_hit``): ``gb_per_gpu`` of HBM reserved
      for prefixes, with the MD hit rate it is known to give at any load."""

    gb_per_gpu: Annotated[float, Field(ge=0)] = 0.0
    """Measured-hit options: HBM each main-decode GPU reserves for cached prefixes (GB,
    1e9 bytes); running requests' KV cannot use it."""
    md_prefix_hit: HitDist | None = None
    """The MD hit-rate distribution at this size (workloads given as distributions)."""
    md_hit: tuple[Annotated[float, Field(ge=0, le=1)], ...] | None = None
    """The MD hit rate of each class at this size, in class order (workloads given as
    classes, or fitted from a trace)."""
    dram_gb_per_gpu: Annotated[float, Field(ge=0)] | None = None
    """Tiers: host DRAM per main-decode GPU the cache spills to (GB)."""
    ssd_gb_per_gpu: Annotated[float, Field(ge=0)] | None = None
    """Tiers: local SSD per main-decode GPU behind the DRAM (GB)."""

    @model_validator(mode="after")
    def _one_form(self) -> MdCacheOption:
        if self.md_prefix_hit is not None and self.md_hit is not None:
            raise ValueError("give md_prefix_hit or md_hit, not both")
        if self.measured and (self.dram_gb_per_gpu is not None or self.ssd_gb_per_gpu is not None):
            raise ValueError(
                "a measured hit (md_prefix_hit, md_hit) goes with a reserved gb_per_gpu; "
                "tiers (dram_gb_per_gpu, ssd_gb_per_gpu) take their hit from the reuse curve"
            )
        if not self.measured and self.gb_per_gpu:
            raise ValueError(
                "gb_per_gpu reserves HBM for a measured hit: give md_prefix_hit or md_hit, "
                "or leave it out (a tiered cache shares HBM with running requests)"
            )
        return self

    @property
    def measured(self) -> bool:
        """A measured-hit option (else tiers, with the hit from the reuse curve)."""
        return self.md_prefix_hit is not None or self.md_hit is not None

    @property
    def dram_gb(self) -> float:
        return self.dram_gb_per_gpu or 0.0

    @property
    def ssd_gb(self) -> float:
        return self.ssd_gb_per_gpu or 0.0

    @property
    def label(self) -> str:
        """A short name: ``40GB`` (reserved HBM) or ``hbm+256GB dram+3840GB ssd``."""
        if self.measured:
            return f"{self.gb_per_gpu:g}GB"
        parts = ["hbm"]
        parts += [f"{self.dram_gb:g}GB dram"] if self.dram_gb else []
        parts += [f"{self.ssd_gb:g}GB ssd"] if self.ssd_gb else []
        return "+".join(parts)


TAIL_BUDGETS = ((0.90, 0.10), (0.99, 0.01))
"""(percentile, tail-mass budget): the P90 bound allows 10% of requests above it, P99 1%."""
MD_ADMISSION_SHARE = 0.1
"""The planner's split of each TTFT tail budget: main decode's admission queue may hold up at
most this share of it (requests that wait for a decode slot at all), prefill's tails the
rest; the two together stay within the budget (a union bound), so a plan meets the
evaluator's exact tails at its demand."""


class Sla(Frozen):
    """Latency targets."""

    ttft_p90_s: Annotated[float, Field(gt=0, le=MAX_TTFT_S)]
    ttft_p99_s: Annotated[float, Field(gt=0, le=MAX_TTFT_S)]
    tpot_ms: Annotated[float, Field(gt=0, le=MAX_TPOT_MS)]

    @model_validator(mode="after")
    def _ordered(self) -> Sla:
        if self.ttft_p99_s < self.ttft_p90_s:
            raise ValueError(
                f"ttft_p99_s ({self.ttft_p99_s:g}) must be >= ttft_p90_s ({self.ttft_p90_s:g})"
            )
        return self


class Search(Frozen):
    """Which instance sizes the planner may choose from."""

    gpus_per_instance: tuple[GpuCount, ...] | None = None
    """Explicit instance sizes; default: powers of two up to ``max_gpus_per_instance``."""
    max_gpus_per_instance: GpuCount = 64
    max_utilization: Annotated[float, Field(gt=0, lt=1)] = 0.9
    """Highest planned busy fraction of any pool (assumption: 10% headroom for bursts)."""
    max_link_utilization: Annotated[float, Field(gt=0, lt=1)] = 0.9
    """Highest planned utilization of a WAN link (assumption)."""
    max_gpus_per_pool: GpuCount = 1024
    """Most GPUs the planner puts in one pool (also bounded by datacenter limits)."""
    singular_max_output_tokens: tuple[Annotated[int, Field(ge=0)], ...] | None = None
    """Candidate singular cuts (0: no singular path); default: 0 and the two shortest
    output classes."""
    catch_up_above_tokens: tuple[Annotated[int, Field(ge=0)] | None, ...] = (None, 256, 0)
    """Candidate catch-up cuts on eager tokens (null: always one-shot; 0: always catch up)."""
    context_parallel: tuple[bool, ...] = (False, True)
    """Prefill layouts the planner may choose: ``false``, a prompt's attention on one
    attention group (data-parallel attention); ``true``, split over every attention group of
    the instance (context parallelism), where the layout has two or more."""
    relay_decode_on_prefill: tuple[bool, ...] = (False,)
    """Where the planner may run relay decode: ``false``, a pool of its own; ``true``, on
    the prefill instances, its tokens piggybacked on their chunked-prefill passes (relay
    decode must be allowed in the datacenter, and the layout without context parallelism).
    Only ``false`` by default: each hosting option's prefill counts depend on relay
    decode's load, which makes a max-BCR search several times slower."""
    handoff_chunk_tokens: Annotated[int, Field(ge=1)] = 64
    """Eager tokens per catch-up chunk."""
    bcr_plateau: Annotated[float, Field(gt=0, lt=1)] = 0.01
    """max BCR: the plan is the cheapest whose BCR is within this share of the best proven
    (BCR flattens as a fleet grows; the last percent is not worth its price)."""
    bcr_tolerance: Annotated[float, Field(gt=0, lt=1)] = 1e-4
    """max BCR: the search stops when no rate can beat the best plan found by more than this
    share; at most a tenth of ``bcr_plateau``."""

    @model_validator(mode="after")
    def _tolerance_within_plateau(self) -> Search:
        if self.bcr_tolerance > self.bcr_plateau / 10:
            raise ValueError(
                f"bcr_tolerance ({self.bcr_tolerance:g}) must be at most a tenth of "
                f"bcr_plateau ({self.bcr_plateau:g}): the search must prove the BCR bound "
                "more tightly than the plateau it cuts"
            )
        return self

    def sizes(self) -> tuple[int, ...]:
        if self.gpus_per_instance:
            return tuple(sorted(set(self.gpus_per_instance)))
        out, g = [], 1
        while g <= self.max_gpus_per_instance:
            out.append(g)
            g *= 2
        return tuple(out)


class SolverOptions(Frozen):
    """How the planner searches, and what bounds its work (``docs/milp.md``, "Work
    budgets"). The budgets count work, so the same scenario gives the same plan on any
    machine; the time limit is only a safety stop."""

    name: SolverName = "cbc"
    time_limit_s: Annotated[float, Field(gt=0, le=MAX_TIME_LIMIT_S)] = 600.0
    """Wall-clock safety stop for a whole solve (seconds). It never shapes an answer the
    budgets finish within: a search it stops reports ``time_limit`` (the answer may differ
    on a faster machine)."""
    mip_gap: Annotated[float, Field(ge=0, lt=1)] = 1e-6
    """Relative optimality gap each MILP is solved to (tight: Dinkelbach needs exact
    sub-problems)."""
    node_limit: Annotated[int, Field(ge=1, le=2**31 - 1)] = 100_000
    """Branch-and-bound nodes each MILP solve may take (CBC's ``maxNodes``, HiGHS's
    ``mip_max_nodes``); a solve that reaches it returns its best plan and gap
    (``work_limit``)."""
    rate_points: Annotated[int, Field(ge=1, le=1_000_000)] = 400
    """Rates a search may price: each minimum-cost point (a MILP, or a relaxation whose
    plan is optimal) and each relaxation probe of the max-BCR and max-capacity searches.
    A search that reaches it returns its best plan and gap (``work_limit``)."""


ENGINE_ROLE_KEYS = (*ROLES, "default")
"""The keys of ``engine:`` given per role."""


class EngineRoles(Frozen):
    """``engine:`` per role: each role's engine profile; a role not named takes ``default``,
    else the engine catalog's default."""

    prefill: Id | None = None
    """The prefill pools' engine profile."""
    relay_decode: Id | None = None
    """The relay-decode pools' engine profile."""
    main_decode: Id | None = None
    """The main-decode pools' engine profile."""
    default: Id | None = None
    """The engine of the roles not named here (default: the engine catalog's)."""

    @model_validator(mode="after")
    def _names_one(self) -> EngineRoles:
        if all(getattr(self, k) is None for k in ENGINE_ROLE_KEYS):
            raise ValueError(
                "an empty mapping: name an engine for a role (prefill, relay_decode, "
                "main_decode) or default, or give one name for every role"
            )
        return self

    def engine_for(self, role: Role, default: str) -> str:
        """``role``'s engine: its own, else ``default:``, else ``default`` (the catalog's)."""
        return getattr(self, role) or self.default or default


def _engine_form(value: Any) -> str:
    """Which form ``engine:`` is given in: one name, or a mapping of roles."""
    return "union:roles" if isinstance(value, dict | EngineRoles) else "union:name"


EngineChoice = Annotated[
    Annotated[Id, Tag("union:name")] | Annotated[EngineRoles, Tag("union:roles")],
    Discriminator(_engine_form),
]
"""``engine:``: one engine profile's name for every role, or a mapping of roles to names
(``EngineRoles``). The tags say which form failed; the loader leaves them out of a key's
path (``pddplan.io.validation``)."""


class CatalogPaths(Frozen):
    """Catalog files to use instead of the shipped ones (relative to the scenario file)."""

    hardware: Path | None = None
    models: Path | None = None
    engines: Path | None = None


class Scenario(Frozen):
    """A planning scenario (one YAML file)."""

    name: str
    description: str | None = None
    model: str
    kv_dtype: KvDtype | None = None
    weight_dtype: Dtype | None = None
    catalogs: CatalogPaths = CatalogPaths()
    datacenters: dict[Id, Datacenter] = Field(min_length=1)
    links: tuple[Link, ...] = ()
    workload: Workload
    workload_variants: tuple[WorkloadVariant, ...] | None = None
    """Other workloads the plan is judged on, each an overlay of ``workload``
    (``variant_scenarios``); each is ``must_meet`` or weighted."""
    horizon: Horizon | None = None
    """Demand over months and hours (a daily profile, growth, tranches) and how each GPU can
    be had over them (``pddplan.spec.horizon``); ``workload.arrival_rps`` is then the first
    month's peak hour. Left out of the scenario's JSON where absent, so that every file
    without one reads and writes as before."""
    sla: Sla
    search: Search = Search()
    objective: Objective = "min-cost"
    """``min-cost``: the cheapest fleet that serves the demand x (1 + ``headroom``);
    ``max-capacity``: the most SLA capacity ``budget_usd_per_hour`` buys; ``max-bcr``: the
    cheapest fleet within ``search.bcr_plateau`` of the best SLA capacity per dollar."""
    headroom: Annotated[float, Field(ge=0)] = 0.0
    """Demand growth to plan for: plans serve ``arrival_rps x (1 + headroom)`` within the
    SLA and the utilization caps (``docs/milp.md``)."""
    budget_usd_per_hour: PositiveUsd | None = None
    """The most a plan may cost per hour, for every objective: what ``max-capacity``
    spends, a ceiling on ``min-cost`` and ``max-bcr`` plans (one that binds is explained:
    the budget the cheapest plan needs)."""
    prices_usd_per_gpu_hour: dict[str, PositiveUsd] = Field(default_factory=dict)
    """Rent per GPU-hour by chip id, overriding (or filling in) the catalog's price."""
    gpu_purchase: dict[str, GpuPurchase] = Field(default_factory=dict)
    """Chips bought rather than rented, by chip id (a chip has one basis)."""
    electricity_usd_per_kwh: Usd | None = None
    """Power price for bought and owned GPUs (TDP x PUE)."""
    hosting_usd_per_gpu_hour: Usd = 0.0
    """Hosting per bought or owned GPU-hour, unless its chip's ``gpu_purchase`` says."""
    cache_tier_prices_usd_per_gb_month: dict[Literal["dram", "ssd"], Usd] = Field(
        default_factory=dict
    )
    """The decode-side cache tiers' price per GB-month, overriding the hardware catalog's
    ``cache_tiers`` (e.g. 0 for host DRAM a rented node's price already includes)."""
    md_cache: tuple[MdCacheOption, ...] | None = None
    """Decode-side cache sizes to choose from. Without it, MD hits come from the workload
    and the cache takes no HBM from running requests."""
    solver: SolverOptions = SolverOptions()
    engine: EngineChoice | None = None
    """The serving engine whose release the pass times assume (an engine profile of
    ``catalogs/engines.yaml``; default: the catalog's ``default``, a released engine's;
    ``ideal``: the hardware catalog's best-case figures): one name for every role, or per
    role (``{prefill: sglang, main_decode: trtllm, default: sglang}``: a role not named takes
    ``default``, else the catalog's). Each pool's pass times, knobs, error factors and launch
    limits are its role's engine's."""
    perf_quantile: Annotated[float, Field(gt=0, lt=1)] = 0.5
    """Plan at this quantile of the model's held-out error: prefill pass and decode step
    times are multiplied by the engine profile's measured/predicted ratio at this quantile
    over its median (0.5: the fit itself, no margin; 0.9: slower than 9 in 10 measured
    runs were against the model)."""
    calibration: CalibrationSpec = CalibrationSpec()

    @field_validator("engine", mode="before")
    @classmethod
    def _engine_shape(cls, value: Any) -> Any:
        if value is None or isinstance(value, str | dict | EngineRoles):
            return value
        raise ValueError(
            f"expected an engine's name (every role) or a mapping of roles to names "
            f"({', '.join(ENGINE_ROLE_KEYS)}), got {quote(value)}"
        )

    def role_engines(self, default: str) -> dict[Role, str]:
        """The engine profile each role's pass times assume: ``engine`` (one name, or the
        role's entry, its ``default:``, then ``default``); without one, ``ideal`` where
        ``calibration`` sets a fitted knob (a calibration that names no engine predates the
        profiles: it was fitted on the hardware catalog's figures, ``unnamed_fit_note``),
        else ``default`` (the catalog's)."""
        e = self.engine
        if isinstance(e, EngineRoles):
            return {r: e.engine_for(r, default) for r in ROLES}
        name = e if e is not None else IDEAL if self.calibration.fitted_knobs() else default
        return dict.fromkeys(ROLES, name)

    def roles_run(self) -> list[Role]:
        """The roles some datacenter allows, in ``ROLES`` order."""
        allowed = {r for dc in self.datacenters.values() for r in dc.roles}
        return [r for r in ROLES if r in allowed]

    def unnamed_fit_note(self) -> str | None:
        """Why the engine is ``ideal`` though the scenario names none (``engine_id``), as
        one line a command prints as a warning; None where that rule does not apply."""
        if self.engine is not None or not (knobs := self.calibration.fitted_knobs()):
            return None
        return (
            f"sets fitted knobs ({', '.join(knobs)}) but the scenario names no engine: read "
            f"against '{IDEAL}', the figures a calibration was fitted on before engine "
            "profiles; set engine: to the profile it was fitted on"
        )

    @model_serializer(mode="wrap")
    def _without_absent_horizon(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        """The scenario's JSON without ``horizon`` where it has none: plans, goldens and
        sweep journals of scenarios without a horizon stay byte for byte as they were."""
        data = handler(self)
        if self.horizon is None and isinstance(data, dict):
            data.pop("horizon", None)
        return data

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        problems = []
        for i, link in enumerate(self.links):
            for dc in link.between:
                if dc not in self.datacenters:
                    problems.append(
                        f"links[{i}].between names unknown datacenter '{dc}' "
                        f"(datacenters: {', '.join(self.datacenters)})"
                    )
        roles = {r for dc in self.datacenters.values() for r in dc.roles}
        for needed in ("prefill", "main_decode"):
            if needed not in roles:
                problems.append(f"no datacenter allows role '{needed}'")
        if not problems and not self._prefill_reaches_main_decode():
            problems.append(
                "no prefill datacenter is the same as, or linked to, a main_decode datacenter: "
                "add a link between them"
            )
        problems += self._md_cache_problems()
        both = sorted(set(self.prices_usd_per_gpu_hour) & set(self.gpu_purchase))
        if both:
            problems.append(
                f"chips {', '.join(both)} are in prices_usd_per_gpu_hour (rent) and in "
                "gpu_purchase (buy): give each chip one basis"
            )
        owned = any(dc.inventory for dc in self.datacenters.values())
        if (owned or self.gpu_purchase) and self.electricity_usd_per_kwh is None:
            problems.append(
                "electricity_usd_per_kwh is needed to price the running cost of "
                + ("owned inventory" if owned else "bought GPUs")
            )
        if self.objective == "max-capacity" and self.budget_usd_per_hour is None:
            problems.append("objective 'max-capacity' needs budget_usd_per_hour")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _md_cache_problems(self) -> list[str]:
        if self.md_cache is None:
            return []
        problems = []
        if len({o.measured for o in self.md_cache}) > 1:
            problems.append(
                "md_cache: give every option a measured hit (md_prefix_hit or md_hit), or "
                "none (tiers with the hit from the reuse curve), not a mix"
            )
        sizes = [o.label for o in self.md_cache]
        if len(set(sizes)) != len(sizes) or not sizes:
            problems.append(f"md_cache: give each size once, got {', '.join(sizes)}")
        w = self.workload
        for i, o in enumerate(self.md_cache):
            if o.md_prefix_hit is not None and w.prefix_hit is None:
                problems.append(
                    f"md_cache[{i}].md_prefix_hit needs a workload given as distributions; "
                    "give md_hit (one value per class) instead"
                )
            if o.md_hit is not None and w.classes is not None and len(o.md_hit) != len(w.classes):
                problems.append(
                    f"md_cache[{i}].md_hit has {len(o.md_hit)} values; the workload has "
                    f"{len(w.classes)} classes"
                )
        if w.trace is not None and w.trace.md_cache_tokens is not None:
            problems.append("md_cache gives the MD hit rates: drop workload.trace.md_cache_tokens")
        if w.md_prefix_hit is not None or any(c.md_hit is not None for c in w.classes or ()):
            problems.append(
                "md_cache gives the MD hit rates: drop workload.md_prefix_hit and the "
                "classes' md_hit"
            )
        return problems

    def _prefill_reaches_main_decode(self) -> bool:
        linked = {frozenset(link.between) for link in self.links}
        prefill = [d for d, dc in self.datacenters.items() if "prefill" in dc.roles]
        decode = [d for d, dc in self.datacenters.items() if "main_decode" in dc.roles]
        return any(p == d or frozenset((p, d)) in linked for p in prefill for d in decode)

    def chips_for(self, role: Role) -> list[tuple[str, str]]:
        """(datacenter, chip) pairs where ``role`` may run."""
        return [
            (dc_id, chip)
            for dc_id, dc in self.datacenters.items()
            if role in dc.roles
            for chip in (dc.role_chips or {}).get(role, dc.chips)
        ]


def variant_scenarios(scenario: Scenario) -> list[tuple[WorkloadVariant, Scenario]]:
    """Each of ``scenario``'s workload variants with the scenario that plans it alone: the
    same scenario with the variant's whole workload (``resolve_variant``), no variants, and
    the name ``SCENARIO/VARIANT``. Empty for a scenario without variants.

    Raises ``ValueError`` listing every problem (``variant_problems``, and variants that do
    not resolve to a valid workload or scenario); ``pddplan.io.scenario.load_scenario``
    reports the same problems with their lines, so a loaded scenario never raises here."""
    problems = [
        f"{fmt_loc(loc)}: {msg}" for loc, msg in variant_problems(scenario.workload_variants)
    ]
    out = []
    for i, v in enumerate(scenario.workload_variants or ()):
        try:
            out.append((v, _variant_scenario(scenario, v)))
        except ValueError as e:
            problems.append(f"workload_variants[{i}]: {e}")
    if problems:
        raise ValueError("; ".join(problems))
    return out


def _variant_scenario(scenario: Scenario, variant: WorkloadVariant) -> Scenario:
    workload = resolve_variant(scenario.workload, variant)
    fields = dict(scenario)
    fields.update(name=f"{scenario.name}/{variant.name}", workload=workload, workload_variants=None)
    try:
        return Scenario.model_validate(fields)
    except ValidationError as e:
        reasons = [
            str(err["msg"]).removeprefix("Value error, ") for err in e.errors(include_url=False)
        ]
        raise ValueError("; ".join(reasons)) from None


def scenario_json_schema() -> dict[str, Any]:
    """JSON Schema of the scenario format, for editors (``pddplan schema``)."""
    schema = with_field_docs(Scenario.model_json_schema(), Scenario)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pddplan scenario"
    return schema
