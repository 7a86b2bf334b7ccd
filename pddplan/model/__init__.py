"""The analytic model of one instance and one link: parameter breakdown, KV bytes, the roofline
prefill pass and decode step (``instance``), TCP transfer times (``network``), queueing
tails, pricing; and ``Problem``, the scenario with its catalogs and every table derived from
them, computed once. Pure functions of numbers. May import: ``workload``, ``spec``,
``work``, ``units``, ``errors``."""
