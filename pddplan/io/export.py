"""Writing a deployment and the scenario it was planned on as files ``pddplan evaluate``
reads back: what ``compare --out-fleets`` writes for each row; and the Kubernetes manifests
of ``pddplan export --to k8s`` (``manifest_yaml``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


class _ManifestDumper(yaml.SafeDumper):
    """Plain YAML for people: no anchors for repeated parts, a script as a literal block."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ManifestDumper.add_representer(str, _text)


def manifest_yaml(documents: list[dict[str, Any]], comment: str = "") -> str:
    """Kubernetes manifests (or any YAML documents) as one multi-document file, ``comment``
    on its first lines."""
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    body = yaml.dump_all(
        documents, Dumper=_ManifestDumper, sort_keys=False, width=100, explicit_start=True
    )
    return head + body
