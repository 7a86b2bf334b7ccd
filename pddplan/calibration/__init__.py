"""Fitting the analytic model's knobs to measured points (``pddplan calibrate``). May
import: ``model``, ``spec``, ``errors``, ``units``.

May import: ``model``, ``spec``, ``units``, ``errors``."""
