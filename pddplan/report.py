"""Rich renderables for the terminal. The only module besides the CLI that knows rich;
every function returns a renderable and prints nothing."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from pddplan import units
from pddplan.hardware import HardwareCatalog
from pddplan.perf import InstancePerf
from pddplan.scenario import Scenario
from pddplan.views import CHIP_FIGURES


def _num(value: float | None, fmt: str = ",.4g") -> str:
    return "—" if value is None else format(value, fmt)


def _grid(title: str, headers: tuple[str, ...]) -> Table:
    """A compact table: numbers never wrap; a narrow terminal folds the id column instead."""
    t = Table(
        title=title, box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True
    )
    for i, col in enumerate(headers):
        t.add_column(col, justify="left" if i == 0 else "right", no_wrap=i > 0, overflow="fold")
    return t


def chips_table(catalog: HardwareCatalog) -> Table:
    """Every accelerator, one row each."""
    t = _grid(
        "Accelerators (TFLOPS dense; bandwidths per GPU, per direction)",
        (
            "id",
            "BF16\nTFLOPS",
            "FP8\nTFLOPS",
            "HBM\nGB",
            "HBM\nTB/s",
            "scale-up\nGB/s",
            "dom-\nain",
            "NIC\nGb/s",
            "USD/\nGPU-h",
        ),
    )
    for chip in catalog.chips.values():
        mark = "*" if chip.uncertain else ""
        t.add_row(
            chip.id + mark,
            _num(chip.bf16_tflops, ",.0f"),
            _num(chip.fp8_tflops, ",.0f"),
            _num(chip.hbm_gb),
            _num(chip.hbm_bandwidth_tb_s, ".3g"),
            _num(chip.scaleup_bandwidth_gb_s, ",.0f"),
            str(chip.scaleup_domain_gpus),
            _num(chip.nic_gbps, ",.0f"),
            _num(chip.price_usd_per_hour, ".2f"),
        )
    t.caption = (
        "* some figures are uncertain; sources, price dates and TDP: `pddplan catalog show ID`"
    )
    return t


def chip_detail(view: dict[str, Any]) -> Group:
    """One chip: each figure with its unit and source, then its efficiency defaults."""
    t = Table(
        title=f"{view['id']}: {view['name']} ({view['vendor']}, family {view['family']})",
        box=box.SIMPLE_HEAD,
        show_lines=False,
    )
    for col in ("figure", "value", "unit", "source"):
        t.add_column(col, overflow="fold")
    for key, unit in CHIP_FIGURES:
        source = view["sources"].get(key, "")
        if key in view["uncertain"]:
            source += f"\n[yellow]uncertain:[/yellow] {view['uncertain'][key]}"
        t.add_row(key, _num(view[key]), unit, source)
    if view.get("price_date"):
        t.add_row("price_date", view["price_date"], "", "")
    eff = view["efficiency"]
    e = Table(title=f"Efficiency defaults (family {view['family']})", box=box.SIMPLE_HEAD)
    for col in ("factor", "value", "source"):
        e.add_column(col, overflow="fold")
    for key, value in eff.items():
        if key not in ("sources", "notes"):
            e.add_row(key, _num(value), eff["sources"].get(key, ""))
    parts: list[Any] = [t, e]
    if view.get("notes"):
        parts.append(Text(f"notes: {view['notes']}"))
    return Group(*parts)


def models_table(views: list[dict[str, Any]]) -> Table:
    t = _grid(
        "Models",
        (
            "id",
            "attention",
            "total\nB",
            "active\nB",
            "weights",
            "weight\nGB",
            "KV",
            "KV B/\ntoken",
            "fixed\nMB",
        ),
    )
    for v in views:
        dtype = v["weight_dtype"] + (
            f"/{v['expert_weight_dtype']}" if v.get("expert_weight_dtype") else ""
        )
        t.add_row(
            v["id"],
            v["attention"],
            _num(v["total_params_b"], ",.0f"),
            _num(v["active_params_b"], ",.3g"),
            dtype,
            _num(v["weight_bytes"] / units.GB, ",.0f"),
            v["kv_dtype"],
            _num(v["kv_bytes_per_token"], ",.0f"),
            _num(v["kv_fixed_bytes_per_request"] / 1e6, ",.2f"),
        )
    return t


def model_detail(view: dict[str, Any]) -> Table:
    t = Table(title=f"{view['id']} ({view['hf_id']})", box=box.SIMPLE_HEAD)
    t.add_column("key")
    t.add_column("value", overflow="fold")
    for key, value in view.items():
        if key in ("id", "params_b"):
            continue
        if isinstance(value, list) and len(value) > 12:
            value = f"{value[:8]} ... ({len(value)} entries)"
        t.add_row(key, _num(value, ",.6g") if isinstance(value, float) else str(value))
    for key, value in view["params_b"].items():
        t.add_row(f"params_b.{key}", _num(value, ",.3f"))
    return t


def perf_table(p: InstancePerf) -> Table:
    """The per-instance figures of ``pddplan perf``."""
    t = Table(
        title=f"{p.model} on {p.gpus} x {p.chip} ({p.layout}, weights {p.weight_dtype}, KV {p.kv_dtype})",
        box=box.SIMPLE_HEAD,
    )
    t.add_column("figure")
    t.add_column("value", justify="right")
    rows = [
        ("weights per GPU", f"{p.weight_gb_per_gpu:,.1f} GB"),
        ("KV capacity (instance)", f"{p.kv_capacity_gb:,.1f} GB"),
        ("request", f"{p.input_tokens:,} in ({p.hit_rate:.0%} cached), {p.output_tokens:,} out"),
        ("prefill latency (alone)", f"{p.prefill_seconds:,.3f} s"),
        ("prefill throughput", f"{p.prefill_tokens_per_s_per_gpu:,.0f} new tok/s/GPU"),
        ("  counting cached input", f"{p.prefill_input_tokens_per_s_per_gpu:,.0f} input tok/s/GPU"),
        ("decode context (mean)", f"{p.decode_context_tokens:,.0f} tokens"),
        ("max batch (memory)", f"{p.max_batch_by_memory:,}"),
        (
            "max batch (memory + TPOT)" if p.tpot_ms else "max batch",
            f"{p.max_batch:,}" + (f" at TPOT <= {p.tpot_ms:g} ms" if p.tpot_ms else ""),
        ),
        ("decode step", f"{p.decode_step_ms:,.2f} ms at batch {p.decode_batch:,}"),
        ("decode throughput", f"{p.decode_tokens_per_s_per_gpu:,.0f} out tok/s/GPU"),
        ("KV per token", f"{p.kv_bytes_per_token:,.0f} B"),
        ("KV fixed per request", f"{p.kv_fixed_bytes_per_request / 1e6:,.2f} MB"),
        (
            "KV shipped",
            f"{p.kv_transfer_bytes / 1e6:,.1f} MB (destination hit {p.dest_hit_rate:.0%})",
        ),
    ]
    for name, value in rows:
        t.add_row(name, value)
    return t


def scenario_summary(s: Scenario, path: str) -> Table:
    """What a valid scenario contains."""
    t = Table(title=f"{path}: valid", box=box.SIMPLE_HEAD)
    t.add_column("section")
    t.add_column("content", overflow="fold")
    t.add_row("name", s.name)
    t.add_row("model", f"{s.model} (KV {s.kv_dtype or 'model default'})")
    for dc_id, dc in s.datacenters.items():
        limits = ", ".join(
            x
            for x in (
                dc.max_gpus and f"max {dc.max_gpus} GPUs",
                dc.max_power_kw and f"max {dc.max_power_kw:g} kW",
            )
            if x
        )
        t.add_row(
            f"datacenter {dc_id}",
            f"{'/'.join(dc.roles)} on {', '.join(dc.chips)}" + (f"; {limits}" if limits else ""),
        )
    for link in s.links:
        tiers = ", ".join(f"{x.gbps:g}" for x in link.tiers)
        t.add_row(
            f"link {link.between[0]}-{link.between[1]}",
            f"RTT {link.rtt_ms:g} ms; tiers {tiers} Gbps",
        )
    w = s.workload
    t.add_row("workload", f"trace {w.trace.file}" if w.trace else f"{w.arrival_rps:g} req/s")
    t.add_row(
        "SLA",
        f"TTFT P90 {s.sla.ttft_p90_s:g} s, P99 {s.sla.ttft_p99_s:g} s; TPOT {s.sla.tpot_ms:g} ms",
    )
    t.add_row("objective", s.objective)
    return t
