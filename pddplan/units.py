"""Unit constants. Catalog and scenario keys carry their unit in the name (``hbm_gb``,
``rtt_ms``); the model math works in SI (bytes, seconds, FLOP/s, bytes/s). Every conversion
goes through a constant from this file.

May import: nothing."""

GB = 1e9
"""Bytes in a decimal gigabyte (catalog memory and bandwidth figures are decimal)."""
TB = 1e12
TFLOPS = 1e12
"""FLOP/s in one TFLOPS."""
GBIT = 1e9 / 8
"""Bytes in one gigabit (network bandwidths are quoted in Gbit/s)."""
MS = 1e-3
"""Seconds in a millisecond."""
US = 1e-6
"""Seconds in a microsecond."""
HOURS_PER_MONTH = 730.0
"""Average hours in a month (8760 / 12), used to price monthly link leases per hour."""

DTYPE_BYTES: dict[str, float] = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5}
"""Bytes per element of each storage dtype."""
