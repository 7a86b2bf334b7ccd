"""How the simulator fills a prefill pass (``pddplan.simulation.prefill.fill_pass``), by hand:
started requests first, then the queue's head to the emptiest rank, the last one cut to fit,
a cache hit counted as prefilled (all but the last token at most)."""

from __future__ import annotations

from types import SimpleNamespace

from pddplan.simulation.prefill import PrefillInstance, PrefillSite, fill_pass
from pddplan.simulation.request import Req


def _instance(ranks: int, chunk: int, prefix_cache: str = "hbm") -> PrefillInstance:
    knobs = SimpleNamespace(prefix_cache=prefix_cache)
    inst = SimpleNamespace(
        chunk_tokens=chunk, attention_groups=ranks, cal=SimpleNamespace(knobs=knobs)
    )
    return PrefillInstance(inst, pool=0)  # type: ignore[arg-type]


class _Cache:
    """A prefix cache that holds the first ``hits[blocks[0]]`` blocks of each request."""

    def __init__(self, hits: dict[int, int]) -> None:
        self.hits = hits

    def lookup(self, blocks):
        return self.hits.get(blocks[0], 0)


def test_the_queue_head_goes_to_the_emptiest_rank_and_the_last_is_cut():
    site = PrefillSite(None)
    site.queue.extend(Req(i, 0.0, inp, 10, [i]) for i, inp in enumerate([300, 500, 400, 900]))
    pi = _instance(ranks=2, chunk=512)
    members, parts = fill_pass(site, pi, 1.5, block_tokens=16)
    # rank 0: 300, then (rank 1 has 500 > 300) 212 of request 2; rank 1: 500, then 12 of 3
    assert parts == [[(300.0, 0.0, 0.0), (212.0, 0.0, 0.0)], [(500.0, 0.0, 0.0), (12.0, 0.0, 0.0)]]
    assert [(r.i, take) for r, take, _ in members] == [(0, 300), (1, 500), (2, 212), (3, 12)]
    assert not site.queue and [len(q) for q in pi.ranks] == [2, 2]
    assert all(r.taken_s == 1.5 for r, _, _ in members)


def test_started_requests_go_first_and_a_hit_is_not_prefilled_again():
    site = PrefillSite(_Cache({7: 10, 8: 100}))
    pi = _instance(ranks=1, chunk=512, prefix_cache="host")
    started = Req(0, 0.0, 1000, 10, [1])
    started.prefilled_tokens = 800  # 200 to go
    pi.ranks[0].append(started)
    site.queue.extend([Req(1, 0.0, 600, 10, [7]), Req(2, 0.0, 1000, 10, [8])])
    members, parts = fill_pass(site, pi, 0.0, block_tokens=16)
    # 200 of the started one; request 1 hit 10 blocks = 160 tokens, 312 of its 440 fit
    assert parts == [[(200.0, 800.0, 0.0), (312.0, 160.0, 160.0)]]
    assert [r.i for r, _, _ in members] == [0, 1] and len(site.queue) == 1
    r = members[1][0]
    assert (r.p_hit_blocks, r.prefilled_tokens, r.hit_p) == (10, 160, 160 / 600)
    # a hit of the whole prompt still prefills its last token
    site.queue.clear()
    site.queue.append(Req(3, 0.0, 1000, 10, [8]))
    _, parts = fill_pass(site, _instance(ranks=1, chunk=512), 0.0, block_tokens=16)
    assert parts == [[(1.0, 999.0, 0.0)]]


def test_nothing_to_run_is_an_empty_pass():
    members, parts = fill_pass(PrefillSite(None), _instance(ranks=2, chunk=512), 0.0, 16)
    assert members == [] and parts == [[], []]
