"""Process lifetime: workers die with their parent, temp folders go away, signals stop cleanly.

Whatever ends the ``resumefuzz`` parent (SIGKILL, a parent-only SIGTERM from ``kill``, ``timeout``
or a CI cancel, Ctrl-C), no worker may outlive it: a worker blocked on its pipe would wait
forever, holding its case directory and tens of megabytes.  Two independent mechanisms, because
either alone has a gap:

- ``PR_SET_PDEATHSIG`` (Linux): the kernel sends the worker SIGKILL when its parent dies.  Set
  right after the fork, then the parent's pid is checked again, since the parent may have died
  in between.
- a lifeline pipe: the parent holds the only write end (each child closes its inherited copy at
  once); a daemon thread in the worker reads the other end and ends the process on EOF, which
  comes when the parent is gone, by any means, on any POSIX system.  The worker's command pipe
  cannot serve: later siblings inherit the parent's end of it and keep it open.

Signals in the parent: SIGINT and SIGTERM are recorded by a handler installed explicitly (a
shell starts a background job, ``&``, and CI systems start theirs, with SIGINT ignored, and
Python then installs no handler of its own), and ``checkpoint`` raises ``Interrupted`` (a
``KeyboardInterrupt``, so Hypothesis does not shrink it as a failure) before each operation and
in each wait for a worker: never in the middle of writing a finding, never inside Hypothesis's
own bookkeeping.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..errors import Interrupted

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
STALE_AFTER = 3600.0  # seconds: a dead run's temp folder younger than this is left alone
_ROOT_PATTERN = re.compile(r"^resumefuzz-(\d+)-")

_lifelines: dict[int, tuple[int, int]] = {}  # pid of the forking process -> (read, write)


def lifeline() -> tuple[int, int]:
    """This process's lifeline pipe (made once per process that forks workers)."""
    pid = os.getpid()
    if pid not in _lifelines:
        _lifelines[pid] = os.pipe()
    return _lifelines[pid]


def become_child(parent_pid: int, lifeline_read: int | None, death_signal: int = signal.SIGKILL,
                 keep_signals: bool = False, watch: bool = True) -> None:
    """Run first in every forked child: die with the parent, drop the parent's signal handlers.

    ``death_signal``: what the kernel sends when the parent dies (a nightly job gets SIGTERM, to
    stop cleanly and write what it found; a worker gets SIGKILL).  ``keep_signals``: keep the
    parent's stop handlers (a nightly job runs a campaign of its own).  ``watch=False``: keep
    the lifeline's read end but start no thread to watch it: a process that forks (the fork
    server) watches it in its own loop, and forks with no other thread."""
    _set_parent_death_signal(death_signal)
    if os.getppid() != parent_pid:  # the parent died before the death signal was armed
        os._exit(1)
    if not keep_signals:
        # A worker is stopped by its parent (SIGKILL), never by a terminal's Ctrl-C, which goes
        # to the whole process group: a worker dying of it would look like a crash.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for pid, (read, write) in list(_lifelines.items()):
        # Inherited write ends would keep every lifeline open: only its owner holds one.
        with contextlib.suppress(OSError):
            os.close(write)
        if read != lifeline_read:
            with contextlib.suppress(OSError):
                os.close(read)
        del _lifelines[pid]
    if lifeline_read is not None and watch:
        threading.Thread(target=_watch, args=(lifeline_read, death_signal), daemon=True,
                         name="resumefuzz-lifeline").start()


def _watch(fd: int, death_signal: int) -> None:
    while True:
        try:
            if os.read(fd, 1) == b"":
                break
        except InterruptedError:
            continue
        except OSError:
            break
    if death_signal == signal.SIGKILL:
        os._exit(1)
    os.kill(os.getpid(), death_signal)


def _set_parent_death_signal(signum: int) -> None:
    if not sys.platform.startswith("linux"):
        return  # the lifeline covers other systems
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):
        pass  # no prctl here: the lifeline still covers it


# -- temp folders ---------------------------------------------------------------------------------


def make_root() -> Path:
    """A fresh temp folder for one session's cases, named after this process, so that a later
    run can remove it if this one was killed before it could (``sweep_stale``)."""
    sweep_stale()
    return Path(tempfile.mkdtemp(prefix=f"resumefuzz-{os.getpid()}-"))


def sweep_stale(tmp: str | None = None) -> list[Path]:
    """Remove temp folders of resumefuzz processes that are gone (SIGKILL leaves them) and that
    nobody touched for ``STALE_AFTER`` seconds; returns what was removed."""
    removed = []
    base = Path(tmp or tempfile.gettempdir())
    try:
        candidates = list(base.iterdir())
    except OSError:
        return removed
    now = time.time()
    for path in candidates:
        match = _ROOT_PATTERN.match(path.name)
        if not match or int(match.group(1)) == os.getpid():
            continue
        try:
            if now - path.stat().st_mtime < STALE_AFTER or _alive(int(match.group(1))):
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- signals in the parent ------------------------------------------------------------------------

_state = {"signal": None}


def install_stop_handlers() -> None:
    """SIGINT and SIGTERM request a stop, even when SIGINT was inherited ignored."""
    _state["signal"] = None
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)


def _on_signal(signum, frame) -> None:
    # Only record it: raising from a handler lands wherever the interpreter happens to be,
    # inside Hypothesis's bookkeeping or halfway through writing a file.  ``checkpoint`` raises
    # it at the places made for it: before each operation and in every wait for a worker.
    _state["signal"] = _state["signal"] or signum


def checkpoint() -> None:
    """Raise ``Interrupted`` if a stop was requested (and on every later call: it is sticky)."""
    if _state["signal"] is not None:
        raise Interrupted(_state["signal"])


def stop_signal() -> int | None:
    """The signal that asked this command to stop, if one did."""
    return _state["signal"]
