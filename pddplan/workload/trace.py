"""Request traces (Mooncake JSONL): streaming reader, prefix-cache replay
(``pddplan.workload.cache``), and the fitted workload (hit-rate histogram, length
distributions, request classes).

Each line is ``{"timestamp": ms, "input_length": tokens, "output_length": tokens,
"hash_ids": [...]}``, ``hash_ids`` naming the request's 512-token prefix blocks. A request's
hit rate is the leading run of its blocks already in the cache, times the block size, capped
at its input length, over its input length. After the lookup all its blocks enter the cache
(most recently used). The cache is unbounded, or LRU with a capacity in tokens.

The reader streams: only per-request numbers are kept (five per request), never the hash
lists, except what the cache itself holds.
"""

from __future__ import annotations

import errno
import math
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np
import orjson

from pddplan.errors import ArgumentError, InputError
from pddplan.pipes import open_input
from pddplan.spec.limits import MAX_TOKENS
from pddplan.spec.scenario import ClassSpec, Workload
from pddplan.spec.source import quote
from pddplan.workload.cache import PrefixCache
from pddplan.workload.classes import HIT_EDGES, INPUT_QUANTILES, OUTPUT_QUANTILES, RequestClass
from pddplan.workload.hit_curve import HitCurve, StackDistances

DEFAULT_BLOCK_TOKENS = 512
"""Tokens per prefix block in the Mooncake traces (FAST'25 release README)."""
SHOWN_BAD_LINES = 2
"""Bad lines ``fit_trace`` names one by one before its summary: an error is at most three
lines (a file that is no trace at all, a scenario given as one, had printed 21)."""
MAX_REPORTED_BAD_LINES = 20
"""Without --skip-bad, this many bad lines are listed before giving up."""
MAX_LINE_BYTES = 1_000_000
"""The longest trace line read: a request of ``MAX_TOKENS`` tokens lists 19,532 block ids
(about 0.2 MB at 10 bytes an id); a longer line ends the read with an error."""
MAX_TIMESTAMP_MS = 1e13
"""The latest timestamp accepted, in ms: the year 2286 in Unix time (traces count from
their start or from the epoch, ~1.7e12 ms in 2026)."""
TIME_BINS = 60
"""Bins of the hit-rate-over-time series."""


def _capacity_blocks(tokens: int | str | None, block: int) -> int | None:
    if tokens is None or tokens == "unbounded":
        return None
    return max(1, int(tokens) // block)


@dataclass
class _Columns:
    time_ms: array[float] = field(default_factory=lambda: array("d"))
    inp: array[float] = field(default_factory=lambda: array("d"))
    out: array[float] = field(default_factory=lambda: array("d"))
    run: array[int] = field(default_factory=lambda: array("q"))
    """Leading cached blocks per request (prefill side)."""
    md_run: array[int] = field(default_factory=lambda: array("q"))


def read_requests(
    path: Path, *, block_tokens: int, skip_bad: bool, bad: list[tuple[int, str]]
) -> Iterator[tuple[float, int, int, list[int]]]:
    """Yield (timestamp ms, input tokens, output tokens, hash ids) per valid line, in file
    order. Bad lines are appended to ``bad`` as (line number, problem); without
    ``skip_bad`` the first ``MAX_REPORTED_BAD_LINES`` of them end the read, and a line that
    is not UTF-8 text (a binary file) ends it at once, in one line. A pipe or FIFO is
    waited on for at most ``pddplan.pipes.PIPE_WAIT_S`` for each of its writer's lines."""
    last_ts = -math.inf
    try:
        handle = open_input(path)
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise InputError(f"{path}: cannot read: a loop of symbolic links") from None
        raise InputError(f"{path}: cannot read: {e.strerror or e}") from None
    with handle:
        for number, line in enumerate(_lines_of(handle), start=1):
            if len(line) > MAX_LINE_BYTES:
                raise InputError(
                    f"{path}:{number}: line longer than {MAX_LINE_BYTES / 1e6:g} MB (a request "
                    f"of {MAX_TOKENS:,} tokens lists about 0.2 MB of block ids): not a "
                    "Mooncake trace"
                )
            row = _parse_fast(line, block_tokens)
            if row is None:
                if not line.strip():
                    continue
                if not skip_bad:
                    _refuse_binary(path, number, line)
                problem: str | None = _diagnose(line, block_tokens)
            elif row[0] < last_ts:
                problem = (
                    f"timestamp {row[0]:g} ms is before the previous request's "
                    f"{last_ts:g} ms: the trace must be in arrival order"
                )
            else:
                last_ts = row[0]
                yield row
                continue
            bad.append((number, problem or "invalid request"))
            if not skip_bad and len(bad) >= MAX_REPORTED_BAD_LINES:
                return


def _refuse_binary(path: Path, number: int, line: bytes) -> None:
    """One ``InputError`` for a line that is not text (a NUL byte, or bytes that are not
    UTF-8): a binary file given as a trace, named once rather than once a line."""
    try:
        line.decode("utf-8")
        at = line.find(b"\0")
    except UnicodeDecodeError as e:
        at = e.start
    if at >= 0:
        raise InputError(
            f"{path}:{number}: not UTF-8 text (byte 0x{line[at]:02x} at column {at + 1}): a "
            "trace is JSON Lines text, one request a line (is this a binary file?)"
        )


def _lines_of(handle: BinaryIO) -> Iterator[bytes]:
    """The file's lines, each read to at most ``MAX_LINE_BYTES`` + 1 bytes, so that no line
    (nor ``/dev/zero``) can fill memory: a longer one comes out cut, and is refused."""
    while line := handle.readline(MAX_LINE_BYTES + 1):
        yield line


_NUMBER = (int, float)
_INTS = {int}


def _parse_fast(line: bytes, block_tokens: int) -> tuple[float, int, int, list[int]] | None:
    """The request on a well-formed line, or None (then ``_diagnose`` says why)."""
    try:
        d = orjson.loads(line)
        ts, inp, out, ids = d["timestamp"], d["input_length"], d["output_length"], d["hash_ids"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    if (
        type(inp) is int
        and type(out) is int
        and type(ids) is list
        and type(ts) in _NUMBER
        and 1 <= inp <= MAX_TOKENS
        and 0 <= out <= MAX_TOKENS
        and 0 <= ts <= MAX_TIMESTAMP_MS
        and len(ids) * block_tokens >= inp
        and set(map(type, ids)) <= _INTS
    ):
        return float(ts), inp, out, ids
    return None


def _diagnose(line: bytes, block_tokens: int) -> str:
    """What is wrong with a line ``_parse_fast`` refused."""
    try:
        d = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        return f"bad JSON: {e.msg} at column {e.colno}"
    if not isinstance(d, dict):
        return "expected a JSON object"
    missing = [k for k in ("timestamp", "input_length", "output_length", "hash_ids") if k not in d]
    if missing:
        return f"missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    ts, inp, out, ids = d["timestamp"], d["input_length"], d["output_length"], d["hash_ids"]
    if type(ts) not in _NUMBER or not 0 <= ts <= MAX_TIMESTAMP_MS:
        return f"timestamp must be a number of ms in [0, {MAX_TIMESTAMP_MS:.0e}], got {quote(ts)}"
    for name, value, low in (("input_length", inp, 1), ("output_length", out, 0)):
        if type(value) is not int or not low <= value <= MAX_TOKENS:
            return f"{name} must be an integer in [{low}, {MAX_TOKENS:,}], got {quote(value)}"
    if type(ids) is not list or not set(map(type, ids)) <= _INTS:
        return "hash_ids must be a list of integers"
    need = math.ceil(inp / block_tokens)
    return (
        f"hash_ids has {len(ids)} blocks, too short for input_length {inp} "
        f"({need} blocks of {block_tokens} tokens)"
    )


@dataclass(frozen=True)
class LengthFit:
    """A length distribution: mean, quantiles, and parametric fits ranked by their
    Kolmogorov-Smirnov distance (the largest gap between the fitted and the empirical CDF;
    0 is a perfect fit)."""

    mean: float
    quantiles: dict[str, float]
    fits: list[dict[str, float | str]]
    """Best first: ``{dist: lognormal, median, sigma, ks}`` and ``{dist: gamma, shape, scale, ks}``."""

    @property
    def best(self) -> dict[str, float | str]:
        return self.fits[0]


@dataclass(frozen=True)
class TraceFit:
    """What a trace says about the workload."""

    path: str
    requests: int
    skipped_lines: int
    bad_lines: list[tuple[int, str]]
    duration_s: float
    arrival_rps: float | None
    """Mean arrival rate; None when the trace spans no time (one timestamp)."""
    block_tokens: int
    cache_tokens: int | str
    md_cache_tokens: int | str | None
    mean_hit_rate: float
    token_weighted_hit_rate: float
    hit_histogram: list[dict[str, float]]
    md_mean_hit_rate: float | None
    md_hit_histogram: list[dict[str, float]] | None
    input_tokens: LengthFit
    output_tokens: LengthFit
    classes: list[RequestClass]
    hit_over_time: list[tuple[float, float]]
    """(bin start s, mean hit rate of the requests arriving in the bin)."""
    hit_curve: list[dict[str, float]] | None = None
    """With ``hit_curve``: an LRU prefix cache's share of prefix blocks found against its
    capacity (``cache_tokens``, ``hit_rate``), doubling from 64 blocks to the size that
    finds every reuse (``pddplan.workload.hit_curve``)."""


def fit_trace(
    path: Path,
    *,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    cache_tokens: int | str = "unbounded",
    md_cache_tokens: int | str | None = None,
    hit_edges: tuple[float, ...] = HIT_EDGES,
    skip_bad: bool = False,
    hit_curve: bool = False,
) -> TraceFit:
    """Replay ``path`` through the prefill-side cache (and the decode-side one when
    ``md_cache_tokens`` is given) and summarize it; with ``hit_curve``, also measure an LRU
    prefix cache's hit rate at every capacity (one pass of stack distances, which keeps one
    dict entry per distinct block and a counter per use). Raises ``InputError`` for a
    missing or empty file, or for bad lines unless ``skip_bad``."""
    cols, bad, distances = _replay(
        path, block_tokens, cache_tokens, md_cache_tokens, hit_edges, skip_bad, hit_curve
    )
    fit = _summarize(path, cols, bad, block_tokens, cache_tokens, md_cache_tokens, hit_edges)
    if distances is None:
        return fit
    return replace(fit, hit_curve=_curve_points(distances.curve(), block_tokens))


def _replay(
    path: Path,
    block_tokens: int,
    cache_tokens: int | str,
    md_cache_tokens: int | str | None,
    hit_edges: tuple[float, ...],
    skip_bad: bool,
    hit_curve: bool,
) -> tuple[_Columns, list[tuple[int, str]], StackDistances | None]:
    """The trace's requests replayed in order: their columns, the bad lines, and the stack
    distances when ``hit_curve``. Raises as ``fit_trace`` says."""
    _check_edges(hit_edges)
    cache = PrefixCache(_capacity_blocks(cache_tokens, block_tokens))
    md_cache = (
        PrefixCache(_capacity_blocks(md_cache_tokens, block_tokens)) if md_cache_tokens else None
    )
    cols, bad = _Columns(), list[tuple[int, str]]()
    # the hot loop: bound methods in locals, hit rates computed afterwards in numpy
    t_add, i_add, o_add, r_add, m_add = (
        cols.time_ms.append,
        cols.inp.append,
        cols.out.append,
        cols.run.append,
        cols.md_run.append,
    )
    replay, md_replay = cache.replay, (md_cache.replay if md_cache else None)
    distances = StackDistances() if hit_curve else None
    for ts, inp, out, ids in read_requests(
        path, block_tokens=block_tokens, skip_bad=skip_bad, bad=bad
    ):
        t_add(ts)
        i_add(inp)
        o_add(out)
        r_add(replay(ids))
        if md_replay is not None:
            m_add(md_replay(ids))
        if distances is not None:
            distances.add(ids)
    _refuse_bad(path, bad, skip_bad, len(cols.inp))
    return cols, bad, distances


def _refuse_bad(path: Path, bad: list[tuple[int, str]], skip_bad: bool, requests: int) -> None:
    """Raise for bad lines (unless ``skip_bad``: then they are counted) or for no request."""
    if bad and not skip_bad:
        stopped = f"stopped at the first {len(bad)}; " if len(bad) >= MAX_REPORTED_BAD_LINES else ""
        shown = bad[:SHOWN_BAD_LINES]
        above = f"the first {len(shown)} above; " if len(bad) > len(shown) else ""
        raise ArgumentError(
            "skip_bad",
            f"{path}: {_lines(len(bad))} refused ({above}{stopped}{{argument}} skips and "
            "counts them)",
            before=[f"{path}:{line}: {problem}" for line, problem in shown],
        )
    if not requests:
        raise InputError(
            f"{path}: the trace has no requests" + (f" ({_lines(len(bad))} skipped)" if bad else "")
        )


SECONDS_PER_HOUR = 3600.0
SECONDS_PER_DAY = 86400.0
HOURS_PER_DAY = 24


@dataclass(frozen=True)
class HourlyProfile:
    """A trace's arrival rate by hour of the day (``pddplan workload fit --by-hour``): the
    daily profile a scenario's ``horizon.daily_profile`` takes.

    The hour of a request is its timestamp's hour of the day as the trace counts time:
    ``floor(timestamp_s / 3600) mod 24``. For a trace in Unix time that is the UTC hour; for
    one that counts from its own start (the Mooncake traces), hour 0 is the first hour of
    its clock. Each hour's rate is its requests over the seconds of that hour of the day
    that the trace spans (from its first request to its last), so a partial first or last
    day weighs each hour by the time it was seen."""

    path: str
    requests: int
    skipped_lines: int
    duration_s: float
    """From the first request to the last."""
    rps: tuple[float, ...]
    """The mean arrival rate in each hour of the day, 0-23 (requests/s)."""
    seconds: tuple[float, ...]
    """The seconds of each hour of the day the trace spans (at least 3,600 each)."""
    counts: tuple[int, ...]
    """Requests that arrived in each hour of the day."""

    @property
    def peak_hour(self) -> int:
        """The busiest hour (the earliest where tied)."""
        return max(range(HOURS_PER_DAY), key=lambda h: (self.rps[h], -h))

    @property
    def peak_rps(self) -> float:
        """The busiest hour's rate: what ``workload.arrival_rps`` is with this profile."""
        return self.rps[self.peak_hour]

    @property
    def mean_rps(self) -> float:
        """The trace's mean rate over the hours it spans."""
        return self.requests / sum(self.seconds)

    @property
    def factors(self) -> tuple[float, ...]:
        """Each hour's rate over the busiest hour's (the largest is 1)."""
        peak = self.peak_rps
        return tuple(r / peak for r in self.rps)

    @property
    def days(self) -> float:
        return self.duration_s / SECONDS_PER_DAY


def fit_by_hour(
    path: Path, *, block_tokens: int = DEFAULT_BLOCK_TOKENS, skip_bad: bool = False
) -> HourlyProfile:
    """The arrival rate of ``path``'s requests by hour of the day (``HourlyProfile``). Only
    the timestamps count (the prefix cache is not replayed). Raises ``InputError`` for a
    trace that spans less than a day, which cannot see every hour of it, and as
    ``fit_trace`` does for bad lines or no request."""
    bad: list[tuple[int, str]] = []
    times = array("d")
    add = times.append
    for ts, _, _, _ in read_requests(path, block_tokens=block_tokens, skip_bad=skip_bad, bad=bad):
        add(ts)
    _refuse_bad(path, bad, skip_bad, len(times))
    t = np.frombuffer(times, dtype=float) / 1000.0
    start, end = float(t[0]), float(t[-1])
    if end - start < SECONDS_PER_DAY:
        raise InputError(
            f"{path}: the trace spans {_span(end - start)}, less than a day: an arrival rate by "
            "hour of the day needs at least 24 h of requests, so that every hour is seen "
            f"({len(t):,} requests)"
        )
    hours = (np.floor(t / SECONDS_PER_HOUR) % HOURS_PER_DAY).astype(np.int64)
    counts = np.bincount(hours, minlength=HOURS_PER_DAY)
    seconds = [0.0] * HOURS_PER_DAY
    k = math.floor(start / SECONDS_PER_HOUR)
    while k * SECONDS_PER_HOUR < end:
        lo, hi = max(start, k * SECONDS_PER_HOUR), min(end, (k + 1) * SECONDS_PER_HOUR)
        seconds[k % HOURS_PER_DAY] += hi - lo
        k += 1
    return HourlyProfile(
        path=str(path),
        requests=len(t),
        skipped_lines=len(bad),
        duration_s=end - start,
        rps=tuple(float(c) / s for c, s in zip(counts, seconds, strict=True)),
        seconds=tuple(seconds),
        counts=tuple(int(c) for c in counts),
    )


def _span(seconds: float) -> str:
    """A trace's span in the unit that reads best: ``59.0 minutes``, ``23.5 hours``."""
    if seconds < SECONDS_PER_HOUR:
        return f"{seconds / 60:.1f} minutes"
    return f"{seconds / SECONDS_PER_HOUR:.1f} hours"


MAX_WINDOW_S = 3650 * 86400.0
"""The longest ``--window``: 3,650 days (ten years, longer than any trace kept); a window
longer than the trace is the whole trace, one window."""

MIN_WINDOW_REQUESTS = 100
"""A time window with fewer requests than this is merged into the window before it (the
first window, into the one after): too few requests to fit classes from."""


@dataclass(frozen=True)
class TraceWindow:
    """One time window of a trace, fitted on its own."""

    name: str
    """``w1``, ``w2``, ... in time order."""
    start_s: float
    """Seconds from the trace's first request to the window's start."""
    end_s: float
    """...to its end: the start plus whole windows, or the last request for the last one."""
    windows: int
    """Windows of ``window_s`` it spans (more than 1 where small windows were merged in;
    empty windows between requests count too)."""
    weight: float
    """Its share of the trace's requests."""
    arrival_rps: float | None
    """Requests / (``end_s`` - ``start_s``); None when that is 0 (a last window whose
    requests all arrive at its start)."""
    fit: TraceFit
    """The window fitted as ``fit_trace`` fits a trace, its hit rates from the cache as
    the whole trace's replay left it (the cache is not emptied between windows)."""


@dataclass(frozen=True)
class WindowedFit:
    """A trace cut into consecutive time windows by request timestamp."""

    path: str
    window_s: float
    requests: int
    skipped_lines: int
    duration_s: float
    min_requests: int
    merged: int
    """Windows that held requests but fewer than ``min_requests``, merged into a neighbour
    (counted as windows that held requests less windows kept)."""
    windows: list[TraceWindow]


def fit_trace_windows(
    path: Path,
    window_s: float,
    *,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    cache_tokens: int | str = "unbounded",
    md_cache_tokens: int | str | None = None,
    hit_edges: tuple[float, ...] = HIT_EDGES,
    skip_bad: bool = False,
    min_requests: int = MIN_WINDOW_REQUESTS,
) -> WindowedFit:
    """Replay ``path`` once, as ``fit_trace`` does, then cut it into windows of
    ``window_s`` seconds from its first request and fit each window on its own; windows
    with no request are left out, and those with fewer than ``min_requests`` merged into
    the one before (the first into the one after)."""
    number = isinstance(window_s, int | float) and not isinstance(window_s, bool)
    if not number or not 0 < window_s <= MAX_WINDOW_S:
        raise ArgumentError(
            "window_s",
            f"{{argument}}: must be a number of seconds > 0 and at most {MAX_WINDOW_S:g} "
            f"(3,650 days), got {window_s!r}",
        )
    cols, bad, _ = _replay(
        path, block_tokens, cache_tokens, md_cache_tokens, hit_edges, skip_bad, False
    )
    t = np.frombuffer(cols.time_ms, dtype=float) / 1000.0
    index = np.floor((t - t[0]) / window_s).astype(np.int64)
    firsts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    groups = [  # [first request, end request, first window, last window]
        [int(a), int(b), int(index[a]), int(index[a])]
        for a, b in zip(firsts, [*firsts[1:], len(t)], strict=True)
    ]
    kept: list[list[int]] = []
    for g in groups:
        if kept and g[1] - g[0] < min_requests:
            kept[-1][1], kept[-1][3] = g[1], g[3]
        else:
            kept.append(g)
    if len(kept) > 1 and kept[0][1] - kept[0][0] < min_requests:
        first = kept.pop(0)
        kept[0][0], kept[0][2] = first[0], first[2]
    n = len(t)
    windows = []
    for i, (a, b, k0, k1) in enumerate(kept):
        start = k0 * window_s
        end = (k1 + 1) * window_s if i < len(kept) - 1 else float(t[-1] - t[0])
        part = _Columns(
            cols.time_ms[a:b], cols.inp[a:b], cols.out[a:b], cols.run[a:b], cols.md_run[a:b]
        )
        fit = _summarize(path, part, [], block_tokens, cache_tokens, md_cache_tokens, hit_edges)
        windows.append(
            TraceWindow(
                name=f"w{i + 1}",
                start_s=start,
                end_s=end,
                windows=k1 - k0 + 1,
                weight=(b - a) / n,
                arrival_rps=(b - a) / (end - start) if end > start else None,
                fit=fit,
            )
        )
    return WindowedFit(
        path=str(path),
        window_s=window_s,
        requests=n,
        skipped_lines=len(bad),
        duration_s=float(t[-1] - t[0]),
        min_requests=min_requests,
        merged=len(groups) - len(kept),
        windows=windows,
    )


def _curve_points(curve: HitCurve, block_tokens: int) -> list[dict[str, float]]:
    """The curve at 64 blocks, doubling, then at the size that finds every reuse."""
    top = float(curve.blocks[-1])
    sizes = [64.0 * 2**k for k in range(64) if 64.0 * 2**k < top] + [max(top, 1.0)]
    return [{"cache_tokens": b * block_tokens, "hit_rate": curve.at(b)} for b in sizes]


def _lines(n: int) -> str:
    return f"{n:,} bad line" + ("" if n == 1 else "s")


def _check_edges(edges: tuple[float, ...]) -> None:
    if len(edges) < 2 or edges[0] != 0.0 or edges[-1] != 1.0 or list(edges) != sorted(set(edges)):
        raise ArgumentError(
            "hit_edges",
            f"{{argument}} must rise strictly from 0 to 1, got {','.join(f'{e:g}' for e in edges)}",
        )


def _histogram(values: np.ndarray, edges: tuple[float, ...]) -> list[dict[str, float]]:
    counts = np.histogram(values, bins=np.asarray(edges))[0]  # the last bin includes 1.0
    return [
        {"lo": lo, "hi": hi, "share": float(c) / len(values)}
        for lo, hi, c in zip(edges[:-1], edges[1:], counts, strict=True)
    ]


def _length_fit(values: np.ndarray) -> LengthFit:
    """Lognormal by maximum likelihood, gamma by moments; ranked by KS distance."""
    from scipy import stats  # the KS test: only when a trace is fitted

    q = {f"p{p}": float(np.percentile(values, p)) for p in (50, 90, 99)}
    q["max"] = float(values.max())
    positive = values[values > 0]
    logs = np.log(positive)
    median, sigma = float(np.exp(logs.mean())), float(max(logs.std(), 1e-9))
    mean, var = float(positive.mean()), float(max(positive.var(), 1e-9))
    shape, scale = mean**2 / var, var / mean
    fits: list[dict[str, float | str]] = [
        {
            "dist": "lognormal",
            "median": median,
            "sigma": sigma,
            "ks": float(stats.kstest(positive, "lognorm", args=(sigma, 0, median)).statistic),
        },
        {
            "dist": "gamma",
            "shape": shape,
            "scale": scale,
            "ks": float(stats.kstest(positive, "gamma", args=(shape, 0, scale)).statistic),
        },
    ]
    fits.sort(key=lambda f: f["ks"])
    return LengthFit(float(values.mean()), q, fits)


def _summarize(
    path: Path,
    cols: _Columns,
    bad: list[tuple[int, str]],
    block_tokens: int,
    cache_tokens: int | str,
    md_cache_tokens: int | str | None,
    edges: tuple[float, ...],
) -> TraceFit:
    t = np.frombuffer(cols.time_ms, dtype=float) / 1000.0
    inp, out = np.frombuffer(cols.inp, dtype=float), np.frombuffer(cols.out, dtype=float)
    hit = np.minimum(np.frombuffer(cols.run, dtype=np.int64) * block_tokens, inp) / inp
    md = None
    if len(cols.md_run):
        md = np.minimum(np.frombuffer(cols.md_run, dtype=np.int64) * block_tokens, inp) / inp
    n = len(inp)
    duration = float(t[-1] - t[0])
    rate = (n - 1) / duration if duration > 0 else None  # no span, no rate
    span = max(duration, 1e-9)
    bins = np.minimum(((t - t[0]) / span * TIME_BINS).astype(int), TIME_BINS - 1)
    counts = np.bincount(bins, minlength=TIME_BINS)
    sums = np.bincount(bins, weights=hit, minlength=TIME_BINS)
    over_time = [
        (float(t[0] + i * span / TIME_BINS - t[0]), float(sums[i] / counts[i]))
        for i in range(TIME_BINS)
        if counts[i]
    ]
    return TraceFit(
        path=str(path),
        requests=n,
        skipped_lines=len(bad),
        bad_lines=bad[:MAX_REPORTED_BAD_LINES],
        duration_s=duration,
        arrival_rps=rate,
        block_tokens=block_tokens,
        cache_tokens=cache_tokens,
        md_cache_tokens=md_cache_tokens,
        mean_hit_rate=float(hit.mean()),
        token_weighted_hit_rate=float((hit * inp).sum() / inp.sum()),
        hit_histogram=_histogram(hit, edges),
        md_mean_hit_rate=float(md.mean()) if md is not None else None,
        md_hit_histogram=_histogram(md, edges) if md is not None else None,
        input_tokens=_length_fit(inp),
        output_tokens=_length_fit(out),
        classes=_classes(inp, out, hit, md if md is not None else hit, edges),
        hit_over_time=over_time,
    )


def _classes(
    inp: np.ndarray, out: np.ndarray, hit: np.ndarray, md: np.ndarray, edges: tuple[float, ...]
) -> list[RequestClass]:
    """Joint classes: P-hit bucket x input-length quantile x output-length quantile, each
    with its requests' mean lengths and hit rates (the joint shape of the trace is kept)."""
    h = np.clip(np.searchsorted(edges, hit, side="right") - 1, 0, len(edges) - 2)
    li = _quantile_bins(inp, INPUT_QUANTILES)
    oi = _quantile_bins(out, OUTPUT_QUANTILES)
    key = (h * len(INPUT_QUANTILES) + li) * len(OUTPUT_QUANTILES) + oi
    n = len(inp)
    out_classes = []
    for k in np.unique(key):
        sel = key == k
        hb, rest = divmod(int(k), len(INPUT_QUANTILES) * len(OUTPUT_QUANTILES))
        lb, ob = divmod(rest, len(OUTPUT_QUANTILES))
        out_classes.append(
            RequestClass(
                f"h{hb}.l{lb}.o{ob}",
                float(sel.sum()) / n,
                float(inp[sel].mean()),
                float(out[sel].mean()),
                float(hit[sel].mean()),
                float(md[sel].mean()),
            )
        )
    return out_classes


def _quantile_bins(values: np.ndarray, quantiles: tuple[float, ...]) -> np.ndarray:
    cuts = np.quantile(values, quantiles[1:-1])
    return np.searchsorted(cuts, values, side="right")


def fitted_workload(workload: Workload, scenario_path: Path, key: str = "workload") -> Workload:
    """The workload with the trace it references replaced by fitted classes; a given
    ``arrival_rps`` overrides the trace's mean rate. ``key`` is where the scenario gives the
    workload, for the message when it needs a rate."""
    ref = workload.trace
    assert ref is not None
    fit = fit_trace(
        scenario_path.parent / ref.file,
        block_tokens=ref.block_size,
        cache_tokens=ref.cache_tokens,
        md_cache_tokens=ref.md_cache_tokens,
        skip_bad=ref.skip_bad,
    )
    rate = workload.arrival_rps or fit.arrival_rps
    if rate is None:
        raise InputError(
            f"{scenario_path}: {key}.trace: {ref.file} spans no time, so it gives "
            f"no arrival rate; set {key}.arrival_rps"
        )
    return Workload(arrival_rps=rate, classes=class_specs(fit))


def class_specs(fit: TraceFit) -> tuple[ClassSpec, ...]:
    """The fitted classes in the scenario's ``classes`` form."""
    return tuple(
        ClassSpec(
            key=c.key,
            weight=c.weight,
            input_tokens=c.input_tokens,
            output_tokens=c.output_tokens,
            p_hit=c.p_hit,
            md_hit=c.md_hit,
        )
        for c in fit.classes
    )
