"""The decode-side cache's hit curve: Che's approximation checked by hand at its two
limits (exponential returns: the linear rule; periodic: the LRU cliff), and Mattson's
stack distances against an LRU cache simulated block by block."""

from __future__ import annotations

import json
from collections import OrderedDict

import numpy as np
import pytest
from conftest import DATA, H100_H200

from pddplan.model.problem import REUSE_GRID_FLOOR_RPS
from pddplan.workload.hit_curve import ReuseCurve, che_hit_rate, lru_hit_curve, stack_distances

TRACE = DATA / "traces" / "conversation-2000.jsonl"
"""The first 2,000 requests of the Mooncake conversation trace."""


def _exponential(mean: float, n: int = 200_000) -> np.ndarray:
    """Exact quantiles of an exponential distribution (no sampling noise)."""
    return -mean * np.log1p(-(np.arange(n) + 0.5) / n)


@pytest.mark.parametrize("share", [0.1, 0.5, 0.9])
def test_exponential_returns_give_the_linear_rule(share):
    # r = 10 req/s, 1 MB a use, T = 60 s: the open sessions hold r T E[bytes] = 600 MB; a
    # cache of share x 600 MB hits share of the uses
    hit = che_hit_rate(share * 600e6, 10.0, 1e6, _exponential(60.0))
    assert hit == pytest.approx(share, abs=1e-3)


def test_periodic_returns_give_the_lru_cliff():
    returns = np.full(1000, 60.0)
    assert che_hit_rate(0.99 * 600e6, 10.0, 1e6, returns) == 0.0
    assert che_hit_rate(1.0 * 600e6, 10.0, 1e6, returns) == 1.0


def test_ended_sessions_cap_the_hit_rate():
    # a third of the uses end their session: at most two thirds can hit, and a cache that
    # outlives every return reaches it
    returns = np.concatenate([np.full(200, 10.0), np.full(100, np.inf)])
    assert che_hit_rate(1e12, 1.0, 1.0, returns) == pytest.approx(2 / 3)
    assert che_hit_rate(0.0, 1.0, 1.0, returns) == 0.0


def _lru_hits(requests: list[list[int]], capacity: int) -> float:
    """Blocks found by an LRU cache of ``capacity`` blocks, block by block: each request
    looks its blocks up, then they enter tail first (its first block most recent)."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits = uses = 0
    for r in requests:
        hits += sum(b in cache for b in r)
        uses += len(r)
        for b in reversed(r):
            cache[b] = None
            cache.move_to_end(b)
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits / uses


def test_stack_distances_by_hand():
    # requests [1, 2], [3], [2, 1]: the first enters as 2 then 1 (1 most recent), the second
    # adds 3; at the third, 2 has seen {1, 3} since (2) and 1 has seen {3} (1)
    d = stack_distances([[1, 2], [3], [2, 1]])
    assert list(d) == [np.inf, np.inf, np.inf, 2, 1]


def test_mattson_curve_matches_an_lru_cache_simulated_block_by_block():
    rng = np.random.default_rng(7)
    requests = [
        list(dict.fromkeys(rng.zipf(1.3, size=int(rng.integers(1, 20))) % 500).keys())
        for _ in range(2000)
    ]  # distinct blocks within a request, as prefix hashes are
    curve = lru_hit_curve(requests)
    assert curve.uses == sum(len(r) for r in requests)
    for capacity in (1, 5, 20, 100, 400, 600):
        assert curve.at(capacity) == pytest.approx(_lru_hits(requests, capacity), abs=1e-12)
    assert np.all(np.diff(curve.hits) >= 0) and np.all(np.diff(curve.blocks) > 0)


def test_mattson_curve_is_the_prefix_caches_replay_at_every_size():
    """On the conversation trace, the curve at each size is what the trace replay's prefix
    cache (leading runs, ``PrefixCache``) finds with that capacity, and it rises to the
    trace's reuse ceiling (every use but a block's first)."""
    from pddplan.workload.cache import PrefixCache

    with TRACE.open(encoding="utf-8") as f:
        requests = [json.loads(line)["hash_ids"] for line in f if line.strip()]
    uses = sum(len(r) for r in requests)
    curve = lru_hit_curve(requests)
    for capacity in (64, 1000, 10_000):
        cache = PrefixCache(capacity)
        found = sum(cache.replay(r) for r in requests)
        assert curve.at(capacity) == pytest.approx(found / uses, abs=1e-12), capacity
    ceiling = 1 - len({b for r in requests for b in r}) / uses
    assert curve.at(10**9) == pytest.approx(ceiling)


def test_workload_fit_emits_the_hit_curve():
    """``workload fit --hit-curve``: the curve doubles from 64 blocks, rises, and ends at the
    trace's reuse ceiling; without the flag there is none."""
    from conftest import run_main

    r = run_main("workload", "fit", str(TRACE), "--hit-curve", "--json")
    assert r.exit_code == 0, r.output
    curve = json.loads(r.stdout)["hit_curve"]
    tokens = [p["cache_tokens"] for p in curve]
    hits = [p["hit_rate"] for p in curve]
    assert tokens[0] == 64 * 512 and tokens[1] == 128 * 512
    assert hits == sorted(hits)
    with TRACE.open(encoding="utf-8") as f:
        requests = [json.loads(line)["hash_ids"] for line in f if line.strip()]
    uses = sum(len(r) for r in requests)
    assert hits[-1] == pytest.approx(1 - len({b for r in requests for b in r}) / uses)
    plain = run_main("workload", "fit", str(TRACE), "--json")
    assert json.loads(plain.stdout)["hit_curve"] is None


def test_reuse_curve_of_periodic_sessions_is_the_lru_cliff():
    # 5 sessions of one 100-token block each, every session back every 10 s (0.5 req/s):
    # LRU keeps them all with room for 5 blocks (r x tokens x T = 0.5 x 100 x 10 = 500
    # tokens), none with less
    stream = sorted((2.0 * i + 10.0 * k, [i]) for i in range(5) for k in range(40))
    curve = ReuseCurve.measure(stream, block_tokens=100)
    assert curve.tokens_per_request == 100
    assert curve.held_tokens(10.0, 0.5) == pytest.approx(500.0)
    assert curve.hit_share(499.0, 0.5) == 0.0
    assert curve.hit_share(501.0, 0.5) == 1.0
    assert curve.capacity_for(0.5, 0.5) == pytest.approx(500.0)
    # twice the rate needs twice the room (Che: occupancy is r x tokens x E[min(X, t)])
    assert curve.hit_share(999.0, 1.0) == 0.0 and curve.hit_share(1001.0, 1.0) == 1.0


def _session_stream(rate: float = 4.0, seconds: float = 2400.0):
    from pddplan.io.scenario import load_scenario
    from pddplan.workload.sessions import SessionOptions, SessionSource

    s = load_scenario(H100_H200).scenario
    options = SessionOptions(rate, s.sla.ttft_p90_s, s.sla.tpot_ms / 1000)
    source = SessionSource(s.workload, None, options, seed=3)
    stream = []
    for t, _, _, ids in source:
        if t > seconds:
            break
        stream.append((t, list(ids)))
    return stream, source


@pytest.mark.slow  # the default run stays under 90 s on a shared machine
@pytest.mark.parametrize("blocks", [2_000, 8_000, 16_000, 30_000])
def test_che_on_the_session_stream_matches_an_lru_replay(blocks):
    """Che's approximation on the measured reuse times against the exact LRU cache of the
    simulator (``ChainCache``) replaying the same stream: the share of reused contexts
    found, over the second half's requests, within 3 points."""
    from pddplan.simulation.cache import ChainCache

    stream, source = _session_stream()
    curve = ReuseCurve.measure(stream, block_tokens=source.block_tokens)
    cache = ChainCache(blocks)
    for ids in source.warm:
        cache.insert(ids)
    seen: set[int] = {b for ids in source.warm for b in ids}
    found = reused = 0
    for t, ids in stream:
        if t > curve.horizon_s and ids[0] in seen:
            reused += 1
            found += cache.lookup(ids) > 0
        cache.insert(ids)
        seen.update(ids)
    rate = len(stream) / stream[-1][0]
    predicted = curve.hit_share(blocks * source.block_tokens, rate)
    assert predicted == pytest.approx(found / reused, abs=0.03)


@pytest.mark.parametrize(("rate", "seconds"), [(0.5, 1200.0), (4.0, 1200.0), (16.0, 60.0)])
def test_the_per_turn_measure_equals_the_per_block_one(rate, seconds):
    """``ReuseCurve.of_sessions`` (per request, from the session ids) gives, to the bit,
    what ``measure`` (per block use, sorted by block id) gives on the same stream."""
    from itertools import takewhile

    from pddplan.io.scenario import load_scenario
    from pddplan.workload.sessions import SessionOptions, SessionSource

    s = load_scenario(H100_H200).scenario
    source = SessionSource(s.workload, None, SessionOptions(rate, 4.0, 0.05), seed=5)
    warm = [b for ids in source.warm for b in ids]
    turns = list(takewhile(lambda r: r[0] <= seconds, source.turns()))
    assert any(r[5] == 0 for r in turns) and any(r[5] > 0 for r in turns)  # cold and warm
    per_block = ReuseCurve.measure(
        ((t, ids) for t, _, _, ids, _, _ in turns), block_tokens=100, known=warm
    )
    rows = [(r[0], r[4], r[5], len(r[3])) for r in turns]
    columns = [np.array(c) for c in zip(*rows, strict=True)]
    per_turn = ReuseCurve.of_sessions(*columns, block_tokens=100)
    assert np.array_equal(per_turn.returns_s, per_block.returns_s)
    assert np.array_equal(per_turn.return_counts, per_block.return_counts)
    assert np.array_equal(per_turn.gaps_s, per_block.gaps_s)
    if seconds < 100:  # contexts from before the stream, first back in the second half
        assert np.isinf(per_turn.gaps_s).any()
    assert (per_turn.uses, per_turn.tokens_per_request, per_turn.horizon_s) == (
        per_block.uses,
        per_block.tokens_per_request,
        per_block.horizon_s,
    )


def test_turns_without_ids_are_the_same_requests_sessions_and_reuse():
    """``turns(ids=False)`` (what ``sampled_reuse`` reads) gives every request's time,
    lengths, session and reused blocks as ``turns()`` does, and its prefix as long."""
    from itertools import islice

    from pddplan.io.scenario import load_scenario
    from pddplan.workload.sessions import SessionOptions, SessionSource

    s = load_scenario(H100_H200).scenario
    options = SessionOptions(16.0, 4.0, 0.05)
    with_ids = SessionSource(s.workload, None, options, seed=5).turns()
    lengths = SessionSource(s.workload, None, options, seed=5).turns(ids=False)
    n = 0
    for a, b in islice(zip(with_ids, lengths, strict=True), 20_000):
        assert (a[0], a[1], a[2], len(a[3]), a[4], a[5]) == (
            b[0],
            b[1],
            b[2],
            len(b[3]),
            b[4],
            b[5],
        )
        assert isinstance(b[3], range)
        n += a[5] > 0
    assert n > 10_000  # most of them continue a session


def test_the_curve_is_sampled_near_the_rate_it_is_used_at():
    """Ages shorten as the rate grows (a larger pool of ready contexts), so one curve
    sampled at the scenario's 4 req/s keeps too few reuses at 30 req/s; the problem samples
    a grid (2^k req/s, whatever the scenario's rate), the planner takes the sample below and
    the evaluator blends the two around the rate."""
    from pddplan.io.scenario import load_scenario

    problem = load_scenario(H100_H200)
    rate = 24.0  # between the grid rates 16 and 32, 58% of the way in log rate
    capacity = 3e6 * rate  # tokens: where the curve is steep at this workload
    base = problem.reuse.hit_share(capacity, rate)
    below = problem.reuse_at(rate)
    assert below is problem.reuse_at(16.0) and below is not problem.reuse
    blend = problem.reuse_between(rate)
    assert blend.low is below and blend.high is problem.reuse_at(32.0)
    assert blend.weight == pytest.approx(np.log2(24 / 16))
    lo, hi = below.hit_share(capacity, rate), blend.high.hit_share(capacity, rate)
    assert base < lo < hi  # the measured direction the grid relies on
    assert blend.hit_share(capacity, rate) == pytest.approx(
        (1 - blend.weight) * lo + blend.weight * hi
    )
    assert problem.table_builds["reuse"] == 3  # 4, 16 and 32 req/s, each sampled once
    # the grid does not depend on the scenario's rate: one at 5 req/s samples the same rates
    other = problem.derive({"workload.arrival_rps": 5.0})
    assert other.reuse_between(rate).low is below and other.reuse is problem.reuse
    assert problem.table_builds["reuse"] == 3
    # on the grid, nothing to blend; below its floor, the floor's sample
    assert problem.reuse_between(2.0).weight == 0 and problem.reuse_between(2.0).low is not below
    floor = problem.reuse_at(REUSE_GRID_FLOOR_RPS)
    assert problem.reuse_at(1e-9) is floor and problem.reuse_between(1e-9).weight == 0
