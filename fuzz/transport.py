"""The worker processes behind one worker interface, and how they are started and ended.

A worker serves commands (``fuzz.internal.messages``) on one case at a time:
``call(message, timeout)`` returns ``("reply", message)``, ``("killed", None)`` (it hit a
SIGKILL barrier), ``("died", None)`` or ``("timeout", None)``; ``owed_reply`` reads the query
it sends unasked after an op; ``stop`` closes its case; ``kill`` ends it.  Two kinds:
``ProcessWorker``, a child process on a pipe (``fuzz.internal.worker.serve``), forked from the
parent (``multiprocess``, fork context) or spawned; and ``LocalWorker``, the ``inprocess``
mode's stand-in, which runs the same commands in this process.

``Transport`` starts a session's children (``launch``: a worker, or a short-lived one that
runs the adapter's cleanup).  Every child dies with the parent,
whatever kills it (``fuzz.internal.lifetime``: a parent-death signal and a lifeline pipe); a
worker that closed normally is not waited for but released once it has exited (``reap``).
Which workers stay idle for later cases is the pool's business (``fuzz.pools``), not this
module's.
"""

from __future__ import annotations

import gc
import os
import re
import sysconfig
import time
from pathlib import Path

import multiprocess
from multiprocess import connection

from refmodel import Workflow

from .internal import lifetime
from .internal import messages as m
from .internal.blame import roots_of
from .internal.ledger import MemoryLedger
from .internal.worker import OUTPUT_LIMIT, STACK_SIGNAL
from .internal.worker import cleanup as _cleanup
from .internal.worker import handle as _handle
from .internal.worker import output_path as _output_path
from .internal.worker import serve as _serve
from .policy import Policy

_contexts = {"fork": multiprocess.get_context("fork"), "spawn": multiprocess.get_context("spawn")}
_ctx = _contexts["fork"]

_POLL = 0.25  # seconds between looks at a requested stop while waiting for a worker


class Transport:
    """Starts the children of one session (its workers, its short-lived cleanups); counts the
    workers that would not stay for another case."""

    def __init__(self, policy: Policy):
        self.policy = policy
        # Workers told to stay that exited instead, their case still alive in them (a thread,
        # an open file: ``worker.Residue``), and the last thing one left.
        self.left_behind, self.last_left = 0, ""

    def pipe(self):
        """A pipe to a worker: the parent's end, the child's end."""
        return _contexts[self.policy.settings.mode].Pipe()

    def launch(self, kind: str, conn=None, args: tuple = ()):
        """Start a child of this session's: ``"serve"``, a worker on ``conn`` (its end of the
        pipe), or ``"cleanup"`` (``args``: the workdir).  ``fork`` mode: forked from this
        process; ``spawn``: a fresh interpreter.  Returns the child's ``multiprocess.Process``;
        ``OSError`` when it cannot be forked."""
        adapter, variant = self.policy.adapter, self.policy.variant
        ctx = _contexts[self.policy.settings.mode]
        if kind == "serve":
            return start_child(ctx, _serve, conn, adapter, variant, ctx is not _ctx)
        return start_child(ctx, _cleanup, adapter, variant, *args)

    def worker(self, workflow: Workflow | None = None, workdir: Path | None = None,
               ledger_path: Path | None = None) -> ProcessWorker:
        """A new worker process; with a workflow, given its case on ``workdir`` at once."""
        return ProcessWorker(self, workflow, workdir, ledger_path)

    def clean_up(self, workdir: Path) -> None:
        """Run the adapter's cleanup for ``workdir`` in a short-lived worker (never the parent,
        which forks workers, unless the session runs ``inprocess``: the framework runs here
        already, and the fork cost ~73 ms a case).  Called when no worker of ``workdir``
        closed normally and ran it (``ProcessWorker.stop(cleanup=True)``): a case's, a twin's,
        or a spare's throwaway case that did not finish.

        It gets the op time limit, whatever the deadline: what it removes (a database on a
        server) outlives the campaign, and a cleanup killed half-way leaves it for good.  (With
        the deadline's one-second grace, one of three twenty-second MariaDB campaigns left a
        database behind, its tables made and empty, as a third-party store's cleanup leaves one
        between its factory's migrations and its drop; none in three since.)"""
        if not self.policy.cleans_up:
            return  # nothing to clean outside the directory: spare the fork
        if self.policy.inprocess:
            _cleanup(self.policy.adapter, self.policy.variant, workdir)
            return
        process = self.launch("cleanup", None, (workdir,))
        process.join(self.policy.op_limit())
        if process.is_alive():
            process.kill()
            process.join()
        release(process)

    def left_over(self, what: str) -> None:
        """A worker told to stay exited instead: its case left ``what`` alive in it."""
        self.left_behind += 1
        self.last_left = what


class ProcessWorker:
    """A forked child that serves commands on the case on ``workdir`` over a pipe
    (``fuzz.internal.worker.serve``); it opens the case on its first command.  Without a
    workflow: a spare, waiting for the case ``adopt`` gives it."""

    def __init__(self, transport: Transport, workflow: Workflow | None = None,
                 workdir: Path | None = None, ledger_path: Path | None = None):
        self.conn, child_conn = transport.pipe()
        try:
            self.process = transport.launch("serve", child_conn)
        except BaseException:
            self.conn.close()
            raise
        finally:
            child_conn.close()
        self.pid = self.process.pid
        self.exitcode = None  # set once killed or closed: the process is released then
        self.owed = 0  # replies the worker sends unasked (``messages.follows``), not read yet
        self.output: Path | None = None  # the worker's output file, once it has its case
        self.stack = ""  # every thread's stack, dumped when it passed its time limit
        policy = transport.policy
        self._out_of_time = policy.out_of_time  # the campaign's deadline, not the op's limit
        self._left_over = transport.left_over  # counts a worker that would not stay
        self._collect = policy.settings.collect_garbage
        self._cleans_up = policy.cleans_up  # a throwaway case runs the adapter's cleanup
        self.cases = 0  # cases given so far (a reused worker serves several)
        self.stayed = False  # it closed its last case and stayed for the next (``reuse``)
        self.warming = False  # it was sent a ``WarmUp`` whose ``Warmed`` is not read yet
        self.warm_dir: Path | None = None  # its throwaway case's directory, until it is done
        if workflow is not None:
            self.adopt(workflow, workdir, ledger_path)

    def adopt(self, workflow: Workflow, workdir: Path, ledger_path: Path) -> None:
        """Give the worker its case (``OSError``: it is gone)."""
        self.stayed = False
        self.conn.send(m.Open(workflow=workflow, workdir=str(workdir),
                              ledger_path=str(ledger_path), collect=self._collect))
        self.output = _output_path(ledger_path, self.pid)
        self.cases += 1

    def warm_up(self, workflow: Workflow, ops: tuple, casedir: Path) -> None:
        """Send the spare its throwaway case (``messages.WarmUp``) on ``casedir``, which it
        creates and removes: ``ops`` (``pools.warm_up_ops``) on ``workflow``."""
        ops = tuple(op.to_json() for op in ops)
        try:
            self.conn.send(m.WarmUp(workflow=workflow, workdir=str(casedir / "store"),
                                    ledger_path=str(casedir / "ledger.sqlite"), ops=ops,
                                    remove=str(casedir), cleanup=self._cleans_up))
        except (BrokenPipeError, OSError):
            return  # gone: the session forks another when it needs one
        self.warming, self.warm_dir = True, casedir

    def ready(self) -> bool:
        """Is the worker idle and done warming up (its ``Warmed`` waiting, or none owed)?"""
        try:
            return not self.warming or self.conn.poll()
        except (OSError, EOFError):
            return False

    def warmed(self, timeout: float) -> bool:
        """Is the spare ready for a case: no warm-up sent, or its ``Warmed`` read within
        ``timeout`` with nothing left behind?  False: it is of no use (it is killed by the
        caller); one whose warm-up left something alive is counted (``Transport.left_behind``)."""
        if not self.warming:
            return True
        self.warming = False
        status, reply = self.wait(timeout)
        if status != "reply" or not isinstance(reply, m.Warmed):
            return False
        if reply.finished:
            self.warm_dir = None  # closed, cleaned up and removed by the worker
        if reply.left:
            self._left_over(reply.left)
            return False
        return True

    def call(self, message, timeout: float, meanwhile=None):
        """Send a command (``fuzz.internal.messages``); returns ``("reply", message)``,
        ``("killed", None)`` when the worker hit a sigkill barrier (and was killed here),
        ``("died", None)`` or ``("timeout", None)``.  ``meanwhile``: called once the command is
        sent, before the wait (which it does not shorten)."""
        while self.owed:  # a follow-up the runner did not read (it raised first): drop it
            status, _ = self.owed_reply(timeout)
            if status != "reply":
                return (status, None)
        try:
            self.conn.send(message)
        except (BrokenPipeError, OSError):
            return ("died", None)
        if meanwhile is not None:
            meanwhile()
        status, reply = self.wait(timeout)
        if status == "reply" and m.follows(message, reply):
            self.owed += 1
        return status, reply

    def owed_reply(self, timeout: float):
        """The reply the worker sends unasked after the last command (its query), as ``call``."""
        self.owed -= 1
        return self.wait(timeout)

    def wait(self, timeout: float):
        deadline = time.monotonic() + timeout
        sentinel = self.process.sentinel
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if not self._out_of_time():  # an op cut short by the deadline is no hang
                    self.stack = self.dump_stack()
                self.kill()
                return ("timeout", None)
            lifetime.checkpoint()  # SIGINT/SIGTERM: stop here, the caller's cleanup kills us
            # connection.wait polls (selectors): no FD_SETSIZE limit, unlike select.select,
            # which fails once a long campaign's descriptors pass 1024.
            ready = connection.wait([self.conn, sentinel], min(remaining, _POLL))
            if self.conn in ready:
                try:
                    message = self.conn.recv()
                except (EOFError, OSError):
                    self.kill()
                    return ("died", None)
                if message == m.Barrier(m.SIGKILL):  # a crash point: the worker has killed itself
                    self.kill()
                    return ("killed", None)
                return ("reply", message)
            if sentinel in ready:
                self.kill()
                return ("died", None)

    def alive(self) -> bool:
        return self.exitcode is None and self.process.is_alive()

    def dump_stack(self, limit: float = 2.0) -> str:
        """Every thread's Python stack, asked of a live worker with ``STACK_SIGNAL`` (its
        faulthandler writes it into the worker's output file) and read back; ``""`` when it
        cannot be had within ``limit`` seconds (a worker that is gone, or stuck where no signal
        handler runs).  Called on a worker that passed its time limit, before it is killed."""
        if self.output is None or not self.alive():
            return ""
        try:
            start = self.output.stat().st_size
            os.kill(self.process.pid, STACK_SIGNAL)
        except OSError:
            return ""
        # The handler writes the whole dump at once, from C; the file stops growing when it is
        # done.  A bounded poll (this is a diagnosis of a hang, not a crash point's barrier).
        deadline, size, still = time.monotonic() + limit, start, 0
        while time.monotonic() < deadline and still < 3:
            time.sleep(0.01)
            try:
                now = self.output.stat().st_size
            except OSError:
                return ""
            still, size = (still + 1, size) if now == size and now > start else (0, now)
        if size <= start:
            return ""
        with open(self.output, "rb") as f:
            f.seek(start)
            return f.read(min(size - start, 64 * OUTPUT_LIMIT)).decode("utf-8", "replace")

    def kill(self) -> None:
        if self.exitcode is not None:
            return  # killed and released already
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()
        self.exitcode = self.process.exitcode
        release(self.process)

    def stop(self, timeout: float, cleanup: bool = False, meanwhile=None,
             remove: Path | None = None, stay: bool = False) -> bool:
        """Close the worker; ``cleanup``: it runs the adapter's cleanup after closing the case;
        ``remove``: it removes that directory after answering.  Returns whether it answered
        ``Closed`` (having done both).  Then nothing of the case is in use: its exit is left to
        finish on its own (``reap``); otherwise it is killed (and joined).  ``meanwhile``:
        called once ``Close`` is sent, before the wait."""
        if self.alive():
            try:
                self.conn.send(m.Close(cleanup=cleanup, stay=stay,
                                       remove=None if remove is None else str(remove)))
            except (BrokenPipeError, OSError):
                pass
            else:
                if meanwhile is not None:
                    meanwhile()
                closed = self._closed(timeout)
                if closed is not None:
                    self.warm_dir = None  # a warm-up owed was done before the Close
                    if stay and not closed.left:
                        self.output, self.stack = None, ""
                        self.stayed = True
                        return True
                    if closed.left:  # told to stay, it found its case still alive: it exits
                        self._left_over(closed.left)
                    self.conn.close()
                    self.exitcode = 0
                    _exiting.append(self.process)
                    return True
        self.kill()
        return False

    def _closed(self, timeout: float) -> m.Closed | None:
        """The worker's ``Closed``, if it answered within ``timeout``.  No stop checkpoint
        here: this is the cleanup a stop request runs."""
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            ready = connection.wait([self.conn, self.process.sentinel], remaining)
            if self.conn in ready:
                try:
                    message = self.conn.recv()
                except (EOFError, OSError):
                    return None
                if isinstance(message, m.Closed):
                    return message
                continue  # a reply it sent unasked that was never read
            if ready:
                return None  # it exited without closing
        return None


class LocalWorker:
    """The ``inprocess`` mode's stand-in for a worker: same commands, run in this process."""

    def __init__(self, policy: Policy, workflow: Workflow, workdir: Path, ledger: MemoryLedger):
        # One process, one ledger: the case runner's list, lent to each of its local workers
        # (which never close it; the runner does).
        self.ledger = ledger
        self.case = policy.adapter.open(policy.variant, workflow, Path(workdir))
        self.roots = roots_of(policy.adapter)
        self._open = True
        self._follow: list = []  # the query a worker would send unasked: run when it is read
        self._collect = policy.settings.collect_garbage

    @property
    def owed(self) -> int:
        return len(self._follow)

    def call(self, message, timeout: float, meanwhile=None):
        if isinstance(message, m.Close):
            self.stop(0)
            return ("died", None)
        self._follow.clear()
        if self._collect:
            gc.collect()
        reply = _handle(self.case, self.ledger, message, roots=self.roots)
        if m.follows(message, reply):
            self._follow.append(m.QueryCommand(message.query))
        return ("reply", reply)

    def owed_reply(self, timeout: float):
        return ("reply", _handle(self.case, self.ledger, self._follow.pop(), roots=self.roots))

    def alive(self) -> bool:
        return self._open

    def stop(self, timeout: float, cleanup: bool = False, meanwhile=None,
             remove: Path | None = None, stay: bool = False) -> bool:
        if self._open:
            self._open = False
            self.case.close()
        return False  # in process, the runner cleans up and removes itself

    def kill(self) -> None:
        self.stop(0)


_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_STDLIB = (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])


def waiting_in(stack: str) -> str:
    """Where a stuck worker's main thread waited, from a faulthandler dump (``dump_stack``):
    its innermost frame and, when that is the standard library's, the innermost frame outside
    it (the code that called into the wait).  ``""`` when the dump has no such frame."""
    lines = stack.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Current thread")), None)
    if start is None:
        return ""
    frames = []
    for line in lines[start + 1:]:
        found = _FRAME.match(line)
        if found is None:
            break
        frames.append(found)
    if not frames:
        return ""

    def said(f) -> str:
        return f"{f['func']} ({Path(f['file']).name}:{f['line']})"

    inner = frames[0]
    caller = next((f for f in frames if not f["file"].startswith(_STDLIB)
                   and "site-packages/multiprocess" not in f["file"]), None)
    if caller is None or caller is inner:
        return said(inner)
    return f"{said(inner)}, called from {said(caller)}"


def start_child(ctx, target, *args):
    """Start a child that dies with this process (``fuzz.internal.lifetime``)."""
    reap()
    forked = ctx is _ctx
    read = lifetime.lifeline()[0] if forked else None  # a spawned child inherits no pipe
    process = ctx.Process(target=child_main, args=(os.getpid(), read, target, *args), daemon=True)
    process.start()
    return process


_exiting: list = []  # processes of workers that answered ``Closed``, not reaped yet


def reap(wait: float | None = None) -> None:
    """Release the closed workers that have exited; ``wait``: join each for up to that long
    first, and kill one still there after it."""
    for process in list(_exiting):
        if wait is not None and process.exitcode is None:
            process.join(wait)
            if process.exitcode is None:
                process.kill()
                process.join(5)
        if process.exitcode is not None:
            _exiting.remove(process)
            release(process)


def release(process) -> None:
    """Close an ended child's sentinel pipe now: left to garbage collection, a long-lived
    process running many campaigns (a benchmark, a test session) piled them up past the 1024
    file descriptors ``select`` can watch."""
    if process.exitcode is not None:
        process.close()


def child_main(parent_pid, lifeline_read, target, *args):
    if lifeline_read is not None:  # forked: everything here is the parent's, inherited
        # Into the collector's permanent generation, here in the child: its collections then
        # never walk the parent's objects, so they write none of their pages (each write a
        # copy-on-write fault: the framework's modules, Hypothesis's data).  Done in the child,
        # not around the fork in the parent: unfreezing there would move the parent's young
        # garbage to the oldest generation, where it waits for a full collection (measured:
        # 0.7 s more at the exit of a 32 s nightly).
        gc.freeze()
    lifetime.become_child(parent_pid, lifeline_read)
    return target(*args)
