"""A decode instance in the simulator: continuous batching of sequences that advance one
token per step, with handoff stalls. It changes state only at events (a sequence joins or
leaves, a stall); between events its step time is constant, so the time of its next event
is computed, not stepped to (no event per token). Also the inter-token gap histogram's
bins, and a pool of instances with its queue of requests waiting for a seat
(``DecodePool``)."""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pddplan.model.instance import Instance
from pddplan.simulation.events import Events

if TYPE_CHECKING:
    from pddplan.simulation.request import Req

EPS = 1e-9


class DecodeInstance:
    """One decode instance with continuous batching.

    Its ``n`` sequences advance together, one token per step; the step time is the
    performance model's ``decode_step_s(n, mean context)``, recomputed whenever a sequence
    joins or leaves (piecewise constant between). A step counter ``S`` advances at
    ``1 / step`` per second, except during stalls (an extend step for a handoff stops every
    sequence). A sequence that joins at counter ``S`` starts at the next step boundary,
    ``S0 = ceil(S)`` (the step in progress runs without it), and with ``k`` tokens to go
    leaves at ``S0 + k``. Admission is limited to ``max_seqs`` sequences (the plan's operating batch)
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
        """The running sequences (requests), each with its join figures."""
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = itertools.count()
        self._version = 0
        self.tokens = 0.0
        self.held_s = 0.0
        """Sequence-seconds: the integral of the running sequences over time (stalls in),
        the batch slots held; relay decode's busy share is measured by it."""
        self._key_step, self._key = -1.0, 0
        self.stall_s = 0.0
        self.paced: float | None = None
        """Hosted on a prefill instance: the step its current pass sets (None: the
        instance's own decode step, prefill idle)."""
        self._pass_end = 0.0
        """When the current prefill pass ends (hosted, ``paced``)."""
        self.active = True
        """It is admitted new sequences; False: it is leaving (``Simulation.scale``), and
        runs the ones it holds to their end."""

    def fits(self, kv_need: float) -> bool:
        return self.n < self.max_seqs and kv_need <= self.kv_free

    def context(self) -> float:
        """The running sequences' mean context (tokens; 0 without any)."""
        return self._ctx_sum / self.n + self.S if self.n else 0.0

    def pace(self, seconds: float | None) -> None:
        """Hosted on a prefill instance: step at ``seconds`` from now, the pass that just
        started, which carries one token of each sequence (None: prefill is idle, step
        at the instance's own decode step)."""
        self._advance(self.ev.now)
        self.paced = seconds
        if seconds is not None:
            self._pass_end = self.ev.now + seconds
        self.step = self._step_s()
        self._reschedule()

    def _step_s(self) -> float:
        if self.n == 0:
            return 0.0
        if self.paced is not None:
            return self.paced
        ctx = self.context()
        key = (self.n, int(ctx) >> 8)
        step = self._memo.get(key)
        if step is None:
            step = self._memo[key] = self.inst.decode_step_s(self.n, float((key[1] << 8) + 128))
        return step

    def _advance(self, t: float) -> None:
        if self.n and t > self.t:
            self.held_s += self.n * (t - self.t)
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
        its first token. An engine forms its batch between steps (continuous batching at
        iteration level): a sequence that arrives while a step runs waits for it to end,
        then makes its first token in the next step, at the new batch's step time (after
        any stall). On an idle instance the next step starts at once."""
        now = self.ev.now
        self._advance(now)
        if self.paced is not None:
            # hosted on a prefill instance: its steps are the passes, and the counter's
            # boundaries are not theirs (a pass starts mid-step of the counter): it starts
            # when the pass in progress ends
            rest = max(self._pass_end - max(now, self.stall_until), 0.0)
            if self.n == 0:
                self._ctx_sum = 0.0
            start = self.S + rest / self.paced
        else:
            if self.n == 0:  # no step in progress: the counter restarts at a step boundary
                self.S, self._ctx_sum = float(math.ceil(self.S - EPS)), 0.0
            start = float(math.ceil(self.S - EPS))  # the next step boundary
        self.n += 1
        self.kv_free -= kv_need
        self._ctx_sum += context - start
        self._members[req] = (start, context, kv_need, tokens)
        heapq.heappush(self._heap, (start + tokens, next(self._seq), req))
        self.step = self._step_s()
        self._reschedule()
        return max(now, self.stall_until) + (start + 1 - self.S) * self.step

    def tokens_done(self, req: Any) -> int:
        self._advance(self.ev.now)
        s0, _, _, tokens = self._members[req]
        return min(int(tokens), max(int(self.S - s0 + EPS), 0))

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

    def clear(self) -> None:
        """Drop the running sequences and their events (a run that stops mid-way)."""
        self._members.clear()
        self._heap.clear()
        self.n = 0

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


class DecodePool:
    """A decode pool's instances and its queue of requests waiting for a seat."""

    def __init__(self, role: str, index: int) -> None:
        self.role, self.index = role, index
        self.instances: list[DecodeInstance] = []
        # (request, tokens, stall) waiting for a seat; finished requests, and on a relay
        # pool those that went straight to MD (``Req.gone_to_md``), leave it at its head
        self.queue: deque[tuple[Req, int, float]] = deque()
        self.op_batch, self.op_step = 1, 0.0
        self.tokens_per_s = 0.0
        """One instance's tokens per second at its operating point (0 where no batch
        fits): its share of the router's decode weight."""
        self.live = 0
        """Its instances that are ``active``: the ones new requests are seated on (none:
        the leaving ones take what was already routed here)."""
