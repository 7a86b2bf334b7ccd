"""The main reports rendered at 80 and 120 columns, against golden text: a change of layout
shows up in review. At either width no line is wider than the terminal and no datacenter,
chip or field name is broken across lines. ``pytest --update-golden`` rewrites them."""

from __future__ import annotations

import dataclasses
import io
import itertools

import pytest
from conftest import H100_H200, ROOT, SMALL, check_golden
from rich.console import Console

import pddplan
from pddplan.report import catalog as report_catalog
from pddplan.report import compare as report_compare
from pddplan.report import plan as report_plan
from pddplan.report import simulation, views

WIDTHS = (80, 120)
WALL_S = 1.0
"""Every wall-clock figure is set to this before rendering (they vary from run to run)."""


def _render(renderable: object, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, no_color=True, emoji=False).print(renderable)
    return buf.getvalue()


@pytest.fixture(scope="module")
def reports() -> dict[str, object]:
    problem = pddplan.load_scenario(H100_H200)
    plan = pddplan.solve(problem)
    plan = dataclasses.replace(plan, stats=dataclasses.replace(plan.stats, seconds=WALL_S))
    small = pddplan.load_scenario(SMALL)
    comparison = views.comparison_view(pddplan.compare(small, explain=False))
    fleet = pddplan.load_fleet(ROOT / "tests" / "data" / "fleets" / "small.yaml", small)
    sim = pddplan.simulate(small, fleet, rate_rps=10.0, requests=12_000, seed=3)
    sim_view = views.simulation_view(sim)
    sim_view["wall_seconds"] = sim_view["steady_state"]["wall_s"] = WALL_S
    sim_view["events_per_second"] = sim_view["events"] / WALL_S
    return {
        "solve": report_plan.plan_report(plan, problem.scenario),
        "compare": report_compare.comparison_report(comparison),
        "simulate": simulation.simulation_report(sim_view),
        "model": report_catalog.model_detail(views.model_view(problem.model)),
    }


def _broken(text: str, word: str) -> bool:
    """Whether ``word`` is split across two lines (a line ends with its head, the next
    starts with its tail)."""
    lines = [x.strip() for x in text.splitlines()]
    for a, b in itertools.pairwise(lines):
        for k in range(2, len(word) - 1):
            if a.endswith(word[:k]) and b.startswith(word[k:]) and word not in a[-len(word) :]:
                return True
    return False


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["solve", "compare", "simulate", "model"])
def test_reports_fit_and_match_their_golden_text(reports, name, width, request):
    text = _render(reports[name], width)
    assert max(len(line) for line in text.splitlines()) <= width
    names = ["cluster-a", "cluster-b", "h100-sxm", "h200-sxm", "a100-80g-sxm", "west", "east"]
    broken = [w for w in names if _broken(text, w)]
    assert not broken, f"{name} at {width} columns breaks {broken}"
    check_golden(f"render-{name}-{width}.txt", text, request)


def test_the_broken_name_check_can_fail():
    assert _broken("a table row cluste\nr-a and more", "cluster-a")
    assert not _broken("cluster-a\nin cluster-b", "cluster-a")


@pytest.mark.slow
def test_catalog_text_is_not_read_as_markup(reports):
    """The DeepSeek-V4 notes quote ``[coff*ratio, coff*dim]``, which rich would take for
    a style and drop."""
    assert "[coff*ratio, coff*dim]" in _render(reports["model"], 120)


@pytest.mark.slow
def test_a_fixed_short_run_is_rendered_with_its_verdict_first(reports):
    first = _render(reports["simulate"], 80).splitlines()[0]
    assert first.startswith("SLA ")
