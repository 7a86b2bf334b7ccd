"""Writing a deployment and the scenario it was planned on as files ``pddplan evaluate``
reads back: what ``compare --out-fleets`` writes for each row."""

from __future__ import annotations

from pathlib import Path

import yaml

from pddplan.spec.fleet import Fleet
from pddplan.spec.scenario import Scenario


def fleet_yaml(fleet: Fleet, comment: str = "") -> str:
    """``fleet`` as a fleet file (``pddplan evaluate --fleet``), its router settings in."""
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return head + yaml.safe_dump(fleet.model_dump(mode="json"), sort_keys=False, width=100)


def scenario_yaml(scenario: Scenario, base: Path, comment: str = "") -> str:
    """``scenario`` as a scenario file that loads from anywhere: its catalog paths, relative
    to ``base`` (the folder of the file it came from), made absolute. A workload fitted
    from a trace is written as its fitted classes."""
    data = scenario.model_dump(mode="json")
    for key, path in data["catalogs"].items():
        if path is not None:
            data["catalogs"][key] = str((base / path).resolve())
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return head + yaml.safe_dump(data, sort_keys=False, width=100)
