"""``pddplan sweep``: axes, knobs, the engines (same bytes whatever ran them), the journal,
the figures and bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PAPER_FLEETS, SMALL

import pddplan
from pddplan.errors import InputError
from pddplan.sweeps import knobs
from pddplan.sweeps.axes import grid_size, parse_vary, points
from pddplan.sweeps.engine import SweepJob, run_sweep, scenario_digest
from pddplan.sweeps.journal import seal, unseal
from pddplan.sweeps.points import Settings


def _strip(run) -> str:
    """The points without their clock readings, as bytes to compare."""
    out = []
    for p in run.points:
        d = p.to_json()
        d.pop("wall_s")
        for r in d["results"]:
            r.pop("solve_s")
        out.append(d)
    return json.dumps(out, sort_keys=True)


# --- axes -------------------------------------------------------------------------------------
def test_a_range_includes_hi_when_it_is_on_the_grid():
    assert parse_vary("x.y=0.1:0.5:0.1").values == (0.1, 0.2, 0.3, 0.4, 0.5)
    assert parse_vary("x.y=2:10:4").values == (2, 6, 10)
    assert parse_vary("x.y=2:11:4").values == (2, 6, 10)


def test_log_spacing_and_lists():
    a = parse_vary("x=1:100:x3")
    assert a.values == (1.0, 10.0, 100.0)
    assert parse_vary("x=h100-sxm,h200-sxm").values == ("h100-sxm", "h200-sxm")
    assert parse_vary("x=1,2.5,true").values == (1, 2.5, True)


def test_grid_and_zip():
    axes = [parse_vary("a=1,2"), parse_vary("b=3,4,5")]
    assert grid_size(axes) == 6
    assert points(axes)[:2] == [{"a": 1, "b": 3}, {"a": 1, "b": 4}]
    with pytest.raises(InputError, match="one length"):
        points(axes, zipped=True)
    assert points([parse_vary("a=1,2"), parse_vary("b=3,4")], zipped=True) == [
        {"a": 1, "b": 3},
        {"a": 2, "b": 4},
    ]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("x=1:2:0", "STEP is 0"),
        ("x=3:1:1", "range is empty"),
        ("x=1:2", "LO:HI:STEP or LO:HI:xN"),
        ("x=0:5:x3", "0 < LO < HI"),
        ("x=1,,2", "empty item"),
        ("novalue", "expected PATH=SPEC"),
    ],
)
def test_bad_specs(spec, message):
    with pytest.raises(InputError, match=message):
        parse_vary(spec)


# --- knobs ------------------------------------------------------------------------------------
def test_hit_mean_scales_every_miss_by_one_factor():
    # fixed 0.6 -> mean 0.8: misses halve (s = 0.5), and a measured MD hit of 0.9 -> 0.95
    wl = {"prefix_hit": {"dist": "fixed", "value": 0.6}}
    md = [{"md_prefix_hit": {"dist": "fixed", "value": 0.9}}, {"md_hit": [0.5, 1.0]}]
    knobs.move_hit_mean(wl, md, 0.8)
    assert wl["prefix_hit"]["value"] == pytest.approx(0.8)
    assert md[0]["md_prefix_hit"]["value"] == pytest.approx(0.95)
    assert md[1]["md_hit"] == pytest.approx([0.75, 1.0])


def test_hit_mean_of_a_histogram_is_reached_with_its_shape():
    hist = {"dist": "buckets", "buckets": [{"lo": 0.0, "hi": 0.5, "share": 0.2},
                                           {"lo": 0.9, "hi": 1.0, "share": 0.8}]}  # fmt: skip
    # mean 0.81 (0.2 x 0.25 + 0.8 x 0.95); up to 0.905: s = 0.5, buckets [0.5, 0.75), [0.95, 1)
    up, s = knobs.scaled_misses(hist, 0.905)
    assert s == pytest.approx(0.5)
    assert [(b["lo"], b["hi"]) for b in up["buckets"]] == [
        pytest.approx((0.5, 0.75)),
        pytest.approx((0.95, 1.0)),
    ]
    for mean in (0.05, 0.3, 0.6, 0.99):  # down far enough to clip at 0: bisection
        moved, _ = knobs.scaled_misses(hist, mean)
        assert knobs._mean(moved) == pytest.approx(mean, abs=1e-7)
    assert knobs.scaled_misses(hist, 0.0)[0] == {"dist": "fixed", "value": 0.0}


def test_a_bucket_share_renormalises_the_others():
    data = {"h": {"buckets": [{"share": 0.5}, {"share": 0.3}, {"share": 0.2}]}}
    out = knobs.apply(data, {"h.buckets[0].share": 0.8})
    assert [b["share"] for b in out["h"]["buckets"]] == pytest.approx([0.8, 0.12, 0.08])


def test_paths_are_checked_with_a_did_you_mean():
    problem = pddplan.load_scenario(PAPER_FLEETS)
    for spec, message in [
        ("workload.arival_rps=1,2", "did you mean workload.arrival_rps"),
        ("links[0].rtt_ms=a,b", "takes a number"),
        ("workload=1", "is a mapping"),
        ("prices_usd_per_gpu_hour.h201-sxm=3", "not a chip of the hardware catalog; did you mean"),
        ("workload.prefix_hit.mean=1", r"\[0, 1\)"),
    ]:
        with pytest.raises(InputError, match=message):
            knobs.check_axes(problem, [parse_vary(spec)])


# --- running ----------------------------------------------------------------------------------
def _job(problem, *vary, **settings):
    axes = tuple(parse_vary(v) for v in vary)
    return SweepJob("t", scenario_digest(problem), axes, settings=Settings("min-cost", **settings))


def test_an_invalid_point_is_a_result_and_the_grid_goes_on():
    problem = pddplan.load_scenario(SMALL)
    run = pddplan.sweep(problem, ["workload.arrival_rps=-1,4"])
    bad, good = run.points
    assert bad.status == "invalid" and "workload.arrival_rps" in bad.reason and "-1" in bad.reason
    assert good.status == "ok" and good.results[0].status == "ok"


@pytest.mark.slow
def test_results_are_the_same_bytes_on_one_or_two_workers():
    problem = pddplan.load_scenario(SMALL)
    job = _job(problem, "workload.arrival_rps=4,12", "sla.ttft_p99_s=1,2")
    one, two = run_sweep(problem, job, workers=1), run_sweep(problem, job, workers=2)
    assert len(one.points) == 4 and one.complete and two.complete
    assert _strip(one) == _strip(two)


@pytest.mark.slow
def test_resume_skips_journalled_points_and_refuses_another_sweep(tmp_path):
    problem = pddplan.load_scenario(SMALL)
    job = _job(problem, "workload.arrival_rps=4,8,12")
    journal = tmp_path / "out.csv.journal.jsonl"
    full = run_sweep(problem, job, journal=journal)
    lines = journal.read_bytes().splitlines()
    assert len(lines) == 4 and "sweep" in unseal(lines[0])
    # as if Ctrl-C came during the third point: two done, the third interrupted
    third = unseal(lines[3])
    third["point"] |= {"status": "interrupted", "results": []}
    journal.write_bytes(b"\n".join(lines[:3]) + b"\n" + seal(third))
    with pytest.raises(InputError, match="--resume"):
        run_sweep(problem, job, journal=journal)
    resumed = run_sweep(problem, job, journal=journal, resume=True)
    assert resumed.resumed == 2 and _strip(resumed) == _strip(full)
    assert not resumed.warnings
    other = _job(problem, "workload.arrival_rps=4,8")
    with pytest.raises(InputError, match="another sweep"):
        run_sweep(problem, other, journal=journal, resume=True)


@pytest.mark.slow
def test_one_point_is_the_same_under_two_hash_seeds():
    code = (
        "import json, pddplan\n"
        f"p = pddplan.load_scenario({str(PAPER_FLEETS)!r})\n"
        "r = pddplan.sweep(p, ['prices_usd_per_gpu_hour.h200-sxm=3.9'])\n"
        "d = r.points[0].to_json(); d.pop('wall_s')\n"
        "[x.pop('solve_s') for x in d['results']]\n"
        "print(json.dumps(d, sort_keys=True))\n"
    )
    outs = []
    for seed in ("1", "2"):
        env = os.environ | {"PYTHONHASHSEED": seed}
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
        outs.append(res.stdout)
    assert outs[0] == outs[1] and '"status": "ok"' in outs[0]


@pytest.mark.slow
def test_ray_gives_the_local_engines_results():
    pytest.importorskip("ray")
    import ray

    problem = pddplan.load_scenario(SMALL)
    job = _job(problem, "workload.arrival_rps=4,12", "sla.ttft_p99_s=1,2")
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=80 * 2**20,
             log_to_driver=False, runtime_env={"env_vars": {"PYTHONHASHSEED": "0"}})  # fmt: skip
    try:
        remote = run_sweep(problem, job, engine="ray", workers=2)
    finally:
        ray.shutdown()
    assert remote.complete and _strip(remote) == _strip(run_sweep(problem, job))


# --- the command line -------------------------------------------------------------------------
def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pddplan", "sweep", *args], capture_output=True,
                          text=True, cwd=cwd)  # fmt: skip


@pytest.mark.slow  # over 0.7 s each; the default run stays under 90 s
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--vary", "workload.arival_rps=1,2"], "did you mean workload.arrival_rps"),
        (["--vary", "sla.ttft_p99_s=1:2:0"], "STEP is 0"),
        (["--vary", "sla.ttft_p99_s=3:1:1"], "range is empty"),
        (
            ["--vary", "sla.ttft_p99_s=1:2:0.0001", "--vary", "sla.ttft_p90_s=1:2:0.01"],
            "over --max-points 100,000",
        ),
        (["--vary", "links[0].rtt_ms=fast"], "takes a number"),
        (["--study", "nope"], "nope"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path):
    res = _cli(str(SMALL), *args, "--out", str(tmp_path / "o.csv")) if "--resume" not in args \
        else _cli(str(SMALL), *args)  # fmt: skip
    assert res.returncode == 2, res.stderr
    assert message in res.stderr and "Traceback" not in res.stderr
    assert not any(tmp_path.iterdir())  # nothing half-written


@pytest.mark.slow
def test_csv_out_and_each_plot_kind(tmp_path):
    out = tmp_path / "s.csv"
    res = _cli(str(SMALL), "--vary", "workload.arrival_rps=4,30", "--format", "csv", "--out",
               str(out), "--plot", str(tmp_path / "demand.png"), "--workers", "1")  # fmt: skip
    assert res.returncode == 0, res.stderr
    rows = out.read_text().splitlines()
    assert rows[0].startswith("workload.arrival_rps,architecture,status,cost_per_hour_usd")
    assert len(rows) == 3 and not (tmp_path / "s.csv.journal.jsonl").exists()
    assert "cost against demand" in res.stderr
    res = _cli(str(SMALL), "--vary", "sla.ttft_p99_s=1,2", "--architectures",
               "pdd,intra-dc-homogeneous", "--plot", str(tmp_path / "lines.svg"), "--workers", "1")  # fmt: skip
    assert res.returncode == 0 and "lines against TTFT P99 bound" in res.stderr, res.stderr
    res = _cli(str(SMALL), "--vary", "sla.ttft_p99_s=1,2", "--vary", "sla.tpot_ms=40,60",
               "--plot", str(tmp_path / "heat.png"), "--workers", "1")  # fmt: skip
    assert res.returncode == 0 and "heatmap of cost" in res.stderr, res.stderr
    for name in ("demand.png", "lines.svg", "heat.png"):
        assert (tmp_path / name).stat().st_size > 10_000


def test_the_table_reads_at_80_columns_with_every_number_whole():
    from rich.console import Console

    from pddplan.report.sweeps import sweep_table
    from pddplan.sweeps.axes import parse_vary
    from pddplan.sweeps.engine import SweepRun
    from pddplan.sweeps.points import ArchResult, PointResult

    fleet = "P 1x16 h100-sxm@cluster-a + RLD 1x16 h100-sxm@cluster-a + MD 1x8 h200-sxm@cluster-b; 100 Gbit/s"  # fmt: skip
    arch = ArchResult("intra-DC a100-80g-sxm in cluster-west", "intra-dc-homogeneous", "ok",
                      cost_per_hour_usd=1234.567, sla_capacity_rps=123.456, bcr=0.123456,
                      ttft_p99_s=7.891, fleet=fleet)  # fmt: skip
    none = ArchResult("PDD", "pdd", "infeasible", reason="the 40 Gbit/s link is the fastest tier")
    points = [PointResult(i, {"prices_usd_per_gpu_hour.h200-sxm": v}, "ok", None, [arch, none])
              for i, v in enumerate((3.3625, 4.035))]  # fmt: skip
    job = SweepJob("s.yaml", "0", (parse_vary("prices_usd_per_gpu_hour.h200-sxm=3.3625,4.035"),))
    console = Console(width=80, record=True)
    console.print(sweep_table(SweepRun(job, points, 2), "cost"))
    text = console.export_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for whole in ("3.3625", "4.035", "901,234", "123.5", "0.1235", "7.89", "F1", "N1"):
        assert whole in text, whole
    assert f"  F1  {fleet[:40]}" in text  # the fleet spelled out once, below the table
    assert text.count("F1") == 3 and "N1  the 40 Gbit/s link is the fastest tier" in text


def _cli_without_ray(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a process where ``import ray`` fails, as where it is not installed."""
    code = ("import sys; sys.modules['ray'] = None; sys.argv = ['pddplan', 'sweep', *sys.argv[1:]]\n"
            "from pddplan.cli.app import main; main()")  # fmt: skip
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)


def test_ray_engine_without_ray_says_how_to_install_it_and_leaves_nothing(tmp_path):
    res = _cli_without_ray(str(SMALL), "--vary", "sla.ttft_p99_s=1,2", "--runner", "ray",
                           "--out", str(tmp_path / "o.csv"))  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "pip install 'pddplan[ray]'" in res.stderr and len(res.stderr.splitlines()) == 1
    assert not any(tmp_path.iterdir())  # no journal left that a second run would trip on


@pytest.mark.slow
def test_an_unreachable_ray_address_is_one_line_and_leaves_nothing(tmp_path):
    pytest.importorskip("ray")
    res = _cli(str(SMALL), "--vary", "sla.ttft_p99_s=1,2", "--runner", "ray", "--address",
               "127.0.0.1:9", "--out", str(tmp_path / "o.csv"))  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "could not reach the Ray cluster at 127.0.0.1:9" in res.stderr
    assert not any(tmp_path.iterdir())


def test_break_evens_pass_over_values_where_nothing_has_a_plan():
    from pddplan.sweeps import analysis
    from pddplan.sweeps.axes import parse_vary
    from pddplan.sweeps.engine import SweepRun
    from pddplan.sweeps.points import ArchResult, PointResult

    def point(i, hit, pdd_bcr, intra_bcr):
        results = [
            ArchResult("PDD", "pdd", "ok" if pdd_bcr else "infeasible", bcr=pdd_bcr),
            ArchResult(
                "intra-DC",
                "intra-dc-homogeneous",
                "ok" if intra_bcr else "infeasible",
                bcr=intra_bcr,
            ),
        ]
        return PointResult(i, {"workload.prefix_hit.mean": hit}, "ok", None, results)

    axis = parse_vary("workload.prefix_hit.mean=0.1,0.2,0.3,0.4")
    points = [point(0, 0.1, 0.2, 0.1), point(1, 0.2, None, None), point(2, 0.3, 0.1, 0.3),
              point(3, 0.4, 0.1, 0.4)]  # fmt: skip
    run = SweepRun(SweepJob("s", "0", (axis,)), points, 4)
    (only,) = analysis.break_evens(run, "bcr")
    assert (only.lo, only.hi, only.before, only.after) == (0.1, 0.3, "PDD", "intra-DC")


@pytest.mark.slow
def test_a_piped_table_keeps_its_fleet_column():
    """Regression (issue 51): piped, the table is 80 columns wide, and it cut its fleet
    column's header to ``flee`` and its ids away."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    res = subprocess.run([sys.executable, "-m", "pddplan", "sweep", str(SMALL), "--vary",
                          "workload.arrival_rps=4", "--workers", "1"], capture_output=True,
                         text=True, env=env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(x) for x in lines) <= 80
    header = next(x for x in lines if "architecture" in x)
    row = next(x for x in lines if x.split()[:2] == ["4", "PDD"])
    assert header.split()[-1] == "fleet" and row.split()[-1] == "F1"
