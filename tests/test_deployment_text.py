"""A deployment's one-line text (``deployment_line``): what a sweep's fleet ids are keyed by,
so two deployments that differ in anything but their names must read differently."""

from __future__ import annotations

from typing import Any

import pytest

from pddplan.spec.fleet import CacheSizes, Fleet, deployment_line, hardware_line

BASE: dict[str, Any] = {
    "name": "a",
    "pools": [
        {"datacenter": "east", "role": "prefill", "chip": "h100-sxm", "gpus_per_instance": 8,
         "instances": 2},
        {"datacenter": "east", "role": "relay_decode", "chip": "h100-sxm",
         "gpus_per_instance": 8, "instances": 1},
        {"datacenter": "west", "role": "main_decode", "chip": "h200-sxm",
         "gpus_per_instance": 8, "instances": 3},
    ],
    "links": [{"between": ["east", "west"], "gbps": 10}],
    "routing": {"relay_above_mb": 63.6, "singular_max_output_tokens": 0},
}  # fmt: skip


def _fleet(**changes: Any) -> Fleet:
    data = {**BASE, **changes}
    return Fleet.model_validate(data)


def _pools(i: int, **changes: Any) -> list[dict[str, Any]]:
    pools = [dict(p) for p in BASE["pools"]]
    pools[i].update(changes)
    return pools


def test_the_line_reads_as_the_docs_say():
    assert deployment_line(_fleet()) == (
        "P 2x8 h100-sxm@east + RLD 1x8 h100-sxm@east + MD 3x8 h200-sxm@west; "
        "10 Gbit/s east-west; relay above 63.6 MB"
    )
    assert hardware_line(_fleet()) == (
        "P 2x8 h100-sxm@east + RLD 1x8 h100-sxm@east + MD 3x8 h200-sxm@west; 10 Gbit/s east-west"
    )


CHANGES: dict[str, dict[str, Any]] = {
    "name": {"name": "b"},
    "prefill count": {"pools": _pools(0, instances=3)},
    "prefill width": {"pools": _pools(0, gpus_per_instance=4)},
    "prefill chip": {"pools": _pools(0, chip="h200-sxm")},
    "prefill datacenter": {"pools": _pools(0, datacenter="west")},
    "context parallel": {"pools": _pools(0, context_parallel=True)},
    "attention width": {"pools": _pools(0, attention_tp=4)},
    "relay on the prefill instances": {
        "pools": [{**BASE["pools"][0], "hosts_relay_decode": True}, BASE["pools"][2]]
    },
    "link": {"links": [{"between": ["east", "west"], "gbps": 25}]},
    "relay threshold": {"routing": {"relay_above_mb": 63.7}},
    "relay nothing": {"routing": {"relay_above_mb": None}},
    "relay all": {"routing": {"relay_above_mb": 0}},
    "no router": {"routing": None},
    "singular path": {"routing": {"relay_above_mb": 63.6, "singular_max_output_tokens": 128}},
    "catch-up": {"handoff": {"catch_up_above_tokens": 512}},
    "chunk": {"handoff": {"chunk_tokens": 32}},
    "reserved cache": {"md_cache_gb_per_gpu": 40},
    "cache tiers": {"md_cache_tiers": CacheSizes(dram_gb_per_gpu=256)},
    "no tiers below HBM": {"md_cache_tiers": CacheSizes()},
}


@pytest.mark.parametrize("what", [w for w in CHANGES if w != "name"])
def test_any_difference_but_the_name_reads_differently(what: str):
    base, other = _fleet(), _fleet(**CHANGES[what])
    assert other.model_dump(exclude={"name"}) != base.model_dump(exclude={"name"})
    assert deployment_line(other) != deployment_line(base)


def test_the_name_is_not_part_of_it():
    assert deployment_line(_fleet(**CHANGES["name"])) == deployment_line(_fleet())


def test_every_pair_of_the_changes_reads_differently():
    """No two of the deployments above share a line (a change of one part cannot read as
    a change of another)."""
    lines = {what: deployment_line(_fleet(**c)) for what, c in CHANGES.items() if what != "name"}
    assert len(set(lines.values())) == len(lines)


@pytest.mark.parametrize(
    ("what", "same"),
    [("relay threshold", True), ("catch-up", True), ("link", False), ("cache tiers", False)],
)
def test_the_hardware_line_leaves_out_only_what_costs_nothing(what: str, same: bool):
    assert (hardware_line(_fleet(**CHANGES[what])) == hardware_line(_fleet())) is same


def test_links_to_other_datacenters_read_differently():
    pools = [
        BASE["pools"][0],
        {**BASE["pools"][2], "datacenter": "west"},
        {**BASE["pools"][2], "datacenter": "north"},
    ]
    west = _fleet(pools=pools, links=[{"between": ["east", "west"], "gbps": 10}])
    north = _fleet(pools=pools, links=[{"between": ["east", "north"], "gbps": 10}])
    assert deployment_line(west) != deployment_line(north)
