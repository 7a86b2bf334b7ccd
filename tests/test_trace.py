"""Trace replay and workload fitting (issue #4)."""

from __future__ import annotations

import json
import random
from collections import OrderedDict
from pathlib import Path

import pytest
from conftest import DATA

from pddplan import sample_trace
from pddplan.errors import InputError
from pddplan.workload.cache import PrefixCache
from pddplan.workload.trace import fit_trace

SLICE = DATA / "traces" / "conversation-2000.jsonl"


def _write(tmp_path: Path, rows: list[object]) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def _req(ts: float, inp: int, ids: list[int], out: int = 10) -> dict:
    return {"timestamp": ts, "input_length": inp, "output_length": out, "hash_ids": ids}


def test_hit_rate_rule_by_hand(tmp_path):
    """Blocks of 512: the second request reuses the first's two blocks (1,024 of its 1,300
    tokens: 78.8%); the third shares block 1 but not block 0, so its leading run is 0; the
    fourth has 600 tokens and hits both blocks, capped at its length: 100%."""
    path = _write(
        tmp_path,
        [
            _req(0, 1000, [0, 1]),
            _req(1000, 1300, [0, 1, 2]),
            _req(2000, 700, [9, 1]),
            _req(3000, 600, [0, 1]),
        ],
    )
    fit = fit_trace(path)
    assert fit.requests == 4 and fit.duration_s == 3.0 and fit.arrival_rps == 1.0
    hits = [0.0, 1024 / 1300, 0.0, 1.0]
    assert fit.mean_hit_rate == pytest.approx(sum(hits) / 4)
    assert fit.token_weighted_hit_rate == pytest.approx((1024 + 600) / (1000 + 1300 + 700 + 600))


def test_lru_evicts_the_least_recently_used_block(tmp_path):
    """A 2-block cache: after [0,1] then [2] one block must go; the tail block 1 goes first
    (a radix cache evicts leaves before their prefix), so [0,1] then hits its first block,
    and the final [1] hits too (block 2, now the oldest, was evicted instead)."""
    path = _write(
        tmp_path,
        [_req(0, 1024, [0, 1]), _req(1, 512, [2]), _req(2, 1024, [0, 1]), _req(3, 512, [1])],
    )
    fit = fit_trace(path, cache_tokens=1024)
    assert fit.mean_hit_rate == pytest.approx((0 + 0 + 0.5 + 1) / 4)


def _reference_lru(trace: list[list[int]], capacity: int) -> list[int]:
    """A plainly written LRU replay to check the fast one against."""
    cache: OrderedDict[int, None] = OrderedDict()
    runs = []
    for ids in trace:
        run = 0
        for h in ids:
            if h not in cache:
                break
            run += 1
        for h in reversed(ids):  # the head ends most recent: the tail is evicted first
            cache.pop(h, None)
            cache[h] = None
        while len(cache) > capacity:
            cache.popitem(last=False)
        runs.append(run)
    return runs


@pytest.mark.parametrize("seed", range(8))
def test_fast_lru_matches_a_reference(seed):
    rng = random.Random(seed)
    # a request's prefix blocks are distinct, as in real traces
    trace = [rng.sample(range(40), rng.randrange(1, 8)) for _ in range(400)]
    for capacity in (3, 10, 25):
        cache = PrefixCache(capacity)
        assert [cache.replay(ids) for ids in trace] == _reference_lru(trace, capacity)
    unbounded = PrefixCache(None)
    assert [unbounded.replay(ids) for ids in trace] == _reference_lru(trace, 10**9)


def test_shipped_trace_slice_histogram():
    """The first 2,000 requests of the Mooncake conversation trace, unbounded cache: the
    hit histogram over the default buckets (pinned; a reference replay agrees)."""
    fit = fit_trace(SLICE)
    assert fit.requests == 2000
    assert [b["share"] for b in fit.hit_histogram] == pytest.approx(
        [0.533, 0.092, 0.188, 0.0625, 0.048, 0.058, 0.0185]
    )
    assert fit.mean_hit_rate == pytest.approx(0.332554, abs=1e-6)
    rows = [json.loads(line) for line in SLICE.open()]
    runs = _reference_lru([r["hash_ids"] for r in rows], 10**9)
    ref = [
        min(run * 512, r["input_length"]) / r["input_length"]
        for run, r in zip(runs, rows, strict=True)
    ]
    assert fit.mean_hit_rate == pytest.approx(sum(ref) / len(ref))


def test_a_smaller_cache_never_hits_more():
    big = fit_trace(SLICE, cache_tokens=2_000_000)
    small = fit_trace(SLICE, cache_tokens=200_000, md_cache_tokens=50_000)
    assert small.mean_hit_rate <= big.mean_hit_rate
    assert small.md_mean_hit_rate <= small.mean_hit_rate


def test_classes_keep_the_joint_shape():
    fit = fit_trace(SLICE, md_cache_tokens=100_000)
    assert sum(c.weight for c in fit.classes) == pytest.approx(1.0)
    assert sum(c.weight * c.p_hit for c in fit.classes) == pytest.approx(fit.mean_hit_rate)
    assert sum(c.weight * c.md_hit for c in fit.classes) == pytest.approx(fit.md_mean_hit_rate)
    assert sum(c.weight * c.input_tokens for c in fit.classes) == pytest.approx(
        fit.input_tokens.mean
    )


def test_length_fits_are_ranked_by_ks():
    fit = fit_trace(SLICE)
    for lf in (fit.input_tokens, fit.output_tokens):
        assert [f["ks"] for f in lf.fits] == sorted(f["ks"] for f in lf.fits)
        assert 0 < lf.best["ks"] < 0.5


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "bad JSON"),
        ('{"timestamp": 5, "input_length": 10, "output_length": 1}', "missing field hash_ids"),
        (
            '{"timestamp": 5, "input_length": -3, "output_length": 1, "hash_ids": []}',
            "input_length must be an integer in [1, 10,000,000], got -3",
        ),
        (
            '{"timestamp": 5, "input_length": 2000, "output_length": 1, "hash_ids": [1]}',
            "hash_ids has 1 blocks, too short for input_length 2000 (4 blocks of 512 tokens)",
        ),
        (
            '{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}',
            "before the previous request's 1 ms",
        ),
        ("[1, 2]", "expected a JSON object"),
        # an absurd timestamp is refused at its own line, not blamed on the next good one
        (
            '{"timestamp": 1e308, "input_length": 10, "output_length": 1, "hash_ids": [1]}',
            "timestamp must be a number of ms in [0, 1e+13], got 1e+308",
        ),
        (
            '{"timestamp": 5, "input_length": 10, "output_length": 10000001, "hash_ids": [1]}',
            "output_length must be an integer in [0, 10,000,000], got 10000001",
        ),
    ],
)
def test_bad_lines_are_reported_with_line_numbers(tmp_path, line, message):
    path = _write(tmp_path, [_req(1, 10, [0]), line, _req(2, 10, [0])])
    with pytest.raises(InputError) as err:
        fit_trace(path)
    assert any(p.startswith(f"{path}:2: ") and message in p for p in err.value.problems), (
        err.value.problems
    )


def test_a_line_past_the_line_limit_ends_the_read_without_holding_it(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        json.dumps(_req(1, 10, [0])).encode() + b"\n" + b"[" + b"1," * 600_000 + b"1]\n"
    )
    with pytest.raises(InputError, match=r"t.jsonl:2: line longer than 1 MB"):
        fit_trace(path)


def test_dev_zero_as_a_trace_ends_at_the_line_limit():
    with pytest.raises(InputError, match=r"/dev/zero:1: line longer than 1 MB"):
        fit_trace(Path("/dev/zero"))


def test_skip_bad_continues_and_counts(tmp_path):
    path = _write(tmp_path, [_req(1, 10, [0]), "{oops", _req(2, 10, [0]), '{"timestamp": 3}'])
    fit = fit_trace(path, skip_bad=True)
    assert fit.requests == 2 and fit.skipped_lines == 2
    assert [n for n, _ in fit.bad_lines] == [2, 4]


def test_empty_and_missing_files(tmp_path):
    empty = tmp_path / "e.jsonl"
    empty.write_text("\n")
    with pytest.raises(InputError, match="the trace has no requests"):
        fit_trace(empty)
    with pytest.raises(InputError, match="file not found"):
        fit_trace(tmp_path / "nope.jsonl")


def test_bucket_edges_are_checked():
    with pytest.raises(InputError, match="hit_edges must rise strictly from 0 to 1"):
        fit_trace(SLICE, hit_edges=(0.0, 0.5, 0.4, 1.0))


def test_the_sample_trace_is_the_conversation_traces_first_240_s():
    """The sample shipped with the package (``pddplan.sample_trace()``) is what its README
    says: every request of the conversation trace before 240,000 ms, its lines unchanged,
    under 200 kB. The test slice holds the same trace's first 2,000 lines, so the sample is
    its head, cut where the timestamps reach 240 s."""
    sample = sample_trace()
    assert sample.is_file() and sample.stat().st_size < 200_000
    lines = sample.read_bytes().splitlines(keepends=True)
    head = SLICE.read_bytes().splitlines(keepends=True)
    assert lines == head[: len(lines)]
    stamps = [json.loads(x)["timestamp"] for x in head[: len(lines) + 1]]
    assert max(stamps[:-1]) < 240_000 <= stamps[-1]
    readme = (sample.parent / "README.md").read_text()
    assert sample.name in readme and "Apache License 2.0" in readme
    assert f"{len(lines)} lines" in readme


def test_the_sample_trace_fits_as_its_readme_says():
    """The sample replayed with an unbounded cache: each request's hit is its longest run of
    leading blocks seen before (capped at its length), checked against a plain replay here,
    and the figures the README and docs/cli.md quote."""
    fit = fit_trace(sample_trace())
    seen: set[int] = set()
    hits = []
    for line in sample_trace().read_text().splitlines():
        r = json.loads(line)
        run = next((i for i, h in enumerate(r["hash_ids"]) if h not in seen), len(r["hash_ids"]))
        hits.append(min(run * 512, r["input_length"]) / r["input_length"])
        seen.update(r["hash_ids"])
    assert fit.requests == len(hits) == 731
    assert fit.mean_hit_rate == pytest.approx(sum(hits) / len(hits), rel=1e-12)
    assert f"{fit.mean_hit_rate:.1%}" == "26.4%"  # pddplan/data/README.md
    assert f"{fit.arrival_rps:.3f}" == "3.042"  # docs/cli.md


def test_ids_beyond_the_byte_map_keep_earlier_hits():
    """Regression: a request mixing small ids with one huge id still hits its cached prefix."""
    cache = PrefixCache(None)
    assert cache.replay([1, 2, 3]) == 0
    assert cache.replay([1, 2, 3, 2**40]) == 3
    assert cache.replay([1, 2, 3, 2**40, -5]) == 4
