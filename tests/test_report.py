"""``pddplan report`` and ``solve --report`` (issue 52, items 2 and 3; a plan over time's,
issue 53): one self-contained HTML file that parses strictly, loads nothing, and holds every
section and figure with its caption; the same content as Markdown with its figures beside
it; refusals of a plan that cannot be reported (written before plans carried their scenario, its scenario file changed)
and of an output that would overwrite something, each one line and exit 2, found before any
work; and, in the slow run, the report rendered by Debian's headless Chromium at 1280 and
390 px wide with the network off, asserting from the rendered page.

The plan reported is ``tests/golden/solve-small-llama-8b.json``: a real plan file (``solve
--json`` prints the plan file's content), kept in step with the model by
``tests/test_golden.py``.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import html5lib
import pytest
from conftest import HORIZON_GOLDEN, ROOT, SMALL, one_error, run_main

import pddplan
from pddplan.report.html import CSP
from pddplan.report.markdown import page_markdown
from pddplan.report.page import (
    HORIZON_SECTIONS,
    PLAN_SECTIONS,
    SWEEP_SECTIONS,
    Figure,
    Image,
    Page,
    Para,
    Section,
    Table,
)
from pddplan.report.sweeps import sweep_json
from pddplan.sweeps.axes import parse_vary
from pddplan.sweeps.engine import SweepJob, SweepRun
from pddplan.sweeps.points import ArchResult, PointResult

GOLDEN_PLAN = ROOT / "tests" / "golden" / "solve-small-llama-8b.json"
NS = "{http://www.w3.org/1999/xhtml}"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHROMIUM = Path("/usr/bin/chromium")
WIDTHS = (1280, 390)


def _sweep_run() -> SweepRun:
    """Three prices of one chip, two architectures: what ``sweep --format json`` saves."""
    path = "prices_usd_per_gpu_hour.h100-sxm"
    points = []
    for i, price in enumerate((2.0, 2.5, 3.0)):
        rows = [
            ArchResult("PDD", "pdd", "ok", cost_per_hour_usd=30 + 8 * price,
                       sla_capacity_rps=23.7, bcr=23.7 / (30 + 8 * price), ttft_p99_s=1.0,
                       fleet="P 1x8 h100-sxm@east + MD 1x8 a100-80g-sxm@west; 40 Gbit/s"),
            ArchResult("intra-DC a100-80g-sxm in west", "intra-dc-homogeneous", "ok",
                       cost_per_hour_usd=44.0, sla_capacity_rps=22.0, bcr=0.5, ttft_p99_s=0.9,
                       fleet="P 1x8 a100-80g-sxm@west + MD 1x8 a100-80g-sxm@west"),
        ]  # fmt: skip
        points.append(PointResult(i, {path: price}, "ok", None, rows))
    job = SweepJob("scenarios/small-llama-8b.yaml", "0" * 64, (parse_vary(f"{path}=2,2.5,3"),))
    return SweepRun(job, points, len(points), pass_times="sglang")


def _report(folder: Path, *args: str) -> Path:
    """The golden plan reported (with ``args``) over a file that was there (``--force``),
    from the project's folder, where the plan's scenario file is found and checked against
    its fingerprint."""
    out = folder / "report.html"
    out.write_text("an older report\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        result = run_main("report", str(GOLDEN_PLAN), *args, "--out", str(out), "--force")
    assert result.exit_code == 0, result.output
    assert result.stdout == "" and result.stderr.strip() == f"wrote {out}"
    return out


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _report(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def reported_with_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same with a sweep's saved results (its figures cost 0.6 s: the slow run's)."""
    folder = tmp_path_factory.mktemp("report-sweep")
    sweep = folder / "sweep.json"
    sweep.write_text(sweep_json(_sweep_run()))
    return _report(folder, "--sweep", str(sweep))


def _tree(text: str):
    return html5lib.HTMLParser(strict=True, namespaceHTMLElements=True).parse(text)


# --- the HTML file ------------------------------------------------------------------------------
def test_the_html_parses_without_errors(reported):
    _tree(reported.read_text(encoding="utf-8"))  # strict: the first parse error raises
    with pytest.raises(html5lib.html5parser.ParseError):  # the check can fail
        _tree("<!DOCTYPE html><html><head><title>t</title></head><body><p>x</div></body></html>")


def test_the_html_needs_nothing_but_itself(reported):
    """No script, no stylesheet or font to fetch, every image a PNG in a data: URL, every
    link an anchor of the page; the CSP meta tag tells the browser so."""
    text = reported.read_text(encoding="utf-8")
    tree = _tree(text)
    metas = {m.get("http-equiv"): m.get("content") for m in tree.iter(f"{NS}meta")}
    assert metas["Content-Security-Policy"] == CSP
    assert not list(tree.iter(f"{NS}script")) and not list(tree.iter(f"{NS}link"))
    assert "url(" not in text and "@import" not in text and "@font-face" not in text
    images = [*(i.get("src") for i in tree.iter(f"{NS}img")),
              *(s.get("srcset") for s in tree.iter(f"{NS}source"))]  # fmt: skip
    assert images
    for url in images:
        head, _, data = url.partition(",")
        assert head == "data:image/png;base64", url[:40]
        assert base64.b64decode(data).startswith(PNG_MAGIC)
    for element in tree.iter():
        for name in ("href", "src", "srcset", "action", "poster", "data"):
            value = element.get(name)
            assert value is None or value.startswith(("#", "data:image/png;base64,")), value[:60]


def _sections_and_figures(report: Path, sections: list[str], figures: list[str]) -> None:
    """``report`` has these sections in order, and these figures, each with its numbered
    caption, alt text, size and phone-wide copy."""
    tree = _tree(report.read_text(encoding="utf-8"))
    assert [s.get("id") for s in tree.iter(f"{NS}section")] == sections
    found = list(tree.iter(f"{NS}figure"))
    assert [f.get("id") for f in found] == [f"figure-{name}" for name in figures]
    for n, f in enumerate(found, 1):
        caption = "".join(f.find(f"{NS}figcaption").itertext())
        assert caption.startswith(f"Figure {n}. ") and len(caption) > 40
        img = next(f.iter(f"{NS}img"))
        assert img.get("alt") and int(img.get("width")) > 0 and int(img.get("height")) > 0
        assert len(list(f.iter(f"{NS}source"))) == 1  # the copy drawn for a phone


def test_every_section_and_figure_is_there_with_a_caption(reported):
    _sections_and_figures(reported, list(PLAN_SECTIONS),
                          ["cost-capacity", "ttft-distribution", "utilization"])  # fmt: skip


@pytest.mark.slow
def test_a_sweep_adds_its_section_and_figure(reported_with_sweep):
    _sections_and_figures(reported_with_sweep, [*PLAN_SECTIONS[:-1], "sweep", "about"],
                          ["cost-capacity", "ttft-distribution", "utilization", "sweep"])  # fmt: skip
    _tree(reported_with_sweep.read_text(encoding="utf-8"))


def test_the_report_says_the_plans_figures_as_the_terminal_does(reported):
    """The figures come from the plan file, formatted as the terminal report formats them:
    $/month with thousands separators, the verdict, each runner-up and one-step change."""
    plan = json.loads(GOLDEN_PLAN.read_text())
    tree = _tree(reported.read_text(encoding="utf-8"))
    text = {s.get("id"): " ".join("".join(s.itertext()).split()) for s in tree.iter(f"{NS}section")}
    assert plan["verdict"]["text"] in text["verdict"]
    month = plan["cost_per_hour_usd"] * 730
    assert f"${month:,.0f}" in text["costs"] and "," in f"{month:,.0f}"
    assert f"${plan['usd_per_million_output_tokens']:,.2f}" in text["costs"]
    for row in plan["runner_ups"]["rows"]:
        assert row["family"]["label"] in text["runner-ups"]
        assert f"${row['cost_per_month_usd']:,.0f}" in text["runner-ups"]
    for m in plan["marginals"]:
        assert m["change"] in text["sensitivity"]
    held = plan["scenario_file"]
    assert held["fingerprint"] in text["about"] and plan["deployment_id"] in text["about"]
    sla = held["content"]["sla"]
    assert f"P90 {sla['ttft_p90_s']:g} s, P99 {sla['ttft_p99_s']:g} s" in text["latency"]


# --- the library's figures ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def golden_plan():
    plan = pddplan.read_plan(GOLDEN_PLAN)
    problem = pddplan.plan_problem(plan)
    return plan, problem, pddplan.load_fleet(GOLDEN_PLAN, problem)


def test_the_ttft_distribution_crosses_p90_and_p99_where_the_plan_reports_them(golden_plan):
    """``ttft_cdf`` is the evaluator's tail: it reaches 0.9 and 0.99 at the plan's P90 and
    P99 (which bisect that tail to a part in a million), not before."""
    plan, problem, fleet = golden_plan
    demand, ttft = plan.data["demand_rps"], plan.data["ttft_s"]
    for key, q in (("p90", 0.9), ("p99", 0.99)):
        at = pddplan.ttft_cdf(problem, fleet, demand, points=2, upto_s=ttft[key])[-1][1]
        before = pddplan.ttft_cdf(problem, fleet, demand, points=2, upto_s=ttft[key] * 0.99)
        assert at >= q > before[-1][1]
    cdf = pddplan.ttft_cdf(problem, fleet, demand)
    ps = [p for _, p in cdf]
    assert cdf[0] == (0.0, 0.0) and ps == sorted(ps) and ps[-1] >= 0.999
    assert cdf[-1][0] >= 1.25 * problem.scenario.sla.ttft_p99_s
    with pytest.raises(pddplan.ArgumentError, match="points"):
        pddplan.ttft_cdf(problem, fleet, demand, points=1)
    with pytest.raises(pddplan.ArgumentError, match="rate_rps"):
        pddplan.ttft_cdf(problem, fleet, -1.0)


def test_a_sweeps_saved_results_read_back_as_the_sweep(tmp_path):
    run = _sweep_run()
    path = tmp_path / "sweep.json"
    path.write_text(sweep_json(run))
    back = pddplan.read_sweep(path)
    assert back.job.identity() == run.job.identity()
    assert [p.to_json() for p in back.points] == [p.to_json() for p in run.points]
    assert sweep_json(back) == sweep_json(run)
    assert isinstance(pddplan.read_plan_or_sweep(path), SweepRun)
    assert isinstance(pddplan.read_plan_or_sweep(GOLDEN_PLAN), pddplan.PlanFile)
    csv = tmp_path / "sweep.csv"
    csv.write_text("a,b\n1,2\n")
    with pytest.raises(pddplan.InputError, match="CSV and Parquet results cannot be read back"):
        pddplan.read_sweep(csv)
    data = json.loads(path.read_text())
    data["points"][1]["results"][0]["cost_per_hour_usd"] = "cheap"
    path.write_text(json.dumps(data))
    with pytest.raises(pddplan.InputError, match=r"points\[1\]: not a sweep point"):
        pddplan.read_sweep(path)


def test_markdown_has_the_pages_sections_tables_and_figures_beside_it():
    png = Image(PNG_MAGIC + b"x", (10, 5))
    page = Page("T", "sub", (
        Section("one", "One", (Para("a *b* [c]", "lead"),
                               Table(("k", "v|w"), (("x|y", "1"),), (False, True), "tt", "cap"))),
        Section("two", "Two", (Figure("fig", "the caption", "alt [text]", png, png),)),
    ))  # fmt: skip
    text, files = page_markdown(page, "r-figures")
    assert files == {"fig.png": png.png}
    assert '<a id="one"></a>' in text and "## Two" in text and "- [One](#one)" in text
    assert r"**a \*b\* \[c\]**" in text
    assert "| k | v\\|w |\n| --- | ---: |\n| x\\|y | 1 |" in text
    assert "![alt (text)](r-figures/fig.png)\n\n*Figure 1. the caption*" in text


# --- bad input ----------------------------------------------------------------------------------
def test_a_plan_from_before_plans_carried_their_scenario_is_refused(tmp_path):
    data = json.loads(GOLDEN_PLAN.read_text())
    del data["scenario_file"], data["format"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    out = tmp_path / "r.html"
    one_error(run_main("report", str(old), "--out", str(out)), str(old),
               "re-run `pddplan solve")  # fmt: skip
    assert not out.exists()


def test_a_plan_whose_scenario_file_changed_is_refused_naming_both(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SMALL.read_text().replace("arrival_rps: 20", "arrival_rps: 21", 1))
    data = json.loads(GOLDEN_PLAN.read_text())
    data["scenario_file"]["path"] = str(scenario)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    out = tmp_path / "r.html"
    line = one_error(run_main("report", str(plan), "--out", str(out)), str(plan), str(scenario),
                      data["scenario_file"]["fingerprint"])  # fmt: skip
    now = re.findall(r"fingerprint ([0-9a-f]{16})", line)
    assert len(now) == 2 and now[1] != now[0]
    assert not out.exists()
    # the same file as it was: no refusal (the fixture above reports from the shipped one)
    scenario.write_text(SMALL.read_text())
    same = pddplan.load_scenario(scenario).scenario
    assert pddplan.check_plan_scenario(pddplan.read_plan(plan), same, scenario) is None


def test_an_output_that_exists_is_refused_without_force(tmp_path):
    out = tmp_path / "r.html"
    out.write_text("keep me\n")
    one_error(run_main("report", str(GOLDEN_PLAN), "--out", str(out)), str(out), "--force")
    assert out.read_text() == "keep me\n"
    md = tmp_path / "r.md"
    (tmp_path / "r-figures").mkdir()
    (tmp_path / "r-figures" / "old.png").write_bytes(b"x")
    one_error(run_main("report", str(GOLDEN_PLAN), "--out", str(md)), "r-figures", "--force")
    assert not md.exists()


def test_an_output_that_is_the_input_or_cannot_be_written_is_refused_before_any_work(tmp_path):
    plan = tmp_path / "plan.json"
    shutil.copy(GOLDEN_PLAN, plan)
    one_error(run_main("report", str(plan), "--out", str(plan), "--force"),
               "is an input of this command")  # fmt: skip
    assert plan.read_bytes() == GOLDEN_PLAN.read_bytes()
    # before any work: a plan that would be refused is not read when --out cannot be written
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"deployment": {}}))
    if os.geteuid() == 0:  # root writes through permission bits: a folder nothing can be made in
        folder = Path("/proc")
    else:
        folder = tmp_path / "locked"
        folder.mkdir(mode=0o500)
    one_error(run_main("report", str(old), "--out", str(folder / "r.html")),
               f"--out {folder / 'r.html'}", "cannot write into the folder")  # fmt: skip
    one_error(run_main("report", str(old), "--out", str(tmp_path / "nowhere" / "r.html")),
               "does not exist")  # fmt: skip


def test_files_that_are_no_plan_or_the_wrong_plan_are_refused(tmp_path):
    out = tmp_path / "r.html"
    one_error(run_main("report", str(SMALL), "--out", str(out)), "not a plan file")
    neither = tmp_path / "x.json"
    neither.write_text('{"a": 1}')
    one_error(run_main("report", str(neither), "--out", str(out)),
               "neither a plan file", "nor sweep results")  # fmt: skip
    robust = tmp_path / "robust.json"
    robust.write_text(json.dumps(json.loads(GOLDEN_PLAN.read_text()) | {"robust": True}))
    one_error(run_main("report", str(robust), "--out", str(out)), "holds no variant")
    sweep = tmp_path / "sweep.json"
    sweep.write_text(sweep_json(_sweep_run()))
    one_error(run_main("report", str(sweep), "--sweep", str(sweep), "--out", str(out)),
               "is itself a sweep's results")  # fmt: skip
    assert not out.exists()


def test_an_edited_plan_without_a_figure_is_one_line(tmp_path, monkeypatch):
    data = json.loads(GOLDEN_PLAN.read_text())
    del data["ttft_s"]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    monkeypatch.chdir(ROOT)
    one_error(run_main("report", str(plan), "--out", str(tmp_path / "r.html")),
               "a figure the report needs is missing", "ttft_s")  # fmt: skip


def test_the_ttft_segments_the_report_adds_are_every_segment(tmp_path, monkeypatch):
    """Each segment of the plan file's breakdown is a row, and the mean TTFT their sum (a
    relay-decode segment made large here, so that one left out would show)."""
    data = json.loads(GOLDEN_PLAN.read_text())
    for key in ("ttft_breakdown_s", "ttft_breakdown_at_capacity_s"):
        data[key]["relay"] = 0.5
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(data))
    monkeypatch.chdir(ROOT)
    out = tmp_path / "r.html"
    assert run_main("report", str(plan), "--out", str(out)).exit_code == 0
    tree = _tree(out.read_text(encoding="utf-8"))
    latency = next(s for s in tree.iter(f"{NS}section") if s.get("id") == "latency")
    text = "".join("".join(latency.itertext()).split())  # cells run together: no spaces
    assert "KVtorelaydecode0.50s0.50s" in text
    totals = "".join(
        f"{sum(data[k].values()):,.2f}s"
        for k in ("ttft_breakdown_s", "ttft_breakdown_at_capacity_s")
    )
    assert f"meanTTFT{totals}" in text


def test_solve_report_is_checked_before_planning(tmp_path):
    same = tmp_path / "p.json"
    one_error(run_main("solve", str(SMALL), "--out", str(same), "--report", str(same)),
               "the same file as --out")  # fmt: skip
    one_error(run_main("solve", str(SMALL), "--report", str(tmp_path / "no" / "r.html")),
               "--report", "does not exist")  # fmt: skip


def test_a_robust_plan_has_its_own_page(tmp_path, monkeypatch):
    """A plan for workload variants (the monthly scenario's golden plan file): the shared
    fleet's verdict, each variant at it, each variant's own plan under every variant."""
    from pddplan.report.page import ROBUST_SECTIONS

    golden = ROOT / "tests" / "golden" / "solve-pdd-h100-h200-monthly.json"
    monkeypatch.chdir(ROOT)  # the golden plan names its scenario relative to the checkout
    out = tmp_path / "robust.html"
    result = run_main("report", str(golden), "--out", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    _tree(text)  # parses without errors
    data = json.loads(golden.read_text())
    for section in ROBUST_SECTIONS:
        assert f'id="{section}"' in text, section
    for name, v in data["variants"].items():
        assert f">{name}<" in text and f"{v['evaluation']['sla_capacity_rps']:,.2f}" in text
    assert f"${data['cost_per_month_usd']:,.0f}/month" in text


# --- slow: the whole path, and a real browser ----------------------------------------------------
@pytest.mark.slow
def test_solve_report_is_the_report_of_its_plan_file_and_markdown_says_the_same(tmp_path):
    plan, first, again = tmp_path / "plan.json", tmp_path / "a.html", tmp_path / "b.html"
    solved = run_main("solve", str(SMALL), "--out", str(plan), "--report", str(first), "-q")
    assert solved.exit_code == 0, solved.output
    assert f"wrote {first}" in solved.stderr
    result = run_main("report", str(plan), "--out", str(again))
    assert result.exit_code == 0, result.output
    assert first.read_bytes() == again.read_bytes()
    md = tmp_path / "r.md"
    result = run_main("report", str(plan), "--out", str(md))
    assert result.exit_code == 0, result.output
    text = md.read_text()
    tree = _tree(first.read_text())
    for section in tree.iter(f"{NS}section"):
        assert f'<a id="{section.get("id")}"></a>' in text
    cells = {"".join(td.itertext()) for td in tree.iter(f"{NS}td")}
    assert cells and all(c.replace("|", "\\|") in text for c in cells)
    for img in re.findall(r"\]\((r-figures/[\w-]+\.png)\)", text):
        assert (tmp_path / img).read_bytes().startswith(PNG_MAGIC)
    assert len(re.findall(r"\]\(r-figures/", text)) == 3 == len(list(tree.iter(f"{NS}figure")))


@pytest.mark.slow
def test_a_sweeps_saved_results_alone_make_a_report(tmp_path):
    results = tmp_path / "sweep.json"
    swept = run_main("sweep", str(SMALL), "--vary", "prices_usd_per_gpu_hour.h100-sxm=2,3",
                     "--format", "json", "--out", str(results), "--workers", "1", "-q")  # fmt: skip
    assert swept.exit_code == 0, swept.output
    out = tmp_path / "sweep.html"
    result = run_main("report", str(results), "--out", str(out))
    assert result.exit_code == 0, result.output
    tree = _tree(out.read_text())
    assert [s.get("id") for s in tree.iter(f"{NS}section")] == list(SWEEP_SECTIONS)
    assert [f.get("id") for f in tree.iter(f"{NS}figure")] == ["figure-sweep"]


PROBE = """<script>
window.__violations = [];
document.addEventListener('securitypolicyviolation',
  e => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));
window.addEventListener('load', () => {
  const W = window.innerWidth;
  const box = e => e ? e.getBoundingClientRect() : {width: 0, height: 0, right: 0};
  parent.postMessage(JSON.stringify({
    innerWidth: W,
    scrollWidth: document.documentElement.scrollWidth,
    scrollHeight: document.documentElement.scrollHeight,
    sections: [...document.querySelectorAll('section')].map(s => [s.id, box(s).height]),
    figures: [...document.querySelectorAll('figure')].map(f => {
      const img = f.querySelector('img'), cap = f.querySelector('figcaption');
      return {id: f.id, width: box(img).width, height: box(img).height,
              drawn: img ? img.naturalWidth : 0, caption: cap ? cap.textContent.trim() : '',
              captionHeight: box(cap).height};
    }),
    overflowing: [...document.querySelectorAll('body *')].filter(e => box(e).right > W + 0.5)
      .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')).slice(0, 10),
    requests: performance.getEntriesByType('resource').map(e => e.name.slice(0, 100)),
    violations: window.__violations,
  }), '*');
});
</script>"""
"""The test-only copy's probe: the layout figures of the page as laid out, and every request
it made or tried (resource timing entries, and the CSP's refusals), sent to the frame."""
FRAME = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>frame</title></head>
<body style="margin:0"><iframe src="{src}" style="display:block;border:0;width:{w}px;height:{h}px"></iframe>
<script>addEventListener('message', e => {{ const p = document.createElement('pre');
p.id = 'layout'; p.textContent = e.data; document.body.appendChild(p); }});</script></body></html>"""
"""A page that holds the report in a frame exactly W CSS px wide (a window cannot be made
narrower than 500 px; the frame's viewport is what the report's media queries see) and
writes what the probe sends into its own DOM, for ``--dump-dom``."""
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars",
         "--virtual-time-budget=10000")  # fmt: skip
"""Headless, with the network off: no name resolves, no background traffic."""


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{uuid.uuid4().hex[:8]}"  # a fresh one each run
    command = [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def _layout(page: Path, width: int, tmp: Path) -> dict:
    """What the probe in ``page`` (a test-only copy) measured, the page ``width`` px wide."""
    frame = tmp / f"frame-{page.stem}-{width}.html"
    frame.write_text(FRAME.format(src=page.name, w=width, h=900))
    run = _chromium(tmp, "--dump-dom", f"--window-size={max(width, 500)},900", frame.as_uri())
    found = re.search(r'<pre id="layout">(.*?)</pre>', run.stdout, re.S)
    assert found, f"chromium wrote no layout (exit {run.returncode}): {run.stderr[-800:]}"
    return json.loads(html.unescape(found.group(1)))


def _screenshot(report: Path, width: int, height: int, to: Path, tmp: Path) -> None:
    """The report itself (no probe), ``width`` px wide and whole, as a PNG at ``to``."""
    import matplotlib.image

    frame = tmp / f"show-{width}.html"
    frame.write_text(FRAME.format(src=report.as_uri(), w=width, h=height))
    window = max(width, 500)
    run = _chromium(tmp, f"--screenshot={to}", f"--window-size={window},{height}", frame.as_uri())
    assert run.returncode == 0 and to.exists(), run.stderr[-800:]
    if window > width:  # the frame's width alone
        matplotlib.image.imsave(to, matplotlib.image.imread(to)[:, :width])


@pytest.fixture(scope="module")
def reported_horizon(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped plan over time's report, from its golden plan file (no solve)."""
    out = tmp_path_factory.mktemp("report-horizon") / "horizon.html"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        result = run_main("report", str(HORIZON_GOLDEN), "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
@pytest.mark.parametrize("which", ["plan", "horizon"])
def test_the_report_in_a_real_browser(which, request, tmp_path):
    """Debian's Chromium, headless with the network off, renders the report (a plan's with a
    sweep's section; a plan over time's) at 1280 and 390 px wide: no request leaves the
    file, nothing is wider than the window, every section is there and every figure is drawn
    at a size with its caption (the phone-wide copy at 390 px). A broken copy shows that
    each check can fail. The screenshots are kept."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} not found: the browser check needs Debian's Chromium "
                    "(apt-get install -y chromium; .ci/run installs it); it never skips")  # fmt: skip
    if which == "plan":
        reported = request.getfixturevalue("reported_with_sweep")
        sections = [*PLAN_SECTIONS[:-1], "sweep", "about"]
    else:
        reported = request.getfixturevalue("reported_horizon")
        sections = list(HORIZON_SECTIONS)
    text = reported.read_text(encoding="utf-8")
    assert text.count(CSP) == 1
    probe = tmp_path / "probe.html"  # a test-only copy: the probe, and the CSP lets it run
    probed = text.replace(CSP, CSP + "; script-src 'unsafe-inline'")
    probed = probed.replace('<meta name="viewport"', PROBE + '\n<meta name="viewport"', 1)
    probe.write_text(probed, encoding="utf-8")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    figures: dict[int, list] = {}
    for width in WIDTHS:
        got = _layout(probe, width, tmp_path)
        assert got["innerWidth"] == width
        assert got["requests"] == [] and got["violations"] == [], got
        assert got["scrollWidth"] <= width and got["overflowing"] == [], got
        assert [s for s, _ in got["sections"]] == sections
        assert all(h > 0 for _, h in got["sections"])
        for f in got["figures"]:
            assert f["drawn"] > 0 and f["width"] > 0 and f["height"] > 0, f
            assert (
                f["width"] <= width
                and f["caption"].startswith("Figure ")
                and f["captionHeight"] > 0
            )
        figures[width] = got["figures"]
        drawn = ", ".join(f"{f['id'].removeprefix('figure-')} {f['width']:.0f}x{f['height']:.0f} "
                          f"(of {f['drawn']})" for f in got["figures"])  # fmt: skip
        print(f"\n{width} px: page {got['scrollWidth']} x {got['scrollHeight']} px, "
              f"{len(got['sections'])} sections, {len(got['requests'])} requests; {drawn}")  # fmt: skip
        _screenshot(reported, width, got["scrollHeight"], shots / f"{which}-{width}px.png",
                    tmp_path)  # fmt: skip
    # at 390 px the figures are the copies drawn for a phone: narrower images, not shrunk ones
    assert figures[390] and len(figures[390]) == len(figures[1280])
    assert all(n["drawn"] < w["drawn"] for n, w in zip(figures[390], figures[1280], strict=True))
    if which == "plan":  # the checks can fail (once): a copy that fetches an image, is too
        # wide, has a figure undrawn
        broken = tmp_path / "broken.html"
        broken.write_text(probed.replace("</main>", '<img src="http://example.invalid/x.png" '
                          'alt="x"><div style="width:3000px">wide</div><figure id="bad"><img '
                          'src="data:image/png;base64,AAAA" alt=""></figure></main>'))  # fmt: skip
        bad = _layout(broken, 390, tmp_path)
        assert any("example.invalid" in r for r in bad["requests"] + bad["violations"])
        assert bad["scrollWidth"] > 390 and bad["overflowing"]
        assert any(f["id"] == "bad" and (f["drawn"] == 0 or not f["caption"])
                   for f in bad["figures"])  # fmt: skip
    kept = os.environ.get("CI_ARTIFACTS")
    if kept:
        shutil.copytree(shots, Path(kept) / "report-browser", dirs_exist_ok=True)
        shots = Path(kept) / "report-browser"
    print(f"\nscreenshots of the report at {' and '.join(map(str, WIDTHS))} px: {shots}")
