"""What a given fleet delivers at an arrival rate: utilizations, TTFT tails, TPOT, cost, and
its SLA capacity (the largest rate within every limit), from the model's cost functions;
never from the planner's MILP. May import: ``model``, ``workload``, ``spec``, ``work``,
``units``, ``errors``."""
