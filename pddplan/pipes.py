"""Opening an input that may be a pipe or a FIFO, with a bounded wait for its writer.

``open()`` of a FIFO blocks until a writer opens it, and a read of a pipe blocks until the
writer writes or closes: a FIFO nobody writes (``mkfifo f; pddplan validate f``), or a
process substitution whose command hangs, would hang pddplan for ever. Here a file that is
not a regular file (a FIFO, a pipe such as ``/dev/stdin`` or ``<(gen)``, a character
device, a socket) is opened without blocking, and each read waits at most ``PIPE_WAIT_S``
seconds for data (``wait_s`` for one call; a test passes a short one): a writer silent that
long is one ``InputError``. Regular files are opened as ``open`` does.

May import: ``errors``.
"""

from __future__ import annotations

import io
import os
import select
import stat
from pathlib import Path
from typing import BinaryIO

from pddplan.errors import InputError

PIPE_WAIT_S = 10.0
"""The longest a read of a pipe or FIFO waits for its writer's next bytes (or its end)."""


def open_input(path: Path, wait_s: float | None = None) -> BinaryIO:
    """``path`` opened for reading bytes: a regular file as ``open`` opens it; anything else
    without blocking, each read waiting at most ``wait_s`` (default ``PIPE_WAIT_S``) for
    data. Raises ``OSError`` as ``open`` does (``FileNotFoundError``, ``ELOOP``, ...)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None  # open() says why, as the caller expects
    if mode is None or stat.S_ISREG(mode) or not hasattr(select, "poll"):
        return path.open("rb")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    raw = _Waiting(fd, path, PIPE_WAIT_S if wait_s is None else wait_s)
    return io.BufferedReader(raw)


class _Waiting(io.RawIOBase):
    """A non-blocking descriptor read as a blocking one whose every read waits at most
    ``wait_s`` for data, then raises one ``InputError`` naming the path."""

    def __init__(self, fd: int, path: Path, wait_s: float) -> None:
        super().__init__()
        self._fd, self._path, self._wait_s = fd, path, wait_s
        self._poll = select.poll()
        self._poll.register(fd, select.POLLIN | select.POLLPRI)

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Bytes into ``buffer`` once some are ready (0 at the writer's end)."""
        while True:
            if not self._poll.poll(max(self._wait_s, 0.0) * 1000):
                raise InputError(
                    f"{self._path}: no data for {self._wait_s:g} s: a pipe or FIFO with no "
                    f"writer, or one that stopped writing (a pipe is waited on for at most "
                    f"{self._wait_s:g} s; docs/scenarios.md#input-limits)"
                )
            try:
                data = os.read(self._fd, len(buffer))
            except BlockingIOError:  # woken, but another reader took the bytes: wait again
                continue
            buffer[: len(data)] = data
            return len(data)

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()
