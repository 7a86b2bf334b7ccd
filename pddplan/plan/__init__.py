"""Choosing the fleet: the decision space (``space``), minimum instance counts at a rate
(``counts``), the MILP and its solver (the only modules that know PuLP), the objectives'
search, explanations, brute force, and the architecture comparison. Every plan is scored by
``evaluation``. May import: ``evaluation``, ``model``, ``workload``, ``spec``, ``work``,
``units``, ``progress``, ``errors``."""
