"""Queueing formulas against textbook values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import H100_H200, PAPER_FLEETS
from hypothesis import given
from hypothesis import strategies as st

from pddplan.io.scenario import load_scenario
from pddplan.model.admission import first_decode_step_s
from pddplan.model.instance import PassFill, PrefillFigures
from pddplan.model.prefill_queue import (
    LoadedPrefill,
    PassInProgress,
    RankCompany,
    filled_service,
    pass_in_progress,
    prefill_wait_tail,
    rank_company,
)
from pddplan.model.queueing import erlang_c, wait_tail


def test_first_decode_step_by_hand():
    """A step of 10 ms + 0.1 ms per sequence, operating at 100 sequences (20 ms a step): 90%
    busy there is 0.9 x 100 / 0.020 = 4,500 tokens a second. The batch that makes them
    solves b / (0.010 + 0.0001 b) = 4,500: b = 45 / 0.55 = 81.8 sequences, stepping in
    18.18 ms; with half a step in progress before it, the first token comes 27.27 ms after
    admission. Idle (utilization 0), one step of one sequence (10.1 ms); a busier pool
    waits longer; the step at the full batch bounds it (1.5 x 20 ms)."""
    batches = np.arange(1, 101, dtype=float)
    steps = (batches, 0.010 + 0.0001 * batches)
    first = first_decode_step_s(100, 0.020, steps, 0.9)
    assert first == pytest.approx(1.5 * (0.010 + 0.0001 * 45 / 0.55), rel=1e-3)
    assert first == pytest.approx(0.02727, rel=1e-3)
    assert first_decode_step_s(100, 0.020, steps, 0.0) == pytest.approx(0.0101)  # idle
    busier = first_decode_step_s(100, 0.020, steps, 0.99)
    assert first < busier < 0.030


def test_single_server_erlang_c_is_rho():
    """M/M/1: an arrival waits with probability rho."""
    assert erlang_c(1, 0.7) == pytest.approx(0.7)


def test_erlang_c_textbook_value():
    """c = 2, a = 1 erlang: B(2,1) = 1/5, C = B / (1 - rho (1 - B)) = 0.2 / 0.6 = 1/3."""
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)


def test_mm1_wait_tail():
    """M/M/1, rho 0.5, service 1 s: P(W > t) = 0.5 exp(-0.5 t)."""
    assert wait_tail(2.0, servers=1, utilization=0.5, mean_service_s=1.0) == pytest.approx(
        0.5 * math.exp(-1)
    )
    assert wait_tail(-1.0, servers=1, utilization=0.5, mean_service_s=1.0) == 1.0
    assert wait_tail(5.0, servers=1, utilization=1.0, mean_service_s=1.0) == 1.0


def test_deterministic_service_halves_the_decay_time():
    """Allen-Cunneen: cs2 = 0 doubles the decay rate of the tail."""
    exp_tail = wait_tail(1.0, servers=4, utilization=0.8, mean_service_s=1.0, service_cv2=1.0)
    det_tail = wait_tail(0.5, servers=4, utilization=0.8, mean_service_s=1.0, service_cv2=0.0)
    assert det_tail == pytest.approx(exp_tail)


@given(c=st.integers(1, 200), rho=st.floats(0.01, 0.99))
def test_bigger_pools_wait_less_at_the_same_utilization(c, rho):
    """Economies of scale: at equal utilization, more servers means fewer waits."""
    assert erlang_c(c + 1, rho * (c + 1)) <= erlang_c(c, rho * c) + 1e-12


def test_wait_plus_an_exponential_link_delay_by_hand():
    """P(W + X > t) with X exponential: no wait (an idle pool) leaves e^(-t/m); no X is the
    plain M/G/c tail; with both, the hypoexponential mixture, checked by sampling."""
    import numpy as np

    from pddplan.model.network import TcpPath, wan_queueing_mean_s
    from pddplan.model.prefill_queue import prefill_wait_tail
    from pddplan.model.queueing import wait_tail_many

    t = np.array([-1.0, 0.0, 0.5, 2.0])
    idle = prefill_wait_tail(
        t, instances=4, groups=1, utilization=1e-9, mean_service_s=1.0, service_cv2=1.0,
        extra_mean_s=0.5,
    )  # fmt: skip
    assert idle == pytest.approx([1.0, 1.0, math.exp(-1.0), math.exp(-4.0)], rel=1e-6)
    plain = wait_tail_many(t, servers=4, utilization=0.8, mean_service_s=1.0, service_cv2=1.0)
    same = prefill_wait_tail(
        t, instances=4, groups=1, utilization=0.8, mean_service_s=1.0, service_cv2=1.0
    )
    assert same == pytest.approx(plain)
    # attention groups: a request waits at one instance, for its 2 groups, each holding a
    # request for 2 x 1 s at full load; the pool's size does not matter
    groups = wait_tail_many(t, servers=2, utilization=0.8, mean_service_s=2.0, service_cv2=1.0)
    for instances in (1, 4):
        at_one = prefill_wait_tail(
            t, instances=instances, groups=2, utilization=0.8, mean_service_s=1.0,
            service_cv2=1.0,
        )  # fmt: skip
        assert at_one == pytest.approx(groups)
    both = prefill_wait_tail(
        np.array([1.0]), instances=1, groups=1, utilization=0.5, mean_service_s=1.0,
        service_cv2=1.0, extra_mean_s=0.25,
    )[0]  # fmt: skip
    rng = np.random.default_rng(0)
    n = 400_000
    # M/M/1 at rho 0.5: waits w.p. 0.5, then exponential with rate mu - lambda = 0.5
    waits = np.where(rng.random(n) < 0.5, rng.exponential(2.0, n), 0.0)
    sampled = np.mean(waits + rng.exponential(0.25, n) > 1.0)
    assert both == pytest.approx(sampled, abs=0.003)
    # and a normal company delay D on top: the exGaussian closed form against sampling
    company = prefill_wait_tail(
        np.array([1.0, 2.0, 3.5]), instances=1, groups=1, utilization=0.5, mean_service_s=1.0,
        service_cv2=1.0, extra_mean_s=0.25, company_mean_s=0.8, company_var_s2=0.09,
    )  # fmt: skip
    d = rng.normal(0.8, 0.3, n)
    total = waits + rng.exponential(0.25, n) + d
    assert company == pytest.approx([np.mean(total > x) for x in (1.0, 2.0, 3.5)], abs=0.003)
    # D alone (an idle pool, no link delay): the normal tail; variance 0: a fixed shift
    alone = prefill_wait_tail(
        np.array([0.5, 0.8, 1.1]), instances=4, groups=1, utilization=1e-9,
        mean_service_s=1.0, service_cv2=1.0, company_mean_s=0.8, company_var_s2=0.09,
    )  # fmt: skip
    assert alone == pytest.approx([0.8413447, 0.5, 0.1586553], abs=1e-6)
    shifted = prefill_wait_tail(
        np.array([0.5, 1.0]), instances=4, groups=1, utilization=1e-9, mean_service_s=1.0,
        service_cv2=1.0, extra_mean_s=0.5, company_mean_s=0.5,
    )  # fmt: skip
    assert shifted == pytest.approx([1.0, math.exp(-1.0)], rel=1e-6)
    # the link's share of a transfer: 1 GB at 1 GB/s on a link half busy waits 1 s more
    # when one flow can fill the link (plain processor sharing)
    one_flow = TcpPath(rtt_s=0.001, loss_rate=0.0, window_max_bytes=1e12)
    assert wan_queueing_mean_s(
        np.array([1e9]), path=one_flow, goodput_bytes_per_s=1e9, utilization=0.5
    ) == pytest.approx([1.0])


def _one_class(room: float) -> PrefillFigures:
    """One class: 100 new tokens, 1 s of service and of latency, one pass."""
    return PrefillFigures(
        latency=np.array([1.0]),
        service=np.array([1.0]),
        pass_s=np.array([1.0]),
        pass_owner=np.array([0]),
        new_tokens=np.array([100.0]),
        room_tokens=np.array([room]),
    )


def test_rank_company_by_hand():
    """M/D/1 at u = 0.5, service 1 s: an arrival waits w.p. 0.5, mean (1 + 0) / 2 x 1 /
    (1 - 0.5) = 1 s; 0.5 req/s arrive meanwhile, so N is geometric with p = 1 / (1 + 0.5)
    = 2/3. A pass of 100 tokens with room for 300 more (3 s of company at 1 s per 100
    tokens): N is cut at 3, P(N >= 3) = 1/27 on the last atom."""
    rank = rank_company(
        _one_class(300.0), np.array([1.0]), utilization=0.5, instances=1, service_cv2=0.0
    )
    assert rank is not None
    assert rank.probs == pytest.approx([2 / 3, 2 / 9, 2 / 27, 1 / 27])
    assert rank.delays[:, 0] == pytest.approx([0, 1, 2, 3])
    # P(W + R > 2) = 0.5 sum_n P(N = n) P(Exp(1) > 2 - d_n), the rest without waiting: 0
    tail = prefill_wait_tail(
        np.array([2.0]),
        instances=1,
        groups=1,
        utilization=0.5,
        mean_service_s=1.0,
        service_cv2=0.0,
        rank=rank,
    )
    expected = 0.5 * (2 / 3 * math.exp(-2) + 2 / 9 * math.exp(-1) + 2 / 27 + 1 / 27)
    assert tail[0] == pytest.approx(expected)


def test_rank_company_stops_where_the_room_is_full():
    """No room: nobody joins (one atom, no delay); no rooms known: no company at all."""
    rank = rank_company(
        _one_class(0.0), np.array([1.0]), utilization=0.5, instances=1, service_cv2=0.0
    )
    assert rank is not None and rank.probs == pytest.approx([1.0])
    assert rank.delays[:, 0] == pytest.approx([0.0])
    bare = _one_class(0.0)._replace(room_tokens=None)
    assert rank_company(bare, np.array([1.0]), utilization=0.5, instances=1, service_cv2=0) is None


@given(st.floats(0.05, 0.95), st.integers(1, 8))
def test_company_only_adds_to_the_tail(u, instances):
    """Company behind a request can only lengthen its prefill: the tail with it is at
    least the tail without, at every time."""
    figures = _one_class(700.0)
    rank = rank_company(figures, np.array([1.0]), utilization=u, instances=instances, service_cv2=0)
    t = np.linspace(0.0, 20.0, 41)
    kw = dict(instances=instances, groups=1, utilization=u, mean_service_s=1.0, service_cv2=0.0)
    assert np.all(prefill_wait_tail(t, rank=rank, **kw) >= prefill_wait_tail(t, **kw) - 1e-12)


def test_rank_company_bins_long_tails_no_lighter():
    """Near saturation (u = 0.98) with room for 10,000 others the count has hundreds of
    atoms: binned to at most RANK_COMPANY_ATOMS, each bin's mass at its largest count, so
    the binned mean delay is at least the exact geometric one (capped at the room)."""
    from pddplan.model.prefill_queue import RANK_COMPANY_ATOMS

    rank = rank_company(
        _one_class(1e6), np.array([1.0]), utilization=0.98, instances=1, service_cv2=0.0
    )
    assert rank is not None and len(rank.probs) <= RANK_COMPANY_ATOMS
    assert rank.probs.sum() == pytest.approx(1.0)
    p = 1 / (1 + 0.98 * (1 / 2) / (1 - 0.98))  # lambda m: M/D/1 mean wait 0.5 / (1 - u)
    assert float(rank.probs @ rank.delays[:, 0]) >= (1 - p) / p * 0.999


def test_md_wait_with_a_flat_step_is_erlang_c():
    """Every batch at the same step: the chain's departure rate is n mu, Erlang C's; two
    instances of 4 slots at u = 0.75 are C(8, 6) (0.3570 by the recursion B_n = a B_(n-1) /
    (n + a B_(n-1)))."""
    from pddplan.model.admission import md_wait_probability

    flat = (np.array([1.0, 4.0]), np.array([0.03, 0.03]))
    got = md_wait_probability(4, 2, flat, np.array([0.75]))[0]
    blocking = 1.0
    for n in range(1, 9):
        blocking = 6 * blocking / (n + 6 * blocking)
    expected = blocking / (1 - 0.75 * (1 - blocking))
    assert got == pytest.approx(expected) and got == pytest.approx(erlang_c(8, 6.0))
    assert expected == pytest.approx(0.3570, abs=1e-4)


def test_md_wait_is_shorter_where_part_full_batches_step_faster():
    """One instance of 2 slots at u = 0.5, one sequence stepping twice as fast as two:
    mu(n) = (n / 2) (step(2) / step(n)) lambda / 0.5, so mu(1) = mu(2) = 2 lambda (Erlang:
    mu(1) = lambda); pi = 1, 0.5, 0.25, then geometric at 0.5 (0.25 + 0.125 + ... = 0.5
    queued or full): P(wait) = 0.5 / (1 + 0.5 + 0.5) = 0.25, against Erlang C's 1/3."""
    from pddplan.model.admission import md_wait_probability

    steps = (np.array([1.0, 2.0]), np.array([0.01, 0.02]))
    assert md_wait_probability(2, 1, steps, np.array([0.5]))[0] == pytest.approx(0.25)
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)  # slower without the speed-up


def _one_pass_of_100(**width: float) -> PrefillFigures:
    """One class of one 100-token chunk: a 1 s pass alone, 0.5 s of an instance in a full
    pass; a ``PassFill`` of one server (``fill=`` or ``whole=`` its width in tokens) linear
    from 1 s with no company to 0.5 s with a full pass."""
    ((field, tokens),) = width.items()
    table = PassFill(
        grid=np.array([0.0, tokens]),
        first=np.array([[1.0, 0.5]]),
        rest=np.array([[0.0, 0.0]]),
        chunk=tokens,
        groups=1,
    )
    return PrefillFigures(
        latency=np.array([1.0]),
        service=np.array([0.5]),
        pass_s=np.array([1.0]),
        pass_owner=np.array([0]),
        new_tokens=np.array([100.0]),
        room_tokens=np.array([0.0]),
        **{field: table},
    )


def test_filled_service_by_hand() -> None:
    """One class, one pass of a full chunk (t = chunk): 1 s alone, 0.5 s in a full pass
    (its share of the fixed costs), a 1 s pass. At lambda = ln 2 a pass in progress brings
    company with probability 1 - e^(-lambda) = 1/2, so a request that finds the instance
    busy costs 0.75 s; U = lambda x 1 / (1 + lambda x 0.25) (``filled_service``), and the
    service 1 - 0.25 U."""
    figures = _one_pass_of_100(fill=100.0)
    lam = math.log(2.0)
    u = lam / (1.0 + lam / 4.0)
    got = filled_service(figures, np.array([1.0]), lam)
    assert got.utilization == pytest.approx(u, rel=1e-9)  # 0.5908
    assert got.service[0] == pytest.approx(1.0 - 0.25 * u, rel=1e-9)
    # no fill table: the full-pass service
    plain = filled_service(figures._replace(fill=None), np.array([1.0]), lam)
    assert plain.service[0] == 0.5 and plain.utilization == pytest.approx(0.5 * lam)


def test_fill_table_ends_at_full_passes() -> None:
    """A chunk with a full chunk of company carries a full pass's share: the fill table's
    last point is the full-pass service, and company only ever lowers the service."""
    problem = load_scenario(H100_H200)
    figures = problem.prefill_figures("h100-sxm", 16, True)
    fill = figures.fill
    assert fill is not None
    np.testing.assert_allclose(fill.first[:, -1] + fill.rest[:, -1], figures.service, rtol=1e-12)
    assert (np.diff(fill.first, axis=1) <= 1e-15).all()


def test_a_backlog_drains_at_the_full_pass_service():
    """One server at 80% busy, mean service 1 s, cs2 1: P(W > t) = 0.8 e^(-t / 5) (mean
    wait of those that wait (1 + 1) x 1 / (2 x 0.2) = 5 s). Drained by full passes of
    0.5 s at 50% load, those that wait wait (1 + 1) x 0.5 / (2 x 0.5) = 1 s on average,
    and as many wait (the busy share)."""
    import math

    import numpy as np

    from pddplan.model.prefill_queue import prefill_wait_tail

    t = np.array([2.0])
    kwargs = dict(instances=1, groups=1, utilization=0.8, mean_service_s=1.0, service_cv2=1.0)
    assert prefill_wait_tail(t, **kwargs)[0] == pytest.approx(0.8 * math.exp(-2 / 5))
    drained = prefill_wait_tail(t, drain=(0.5, 0.5), **kwargs)[0]
    assert drained == pytest.approx(0.8 * math.exp(-2 / 1))


def _two_groups_one_pass() -> PrefillFigures:
    """One class of one chunk of 100 tokens, a 1 s pass alone, on an instance of two
    attention groups of 100 tokens a pass: a full pass (one such chunk on each group) costs
    each request 0.5 s of the instance. ``whole`` is the instance as one server: 1 s with
    no company, 0.75 s with a chunk of company, 0.5 s with two."""
    return _one_pass_of_100(whole=200.0)


def test_pass_in_progress_by_hand() -> None:
    """``_two_groups_one_pass`` at lambda = ln 2 per instance. A 1 s pass in progress brings
    N ~ Poisson(ln 2) requests: none w.p. 1/2, one w.p. ln2 / 2, more w.p. the rest, so a
    request that finds the instance busy costs 0.5 + 0.75 ln2 / 2 + 0.5 (1/2 - ln2 / 2) s;
    busy U = lambda / (1 + lambda (1 - that)). The rest of a 1 s pass is 0.5 s (1.2 x that
    stretched). Company: the instance holds one more chunk beside the request's own, so one
    request of company at most, w.p. 1 - e^(-ln 2) = 1/2, adding a full pass's 0.5 s."""
    lam = math.log(2.0)
    busy_cost = 0.5 + 0.75 * lam / 2 + 0.5 * (0.5 - lam / 2)
    got = pass_in_progress(
        _two_groups_one_pass(), np.array([1.0]), lam, groups=2, company_service_s=0.5
    )
    assert got is not None
    assert got.busy == pytest.approx(lam / (1 + lam * (1 - busy_cost)), rel=1e-9)  # 0.623
    assert got.rest_s == pytest.approx(0.5)
    np.testing.assert_allclose(got.company.probs, [0.5, 0.5])
    np.testing.assert_allclose(got.company.delays, [[0.0], [0.5]])
    loaded = LoadedPrefill(mean_s=np.array([1.2]), var_s2=np.array([0.0]))  # 1.2 x alone
    stretched = pass_in_progress(
        _two_groups_one_pass(), np.array([1.0]), lam, groups=2, company_service_s=0.5,
        loaded=loaded,
    )  # fmt: skip
    assert stretched is not None and stretched.rest_s == pytest.approx(0.6)
    # one attention group, or no load: nothing of the kind
    one = pass_in_progress(
        _two_groups_one_pass(), np.array([1.0]), lam, groups=1, company_service_s=0.5
    )
    idle = pass_in_progress(
        _two_groups_one_pass(), np.array([1.0]), 0.0, groups=2, company_service_s=0.5
    )
    assert one is None and idle is None


def test_a_free_group_waits_for_the_pass_in_progress_by_hand() -> None:
    """One instance whose groups are all busy w.p. C = 0.3 (M/G/1 at 30%, mean service 1 s,
    cs2 1: those wait (1 + 1) x 1 / (2 x 0.7) s on average) and which is in a pass w.p.
    0.8: a further 0.5 of arrivals wait only for the rest of the pass, 0.5 s on average.
    P(W > t) = 0.3 e^(-0.7 t) + 0.5 e^(-2 t); company that always adds 0.25 s once the
    request waits shifts both waiting terms by 0.25 s."""
    t = np.array([0.0, 0.5, 2.0])
    kwargs = dict(instances=1, groups=1, utilization=0.3, mean_service_s=1.0, service_cv2=1.0)
    none = RankCompany(np.array([1.0]), np.array([[0.0]]))
    in_pass = PassInProgress(busy=0.8, rest_s=0.5, company=none)
    got = prefill_wait_tail(t, in_pass=in_pass, **kwargs)
    np.testing.assert_allclose(got[1:], 0.3 * np.exp(-0.7 * t[1:]) + 0.5 * np.exp(-2 * t[1:]))
    assert prefill_wait_tail(t, **kwargs)[1:] == pytest.approx(0.3 * np.exp(-0.7 * t[1:]))
    fixed = PassInProgress(0.8, 0.5, RankCompany(np.array([1.0]), np.array([[0.25]])))
    late = prefill_wait_tail(t, in_pass=fixed, **kwargs)
    s = np.maximum(t - 0.25, 0.0)
    np.testing.assert_allclose(late[1:], 0.3 * np.exp(-0.7 * s[1:]) + 0.5 * np.exp(-2 * s[1:]))
    # busy below C: no one waits for the pass alone
    low = prefill_wait_tail(t, in_pass=PassInProgress(0.2, 0.5, none), **kwargs)
    np.testing.assert_allclose(low, prefill_wait_tail(t, **kwargs))


def test_the_whole_instance_fill_runs_from_alone_to_full_passes() -> None:
    """The instance as one server: with no company a first chunk costs its pass alone, with
    the instance's every chunk full of company a full pass's share (the service); company
    only lowers a request's cost."""
    problem = load_scenario(PAPER_FLEETS)
    figures = problem.prefill_figures("h100-sxm", 16, False)
    whole = figures.whole
    assert whole is not None and figures.fill is not None
    assert whole.groups == 1 and whole.chunk == figures.fill.chunk * figures.fill.groups
    first = np.unique(figures.pass_owner, return_index=True)[1]
    np.testing.assert_allclose(whole.first[:, 0], figures.pass_s[first], rtol=1e-12)
    np.testing.assert_allclose(whole.first[:, -1] + whole.rest[:, -1], figures.service, rtol=1e-12)
    assert (np.diff(whole.first, axis=1) <= 1e-15).all()


def test_the_smooth_excess_is_its_log_form_where_either_factor_leaves_floating_point():
    """``exp(a) Phi(x)`` as a product where both factors are finite, as ``exp(a + log Phi(x))``
    where ``exp(a)`` overflows or ``Phi(x)`` underflows; equal to 1e-12 relative."""
    from scipy import special

    from pddplan.model.prefill_queue import _smooth_excess

    rate = np.array([0.5, 2.0, 40.0, 40.0, 3.0])
    sd = np.array([0.2, 1.0, 1.0, 2.0, 0.1])
    # the 3rd: exp(600) x Phi(-35), both finite; the 4th: exp(3600) overflows (the log form)
    s = np.array([0.3, -1.0, 5.0, -10.0, 4.0])
    z = s / sd
    want = np.exp(-rate * s + 0.5 * (rate * sd) ** 2 + special.log_ndtr(z - rate * sd))
    got = _smooth_excess(rate, s, sd, z)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_normal_cdf_is_scipys_to_the_bit_where_it_is_skipped():
    """``_ndtr`` skips ``scipy.special.ndtr`` where it is 1.0 exactly (and a tail's normal
    part where ``ndtr(-z)`` is 0.0 exactly): the thresholds hold, and the values are the
    same bits on either side of them, NaN and infinities included."""
    from scipy import special

    from pddplan.model.prefill_queue import NDTR_ONE_FROM, NDTR_ZERO_FROM, _ndtr

    assert special.ndtr(NDTR_ONE_FROM) == 1.0 and special.ndtr(-NDTR_ZERO_FROM) == 0.0
    assert special.ndtr(np.nextafter(8.29, 0)) < 1.0  # the threshold is not far above
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.normal(0.0, 6.0, 4999),
            np.linspace(8.0, 8.6, 601),
            np.linspace(-40.0, -36.0, 401),
            [np.nan, np.inf, -np.inf, NDTR_ONE_FROM, np.nextafter(NDTR_ONE_FROM, 0)],
        ]
    ).reshape(-1, 2, 7)
    # mostly below the threshold (every entry evaluated) and mostly above it (gathered)
    for each in (x, np.concatenate([x.ravel(), np.linspace(8.3, 50.0, 30_000)])):
        got = _ndtr(each)
        assert got.shape == each.shape
        assert np.array_equal(got, special.ndtr(each), equal_nan=True)
    assert (special.ndtr(-np.linspace(NDTR_ZERO_FROM, 60.0, 1001)) == 0.0).all()


def test_a_tail_with_company_is_the_same_entry_by_entry():
    """Entries where an atom of the company spends the whole budget are not computed (their
    tail is 1): every entry of a vector of budgets, some noisy and some not, with the link's
    queueing on some, is the tail of that budget alone, to the bit."""
    rank = rank_company(
        _one_class(700.0), np.array([1.0]), utilization=0.8, instances=2, service_cv2=0.0
    )
    assert rank is not None and rank.delays[:, 0].max() > 2.0  # budgets below some delays
    t = np.array([0.5, 1.0, 2.0, 3.5, 6.0, 9.0])
    var = np.array([0.0, 0.04, 0.0, 0.3, 1.0, 0.0])
    extra = np.array([0.0, 0.2, 0.5, 0.0, 1.5, 0.1])
    kw = dict(instances=2, groups=1, utilization=0.8, mean_service_s=1.0, service_cv2=0.0)

    def tail(i: slice) -> np.ndarray:
        return prefill_wait_tail(
            t[i], company_mean_s=0.3, company_var_s2=var[i], extra_mean_s=extra[i], rank=rank, **kw
        )

    whole = tail(slice(None))
    alone = np.concatenate([tail(slice(i, i + 1)) for i in range(len(t))])
    assert np.array_equal(whole, alone)
    assert np.all(np.diff(whole) <= 0) and 0 < whole[-1] < whole[0] <= 1
