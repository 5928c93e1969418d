"""The worker side of the runner: the loop a forked (or spawned) worker serves commands with.

Commands (``fuzz/internal/messages.py``) arrive over the worker's pipe, after the ``Open`` that
gives the worker its case: ``RunCommand`` (an executing operation), ``QueryCommand``,
``TamperCommand``, ``CloneCommand``, ``RaceCommand`` (one racer's resume, between start and
read barriers; a racer's only command before its ``Close``) and ``Close``.  A run or tamper
may name the thread to read after it: the worker sends that query's ``Reply`` after the
command's, unasked (``messages.follows``).  A ``sigkill`` crash point sends
``Barrier("sigkill")`` and kills the worker at once (``sigkill_barrier``).  Every exception
from the adapter becomes a ``Reply``, never a crash of the worker: a refusal of the framework
(``rejected``, with its exception) or a failure of the harness (``harness``, with the
adapter's traceback), told apart by ``blame.py``.

From ``Open`` on, the worker's fds 1 and 2 go to a file next to the case's ledger
(``worker-<pid>.out``) for the rest of its life: frameworks print and log (from their own
threads too), and a campaign's terminal must not drown in it.  Each reply carries the last
``OUTPUT_LIMIT`` bytes written during its command.
"""

from __future__ import annotations

import faulthandler
import functools
import gc
import os
import shutil
import signal
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from refmodel import op_from_json

from ..errors import EngineError
from . import messages as m
from .blame import blame, crash_in, describe, roots_of, store_note
from .hooks import EngineHooks
from .ledger import Ledger

TWIN = "~twin"  # the branch label suffix of a twin copy's effects
OUTPUT_LIMIT = 4096  # bytes of a command's output kept for the runner's log
WARM_UP_FAILED = "the warm-up failed"  # how the ``Warmed.left`` of an unfinished one starts
STACK_SIGNAL = signal.SIGUSR1  # dumps every thread's Python stack into the worker's output file


def serve(conn, adapter, variant, fresh=False):
    """The worker's loop: wait for its case (``Open``), then serve commands until ``Close``;
    a ``Close`` that says ``stay`` (``Tuning.reuse_worker``) starts the loop again.

    A worker may be forked ahead of its case (a spare, ``WorkerPool.fork_spare``): it waits for
    ``Open`` with nothing of any case set up.  It opens the case on the first command after
    ``Open``, never before: a spare taken after another worker of the same store was killed at
    a sigkill crash point gets its first command only once that worker is dead, and must not
    have read the store before.  A spare may first be sent a ``WarmUp``: a throwaway case on a
    directory of its own, run at once (``warm_up``), answered by ``Warmed``.

    ``fresh``: a spawned interpreter, which must set the environment and import the framework
    itself (a forked worker inherits both from the parent)."""
    before = None
    while True:
        given = conn.recv()
        if isinstance(given, m.Close):  # a spare never given a case, or a reused one let go
            conn.send(m.Closed())
            return
        if before is None:
            before = Residue.now()  # what the process holds before its first case
        if isinstance(given, m.WarmUp):  # a spare's throwaway case, then wait for the real one
            warmed, before = warm_up(adapter, variant, given, before)
            conn.send(warmed)
            continue
        close, before = _serve_case(conn, adapter, variant, given, fresh, before)
        if close is None or not close.stay:
            return
        fresh = False  # prepared once


@dataclass(frozen=True)
class Residue:
    """The threads and file descriptors alive in this process: compared before the first case
    and after each, so that a reused worker never hands a case's leftovers to the next.

    ``Tuning.reuse_worker`` is the adapter's word that nothing of a case outlives
    ``Case.close``; this is the part of that word a process can check for itself.  A thread
    still running (a framework's background writer, an executor not shut down) could write
    into the next case's store or ledger; an open file or socket could hold a lock the next
    case waits on.  Either makes the worker exit after the case instead of staying: a fork
    more, never a verdict that depends on the case before.  Module-level state (a registry,
    a cache) is not visible here and stays the adapter's to rule out."""

    threads: frozenset
    fds: frozenset

    @classmethod
    def now(cls) -> Residue:
        return cls(frozenset(t.ident for t in threading.enumerate() if t.is_alive()),
                   frozenset(_open_fds()))

    def after(self, casedir: Path) -> tuple[str, Residue]:
        """What a case left alive, compared with before it, in a line (empty when nothing),
        and the residue to compare the next case with.  A file inside ``casedir`` does not
        count, then or later: every case has a directory of its own, which goes with it, so no
        later case can meet it (the worker's output file is there; and SQLite keeps a closed
        connection's descriptor open for as long as another connection to the same file lives
        in the process, as the parent's ledger connection does in a worker forked during the
        case)."""
        threads = sorted(t.name for t in threading.enumerate()
                         if t.is_alive() and t.ident not in self.threads)
        inside = str(Path(casedir).resolve()) + os.sep
        new = set(_open_fds()) - self.fds
        kept = {fd for fd in new if _fd_name(fd).startswith(inside)}
        fds = sorted(new - kept)
        parts = ([f"{len(threads)} thread(s): {', '.join(threads)}"] if threads else []) + (
            [f"{len(fds)} fd(s): " + ", ".join(_fd_name(fd) for fd in fds)] if fds else [])
        return "; ".join(parts), Residue(self.threads, self.fds | kept)


class _Scripted:
    """The pipe of a warm-up case: its commands from a list; of what the worker sends, only
    the ``Closed`` is kept (the replies of a throwaway case say nothing of the target)."""

    def __init__(self, commands):
        self.commands, self.closed = list(commands), None

    def recv(self):
        return self.commands.pop(0)

    def send(self, message):
        if isinstance(message, m.Closed):
            self.closed = message


def warm_up(adapter, variant, given: m.WarmUp, before: Residue) -> tuple[m.Warmed, Residue]:
    """Run ``given``'s throwaway case as ``_serve_case`` runs a real one, the commands coming
    from a list: its ``Warmed`` (what it left alive, ``Residue``, or how it failed, in a line;
    whether it finished) and the residue to compare the next case with.

    Its outcomes are not looked at: a refusal or a tool error here is no observation of
    anything (the same op in a real case is judged there).  A warm-up that left something, or
    raised out of the case's close, makes the runner let this worker go unused."""
    Path(given.workdir).mkdir(parents=True, exist_ok=True)
    commands = [m.RunCommand(op=doc, seq=seq, branch=doc["thread"], query=doc["thread"])
                for seq, doc in enumerate(given.ops, 1)]
    pipe = _Scripted(commands + [m.Close(cleanup=given.cleanup, remove=given.remove, stay=True)])
    case = m.Open(workflow=given.workflow, workdir=given.workdir, ledger_path=given.ledger_path)
    try:
        _, after = _serve_case(pipe, adapter, variant, case, False, before)
    except Exception as exc:  # noqa: BLE001 - a throwaway case's failure only costs its worker
        # Left for the runner to clean up (the adapter's cleanup may not have run).
        failed = f"{WARM_UP_FAILED}: {type(exc).__name__}: {exc}"
        return m.Warmed(left=failed, finished=False), before
    if pipe.closed is None:
        return m.Warmed(left=f"{WARM_UP_FAILED}: it did not close", finished=False), after
    return m.Warmed(left=pipe.closed.left), after


def _open_fds() -> list:
    try:
        listed = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: fds are not compared (threads still are)
        return []
    return [fd for fd in listed if _is_open(fd)]  # not the listing's own, closed by now


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _fd_name(fd: int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return str(fd)


def _serve_case(conn, adapter, variant, given: m.Open, fresh: bool,
                before: Residue | None = None) -> tuple[m.Close | None, Residue | None]:
    """Serve one case; its ``Close`` (``None``: the worker stops) and the residue to compare
    the next case with (``before``, grown by the files of this case's directory)."""
    workflow, workdir, ledger_path = given.workflow, Path(given.workdir), given.ledger_path
    output = Output(output_path(ledger_path, os.getpid()))
    if output.file is not None:
        # An op that passes its time limit is killed as ``stuck``; first the runner asks for
        # every thread's stack with this signal (``ProcessWorker.dump_stack``), so that the verdict
        # says where the worker waited: in the framework, or in the harness, which a reader
        # must then not take for the framework's hang.  faulthandler writes from its own
        # signal handler, whatever the Python code is doing.
        faulthandler.register(STACK_SIGNAL, file=output.file, all_threads=True)
    if fresh:
        from ..targets import prepare

        prepare(adapter)
    ledger = Ledger(ledger_path)
    roots = roots_of(adapter)
    case, close = None, None

    barrier = functools.partial(sigkill_barrier, conn)

    try:
        while True:
            message = conn.recv()
            if isinstance(message, m.Close):
                close = message
                break
            if case is None:
                case = adapter.open(variant, workflow, workdir)
            if given.collect:
                gc.collect()
            if isinstance(message, m.RaceCommand):
                conn.send(m.Barrier("opened"))
                conn.recv()  # Go

                def ready():
                    conn.send(m.Barrier("read"))
                    conn.recv()

                run = m.RunCommand(op=message.op, seq=message.seq, branch=message.branch,
                                   racer=message.racer)
                conn.send(output.around(lambda: _run_op(
                    case, run, ledger, barrier, roots, ready if message.forced else None)))
                continue  # the runner's ``Close`` comes next (``WorkerPool.end_race``)
            reply = output.around(lambda: handle(case, ledger, message, barrier, roots))
            conn.send(reply)
            if m.follows(message, reply):  # the query the runner would send next
                query = m.QueryCommand(message.query)
                conn.send(output.around(lambda: handle(case, ledger, query, barrier, roots)))
    finally:
        try:
            if case is not None:
                case.close()
        finally:
            ledger.close()
            if close is not None and close.cleanup:  # after Case.close, as a short-lived
                cleanup(adapter, variant, workdir)  # worker of the runner's would
    if close is not None:  # closed, and cleaned up if asked, without an error
        _flush()
        left, after = "", before
        if close.stay and before is not None:
            left, after = before.after(Path(ledger_path).parent)
        conn.send(m.Closed(left=left))
        if close.remove is not None:
            shutil.rmtree(close.remove, ignore_errors=True)
        if left:
            return replace(close, stay=False), after  # exit: the runner counts it, forks anew
        return close, after
    return close, before


def output_path(ledger_path, pid: int) -> Path:
    """Where worker ``pid`` of the case whose ledger is ``ledger_path`` writes fds 1 and 2."""
    return Path(ledger_path).parent / f"worker-{pid}.out"


class Output:
    """Fds 1 and 2 of this process, sent to ``path`` (``None``: left alone, as in-process)."""

    def __init__(self, path: Path | None):
        self.file = None
        if path is not None:
            _flush()
            self.file = open(path, "ab+")
            os.dup2(self.file.fileno(), 1)
            os.dup2(self.file.fileno(), 2)
            _streams_to_fds()

    def around(self, command) -> m.Reply:
        """Run ``command`` (which returns a ``Reply``); attach what it printed."""
        if self.file is None:
            return command()
        start = os.lseek(1, 0, os.SEEK_END)
        reply = command()
        _flush()
        end = os.lseek(1, 0, os.SEEK_END)
        if end == start:
            return reply
        os.lseek(self.file.fileno(), max(start, end - OUTPUT_LIMIT), os.SEEK_SET)
        text = os.read(self.file.fileno(), OUTPUT_LIMIT).decode("utf-8", "replace")
        return _with(reply, output=text)


def _streams_to_fds() -> None:
    """``sys.stdout`` / ``sys.stderr`` (and logging handlers holding them) write to fds 1 and 2:
    the parent may have replaced them with objects that write elsewhere (a progress display, a
    test runner's capture), which a forked worker inherits."""
    import logging

    old = {id(sys.stdout): None, id(sys.stderr): None}
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    for logger in loggers:
        for handler in logger.handlers:
            stream = getattr(handler, "stream", None)
            if isinstance(handler, logging.StreamHandler) and id(stream) in old:
                handler.setStream(sys.stderr)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):
            pass


def _with(reply: m.Reply, **changes) -> m.Reply:
    return replace(reply, **changes)


def sigkill_barrier(conn) -> None:
    """A ``sigkill`` crash point: tell the parent, then die by SIGKILL at once, every thread of
    the process with it.  Waiting for the parent to kill us (as the worker once did) left the
    framework's other threads a round trip's time to run past the point: LangGraph's background
    writer then committed the task's pending writes before every kill, and the engine never saw
    the loss that a process dying right there shows (``StateMismatch-d61237a98dcb``: its script
    lost task 1 in 4 of 10 runs, the engine in 0 of 30).  The message is in the pipe before the
    kill, so the parent still tells this death from any other."""
    conn.send(m.Barrier(m.SIGKILL))
    os.kill(os.getpid(), signal.SIGKILL)


def handle(case, ledger, message, barrier=None, roots=frozenset()) -> m.Reply:
    """One command of a case (run, query, tamper or clone); returns its ``Reply``."""
    if isinstance(message, m.RunCommand):
        return _run_op(case, message, ledger, barrier, roots)
    if isinstance(message, m.QueryCommand):
        return _guarded(lambda: case.query(message.thread).to_json(), roots)
    if isinstance(message, m.TamperCommand):
        # ``part`` only when set: an adapter written before parts keeps its two-argument tamper.
        extra = {} if message.part is None else {"part": message.part}
        return _guarded(lambda: case.tamper(message.thread, message.how, **extra), roots)
    if isinstance(message, m.CloneCommand):
        return _guarded(lambda: case.clone_store(Path(message.dest)), roots)
    raise EngineError(f"unknown worker command {message!r}")


# What ``Case.run`` may return (adapters/protocol.py): a gate pending, a finished run (or a
# no-op on one), or a no-op on a state that neither asks nor is finished.
RUN_OUTCOMES = ("interrupted", "completed", "ok")


def _run_op(case, command: m.RunCommand, ledger, barrier, roots, ready=None) -> m.Reply:
    op = op_from_json(command.op)
    hooks = EngineHooks(op, seq=command.seq, branch=command.branch, ledger=ledger,
                        barrier=barrier, racer=command.racer, race_ready=ready)
    try:
        outcome = case.run(op, hooks)
        hooks.run_returned()
    except BaseException as exc:  # noqa: BLE001 - every exception is an observation or a tool error
        crash = crash_in(exc)
        if crash is not None:
            return m.Reply(kind=m.CRASHED, outcome="crashed", error=describe(crash),
                           fired=hooks.fired)
        hooks.race_ready()  # a racer refused before reading still releases the others (once)
        return _blamed(exc, roots, fired=hooks.fired)
    hooks.race_ready()  # the adapter never called it (a no-op resume): release the others
    if outcome not in RUN_OUTCOMES:
        return m.Reply(kind=m.HARNESS, error=f"Case.run returned {outcome!r}", fired=hooks.fired)
    return m.Reply(kind=m.OK, outcome=outcome, fired=hooks.fired)


def injected(exc: BaseException) -> bool:
    """Was a ``CrashInjected`` anywhere in the chain (causes, contexts, groups) of ``exc``?"""
    return crash_in(exc) is not None


def _blamed(exc: BaseException, roots, **fields) -> m.Reply:
    verdict = blame(exc, roots)
    if verdict.who == "framework":
        return m.Reply(kind=m.REJECTED, outcome="rejected", error=verdict.error, **fields)
    return m.Reply(kind=m.HARNESS, error=verdict.error, traceback=verdict.traceback, **fields)


def _guarded(call, roots) -> m.Reply:
    """A query, tamper or clone: its value, or who failed (``Unreadable`` is the framework's)."""
    from adapters.protocol import Unreadable

    try:
        return m.Reply(kind=m.OK, value=call())
    except Unreadable as exc:
        return m.Reply(kind=m.REJECTED, error=describe(exc) + store_note(exc))
    except Exception as exc:  # noqa: BLE001 - reported, not raised, so the worker lives on
        return _blamed(exc, roots)


def cleanup(adapter, variant, workdir):
    adapter.cleanup(variant, Path(workdir))
