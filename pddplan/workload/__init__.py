"""The workload as the planner sees it: distributions' quantiles, request classes (the workload
cut into weighted buckets of hit rate and length), trace reading and fitting, and the prefix
cache trace replay and the simulator share. May import: ``spec``, ``work``, ``pipes``, ``units``,
``errors``."""
