"""SIGINT and SIGTERM, handled alike for every command.

The first of either raises ``KeyboardInterrupt`` in the main thread, as Ctrl-C does, so that
each command's cleanup runs the same way for both: an output file being written is never
left half-written (``pddplan.atomic`` removes its temporary file), a sweep journals the
points it was planning as ``interrupted`` and stops its workers, and a Ray sweep shuts Ray
down. ``app.main`` then prints one line and exits 128 + the signal's number (130 for
SIGINT, 143 for SIGTERM), unless the command has said what it stopped (``reported``). A
second signal while the first is being cleaned up ends the process at once. A signal that
comes while a module is being imported (where Python would print the interrupt as
"ignored" and carry on) is delivered again ``RETRY_S`` later.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM)


class _State:
    signum: int | None = None
    """The first signal received (None: none)."""
    reported: bool = False
    """Whether the command has printed its own line about the stop."""
    raised: bool = False
    """Whether the signal has been raised as ``KeyboardInterrupt``."""


state = _State()


RETRY_S = 0.05
"""How soon a signal that came while a module was being imported is delivered again."""


def _handler(signum: int, frame: FrameType | None) -> None:
    if state.raised:  # a second one: stop now, the cleanup is cut short
        os._exit(128 + (state.signum or signum))
    state.signum = state.signum or signum
    if _unsafe(frame):  # Python would print the interrupt as "ignored" and go on: later
        again = threading.Timer(RETRY_S, os.kill, (os.getpid(), signum))
        again.daemon = True
        again.start()
        return
    state.raised = True
    raise KeyboardInterrupt


def _unsafe(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs where an exception is printed and dropped rather than raised:
    inside the import machinery (its module-lock callbacks) or a finaliser."""
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith("<frozen importlib") or code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def install() -> Callable[[], None]:
    """Handle SIGINT and SIGTERM (module docstring) for this process; returns what puts
    the previous handlers back. Does nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    state.signum, state.reported, state.raised = None, False, False
    previous = {s: signal.getsignal(s) for s in HANDLED}
    for s in HANDLED:
        if s == signal.SIGINT and previous[s] == signal.SIG_IGN:
            continue  # started in the background with Ctrl-C ignored: keep it so
        signal.signal(s, _handler)

    def restore() -> None:
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


def stopped() -> int | None:
    """The signal that stopped the command, if one did."""
    return state.signum


def exit_code() -> int:
    """128 + the signal that stopped the command (SIGINT's 130 where none was seen: a
    ``KeyboardInterrupt`` raised otherwise)."""
    return 128 + (state.signum or signal.SIGINT)


def name() -> str:
    """The stopping signal's name: 'SIGTERM', 'SIGINT (Ctrl-C)'."""
    signum = state.signum or signal.SIGINT
    return "SIGINT (Ctrl-C)" if signum == signal.SIGINT else signal.Signals(signum).name


def report() -> None:
    """Mark the stop as told to the user (the command printed its own line)."""
    state.reported = True
