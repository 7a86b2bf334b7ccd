"""The ``pddplan`` command line, a thin typer layer: one module per command group, each parsing
options, calling the public API (``pddplan``) and printing a report. The only package that
knows typer. May import: ``report``, ``pddplan``, ``threads``, ``atomic``."""
