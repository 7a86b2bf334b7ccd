"""A plan over time's outputs (issue 53, item 4): each period's GPUs by how they are had and
its cost per hour in the JSON, the schedule as CSV (``solve --csv``), the figure (``solve
--plot``) and the report to share (``solve --report``, ``pddplan report``), and their
refusals, one line and exit 2 each, before any planning.

The default run reads the shipped example's plan file as ``tests/golden/`` pins it
(``HORIZON_GOLDEN``: solving it takes about 22 s); the slow run solves it once a session
(``conftest.horizon_solved``) and checks what ``solve`` wrote against the same functions.
The report's figures are stubbed where a test reads the page's text (drawing them takes a
second), and drawn where it is the figure under test."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import html5lib
import pytest
from conftest import HORIZON_EXAMPLE, HORIZON_GOLDEN, ROOT, SMALL, one_error, run_main

import pddplan
from pddplan.report import page as page_module
from pddplan.report import plots
from pddplan.report.documents import horizon_csv
from pddplan.report.html import page_html
from pddplan.report.page import (
    HORIZON_SECTIONS,
    Figure,
    Para,
    Table,
    capacity_by_kind,
    horizon_page,
    hours_text,
    in_use,
)
from pddplan.spec.scenario import Scenario

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NS = "{http://www.w3.org/1999/xhtml}"
KINDS = ("sunk", "owned", "reserved", "rented")
CHIPS = ("cluster-a/b200", "cluster-a/h100-sxm", "cluster-b/h200-sxm", "cluster-b/mi300x")


@pytest.fixture(scope="module")
def view() -> dict:
    return json.loads(HORIZON_GOLDEN.read_text())


def _scenario(view: dict) -> Scenario:
    return Scenario.model_validate(view["scenario_file"]["content"])


def _page(view: dict):
    """The report's page with its figure stubbed (a PNG header, 10 x 5 px)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(page_module, "horizon_chart", lambda plan, size=None: None)
        mp.setattr(plots, "png", lambda fig, dpi=100: (PNG_MAGIC + b"stub", (10, 5)))
        return horizon_page(view, _scenario(view), version="test")


def _text(part) -> str:
    if isinstance(part, Para):
        return part.text
    if isinstance(part, Table):
        return " ".join([part.title, *part.heads, *(c for r in part.rows for c in r), part.caption])
    return f"{part.caption} {part.alt}"


def _sections(page) -> dict[str, str]:
    return {s.id: " ".join(_text(p) for p in s.parts) for s in page.sections}


# --- each period's GPUs by how they are had -----------------------------------------------------
def test_each_periods_holdings_are_the_schedules(view):
    """The shipped example, period by period: the owned GPUs held are those bought to serve
    from its tranche's first month or before, the reserved those whose term covers it;
    together with the sunk ones run and the rented ones they cover what its deployment
    runs; and its hourly cost times its hours a month, over its tranche's periods, is the
    tranche's monthly cost."""
    by_tranche: dict[int, float] = {}
    for p in view["periods"]:
        first = p["months"][0]
        owned: dict[str, int] = {}
        for x in view["purchases"]:
            if x["serves_from_month"] <= first:
                key = f"{x['datacenter']}/{x['chip']}"
                owned[key] = owned.get(key, 0) + x["gpus"]
        reserved: dict[str, int] = {}
        for x in view["reservations"]:
            if x["first_month"] <= first < x["first_month"] + x["term_months"]:
                key = f"{x['datacenter']}/{x['chip']}"
                reserved[key] = reserved.get(key, 0) + x["gpus"]
        assert p["owned_gpus"] == owned, p["name"]
        assert p["reserved_gpus"] == reserved, p["name"]
        for chip, need in p["gpus"].items():
            held = sum(p[f"{k}_gpus"].get(chip, 0) for k in KINDS)
            assert held >= need, (p["name"], chip)
        by_tranche[first] = by_tranche.get(first, 0.0) + p["usd_per_hour"] * p["hours_per_month"]
    for first, usd in by_tranche.items():
        assert usd == pytest.approx(view["monthly_usd"][first - 1], rel=1e-9)
    q1 = view["periods"][0]  # months 1-3: the 12-month H100 reservation and 8 rented H200
    assert q1["name"] == "q1.g1" and q1["reserved_gpus"] == {"cluster-a/h100-sxm": 32}
    assert q1["rented_gpus"] == {"cluster-b/h200-sxm": 8} and q1["owned_gpus"] == {}
    q5 = next(p for p in view["periods"] if p["name"] == "q5.g1")  # months 13-15: all owned
    assert q5["owned_gpus"] == {"cluster-a/b200": 16, "cluster-b/h200-sxm": 16}
    assert q5["reserved_gpus"] == {} and q5["rented_gpus"] == {}


def test_capacity_is_shared_by_the_gpus_of_each_kind_run():
    """By hand: 16 GPUs of x (24 owned: 8 idle) and 8 of y (4 reserved, 2 sunk, 2 rented):
    24 GPUs run, 16 owned, 4 reserved, 2 sunk, 2 rented; 12 req/s shared the same way."""
    p = {
        "gpus": {"a/x": 16, "b/y": 8},
        "owned_gpus": {"a/x": 24},
        "reserved_gpus": {"b/y": 4},
        "sunk_gpus": {"b/y": 2},
        "rented_gpus": {"b/y": 2},
        "sla_capacity_rps": 12.0,
    }
    assert in_use(p) == {"sunk": 2, "owned": 16, "reserved": 4, "rented": 2}
    assert capacity_by_kind(p) == pytest.approx(
        {"sunk": 1.0, "owned": 8.0, "reserved": 2.0, "rented": 1.0}
    )
    assert capacity_by_kind({"gpus": {}, "sla_capacity_rps": None}) == {}


def test_hours_read_as_clock_ranges():
    assert hours_text(list(range(9, 18))) == "9:00-18:00"
    assert hours_text([0, 1, 2, 23]) == "23:00-3:00"  # through midnight: one range
    assert hours_text([6, 7, 19, 20]) == "6:00-8:00, 19:00-21:00"
    assert hours_text(list(range(24))) == "0:00-24:00"


# --- the CSV --------------------------------------------------------------------------------------
def test_the_csv_is_the_jsons_schedule_a_period_a_row(view):
    rows = list(csv.DictReader(io.StringIO(horizon_csv(view))))
    assert len(rows) == len(view["periods"]) == 40
    heads = list(rows[0])
    assert heads[:9] == ["period", "tranche", "first_month", "last_month", "hours_of_day",
                         "hours_per_month", "demand_rps", "family", "sla_capacity_rps"]  # fmt: skip
    assert heads[-3:] == ["ttft_p90_s", "ttft_p99_s", "usd_per_hour"]
    assert heads[9:-3] == [f"{k}:{c}" for c in CHIPS
                           for k in ("gpus", *(f"{k}_gpus" for k in KINDS))]  # fmt: skip
    for row, p in zip(rows, view["periods"], strict=True):
        assert row["period"] == p["name"] and int(row["tranche"]) == p["tranche"]
        assert [int(row["first_month"]), int(row["last_month"])] == p["months"]
        assert [int(h) for h in row["hours_of_day"].split()] == p["hours_of_day"]
        assert row["family"] == p["family"]
        for column, key in (("hours_per_month", "hours_per_month"), ("demand_rps", "rps"),
                            ("sla_capacity_rps", "sla_capacity_rps"),
                            ("usd_per_hour", "usd_per_hour")):  # fmt: skip
            assert float(row[column]) == p[key], (p["name"], column)  # exactly: repr round-trips
        assert float(row["ttft_p90_s"]) == p["ttft_s"]["p90"]
        assert float(row["ttft_p99_s"]) == p["ttft_s"]["p99"]
        for c in CHIPS:
            assert int(row[f"gpus:{c}"]) == p["gpus"].get(c, 0)
            for k in KINDS:
                assert int(row[f"{k}_gpus:{c}"]) == p[f"{k}_gpus"].get(c, 0), (p["name"], k, c)
    first = rows[0]
    assert first["reserved_gpus:cluster-a/h100-sxm"] == "32"
    assert first["rented_gpus:cluster-b/h200-sxm"] == "8"
    assert first["hours_of_day"] == "9 10 11 12 13 14 15 16 17"


def test_a_period_without_demand_is_a_row_of_empty_cells():
    view = {"periods": [{
        "name": "q1.g2", "tranche": 1, "months": [1, 3], "hours_of_day": [0, 1], "rps": 0.0,
        "hours_per_month": 60.8, "family": None, "deployment": None, "gpus": {},
        "sunk_gpus": {}, "owned_gpus": {"a/x": 8}, "reserved_gpus": {}, "rented_gpus": {},
        "usd_per_hour": 8.0, "ttft_s": None, "tpot_ms": None, "sla_capacity_rps": None,
    }]}  # fmt: skip
    (row,) = csv.DictReader(io.StringIO(horizon_csv(view)))
    assert row["family"] == row["sla_capacity_rps"] == row["ttft_p90_s"] == ""
    assert row["owned_gpus:a/x"] == "8" and row["gpus:a/x"] == "0" and row["usd_per_hour"] == "8.0"


# --- the report's page ----------------------------------------------------------------------------
def test_the_report_has_every_section_with_the_plans_figures(view):
    page = _page(view)
    assert [s.id for s in page.sections] == list(HORIZON_SECTIONS)
    text = _sections(page)
    assert text["verdict"].startswith(
        "Buy 16 b200 in cluster-a, 16 h200-sxm in cluster-b; reserve 32 h100-sxm in cluster-a "
        "for 12 months; rent up to 8 h200-sxm in cluster-b (months 1-6), up to 8 mi300x in "
        "cluster-b (months 1-3): $1,139,560 over 24 months ($47,482/month on average)."
    )
    assert (
        "Against rent everything ($2,148,026 over the horizon): it saves $1,008,467 (47%)"
        in text["verdict"]
    )
    assert (
        "Against own for the peak ($1,264,938 over the horizon): it saves $125,378 (10%)"
        in text["verdict"]
    )
    for words in ("buy cluster-a b200 16 13 month 6 $260,136",
                  "buy cluster-b h200-sxm 8 7 at once $115,859",
                  "reserve 12 months cluster-a h100-sxm 32 1 at once $543,821"):  # fmt: skip
        assert words in text["purchases"]
    assert "cluster-a-cluster-b 10 Gbit/s 1-24 $724 $17,376" in text["link"]
    periods = next(p for p in page.sections[3].parts if isinstance(p, Table))
    assert [r[0] for r in periods.rows] == [p["name"] for p in view["periods"]]
    assert periods.rows[0][:6] == ("q1.g1", "1-3", "9:00-18:00", "4.41", "6.86",
                                   "P 16 h100-sxm · RLD 16 h100-sxm · MD 8 h200-sxm")  # fmt: skip
    assert "reserved, in force" in periods.heads and "32 h100-sxm (cluster-a)" in periods.rows[0]
    assert periods.rows[0][-1] == f"${view['periods'][0]['usd_per_hour']:,.2f}"
    (figure,) = page.figures
    assert figure.name == "capacity-and-cost" and figure.narrow is not None
    assert "Months 1-3: demand 1.54-4.41 req/s" in figure.alt
    assert (
        "1-3 $65,093 $195,279" in text["monthly"]
        and "own for the peak $1,264,938 $52,706" in text["monthly"]
    )
    assert len(page.sections[6].parts) == len(view["notes"]) == 4
    held = view["scenario_file"]
    assert held["fingerprint"] in text["about"] and held["path"] in text["about"]
    assert "cbc, optimal" in text["about"] and "507 variables, 740 rows" in text["about"]
    tree = html5lib.HTMLParser(strict=True).parse(page_html(page))  # parses without errors
    assert [s.get("id") for s in tree.iter(f"{NS}section")] == list(HORIZON_SECTIONS)


def test_an_infeasible_policy_says_why_and_nothing_bought_says_so(view):
    changed = json.loads(json.dumps(view))
    changed["policies"][1] |= {"total_usd": None, "reason": "infeasible: the chips' inventory"}
    changed["purchases"], changed["reservations"], changed["notes"] = [], [], []
    text = _sections(_page(changed))
    assert "Against own for the peak: infeasible: the chips' inventory." in text["verdict"]
    assert text["purchases"] == "Nothing to buy or reserve: every GPU is rented."
    assert "own for the peak — —" in text["monthly"] and text["notes"] == "No notes."
    with pytest.raises(ValueError, match="holds no schedule"):
        _page(changed | {"total_usd": None})


@pytest.mark.slow
def test_the_figure_draws_each_kind_and_the_averages(view):
    """The figure itself (drawn, 0.5 s): a bar series per way the example has GPUs (no sunk
    ones: it has no inventory), the demand, a bar a month, a line per average."""
    from matplotlib import pyplot as plt

    fig = page_module.horizon_chart(view)
    try:
        gids = {a.get_gid() for ax in fig.axes for a in [*ax.patches, *ax.lines] if a.get_gid()}
        assert {"capacity-owned", "capacity-reserved", "capacity-rented", "demand",
                "monthly", "average-0", "average-1", "average-2"} <= gids  # fmt: skip
        assert "capacity-sunk" not in gids
        top, bottom = fig.axes[:2]
        assert len([p for p in bottom.patches if p.get_gid() == "monthly"]) == 24
        demand = next(line for line in top.lines if line.get_gid() == "demand")
        assert list(demand.get_ydata()) == [p["rps"] for p in view["periods"]]
    finally:
        plt.close(fig)


# --- bad input ------------------------------------------------------------------------------------
def test_csv_and_plot_are_refused_without_a_horizon(tmp_path):
    """A plan for one rate has no schedule: one line, before planning, nothing written."""
    out = tmp_path / "s.csv"
    one_error(run_main("solve", str(SMALL), "--csv", str(out)), f"--csv {out}",
               "small-llama-8b has no horizon: section")  # fmt: skip
    one_error(run_main("solve", str(SMALL), "--plot", str(tmp_path / "p.png")), "--plot",
               "has no horizon: section")  # fmt: skip
    assert list(tmp_path.iterdir()) == []


def test_bad_output_files_are_refused_before_planning(tmp_path):
    """Each in one line naming the option, before the scenario is planned (these would take
    22 s to plan)."""
    scenario = str(HORIZON_EXAMPLE)
    one_error(run_main("solve", scenario, "--plot", str(tmp_path / "p.txt")),
               "--plot", "no image suffix", ".png, .svg, .pdf")  # fmt: skip
    one_error(run_main("solve", scenario, "--csv", str(tmp_path)), f"--csv {tmp_path}",
               f"a folder; give a file name (e.g. {tmp_path / 'schedule.csv'})")  # fmt: skip
    same = tmp_path / "x.json"
    one_error(run_main("solve", scenario, "--out", str(same), "--csv", str(same)),
               "--csv", "the same file as --out")  # fmt: skip
    one_error(run_main("solve", scenario, "--report", str(tmp_path / "r.png"), "--plot",
                        str(tmp_path / "r.png")), "--plot", "the same file as --report")  # fmt: skip
    one_error(run_main("solve", scenario, "--csv", str(tmp_path / "no" / "s.csv")),
               "--csv", "does not exist")  # fmt: skip
    one_error(run_main("solve", scenario, "--csv", scenario), "--csv", "is an input")
    assert list(tmp_path.iterdir()) == []


def _golden_copy(tmp_path: Path) -> Path:
    plan = tmp_path / "horizon.json"
    shutil.copy(HORIZON_GOLDEN, plan)
    return plan


def test_a_horizon_plan_file_is_not_evaluated_or_exported(tmp_path, monkeypatch):
    """``evaluate --plan`` and ``export`` refuse it in one line, saying where its
    deployments are (``report`` reads it: below, and in the slow run)."""
    monkeypatch.chdir(ROOT)  # the golden plan names its scenario relative to the checkout
    plan = _golden_copy(tmp_path)
    assert pddplan.read_plan(plan).over_horizon
    one_error(run_main("evaluate", str(HORIZON_EXAMPLE), "--plan", str(plan)),
               "periods: a plan over a horizon holds a deployment per period")  # fmt: skip
    one_error(run_main("export", str(plan), "--to", "sglang", "--out", str(tmp_path / "x")),
               "a plan over a horizon", "export covers a plan for one rate")  # fmt: skip
    assert not (tmp_path / "x").exists()


def test_a_horizon_plan_file_with_a_sweep_or_a_figure_missing_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    plan = _golden_copy(tmp_path)
    sweep = tmp_path / "sweep.json"
    sweep.write_text("{}")
    one_error(run_main("report", str(plan), "--sweep", str(sweep), "--out",
                        str(tmp_path / "r.html")), "a plan over a horizon's report")  # fmt: skip
    data = json.loads(plan.read_text())
    del data["monthly_usd"]
    plan.write_text(json.dumps(data))
    one_error(run_main("report", str(plan), "--out", str(tmp_path / "r.html")),
               "a figure the report needs is missing", "monthly_usd")  # fmt: skip
    assert not (tmp_path / "r.html").exists()


def test_a_horizon_plan_whose_scenario_changed_is_refused(tmp_path):
    """As a plan's: the scenario file it names, where it still is, is compared by
    fingerprint."""
    scenario = tmp_path / "h.yaml"
    scenario.write_text(HORIZON_EXAMPLE.read_text().replace("monthly_growth: 0.05",
                                                            "monthly_growth: 0.06", 1))  # fmt: skip
    data = json.loads(HORIZON_GOLDEN.read_text())
    data["scenario_file"]["path"] = str(scenario)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    one_error(run_main("report", str(plan), "--out", str(tmp_path / "r.html")), str(scenario),
               data["scenario_file"]["fingerprint"], "re-run `pddplan solve")  # fmt: skip


# --- slow: what solve writes ----------------------------------------------------------------------
@pytest.mark.slow
def test_solve_writes_the_schedule_the_figure_and_the_report(horizon_solved, tmp_path, monkeypatch):
    """The session's solve of the example: its CSV is ``horizon_csv`` of its plan file, its
    figure a PNG, its report the bytes ``pddplan report`` writes from the plan file, and
    the same as Markdown with its figure beside it."""
    run = horizon_solved.run
    assert run.exit_code == 0, run.output
    for path in (horizon_solved.plan, horizon_solved.csv, horizon_solved.plot,
                 horizon_solved.report):  # fmt: skip
        assert f"wrote {path}" in run.stderr
    view = json.loads(horizon_solved.plan.read_text())
    assert horizon_solved.csv.read_text() == horizon_csv(view)
    assert horizon_solved.plot.read_bytes().startswith(PNG_MAGIC)
    monkeypatch.chdir(ROOT)
    again = tmp_path / "again.html"
    result = run_main("report", str(horizon_solved.plan), "--out", str(again))
    assert result.exit_code == 0, result.output
    assert again.read_bytes() == horizon_solved.report.read_bytes()
    md = tmp_path / "r.md"
    result = run_main("report", str(horizon_solved.plan), "--out", str(md))
    assert result.exit_code == 0, result.output
    text = md.read_text()
    assert all(f'<a id="{s}"></a>' in text for s in HORIZON_SECTIONS)
    assert (tmp_path / "r-figures" / "capacity-and-cost.png").read_bytes().startswith(PNG_MAGIC)
    tree = html5lib.HTMLParser(strict=True).parse(again.read_text())
    assert [f.get("id") for f in tree.iter(f"{NS}figure")] == ["figure-capacity-and-cost"]
    assert isinstance(_page(view).figures[0], Figure)
