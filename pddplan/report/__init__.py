"""Results for people and tools: plain-dict views (what ``--json`` prints), rich tables (only
here and in ``cli`` is rich imported), Markdown and CSV documents, plots, and the shareable
report of a plan (``page``: its content; ``html``, ``markdown``: its formats). Renders;
computes nothing the results do not hold. May import: ``sweeps``, ``simulation``, ``plan``,
``evaluation``, ``calibration``, ``model``, ``workload``, ``spec``, ``atomic``, ``units``,
``errors``."""
