"""The discrete-event simulator that checks a plan: events, the WAN link, decode instances, the
engine that wires them to prefill, routing and handoffs, the request sources, a run's
statistics, and ``verify`` (simulate, tighten, re-plan). It shares only the per-step cost
functions with the analytic model. May import: ``plan``, ``evaluation``, ``model``,
``workload``, ``spec``, ``work``, ``units``, ``progress``, ``errors``."""
