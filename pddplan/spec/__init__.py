"""The validated inputs, and nothing but them: the hardware and model catalogs' entries, the
calibration knobs, the workload's distributions, the scenario, the fleet, and where each
came from (``source``). Pydantic models that check each field and its cross-references; no
math, no files. May import: ``units``, ``errors``."""
