"""The shipped hardware and model catalogs (installed as ``pddplan.catalogs``).

May import: nothing."""
