"""docs/validation.md's table holds: capacity rows within +-20% of their measurement with
the default calibration, average-load rows at a ratio of at least 0.9; the three rows outside
the band are the ones the page explains, still where it says."""

from __future__ import annotations

import pytest
from conftest import ROOT

import pddplan
from pddplan.calibration.fit import predict
from pddplan.io.measurements import load_measurements

POINTS = ROOT / "benchmarks" / "validation_points.json"
OUTSIDE = {
    "RTP prefill": (1.25, 1.40),
    "TRT Llama-3.1-405B TP8 2048/128": (0.75, 0.82),
    "TRT Llama-3.1-8B TP1 128/2048": (1.22, 1.38),
}
"""Capacity rows outside +-20%, with the range docs/validation.md gives their ratio in."""

_CATALOGS = pddplan.load_catalogs()
_POINTS = load_measurements([POINTS], _CATALOGS)


@pytest.mark.parametrize("point", _POINTS, ids=[p.measurement.id for p in _POINTS])
def test_the_validation_rows_hold(point):
    m = point.measurement
    ratio = predict(m, _CATALOGS.model(m.model), _CATALOGS.hardware) / m.value
    if m.id in OUTSIDE:
        lo, hi = OUTSIDE[m.id]
        assert lo <= ratio <= hi, ratio
    elif m.kind == "capacity":
        assert ratio == pytest.approx(1.0, abs=0.2)
    else:
        assert ratio >= 0.9
