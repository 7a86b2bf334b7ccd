"""``python -m pddplan``."""

from pddplan.cli import app

app(prog_name="pddplan")
