"""The catalogs and one instance in the terminal: ``catalog list``/``show``, ``model
list``/``show`` and ``perf``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pddplan import units
from pddplan.report.format import num, sig
from pddplan.report.tables import grid
from pddplan.report.views import CHIP_FIGURES

if TYPE_CHECKING:
    from pddplan.model.figures import InstancePerf
    from pddplan.spec.hardware import HardwareCatalog


CHIP_COLUMNS = (
    ("id", None, ""),
    ("BF16\nTFLOPS", "bf16_tflops", ",.0f"),
    ("FP8\nTFLOPS", "fp8_tflops", ",.0f"),
    ("HBM\nGB", "hbm_gb", ",.4g"),
    ("HBM\nTB/s", "hbm_bandwidth_tb_s", ".3g"),
    ("scale-up\nGB/s", "scaleup_bandwidth_gb_s", ",.0f"),
    ("domain\nGPUs", "scaleup_domain_gpus", "d"),
    ("NIC\nGb/s", "nic_gbps", ",.0f"),
    ("USD/\nGPU-h", "price_usd_per_hour", ".2f"),
)
"""``catalog list``'s columns: header, the chip's field, its format."""


def chips_table(catalog: HardwareCatalog) -> Table:
    """Every accelerator, one row each; a figure its catalog entry lists as uncertain is
    starred (the other cells of its column padded, so that the digits line up)."""
    t = grid(
        "Accelerators (TFLOPS dense; bandwidths per GPU, per direction)",
        [head for head, _, _ in CHIP_COLUMNS],
        text=None,
        drop=(7, 6, 5, 2),  # at a narrow width: NIC, domain, scale-up, FP8 before the rest
    )
    starred = {key for chip in catalog.chips.values() for key in chip.uncertain}
    for chip in catalog.chips.values():
        cells = [chip.id]
        for _, key, fmt in CHIP_COLUMNS[1:]:
            mark = ("*" if key in chip.uncertain else " ") if key in starred else ""
            cells.append(num(getattr(chip, key), fmt) + mark)
        t.add_row(*cells)
    t.caption = (
        "*: an uncertain figure; —: none (no FP8 units, no public price).\n"
        "Sources, price dates, TDP, other uncertain figures: pddplan catalog show ID"
    )
    t.caption_justify = "left"
    return t


def acquisition_table(rows: list[dict[str, Any]]) -> Table:
    """How each chip can be had: owned (capex, life, hosting, lead time), reserved (each
    term's price and minimum) and on demand; one row per chip."""
    t = grid(
        "How each GPU can be had (catalogs/acquisition.yaml; on demand: the hardware catalog)",
        (
            "chip",
            "capex\nUSD/GPU",
            "life\nmonths",
            "hosting\nUSD/GPU-h",
            "lead\nmonths",
            "owned\nUSD/GPU-h",
            "reserved USD/GPU-h\n(months: price, min GPUs)",
            "on demand\nUSD/GPU-h",
        ),
        text=None,
    )
    for row in rows:
        o = row["owned"] or {}
        owned_hour = row.get("owned_usd_per_gpu_hour_before_power")
        reserved = ", ".join(
            f"{r['term_months']}: {r['usd_per_gpu_hour']:.2f} (min {r['min_gpus']})"
            for r in row["reserved"]
        )
        t.add_row(
            row["chip"],
            num(o.get("capex_usd_per_gpu"), ",.0f"),
            num(o.get("amortization_months"), "d"),
            num(o.get("hosting_usd_per_gpu_hour"), ".3f"),
            num(o.get("lead_time_months"), "d"),
            num(owned_hour, ".3f"),
            reserved or "—",
            num(row["on_demand_usd_per_gpu_hour"], ".2f"),
        )
    t.caption = (
        "owned USD/GPU-h: capex over its life (730 h a month) + hosting, before power (TDP x PUE "
        "x the scenario's electricity price); —: not on offer. Every figure's source: --json"
    )
    t.caption_justify = "left"
    return t


def chip_detail(view: dict[str, Any]) -> Group:
    """One chip: each figure with its unit and source, then its efficiency defaults."""
    t = Table(
        title=escape(f"{view['id']}: {view['name']} ({view['vendor']}, family {view['family']})"),
        box=box.SIMPLE_HEAD,
        show_lines=False,
    )
    for col in ("figure", "value", "unit", "source"):
        t.add_column(col, overflow="fold")
    for key, unit in CHIP_FIGURES:  # catalog text is shown as written, never as markup
        source = Text(view["sources"].get(key, ""))
        if key in view["uncertain"]:
            source.append("\nuncertain: ", style="yellow").append(view["uncertain"][key])
        t.add_row(key, num(view[key]), unit, source)
    if view.get("price_date"):
        t.add_row("price_date", view["price_date"], "", "")
    eff = view["efficiency"]
    e = Table(title=f"Efficiency defaults (family {view['family']})", box=box.SIMPLE_HEAD)
    for col in ("factor", "value", "source"):
        e.add_column(col, overflow="fold")
    for key, value in eff.items():
        if key not in ("sources", "notes"):
            e.add_row(key, num(value), Text(eff["sources"].get(key, "")))
    parts: list[Any] = [t, e]
    if view.get("notes"):
        parts.append(Text(f"notes: {view['notes']}"))
    return Group(*parts)


def models_table(views: list[dict[str, Any]]) -> Table:
    """Every model, one row each; the parameters as ``total/active`` billions in one column,
    so that every figure fits 80 columns."""
    t = grid(
        "Models",
        text=None,
        drop=(7, 3, 5, 4),  # narrower than 80: fixed MB, the dtypes, weight GB; never the id
        headers=(
            "id",
            "attention",
            "total/\nactive B",
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
        params = f"{sig(v['total_params_b'])}/{sig(v['active_params_b'])}"
        t.add_row(
            v["id"],
            v["attention"],
            params,
            dtype,
            num(v["weight_bytes"] / units.GB, ",.0f"),
            v["kv_dtype"],
            num(v["kv_bytes_per_token"], ",.0f"),
            num(v["kv_fixed_bytes_per_request"] / 1e6, ",.2f"),
        )
    return t


def model_detail(view: dict[str, Any]) -> Table:
    t = Table(title=escape(f"{view['id']} ({view['hf_id']})"), box=box.SIMPLE_HEAD)
    t.add_column("key")
    t.add_column("value", overflow="fold")
    for key, value in view.items():
        if key in ("id", "params_b"):
            continue
        if isinstance(value, list) and len(value) > 12:
            value = f"{value[:8]} ... ({len(value)} entries)"
        # catalog text is shown as written, never as markup (``[a, b]`` is not a style)
        t.add_row(key, Text(num(value, ",.6g") if isinstance(value, float) else str(value)))
    for key, value in view["params_b"].items():
        t.add_row(f"params_b.{key}", num(value, ",.3f"))
    return t


def perf_table(p: InstancePerf) -> Table:
    """The per-instance figures of ``pddplan perf``."""
    t = Table(
        title=f"{p.model} on {p.gpus} x {p.chip} ({p.layout}, weights {p.weight_dtype}, "
        f"KV {p.kv_dtype}; engine {p.engine or '?'})",
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
