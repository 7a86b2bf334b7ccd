"""Datacenter limits on a deployment: GPUs and power per datacenter."""

from __future__ import annotations

from pddplan.spec.hardware import HardwareCatalog
from pddplan.spec.scenario import Scenario


def within_limits(
    scenario: Scenario, hardware: HardwareCatalog, usage: list[tuple[str, str, int]]
) -> bool:
    """Whether GPUs used, as (datacenter, chip, GPUs), respect every datacenter's
    ``max_gpus`` and ``max_power_kw`` (TDP x PUE)."""
    for dc_id, dc in scenario.datacenters.items():
        here = [(chip, n) for d, chip, n in usage if d == dc_id]
        if dc.max_gpus is not None and sum(n for _, n in here) > dc.max_gpus:
            return False
        if dc.max_power_kw is not None:
            kw = sum(n * hardware.chips[chip].tdp_w / 1000 * dc.pue for chip, n in here)
            if kw > dc.max_power_kw * (1 + 1e-12):
                return False
    return True
