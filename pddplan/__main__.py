"""``python -m pddplan``.

May import: ``cli``."""

from pddplan.cli.app import main

main()
