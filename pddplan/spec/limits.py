"""Upper bounds on input values where the physics (or the planner's memory) has one.

A value past one of these is far more likely a typo, a unit slip or a crafted file than a
plan: ``arrival_rps: 1e308`` would otherwise pass validation and make ``solve`` blame some
other limit. Each bound is stated with its reason (docs/scenarios.md#input-limits); each is
far above any real deployment, so none of them ever decides a real plan.
"""

from __future__ import annotations

MAX_ARRIVAL_RPS = 1_000_000.0
"""Requests per second one planned service may receive: 35x the average rate of all of
ChatGPT (2.5 billion prompts a day, OpenAI via Axios, 2025-07-21: ~29,000 req/s)."""

MAX_TOKENS = 10_000_000
"""Tokens one request may hold (prompt or output): the longest context any released model
accepts, Llama 4 Scout's 10M tokens (Meta, "The Llama 4 herd", 2025-04-05)."""

MAX_GPUS = 1_000_000
"""GPUs in one datacenter, pool or inventory: five times the largest single cluster
announced (xAI's Colossus, 200,000 GPUs, 2025)."""

MAX_RTT_MS = 1_000.0
"""Round-trip time of one inter-datacenter link: light in fibre (2e8 m/s) round half the
Earth (20,000 km) and back takes 200 ms; a geostationary satellite hop about 600 ms."""

MAX_LINK_GBPS = 1_000_000.0
"""One leased link's bandwidth, 1 Pbit/s: above any single cable system's capacity."""

MAX_USD = 1e9
"""Any one price (a GPU-hour, a month of a link, a GB, a GPU's capex, an hourly budget): a
billion dollars, above every real line item; past it costs print as 300-digit numbers."""

MAX_CLASSES = 4_096
"""Request classes given explicitly. The planner keeps, per MD cache option, a table of
which classes each relay cut relays (cuts x classes, about classes^2, 9 bytes an entry):
151 MB at this bound, 3.4 GiB at 20,000 classes. The distributions and ``workload fit``
give at most a few hundred."""


RELAY_TABLE_BYTES_PER_ENTRY = 9
"""A boolean and a float64 per (cut, class) entry of the relay tables."""


def relay_table_bytes(classes: int) -> int:
    """The bytes of one MD cache option's relay tables for ``classes`` classes (there is
    one cut per distinct payload, plus "relay nothing")."""
    return (classes + 1) * classes * RELAY_TABLE_BYTES_PER_ENTRY


MAX_INSTANCE_GPUS = 4_096
"""GPUs of one serving instance (a measured point's ``gpus``): the widest published
deployment of one model copy, Huawei's CloudMatrix384 (384 NPUs, expert parallel over 320),
is a tenth of it; the validation corpus's widest point has 144."""

MAX_BATCH = 1_000_000
"""Sequences one instance decodes at once (a measured point's ``batch``): the validation
corpus's largest is 18,432 (DeepSeek's 72-GPU decode), engines default to 256-1,024."""

MAX_MEASURED = 1e9
"""A measured figure (tokens per second per GPU, or a decode step in ms): a billion tokens a
second from one GPU is ten thousand times any chip's peak; a billion ms is 11 days a step."""

MAX_CALIBRATION_POINTS = 500
"""Points one ``calibrate`` run fits by default (``--max-points`` raises it): each point is
predicted some hundreds of times per start (about 1 s a point for a large MoE model on a
2-core machine), so 500 points take minutes; a published corpus has tens."""

MAX_VARIANTS = 32
"""Workload variants in one scenario: the robust MILP grows superlinearly with them (4
variants: 10 s, 16: 33 s, 64: 443 s, docs/milp.md) and each variant's own plan is checked
under every other (variants squared); a year of months, or a month of days, fits."""

MAX_TTFT_S = 86_400.0
"""A time-to-first-token bound: a day. Past it a plan is not serving a user who waits, and
the tails' exponentials overflow (``--vary sla.ttft_p99_s=1e307`` printed absurd TTFTs)."""

MAX_TPOT_MS = 60_000.0
"""A time-per-output-token bound: a minute a token, a thousand times any interactive SLA."""

MAX_TIME_LIMIT_S = 604_800.0
"""A solve's wall-clock safety stop (``solver.time_limit_s``, ``--time-limit``): a week. The
work budgets decide where a search stops; past a week the stop is no stop (``inf`` ran)."""

MAX_MODEL_DIM = 10_000_000
"""Any one dimension of a model (layers, hidden and MLP sizes, heads, head size, vocabulary,
experts, window, index sizes): the token bound; the widest released dimension is Llama 3.1
405B's MLP, 53,248, and the largest vocabulary about 256,000."""

MAX_PARAMS_B = 1_000_000.0
"""A model's parameters in billions: a quadrillion, a thousand times the largest released."""

MAX_HORIZON_MONTHS = 120
"""Months one horizon plans (``horizon.months``): ten years; no GPU is amortized, reserved or
forecast further out."""

MAX_TERM_MONTHS = 240
"""A term, life or lead time in months (acquisition catalog, ``horizon.supply``): twenty
years; past it a value is a unit slip (days or hours given as months)."""

CEILINGS = frozenset(
    {
        MAX_TTFT_S,
        MAX_TPOT_MS,
        MAX_TIME_LIMIT_S,
        MAX_MODEL_DIM,
        MAX_PARAMS_B,
        MAX_ARRIVAL_RPS,
        MAX_TOKENS,
        MAX_GPUS,
        MAX_RTT_MS,
        MAX_LINK_GBPS,
        MAX_USD,
        MAX_INSTANCE_GPUS,
        MAX_BATCH,
        MAX_MEASURED,
        MAX_HORIZON_MONTHS,
        MAX_TERM_MONTHS,
    }
)
"""The bounds above that a field's ``le=`` names, for the message that explains one."""
