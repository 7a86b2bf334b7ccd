"""The workload as a stream of requests: sampled multi-turn sessions, or a Mooncake trace.

Each request is ``(arrival s, input tokens, output tokens, prefix block ids)``; two requests
that share their first ``n`` block ids share ``n x block`` tokens of prefix KV, so the
simulator's prefix caches decide the hits. The simulator replays the stream; the planner
measures how soon its contexts come back (``pddplan.workload.hit_curve.ReuseCurve``), for
the decode-side cache's hit rate as a curve of its capacity.

**Sessions** (``SessionSource``). Arrivals are Poisson. Each request draws its input
length, output length and a *target* prefix hit from the scenario's workload (its
distributions, or its classes by weight). It then continues a session that is ready (its
previous turn has had time to finish: the SLA's TTFT P90 + output x TPOT + a think time)
and whose context holds at least the target's prefix: the request's first ``rint(hit x
input / block)`` blocks are that context's first blocks, the rest are new. Its input
becomes the session's context (a growing prefix when the input grows, a fork when it
shrinks). A target under one block (a cold request), or no ready session at all, opens a
new session, and a session picked at random among the open ones closes (its context is
dead from then on): ``rate x turn gap`` sessions are open at every moment (Little's law),
so each comes back about once per ``turn_interval_s``, the workload's figure when it gives
one. A session's life is not an input: it is as long as the workload's share of cold
requests makes it (a session closes at random, so its remaining life does not depend on
the turns it has taken). The hits that result (an evicted prefix misses) are measured, not
copied in.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import takewhile
from pathlib import Path

import numpy as np

from pddplan.errors import ArgumentError, InputError
from pddplan.spec.scenario import Workload
from pddplan.workload.classes import workload_classes
from pddplan.workload.distributions import frozen_dist
from pddplan.workload.hit_curve import ReuseCurve
from pddplan.workload.trace import read_requests

SimRequest = tuple[float, int, int, Sequence[int]]
"""(arrival seconds, input tokens, output tokens, prefix block ids). Sampled sessions give
the ids as ``array("i")``: a run keeps tens of thousands of contexts alive, and as arrays
they take 4 bytes an id (36 as a tuple of ints), in one piece, out of the cyclic garbage
collector's sight."""
Turn = tuple[float, int, int, Sequence[int], int, int]
"""A sampled request (``SimRequest``) with its session id and the blocks it reuses from
that session's context (its first ones; 0: a cold request, which opens the session). Its
ids are an ``array("i")``, or with ``SessionSource.turns(ids=False)`` a ``range`` as long
as the request's prefix in blocks."""
BLOCK_TOKENS = 512
"""Tokens per prefix block of a trace: Mooncake's (its ``hash_ids`` are 512-token blocks),
and the most a sampled workload uses."""
BLOCKS_PER_MEDIAN_INPUT = 64
"""A sampled workload's block is the power of two nearest its median input / 64 (16 to 512
tokens): hits resolve to ~2% of a typical request at ~64 cache entries per request."""
THINK_S = 5.0
"""Assumption: mean pause between a turn's end and the next turn (a tool call)."""
SURPLUS = 2.0
"""Without the workload's ``turn_interval_s``: sessions open at the start per session the
arrival rate keeps busy (the rest are ready for a next turn, so that a request usually finds
one with its target prefix)."""
DRAW_BATCH = 4096
"""Requests drawn per numpy call."""
ID_RUN = 1 << 16
"""Fresh block ids made at a time."""


@dataclass(frozen=True)
class SessionOptions:
    rate_rps: float
    ready_after_s: float
    """Fixed part of the gap before a session's next turn (the SLA's TTFT P90)."""
    tpot_s: float
    """Per output token of the previous turn, added to the gap."""
    think_s: float = THINK_S


def _shapes(workload: Workload, rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """``n`` (input, output, target hit) draws from the workload."""
    if workload.input_tokens is None or workload.output_tokens is None:
        classes = workload_classes(workload)
        w = np.array([c.weight for c in classes])
        k = rng.choice(len(classes), size=n, p=w / w.sum())
        inp = np.array([c.input_tokens for c in classes])[k]
        out = np.array([c.output_tokens for c in classes])[k]
        hit = np.array([c.p_hit for c in classes])[k]
        return inp, out, hit
    u = rng.random((3, n))
    inp = frozen_dist(workload.input_tokens).ppf(u[0])
    out = frozen_dist(workload.output_tokens).ppf(u[1])
    assert workload.prefix_hit is not None  # the workload has distributions, so all three
    hit = frozen_dist(workload.prefix_hit).ppf(u[2])
    return np.asarray(inp), np.asarray(out), np.clip(np.asarray(hit), 0.0, 1.0)


class SessionSource:
    """The session generator of the module docstring (deterministic for a seed); ``n``
    requests, or without end when ``n`` is None.

    The service is taken to have been running before the first request: ``warm`` holds
    the contexts of the ``target_sessions`` sessions open at time 0, oldest first, for the
    simulator to place in its caches. Their last turns are spread uniformly over one turn
    gap before time 0 (the time since a session's last turn, in a stationary service), so
    the ones whose gap has passed are ready at once and the rest become ready over the
    first turn gap.
    """

    def __init__(
        self, workload: Workload, n: int | None, options: SessionOptions, seed: int
    ) -> None:
        self.workload, self.n, self.options = workload, n, options
        self._rng = np.random.default_rng(seed)
        self._round_rng = np.random.default_rng([seed, 1])  # the hits' rounding
        self.block_tokens = block_tokens(workload)
        self._contexts: dict[int, array | range] = {}
        self._waiting: list[tuple[float, int]] = []  # (ready at, session)
        self._next_block = 0
        self._run, self._run_start, self._run_end = array("i"), 0, 0  # ids made ahead
        inp, out, _ = _shapes(workload, self._rng, DRAW_BATCH)
        gap = options.ready_after_s + float(np.mean(out)) * options.tpot_s + options.think_s
        self.turn_gap_s = max(workload.turn_interval_s or SURPLUS * gap, gap)
        """Mean time between a session's turns."""
        self.target_sessions = opened = max(1, round(options.rate_rps * self.turn_gap_s))
        """Sessions open at every moment: rate x turn gap."""
        self.cold_share = 0.0
        """Share of the requests so far that opened a session (its mean turns: 1 / it)."""
        self.warm: list[array] = []
        ages = np.sort(self._rng.random(opened))[::-1] * self.turn_gap_s  # oldest first
        for sid in range(opened):
            length = max(1, round(float(inp[sid % len(inp)])))
            ids = self._new_blocks(-(-length // self.block_tokens))
            self._contexts[sid] = ids
            self.warm.append(ids)
            self._waiting.append((gap - float(ages[sid]), sid))
        heapq.heapify(self._waiting)
        self._open = list(range(opened))  # open sessions, for a uniform pick
        self._slot = {sid: sid for sid in self._open}  # a session's place in _open
        self._next_session = opened

    @property
    def open_sessions(self) -> int:
        return len(self._contexts)

    def _new_blocks(self, count: int) -> array:
        """The next ``count`` fresh block ids, cut from a run of upcoming ids made ahead
        (``ID_RUN`` at a time, by numpy: an ``array`` built from a ``range`` costs 80 ns an
        id, a slice of one almost nothing)."""
        start = self._next_block
        self._next_block = end = start + count
        if end > self._run_end:
            self._run_start, self._run_end = start, start + max(ID_RUN, count)
            self._run = array("i", np.arange(start, self._run_end, dtype=np.int32).tobytes())
        return self._run[start - self._run_start : end - self._run_start]

    def _open_session(self) -> int:
        """A new session, in the place of one closed at random (its context is dead)."""
        victim = self._open[int(self._rng.integers(len(self._open)))]
        del self._contexts[victim]
        sid, self._next_session = self._next_session, self._next_session + 1
        j = self._slot.pop(victim)
        self._open[j] = sid
        self._slot[sid] = j
        return sid

    def __iter__(self) -> Iterator[SimRequest]:
        for t, length, tokens_out, ids, _, _ in self.turns():
            yield t, length, tokens_out, ids

    def turns(self, ids: bool = True) -> Iterator[Turn]:
        """The requests (``SimRequest``), each with the session it continues or opens and
        the blocks it reuses from that session's context (0 for a cold request). Without
        ``ids``, each request's prefix is a ``range`` of its length in blocks, not its block
        ids: the same requests, sessions and reuse (a context's length is all the choice of
        a session reads), without building the contexts (a sixth of the time, for callers
        that only measure reuse: ``sampled_reuse``)."""
        rng, options, contexts, waiting = self._rng, self.options, self._contexts, self._waiting
        heappop, heappush, bisect_left = heapq.heappop, heapq.heappush, bisect.bisect_left
        block = self.block_tokens
        # ready sessions by context length in blocks: the lengths sorted, and per length
        # its sessions in the order they became ready (closed ones are dropped when met)
        lengths: list[int] = []
        ready: dict[int, list[int]] = {}
        t = 0.0
        done = cold = 0
        while self.n is None or done < self.n:
            m = DRAW_BATCH if self.n is None else min(DRAW_BATCH, self.n - done)
            gaps = rng.exponential(1.0 / options.rate_rps, m)
            arrivals = np.cumsum(np.concatenate(([t], gaps)))[1:].tolist()  # t += gap, in order
            inp, out, hit = _shapes(self.workload, rng, m)
            length = np.maximum(1, np.rint(inp))  # rint, like round, rounds half to even
            tokens_out = np.maximum(0, np.rint(out))
            blocks = -(-length // block)
            # whole blocks, rounded up with the chance of the fraction (its own stream):
            # the hits average the target even where every request has the same prompt
            # and hit (37.5 blocks rounded to 38 would raise a fixed 60% hit to 60.8%)
            exact = hit * length / block
            up = self._round_rng.random(m) < exact - np.floor(exact)
            want = np.minimum(np.floor(exact) + up, blocks)
            think = rng.exponential(options.think_s, m) if options.think_s > 0 else np.zeros(m)
            # when the session is ready for its next turn
            again = (options.ready_after_s + tokens_out * options.tpot_s + think).tolist()
            shapes = zip(
                arrivals,
                length.astype(int).tolist(),
                tokens_out.astype(int).tolist(),
                blocks.astype(int).tolist(),
                want.astype(int).tolist(),
                again,
                strict=True,
            )
            for t, length_i, out_i, blocks_i, want_i, gap in shapes:
                while waiting and waiting[0][0] <= t:
                    sid = heappop(waiting)[1]
                    if sid not in contexts:
                        continue  # closed while it waited
                    n = len(contexts[sid])
                    if n in ready:
                        ready[n].append(sid)
                    else:
                        ready[n] = [sid]
                        bisect.insort(lengths, n)
                # best fit: the shortest ready context that holds the target prefix (the
                # latest ready of that length), so that the long contexts stay for the long
                # targets (uniform choice used them up and left 2.4% of the paper workload's
                # target hit unmet); when none holds it, the longest (the earliest ready)
                sid = -1
                while want_i > 0 and lengths:
                    j = bisect_left(lengths, want_i)
                    n = lengths[j] if j < len(lengths) else lengths[-1]
                    sid = ready[n].pop() if j < len(lengths) else ready[n].pop(0)
                    if not ready[n]:
                        del ready[n]
                        lengths.remove(n)
                    if sid in contexts:
                        break
                    sid = -1
                prefix: array | range
                if sid >= 0:
                    prefix = contexts[sid][:want_i]
                else:
                    sid = self._open_session()
                    cold += 1
                    prefix = array("i")
                reused = len(prefix)
                if ids:
                    assert isinstance(prefix, array)  # every context is one with ids
                    prefix += self._new_blocks(blocks_i - reused)
                else:
                    prefix = range(blocks_i)
                contexts[sid] = prefix
                heappush(waiting, (t + gap, sid))
                yield t, length_i, out_i, prefix, sid, reused
            done += m
            self.cold_share = cold / done


REUSE_TURNS = 8
"""``sampled_reuse`` measures returns up to this many mean turn gaps."""
REUSE_REQUESTS = 160_000
"""...on at most about this many requests (a lower rate where the asked one is higher):
0.7 s and 180 MB at the paper workload's 64K-token contexts (167 req/s, 10 million block
uses), most of it the generator's."""


def reuse_top_rate(workload: Workload, options: SessionOptions, seed: int = 0) -> float:
    """The highest rate ``sampled_reuse`` samples at: the one that fits ``REUSE_REQUESTS``
    requests into ``2 x REUSE_TURNS`` turn gaps (a turn gap does not depend on the rate)."""
    probe = SessionSource(workload, 0, replace(options, rate_rps=1.0), seed)
    return REUSE_REQUESTS / (2 * REUSE_TURNS * probe.turn_gap_s)


def sampled_reuse(workload: Workload, options: SessionOptions, seed: int = 0) -> ReuseCurve:
    """The reuse times of the session generator's stream for ``workload``
    (``ReuseCurve``), over ``2 x REUSE_TURNS`` turn gaps, at ``options.rate_rps`` or
    ``reuse_top_rate``, whichever is lower.

    The time between a session's turns does not depend on the rate, but the time a ready
    context waits for the request that continues it does: a request continues the shortest
    ready context that holds its target prefix, and the more contexts are ready, the
    sooner a good fit comes. So the reuse ages shorten as the rate grows (the paper
    workload's mean age 55 s at 4 req/s, 51 s at 83, 49 s at 289), and a curve is only
    right near the rate it was sampled at (``Problem.reuse_at``).

    Measured per request from the turns' sessions (``ReuseCurve.of_sessions``), exact at
    any number of block uses."""
    rate = min(options.rate_rps, reuse_top_rate(workload, options, seed))
    source = SessionSource(workload, None, replace(options, rate_rps=rate), seed)
    horizon = REUSE_TURNS * source.turn_gap_s
    times: list[float] = []
    sessions: list[int] = []
    reused: list[int] = []
    blocks: list[int] = []
    for t, _, _, ids, sid, kept in takewhile(
        lambda r: r[0] <= 2 * horizon, source.turns(ids=False)
    ):
        times.append(t)
        sessions.append(sid)
        reused.append(kept)
        blocks.append(len(ids))
    return ReuseCurve.of_sessions(
        np.array(times),
        np.array(sessions, dtype=np.int64),
        np.array(reused, dtype=np.int64),
        np.array(blocks, dtype=np.int64),
        block_tokens=source.block_tokens,
    )


def block_tokens(workload: Workload) -> int:
    """The cache block of a sampled workload (``BLOCKS_PER_MEDIAN_INPUT``)."""
    inp = _shapes(workload, np.random.default_rng(0), 1001)[0]
    target = float(np.median(inp)) / BLOCKS_PER_MEDIAN_INPUT
    return int(min(BLOCK_TOKENS, max(16, 2 ** round(np.log2(max(target, 1.0))))))


def trace_requests(path: Path, *, skip_bad: bool) -> Iterator[SimRequest]:
    """The requests of a Mooncake JSONL trace, timed by its timestamps (relative to its
    first request). Malformed lines end the read with their line numbers, unless
    ``skip_bad``; an empty trace is an error."""
    bad: list[tuple[int, str]] = []
    first: float | None = None
    count = 0
    for ts_ms, length, tokens_out, ids in read_requests(
        path, block_tokens=BLOCK_TOKENS, skip_bad=skip_bad, bad=bad
    ):
        if bad and not skip_bad:
            continue  # read on, to name every bad line (up to read_requests' limit)
        first = ts_ms if first is None else first
        count += 1
        yield (ts_ms - first) / 1000.0, length, tokens_out, ids
    if bad and not skip_bad:
        shown = "; ".join(f"line {n}: {p}" for n, p in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise ArgumentError(
            "skip_bad", f"{path}: malformed lines: {shown}{more}; {{argument}} skips them"
        )
    if count == 0:
        raise InputError(f"{path}: the trace has no requests")
