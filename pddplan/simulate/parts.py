"""The simulator's moving parts: the event queue, the WAN link as a shared pipe, and a
decode instance with continuous batching. ``pddplan.simulate.engine`` wires them to prefill,
routing and handoffs.

Both the link and a decode instance change state only at events (a flow starts or ends, a
sequence joins or leaves, a stall); between events their rates are constant, so the time of
their next event is computed, not stepped to (no event per token or per byte).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable
from typing import Any

from pddplan.model.instance import Instance

EPS = 1e-9
REBASE_RTTS = 16
"""The link's ramping-rate sum is rebased after this many round trips (``WanLink``): a flow
that starts that long after the base adds a term 2^-16 of one that started at it, so what
adding and removing terms loses to rounding stays near 2^16 x machine epsilon."""
CANCELLATION = 2.0**-20
"""...and it is recomputed when it falls below this share of its largest value since the
last rebase (most of it has been subtracted away, and with it, digits)."""


class Events:
    """A discrete-event queue: callbacks at times, run in time order (ties in the order
    they were scheduled, so a run is deterministic)."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[[Any], None], Any]] = []
        self._seq = itertools.count()
        self.count = 0

    def at(self, t: float, fn: Callable[[Any], None], arg: Any = None) -> None:
        heapq.heappush(self._heap, (t, next(self._seq), fn, arg))

    def run(self) -> None:
        heap, pop = self._heap, heapq.heappop
        count = 0
        while heap:
            t, _, fn, arg = pop(heap)
            self.now = t
            count += 1
            fn(arg)
        self.count += count


# --- the WAN link ----------------------------------------------------------------------------
class _Flow:
    __slots__ = ("alive", "done", "ramp_end", "size", "start", "steady", "v_end", "weight")

    def __init__(
        self, size: float, done: Callable[[float], None], start: float, ramp_end: float
    ) -> None:
        self.size, self.done, self.start = size, done, start
        self.ramp_end = ramp_end  # when it would finish in slow start
        self.steady = False
        self.v_end = 0.0
        self.weight = 0.0  # 2^((base - start) / RTT) while it ramps (see WanLink)
        self.alive = True


class WanLink:
    """One direction of a WAN link, as a fluid pipe of ``goodput`` bytes/s.

    A flow starts in slow start: ``t`` after it starts it has sent ``W0 (2^(t/RTT) - 1)``
    bytes (its window doubles every RTT from ``W0``; it sends at ``ln 2 / RTT`` times
    its bytes sent plus ``W0``), until its window covers its fair share's
    bandwidth-delay product (``goodput / n x RTT`` bytes sent, ``n`` flows in flight), the
    analytic model's rule. From then on it is past slow start: such flows split what the
    slow-starting flows leave equally (processor sharing, by a virtual clock), and never
    less than the fair share. The split is recomputed at every flow's start, end and exit
    from slow start, with the slow-starting flows' rates half an RTT ahead. A flow past
    slow start stays so. Each flow may also pay ``setup_rtts`` round trips of connection
    set-up before its first byte (0: the warm, reused connections the analytic model's
    calibrated window assumes). Times within a flow are kept relative to its start, so
    that a long run loses no precision.

    Flows start in time order, and the same window test ends slow start for all, so the
    ramping flows leave it in the order they started (a queue). Their total rate,
    ``ln 2 / RTT x W0 x sum 2^((t - start) / RTT)``, is kept as ``2^((t - base) / RTT) x``
    a running sum of ``2^((base - start) / RTT)``, so an event costs the same however many
    flows ramp; ``base`` moves up to the present (and the sum is recomputed exactly) every
    ``REBASE_RTTS`` round trips and whenever the sum has shrunk by ``CANCELLATION``, which
    keeps its rounding error near 1e-11 of the rate (``tests/test_simulate.py``).
    """

    def __init__(
        self, events: Events, goodput: float, rtt_s: float, w0: float, setup_rtts: float = 0.0
    ) -> None:
        self.ev, self.goodput, self.rtt, self.w0 = events, goodput, rtt_s, w0
        self.setup_s = setup_rtts * rtt_s
        self.n = 0
        self.v = 0.0  # bytes each flow past slow start has been offered so far
        self.t = 0.0
        self.rate = goodput  # of each flow past slow start, until the next event
        self._ramping: deque[_Flow] = deque()  # in the order they started (and leave ramp)
        self._ramp_count = 0  # alive and ramping (the deque drops the others lazily)
        self._base = 0.0
        self._weights = 0.0  # sum of the ramping flows' weights
        self._weights_top = 0.0  # its largest value since the last rebase
        self._ramp_end: list[tuple[float, int, _Flow]] = []  # by when it would finish ramping
        self._steady: list[tuple[float, int, _Flow]] = []  # by virtual finish
        self._seq = itertools.count()
        self._version = 0
        self.bytes_sent = 0.0
        self._exit_after = self._slow_start_s()

    @property
    def share(self) -> float:
        """The fair share that ends slow start."""
        return self.goodput / self.n if self.n else self.goodput

    def _slow_start_s(self) -> float:
        """How long a flow stays in slow start: until it has sent the bandwidth-delay
        product of the fair share (``W0 (2^(t/RTT) - 1) = share x RTT``). It changes with
        the number of flows only, so it is kept (``_exit_after``) and redone when that does."""
        return self.rtt * math.log2(self.share * self.rtt / self.w0 + 1.0)

    def start(self, nbytes: float, done: Callable[[float], None]) -> _Flow:
        """Start a flow of ``nbytes``; ``done(t)`` is called when its last byte is sent."""
        t = self.ev.now + self.setup_s
        f = _Flow(nbytes, done, t, t + self.rtt * math.log2(nbytes / self.w0 + 1.0))
        if self.setup_s:
            self.ev.at(t, self._add, f)
        else:
            self._add(f)
        return f

    def _add(self, f: _Flow) -> None:
        now = self.ev.now
        self._advance(now)
        self.n += 1
        self._exit_after = self._slow_start_s()
        self._to_steady(now)
        self._ramp_count += 1
        f.weight = 2.0 ** ((self._base - f.start) / self.rtt)
        self._weights += f.weight
        self._weights_top = max(self._weights_top, self._weights)
        heapq.heappush(self._ramp_end, (f.ramp_end, next(self._seq), f))
        self._ramping.append(f)
        self._reschedule()

    def _advance(self, t: float) -> None:
        if t > self.t:
            self.v += self.rate * (t - self.t)
            self.t = t

    def _first_ramping(self) -> _Flow | None:
        """The earliest-started flow still in slow start (the next to leave it)."""
        ramping = self._ramping
        while ramping:
            f = ramping[0]
            if f.alive and not f.steady:
                return f
            ramping.popleft()
        return None

    def _to_steady(self, t: float) -> None:
        """Ramping flows whose window now covers their share leave slow start (a time test,
        the same one that schedules it, so that a wake-up always makes progress)."""
        limit, exit_after = t + EPS, self._exit_after
        while (f := self._first_ramping()) is not None:
            if f.start + exit_after > limit or f.ramp_end <= limit:
                return  # not yet; or it completes in slow start (``_ramp_end``)
            self._ramping.popleft()
            self._leave_ramp(f)
            f.steady = True
            sent = self.w0 * (2.0 ** ((t - f.start) / self.rtt) - 1.0)
            f.v_end = self.v + (f.size - min(sent, f.size))
            heapq.heappush(self._steady, (f.v_end, next(self._seq), f))

    def _leave_ramp(self, f: _Flow) -> None:
        self._ramp_count -= 1
        self._weights = self._weights - f.weight if self._ramp_count else 0.0

    def _split(self, t: float) -> None:
        """The rate of each flow past slow start: what the ramping flows leave, at their
        rates half an RTT from now (held until the next event)."""
        steady = self.n - self._ramp_count
        if steady <= 0 or not self._ramp_count:
            self.rate = self.goodput / max(steady, 1)
            return
        ahead = t + self.rtt / 2
        if (
            ahead - self._base > REBASE_RTTS * self.rtt
            or self._weights < CANCELLATION * self._weights_top
        ):
            self._rebase(t)
        # the sum over ramping flows of their bytes sent by ``ahead`` plus W0
        ramping = self.w0 * 2.0 ** ((ahead - self._base) / self.rtt) * self._weights
        left = self.goodput - math.log(2) / self.rtt * ramping
        self.rate = max(left, self.goodput / self.n) / steady

    def _rebase(self, t: float) -> None:
        """Move ``base`` to ``t`` and recompute the ramping flows' weights and their sum."""
        self._base, self._weights = t, 0.0
        for f in self._ramping:
            if f.alive and not f.steady:
                f.weight = 2.0 ** ((t - f.start) / self.rtt)
                self._weights += f.weight
        self._weights_top = self._weights

    def _reschedule(self) -> None:
        self._version += 1
        now = self.ev.now
        self._split(now)
        t_next = math.inf
        heap = self._ramp_end
        while heap and (not heap[0][2].alive or heap[0][2].steady):
            heapq.heappop(heap)
        if heap:
            t_next = heap[0][0]
        first = self._first_ramping()
        if first is not None:
            t_next = min(t_next, first.start + self._exit_after)
        heap = self._steady
        while heap and not heap[0][2].alive:
            heapq.heappop(heap)
        if heap:
            t_next = min(t_next, self.t + (heap[0][0] - self.v) / self.rate)
        if t_next < math.inf:
            self.ev.at(max(t_next, now), self._wake, self._version)

    def _wake(self, version: int) -> None:
        if version != self._version:
            return
        now = self.ev.now
        self._advance(now)
        self._to_steady(now)
        finished = []
        heap = self._ramp_end
        while heap and heap[0][0] <= now + EPS:
            f = heapq.heappop(heap)[2]
            if f.alive and not f.steady:
                self._leave_ramp(f)
                finished.append(f)
        heap = self._steady
        while heap and heap[0][0] <= self.v + EPS * max(1.0, self.v):
            f = heapq.heappop(heap)[2]
            if f.alive:
                finished.append(f)
        for f in finished:
            f.alive = False
            self.n -= 1
            self.bytes_sent += f.size
        if finished:
            self._exit_after = self._slow_start_s()
        self._reschedule()
        for f in finished:
            f.done(now)


# --- a decode instance -----------------------------------------------------------------------
class DecodeInstance:
    """One decode instance with continuous batching.

    Its ``n`` sequences advance together, one token per step; the step time is the
    performance model's ``decode_step_s(n, mean context)``, recomputed whenever a sequence
    joins or leaves (piecewise constant between). A step counter ``S`` advances at
    ``1 / step`` per second, except during stalls (an extend step for a handoff stops every
    sequence). A sequence that joins at ``S0`` with ``k`` tokens to go leaves at
    ``S0 + k``. Admission is limited to ``max_seqs`` sequences (the plan's operating batch)
    and to the KV memory, against the bytes each sequence is admitted with.
    """

    def __init__(
        self,
        events: Events,
        inst: Instance,
        *,
        max_seqs: int,
        kv_bytes: float,
        step_memo: dict[tuple[int, int], float],
        gaps: dict[int, float],
        on_leave: Callable[[DecodeInstance, Any, float], None],
    ) -> None:
        self.ev, self.inst = events, inst
        self.max_seqs, self.kv_free = max(1, max_seqs), kv_bytes
        self._memo, self._gaps, self.on_leave = step_memo, gaps, on_leave
        self.S = 0.0
        self.t = 0.0
        self.stall_until = 0.0
        self.n = 0
        self.step = 0.0
        self._ctx_sum = 0.0  # sum over members of (context at join - S at join)
        self._members: dict[Any, tuple[float, float, float, float]] = {}
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = itertools.count()
        self._version = 0
        self.tokens = 0.0
        self._key_step, self._key = -1.0, 0
        self.stall_s = 0.0

    def fits(self, kv_need: float) -> bool:
        return self.n < self.max_seqs and kv_need <= self.kv_free

    def _step_s(self) -> float:
        if self.n == 0:
            return 0.0
        ctx = self._ctx_sum / self.n + self.S
        key = (self.n, int(ctx) >> 8)
        step = self._memo.get(key)
        if step is None:
            step = self._memo[key] = self.inst.decode_step_s(self.n, float((key[1] << 8) + 128))
        return step

    def _advance(self, t: float) -> None:
        if self.n and t > self.t:
            run = t - max(self.t, self.stall_until)
            if run > 0:
                steps = run / self.step
                self.S += steps
                made = steps * self.n
                self.tokens += made
                if self.step != self._key_step:
                    self._key_step, self._key = self.step, _gap_key(self.step)
                self._gaps[self._key] = self._gaps.get(self._key, 0.0) + made
        self.t = max(self.t, t)

    def join(self, req: Any, context: float, tokens: int, kv_need: float) -> float:
        """Admit ``req`` with ``tokens`` to decode at ``context`` tokens; returns the time of
        its first token (the next step after any stall, at the new batch's step time)."""
        now = self.ev.now
        self._advance(now)
        self.n += 1
        self.kv_free -= kv_need
        self._ctx_sum += context - self.S
        self._members[req] = (self.S, context, kv_need, tokens)
        heapq.heappush(self._heap, (self.S + tokens, next(self._seq), req))
        self.step = self._step_s()
        self._reschedule()
        return max(now, self.stall_until) + self.step

    def tokens_done(self, req: Any) -> int:
        self._advance(self.ev.now)
        s0, _, _, tokens = self._members[req]
        return min(tokens, int(self.S - s0 + EPS))

    def remove(self, req: Any) -> int:
        """Take ``req`` out before it finishes (a handoff); returns the tokens it made."""
        made = self.tokens_done(req)
        self._drop(req)
        self.step = self._step_s()
        self._reschedule()
        return made

    def _drop(self, req: Any) -> None:
        s0, context, kv_need, _ = self._members.pop(req)
        self.n -= 1
        self.kv_free += kv_need
        self._ctx_sum -= context - s0

    def stall(self, seconds: float) -> None:
        """An extend step: every sequence waits ``seconds`` (its next token gap grows)."""
        now = self.ev.now
        self._advance(now)
        self.stall_until = max(now, self.stall_until) + seconds
        self.stall_s += seconds
        if self.n:
            key, plain = _gap_key(self.step + seconds), _gap_key(self.step)
            self._gaps[key] = self._gaps.get(key, 0.0) + self.n
            self._gaps[plain] = self._gaps.get(plain, 0.0) - self.n
        self._reschedule()

    def _reschedule(self) -> None:
        self._version += 1
        heap = self._heap
        while heap and heap[0][2] not in self._members:
            heapq.heappop(heap)
        if not heap:
            return
        wait = (heap[0][0] - self.S) * self.step
        start = max(self.ev.now, self.stall_until)
        self.ev.at(start + max(wait, 0.0), self._wake, self._version)

    def _wake(self, version: int) -> None:
        if version != self._version:
            return
        now = self.ev.now
        self._advance(now)
        heap, left = self._heap, []
        while heap and heap[0][0] <= self.S + 1e-6:
            req = heapq.heappop(heap)[2]
            if req in self._members:
                self._drop(req)
                left.append(req)
        self.step = self._step_s()
        self._reschedule()
        for req in left:
            self.on_leave(self, req, now)


GAP_BINS_PER_DOUBLING = 70
"""Resolution of the inter-token gap histogram (1% wide bins)."""


def _gap_key(seconds: float) -> int:
    return round(math.log2(max(seconds, 1e-9)) * GAP_BINS_PER_DOUBLING)


def gap_seconds(key: int) -> float:
    return 2.0 ** (key / GAP_BINS_PER_DOUBLING)
