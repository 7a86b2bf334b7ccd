"""Request classes: weights, representatives, and the hit coupling."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SMALL, problem_of

import pddplan
from pddplan.model.routing import relay_shares, relay_split
from pddplan.plan.space import default_singular_cuts
from pddplan.spec.distributions import Bucket, HitDist, LengthDist
from pddplan.spec.scenario import Workload
from pddplan.workload.classes import output_class_edges, request_classes, workload_classes
from pddplan.workload.distributions import frozen_dist

EDGES = (0.0, 0.5, 0.95, 1.0)
HITS = HitDist(
    dist="buckets", buckets=[Bucket(lo=0.0, hi=0.5, share=0.2), Bucket(lo=0.95, hi=1.0, share=0.8)]
)


def test_fixed_lengths_and_bucketed_hits_by_hand():
    """With edges at the buckets' bounds, two classes: 20% at hit 0.25 and 80% at 0.975
    (the empty 0.5-0.95 bucket is dropped)."""
    classes = request_classes(
        input_tokens=LengthDist(dist="fixed", value=1000),
        output_tokens=LengthDist(dist="fixed", value=100),
        prefix_hit=HITS,
        hit_edges=EDGES,
    )
    assert [(c.weight, c.p_hit, c.md_hit) for c in classes] == [
        pytest.approx((0.2, 0.25, 0.25)),
        pytest.approx((0.8, 0.975, 0.975)),
    ]
    assert all(c.input_tokens == 1000 and c.output_tokens == 100 for c in classes)


def test_md_hit_is_coupled_by_quantile():
    """MD's cache is uniformly 0.5-0.9: the 20% of requests with the lowest P hit get MD's
    lowest 20% (0.5-0.58, mean 0.54); the other 80% get 0.58-0.9 (mean 0.74)."""
    md = HitDist(dist="buckets", buckets=[Bucket(lo=0.5, hi=0.9, share=1.0)])
    classes = request_classes(
        input_tokens=LengthDist(dist="fixed", value=1000),
        output_tokens=LengthDist(dist="fixed", value=100),
        prefix_hit=HITS,
        md_prefix_hit=md,
        hit_edges=EDGES,
    )
    assert [c.md_hit for c in classes] == pytest.approx([0.54, 0.74], abs=1e-3)


def test_weights_sum_to_one_and_preserve_means():
    inp = LengthDist(dist="lognormal", median=4000, sigma=0.8)
    out = LengthDist(dist="lognormal", median=300, sigma=0.6)
    hit = HitDist(dist="beta", mean=0.6, concentration=3)
    classes = request_classes(input_tokens=inp, output_tokens=out, prefix_hit=hit)
    assert sum(c.weight for c in classes) == pytest.approx(1.0)
    assert sum(c.weight * c.p_hit for c in classes) == pytest.approx(0.6, abs=0.002)
    mean_in = 4000 * 2.718281828 ** (0.8**2 / 2)  # lognormal mean: median x exp(sigma^2 / 2)
    assert sum(c.weight * c.input_tokens for c in classes) == pytest.approx(mean_in, rel=0.01)
    assert len({c.key for c in classes}) == len(classes)


def test_default_edges_split_the_tail_finely():
    """The default edges cut 0-0.5 at 0.2 and 0.4 (three tail classes: 8%, 8%, 4%) and
    0.95-1 at 0.99 (64% and 16%)."""
    classes = request_classes(
        input_tokens=LengthDist(dist="fixed", value=1000),
        output_tokens=LengthDist(dist="fixed", value=100),
        prefix_hit=HITS,
    )
    assert [c.weight for c in classes] == pytest.approx([0.08, 0.08, 0.04, 0.64, 0.16])


def _agent_outputs() -> Workload:
    """pdd-paper-fleets' output lengths (lognormal, median 400, sigma 0.8), uncut."""
    return Workload(
        arrival_rps=1.0,
        input_tokens=LengthDist(dist="fixed", value=64000),
        output_tokens=LengthDist(dist="lognormal", median=400, sigma=0.8),
        prefix_hit=HITS,
    )


def test_default_singular_cuts_fall_at_the_output_slices_ends():
    """The output classes are the 0-0.5, 0.5-0.9, 0.9-0.99 and 0.99-1 quantile slices: their
    ends are 400 e^(0.8 z) for z = 0, 1.2816, 2.3263: 400, 1,115.1 and 2,572.3 tokens. The
    singular cuts are the first two, rounded down; without the ends, the two shortest
    classes' means rounded up: 400 e^(0.32) Phi(-0.8) / 0.5 = 233.4 and
    400 e^(0.32) (Phi(0.4816) - Phi(-0.8)) / 0.4 = 651.5."""
    workload = _agent_outputs()
    edges = output_class_edges(workload)
    assert edges == pytest.approx((400.0, 1115.1, 2572.3), abs=0.1)
    out = np.array([c.output_tokens for c in workload_classes(workload)])
    assert default_singular_cuts(out, edges) == (0, 400, 1115)
    assert default_singular_cuts(out) == (0, 234, 652)
    one = {"weight": 1.0, "input_tokens": 100, "output_tokens": 50, "p_hit": 0.5}
    assert output_class_edges(Workload(arrival_rps=1.0, classes=(one,))) == ()  # one length


def test_the_router_and_the_model_send_the_same_share_singular():
    """The simulator's router finishes a request on relay decode when its own output is at
    most the cut; the model sends a class there when its mean is. At the slice ends both
    send 50% and 90% of requests; at the mean of the 0.5-0.9 class (652 tokens) the model
    sends 90%, the router P(out <= 652) = Phi(ln(652 / 400) / 0.8) = 72.9%."""
    workload = _agent_outputs()
    classes = workload_classes(workload)
    w = np.array([c.weight for c in classes])
    out = np.array([c.output_tokens for c in classes])
    cdf = frozen_dist(workload.output_tokens).cdf
    for cut in default_singular_cuts(out, output_class_edges(workload))[1:]:
        assert float(w @ (out <= cut)) == pytest.approx(float(cdf(cut)), abs=1e-3)
    assert float(w @ (out <= 652)) == pytest.approx(0.9)
    assert float(cdf(652)) == pytest.approx(0.729, abs=1e-3)


def test_a_relay_threshold_splits_a_class_as_the_router_does(hardware):
    """The router compares each request's payload, not its class's mean. One class of
    1,000-token requests whose hits are uniform on 0.90-0.95: its 16 spread hits are
    0.90 + 0.05 (i + 0.5) / 16. A threshold at the class's mean payload (hit 0.925)
    relays the 8 points below that hit; one at hit 0.91's payload the 3 below 0.91
    (i + 0.5 < 3.2); None relays nothing; 0 everything."""
    base = pddplan.load_scenario(SMALL).scenario
    uniform = HitDist(dist="buckets", buckets=[Bucket(lo=0.9, hi=0.95, share=1.0)])
    workload = base.workload.model_copy(
        update={"input_tokens": LengthDist(dist="fixed", value=1000), "prefix_hit": uniform}
    )
    problem = problem_of(base.model_copy(update={"workload": workload}), hardware)
    hit = problem.arrays.md_hit
    assert hit == pytest.approx(0.925)  # every class: one hit slice, one input length
    kv = problem.kv
    at = [kv.transfer_bytes(1000, h) / 1e6 for h in (0.925, 0.91)]
    shares = relay_shares(problem, hit, [None, *at, 0.0])
    assert shares[:, 0] == pytest.approx([0.0, 8 / 16, 3 / 16, 1.0])
    # a decode-side cache that keeps half the reuse halves every request's hit
    halved = relay_shares(problem, hit / 2, [kv.transfer_bytes(1000, 0.4625) / 1e6])
    assert halved[:, 0] == pytest.approx(0.5)  # hits 0.45-0.475 now, 0.4625 the middle


def test_the_requests_kept_direct_are_the_smaller_payloads(hardware):
    """The same uniform hit slice (0.90-0.95, 1,000 tokens): a threshold at the mean
    payload keeps the 8 points of hit >= 0.925 direct, hits 0.9 + 0.05 (i + 0.5) / 16 for
    i = 8..15: mean hit 0.9375, and their payloads' standard deviation is
    bpt x 1,000 x 0.05 x (1/16) sqrt((8^2 - 1) / 12) (8 evenly spaced points)."""
    base = pddplan.load_scenario(SMALL).scenario
    uniform = HitDist(dist="buckets", buckets=[Bucket(lo=0.9, hi=0.95, share=1.0)])
    workload = base.workload.model_copy(
        update={"input_tokens": LengthDist(dist="fixed", value=1000), "prefix_hit": uniform}
    )
    problem = problem_of(base.model_copy(update={"workload": workload}), hardware)
    kv, hit = problem.kv, problem.arrays.md_hit
    split = relay_split(problem, hit, [kv.transfer_bytes(1000, 0.925) / 1e6, None])
    assert split.below_bytes[0] == pytest.approx(kv.transfer_bytes(1000, 0.9375))
    sd = kv.bytes_per_token * 1000 * 0.05 * (1 / 16) * np.sqrt(63 / 12)
    assert split.below_sd_bytes[0] == pytest.approx(sd)
    # relaying nothing: the whole class, its mean and its 16 points' spread
    assert split.below_bytes[1] == pytest.approx(kv.transfer_bytes(1000, 0.925))
    whole = kv.bytes_per_token * 1000 * 0.05 * (1 / 16) * np.sqrt((16**2 - 1) / 12)
    assert split.below_sd_bytes[1] == pytest.approx(whole)
