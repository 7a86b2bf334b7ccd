"""Engine profiles: what a serving engine's release delivers, as the model's knobs per chip
family, and the model's measured error with it (``catalogs/engines.yaml``).

A chip's knobs resolve as: its family's ``efficiency_defaults`` (the hardware catalog),
then the engine profile's entry for that family, then the scenario's ``calibration``.
``ideal`` overrides nothing: the catalog's best-case figures, as pddplan gave them before
it knew engines.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Any

from pydantic import Field, model_validator

from pddplan.spec.base import Frozen
from pddplan.spec.calibration import CalibrationOverride, Phase, PhaseError
from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.llm import AttentionKind

EVERY = "*"
"""The family key of a profile that covers every family (``families: any``)."""
IDEAL = "ideal"
"""The profile that keeps the hardware catalog's figures (no engine's overheads)."""


RELAY_ON_PREFILL = "relay decode on prefill GPUs"
"""What no released engine launches (``LaunchLimits.relay_decode_on_prefill``)."""
RELAY_ON_OTHER_ENGINE = "relay decode on prefill GPUs of another engine"
"""Why relay decode is not hosted on prefill instances where the two roles run different
engines (an instance runs one)."""
DP_OVER_TP = "data-parallel attention over tensor-parallel groups"
"""Why ``LaunchLimits.attention_groups`` refuses a layout."""
HANDOFF_PAIRS: tuple[tuple[str, str], ...] = (
    ("prefill", "relay_decode"),
    ("prefill", "main_decode"),
    ("relay_decode", "main_decode"),
)
"""The roles that hand a request's KV cache over, giver first: prefill to either decode
pool, relay decode to main decode (``handoff_problems``)."""


class LaunchLimits(Frozen):
    """What an engine's release can launch of the layouts pddplan plans, so that a plan made
    with its pass times is one it can run (docs/catalogs.md#what-an-engine-can-launch).
    The defaults launch everything (``ideal``)."""

    release: str = "-"
    """The release whose source these limits were read from."""
    relay_decode_on_prefill: bool = True
    """Whether a prefill instance can run relay decode's tokens in its own passes."""
    prefill_context_parallel: bool = True
    """Whether it splits a prompt's attention by context over an instance's ranks at all."""
    context_parallel_max_gpus: dict[AttentionKind, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict
    )
    """Per attention kind, the most GPUs an instance may have and still split a prompt's
    attention over its ranks (prefill context parallelism); a kind not listed: no limit."""
    attention_dp_over_tp: bool = True
    """Whether its data-parallel attention groups may each be tensor-parallel over several
    GPUs (``DP2xTP8``); False: one GPU per attention rank, or one group over them all."""
    kv_handoff_with: tuple[str, ...] | None = None
    """The other engines whose instances can take a request's KV cache from this release's
    instances, or hand one to them (prefill to decode, relay decode to main decode), so that
    a scenario may give their roles different engines; None: any engine (a profile that is no
    release, ``ideal``: a what-if). Each release's disaggregation speaks only its own
    handshake today, so each lists none (docs/catalogs.md#one-engine-per-role)."""
    sources: dict[str, str] = Field(default_factory=dict)
    """Each limit's source (the file and the check that enforces it)."""

    @model_validator(mode="after")
    def _every_limit_is_sourced(self) -> LaunchLimits:
        said = {
            name
            for name in (
                "relay_decode_on_prefill",
                "prefill_context_parallel",
                "attention_dp_over_tp",
            )
            if not getattr(self, name)
        }
        if self.context_parallel_max_gpus:
            said.add("context_parallel_max_gpus")
        if self.kv_handoff_with is not None:
            said.add("kv_handoff_with")
        if missing := sorted(said - set(self.sources)):
            raise ValueError(f"launch.sources is missing a citation for: {', '.join(missing)}")
        return self

    def context_parallel(self, attention: AttentionKind, gpus: int) -> str | None:
        """Why an instance of ``gpus`` GPUs of a model with ``attention`` cannot run
        context parallelism under this release (None: it can)."""
        if not self.prefill_context_parallel:
            return "prefill context parallelism"
        most = self.context_parallel_max_gpus.get(attention)
        if most is None or gpus <= most:
            return None
        return f"context parallelism over more than {most} GPUs for {attention} attention"

    def hands_kv_to(self, engine: str) -> bool:
        """Whether this release's instances exchange a request's KV cache with ``engine``'s
        (another engine's id)."""
        return self.kv_handoff_with is None or engine in self.kv_handoff_with

    def attention_groups(self, gpus: int, attention_tp: int) -> str | None:
        """Why ``gpus`` GPUs in data-parallel attention groups of ``attention_tp`` GPUs each
        cannot be launched (None: they can)."""
        if self.attention_dp_over_tp or attention_tp in (1, gpus):
            return None
        return DP_OVER_TP


class EngineProfile(Frozen):
    """One engine's release: the knobs it delivers per chip family, their sources, and the
    model's held-out error with them."""

    id: str
    name: str
    version: str
    """The release the knobs describe (``-`` for ``ideal``)."""
    families: dict[str, CalibrationOverride]
    """Per chip family, the knobs that differ from the hardware catalog's defaults. The file
    may say ``families: any``: every family, with none changed (``ideal``; held as the one
    family ``EVERY``)."""
    sources: dict[str, str] = Field(default_factory=dict)
    """``family.knob`` (or ``knob`` for every family) -> where its value comes from."""
    error: dict[Phase, PhaseError] = Field(default_factory=dict)
    """The model's held-out error per phase with this profile (none: not measured)."""
    notes: str | None = None
    launch: LaunchLimits = Field(default_factory=LaunchLimits)
    """What this engine's release can launch (the planner leaves out what it cannot)."""

    @model_validator(mode="before")
    @classmethod
    def _any_family(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("families") == "any":
            return {**data, "families": {EVERY: {}}}
        return data

    @model_validator(mode="after")
    def _every_knob_is_sourced(self) -> EngineProfile:
        missing = []
        for family, knobs in self.families.items():
            for knob in knobs.model_dump(exclude_none=True):
                if f"{family}.{knob}" not in self.sources and knob not in self.sources:
                    missing.append(f"{family}.{knob}")
        if missing:
            raise ValueError(f"sources is missing a citation for: {', '.join(missing)}")
        return self

    @property
    def label(self) -> str:
        """The engine and the release its launch limits are read from (``sglang 0.5.21``)."""
        release = self.launch.release
        return self.id if release == "-" else f"{self.id} {release}"

    def knobs(self, family: str) -> CalibrationOverride | None:
        """The knobs for ``family``, or None when the profile has none for it."""
        return self.families.get(family, self.families.get(EVERY))

    @property
    def family_names(self) -> list[str]:
        return sorted(f for f in self.families if f != EVERY)

    def time_factor(self, phase: Phase, quantile: float) -> float:
        """The pass-time factor at ``quantile`` of the model's error (1 without an error
        table or at 0.5)."""
        err = self.error.get(phase)
        return 1.0 if err is None or quantile == 0.5 else err.factor(quantile)


class EngineCatalog(Frozen):
    """``catalogs/engines.yaml``: the profiles by id and the one used when a scenario names
    none (the shipped file's is a released engine's, never ``ideal``:
    ``tests/test_engines.py``)."""

    default: str
    engines: dict[str, EngineProfile]

    @model_validator(mode="after")
    def _default_exists(self) -> EngineCatalog:
        if self.default not in self.engines:
            raise ValueError(
                f"default: unknown engine '{self.default}'; profiles: {', '.join(self.engines)}"
            )
        if IDEAL not in self.engines:
            raise ValueError(f"engines: must hold '{IDEAL}' (the hardware catalog's figures)")
        return self

    def connected(self, giver: str, taker: str) -> bool:
        """Whether a request's KV cache can go from an instance of engine ``giver`` to one of
        ``taker``: the same engine, or two whose launch limits each allow the other (a
        profile that is no release, ``kv_handoff_with: null``, allows any)."""
        if giver == taker:
            return True
        a, b = self.engines[giver].launch, self.engines[taker].launch
        return (
            a.kv_handoff_with is None
            or b.kv_handoff_with is None
            or (a.hands_kv_to(taker) and b.hands_kv_to(giver))
        )


def handoff_problems(
    catalog: EngineCatalog, engines: Mapping[Any, str], roles: Iterable[str]
) -> list[tuple[str, str]]:
    """The KV handoffs between ``roles`` (those the scenario runs) whose engines
    (``engines``: role -> engine id, each in ``catalog``) no released software connects, as
    (the first taking role, why: one sentence naming the engines and roles), one per pair
    of engines. Empty where every pair runs one engine or a what-if profile
    (``EngineCatalog.connected``)."""
    present = set(roles)
    pairs: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    for giver, taker in HANDOFF_PAIRS:
        if giver in present and taker in present:
            a, b = engines[giver], engines[taker]
            if not catalog.connected(a, b):
                givers, takers = pairs.setdefault((a, b), ([], []))
                givers += [giver] if giver not in givers else []
                takers += [taker] if taker not in takers else []
    return [
        (
            takers[0],
            f"{b} ({', '.join(takers)}) cannot take a request's KV cache from {a} "
            f"({', '.join(givers)}): no released engine hands it to another engine's "
            "instances (each disaggregation speaks its own handshake, "
            "docs/catalogs.md#one-engine-per-role); give both roles one engine, or "
            f"'{IDEAL}' to one of them for a what-if",
        )
        for (a, b), (givers, takers) in pairs.items()
    ]


def chip_knobs(
    profile: EngineProfile, hardware: HardwareCatalog, chip_id: str
) -> CalibrationOverride:
    """``profile``'s knobs for ``chip_id``'s family; ``ValueError`` naming the families it
    has when it has none for this one."""
    family = hardware.chips[chip_id].family
    knobs = profile.knobs(family)
    if knobs is None:
        raise ValueError(
            f"engine '{profile.id}' has no profile for {chip_id} (family {family}); its "
            f"profiles: {', '.join(profile.family_names)} (engine '{IDEAL}' covers every chip)"
        )
    return knobs
