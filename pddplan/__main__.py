"""``python -m pddplan``."""

from pddplan.cli.app import main

main()
