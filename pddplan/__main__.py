"""``python -m pddplan``."""

from pddplan.cli import main

main()
