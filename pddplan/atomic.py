"""Atomic file writes: a reader sees the old file or the new one, never a part of either.

Every file pddplan writes (``--out``, ``--plot``, ``model import --out``) goes through
``atomic_file``: the bytes go to a temporary file in the target's own folder (a rename is
atomic only within one file system), which is flushed and fsync'ed, then renamed over the
target, and the folder is fsync'ed so that the rename itself survives a crash. On any
failure, Ctrl-C included, the temporary file is removed and the old target is untouched.

- A symlinked target is written through: the file the link points to is replaced, the link
  stays.
- An existing target keeps its permission bits (a new one gets the umask's, as ``open``).
- A read-only target (no write permission bit, or one this user may not write) is refused
  with ``PermissionError``, as ``open`` would refuse it: a rename could replace it (the
  folder is writable), but a file made read-only is one its owner meant to keep, and a
  process running as root would otherwise replace it silently.
- A target that is not a regular file (``/dev/stdout``, a pipe such as ``>(cat)``) cannot be
  renamed over, so it is written directly.

May import: nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

WRITE_BITS = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
"""A file with none of these permission bits is read-only, to root too."""


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content to; it replaces ``path`` when the
    block ends without an exception (module docstring). Raises ``OSError`` as ``open``."""
    target = Path(os.path.realpath(path))  # through symlinks: the link stays, its file changes
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        with open(target, "wb") as direct:  # a device or a pipe: no rename possible
            yield direct
        return
    if mode is not None and (not mode & WRITE_BITS or not os.access(target, os.W_OK)):
        raise PermissionError(
            errno.EACCES, "the file is read-only (make it writable, or choose another path)"
        )
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, stat.S_IMODE(mode))
        else:  # mkstemp makes it 0600; a new file gets what open() would give it
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_folder(target.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path``'s content with ``text`` (UTF-8) atomically (``atomic_file``)."""
    with atomic_file(path) as f:
        f.write(text.encode("utf-8"))


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a folder that cannot be opened (some platforms): the rename stands
        return
    try:
        with contextlib.suppress(OSError):  # a file system without folder fsync
            os.fsync(fd)
    finally:
        os.close(fd)
