"""One direction of a WAN link in the simulator: a fluid pipe shared by TCP flows that
start in slow start, each capped by its window and loss rate. It changes state only at events (a flow starts, ends or leaves slow
start); between events its rates are constant, so the time of its next event is computed,
not stepped to (no event per byte)."""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable

from pddplan.simulation.events import Events

EPS = 1e-9
REBASE_RTTS = 16
"""The link's ramping-rate sum is rebased after this many round trips (``WanLink``): a flow
that starts that long after the base adds a term 2^-16 of one that started at it, so what
adding and removing terms loses to rounding stays near 2^16 x machine epsilon."""
CANCELLATION = 2.0**-20
"""...and it is recomputed when it falls below this share of its largest value since the
last rebase (most of it has been subtracted away, and with it, digits)."""


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
    analytic model's rule (the share being at most ``cap``, a transfer's window- and
    loss-limited rate, ``TcpPath.flow_cap_bytes_per_s``). From then on it is past slow
    start: such flows split what the slow-starting flows leave equally (processor sharing,
    by a virtual clock), never less than the fair share, and never more than ``cap``: with
    few flows the link is not full (processor sharing with peak-rate caps). The split is recomputed at every flow's start, end and exit
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
        self,
        events: Events,
        goodput: float,
        rtt_s: float,
        w0: float,
        setup_rtts: float = 0.0,
        cap: float = math.inf,
    ) -> None:
        self.ev, self.goodput, self.rtt, self.w0 = events, goodput, rtt_s, w0
        self.cap = cap
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

    def clear(self) -> None:
        """Drop every flow (a run that stops with transfers in flight), and each one's
        callback: a request holds its flow, whose callback holds the request, a cycle
        that would keep the caller's simulation until a full collection."""
        for f in [*self._ramping, *(x[2] for x in self._ramp_end), *(x[2] for x in self._steady)]:
            f.done = _dropped
            f.alive = False
        self._ramping.clear()
        self._ramp_end.clear()
        self._steady.clear()
        self.n = self._ramp_count = 0

    @property
    def share(self) -> float:
        """The fair share (at most the cap) that ends slow start."""
        return min(self.goodput / self.n if self.n else self.goodput, self.cap)

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
            self.rate = min(self.goodput / max(steady, 1), self.cap)
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
        self.rate = min(max(left, self.goodput / self.n) / steady, self.cap)

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


def _dropped(t: float) -> None:
    """The callback of a flow dropped by ``WanLink.clear``."""
