"""The planning problem: a validated scenario, the chip catalog and the model it serves, and
every table derived from them, computed once and kept on the problem.

Each table declares the inputs it is computed from (``TABLE_INPUTS``: scenario fields, by
dotted path, and the catalogs). ``Problem.derive`` makes a new problem from changed
scenario values and hands it every table whose inputs did not change, so that a sweep over
prices re-uses every table, a sweep over the demand (the workload's ``arrival_rps``
alone) every table but the counts (per rate: a point's rates are its own; a fleet's
capacity does not depend on the demand), and a sweep over the workload's shape the
instances. ``table_builds`` counts the entries each table computed.

Everything here is a pure function of the inputs; a problem pickles (its tables with it).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar, cast

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from pddplan import units
from pddplan.errors import InputError, WeightsDoNotFitError
from pddplan.model.admission import first_decode_step_s
from pddplan.model.colocation import HostPoint, at_chunk, host_point
from pddplan.model.instance import Instance, PrefillFigures, make_instance
from pddplan.model.kv import KvModel
from pddplan.model.md_cache import CacheChoice
from pddplan.model.md_cache import choices as cache_choices
from pddplan.model.numeric import Array
from pddplan.model.prefill_queue import pass_order
from pddplan.spec.calibration import Calibration, Phase, resolve_calibration
from pddplan.spec.engine import EngineCatalog, EngineProfile, chip_knobs
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.llm import ModelSpec
from pddplan.spec.scenario import Role, Scenario, WorkloadVariant, variant_scenarios
from pddplan.spec.source import Loc, SourceMap, fmt_loc
from pddplan.work import tally
from pddplan.workload.classes import RequestClass, md_caches, workload_classes
from pddplan.workload.hit_curve import RateBlend, ReuseCurve
from pddplan.workload.sessions import SessionOptions, reuse_top_rate, sampled_reuse

if TYPE_CHECKING:
    from pddplan.model.prefill_queue import PassOrder

T = TypeVar("T")

REUSE_GRID_FLOOR_RPS = 0.125
"""The lowest rate of the reuse grid (``Problem._reuse_grid``): a rate below it takes its
sample (at 0.125 req/s, about 120 requests over the sample's 16 turn gaps of a minute)."""
STEP_TABLE_EXACT = 64
"""``Problem.decode_steps`` holds every batch up to this one..."""
STEP_TABLE_POINTS = 400
"""...and this many batches spread geometrically above it (about 1% apart at 5,000)."""
NON_PHYSICAL = (
    "name",
    "description",
    "catalogs",
    "workload_variants",
    "horizon",
    "objective",
    "headroom",
    "budget_usd_per_hour",
    "prices_usd_per_gpu_hour",
    "gpu_purchase",
    "electricity_usd_per_kwh",
    "hosting_usd_per_gpu_hour",
    "cache_tier_prices_usd_per_gb_month",
    "solver",
    "links.tiers.usd_per_month",
    "links.tiers.usd_per_gb",
    "search.bcr_plateau",
    "search.bcr_tolerance",
)
"""The scenario fields no minimum count and no SLA capacity depends on: the names, the
prices, the budget, the objective and its search's tolerances, the headroom and the solver
(``catalogs``: the files' content is the ``hardware`` and ``model`` input;
``workload_variants``: each variant is its own problem, ``Problem.variants``; ``horizon``:
each period is, ``pddplan.horizon.period_scenario``). A dotted
entry leaves out one part of a field (``links:physical``, ``search:physical``). Declared
once: every other field is an input of the physical tables (``_PHYSICAL``), so a new field
is one unless it is listed here."""
_INSTANCE = (
    "hardware",
    "engines",
    "model",
    "engine",
    "perf_quantile",
    "calibration",
    "kv_dtype",
    "weight_dtype",
)
_PARTLY = tuple(sorted({f.split(".")[0] for f in NON_PHYSICAL if "." in f}))
"""The fields ``NON_PHYSICAL`` leaves out a part of (its dotted entries): an input as
``FIELD:physical``, the field without those parts."""
RATE_ONLY = ("arrival_rps",)
"""The workload's fields that set only how many requests come, not what they are: the
input ``workload:shape`` is the workload without them, so that the problems of a demand
sweep, of a horizon's periods and of rate-only variants share the request classes, the
pass-time tables, the reuse samples and the capacities (docs/sweeps.md)."""
SHAPE = "workload:shape"
_PHYSICAL = (
    "hardware",
    "engines",
    *(
        SHAPE if f == "workload" else f
        for f in Scenario.model_fields
        if f not in NON_PHYSICAL and f not in _PARTLY
    ),
    *(f"{f}:physical" for f in _PARTLY),
)
"""What minimum counts and SLA capacities are computed from: every input not
``NON_PHYSICAL`` (the catalogs' entries, each other scenario field, the workload without
its rate, the links without their tiers' prices, the search without max BCR's
tolerances)."""
TABLE_INPUTS: dict[str, tuple[str, ...]] = {
    "classes": (SHAPE,),
    "md_caches": (SHAPE, "md_cache", "hardware", "cache_tier_prices_usd_per_gb_month"),
    "reuse": (SHAPE, "sla"),
    "instances": _INSTANCE,
    "prefill": (*_INSTANCE, SHAPE, "sla.tpot_ms"),
    "passes": (*_INSTANCE, SHAPE, "sla.tpot_ms"),
    "hosts": (*_INSTANCE, SHAPE, "sla.tpot_ms"),
    "decode_points": (*_INSTANCE, SHAPE, "sla.tpot_ms"),
    "decode_steps": (*_INSTANCE, SHAPE, "sla.tpot_ms"),
    "extend_passes": (*_INSTANCE, SHAPE),
    # the demand too: a count table's entries are per rate, and a demand sweep's points plan
    # at rates of their own, so shared tables would only grow (about 12 MB a rate on the
    # README's scenario) where fresh ones are dropped with their point
    "counts": (*_PHYSICAL, "workload.arrival_rps"),
    "capacities": _PHYSICAL,
}
"""Each table and what it is computed from: ``hardware`` and ``model`` are the catalogs'
entries (``model`` with the scenario's field that names it), the rest scenario fields (a
dotted path names a field inside one; ``links:physical`` the links without their tiers'
prices). ``tests/test_problem.py`` records what each table reads while a solve fills it
and fails on a read not declared here."""


class InstanceKey(NamedTuple):
    """An instance layout: ``gpus`` x ``chip``, with context parallelism or not, at its
    attention's tensor-parallel width (None: the model's own, ``layout_for``), under the
    engine profile ``engine`` (its pool's role's)."""

    chip: str
    gpus: int
    context_parallel: bool = False
    attention_tp: int | None = None
    engine: str = ""


class PrefillKey(NamedTuple):
    """A prefill layout: an instance (``InstanceKey``), hosting relay decode or not."""

    chip: str
    gpus: int
    context_parallel: bool
    hosting: bool
    attention_tp: int | None = None
    engine: str = ""


class DecodeKey(NamedTuple):
    """A decode instance: ``gpus`` x ``chip``, ``reserve_gb_per_gpu`` of HBM held back (a
    decode-side cache's share), under the engine profile ``engine``."""

    chip: str
    gpus: int
    reserve_gb_per_gpu: float
    engine: str = ""


class ChipGpus(NamedTuple):
    """A decode instance's chip, GPUs and engine profile (its step tables)."""

    chip: str
    gpus: int
    engine: str = ""


@dataclass
class _Tables:
    """The derived tables, each a dict filled on demand (``TABLE_INPUTS`` names them)."""

    classes: dict[str, list[RequestClass]] = field(default_factory=dict)
    md_caches: dict[str, list[CacheChoice]] = field(default_factory=dict)
    reuse: dict[float, ReuseCurve] = field(default_factory=dict)
    """Keyed by the rate sampled at."""
    instances: dict[InstanceKey, Instance | InputError] = field(default_factory=dict)
    prefill: dict[PrefillKey, PrefillFigures] = field(default_factory=dict)
    passes: dict[PrefillKey, PassOrder] = field(default_factory=dict)
    hosts: dict[InstanceKey, tuple[HostPoint, Instance] | None] = field(default_factory=dict)
    decode_points: dict[DecodeKey, tuple[int, float]] = field(default_factory=dict)
    decode_steps: dict[ChipGpus, tuple[Array, Array]] = field(default_factory=dict)
    extend_passes: dict[ChipGpus, tuple[npt.NDArray[np.complex128], Array]] = field(
        default_factory=dict
    )
    counts: dict[Hashable, Any] = field(default_factory=dict)
    """The planner's minimum-count memos (``pddplan.plan.counts``), per space structure and
    rate."""
    capacities: dict[Hashable, Any] = field(default_factory=dict)
    """The evaluator's SLA capacities (``pddplan.evaluation.evaluator``), per fleet, routing
    and starting rate."""


@dataclass(frozen=True)
class ClassArrays:
    """The request classes as arrays, in class order."""

    w: Array
    """Share of requests."""
    inp: Array
    """Input tokens."""
    out: Array
    """Output tokens."""
    hit: Array
    """Prefill-side prefix hit rate."""
    out_points: Array
    """Classes x points: output lengths spread over each class's slice (``RequestClass.
    output_points``; the class's length where it has none), their row means ``out``."""
    inp_points: Array
    """Classes x points: input lengths spread over each class's slice (``RequestClass.
    input_points``; the class's length where it has none), their row means ``inp``."""
    md_hit: Array
    """Decode-side hit rate of the workload (before any decode-side cache choice)."""
    md_hit_points: Array
    """Classes x points: ``md_hit`` spread over each class's hit slice, row means
    ``md_hit``."""


def _points(rows: list[tuple[tuple[float, ...], float]]) -> Array:
    """Classes x points from each class's (points, value): its points (repeated to the
    widest), or its value where it has none."""
    width = max((len(p) for p, _ in rows), default=1) or 1
    return np.array([np.resize(np.array(p or (v,), dtype=float), width) for p, v in rows])


class Problem:
    """A scenario with its catalogs (see the module docstring)."""

    def __init__(
        self,
        scenario: Scenario,
        hardware: HardwareCatalog,
        model: ModelSpec,
        *,
        engines: EngineCatalog,
        source: SourceMap | None = None,
    ) -> None:
        if model.id != scenario.model:
            raise ValueError(f"the scenario serves {scenario.model}, not {model.id}")
        self.scenario, self.hardware, self.model = scenario, hardware, model
        self.engines = engines
        """The engine profiles (``catalogs/engines.yaml``)."""
        self.source = source
        """The scenario file and the line of each key (None for a problem built in code)."""
        self._tables = _Tables()
        self.table_builds: Counter[str] = Counter()
        """Entries computed per table by this problem (not those it inherited)."""

    # --- deriving ---------------------------------------------------------------------------
    def derive(self, changes: Mapping[str, Any]) -> Problem:
        """A problem whose scenario has ``changes`` applied (dotted paths, e.g.
        ``{"prices_usd_per_gpu_hour.h200-sxm": 3.9, "links[0].rtt_ms": 40}``), validated
        again; it shares every table whose inputs are unchanged."""
        data = self.scenario.model_dump(mode="json")
        for path, value in changes.items():
            try:
                set_path(data, path, value)
            except (KeyError, IndexError, TypeError):
                raise InputError(f"scenario {self.scenario.name} has no {path} to change") from None
        try:
            scenario = Scenario.model_validate(data)
        except ValueError as e:
            raise InputError(f"scenario {self.scenario.name} with {dict(changes)}: {e}") from None
        return self.with_scenario(scenario)

    def with_scenario(self, scenario: Scenario) -> Problem:
        """A problem for ``scenario`` (same catalogs), sharing every table whose inputs are
        the same in both."""
        new = Problem(scenario, self.hardware, self.model, engines=self.engines, source=self.source)
        for name, inputs in TABLE_INPUTS.items():
            if all(_same(self._input(k), new._input(k)) for k in inputs):
                setattr(new._tables, name, getattr(self._tables, name))
        return new

    def variants(self) -> list[tuple[WorkloadVariant, Problem]]:
        """Each workload variant with the problem that plans it alone (its scenario from
        ``variant_scenarios``), sharing every table that does not depend on the workload."""
        return [(v, self.with_scenario(s)) for v, s in variant_scenarios(self.scenario)]

    def _input(self, name: str) -> Any:
        if name == "hardware":
            return self.hardware
        if name == "model":
            return self.model
        if name == "engines":
            return self.engines
        if name == SHAPE:
            data = self.scenario.workload.model_dump(mode="json")
            for key in RATE_ONLY:
                data.pop(key, None)
            return data
        if name.endswith(":physical"):
            field = name.removesuffix(":physical")
            data = self.scenario.model_dump(mode="json", include={field})[field]
            for path in NON_PHYSICAL:
                if path.startswith(field + "."):
                    _drop(data, path.split(".")[1:])
            return data
        value: Any = self.scenario
        for part in name.split("."):
            value = getattr(value, part)
        return value

    @contextmanager
    def _building(self, table: str) -> Iterator[None]:
        """Around the computing of one entry (or one batch of entries) of ``table``: counts
        it (``table_builds``). Every table is filled inside one, so that
        ``tests/test_problem.py`` can record what each table reads of the scenario."""
        self.table_builds[table] += 1
        yield

    def memo(
        self, table: Literal["counts", "capacities"], key: Hashable, make: Callable[[], T]
    ) -> T:
        """The entry ``key`` of a table the planner or the evaluator fills (``make()`` the
        first time). These tables depend on no price (``_PHYSICAL``), so every problem
        derived from this one with the same physical inputs shares them: a sweep over
        prices counts and bisects capacities once."""
        found = getattr(self._tables, table)
        if key not in found:
            with self._building(table):
                found[key] = make()
        return cast(T, found[key])

    # --- the workload -----------------------------------------------------------------------
    @property
    def classes(self) -> list[RequestClass]:
        """The workload's request classes (``pddplan.workload.classes``)."""
        table = self._tables.classes
        if "classes" not in table:
            with self._building("classes"):
                table["classes"] = workload_classes(self.scenario.workload)
        return table["classes"]

    @cached_property
    def arrays(self) -> ClassArrays:
        c = self.classes
        return ClassArrays(
            np.array([x.weight for x in c]),
            np.array([x.input_tokens for x in c]),
            np.array([x.output_tokens for x in c]),
            np.array([x.p_hit for x in c]),
            _points([(x.output_points, x.output_tokens) for x in c]),
            _points([(x.input_points, x.input_tokens) for x in c]),
            np.array([x.md_hit for x in c]),
            _points([(x.md_hit_points, x.md_hit) for x in c]),
        )

    @property
    def md_caches(self) -> list[CacheChoice]:
        """The decode-side cache choices (``pddplan.model.md_cache``)."""
        table = self._tables.md_caches
        if "md_caches" not in table:
            with self._building("md_caches"):
                s = self.scenario
                if s.md_cache is None or s.md_cache[0].measured:  # options are of one form
                    measured = [h for _, h in md_caches(s)]
                else:
                    measured = [[] for _ in s.md_cache]
                table["md_caches"] = cache_choices(
                    s.md_cache,
                    self.arrays.hit,
                    measured,
                    self.hardware,
                    s.cache_tier_prices_usd_per_gb_month,
                )
        return table["md_caches"]

    def md_hits(self, gb_per_gpu: float | None) -> Array:
        """Each class's MD hit rate with ``gb_per_gpu`` reserved for the decode-side cache
        (one of the scenario's measured-hit ``md_cache`` sizes; None without options)."""
        return next(c.hits for c in self.md_caches if c.reserve_gb == gb_per_gpu)

    @property
    def reuse(self) -> ReuseCurve:
        """How soon the workload's contexts come back at the scenario's rate: measured on
        the session generator's sample of it (``pddplan.workload.sessions.sampled_reuse``)."""
        return self.reuse_at(self.scenario.workload.arrival_rps or 1.0)

    @cached_property
    def _reuse_top(self) -> float:
        """The highest rate ``sampled_reuse`` samples at (it depends on the workload's
        shape, not its rate)."""
        s = self.scenario
        options = SessionOptions(
            rate_rps=1.0, ready_after_s=s.sla.ttft_p90_s, tpot_s=s.sla.tpot_ms * units.MS
        )
        return reuse_top_rate(s.workload, options)

    def _reuse_grid(self, rate_rps: float) -> tuple[float, float, float]:
        """The grid rates around ``rate_rps`` (2^k req/s, from ``REUSE_GRID_FLOOR_RPS`` up to
        the highest ``sampled_reuse`` samples at) and its place between them in log rate:
        (below, above, 0 to 1). The grid is the same whatever the scenario's rate, so a
        fleet's figures at a rate do not depend on the demand it is planned for: the
        problems of a demand sweep, of a horizon's periods and of rate-only variants share
        the samples and the capacities."""
        top = self._reuse_top
        if rate_rps >= top:  # the highest sample stands for every rate above it
            return top, top, 0.0
        rate = max(rate_rps, REUSE_GRID_FLOOR_RPS)
        k = math.floor(math.log2(rate) + 1e-9)  # a rate a rounding below 2^k is on it
        low, high = (min(2.0**j, top) for j in (k, k + 1))
        weight = math.log(rate / low) / math.log(high / low) if high > low else 0.0
        # on a grid rate (to a rounding): its sample alone, no neighbour sampled for nothing
        return low, high, 0.0 if weight < 1e-9 else min(1.0, weight)

    def _reuse_sample(self, rate_rps: float) -> ReuseCurve:
        table = self._tables.reuse
        if rate_rps not in table:
            with self._building("reuse"):
                tally("reuse_samples")
                s = self.scenario
                options = SessionOptions(
                    rate_rps=rate_rps,
                    ready_after_s=s.sla.ttft_p90_s,
                    tpot_s=s.sla.tpot_ms * units.MS,
                )
                table[rate_rps] = sampled_reuse(s.workload, options)
        return table[rate_rps]

    def reuse_at(self, rate_rps: float) -> ReuseCurve:
        """The reuse curve sampled at the grid rate at or below ``rate_rps`` (2^k req/s,
        ``_reuse_grid``; below the grid's floor the floor's, above its top the top's): its
        reuse ages are at least those at ``rate_rps`` (but below the floor), since
        ages shorten as the rate grows (``sampled_reuse``), so a cache sized on it keeps at
        least its share. What the planner sizes caches with."""
        return self._reuse_sample(self._reuse_grid(rate_rps)[0])

    def reuse_between(self, rate_rps: float) -> RateBlend:
        """The hit shares at ``rate_rps``: the samples at the grid rates around it,
        interpolated in log rate. What the evaluator scores a fleet's cache with."""
        low, high, weight = self._reuse_grid(rate_rps)
        upper = self._reuse_sample(high) if weight > 0 else self._reuse_sample(low)
        return RateBlend(self._reuse_sample(low), upper, weight)

    @cached_property
    def decode_context_tokens(self) -> float:
        """Decode's operating context: the token-weighted mean context over the output,
        ``sum w (input + output / 2) output / sum w output``."""
        a = self.arrays
        return float(a.w @ ((a.inp + a.out / 2) * a.out) / (a.w @ a.out))

    @cached_property
    def output_tokens_per_request(self) -> float:
        a = self.arrays
        return float(a.w @ a.out)

    # --- the model on the chips -------------------------------------------------------------
    @cached_property
    def kv(self) -> KvModel:
        """The model's KV cache at the scenario's KV dtype."""
        return KvModel(self.model, self.scenario.kv_dtype or self.model.kv_dtype)

    @cached_property
    def role_engines(self) -> dict[Role, EngineProfile]:
        """Each role's engine profile: the scenario's ``engine`` (one name, or per role), or
        the catalog's default (``ideal`` for a calibration that names none:
        ``Scenario.role_engines``). A pool's pass times, knobs, error factors and launch
        limits are its role's engine's."""
        ids = self.scenario.role_engines(self.engines.default)
        return {role: self.engines.engines[name] for role, name in ids.items()}

    def engine_for(self, role: Role | None) -> EngineProfile:
        """``role``'s engine profile; None: the one every role runs (``engine``)."""
        return self.engine if role is None else self.role_engines[role]

    @cached_property
    def mixed(self) -> bool:
        """Whether the roles run different engines."""
        return len({e.id for e in self.role_engines.values()}) > 1

    @property
    def engine(self) -> EngineProfile:
        """The engine profile every role's pass times assume; ``ValueError`` where the
        scenario gives the roles different engines (``engine_for`` a role then)."""
        engines = self.role_engines
        if self.mixed:
            raise ValueError(
                f"scenario {self.scenario.name} runs an engine per role ({self.engine_label}): "
                "ask for one role's (engine_for)"
            )
        return engines["prefill"]

    @property
    def engine_label(self) -> str:
        """The engines as ``--engine`` takes them: one name where every role runs it, else
        ``prefill=A,relay_decode=B,main_decode=C``."""
        engines = self.role_engines
        if not self.mixed:
            return engines["prefill"].id
        return ",".join(f"{role}={e.id}" for role, e in engines.items())

    @property
    def engine_text(self) -> str:
        """The engines in words: one name, or ``sglang for prefill and relay_decode, ideal
        for main_decode``."""
        engines = self.role_engines
        if not self.mixed:
            return engines["prefill"].id
        roles: dict[str, list[str]] = {}
        for role, engine in engines.items():
            roles.setdefault(engine.id, []).append(role)
        return ", ".join(f"{e} for {' and '.join(rs)}" for e, rs in roles.items())

    def warnings(self) -> list[str]:
        """What a command should say about how it reads the scenario, each one located
        line: a calibration that names no engine is read against ``ideal``
        (``Scenario.unnamed_fit_note``)."""
        note = self.scenario.unnamed_fit_note()
        return [self.located(("calibration",), note)] if note else []

    def time_factors(self, role: Role | None = None) -> tuple[float, float]:
        """(prefill, decode) pass-time factors of ``role``'s pools (None: every role's, one
        engine) at the scenario's ``perf_quantile``: from the calibration's own error table
        where it has one for the phase (``CalibrationSpec.error``, a fit to the user's
        points), else the role's engine profile's."""
        q = self.scenario.perf_quantile
        own = self.scenario.calibration.error
        engine = self.engine_for(role)

        def factor(phase: Phase) -> float:
            if q == 0.5:
                return 1.0
            return own[phase].factor(q) if phase in own else engine.time_factor(phase, q)

        return factor("prefill"), factor("decode")

    def engine_summary(self) -> dict[str, Any]:
        """The engine profile and error quantile the pass times assume, as reports and plan
        files carry them (so later commands on a plan assume the same), and per phase
        whose error the factor comes from (``calibration`` or ``engine``). Where the roles
        run different engines: ``id`` is ``--engine``'s form of them
        (``prefill=sglang,relay_decode=sglang,main_decode=ideal``), ``label`` the same in
        words (``engine_text``), ``name`` and ``version``
        name each with its roles, ``time_factors`` are the prefill pool's prefill factor and
        the main-decode pool's decode factor, and ``roles`` gives each role's engine and
        factors."""
        own = self.scenario.calibration.error
        out: dict[str, Any] = {}
        engines = self.role_engines
        if not self.mixed:
            engine = engines["prefill"]
            out.update(id=engine.id, name=engine.name, version=engine.version)
        else:
            out.update(
                id=self.engine_label,
                label=self.engine_text,
                name=_by_engine(engines, lambda e: e.name),
                version=_by_engine(engines, lambda e: e.version),
            )
        prefill, decode = self.time_factors("prefill")[0], self.time_factors("main_decode")[1]
        out.update(
            perf_quantile=self.scenario.perf_quantile,
            time_factors={"prefill": prefill, "decode": decode},
            error_from={
                phase: "calibration" if phase in own else "engine"
                for phase in ("prefill", "decode")
            },
        )
        if self.mixed:
            out["roles"] = {
                role: {
                    "id": e.id,
                    "name": e.name,
                    "version": e.version,
                    "time_factors": dict(
                        zip(("prefill", "decode"), self.time_factors(role), strict=True)
                    ),
                }
                for role, e in engines.items()
            }
        return out

    def calibration(self, chip: str, role: Role | None = None) -> Calibration:
        """``chip``'s efficiency factors and knobs under ``role``'s engine (None: the one
        every role runs): catalog defaults, the engine profile's knobs for its family,
        scenario overrides, and the pass-time factors at the scenario's ``perf_quantile``.
        ``InputError`` where the engine has no profile for the chip's family."""
        try:
            engine = chip_knobs(self.engine_for(role), self.hardware, chip)
        except ValueError as e:
            raise InputError(str(e)) from None
        try:
            return resolve_calibration(
                self.hardware,
                chip,
                self.scenario.calibration,
                engine=engine,
                time_factors=self.time_factors(role),
            )
        except ValidationError as e:  # knobs that are each valid but not together
            reason = "; ".join(str(x["msg"]).removeprefix("Value error, ") for x in e.errors())
            loc: Loc = ("calibration", "per_chip", chip)
            if chip not in self.scenario.calibration.per_chip:
                loc = ("calibration", "default")
            raise InputError(self.located(loc, f"for {chip}: {reason}")) from None

    def instance(
        self,
        chip: str,
        gpus: int,
        context_parallel: bool = False,
        attention_tp: int | None = None,
        *,
        role: Role | None = None,
    ) -> Instance:
        """The model on ``gpus`` GPUs of ``chip`` (with ``context_parallel``: each prompt's
        attention split over the attention groups; ``attention_tp``: its attention
        tensor-parallel over that many GPUs, ``layout_for``) under ``role``'s engine (None:
        the one every role runs); ``WeightsDoNotFitError`` when they cannot hold its
        weights, ``InputError`` for context parallelism on a layout with one attention group
        or an attention width that does not divide ``gpus``."""
        table = self._tables.instances
        engine = self.engine_for(role).id
        key = InstanceKey(chip, gpus, context_parallel, attention_tp, engine)
        if key not in table:
            with self._building("instances"):
                s = self.scenario
                try:
                    table[key] = make_instance(
                        self.model,
                        self.hardware.chips[chip],
                        gpus,
                        self.calibration(chip, role),
                        kv_dtype=s.kv_dtype,
                        weight_dtype=s.weight_dtype,
                        context_parallel=context_parallel,
                        attention_tp=attention_tp,
                    )
                except WeightsDoNotFitError as e:
                    table[key] = e
                except ValueError as e:  # context parallelism with nothing to split over
                    table[key] = InputError(f"{gpus} x {chip}: {e}")
        found = table[key]
        if isinstance(found, WeightsDoNotFitError):
            raise WeightsDoNotFitError(found.problems)
        if isinstance(found, InputError):
            raise InputError(found.problems)
        return found

    def fits(self, chip: str, gpus: int, *, role: Role | None = None) -> bool:
        """Whether ``gpus`` GPUs of ``chip`` hold the model's weights under ``role``'s
        engine."""
        try:
            self.instance(chip, gpus, role=role)
        except WeightsDoNotFitError:
            return False
        return True

    def prefill_figures(
        self,
        chip: str,
        gpus: int,
        context_parallel: bool = False,
        hosting: bool = False,
        attention_tp: int | None = None,
    ) -> PrefillFigures:
        """Per class, on ``gpus`` x ``chip`` under the prefill role's engine: prefill
        latency alone and service time, and every pass (``Instance.prefill_figures``); with
        ``hosting``, at the chunk a host of relay decode runs (``host_point``), before the
        hosted tokens' stretch."""
        table = self._tables.prefill
        engine = self.engine_for("prefill").id
        key = PrefillKey(chip, gpus, context_parallel, hosting, attention_tp, engine)
        if key not in table:
            with self._building("prefill"):
                a = self.arrays
                inst = (
                    self.host_instance(chip, gpus, context_parallel)
                    if hosting
                    else self.instance(chip, gpus, context_parallel, attention_tp, role="prefill")
                )
                table[key] = inst.prefill_figures(a.inp, a.hit)
        return table[key]

    def pass_order(
        self,
        chip: str,
        gpus: int,
        context_parallel: bool = False,
        hosting: bool = False,
        attention_tp: int | None = None,
    ) -> PassOrder:
        """The prefill passes on ``gpus`` x ``chip`` in the order ``loaded_prefill_latency``
        needs them."""
        table = self._tables.passes
        engine = self.engine_for("prefill").id
        key = PrefillKey(chip, gpus, context_parallel, hosting, attention_tp, engine)
        if key not in table:
            with self._building("passes"):
                figures = self.prefill_figures(chip, gpus, context_parallel, hosting, attention_tp)
                table[key] = pass_order(figures, self.arrays.w)
        return table[key]

    def host_point(self, chip: str, gpus: int, context_parallel: bool = False) -> HostPoint | None:
        """How a prefill instance of ``gpus`` x ``chip`` (the prefill role's engine) hosts
        relay decode at ``decode_context_tokens`` under the TPOT bound
        (``pddplan.model.colocation``); None when it cannot."""
        found = self._host(chip, gpus, context_parallel)
        return found[0] if found is not None else None

    def host_instance(self, chip: str, gpus: int, context_parallel: bool = False) -> Instance:
        """The prefill instance at the chunk it runs while hosting relay decode
        (``ValueError`` where it cannot host)."""
        found = self._host(chip, gpus, context_parallel)
        if found is None:
            raise ValueError(f"{gpus} x {chip} cannot host relay decode")
        return found[1]

    def _host(
        self, chip: str, gpus: int, context_parallel: bool
    ) -> tuple[HostPoint, Instance] | None:
        table = self._tables.hosts
        key = InstanceKey(chip, gpus, context_parallel, engine=self.engine_for("prefill").id)
        if key not in table:
            with self._building("hosts"):
                inst = self.instance(chip, gpus, context_parallel, role="prefill")
                point = host_point(
                    inst,
                    self.decode_context_tokens,
                    float(self.arrays.inp.max()),
                    self.scenario.sla.tpot_ms * units.MS,
                )
                table[key] = None if point is None else (point, at_chunk(inst, point.chunk_tokens))
        return table[key]

    def decode_point(
        self,
        chip: str,
        gpus: int,
        reserve_gb_per_gpu: float = 0.0,
        *,
        role: Role | None = None,
    ) -> tuple[int, float]:
        """Decode's operating point on ``gpus`` x ``chip`` under ``role``'s engine with
        ``reserve_gb_per_gpu`` of HBM held back (the decode-side cache): the largest batch
        meeting the TPOT bound at ``decode_context_tokens``, and its step seconds (batch 0:
        none fits; the step is then batch 1's)."""
        table = self._tables.decode_points
        key = DecodeKey(chip, gpus, reserve_gb_per_gpu, self.engine_for(role).id)
        if key not in table:
            with self._building("decode_points"):
                inst, ctx = self.instance(chip, gpus, role=role), self.decode_context_tokens
                reserve = reserve_gb_per_gpu * units.GB * gpus
                tpot_s = self.scenario.sla.tpot_ms * units.MS
                batch = inst.max_batch(ctx, tpot_s=tpot_s, reserved_bytes=reserve)
                table[key] = (batch, inst.decode_step_s(max(batch, 1), ctx))
        return table[key]

    def first_step_s(self, chip: str, gpus: int, reserve_gb_per_gpu: float = 0.0) -> float:
        """Main decode's first step on ``gpus`` x ``chip`` (``first_decode_step_s``) at its
        operating point with ``reserve_gb_per_gpu`` held back, at the utilization cap."""
        batch, step = self.decode_point(chip, gpus, reserve_gb_per_gpu, role="main_decode")
        return first_decode_step_s(
            batch,
            step,
            self.decode_steps(chip, gpus, role="main_decode"),
            self.scenario.search.max_utilization,
        )

    def decode_steps(
        self, chip: str, gpus: int, *, role: Role | None = None
    ) -> tuple[Array, Array]:
        """Decode step seconds on ``gpus`` x ``chip`` under ``role``'s engine at batches
        from 1 to its largest
        (``decode_point``, at least 1), at ``decode_context_tokens``: relay decode's pace
        at the batch it runs (``pddplan.model.relay``), as (batches, steps). Every batch up
        to ``STEP_TABLE_EXACT``, then about 1% apart (the step is a smooth, piecewise
        function of the batch; the evaluator and the planner read the same table)."""
        table = self._tables.decode_steps
        key = ChipGpus(chip, gpus, self.engine_for(role).id)
        if key not in table:
            with self._building("decode_steps"):
                inst, ctx = self.instance(chip, gpus, role=role), self.decode_context_tokens
                largest = max(self.decode_point(chip, gpus, role=role)[0], 1)
                batches = np.arange(1, min(largest, STEP_TABLE_EXACT) + 1)
                if largest > STEP_TABLE_EXACT:
                    more = np.geomspace(STEP_TABLE_EXACT, largest, STEP_TABLE_POINTS)
                    batches = np.unique(np.concatenate([batches, np.rint(more).astype(int)]))
                steps = np.array([inst.decode_step_s(int(b), ctx) for b in batches])
                table[key] = (batches.astype(float), steps)
        return table[key]

    def extend_pass_s(self, chip: str, gpus: int, tokens: Array, k: npt.NDArray[np.intp]) -> Array:
        """Seconds of ``gpus`` x ``chip``'s pass over ``tokens`` new tokens on top of classes
        ``k``'s inputs under main decode's engine: an MD handoff's extend step. Kept per
        (class, tokens): the eager
        tokens behind it come in whole tokens (or a class's whole output), so the planner's
        counts and most capacity-search rates repeat pairs already priced."""
        tokens = np.asarray(tokens, dtype=float)
        k = np.asarray(k, dtype=np.intp)
        table = self._tables.extend_passes
        key = ChipGpus(chip, gpus, self.engine_for("main_decode").id)
        known, seconds = table.get(key, (np.zeros(0, complex), np.zeros(0)))
        # a (class, tokens) pair as one complex number: unique and sorted lexicographically
        keys, where = np.unique(k + 1j * tokens, return_inverse=True)
        at = np.minimum(np.searchsorted(known, keys), max(len(known) - 1, 0))
        found = known[at] == keys if len(known) else np.zeros(len(keys), dtype=bool)
        if not found.all():
            with self._building("extend_passes"):
                new = keys[~found]
                priced = self.instance(chip, gpus, role="main_decode").prefill_pass_s(
                    new.imag, self.arrays.inp[new.real.astype(np.intp)]
                )
                known = np.concatenate([known, new])
                seconds = np.concatenate([seconds, np.asarray(priced, dtype=float)])
                order = np.argsort(known, kind="stable")
                known, seconds = known[order], seconds[order]
                table[key] = (known, seconds)
                at = np.searchsorted(known, keys)
        return cast(Array, seconds[at][where.ravel()].reshape(tokens.shape))

    def located(self, loc: Loc, message: str) -> str:
        """``message`` about the scenario's key ``loc``, with its file and line when known."""
        return self._located(loc, message)

    def _located(self, loc: Loc, message: str) -> str:
        if self.source is not None:
            return self.source.problem(loc, message)
        return f"scenario {self.scenario.name}: {fmt_loc(loc)}: {message}"


def _by_engine(engines: Mapping[Role, EngineProfile], part: Callable[[EngineProfile], str]) -> str:
    """``part`` of each engine with the roles that run it: ``SGLang (prefill, relay_decode);
    ideal (main_decode)``."""
    roles: dict[str, list[str]] = {}
    for role, engine in engines.items():
        roles.setdefault(part(engine), []).append(role)
    return "; ".join(f"{text} ({', '.join(rs)})" for text, rs in roles.items())


def _drop(data: Any, keys: list[str]) -> None:
    """Remove the dotted path ``keys`` from plain data, in every item of a list on the way
    (``tiers.usd_per_month`` from each of a link's tiers)."""
    if isinstance(data, list):
        for item in data:
            _drop(item, keys)
    elif isinstance(data, dict) and keys[0] in data:
        if len(keys) == 1:
            del data[keys[0]]
        else:
            _drop(data[keys[0]], keys[1:])


def _same(a: Any, b: Any) -> bool:
    return a is b or a == b


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def set_path(data: Any, path: str, value: Any) -> None:
    """Set the value at a dotted path of plain data (``links[0].rtt_ms``); the last key may
    be new in a mapping. ``KeyError``/``IndexError`` name what does not exist."""
    parts: list[str | int] = [int(i) if i else key for key, i in _PART.findall(path)]
    if not parts:
        raise KeyError(path)
    node = data
    for part in parts[:-1]:
        node = node[part]
    last = parts[-1]
    if isinstance(node, dict):
        node[last] = value
        return
    if not (isinstance(node, list) and isinstance(last, int)):
        raise KeyError(f"{path}: {type(node).__name__} has no key {last!r}")
    node[last] = value
