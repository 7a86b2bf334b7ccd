"""What a simulation run measures besides its requests: counters read at the start and the
end of the measured window (after warm-up), turned into the utilization of every pool and
link, by the analytic model's definitions (docs/simulate.md#statistics)."""

from __future__ import annotations

from pddplan.evaluate.fleet_model import FleetModel
from pddplan.simulate.parts import WanLink
from pddplan.simulate.state import DecodePool, PrefillSite

Counters = dict
"""``p``: each prefill instance's busy seconds; ``d``: each decode instance's (tokens,
stall seconds); ``l``: each link's bytes sent."""


def read_counters(
    prefill: dict[str, PrefillSite],
    decode: list[DecodePool],
    links: dict[tuple[str, str], WanLink],
    t: float,
) -> Counters:
    """The counters at time ``t`` (decode instances are brought up to ``t`` first)."""
    instances = [inst for dp in decode for inst in dp.instances]
    for inst in instances:
        inst._advance(t)
    return {
        "p": [pi.busy_s for dc in prefill.values() for pi in dc.instances],
        "d": [(inst.tokens, inst.stall_s) for inst in instances],
        "l": {k: x.bytes_sent for k, x in links.items()},
    }


def utilizations(
    m: FleetModel,
    prefill: dict[str, PrefillSite],
    decode: list[DecodePool],
    links: dict[tuple[str, str], WanLink],
    c0: Counters,
    c1: Counters,
    window: float,
) -> tuple[list[tuple[str, str, str, float]], dict[tuple[str, str], float]]:
    """(datacenter, role, chip, utilization) per pool in the fleet's order, and per link,
    between the counters ``c0`` and ``c1`` taken ``window`` seconds apart. A prefill pool:
    its attention groups' busy share; a decode pool: its tokens times the operating
    point's seconds per token plus its stalls, per instance-second; a link: bytes sent over
    goodput x time."""
    busy: dict[int, float] = {}
    k = 0
    for dc in prefill.values():
        for pi in dc.instances:
            busy[pi.pool] = busy.get(pi.pool, 0.0) + c1["p"][k] - c0["p"][k]
            k += 1
    out = []
    for j, (pool, _) in enumerate(m.roles["prefill"]):
        out.append((pool.datacenter, pool.role, pool.chip, busy[j] / (pool.instances * window)))
    k = 0
    work_of = {}
    for dp in decode:
        work = 0.0
        for _ in dp.instances:
            (t0, s0), (t1, s1) = c0["d"][k], c1["d"][k]
            work += (t1 - t0) * dp.op_step / dp.op_batch + (s1 - s0)
            k += 1
        work_of[(dp.role, dp.index)] = work / (len(dp.instances) * window)
    for role in ("relay_decode", "main_decode"):
        for j, (pool, _) in enumerate(m.roles[role]):
            out.append((pool.datacenter, pool.role, pool.chip, work_of[(role, j)]))
    per_link = {
        key: (c1["l"][key] - c0["l"][key]) / (window * x.goodput) for key, x in links.items()
    }
    return out, per_link
