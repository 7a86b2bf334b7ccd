"""The plan file (``solve --out``, ``solve --json``): a plan that carries the scenario it was
made for, and reading one back.

A plan file is the JSON view of the plan (``pddplan.report.views.plan_view``; for a scenario
with a ``horizon:``, ``horizon_view``: ``"kind": "horizon"``, a schedule of periods each
with its deployment, no one ``deployment``) with, since format ``PLAN_FORMAT``:

- ``format``: ``pddplan-plan/2``;
- ``scenario_file``: the scenario it was planned on: ``path`` (as given to ``solve``),
  ``fingerprint`` (``scenario_fingerprint``: the validated scenario's content, so a comment
  or a reordered key does not change it, a changed value does) and ``content`` (the
  validated scenario, its catalog paths made absolute, so ``pddplan report`` and ``export``
  can rebuild the problem from the plan file alone);
- ``deployment_id``: the deployment's identity (``deployment_fingerprint``: its pools,
  layouts, link, router, handoff and cache, not its name).

Every command that reads a plan checks the fingerprint against the scenario it is given
(``check_plan_scenario``): ``evaluate`` and ``simulate`` warn and go on (re-evaluating a plan
against an edited scenario is what they are for), ``report`` and ``export``, which take the
plan's own scenario, refuse a plan whose scenario file changed or that carries none.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pddplan.errors import InputError
from pddplan.io.catalogs import load_engines, load_hardware, load_models
from pddplan.io.located import read_json_file
from pddplan.model.problem import Problem
from pddplan.spec.fleet import Fleet
from pddplan.spec.scenario import Scenario

PLAN_FORMAT = "pddplan-plan/2"
"""The plan file's format: 2 carries its scenario (``scenario_file``) and deployment id."""
MAX_PLAN_BYTES = 64 * 2**20
"""The largest plan file read."""


def _digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def scenario_content(scenario: Scenario, base: Path) -> dict[str, Any]:
    """The validated scenario as JSON, its catalog paths (relative to ``base``, the folder of
    its file) made absolute: what a plan file carries, loadable from anywhere. (A trace
    workload is already its fitted classes: ``load_scenario`` fits it.)"""
    content = scenario.model_dump(mode="json")
    for key, path in content["catalogs"].items():
        if path is not None:
            content["catalogs"][key] = str((base / path).resolve())
    return content


def scenario_fingerprint(scenario: Scenario, base: Path) -> str:
    """16 hex digits of the SHA-256 of ``scenario_content`` as canonical JSON: the same for
    two files that say the same (comments, key order and spacing aside), whichever folder
    they are read from."""
    return _digest(scenario_content(scenario, base))


def deployment_fingerprint(fleet: Fleet) -> str:
    """A deployment's identity, ``D-`` and 12 hex digits: its pools, layouts, links, router,
    handoff and decode-side cache, not its name. Two plans with the same id deploy the
    same thing."""
    return "D-" + _digest(fleet.model_dump(mode="json", exclude={"name"}))[:12]


def plan_document(
    view: dict[str, Any], scenario: Scenario, solved: Scenario, scenario_path: Path
) -> dict[str, Any]:
    """``view`` (a plan's JSON view) as a plan file: with its format, the scenario file it was
    planned on (``scenario``, as loaded) and what the command changed of it (``solved``: the
    engine, the error quantile, the headroom, the budget given as options), and its
    deployment's id (see the module docstring)."""
    base = scenario_path.resolve().parent
    content = scenario_content(scenario, base)
    given = scenario_content(solved, base)
    out = {"format": PLAN_FORMAT, **view}
    out["scenario_file"] = {
        "path": str(scenario_path),
        "fingerprint": _digest(content),
        "content": content,
        "options": {k: v for k, v in given.items() if content.get(k) != v},
    }
    deployment = view.get("deployment")
    if isinstance(deployment, dict):
        out["deployment_id"] = deployment_fingerprint(Fleet.model_validate(deployment))
    return out


@dataclass(frozen=True)
class PlanFile:
    """A plan file read back: its JSON, and the scenario it carries (None before format 2)."""

    path: Path
    data: dict[str, Any]
    fingerprint: str | None
    """The fingerprint of the scenario it was planned on (None: a plan from before format
    2)."""
    scenario_path: str | None

    @property
    def over_horizon(self) -> bool:
        """A plan over a scenario's horizon: a schedule of periods, each with its own
        deployment, not one deployment (``is_horizon_plan``)."""
        return is_horizon_plan(self.data)

    @property
    def carries_scenario(self) -> bool:
        return self.fingerprint is not None and isinstance(
            self.data.get("scenario_file", {}).get("content"), dict
        )


HORIZON_KIND = "horizon"
"""The ``kind`` of a plan over time's file (``views.horizon_view``): no one ``deployment``,
a schedule of ``periods`` instead, each with its own."""


def is_horizon_plan(data: Any) -> bool:
    """Whether parsed JSON is a plan over a scenario's horizon (``solve --out`` of a
    scenario with a ``horizon:``)."""
    return (
        isinstance(data, dict)
        and data.get("kind") == HORIZON_KIND
        and isinstance(data.get("periods"), list)
    )


def read_plan(path: Path) -> PlanFile:
    """The plan file at ``path``; ``InputError`` in one line for a file that is not one."""
    data = read_json_file(
        path,
        what="a plan file",
        max_bytes=MAX_PLAN_BYTES,
        hint="JSON written by `pddplan solve --out`",
    )
    if not isinstance(data, dict) or ("deployment" not in data and not is_horizon_plan(data)):
        raise InputError(
            f"{path}: not a plan file: no deployment (a plan file is written by `pddplan solve "
            "--out`, for a plan; an infeasible scenario writes none)"
        )
    held = data.get("scenario_file")
    fingerprint = held.get("fingerprint") if isinstance(held, dict) else None
    where = held.get("path") if isinstance(held, dict) else None
    return PlanFile(
        path,
        data,
        fingerprint if isinstance(fingerprint, str) else None,
        where if isinstance(where, str) else None,
    )


def check_plan_scenario(plan: PlanFile, scenario: Scenario, scenario_path: Path) -> str | None:
    """Whether ``plan`` was made for ``scenario``: None when its fingerprint matches, else
    what differs, in one line (the caller warns, or refuses)."""
    if plan.fingerprint is None:
        return (
            f"{plan.path} was written before plan files carried their scenario: its scenario "
            f"cannot be checked against {scenario_path}; re-run `pddplan solve --out` to "
            "write one that does"
        )
    now = scenario_fingerprint(scenario, scenario_path.resolve().parent)
    if now == plan.fingerprint:
        return None
    made_for = plan.scenario_path or "its scenario"
    return (
        f"{plan.path} was planned on {made_for} (fingerprint {plan.fingerprint}); {scenario_path} "
        f"differs (fingerprint {now})"
    )


def plan_scenario(plan: PlanFile) -> Scenario:
    """The scenario a plan file carries, validated again; ``InputError`` for a plan from
    before format 2 (one line: re-run ``solve --out``) or a scenario that no longer
    validates (a catalog it names was moved, say)."""
    if not plan.carries_scenario:
        raise InputError(
            f"{plan.path}: written before plan files carried their scenario (no "
            "scenario_file): re-run `pddplan solve SCENARIO --out PLAN` to write one that does"
        )
    content = plan.data["scenario_file"]["content"]
    try:
        scenario = Scenario.model_validate(content)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise InputError(
            f"{plan.path}: scenario_file.content.{where}: {first['msg']}: the scenario the plan "
            "carries no longer validates; re-run `pddplan solve --out`"
        ) from None
    if _digest(content) != plan.fingerprint:
        raise InputError(
            f"{plan.path}: scenario_file: its content does not match its fingerprint "
            f"({plan.fingerprint}): the file was edited; re-run `pddplan solve --out`"
        )
    return scenario


def plan_problem(plan: PlanFile) -> Problem:
    """The problem a plan file was made for, rebuilt from the scenario it carries (its
    catalogs as the plan names them), at the engine and error quantile the plan assumed."""
    scenario = plan_scenario(plan)
    options = plan.data["scenario_file"].get("options") or {}
    if options:  # what the command changed of the scenario (--engine, --headroom, --budget)
        try:
            scenario = Scenario.model_validate({**plan.data["scenario_file"]["content"], **options})
        except ValidationError as e:
            raise InputError(
                f"{plan.path}: scenario_file.options: {e.errors()[0]['msg']}"
            ) from None
    cat = scenario.catalogs
    hardware = load_hardware(Path(cat.hardware) if cat.hardware else None)
    models = load_models(Path(cat.models) if cat.models else None)
    engines = load_engines(Path(cat.engines) if cat.engines else None)
    if scenario.model not in models:
        raise InputError(
            f"{plan.path}: scenario_file: model '{scenario.model}' is not in its catalog"
        )
    return Problem(scenario, hardware, models[scenario.model], engines=engines)


def check_scenario_file(plan: PlanFile, *, redo: str = "plan it again") -> None:
    """Refuse a plan whose scenario file, where it still is (``scenario_file.path``, as given
    to ``solve``, else beside the plan file), no longer says what the plan was made for: one
    line naming both files and both fingerprints (``InputError``). A scenario file that is
    gone is no obstacle: the plan carries its content. ``redo``: what re-running ``solve``
    would be for, in the message."""
    if plan.scenario_path is None:
        return
    where = Path(plan.scenario_path)
    if not where.is_absolute() and not where.exists():
        where = plan.path.resolve().parent / where
    if not where.is_file():
        return
    from pddplan.io.scenario import load_scenario  # the scenario loader imports the model

    different = check_plan_scenario(plan, load_scenario(where).scenario, where)
    if different is not None:
        raise InputError(f"{different}: re-run `pddplan solve {where} --out {plan.path}` to {redo}")
