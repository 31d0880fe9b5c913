"""Who may use one DuckDB file right now: many short readers or one short writer, across processes and threads.

DuckDB lets one process write a file, or many read it, never both at once. Every hetpool process therefore
opens the file only for one read or one commit and closes it again, and takes this gate around the open:

- `<db>.lock` is held shared by readers and exclusively by a writer (flock, so threads conflict as well);
  an exclusive holder writes who it is into the file, so a waiter can say what it waits for;
- `<db>.queue` is a turnstile: a writer takes it before the lock and keeps it, so new readers queue
  behind a waiting writer instead of starving it;
- `<db>.writers` is held shared by every process that is writing or about to write (a collector for its
  whole life), so that `hetpool demo --replace` can refuse to swap the file under it.

Waits are bounded. After NOTICE_AFTER_S the waiter is told once, in one line, what holds the database.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from store.exceptions import StoreBusy, StoreError

ENV_TIMEOUT = "HETPOOL_LOCK_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0
NOTICE_AFTER_S = 1.0
_FIRST_NAP_S, _LONGEST_NAP_S = 0.002, 0.05

WaitHook = Callable[[str], None]  # told once, with one line, when a wait passes NOTICE_AFTER_S
ENV_STATS = "HETPOOL_LOCK_STATS"  # set: commands print their lock waits on exit (for measuring contention)


@dataclass
class WaitStats:
    """How long this process waited for the gate: accesses, waits over 10 ms, the longest and the total."""

    accesses: int = 0
    waits: int = 0
    worst_s: float = 0.0
    total_s: float = 0.0

    def add(self, seconds: float) -> None:
        """Count one access that waited `seconds`."""
        self.accesses += 1
        if seconds > 0.01:
            self.waits += 1
        self.worst_s = max(self.worst_s, seconds)
        self.total_s += seconds

    def line(self) -> str:
        """One line for a log."""
        return (f"{self.accesses} database accesses, {self.waits} waited; longest wait {self.worst_s:.2f} s, "
                f"{self.total_s:.2f} s in all")


STATS = WaitStats()  # of this process; threads add to it under the GIL


def timeout_from_env(env: dict[str, str] | None = None) -> float:
    """$HETPOOL_LOCK_TIMEOUT in seconds, else the default."""
    env = dict(os.environ) if env is None else env
    text = env.get(ENV_TIMEOUT, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise StoreError(f"{ENV_TIMEOUT}={text!r}: expected a number of seconds greater than 0")
    return value


@dataclass(frozen=True)
class Holder:
    """The exclusive holder of the lock, as it wrote itself into the lock file."""

    pid: int
    what: str
    since: float  # epoch seconds

    def describe(self, now: float) -> str:
        """'hetpool file ingest of x.prom (pid 12) has been writing for 2.1 s'."""
        return f"{self.what} (pid {self.pid}) has been writing for {max(0.0, now - self.since):.1f} s"


def sidecar(db: Path, suffix: str) -> Path:
    """The path of one of the gate's files beside the database."""
    return db.with_name(db.name + suffix)


def _open(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        # the lock file lives beside the database: its folder is the database's
        db, folder = path.with_suffix(""), path.parent
        if isinstance(exc, FileNotFoundError):
            why = f"folder {str(folder)!r} does not exist"
        elif isinstance(exc, NotADirectoryError):
            why = f"{str(folder)!r} is not a folder"
        elif isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
            why = f"folder {str(folder)!r} is not writable ({exc.strerror})"
        else:
            why = exc.strerror or str(exc)
        raise StoreError(f"cannot use database {str(db)!r}: {why}") from None


def _try(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def read_holder(db: Path) -> Holder | None:
    """Who holds the lock exclusively, if anyone wrote it down."""
    try:
        text = sidecar(db, ".lock").read_text(encoding="utf-8").strip()
        if not text:
            return None
        data = json.loads(text)
        return Holder(int(data["pid"]), str(data["what"]), float(data["since"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def lock_pids(path: Path) -> list[int]:
    """Processes holding a flock on the file, from /proc/locks (empty where that is not available)."""
    try:
        st = os.stat(path)
        rows = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return []
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for row in rows:
        parts = row.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == want and parts[4].isdigit():
            pids.append(int(parts[4]))
    return sorted(set(pids))


def process_name(pid: int) -> str:
    """A short human name of a process: 'hetpool serve --config x.yaml (pid 12)'."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"pid {pid}"
    args = [" ".join(a.decode(errors="replace").split()) for a in argv if a]
    if "streamlit" in args and "run" in args:
        return f"the console (pid {pid})"
    for i, arg in enumerate(args):  # '.../python .../bin/hetpool ingest ...' or '.../hetpool ...'
        if os.path.basename(arg) == "hetpool" or arg.endswith("app.cli"):
            return f"{' '.join(['hetpool', *args[i + 1:]])[:100]} (pid {pid})"
    return f"{' '.join(os.path.basename(a) if j == 0 else a for j, a in enumerate(args))[:100]} (pid {pid})"


class Gate:
    """The lock files of one database, with bounded waits that report what they wait for."""

    def __init__(self, db: str | Path, *, timeout_s: float | None = None, on_wait: WaitHook | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.db = Path(db)
        self.timeout_s = timeout_from_env() if timeout_s is None else timeout_s
        self.on_wait = on_wait
        self.clock = clock
        self.sleep = sleep

    # -- the three locks ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def shared(self, what: str = "a read") -> Iterator[None]:
        """Read access: passes the turnstile (held only while entering), then shares the lock with readers."""
        wait = _Wait(self.clock())
        with self._fd(".lock") as lock:
            with self._fd(".queue") as queue:
                self._acquire(queue, fcntl.LOCK_SH, what, wait)
                try:
                    self._acquire(lock, fcntl.LOCK_SH, what, wait)
                finally:
                    fcntl.flock(queue, fcntl.LOCK_UN)
            STATS.add(self.clock() - wait.started)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def exclusive(self, what: str) -> Iterator[None]:
        """Write access: the turnstile (kept, so new readers queue behind), then the lock alone."""
        wait = _Wait(self.clock())
        with self._fd(".queue") as queue, self._fd(".lock") as lock:
            self._acquire(queue, fcntl.LOCK_EX, what, wait)
            try:
                self._acquire(lock, fcntl.LOCK_EX, what, wait)
                STATS.add(self.clock() - wait.started)
                _write_holder(lock, what)
                try:
                    yield
                finally:
                    _write_holder(lock, None)
                    fcntl.flock(lock, fcntl.LOCK_UN)
            finally:
                fcntl.flock(queue, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def writer(self, what: str) -> Iterator[None]:
        """Announce a writer for the duration (a collector for its whole life); waits only out a file swap."""
        with self._fd(".writers") as fd:
            self._acquire(fd, fcntl.LOCK_SH, what, _Wait(self.clock()))
            yield

    @contextlib.contextmanager
    def sole_writer(self, why: str) -> Iterator[None]:
        """No other writer may be active (for replacing the file); refuses at once, naming them."""
        path = sidecar(self.db, ".writers")
        fd = _open(path)
        try:
            if not _try(fd, fcntl.LOCK_EX):
                others = [process_name(p) for p in lock_pids(path) if p != os.getpid()]
                who = ", ".join(others) if others else "another hetpool process"
                raise StoreBusy(f"refusing to {why} {str(self.db)!r}: {who} is writing to it; stop it first")
            yield
        finally:
            os.close(fd)

    # -- waiting ------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _fd(self, suffix: str) -> Iterator[int]:
        fd = _open(sidecar(self.db, suffix))
        try:
            yield fd
        finally:
            os.close(fd)  # closing also drops any flock still held through it

    def _acquire(self, fd: int, mode: int, what: str, wait: _Wait) -> None:
        nap = _FIRST_NAP_S
        while not _try(fd, mode):
            waited = self.clock() - wait.started
            if waited >= self.timeout_s:
                raise StoreBusy(f"database {str(self.db)!r} stayed busy for {waited:.0f} s while {what} waited: "
                                f"{self.busy_with()}; try again, or set {ENV_TIMEOUT} to wait longer")
            if not wait.told and waited >= NOTICE_AFTER_S and self.on_wait is not None:
                wait.told = True  # one line per wait, however many locks it passes
                self.on_wait(f"waiting for the database {str(self.db)!r}: {self.busy_with()}")
            self.sleep(nap)
            nap = min(_LONGEST_NAP_S, nap * 2)

    def busy_with(self) -> str:
        """What holds the database now, in words."""
        holder = read_holder(self.db)
        if holder is not None:
            return holder.describe(time.time())
        readers = [process_name(p) for p in lock_pids(sidecar(self.db, ".lock")) if p != os.getpid()]
        if readers:
            return f"{', '.join(readers)} {'is' if len(readers) == 1 else 'are'} reading"
        return "another reader or writer in this process"


@dataclass
class _Wait:
    """One access's wait: when it began and whether the waiter was told."""

    started: float
    told: bool = False


def _write_holder(fd: int, what: str | None) -> None:
    os.ftruncate(fd, 0)
    if what is not None:
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "what": what, "since": time.time()}).encode(), 0)
