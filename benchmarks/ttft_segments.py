"""Where the analytic TTFT tail and the simulator part, segment by segment (issue 21).

    python benchmarks/ttft_segments.py [--seeds 1002,1004,1006,1007,1008] [--max-requests 250000]

For each seed of ``tail_fidelity.py``'s generator: its min-cost plan, simulated at the plan's
SLA capacity (seed 0); each request's TTFT split into its segments as the simulator records
them (prefill queue, prefill pass, KV transfer, and the rest: MD admission and the first
decode step), their mean and P90 over the requests; the simulated and analytic TTFT P50 /
P90 / P99; the first step the model charges (``FleetModel.md_first``: MD's first step at
the utilization cap, ``Problem.first_step_s``); and the analytic percentiles again with the
first step charged at the simulated mean of the last segment (a counterfactual; the
planner keeps its charge).

A second table gives the model's side of the same segments, as the evaluator hands them to
``prefill_wait_tail`` for a direct request (request-weighted over the classes): the prefill
pool's utilization (the wait's load), the pass alone plus the fixed part of the transfer,
the company delay's mean and standard deviation (added to the pass), on instances of several
attention groups the share of arrivals that wait only for the pass in progress and its mean
rest (``pass_in_progress``), the transfer's queueing delay (an exponential of this mean), and
the link's busy share, simulated / analytic.
Diagnostics, not a test: it reaches into the simulator's records and the evaluator's state.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tail_fidelity import draw  # noqa: E402

import pddplan  # noqa: E402
from pddplan.evaluation import evaluator  # noqa: E402
from pddplan.model.prefill_queue import prefill_wait  # noqa: E402
from pddplan.simulation import run  # noqa: E402


def segments(seed: int, max_requests: int) -> tuple[str, str]:
    """The two tables' rows of ``seed``: the simulated segments with the analytic TTFT (and
    its counterfactual), and the model's side of the segments."""
    kept = {}
    summarize = run._summarize

    def keep(s, fleet, sim, steady, *args, **kwargs):  # the per-request records
        kept["records"] = steady.records
        return summarize(s, fleet, sim, steady, *args, **kwargs)

    run._summarize = keep
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "scenario.yaml"
            path.write_text(yaml.safe_dump(draw(seed), sort_keys=False))
            problem = pddplan.load_scenario(path)
            plan = pddplan.solve(problem)
            rate = plan.evaluation.sla_capacity_rps
            r = pddplan.simulate(
                problem, plan.fleet, rate_rps=rate, seed=0, max_requests=max_requests
            )
    finally:
        run._summarize = summarize
    rec = kept["records"]
    parts = {
        "queue": rec.queue_s,
        "pass": rec.prefill_s - rec.queue_s,
        "transfer": rec.transfer_s,
        "first step": rec.ttft_s - rec.prefill_s - rec.transfer_s,
    }
    cells = [f"{x.mean() * 1e3:.1f} / {np.percentile(x, 90) * 1e3:.1f}" for x in parts.values()]
    sim = np.percentile(rec.ttft_s, [50, 90, 99])
    model = [r.ttft_s[k].predicted for k in ("p50", "p90", "p99")]
    first = float(parts["first step"].mean())
    ev = evaluator.Evaluator(problem, plan.fleet)
    charged = ev.model.md_first
    ev.model.md_first = [first for _ in charged]  # the counterfactual: MD's first step
    what_if = evaluator._percentiles(ev.state(rate), 100.0)
    ev.model.md_first = charged
    model_side = _model_segments(ev, rate, r)
    charge = " / ".join(f"{f * 1e3:.1f}" for f in charged)

    def row(xs) -> str:
        return " / ".join(f"{x:.3f}" for x in xs)

    def err(xs) -> str:
        return " / ".join(f"{(x - s) / s:+.0%}" for x, s in zip(xs, sim, strict=True))

    wf = [what_if[k] for k in ("p50", "p90", "p99")]
    return (
        f"| {seed} | {rate:.2f} | {' | '.join(cells)} | {charge} | {row(sim)} | "
        f"{row(model)} ({err(model)}) | {row(wf)} ({err(wf)}) |",
        f"| {seed} | {model_side} |",
    )


def _model_segments(ev: evaluator.Evaluator, rate: float, r) -> str:
    """The model's segment figures of a direct request (``prefill_wait_tail``'s arguments at
    T = 0), weighted over the classes; the first P pool and MD datacenter."""
    seen = []
    tail = evaluator.prefill_wait_tail

    def spy(t_s, **kwargs):
        seen.append((np.asarray(t_s), kwargs))
        return tail(t_s, **kwargs)

    evaluator.prefill_wait_tail = spy
    try:
        ev.state(rate).ttft_tail(0.0)
    finally:
        evaluator.prefill_wait_tail = tail
    t_s, kw = seen[-1]  # the call at T = 0 (the state computed its bounds first)
    w = ev.model.w / ev.model.w.sum()

    def mean(x) -> float:
        return float(w @ np.broadcast_to(np.asarray(x, dtype=float), t_s.shape)[0])

    first = ev.model.md_first[0]
    fixed = -mean(t_s) - first  # pass alone + fixed transfer (T = 0 less the first step)
    company = mean(kw["company_mean_s"])
    company_sd = mean(np.sqrt(kw["company_var_s2"]))
    queueing = mean(kw["extra_mean_s"])
    in_pass = kw.get("in_pass")
    if in_pass is None:
        pass_cell = "—"
    else:
        c, _ = prefill_wait(
            instances=kw["instances"],
            groups=kw["groups"],
            utilization=kw["utilization"],
            mean_service_s=kw["mean_service_s"],
            service_cv2=kw["service_cv2"],
        )
        pass_cell = f"{max(0.0, in_pass.busy - c):.1%}, {in_pass.rest_s * 1e3:.1f}"
    link = next(iter(r.link_utilization.values()), None)
    busy = f"{link.simulated:.1%} / {link.predicted:.1%}" if link is not None else "—"
    return (
        f"{kw['utilization']:.1%} | {fixed * 1e3:.1f} | {company * 1e3:.1f} ± "
        f"{company_sd * 1e3:.1f} | {pass_cell} | {queueing * 1e3:.1f} | {busy}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1002,1004,1006,1007,1008")
    parser.add_argument("--max-requests", type=int, default=250_000)
    args = parser.parse_args()
    print(
        "| seed | req/s | queue ms (mean / P90) | pass ms | transfer ms | first step ms | "
        "first step charged ms | simulated TTFT P50 / P90 / P99 s | analytic | analytic, first step "
        "at the simulated mean |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    second = []
    for seed in (int(x) for x in args.seeds.split(",")):
        first, other = segments(seed, args.max_requests)
        print(first, flush=True)
        second.append(other)
    print()
    print(
        "| seed | P busy (model) | pass alone + fixed transfer ms | company ms (mean ± sd) | "
        "pass in progress only: share, rest ms | transfer queueing mean ms | "
        "link busy, simulated / model |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(second))


if __name__ == "__main__":
    main()
