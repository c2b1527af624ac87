"""One process per run directory: an OS lock on ``RUN/.lock``, held for the whole of a training run.

Why: two processes training into one directory (``train --resume RUN`` while the first still runs)
both finish, their checkpoints and ``metrics.jsonl`` lines interleave, and the MLflow run gets each
step's metrics twice (582 ``policy_loss`` points for 391 updates). So a run takes ``fcntl.flock`` on
``RUN/.lock`` before anything in the directory changes and keeps it until the run ends; a second
process is refused in one line (``RunDirBusy``, exit 2) naming the holder's pid, which the holder
writes into the file once it has the lock.

Why a lock and not a pid file: the OS releases a flock when its process dies, however it dies, so a
lock left by ``kill -9`` (or a crash, or a power cut) never blocks the resume that follows, and a pid
reused by another program is never mistaken for a live run. The file itself stays after the run
(deleting it would race with a process that has opened it to lock it); only its lock counts.
"""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path
from types import TracebackType

from frugalrl.errors import FrugalError

try:
    import fcntl
except ImportError:  # Windows, which is not a target: runs are not locked there
    fcntl = None  # type: ignore[assignment]

LOCK_FILE = ".lock"
# How long taking the lock retries while another process only probes it (``check_not_busy``, microseconds)
_PROBE_GRACE_S = 0.2
# File systems that cannot lock (some network mounts): the run goes on unlocked, with a note
_NO_LOCKING = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP}


class RunDirBusy(FrugalError):
    """Another live process trains into this run directory."""


def _holder(fd: int) -> str:
    """The pid the holder wrote into the lock file, as text ("unknown" before it has written it)."""
    try:
        first = os.pread(fd, 64, 0).decode("ascii", "replace").split("\n", 1)[0].strip()
    except OSError:
        first = ""
    return first if first.isdigit() else "unknown"


def _busy(fd: int, out: Path) -> RunDirBusy:
    pid = _holder(fd)
    stop = f"stop it (kill {pid})" if pid != "unknown" else "stop it"
    return RunDirBusy(
        f"{out} is in use: another process (pid {pid}) is training into it; "
        f"wait for it to finish, or {stop} and continue with: frugalrl train --resume {out}"
    )


def _flock(fd: int, operation: int, out: Path, grace_s: float) -> bool:
    """Lock ``fd`` without waiting on a holder (retrying ``grace_s`` while another process only probes);
    False where the file system cannot lock. Raises ``RunDirBusy`` while a live process holds it."""
    assert fcntl is not None
    deadline = time.monotonic() + grace_s
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise _busy(fd, out) from None
            time.sleep(0.01)
        except OSError as exc:
            if exc.errno in _NO_LOCKING:
                return False
            raise


def check_not_busy(out: Path) -> None:
    """Refuse ``out`` while a live process holds its lock; creates and changes nothing, so it may run
    before every other check (a second ``train --out`` hears of the live run, not of a non-empty directory)."""
    path = Path(out) / LOCK_FILE
    if fcntl is None or not path.is_file():
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # unreadable: taking the lock says what is wrong
        return
    try:
        _flock(fd, fcntl.LOCK_SH, Path(out), grace_s=0.0)  # shared: probes never refuse each other
    finally:
        os.close(fd)  # and with it the probe's lock


class RunLock:
    """``RUN/.lock``, held by this process from ``take`` until ``release`` (or until the process dies)."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def take(cls, out: Path) -> RunLock:
        """Create ``out`` if needed, lock ``out/.lock`` and write this process's pid into it.

        Raises ``RunDirBusy`` while another live process holds it. Where ``fcntl`` is missing (Windows)
        or the file system cannot lock, the run goes on unlocked."""
        out = Path(out)
        path = out / LOCK_FILE
        if fcntl is None:
            return cls(path, None)
        out.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise FrugalError(f"cannot open {path} to lock the run directory: {exc.strerror}") from None
        try:
            if not _flock(fd, fcntl.LOCK_EX, out, grace_s=_PROBE_GRACE_S):
                print(f"note: {out} is on a file system without locks; nothing stops a second process using it")
                os.close(fd)
                return cls(path, None)
            pid = f"{os.getpid()}\n".encode()
            os.pwrite(fd, pid, 0)  # then cut the rest: a reader in between still reads this pid's line first
            os.ftruncate(fd, len(pid))
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Unlock and close (again: nothing). Unlocked explicitly, not only closed: a forked child that
        inherited the descriptor would otherwise keep the lock."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            assert fcntl is not None
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()
