"""Exceptions. ``PddplanError`` and its subclasses are user errors: the CLI prints their
message as one line and exits non-zero, with no traceback. Anything else is a bug.

May import: nothing."""

from __future__ import annotations


class PddplanError(Exception):
    """A user-facing error: bad input, or a question the model cannot answer."""

    exit_code = 1


class InputError(PddplanError):
    """An input file or argument is invalid. ``problems`` holds one located line each."""

    exit_code = 2

    def __init__(self, problems: list[str] | str) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class WeightsDoNotFitError(InputError):
    """An instance of the requested size cannot hold the model's weights (one line per
    instance size that cannot)."""

    def __init__(self, problems: list[str] | str) -> None:
        super().__init__(problems.split("\n") if isinstance(problems, str) else problems)


class ArgumentError(InputError):
    """An argument of a library function is invalid. ``argument`` is its name as the library
    spells it (``rate_rps``); the message has ``{argument}`` where the name goes, so that a
    front end can put its own spelling there (``--rate-rps``) with ``render``. ``before``:
    located lines that come first (the bad lines of a file the argument is about)."""

    def __init__(self, argument: str, message: str, *, before: list[str] | None = None) -> None:
        self.argument, self.template, self.before = argument, message, list(before or [])
        super().__init__([*self.before, message.format(argument=argument)])

    def render(self, name: str) -> list[str]:
        """The problems with ``name`` for the argument."""
        return [*self.before, self.template.format(argument=name)]
