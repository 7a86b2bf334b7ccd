"""How long a simulation runs: a warm start, the end of warm-up, and a run that grows until
its tail percentiles are known to a stated precision.

Steady state is a matter of simulated time, not of request count: a decode-side cache fills
and turns over at the rate new blocks arrive, and a session comes back once per turn gap.
So a run is decided in four steps (docs/simulate.md#run-length):

1. **Warm start.** The sessions open at time 0 are in their stationary state (``rate x
   turn gap`` of them, their last turns spread over one turn gap), and the session
   generator's requests before time 0 pass through the caches only (no queues, no service:
   ``Simulation.pass_through_caches``) until at least one turn gap has passed and every
   bounded cache has evicted its capacity once (or never evicted: it holds every context),
   so the caches hold what a service that has run for a while holds
   (``WARM_START_MAX_REQUESTS`` at most).
2. **Warm-up.** The served run starts with empty queues. Warm-up ends when all hold: MSER-5
   on the batch means of TTFT and of the decode-side hit truncates within the first half of
   the run so far; every bounded cache is at least ``CACHE_FULL`` full and has evicted its
   capacity once, or has never evicted; the open sessions are within ``SESSIONS_WITHIN`` of rate x turn gap
   (Little's law; the generator holds it exactly, the check guards it).
3. **Measurement.** The requests after warm-up, in arrival order, form batches of
   ``MIN_BATCH x 2^j`` requests; checks come at 20 and at 30 batches of each size, and the
   batch size doubles after 30. A percentile's 95% interval is the Student-t interval of
   the batch percentiles' logarithms around the percentile of all of them, so it never
   leaves (0, inf). The run stops when TTFT P90's and P99's intervals are within
   +-``precision`` (or, for ``solve --verify``, as soon as the SLA verdict is decided), or
   at the request cap (``MAX_REQUESTS``): counted, so the same seed gives the same run on any
   machine; a run not yet stationary whose later half misses a TTFT bound by ``OVERLOAD``x
   stops as overloaded. A wall-clock safety stop (``RunLength.max_wall_s``) is off unless
   asked for, and a run it ends has no verdict (``SIM_TIME_LIMIT``).
4. **Verdict.** "confirmed" when every upper bound (TTFT P90, P99, TPOT P99) is within the
   SLA, "missed" when a lower bound is above it (or the run is overloaded), "inconclusive"
   otherwise; a run that is not stationary, or shorter than 20 minimal batches after
   warm-up, is never confirmed; a run the safety stop ended is "time_limit", not a verdict.

A trace is replayed as it is: no warm start (its caches start cold), warm-up as above, and
the whole trace measured after it.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from scipy import special

from pddplan.progress import Progress
from pddplan.simulation.decode import GAP_BINS_PER_DOUBLING, gap_seconds
from pddplan.simulation.engine import (
    FIRST_FIELDS,
    RECORD_FIELDS,
    CacheState,
    Checkpoint,
    SimRecord,
    Simulation,
)
from pddplan.spec.scenario import Sla
from pddplan.spec.status import SIM_TIME_LIMIT
from pddplan.work import wall_clock
from pddplan.workload.sessions import SessionSource, SimRequest

MIN_BATCH = 500
"""Requests in the smallest batch: five above its P99."""
BATCHES = (20, 30)
"""Checks come at this many batches of each batch size; it doubles after the last."""
MSER_BATCH = 5
CACHE_FULL = 0.99
SESSIONS_WITHIN = 0.05
PRECISION = 0.05
"""Default target: the 95% intervals of TTFT P90 and P99 within +-5%."""
CONFIDENCE = 0.95
MAX_REQUESTS = 120_000
"""Default request cap of one run: served requests, warm-up included. What stops a run is
counted, never timed, so the same seed gives the same run on any machine; sized so that the
shipped scenarios' runs end within a minute on this project's 2-core machine
(``docs/simulate.md``, "Run length"). Its records take 100 bytes a request."""
WARM_START_MAX_REQUESTS = 2_000_000
OVERLOAD = 2.0
"""A run that is not yet stationary, whose later half has a TTFT percentile at least this
many times its bound, stops as overloaded (``_far_off``)."""
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}


@dataclass(frozen=True)
class RunLength:
    """How long to simulate (the module docstring)."""

    requests: int | None = None
    """A fixed number of served requests (warm-up included); None: decided by the run."""
    precision: float = PRECISION
    max_wall_s: float | None = None
    """A wall-clock safety stop (seconds), off by default. A run it stops is "stopped at
    the time limit, not a verdict" (``SIM_TIME_LIMIT``): how far it got depends on the
    machine."""
    max_requests: int = MAX_REQUESTS
    until_decided: bool = False
    """Stop as soon as the SLA verdict is decided (``solve --verify``)."""


@dataclass(frozen=True)
class Interval:
    """A percentile and its 95% interval (``low <= value <= high``)."""

    value: float
    low: float
    high: float

    @property
    def precision(self) -> float:
        """The interval's relative half-width, ``high / value - 1`` (it is symmetric in
        log scale)."""
        if not self.value or not math.isfinite(self.high):
            return math.inf
        return self.high / self.value - 1


@dataclass(frozen=True)
class Steadiness:
    """How a run reached, or failed to reach, steady state, and why it stopped."""

    warm_start_requests: int
    """Requests before time 0 that went through the caches only."""
    warm_start_s: float
    warmup_requests: int
    warmup_s: float
    """Simulated seconds of warm-up."""
    measured_requests: int
    measured_s: float
    served_requests: int
    """Requests that arrived in the served run (warm-up, measured, and the ones in flight
    when it stopped)."""
    batches: int
    batch_requests: int
    stationary: bool
    problems: tuple[str, ...]
    """Why the run is not stationary, or too short (empty when neither)."""
    stopped: str
    """``precise``, ``decided``, ``overloaded``, ``time cap``, ``request cap``, ``fixed
    length`` or ``trace end``."""
    caches: tuple[CacheState, ...]
    """The bounded caches when measurement started."""
    open_sessions: int | None
    target_sessions: int | None
    wall_s: float


@dataclass(frozen=True)
class SteadyRun:
    """A run's measured part: what ``run.simulate`` summarizes."""

    records: SimRecord
    """The measured requests, in arrival order."""
    ttft: dict[str, Interval]
    tpot_p99_ms: Interval
    gaps: dict[int, float]
    """Inter-token gaps over the measured window."""
    window: tuple[Checkpoint, Checkpoint]
    steadiness: Steadiness
    verdict: str
    """``confirmed``, ``missed`` or ``inconclusive``."""
    reasons: tuple[str, ...]
    """What decides the verdict, one phrase per SLA bound that is not confirmed."""


class _Table:
    """Rows by arrival index (``fields``), and the prefix of the indices that has one."""

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields = fields
        self.rows = np.zeros((4096, len(fields)))
        self.done = np.zeros(4096, dtype=bool)
        self.prefix = 0

    def add(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        index = rows[:, 0].astype(np.int64)
        need = int(index.max()) + 1
        if need > len(self.done):
            size = max(need, 2 * len(self.done))
            grown = np.zeros((size, len(self.fields)))
            grown[: len(self.rows)] = self.rows
            done = np.zeros(size, dtype=bool)
            done[: len(self.done)] = self.done
            self.rows, self.done = grown, done
        self.rows[index] = rows
        self.done[index] = True
        missing = np.flatnonzero(~self.done[self.prefix :])
        self.prefix += int(missing[0]) if len(missing) else len(self.done) - self.prefix

    def column(self, name: str, lo: int, hi: int) -> np.ndarray:
        return self.rows[lo:hi, self.fields.index(name)]


def mser_truncation(values: np.ndarray, batch: int = MSER_BATCH) -> int:
    """MSER-``batch`` (White, 1997): the warm-up to drop from ``values`` (a multiple of
    ``batch`` observations) that minimizes the squared standard error of the mean of what
    is left, ``sum((z - mean)^2) / m^2`` over the ``m`` batch means ``z`` kept. The last
    twentieth of the batches (10 at least) is never a candidate: so few values have a
    small spread by chance."""
    n = len(values) // batch
    if n < 20:
        return 0
    z = values[: n * batch].reshape(n, batch).mean(axis=1)
    s1 = np.cumsum(z[::-1])[::-1]  # sums of z[d:]
    s2 = np.cumsum((z * z)[::-1])[::-1]
    m = n - np.arange(n)
    mser = (s2 - s1 * s1 / m) / (m * m)
    last = n - max(10, n // 20)
    return int(np.argmin(mser[: last + 1])) * batch


def log_interval(values: np.ndarray, q: float, batches: int) -> Interval:
    """Percentile ``q`` of ``values`` and its 95% batch-means interval in log scale
    (``batches`` consecutive batches; the module docstring)."""
    point = float(np.quantile(values, q))
    parts = np.array_split(values, batches)
    per = np.log(np.maximum([np.quantile(p, q) for p in parts], 1e-12))
    half = float(special.stdtrit(batches - 1, 0.5 + CONFIDENCE / 2) * per.std(ddof=1))
    half /= batches**0.5
    return Interval(point, point * math.exp(-half), point * math.exp(half))


def gap_interval(marks: list[dict[int, float]], q: float) -> Interval:
    """Percentile ``q`` of the inter-token gaps between the first and last of ``marks``
    (the gap histogram at successive batch boundaries), in ms, with the log-scale
    interval of the per-batch percentiles widened by one histogram bin each way (the
    histogram's resolution: batches that agree to the bin do not make the gap exact)."""
    keys = sorted(set().union(*marks))
    if not keys:
        return Interval(math.nan, math.nan, math.nan)
    cum = np.array([[m.get(k, 0.0) for k in keys] for m in marks])
    ms = np.array([gap_seconds(k) for k in keys]) * 1e3

    def pct(weights: np.ndarray) -> float:
        total = weights.sum()
        if total <= 0:
            return math.nan
        return float(ms[int(np.searchsorted(np.cumsum(weights) / total, q))])

    point = pct(cum[-1] - cum[0])
    per = np.array([pct(b) for b in np.diff(cum, axis=0)])
    per = np.log(per[np.isfinite(per)])
    if len(per) < 2 or not math.isfinite(point):
        return Interval(point, 0.0, math.inf)  # no batches: no interval
    half = special.stdtrit(len(per) - 1, 0.5 + CONFIDENCE / 2) * per.std(ddof=1)
    half = half / len(per) ** 0.5 + math.log(2) / GAP_BINS_PER_DOUBLING
    return Interval(point, point * math.exp(-half), point * math.exp(half))


def warm_start(sim: Simulation, source: SessionSource) -> tuple[Iterator[SimRequest], int, float]:
    """Step 1 of the module docstring: the open sessions' contexts into the caches, then the
    generator's requests through them until one turn gap has passed and every bounded cache
    has evicted its capacity once (or never evicted). Returns the generator's requests from then on, timed
    from 0, and how many requests and seconds the warm start took."""
    sim.warm_caches(source.warm)
    it = iter(source)
    count, t = 0, 0.0
    while count < WARM_START_MAX_REQUESTS:
        if count % 256 == 0 and t >= source.turn_gap_s and _turned_over(sim.cache_states()):
            break
        request = next(it)
        sim.pass_through_caches(request)
        t = request[0]
        count += 1
    return ((r[0] - t, r[1], r[2], r[3]) for r in it), count, t


def _steady(c: CacheState) -> bool:
    """Full and turned over once, or never evicted (it holds every context, as an unbounded
    cache would: a tiered cache's largest tier may outgrow the sessions' working set)."""
    return (c.full >= CACHE_FULL and c.turned_over >= 1.0) or c.evicted_blocks == 0


def _turned_over(caches: Iterable[CacheState]) -> bool:
    return all(_steady(c) for c in caches)


def _state_problems(caches: tuple[CacheState, ...], source: SessionSource | None) -> list[str]:
    out = [
        f"the {c.name} cache is {c.full:.0%} full and has evicted {c.turned_over:.2f}x its "
        "capacity (steady state: full and turned over once, or never evicted)"
        for c in caches
        if not _steady(c)
    ]
    if source is not None:
        off = source.open_sessions / source.target_sessions - 1
        if abs(off) > SESSIONS_WITHIN:
            out.append(
                f"{source.open_sessions:,} sessions open, {off:+.0%} from rate x turn gap "
                f"{source.target_sessions:,}"
            )
    return out


def _judge(ttft: dict[str, Interval], tpot: Interval, sla: Sla) -> tuple[str, tuple[str, ...]]:
    """The verdict on the SLA from the intervals (step 4), and a phrase per bound that is
    not confirmed."""
    checks = (
        ("TTFT P90", ttft["p90"], sla.ttft_p90_s, "s"),
        ("TTFT P99", ttft["p99"], sla.ttft_p99_s, "s"),
        ("TPOT P99", tpot, sla.tpot_ms, "ms"),
    )
    missed, open_ = [], []
    for name, x, bound, unit in checks:
        text = f"{name} {x.value:.3g} [{x.low:.3g}, {x.high:.3g}] {unit} against {bound:g} {unit}"
        if x.low > bound * (1 + 1e-9):
            missed.append(text)
        elif not x.high <= bound * (1 + 1e-9):
            open_.append(text)
    if missed:
        return "missed", tuple(missed)
    if open_:
        return "inconclusive", tuple(open_)
    return "confirmed", ()


def _far_off(ttft: np.ndarray, sla: Sla) -> str | None:
    """What is wrong with a run not yet stationary (``ttft``: lower bounds of its TTFTs,
    in arrival order) whose later half has a TTFT percentile at least ``OVERLOAD`` times
    its bound, or None. The warm start leaves no transient that makes a run worse later
    (the queues start empty, the caches full), so such a run misses at steady state too."""
    later = ttft[len(ttft) // 2 :]
    for name, q, bound in (("P90", 0.9, sla.ttft_p90_s), ("P99", 0.99, sla.ttft_p99_s)):
        late = float(np.quantile(later, q))
        if late > OVERLOAD * bound:
            return (
                f"overloaded: TTFT {name} of the run's later half is at least {late:.3g} s, "
                f"over {OVERLOAD:g}x its bound {bound:g} s, and the queues have not settled"
            )
    return None


def run_steady(
    sim: Simulation,
    requests: SessionSource | Iterable[SimRequest],
    sla: Sla,
    length: RunLength | None = None,
    *,
    clock: Callable[[], float] = wall_clock,
    progress: Progress | None = None,
) -> SteadyRun:
    """Steps 1-4 of the module docstring on ``sim`` (not started): sampled sessions get the
    warm start; any other requests (a trace) are served as they come. ``progress``
    (``pddplan.progress``) hears the requests that have arrived after each batch, of the
    fixed length, or of an estimate from the precision reached so far (the requests
    measured x (precision / the precision asked)², the run's interval narrowing as one
    over the square root of its requests; none before the first check), with the phase and
    the TTFT P99 so far."""
    return _Run(sim, requests, sla, length or RunLength(), clock, progress).result()


class _Run:
    """One run of ``run_steady``: the loop over batches of ``MIN_BATCH`` arrivals, each
    ending with a checkpoint."""

    def __init__(
        self,
        sim: Simulation,
        requests: SessionSource | Iterable[SimRequest],
        sla: Sla,
        length: RunLength,
        clock: Callable[[], float],
        progress: Progress | None,
    ) -> None:
        self.sim, self.sla, self.length, self.clock, self.progress = (
            sim, sla, length, clock, progress
        )  # fmt: skip
        self.began = clock()
        self.cap = length.requests if length.requests is not None else length.max_requests
        self.session = requests if isinstance(requests, SessionSource) else None
        if self.session is not None:
            self._report("warm start", 0, 0.0)
            live, self.pre_n, self.pre_s = warm_start(sim, self.session)
        else:
            live, self.pre_n, self.pre_s = iter(requests), 0, 0.0
        if length.requests is not None:
            live = itertools.islice(live, length.requests)
        self.min_measured_s = self.session.turn_gap_s if self.session is not None else 0.0
        """Sampled sessions are measured for one turn gap at least (each comes back)."""
        sim.start(live)
        self.firsts = _Table(FIRST_FIELDS)  # the checks' figures, known at admission
        self.records = _Table(RECORD_FIELDS)  # everything, known when a request finishes
        self.marks = [sim.checkpoint()]  # one per MIN_BATCH arrivals
        self.arrival_s: list[np.ndarray] = []
        self.more = True  # requests may still arrive

    def _report(self, phase: str, requests: int, t: float, last: _Check | None = None) -> None:
        """Tell ``progress`` where the run is (``run_steady``)."""
        if self.progress is None:
            return
        label = f"{phase}, {t:,.0f} s simulated"
        total: int | None = self.cap if self.length.requests is not None else None
        if last is not None:
            p99 = last.ttft["p99"]
            label += f", TTFT P99 {p99.value:.3g} s ±{p99.precision:.1%}"
            if total is None and math.isfinite(last.precision):
                need = last.used * max(last.precision / self.length.precision, 1.0) ** 2
                total = min(self.cap, math.ceil(last.warmup + need))
        self.progress(requests, None if total is None else max(total, requests), label)

    def _step(self) -> Checkpoint:
        """Serve the next ``MIN_BATCH`` arrivals (the rest of the requests when they run out)."""
        target = min(len(self.marks) * MIN_BATCH, self.cap)
        self.more = self.more and self.sim.advance(target)
        if not self.more:
            self.sim.advance()  # the requests ran out: the rest finish
        arrivals, firsts, rows = self.sim.take_records()
        self.arrival_s.append(arrivals)
        self.firsts.add(firsts)
        self.records.add(rows)
        mark = self.sim.checkpoint()
        self.marks.append(mark)
        return mark

    def _ttft_at_least(self, mark: Checkpoint) -> np.ndarray:
        """Per request that has arrived, in arrival order: its TTFT, or for one still
        without a first token, the time it has waited (a lower bound)."""
        self.arrival_s = [np.concatenate(self.arrival_s)]
        arrived = self.arrival_s[0][: mark.arrivals]
        m = min(len(arrived), len(self.firsts.done))
        ttft = mark.time_s - arrived
        known = self.firsts.done[:m]
        ttft[:m][known] = self.firsts.column("ttft_s", 0, m)[known]
        return ttft

    def _capped(self, mark: Checkpoint) -> str:
        if not self.more:
            return "trace end" if self.session is None else "fixed length"
        if mark.arrivals >= self.cap:
            return "fixed length" if self.length.requests is not None else "request cap"
        cap = self.length.max_wall_s
        if cap is not None and self.clock() - self.began >= cap:
            return "time cap"
        return ""

    def result(self) -> SteadyRun:
        sla, length = self.sla, self.length
        state_ok_at: int | None = None
        warmup: int | None = None
        next_mser = next_overload = BATCHES[0] * MIN_BATCH
        batch, k_next = MIN_BATCH, 0  # the next check: BATCHES[k_next] batches of `batch`
        last: _Check | None = None
        overload: str | None = None
        stopped = ""
        while not stopped:
            mark = self._step()
            done = self.firsts.prefix
            if state_ok_at is None and not _state_problems(mark.caches, self.session):
                state_ok_at = mark.arrivals
            if warmup is None and done >= next_mser:
                next_mser = int(done * 1.25)
                cut = max(
                    mser_truncation(self.firsts.column("ttft_s", 0, done)),
                    mser_truncation(self.firsts.column("md_hit", 0, done)),
                )
                if cut <= done / 2 and state_ok_at is not None:
                    warmup = -(-max(cut, state_ok_at) // MIN_BATCH) * MIN_BATCH
            if warmup is None and length.requests is None and mark.arrivals >= next_overload:
                next_overload = int(mark.arrivals * 1.25)
                overload = _far_off(self._ttft_at_least(mark), sla)
                stopped = "overloaded" if overload is not None else ""
            while warmup is not None and done - warmup >= BATCHES[k_next] * batch:
                last = self._check(warmup, BATCHES[k_next], batch)
                if k_next + 1 < len(BATCHES):
                    k_next += 1
                else:
                    k_next, batch = 0, batch * 2
                if last.seconds < self.min_measured_s or length.requests is not None:
                    continue  # a fixed run serves all its requests
                if last.precision <= length.precision:
                    stopped = "precise"
                elif length.until_decided and last.verdict[0] != "inconclusive":
                    stopped = "decided"
            self._report("warm-up" if warmup is None else "measuring", mark.arrivals,
                         mark.time_s, last)  # fmt: skip
            stopped = stopped or self._capped(mark)
        if stopped in ("precise", "decided") and last is not None:
            # serve on (the load unchanged) until every measured request has finished
            while self.records.prefix < last.warmup + last.used and not self._capped(self._step()):
                pass
        self.sim.close()
        if self.progress is not None:
            done = self.marks[-1].arrivals
            self.progress(done, done, "done")
        return self._finish(warmup, state_ok_at is not None, last, stopped, overload)

    def _check(self, warmup: int, k: int, batch: int) -> _Check:
        ttft = self.firsts.column("ttft_s", warmup, warmup + k * batch)
        figures = {key: log_interval(ttft, q, k) for key, q in QUANTILES.items()}
        gap_marks = _gap_marks(self.marks, warmup, k, batch)
        tpot = gap_interval(gap_marks, 0.99)
        first, close = _window(self.marks, warmup, k * batch)
        return _Check(
            warmup, k, batch, figures, tpot, close.time_s - first.time_s,
            _judge(figures, tpot, self.sla),
        )  # fmt: skip

    def _finish(
        self,
        warmup: int | None,
        state_ok: bool,
        last: _Check | None,
        stopped: str,
        overload: str | None,
    ) -> SteadyRun:
        end = self.marks[-1]
        done = self.firsts.prefix
        problems = [] if overload is None else [overload]
        stationary = warmup is not None
        if warmup is None:  # not stationary: measure after MSER's cut, or the run's first half
            cut = mser_truncation(self.firsts.column("ttft_s", 0, done))
            warmup = 0 if overload is not None else min(cut, done // 2) // MIN_BATCH * MIN_BATCH
            problems += _state_problems(end.caches, self.session) or [
                "MSER-5 truncates TTFT or the decode-side hit past the run's half"
            ]
        measured = max(done - warmup, 0)
        if last is None or stopped not in ("precise", "decided"):
            last = self._final_check(warmup, measured, problems)
        if overload is not None:
            problems = [overload]  # what the others come from
        if last.seconds < self.min_measured_s and not problems:
            problems.append(
                f"too short: {last.seconds:,.0f} s measured, less than one turn gap "
                f"({self.min_measured_s:,.0f} s)"
            )
        first, close = _window(self.marks, warmup, last.used)
        verdict, reasons = last.verdict
        if stopped == "time cap":  # how far it got is the machine's speed: no verdict
            verdict = SIM_TIME_LIMIT
            reasons = (
                f"stopped at the time limit ({self.length.max_wall_s:g} s of wall-clock time), "
                "not a verdict: a faster or idler machine runs further and prints other "
                "figures; leave out the time cap (the run stops at its request cap)",
            )
        elif overload is not None:
            verdict, reasons = "missed", (overload,)
        elif problems:  # never confirmed; the problems join what decides the verdict
            verdict = "inconclusive" if verdict == "confirmed" else verdict
            reasons = (*reasons, *problems)
        lo, hi = last.warmup, last.warmup + last.used
        finished = np.flatnonzero(self.records.done[lo:hi]) + lo
        steadiness = Steadiness(
            warm_start_requests=self.pre_n,
            warm_start_s=self.pre_s,
            warmup_requests=warmup,
            warmup_s=first.time_s,
            measured_requests=last.used,
            measured_s=close.time_s - first.time_s,
            served_requests=end.arrivals,
            batches=last.k,
            batch_requests=last.batch,
            stationary=stationary and not problems,
            problems=tuple(problems),
            stopped=stopped,
            caches=first.caches,
            open_sessions=self.session.open_sessions if self.session is not None else None,
            target_sessions=self.session.target_sessions if self.session is not None else None,
            wall_s=self.clock() - self.began,
        )
        gaps = {g: close.gaps.get(g, 0.0) - first.gaps.get(g, 0.0) for g in close.gaps}
        return SteadyRun(
            records=SimRecord.of(self.records.rows[finished].copy()),
            ttft=last.ttft,
            tpot_p99_ms=last.tpot,
            gaps=gaps,
            window=(first, close),
            steadiness=steadiness,
            verdict=verdict,
            reasons=reasons,
        )

    def _final_check(self, warmup: int, measured: int, problems: list[str]) -> _Check:
        """Figures over all that was measured: 20 to 39 batches of ``MIN_BATCH x 2^j``; a
        run too short for 20 of ``MIN_BATCH`` gets 20 smaller ones (and is marked so)."""
        batch = MIN_BATCH
        while measured >= 2 * BATCHES[0] * batch:
            batch *= 2
        k = measured // batch
        if k < BATCHES[0]:
            problems.append(
                f"too short: {measured:,} requests measured, steady-state figures need "
                f"{BATCHES[0] * MIN_BATCH:,} ({BATCHES[0]} batches of {MIN_BATCH})"
            )
            k = min(BATCHES[0], measured)
            batch = measured // k if k else 0
        if k < 2:
            nan = Interval(math.nan, math.nan, math.nan)
            return _Check(warmup, k, batch, dict.fromkeys(QUANTILES, nan), nan, 0.0,
                          _judge(dict.fromkeys(QUANTILES, nan), nan, self.sla))  # fmt: skip
        return self._check(warmup, k, batch)


@dataclass(frozen=True)
class _Check:
    """The figures of one check: ``k`` batches of ``batch`` requests after ``warmup``."""

    warmup: int
    k: int
    batch: int
    ttft: dict[str, Interval]
    tpot: Interval
    seconds: float
    """Simulated seconds the batches' arrivals span."""
    verdict: tuple[str, tuple[str, ...]]

    @property
    def used(self) -> int:
        return self.k * self.batch

    @property
    def precision(self) -> float:
        return max(self.ttft["p90"].precision, self.ttft["p99"].precision)


def _gap_marks(marks: list[Checkpoint], warmup: int, k: int, batch: int) -> list[dict]:
    """The gap histograms at the batches' boundaries (marks come every ``MIN_BATCH``
    arrivals; batches smaller than that get the measured window's two ends)."""
    first = warmup // MIN_BATCH
    if batch < MIN_BATCH:
        return [
            marks[first].gaps,
            marks[min(-(-(warmup + k * batch) // MIN_BATCH), len(marks) - 1)].gaps,
        ]
    step = batch // MIN_BATCH
    return [marks[min(first + i * step, len(marks) - 1)].gaps for i in range(k + 1)]


def _window(marks: list[Checkpoint], warmup: int, used: int) -> tuple[Checkpoint, Checkpoint]:
    """The checkpoints at the measured requests' first and last arrivals (the marks come
    every ``MIN_BATCH`` arrivals; a trace's last one where it ended)."""
    first = min(warmup // MIN_BATCH, len(marks) - 1)
    close = min(-(-(warmup + used) // MIN_BATCH), len(marks) - 1)
    return marks[first], marks[max(close, first)]
