"""Choosing the fleet: the decision space (``space``), minimum instance counts at a rate
(``counts``), the MILP and its solver (the only modules that know PuLP), the objectives'
search, explanations, brute force, the architecture comparison, and plans over a horizon
(``horizon``, ``horizon_milp``, from the periods ``horizon`` cuts). Every plan is scored by
``evaluation``. May import: ``evaluation``, ``horizon``, ``model``, ``workload``, ``spec``,
``work``, ``units``, ``progress``, ``errors``."""
