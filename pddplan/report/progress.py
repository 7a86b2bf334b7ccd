"""Progress on stderr: what a long call reports (``pddplan.progress``: done, total, label)
drawn for a person. On a terminal, a rich bar with the count, the time elapsed and the time
left, shown once the work has taken ``SHOW_AFTER_S`` and gone when it ends; on a file or a
pipe, one plain line at most every ``EVERY_S`` (count, elapsed, time left), and a last line
when the work ends if any was printed. Quiet: nothing. Only stderr is written: what a
command prints on stdout never depends on it.

The time left is the pace of this run's units so far (from the first report: a resumed
sweep's journalled points are not counted as this run's pace) times the units left; none
is given while the total is unknown or no unit has finished.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn
from rich.text import Text

SHOW_AFTER_S = 2.0
"""The bar appears on a terminal once the work has taken this long."""
EVERY_S = 10.0
"""At most one plain line this often when stderr is not a terminal."""


def clock_text(seconds: float) -> str:
    """``seconds`` as ``M:SS`` (``H:MM:SS`` from an hour on)."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class ProgressView:
    """A ``pddplan.progress.Progress`` callback that draws on ``console`` (module docstring),
    used as a context manager around the work.

    Args:
        console: where it draws (stderr's console).
        what: the work's name, first on every line (``sweep``, ``simulate``).
        unit: what ``done`` counts (``points``, ``rates priced``); empty: no count shown,
            only the label (a stage without units).
        quiet: draw nothing.
        terminal: a bar (True) or plain lines (False); default: whether ``console`` is a
            terminal.
        clock: the time source (tests give a fake one).
    """

    def __init__(
        self,
        console: Console,
        what: str,
        unit: str = "",
        *,
        quiet: bool = False,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console, self.what, self.unit, self.quiet = console, what, unit, quiet
        self.terminal = console.is_terminal if terminal is None else terminal
        self.clock = clock
        self.began = clock()
        self.done, self.label = 0, ""
        self.total: int | None = None
        self.base: tuple[float, int] | None = None
        """(time, done) at the first report: the pace is this run's from there."""
        self.last_line: float | None = None
        """When the last plain line was printed (None: none yet)."""
        self.lines = 0
        self._bar: Progress | None = None
        self._task: Any = None

    # --- what the work reports ------------------------------------------------------------
    def __call__(self, done: int, total: int | None, label: str) -> None:
        now = self.clock()
        if self.base is None:
            self.base = (now, done)
        self.done, self.total, self.label = done, total, label
        if self.quiet:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total, label=label)
        elif not self.terminal and now - (self.last_line or self.began) >= EVERY_S:
            self._print(now)

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left at this run's pace so far; None while the total is unknown or no
        unit of this run has finished."""
        if self.base is None or self.total is None:
            return None
        t0, d0 = self.base
        ran = self.done - d0
        if ran <= 0:
            return None
        now = self.clock() if now is None else now
        return max(0.0, (now - t0) / ran * max(self.total - self.done, 0))

    def text(self, now: float | None = None) -> str:
        """The plain line: ``what: done/total unit (share), elapsed, time left; label``."""
        now = self.clock() if now is None else now
        parts = [f"{self.what}:"] if self.what else []
        if self.unit:
            count = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
            share = (
                f" ({self.done / self.total:.0%})" if self.total and self.done < self.total else ""
            )
            parts.append(f"{count} {self.unit}{share},")
        parts.append(f"{clock_text(now - self.began)} elapsed")
        eta = self.eta_s(now)
        tail = ""
        if eta is not None and self.total is not None and self.done < self.total:
            tail = f", about {clock_text(eta)} left"
        label = f"; {self.label}" if self.label else ""
        return " ".join(parts) + tail + label

    def _print(self, now: float) -> None:
        self.console.print(self.text(now), markup=False, highlight=False, soft_wrap=True)
        self.last_line = now
        self.lines += 1

    # --- the block ------------------------------------------------------------------------
    def __enter__(self) -> ProgressView:
        if not self.quiet and self.terminal:
            self._bar = _Delayed(
                self.began + SHOW_AFTER_S,
                self.clock,
                TextColumn(self.what),
                _BarOrSpinner(),
                _Count(self),
                _Elapsed(self),
                _Left(self),
                TextColumn("{task.fields[label]}"),
                console=self.console,
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.what, total=None, label="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
        elif not self.quiet and self.lines and exc[0] is None:
            self._print(self.clock())  # where it ended, after the lines before


class _Delayed(Progress):
    """A rich progress display that shows nothing until ``show_at`` (on ``clock``)."""

    def __init__(self, show_at: float, clock: Callable[[], float], *columns: Any, **kw: Any):
        self.show_at, self.view_clock = show_at, clock  # before rich's first refresh
        super().__init__(*columns, **kw)

    def get_renderables(self) -> Any:
        if self.view_clock() < self.show_at:
            return
        yield from super().get_renderables()


class _BarOrSpinner(ProgressColumn):
    """A bar where the total is known, a spinner where it is not."""

    def __init__(self) -> None:
        super().__init__()
        self.bar, self.spinner = BarColumn(), SpinnerColumn()

    def render(self, task: Any) -> Any:
        return self.bar.render(task) if task.total is not None else self.spinner.render(task)


class _Count(ProgressColumn):
    """``done/total unit`` (``done unit`` while the total is unknown)."""

    def __init__(self, view: ProgressView) -> None:
        super().__init__()
        self.view = view

    def render(self, task: Any) -> Text:
        v = self.view
        if not v.unit:
            return Text("")
        return Text(
            f"{v.done:,} {v.unit}" if v.total is None else f"{v.done:,}/{v.total:,} {v.unit}"
        )


class _Elapsed(ProgressColumn):
    def __init__(self, view: ProgressView) -> None:
        super().__init__()
        self.view = view

    def render(self, task: Any) -> Text:
        return Text(f"{clock_text(self.view.clock() - self.view.began)} elapsed")


class _Left(ProgressColumn):
    """The time left at this run's pace (``ProgressView.eta_s``); nothing while unknown."""

    def __init__(self, view: ProgressView) -> None:
        super().__init__()
        self.view = view

    def render(self, task: Any) -> Text:
        eta = self.view.eta_s()
        return Text("" if eta is None else f"about {clock_text(eta)} left")
