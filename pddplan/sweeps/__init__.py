"""Many plans at once: a grid of scenario values (``axes``, ``knobs``) planned point by point
(``points``) in local processes or on Ray (``engine``, ``ray_engine``), journalled so that
an interrupted sweep resumes; what the points show (``analysis``); the studies built on them
(``studies``: demand, price premium, bathtub); and a price sweep of one chip with its
break-even (``prices``). May import: ``plan``, ``evaluation``, ``io``, ``model``,
``workload``, ``spec``, ``atomic``, ``units``, ``progress``, ``errors``."""
