"""How fast `pddplan workload fit` replays a large trace, and how much memory it holds.

Builds a trace of N requests (default 1,000,000) by tiling the shipped Mooncake
conversation trace: each copy's timestamps are shifted past the previous copy's end and its
hash ids are offset so that copies share no blocks. Then times the fit with an unbounded
and an LRU prefix cache, and reports the peak resident memory.

    python benchmarks/trace_fit_speed.py [--requests N] [--trace PATH]
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from pddplan.workload.trace import fit_trace

SHIPPED = (
    Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "mooncake_conversation.jsonl"
)


def build(source: Path, target: Path, requests: int) -> None:
    rows = [json.loads(line) for line in source.open()]
    span = rows[-1]["timestamp"] + 1
    id_span = 1 + max(h for r in rows for h in r["hash_ids"])
    written = 0
    with target.open("w") as out:
        copy = 0
        while written < requests:
            for r in rows:
                if written == requests:
                    break
                out.write(
                    json.dumps(
                        {
                            "timestamp": r["timestamp"] + copy * span,
                            "input_length": r["input_length"],
                            "output_length": r["output_length"],
                            "hash_ids": [h + copy * id_span for h in r["hash_ids"]],
                        }
                    )
                    + "\n"
                )
                written += 1
            copy += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--trace", type=Path, default=SHIPPED)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.jsonl"
        t0 = time.perf_counter()
        build(args.trace, path, args.requests)
        print(
            f"built {args.requests:,} requests ({path.stat().st_size / 1e6:,.0f} MB) "
            f"in {time.perf_counter() - t0:.1f} s"
        )
        for label, cache in (("unbounded", "unbounded"), ("LRU 20M tokens", 20_000_000)):
            t0 = time.perf_counter()
            fit = fit_trace(path, cache_tokens=cache)
            seconds = time.perf_counter() - t0
            print(
                f"fit, {label:>15}: {seconds:6.1f} s = {fit.requests / seconds:>9,.0f} requests/s; "
                f"mean hit {fit.mean_hit_rate:.3f}"
            )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak_mb:,.0f} MB")


if __name__ == "__main__":
    main()
