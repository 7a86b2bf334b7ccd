"""The sweep journal: every finished point, one sealed line each, in a file a resume reads
back as untrusted input (``docs/sweeps.md#the-journal-resume-and-signals``).

- **Lines.** Each line is ``PAYLOAD<TAB>CHECKSUM<LF>``: ``PAYLOAD`` is compact JSON (keys
  sorted, ASCII only, so it holds no tab or line break), ``CHECKSUM`` the first
  ``CHECK_HEX`` hex digits of the SHA-256 of ``PAYLOAD``'s bytes. The first line is the
  header, ``{"grid": FINGERPRINT, "journal": VERSION, "sweep": IDENTITY}``; every other
  line is ``{"grid": FINGERPRINT, "point": POINT}``.
- **The fingerprint** is the first ``CHECK_HEX`` hex digits of the SHA-256 of the sweep's
  identity without the scenario's file name (its digest, the axes and their values, zip or
  grid, the settings), so that a journal is tied to its grid, not to where it was run.
- **Reading** (``resume``): a header that does not verify is an error (binary data, an
  older journal, another sweep); a point line that fails its checksum, carries another
  fingerprint, does not parse as a point or lies outside the grid (``on_grid``) is
  counted, reported in one warning and ignored: its point runs again. A last line without
  its line feed (a crash while writing) is cut off before anything is appended, or ended
  when it verifies.
- **The lock**: ``fcntl.flock`` on the open journal, exclusive, not waiting: a second sweep
  on the same journal is refused at once; the kernel drops the lock when the process ends,
  however it ends, so a crash leaves no stale lock (``docs/dependencies.md``).
- **Writes**: one ``os.write`` per line, fsync'ed, with SIGINT and SIGTERM deferred to
  its end (``signals_deferred``); a failure (a full disk) is an ``InputError`` naming the journal, the partial
  line cut back, and a journal this run made and wrote no point to removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import math
import os
import signal
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from pddplan.errors import InputError
from pddplan.spec.status import PointStatus
from pddplan.sweeps.points import ArchResult, PointResult

VERSION = 3
"""The journal format this module writes and reads (1: before checksums; 2: before a row
named its whole deployment and carried its id; neither read)."""
CHECK_HEX = 16
"""Hex digits of a line's checksum and of the grid's fingerprint (64 bits each)."""
MAX_LINE = 1 << 20
"""The longest line read (1 MiB); a longer one is not a journal line."""
JOURNALLED = (PointStatus.OK, PointStatus.INVALID)
"""Point statuses a resume keeps; the others (``interrupted``, ``error``) run again."""
_TAKE_OVER = b'{"grid":"'
"""How every journal line begins: a first line cut short that begins so (or is empty) is
a header a crash cut, and the journal holds nothing."""
_AGAIN = "remove it to start again, or give another --out"


def fingerprint(identity: dict[str, Any]) -> str:
    """The grid's fingerprint (module docstring): what every line of its journal carries."""
    ident = {k: v for k, v in identity.items() if k != "scenario"}
    text = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:CHECK_HEX]


def seal(payload: dict[str, Any]) -> bytes:
    """``payload`` as one journal line: compact JSON, a tab, its checksum, a line feed."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return f"{text}\t{_checksum(text)}\n".encode("ascii")


def _checksum(text: str) -> str:
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:CHECK_HEX]


def unseal(line: bytes) -> dict[str, Any] | None:
    """The payload of a journal line (without its line feed), or None where the line is
    not one or fails its checksum."""
    try:
        text = line.decode("ascii")
    except UnicodeDecodeError:
        return None
    payload, tab, check = text.rpartition("\t")
    if not tab or _checksum(payload) != check:
        return None
    try:
        data = json.loads(payload)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


# --- a point read back ------------------------------------------------------------------------
_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "str | None": (str, type(None)),
    "float": _NUMBER,
    "float | None": (*_NUMBER, type(None)),
    "int | None": (int, type(None)),
    "bool": (bool,),
}


def _typed(obj: Any) -> bool:
    """Whether each field of the dataclass ``obj`` holds a value of its declared type
    (numbers finite, no boolean for a number)."""
    for f in dataclasses.fields(obj):
        want = _TYPES.get(str(f.type))
        if want is None:
            continue
        v = getattr(obj, f.name)
        if not isinstance(v, want) or (isinstance(v, bool) and bool not in want):
            return False
        if isinstance(v, float) and not math.isfinite(v):
            return False
    return True


def read_point(data: Any) -> PointResult | None:
    """A journalled point as a ``PointResult``, or None where it is not one: every field
    present and of its type, a known status, each row a full ``ArchResult``."""
    if not isinstance(data, dict) or not isinstance(data.get("results"), list):
        return None
    try:
        point = PointResult.from_json(data)
    except (TypeError, ValueError, KeyError):
        return None
    index = point.index
    if isinstance(index, bool) or not isinstance(index, int) or not isinstance(point.values, dict):
        return None
    if point.status not in set(PointStatus) or not _typed(point):
        return None
    if not all(isinstance(r, ArchResult) and _typed(r) for r in point.results):
        return None
    return point


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive during the block recorded and raised again when it
    ends, so that the block runs whole (a journal line written and fsync'ed, a worker
    started with all its start-up data) and the caller's handler (``KeyboardInterrupt``)
    sees them after it. Python runs signal handlers in the main thread only, whichever
    thread the signal reached: a mask would not hold them off; a handler swap does. Outside
    the main thread the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = (signal.SIGINT, signal.SIGTERM)
    came: list[int] = []
    old = {s: signal.getsignal(s) for s in held}

    def record(signum: int, frame: Any) -> None:
        came.append(signum)

    for s in held:
        if old[s] not in (signal.SIG_IGN, None):
            signal.signal(s, record)
    try:
        yield
    finally:
        for held_signal, handler in old.items():
            if handler is not None:
                signal.signal(held_signal, handler)
        for signum in dict.fromkeys(came):
            signal.raise_signal(signum)


class Journal:
    """An open, locked journal (module docstring): ``done`` holds the points a resume
    keeps, ``warnings`` what was ignored on reading it."""

    def __init__(
        self,
        path: Path,
        identity: dict[str, Any],
        *,
        resume: bool,
        on_grid: Callable[[PointResult], bool],
    ) -> None:
        self.path = path
        self.grid = fingerprint(identity)
        self.done: dict[int, PointResult] = {}
        self.warnings: list[str] = []
        self.added = 0
        """Lines this run appended."""
        self.created = False
        """Whether this run made the file."""
        self._fd: int | None = None
        self._size = 0
        for _ in range(5):  # another process may make or remove it between the steps
            if self._open(identity, resume=resume, on_grid=on_grid):
                return
        raise InputError(f"{path}: the journal keeps changing under this sweep; is another "
                         "one running on it?")  # fmt: skip

    # --- opening ------------------------------------------------------------------------------
    def _open(
        self, identity: dict[str, Any], *, resume: bool, on_grid: Callable[[PointResult], bool]
    ) -> bool:
        """Open (or make) the journal and lock it; False where the file changed meanwhile."""
        path = self.path
        try:
            st = os.stat(path)  # through a link: what the journal would be
        except FileNotFoundError:
            return self._create(identity)
        except OSError as e:
            raise InputError(f"{path}: cannot read the sweep's journal: {e.strerror}") from None
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{path}: a folder is where the sweep's journal goes; {_AGAIN}")
        if not stat.S_ISREG(st.st_mode):
            raise InputError(
                f"{path}: not a regular file (a device, pipe or socket) where the sweep's "
                f"journal goes; {_AGAIN}"
            )
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise InputError(f"{path}: cannot open the sweep's journal: {e.strerror}") from None
        try:
            self._lock(fd)
            if not _same_file(fd, path):  # removed or replaced while this one waited
                os.close(fd)
                return False
            self._fd = fd
            self._read(fd, resume=resume, on_grid=on_grid, identity=identity)
        except BaseException:
            self._fd = None
            os.close(fd)
            raise
        return True

    def _create(self, identity: dict[str, Any]) -> bool:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            return False
        except OSError as e:
            raise InputError(
                f"{self.path}: cannot write the sweep's journal: {e.strerror}"
            ) from None
        self._fd, self.created = fd, True
        try:
            self._lock(fd)
            self._append({"grid": self.grid, "journal": VERSION, "sweep": identity})
        except BaseException:
            self.close()
            raise
        return True

    def _lock(self, fd: int) -> None:
        import fcntl

        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(
                f"{self.path}: another pddplan sweep is running on this journal; let it "
                "finish (or stop it), then run again with --resume"
            ) from None
        except OSError as e:  # a file system without locks: go on unlocked, and say so
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise InputError(f"{self.path}: cannot lock the journal: {e.strerror}") from None
            self.warnings.append(
                f"{self.path}: the file system cannot lock the journal; run one sweep on it "
                "at a time"
            )

    def _read(
        self,
        fd: int,
        *,
        resume: bool,
        on_grid: Callable[[PointResult], bool],
        identity: dict[str, Any],
    ) -> None:
        """Read the journal's header and points (module docstring), then cut a cut last
        line and leave the file ready to append to."""
        size = os.fstat(fd).st_size
        good = 0  # where the last whole line ends
        ignored = 0
        header_seen = False
        end_line = False  # the last line verifies but lacks its line feed
        with os.fdopen(os.dup(fd), "rb") as f:
            f.seek(0)
            for line, whole, nbytes in _lines(f):
                body = line[:-1] if whole else line
                if not header_seen:
                    if not whole and (not body or body.startswith(_TAKE_OVER[: len(body)])):
                        break  # a header a crash cut: the journal holds nothing
                    self._header(body, line_no=1)
                    header_seen = True
                    if not resume:
                        raise InputError(
                            f"{self.path}: a journal of an earlier run of this sweep's output "
                            "is here; give --resume to continue it, or remove it to start again"
                        )
                    good += nbytes
                    end_line = not whole
                    continue
                point = self._point(body, on_grid) if nbytes <= MAX_LINE + 1 else None
                if not whole and point is None:
                    break  # cut by a crash: cut off below, its point runs again
                if point is None:
                    ignored += 1
                elif point.status in JOURNALLED:
                    self.done[point.index] = point
                good += nbytes
                end_line = not whole
        if not header_seen:  # empty, or a cut header: start it afresh
            os.ftruncate(fd, 0)
            self._size = 0
            os.lseek(fd, 0, os.SEEK_SET)
            self._append({"grid": self.grid, "journal": VERSION, "sweep": identity})
            return
        if ignored:
            self.warnings.append(
                f"{self.path}: {ignored:,} line(s) fail their checksum or lie outside this "
                "sweep's grid; ignored (their points run again)"
            )
        try:
            if good < size:
                os.ftruncate(fd, good)
            self._size = good
            os.lseek(fd, good, os.SEEK_SET)
            if end_line:
                self._write(b"\n")
        except OSError as e:
            raise InputError(
                f"{self.path}: cannot write the sweep's journal: {e.strerror}"
            ) from None

    def _header(self, body: bytes, *, line_no: int) -> None:
        where = f"{self.path}:{line_no}"
        data = unseal(body)
        if data is None:
            if b"\0" in body or not _is_text(body):
                raise InputError(f"{where}: binary data, not a pddplan sweep journal; {_AGAIN}")
            try:
                old = json.loads(body)
            except ValueError:
                old = None
            if isinstance(old, dict) and "sweep" in old:
                raise InputError(
                    f"{where}: a journal from an older pddplan (lines without checksums); {_AGAIN}"
                )
            raise InputError(
                f"{where}: not a pddplan sweep journal, or its header fails its checksum; {_AGAIN}"
            )
        if "journal" not in data:
            raise InputError(
                f"{where}: its first line is not the journal's header (a point, or another "
                f"file: the header is missing); {_AGAIN}"
            )
        if data.get("journal") != VERSION or not isinstance(data.get("grid"), str):
            raise InputError(
                f"{where}: not a journal this pddplan reads (format "
                f"{str(data.get('journal'))[:20]}, this one writes {VERSION}); {_AGAIN}"
            )
        if data["grid"] != self.grid:
            raise InputError(
                f"{where}: the journal is of another sweep (other scenario, axes or "
                "settings); remove it, or give another --out"
            )

    def _point(self, body: bytes, on_grid: Callable[[PointResult], bool]) -> PointResult | None:
        data = unseal(body)
        if data is None or data.get("grid") != self.grid or set(data) != {"grid", "point"}:
            return None
        point = read_point(data["point"])
        if point is None:
            return None
        try:
            return point if on_grid(point) else None
        except (TypeError, ValueError):
            return None

    # --- writing ------------------------------------------------------------------------------
    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        with signals_deferred():
            try:
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
                os.fsync(self._fd)
            except OSError:
                with contextlib.suppress(OSError):  # cut the partial line back
                    os.ftruncate(self._fd, self._size)
                    os.lseek(self._fd, self._size, os.SEEK_SET)
                raise
        self._size += len(data)

    def _append(self, payload: dict[str, Any]) -> None:
        try:
            self._write(seal(payload))
        except OSError as e:
            kept = (
                f"the {len(self.done):,} finished point(s) it holds are kept: make room, then "
                "run again with --resume"
                if self.done or self.added or not self.created
                else "nothing was kept"
            )
            if self.created and not self.added and not self.done:
                self.close()  # holds no point: nothing that blocks the next run
            raise InputError(
                f"{self.path}: cannot write the sweep's journal: {e.strerror}; {kept}"
            ) from None

    def add(self, point: PointResult) -> None:
        """Append one finished point (fsync'ed before it returns)."""
        self._append({"grid": self.grid, "point": point.to_json()})
        self.added += 1
        if point.status in JOURNALLED:
            self.done[point.index] = point

    def close(self, *, remove: bool = False) -> None:
        """Close the journal and let its lock go. ``remove``: delete it first (its points
        are in the output now); one this run made and wrote no point to holds nothing to
        resume (e.g. Ray was unreachable) and is removed as well, so the next run need not
        ``--resume`` it."""
        if self._fd is None:
            return
        try:
            if remove or (self.created and not self.added):
                with contextlib.suppress(FileNotFoundError):
                    if _same_file(self._fd, self.path):
                        os.unlink(self.path)
        finally:
            os.close(self._fd)
            self._fd = None


def _lines(f: BinaryIO) -> Iterator[tuple[bytes, bool, int]]:
    """Each line of ``f``, whether it ends in a line feed, and its length in bytes; of a
    line over ``MAX_LINE`` (too long to be one), only its first ``MAX_LINE + 1`` bytes."""
    while True:
        line = f.readline(MAX_LINE + 1)
        if not line:
            return
        if line.endswith(b"\n") or len(line) <= MAX_LINE:
            yield line, line.endswith(b"\n"), len(line)
            continue
        nbytes, whole = len(line), False
        while True:  # over-long: read on to its end
            more = f.readline(MAX_LINE + 1)
            nbytes += len(more)
            if not more or more.endswith(b"\n"):
                whole = bool(more)
                break
        yield line + (b"\n" if whole else b""), whole, nbytes


def _is_text(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the open file ``fd``."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
