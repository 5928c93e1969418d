"""The runtime a reproduction script carries: standard library only, copied into each script.

``adapters.reproduction.script.Script`` pastes the names a script needs from this file (functions with
``inspect.getsource``, constants by their assignment), so every script stays standalone (``python
repro.py`` needs the framework and nothing of resumefuzz) and every line of it is real, tested
code here.  Names are chosen for a framework maintainer reading the script: a task's *effect* (a
row in a SQLite file, so it survives a SIGKILL), a *crash point* inside a task (an exception, or
the process killing itself), a call run *in a child process*.
"""

import atexit
import os
import shutil
import signal
import sqlite3
import sys
import tempfile

if __name__ == "__main__":  # a script's top level, never the engine importing this module
    # Exit 1 is the verdict's "the defect shows": a script stopped by an exception before its
    # verdict (a module it cannot import, a store it cannot set up, a NameError ``observe``
    # re-raises) exits 2.  Python sets ``sys.last_value`` as it prints the traceback, before the
    # exit functions run; ``os._exit`` is the one way to change the status there, and it
    # flushes nothing itself.  A script registers this first, so that it runs last, after the
    # temporary folder's removal.  (pytest sets ``sys.last_value`` on a failed test: in the
    # engine's process this would turn pytest's exit status into 2.)
    atexit.register(lambda: hasattr(sys, "last_value") and os._exit(sys.stdout.flush() or 2))
    WORKDIR = tempfile.mkdtemp(prefix="repro-")
    # Removed when the script exits (its verdict, an exception), by the process that made it
    # only: a forked child (``in_child``, ``race``) that exits must not take its parent's folder.
    # The path is bound now: a script may point WORKDIR at a run's subfolder later
    # (pydantic-graph's ``use_run_dir``), and removing that one left the rest behind.
    atexit.register(lambda pid=os.getpid(), top=WORKDIR: os.getpid() == pid and shutil.rmtree(top, True))
else:
    # The engine imports this module for its names and their source, in processes that end with
    # ``os._exit`` or a SIGKILL (workers), where no exit function runs: a folder
    # made here was left behind by each of them (116 by one replay of CrewAI's corpus).  Only a
    # script makes its WORKDIR; the engine's is a name, never created.
    WORKDIR = os.path.join(tempfile.gettempdir(), "repro-of-a-script")
EFFECTS = os.path.join(WORKDIR, "effects.sqlite")
CRASH = None  # where the current call dies: (task, moment, "exception" | "sigkill")


def effect(task, value):
    """The task's one external effect (an email sent, say): a row in a SQLite file."""
    with sqlite3.connect(EFFECTS) as db:
        db.execute("CREATE TABLE IF NOT EXISTS effects (task, value)")
        db.execute("INSERT INTO effects VALUES (?, ?)", (task, value))


def effects():
    """Every effect fired so far, in order, as ``(task, value)``."""
    with sqlite3.connect(EFFECTS) as db:
        db.execute("CREATE TABLE IF NOT EXISTS effects (task, value)")
        return db.execute("SELECT task, value FROM effects ORDER BY rowid").fetchall()


def observe(call):
    """Run ``call()``, which returns the run's outcome; return it and the effects fired."""
    before = len(effects())
    # A NameError or ImportError is a mistake in this script, not the framework's answer; a
    # framework that re-raises a task's exception as its own keeps "Crash: ..." in front.
    try:
        status = call()
    except (NameError, ImportError):
        raise
    except Exception as exc:  # the framework refused, or a task failed at the crash point
        crashed = type(exc).__name__ == "Crash" or str(exc).startswith("Crash: ")
        status = "crashed" if crashed else "rejected"
        print(f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return status, effects()[before:]


def verdict(what, observed, allowed):
    """Exit 1 (the defect shows) when ``observed`` is none of the ``allowed`` values, else 0."""
    print("no defect" if observed in allowed else "DEFECT SHOWS", f"- {what}: {observed!r}; allowed: {allowed!r}")
    sys.exit(0 if observed in allowed else 1)


class Crash(Exception):
    """What a task raises at the chosen crash point: a stand-in for a bug in the task."""


def crash_point(task, moment):
    """Fail here if the current call dies at ``(task, moment)``: raise ``Crash``, or SIGKILL.
    A task that dies "after it completed" dies when the next task starts."""
    if CRASH is None:
        return
    after = CRASH[1] == "after it completed" and moment == "before its effect"
    if tuple(CRASH[:2]) == (task, moment) or (after and task == CRASH[0] + 1):
        if CRASH[2] == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise Crash(f"task {CRASH[0]} fails {CRASH[1]}")


def observe_crashing(call, crash):
    """``observe(call)``, the run dying at ``crash``: ``(task, moment, how)``.  A task that dies
    "after it completed" and was the last to run dies once ``call()`` has returned."""
    global CRASH
    CRASH = crash

    def run():
        before = len(effects())
        status = call()
        if crash[1] == "after it completed" and crash[0] in [t for t, _ in effects()[before:]]:
            crash_point(*crash[:2])
        return status
    try:
        return observe(run)
    finally:
        CRASH = None


def in_child(call, crash=None):
    """Run ``call()`` in a forked child process that SIGKILLs itself at ``crash`` (if any); return
    the call's outcome: "crashed" when the child was killed, else what ``observe`` saw in it."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a step that returns nothing (its outcome is not checked) reports "None"
        os.write(write, str((observe_crashing(call, crash) if crash else observe(call))[0]).encode())
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    print("the child process", "was killed" if os.WIFSIGNALED(status) else "exited")
    return "crashed" if os.WIFSIGNALED(status) else os.read(read, 64).decode()


def race(*calls):
    """Run each call in its own forked child process, all released at once; wait for all."""
    go_read, go_write = os.pipe()
    children = []
    for call in calls:
        pid = os.fork()
        if pid == 0:
            os.read(go_read, 1)  # wait until every racer exists
            observe(call)
            os._exit(0)
        children.append(pid)
    os.write(go_write, b"go" * len(calls))
    for pid in children:
        os.waitpid(pid, 0)
