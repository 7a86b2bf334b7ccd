"""One prefill pool under load: its busy share and its requests' TTFT tail up to the first
token, computed in one place for the planner's count tables (``plan/counts.py``) and the
evaluator (``evaluation/evaluator.py``) alike.

The chain (``docs/model.md``): passes run part-full at the pool's rate
(``filled_service``), a hosted relay decode stretches every pass (``stretched``), the other
attention groups' requests lengthen a request's passes (``loaded_prefill_latency``), an
arrival at an instance of several groups waits for the pass in progress
(``pass_in_progress``), with one group it shares its passes with the requests behind it
(``rank_company``), and the M/G/c wait and the rest combine into a tail
(``prefill_wait_tail``). ``PrefillPoolLoad`` holds one pool's figures at one rate and
evaluates each link of the chain once, on first use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from pddplan.model.admission import Admission
from pddplan.model.colocation import stretched
from pddplan.model.instance import PrefillFigures
from pddplan.model.prefill_queue import (
    Filled,
    LoadedPrefill,
    PassInProgress,
    PassOrder,
    RankCompany,
    filled_service,
    loaded_prefill_latency,
    pass_in_progress,
    prefill_wait,
    prefill_wait_tail,
    rank_company,
)
from pddplan.work import tally


@dataclass(frozen=True)
class PrefillPoolLoad:
    """``instances`` instances of one prefill layout (its full-pass ``figures_full`` and pass
    order ``passes_full``, per class of ``weights``), each receiving ``rate_per_instance``
    requests per second, every pass ``stretch`` times longer (the relay decode it hosts;
    1: none)."""

    figures_full: PrefillFigures
    """The layout's figures with every pass full (``Problem.prefill_figures``)."""
    passes_full: PassOrder
    weights: np.ndarray
    rate_per_instance: float
    instances: int
    groups: int
    """Attention groups per instance."""
    stretch: float = 1.0

    def with_stretch(self, stretch: float) -> PrefillPoolLoad:
        """The same pool with its passes ``stretch`` times longer (its part-full service,
        which the stretch does not change, kept)."""
        other = replace(self, stretch=stretch)
        if "filled" in self.__dict__:
            other.__dict__["filled"] = self.filled
        return other

    @cached_property
    def filled(self) -> Filled:
        """Part-full passes at this rate, before the stretch (``filled_service``)."""
        return filled_service(self.figures_full, self.weights, self.rate_per_instance)

    @property
    def figures(self) -> PrefillFigures:
        """The figures a request's own passes take: part-full service, stretched. Built on
        each use and not kept (with a stretch, a copy of every pass and fill table: a
        count table holds thousands of pools)."""
        base = self.figures_full._replace(service=self.filled.service)
        return stretched(base, self.stretch)

    @property
    def full(self) -> PrefillFigures:
        """Full passes, stretched: what a request in company adds to the passes it joins
        (built on each use, like ``figures``)."""
        return stretched(self.figures_full, self.stretch)

    @cached_property
    def alone_s(self) -> np.ndarray:
        """Per class: a request's passes alone (``figures.latency``)."""
        return self.figures_full.latency * self.stretch

    @cached_property
    def service_s(self) -> np.ndarray:
        """Per class: an instance's seconds per request (``figures.service``)."""
        return self.filled.service * self.stretch

    @property
    def utilization(self) -> float:
        """An instance's busy share (part-full passes, stretched); may exceed 1."""
        return self.filled.utilization * self.stretch

    @cached_property
    def service_mean_s(self) -> float:
        return float(self.weights @ self.service_s)

    @cached_property
    def service_cv2(self) -> float:
        svc, mu = self.service_s, self.service_mean_s
        return float(self.weights @ (svc - mu) ** 2) / mu**2

    @cached_property
    def full_service_mean_s(self) -> float:
        return float(self.weights @ (self.figures_full.service * self.stretch))

    @property
    def full_utilization(self) -> float:
        """The busy share were every pass full: the load a backlog drains at."""
        return self.rate_per_instance * self.full_service_mean_s

    @cached_property
    def _company(self) -> tuple[LoadedPrefill, PassInProgress | None]:
        """``loaded`` and ``in_pass``, from one stretched copy of the full passes."""
        full = self.full
        loaded = loaded_prefill_latency(
            full,
            self.weights,
            groups=self.groups,
            utilization=min(self.full_utilization, 1.0),
            instances=self.instances,
            passes=stretched(self.passes_full, self.stretch),
        )
        in_pass = pass_in_progress(
            full,
            self.weights,
            self.rate_per_instance,
            groups=self.groups,
            company_service_s=self.full_service_mean_s,
            loaded=loaded,
        )
        return loaded, in_pass

    @property
    def loaded(self) -> LoadedPrefill:
        """A request's passes with the other attention groups' company."""
        return self._company[0]

    @property
    def in_pass(self) -> PassInProgress | None:
        """The pass in progress an arrival may find, and its company (None with one
        attention group: ``rank`` stands for it)."""
        return self._company[1]

    @cached_property
    def rank(self) -> RankCompany | None:
        """With one attention group: the requests that join a waiting request's passes."""
        if self.groups != 1:
            return None
        return rank_company(
            self.figures,
            self.weights,
            utilization=min(self.utilization, 1.0),
            instances=self.instances,
            service_cv2=self.service_cv2,
            company_service_s=self.full_service_mean_s,
        )

    def mean_parts(self) -> tuple[float, np.ndarray]:
        """The means of what ``tail`` adds up: the wait for an instance (the M/G/c wait at
        the drain's pace, as ``prefill_wait_tail`` takes it, and the rest of a pass in
        progress), and per class the request's passes with their company (the other
        attention groups' and the requests that join its passes after a wait). For the
        TTFT breakdown (``Evaluation.ttft_breakdown_s``)."""
        utilization = min(self.utilization, 1.0)
        if utilization >= 1.0:  # saturated: the queue grows without bound
            return math.inf, self.loaded.mean_s
        c, _ = prefill_wait(
            instances=self.instances,
            groups=self.groups,
            utilization=utilization,
            mean_service_s=self.service_mean_s,
            service_cv2=self.service_cv2,
        )
        _, mean_wait = prefill_wait(
            instances=self.instances,
            groups=self.groups,
            utilization=min(self.full_utilization, utilization),
            mean_service_s=self.full_service_mean_s,
            service_cv2=self.service_cv2,
        )
        in_pass = self.in_pass
        p_pass = 0.0 if in_pass is None else max(0.0, in_pass.busy - c)
        wait = c * mean_wait + (p_pass * in_pass.rest_s if in_pass is not None else 0.0)
        rank = self.rank if in_pass is None else in_pass.company
        company = 0.0 if rank is None else (c + p_pass) * (rank.probs @ rank.delays)
        return wait, self.loaded.mean_s + company

    def tail(
        self,
        budget_s: np.ndarray,
        *,
        extra_mean_s: np.ndarray | float = 0.0,
        extra_var_s2: np.ndarray | float = 0.0,
        admission: Admission | None = None,
    ) -> np.ndarray:
        """Per entry of ``budget_s`` (classes last): the probability that the wait, the
        request's passes in company, the link's queueing (exponential of mean
        ``extra_mean_s``), a normal term of variance ``extra_var_s2`` and main decode's
        admission exceed ``budget_s`` (``prefill_wait_tail``); the request's passes alone
        are subtracted here."""
        tally("pool_tails")
        alone = self.alone_s
        return prefill_wait_tail(
            budget_s - alone,
            instances=self.instances,
            groups=self.groups,
            utilization=min(self.utilization, 1.0),
            mean_service_s=self.service_mean_s,
            service_cv2=self.service_cv2,
            extra_mean_s=extra_mean_s,
            company_mean_s=self.loaded.mean_s - alone,
            company_var_s2=self.loaded.var_s2 + extra_var_s2,
            rank=self.rank,
            admission=admission,
            drain=(min(self.full_utilization, 1.0), self.full_service_mean_s),
            in_pass=self.in_pass,
        )
