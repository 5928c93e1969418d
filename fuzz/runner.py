"""Run operations on a real target, in worker processes, and observe them.

``Session(adapter, variant)`` lives in the parent, which has imported the framework once.
``session.case(workflow)`` makes a ``CaseRunner``: one fresh store, one worker forked from the
parent (``multiprocess``, fork context; with ``Settings.fork_server``, where the variant reuses
workers, from the session's fork server instead: ``fuzz.internal.forkserver``), kept across
operations until a crash point kills it.
Where the variant allows it (``Tuning.reuse_worker``), a worker that closed its case
normally stays, as the spare, for the next case (at most ``CASES_PER_WORKER`` cases): a fork, the
copy-on-write faults that follow it, and an exit less per case.  A worker that finds a thread or
an open file of its case still alive after closing it exits instead (``worker.Residue``,
counted in ``Session.left_behind``).
``runner.apply(op)`` returns the ``Observation`` of docs/contract.md §3: the outcome, the effect
rows the ledger holds for this op, and the state ``query`` reads afterwards (the worker reads it
right after the op and sends it unasked: one round trip per op).

The session keeps one *spare* worker, forked while the parent waits for another worker (an op
running, a case closing): the next case, or the recovery after a SIGKILL, takes it instead of
forking on its way.  A worker gets its case (``Open``) when it is taken and opens the store only
on its first command, so a spare taken after a kill has never read the store before the kill
(it is sent only once the killed worker is dead and reaped).  Where workers are reused, a spare
first runs a throwaway case of its own (``warm_up_ops``, in ``warm-NNNNNN/``), so that the
recovery after a kill runs in a process that has run a case before, as a reused worker has; a
session that has run a SIGKILL crash point keeps such a spare ready beside the worker that
serves the next case (``Session._keeps``).  A worker that closes normally runs
the adapter's ``cleanup`` and removes the case's directory itself, after answering ``Closed``;
its exit is not waited for (``_reap``).

Why a fork server: the frameworks take 0.6-8 s to import; a forked child of a pre-imported parent
starts in milliseconds.  Why a worker per case rather than per op: an in-memory store lives in the
worker, and most ops need no new process.  Why not one worker for every case: a framework's
module-level state (registries, caches, event buses, threads) would carry one case into the
next; only an adapter that keeps none declares ``reuse_worker``.  Every wait is bounded by
``op_timeout``: an op that does not answer is ``stuck`` and its worker is killed.

Lifetime (``fuzz.internal.lifetime``): every child dies with the parent, whatever kills it (a
parent-death signal and a lifeline pipe); the session's temp folder goes when the session closes.
A ``Settings.deadline`` (``time.monotonic()``) caps every wait by the time left: an operation the
deadline cuts short raises ``OutOfTime``, never ``stuck``, since it did not get its time.
"""

from __future__ import annotations

import functools
import gc
import os
import re
import shutil
import sysconfig
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import multiprocess
from multiprocess import connection

from adapters.protocol import Adapter, Variant
from refmodel import (Fork, Observation, Op, Query, Race, Resume, Start, StateView,
                      TwinRecover, Workflow)

from .errors import EngineError, HarnessFailure, OutOfTime
from .internal import lifetime
from .internal import messages as m
from .internal.blame import roots_of
from .internal.forkserver import Forked, ForkServer
from .internal.ledger import Ledger, MemoryLedger
from .internal.worker import OUTPUT_LIMIT, STACK_SIGNAL
from .internal.worker import TWIN as _TWIN
from .internal.worker import cleanup as _cleanup
from .internal.worker import handle as _handle
from .internal.worker import output_path as _output_path
from .internal.worker import serve as _serve

_contexts = {"fork": multiprocess.get_context("fork"), "spawn": multiprocess.get_context("spawn")}
_ctx = _contexts["fork"]


MODES = ("fork", "spawn", "inprocess")
_POLL = 0.25  # seconds between looks at a requested stop while waiting for a worker


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    op_timeout: float = 30.0  # seconds an operation may take before it is ``stuck``
    keep_cases: bool = False  # keep each case's directory (stores, ledger) after it closes
    # ``fork``: workers forked from the prepared parent, through the session's fork server
    # (``fork_server``; the default).  ``spawn``: a fresh
    # interpreter per worker, which imports the framework again (cold-start checks, benchmarks).
    # ``inprocess``: no worker at all, for benchmarks and debugging; no SIGKILL crash points, no
    # races, no time limit.
    mode: str = "fork"
    # ``time.monotonic()`` by which everything must stop (``--max-time``), or None.  Each wait is
    # capped by the time left; an operation cut short by it raises ``OutOfTime``.
    deadline: float | None = None
    # Let a worker that closed its case normally serve the next one, where the variant allows it
    # (``Tuning.reuse_worker``; ``fork`` mode only).  False: a fresh fork for every case,
    # as for a variant that does not allow it (benchmarks compare the two).
    reuse: bool = True
    # Where workers are reused, a spare runs a throwaway case of the session's last workflow
    # while it waits (``warm_up_ops``): the first-case costs of a new process are off the way of
    # the recovery after a SIGKILL.  False: spares wait cold (benchmarks compare the two).
    warm_spares: bool = True
    # A full garbage collection in the worker before each command (``replay --collect-garbage``).
    # A real process collects at whatever allocation crosses a threshold, so when depends on
    # everything it ran before; a finding that a collection exposes (an object the framework
    # holds only weakly) shows in some processes and not in others.  Here a collection comes
    # at every operation boundary, in every process: such a finding no longer waits for a
    # process whose history happens to collect at the right moment.
    collect_garbage: bool = False
    # ``fork`` mode, where the variant reuses workers (``Session.serves_forks``): fork workers
    # from a fork server of the session's (``fuzz.internal.forkserver``), forked from the parent
    # once, instead of from the parent itself, whose own copy-on-write faults after each fork
    # were a third of its CPU.  Off by default: with it on, one reference campaign of CI's
    # core run counted a tool error that the same campaign did not show here in 138 runs, 120
    # of them three at a time beside two busy loops; until that is explained, the parent forks
    # its workers (benchmarks compare the two: benchmarks/history/round-24.md and
    # round-25.md).
    fork_server: bool = False


class Session:
    """One adapter variant, prepared in this (parent) process, ready to fork workers."""

    # Called with each ``HarnessFailure`` before it propagates from ``CaseRunner.apply`` (a
    # campaign counts it and discards the example); ``None``: it just propagates.
    on_harness_failure = None

    def __init__(self, adapter: Adapter, variant: Variant, root: Path | None = None,
                 settings: Settings = Settings()):
        if threading.active_count() != 1:
            # A process with threads cannot fork safely; the frameworks start them on first use.
            raise EngineError(
                f"{type(adapter).__name__}: the parent has {threading.active_count()} threads "
                "before forking workers; prepare() must import, never run, the framework"
            )
        if settings.mode not in MODES:
            raise EngineError(f"Settings.mode must be one of {MODES}, got {settings.mode!r}")
        self.adapter, self.variant, self.settings = adapter, variant, settings
        self._own_root = root is None  # a temp folder of ours, removed by close()
        self.root = Path(root) if root is not None else lifetime.make_root()
        self.root.mkdir(parents=True, exist_ok=True)
        self._cases = 0
        # A worker forked ahead of its case (``fork`` mode only), while the parent waits for
        # another worker anyway: the next case, or the recovery after a SIGKILL, takes it
        # instead of forking on its critical path.  A list, so the finalizer holds it, not us.
        self._spare: list[_Worker] = []
        weakref.finalize(self, _drop_spares, self._spare)
        # Racers that stayed after their race, for the next one (``end_race``): reused workers
        # too, kept apart from the spares.
        self._racers: list[_Worker] = []
        weakref.finalize(self, _drop_spares, self._racers)
        # The fork server (``Settings.fork_server``), made when the first worker is needed; a
        # list, so that the finalizer holds it, not us.
        self._server: list[ForkServer] = []
        weakref.finalize(self, _close_servers, self._server)
        self._workflow: Workflow | None = None  # the last case's: what a spare warms up with
        self._warm_ups = 0
        # A SIGKILL crash point ran in this session: more will (a campaign draws them from
        # the same strategy), so a warm spare is kept ready for them (``_keeps``).
        self.killing = False
        # Workers told to stay that exited instead, their case still alive in them (a thread,
        # an open file: ``worker.Residue``), and the last thing one left.
        self.left_behind, self.last_left = 0, ""

    def op_time(self) -> float:
        """Seconds the next wait may take: the op time limit, capped by the time left.

        A variant whose ops wait on a framework timer (a server's grace period) declares a
        longer limit (``Tuning.op_timeout``); never a shorter one."""
        limit = self.op_limit()
        if self.settings.deadline is None:
            return limit
        left = self.settings.deadline - time.monotonic()
        if left <= 0:
            raise OutOfTime()
        return min(limit, left)

    @functools.cached_property
    def capabilities(self):
        """The variant's ``Capabilities``, asked of the adapter once."""
        return self.adapter.capabilities(self.variant)

    @functools.cached_property
    def tuning(self):
        """The variant's ``Tuning``, asked of the adapter once."""
        return self.adapter.tuning(self.variant)

    @functools.cached_property
    def reuse(self) -> bool:
        """Does a worker that closed its case normally stay for the next case?"""
        allowed = getattr(self.tuning, "reuse_worker", False)
        return bool(allowed) and self.settings.reuse and self.settings.mode == "fork"

    @functools.cached_property
    def serves_forks(self) -> bool:
        """Are this session's workers forked from a fork server (``Settings.fork_server``)?
        Only where the variant reuses workers (``Tuning.reuse_worker``): there it was
        measured (the reference target, LangGraph, AutoGen); 30-second CrewAI campaigns, whose
        every case forks a worker, overran their time box by up to 25 s with it (up to 7 s
        without), not yet explained (benchmarks/history/round-24.md)."""
        return self.settings.mode == "fork" and self.settings.fork_server \
            and bool(getattr(self.tuning, "reuse_worker", False))

    @functools.cached_property
    def cleans_up(self) -> bool:
        """Does a case of this variant need the adapter's ``cleanup`` after it?  Not when the
        adapter keeps the protocol's (which does nothing), nor when the variant says its
        workdir holds everything (``Tuning.needs_cleanup``): then no worker runs it, and
        none is forked to run it after a killed worker."""
        return type(self.adapter).cleanup is not Adapter.cleanup \
            and getattr(self.tuning, "needs_cleanup", True)

    @functools.cached_property
    def warm(self) -> bool:
        """Does a spare warm up (``Settings.warm_spares``)?  Only where workers are reused:
        there the adapter vouches that a case leaves nothing behind (``reuse_worker``), and a
        warmed spare is a worker that served one case, as a reused one is."""
        return self.reuse and self.settings.warm_spares

    def op_limit(self) -> float:
        own = getattr(self.tuning, "op_timeout", None)
        return max(self.settings.op_timeout, own or 0.0)

    def out_of_time(self) -> bool:
        return self.settings.deadline is not None and time.monotonic() >= self.settings.deadline

    def grace(self) -> float:
        """Seconds to let a worker close or clean up; short once the deadline has passed."""
        if self.settings.deadline is None:
            return self.settings.op_timeout
        left = self.settings.deadline - time.monotonic()
        return min(self.settings.op_timeout, max(1.0, left))

    def close(self) -> None:
        """Stop the idle workers (cleaning up a throwaway case one did not finish); remove the
        session's temp folder (unless ``keep_cases``, or the caller gave one)."""
        for casedir in _drop_spares(self._spare):
            self._clean_warm_up(casedir)
        _drop_spares(self._racers)  # no throwaway case: nothing to clean up
        _reap(self.grace())
        _close_servers(self._server)
        if self._own_root and not self.settings.keep_cases:
            shutil.rmtree(self.root, ignore_errors=True)

    def clean_up(self, workdir: Path) -> None:
        """Run the adapter's cleanup for ``workdir`` in a short-lived worker (never the parent,
        which forks workers, unless the session runs ``inprocess``: the framework runs here
        already, and the fork cost ~73 ms a case).  Called when no worker of ``workdir``
        closed normally and ran it (``_Worker.stop(cleanup=True)``): a case's, a twin's, or a
        spare's throwaway case that did not finish.

        It gets the op time limit, whatever the deadline: what it removes (a database on a
        server) outlives the campaign, and a cleanup killed half-way leaves it for good.  (With
        the deadline's one-second grace, one of three twenty-second MariaDB campaigns left a
        database behind, its tables made and empty, as a third-party store's cleanup leaves one
        between its factory's migrations and its drop; none in three since.)"""
        if not self.cleans_up:
            return  # nothing to clean outside the directory: spare the fork
        if self.settings.mode == "inprocess":
            _cleanup(self.adapter, self.variant, workdir)
            return
        process = self.launch("cleanup", None, (workdir,))
        process.join(self.op_limit())
        if process.is_alive():
            process.kill()
            process.join()
        _release(process)

    def launch(self, kind: str, conn=None, args: tuple = ()):
        """Start a child of this session's: ``"serve"``, a worker on ``conn`` (its end of the
        pipe), or ``"cleanup"`` (``args``: the workdir).  ``fork`` mode: from the session's
        fork server (``Settings.fork_server``, made now if it has none, or a new one if it
        died), or else from this process; ``spawn``: a fresh interpreter.  Returns the
        child's process (a ``multiprocess.Process`` or a ``forkserver.Forked``); ``OSError``
        when it cannot be forked."""
        if self.serves_forks:
            _reap()
            for attempt in (1, 2):
                if not self._server or not self._server[0].alive():
                    _close_servers(self._server)
                    self._server.append(ForkServer(
                        {"serve": (_serve, (self.adapter, self.variant)),
                         "cleanup": (_cleanup, (self.adapter, self.variant))}, _child))
                try:
                    fds = () if conn is None else (conn.fileno(),)
                    return self._server[0].start(kind, fds, (False, *args) if kind == "serve"
                                                 else args)
                except OSError:
                    if attempt == 2 or self._server[0].alive():
                        raise
        ctx = _contexts[self.settings.mode]
        if kind == "serve":
            return _start(ctx, _serve, conn, self.adapter, self.variant, ctx is not _ctx)
        return _start(ctx, _cleanup, self.adapter, self.variant, *args)

    def fork_spare(self) -> None:
        """Fork a spare worker, unless the session has an idle one (``fork`` mode only):
        called while the parent waits for a worker anyway (its op, its close), so the fork is
        off the case's critical path.  A spare is only a head start: a fork that fails here is
        not an error (the next worker is forked when it is needed, and fails there if it must).
        Where spares warm up (``warm``), it is sent its throwaway case at once."""
        if self.settings.mode != "fork" or self._idle():
            return
        try:
            spare = _Worker(self)
        except OSError:
            return
        self._spare.append(spare)
        if self.warm and self._workflow is not None:
            self._warm_ups += 1
            spare.warm_up(self._workflow, self.root / f"warm-{self._warm_ups:06d}")

    def racer(self, workflow: Workflow, workdir: Path, ledger_path: Path) -> _Worker:
        """A worker for one racer of a race on ``workdir``: one that served a racer of an
        earlier race and stayed (``end_race``), else a new one.  Racers are kept apart from the
        spares: those are the next case's and the next recovery's head start, warmed up for it."""
        while self._racers:
            racer = self._racers.pop()
            if racer.alive():
                try:
                    racer.adopt(workflow, workdir, ledger_path)
                    return racer
                except OSError:
                    pass
            racer.kill()
        return _Worker(self, workflow, workdir, ledger_path)

    def end_race(self, racer: _Worker, finished: bool) -> None:
        """Close a racer's case.  Where workers are reused (``reuse``), a racer of a race that
        ``finished`` (ran to its end, not cut short by an error or the deadline) stays for the
        next race, up to the variant's ``max_racers``, if it closes its case normally with
        nothing left alive: a race then forks no process once as many racers have run
        (measured: half of a reference campaign's forks were racers; each fork, its first
        writes to the pages it shares with its parent, and its exit cost about 10 ms of CPU,
        ``perf``).  Otherwise it closes and exits, off the case's way (``_reap``)."""
        stay = finished and self.reuse and racer.cases < CASES_PER_WORKER and len(
            self._racers) < max(2, getattr(self.capabilities, "max_racers", 2))
        if racer.stop(1.0, stay=stay) and racer.stayed:
            self._racers.append(racer)

    def _idle(self) -> list:
        """The live idle workers (spares, and a reused worker waiting for the next case); the
        dead ones are let go."""
        for worker in [w for w in self._spare if not w.alive()]:
            self._spare.remove(worker)
            self._let_go(worker)
        return self._spare

    def _let_go(self, worker: _Worker) -> None:
        """Kill an idle worker of no use; a throwaway case it had not finished is cleaned up
        here (a database of the adapter's, the directory)."""
        worker.kill()
        if worker.warm_dir is not None:
            self._clean_warm_up(worker.warm_dir)

    def _clean_warm_up(self, casedir: Path) -> None:
        self.clean_up(casedir / "store")
        shutil.rmtree(casedir, ignore_errors=True)

    def _keeps(self) -> int:
        """Idle workers the session keeps between cases: one, the next case's head start; two
        where spares warm up and this session has run a SIGKILL crash point (``killing``): the
        reused worker for the next case, and a spare warmed up ahead for the next kill.  A
        spare forked only when the killing op starts is still warming up when an early crash
        point fires, and the recovery would wait for the rest of its throwaway case."""
        return 2 if self.warm and self.killing else 1

    def wants_spare(self) -> bool:
        """Should the op about to run fork a spare meanwhile, though its worker will serve the
        next case (``reuse``) and it carries no SIGKILL crash point?  Only when the spare the
        last kill took is to be replaced ahead of the next kill (``_keeps``)."""
        return self.warm and self.killing and not self._idle()

    def left_over(self, what: str) -> None:
        """A worker told to stay exited instead: its case left ``what`` alive in it."""
        self.left_behind += 1
        self.last_left = what

    def give_back(self, worker: _Worker) -> None:
        """A worker that closed its case and stayed (``reuse``) waits for the next case, unless
        the session has all the idle workers it keeps (a spare forked for a sigkill crash point
        that did not fire: fresher); then it exits."""
        if len(self._idle()) >= self._keeps():
            worker.stop(1.0)  # no warm-up owed: it served a case since
            return
        self._spare.append(worker)

    def worker(self, workflow: Workflow, workdir: Path, ledger_path: Path) -> _Worker:
        """A worker for the case on ``workdir``: an idle one if there is one (one ready first:
        done warming up, else the oldest), else a new one."""
        while self._spare:
            ready = [w for w in self._spare if w.ready()]
            spare = ready[-1] if ready else self._spare[0]
            self._spare.remove(spare)
            if spare.alive() and spare.warmed(self.grace()):
                try:
                    spare.adopt(workflow, workdir, ledger_path)
                    return spare
                except OSError:
                    pass
            self._let_go(spare)  # it died idle, or its warm-up failed: a new one
        return _Worker(self, workflow, workdir, ledger_path)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def case(self, workflow: Workflow) -> CaseRunner:
        self._cases += 1
        self._workflow = workflow
        casedir = self.root / f"case-{self._cases:06d}"
        return CaseRunner(self, workflow, casedir)


class _Worker:
    """A forked child that serves commands on the case on ``workdir`` over a pipe
    (``fuzz.internal.worker.serve``); it opens the case on its first command.  Without a
    workflow: a spare, waiting for the case ``adopt`` gives it."""

    def __init__(self, session: Session, workflow: Workflow | None = None,
                 workdir: Path | None = None, ledger_path: Path | None = None):
        self.conn, child_conn = _contexts[session.settings.mode].Pipe()
        try:
            self.process = session.launch("serve", child_conn)
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
        self._out_of_time = session.out_of_time  # the campaign's deadline, not the op's limit
        self._left_over = session.left_over  # counts a worker that would not stay
        self._collect = session.settings.collect_garbage
        self._cleans_up = session.cleans_up  # a throwaway case runs the adapter's cleanup
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

    def warm_up(self, workflow: Workflow, casedir: Path) -> None:
        """Send the spare its throwaway case (``messages.WarmUp``) on ``casedir``, which it
        creates and removes: ``warm_up_ops(workflow)``."""
        ops = tuple(op.to_json() for op in warm_up_ops(workflow))
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
        caller); one whose warm-up left something alive is counted (``Session.left_behind``)."""
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
            _signal(self.process, STACK_SIGNAL)
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
        _release(self.process)

    def stop(self, timeout: float, cleanup: bool = False, meanwhile=None,
             remove: Path | None = None, stay: bool = False) -> bool:
        """Close the worker; ``cleanup``: it runs the adapter's cleanup after closing the case;
        ``remove``: it removes that directory after answering.  Returns whether it answered
        ``Closed`` (having done both).  Then nothing of the case is in use: its exit is left to
        finish on its own (``_reap``); otherwise it is killed (and joined).  ``meanwhile``:
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


class _LocalWorker:
    """The ``inprocess`` mode's stand-in for a worker: same commands, run in this process."""

    def __init__(self, session: Session, workflow: Workflow, workdir: Path, ledger: MemoryLedger):
        # One process, one ledger: the case runner's list, lent to each of its local workers
        # (which never close it; the runner does).
        self.ledger = ledger
        self.case = session.adapter.open(session.variant, workflow, Path(workdir))
        self.roots = roots_of(session.adapter)
        self._open = True
        self._follow: list = []  # the query a worker would send unasked: run when it is read
        self._collect = session.settings.collect_garbage

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


class CaseRunner:
    """Applies operations to one case of the target and observes them."""

    def __init__(self, session: Session, workflow: Workflow, casedir: Path):
        self.session, self.workflow = session, workflow
        self.casedir = casedir
        self.workdir = casedir / "store"
        self.workdir.mkdir(parents=True)
        self.ledger_path = casedir / "ledger.sqlite"
        # In process, every worker is this process and borrows this ledger: a list in memory.
        inprocess = session.settings.mode == "inprocess"
        self.ledger = MemoryLedger() if inprocess else Ledger(self.ledger_path)
        self.seq = 0
        self.worker: _Worker | None = None
        self.log: list[str] = []  # what happened beyond the observation (errors, kills)
        self.applied: list[Op] = []  # the ops of this case so far: a tool error's evidence

    @property
    def timeout(self) -> float:
        return self.session.op_time()

    def _worker(self, workdir: Path | None = None) -> _Worker:
        if self.session.settings.mode == "inprocess":
            def make(where):
                return _LocalWorker(self.session, self.workflow, where, self.ledger)
        else:
            def make(where):
                return self.session.worker(self.workflow, where, self.ledger_path)
        if workdir is not None:
            return make(workdir)
        if self.worker is None or not self.worker.alive():
            self.worker = make(self.workdir)
        return self.worker

    # -- the operations -----------------------------------------------------------------------

    def apply(self, op: Op) -> Observation:
        """The observation of ``op``; ``HarnessFailure`` when the adapter (not the framework)
        failed on it: a tool error for this example, never an observation."""
        lifetime.checkpoint()
        if self.session.out_of_time():
            raise OutOfTime()
        self.applied.append(op)
        try:
            return self._apply(op)
        except HarnessFailure as exc:
            exc.ops = tuple(self.applied)
            self.log.append(f"op {self.seq} ({op.name}) harness error: {exc.error}\n"
                            f"{exc.traceback}")
            if self.session.on_harness_failure is not None:
                self.session.on_harness_failure(exc)
            raise

    def _apply(self, op: Op) -> Observation:
        self.seq += 1
        worker = None  # the worker that reads the state after ``op`` unasked, if one does
        if op.executes:
            worker = self._worker()
            ended = self._run(worker, op, self.seq, _branch(op), query=_branch(op))
        elif isinstance(op, Race):
            ended = self._race(op)
        elif isinstance(op, TwinRecover):
            return self._twin(op)
        elif op.name == "query":
            state, error = self._query(self._worker(), op.thread)
            if error is not None:
                return Observation("rejected", self._effects(), state, error=error)
            return Observation("ok", self._effects(), state)
        elif op.name == "tamper":
            worker = self._worker()
            self._command(worker, m.TamperCommand(op.thread, op.how, op.part, query=op.thread), op)
            ended = m.RacerOutcome(0, "ok")
        else:  # pragma: no cover - op_from_json only makes the types above
            raise EngineError(f"unknown operation {op!r}")
        if worker is not None and worker.owed:
            state, unread = self._query(worker, _branch(op), owed=True)
        else:
            state, unread = self._query(self._worker(), _branch(op))
        # Why the state could not be read back, when the op itself raised nothing: evidence for
        # the report (a store under test that raises on the read names its method there).
        error = ended.error or (f"reading the state back: {unread}" if unread else None)
        return Observation(ended.outcome, self._effects(), state, error=error)

    def _run(self, worker: _Worker, op: Op, seq: int, branch: str,
             query: str | None = None) -> m.RacerOutcome:
        command = m.RunCommand(op=op.to_json(), seq=seq, branch=branch, query=query)
        # While the op runs, the session's spare is forked (unless it has one): it reads the
        # state and recovers if a SIGKILL ends this op (opening the store only on its first
        # command, sent once the killed worker is dead), or serves the next case.  Where this
        # worker will serve the next case itself (``reuse``), only an op that may kill it needs
        # a spare (or, once kills have run, any op while the last kill's spare is not yet
        # replaced: ``wants_spare``): forking one per case would pay the fork the reuse saves.
        if _may_kill(op):
            self.session.killing = True
        meanwhile = self.session.fork_spare if worker is self.worker and (
            not self.session.reuse or _may_kill(op) or self.session.wants_spare()) else None
        status, reply = worker.call(command, self.timeout, meanwhile)
        return self._outcome(worker, status, reply, op, seq, branch)

    def _outcome(self, worker, status, reply: m.Reply | None, op: Op, seq: int, branch: str,
                 racer: int = 0) -> m.RacerOutcome:
        """How one run (or one racer) ended; ``HarnessFailure`` when the adapter failed."""
        if status == "killed":
            crash = getattr(op, "crash", None)
            where = f" at task {crash.task} {crash.phase}" if crash is not None else ""
            return m.RacerOutcome(racer, "crashed", f"SIGKILL{where}")
        if status == "timeout" and self.session.out_of_time():
            raise OutOfTime()  # the deadline cut the op short: no verdict on it
        if status == "timeout":
            limit = self.session.op_limit()
            stack = getattr(worker, "stack", "")
            self.log.append(f"op {seq} ({op.name}) did not answer within {limit}s"
                            + (f"; the worker's threads then:\n{stack}" if stack else ""))
            where = waiting_in(stack)
            return m.RacerOutcome(racer, "stuck", f"no answer within {limit}s"
                                  + (f", waiting in {where}" if where else ""))
        if status == "died":
            self.log.append(f"op {seq} ({op.name}): the worker died without reaching a barrier"
                            + self._last_words(worker))
            return m.RacerOutcome(racer, "crashed", "the worker died without reaching a barrier")
        self._keep_output(seq, op, reply.output)
        rows = self.ledger.count(seq, branch, racer)
        if reply.fired != rows:
            # The ledger and the worker disagree: the machinery, not the framework, is broken.
            raise EngineError(f"op {seq}: the worker counted {reply.fired} effects, "
                              f"the ledger has {rows}")
        if reply.kind == m.HARNESS:
            raise HarnessFailure(_describe(op, racer), reply.error, reply.traceback)
        if reply.kind == m.REJECTED:
            self.log.append(f"op {seq} ({op.name}) rejected: {reply.error}")
        return m.RacerOutcome(racer, reply.outcome, reply.error)

    def _keep_output(self, seq: int, op: Op, output: str) -> None:
        """What the framework printed during the op: kept for the report, never printed."""
        if output:
            self.log.append(f"op {seq} ({op.name}) output:\n{output[-OUTPUT_LIMIT:]}")

    def _last_words(self, worker) -> str:
        """The tail of what a worker that died printed (its traceback, usually)."""
        pid = getattr(worker, "pid", None)
        if not pid:
            return ""
        try:
            data = _output_path(self.ledger_path, pid).read_bytes()[-OUTPUT_LIMIT:]
        except OSError:
            return ""
        return "; its last output:\n" + data.decode("utf-8", "replace") if data else ""

    def _query(self, worker: _Worker, thread: str, owed: bool = False):
        """``(state, None)``, or ``(None, error)`` when the query was refused or not answered;
        ``HarnessFailure`` when the adapter's query failed.  ``owed``: the worker sends this
        query's reply unasked, after the op's (``messages.follows``)."""
        op = Query(thread)
        reply = self._command(worker, m.QueryCommand(thread), op, refusals=True, owed=owed)
        if reply is None:
            return None, "the worker did not answer the query"
        if reply.kind == m.REJECTED:
            return None, reply.error
        return StateView.from_json(reply.value), None

    def _command(self, worker: _Worker, message, op: Op, refusals: bool = False,
                 owed: bool = False):
        """A query, tamper or clone: its ``Reply`` (``None`` when the worker did not answer).
        A failure of the adapter is a ``HarnessFailure``; so is a refusal, unless ``refusals``
        (a query may be refused: a store the framework cannot read).  ``owed``: read the reply
        the worker sends unasked instead of sending ``message``."""
        if owed:
            status, reply = worker.owed_reply(self.timeout)
        else:
            status, reply = worker.call(message, self.timeout)
        if status == "timeout" and self.session.out_of_time():
            raise OutOfTime()
        if status != "reply":
            self.log.append(f"{type(message).__name__}: worker {status}")
            return None
        self._keep_output(self.seq, op, reply.output)
        if reply.kind == m.HARNESS or (reply.kind == m.REJECTED and not refusals):
            raise HarnessFailure(_describe(op), reply.error, reply.traceback)
        return reply

    def _effects(self, seq: int | None = None, twin: bool | None = None) -> tuple:
        rows = self.ledger.rows(self.seq if seq is None else seq)
        if twin is None:
            return tuple(rows)
        return tuple(
            (b.removesuffix(_TWIN), t, v) for b, t, v in rows if b.endswith(_TWIN) == twin
        )

    def _race(self, op: Race) -> m.RacerOutcome:
        """k racers on one store: all open it, then a start barrier releases them together; in a
        forced race each also waits, after reading the pending interrupt, until all have read.

        The outcome is the racers' outcomes, sorted and joined with ``"|"``; the error names each
        racer that has one (``"racer 1: ...; racer 3: ..."``)."""
        from refmodel import Resume

        if self.session.settings.mode == "inprocess":
            # Racers are processes, and they write a ledger file; an in-process case has neither.
            raise EngineError("a race needs worker processes: not in the inprocess mode")
        # Every racer answers the interrupt pending now: the one it was shown.
        state, _ = self._query(self._worker(), op.thread)
        gate = state.pending if state is not None else None
        racers, finished = [], False
        try:
            for value in op.values:
                w = self.session.racer(self.workflow, self.workdir, self.ledger_path)
                racers.append((w, Resume(op.thread, value=value, gate=gate)))
            for i, (w, resume) in enumerate(racers):
                w.conn.send(m.RaceCommand(op=resume.to_json(), seq=self.seq, branch=op.thread,
                                          racer=i + 1, forced=op.forced))
            self._barrier(racers, "opened")  # everyone has opened the store
            if op.forced:
                self._barrier(racers, "read")  # everyone has read the interrupt
            ended = []
            for i, (w, resume) in enumerate(racers):
                status, reply = w.wait(self.timeout)
                ended.append(self._outcome(w, status, reply, resume, self.seq, op.thread, i + 1))
            finished = True
            return _joined(ended)
        finally:
            # Every racer closes its case before the state is read; one that answered its
            # resume stays for the next race where workers are reused (``Session.end_race``).
            for w, _ in racers:
                self.session.end_race(w, finished)

    def _barrier(self, racers, name: str) -> None:
        waiting = list(racers)
        for w, _ in waiting:
            status, reply = w.wait(self.timeout)
            if status == "timeout" and self.session.out_of_time():
                raise OutOfTime()
            if status != "reply" or reply != m.Barrier(name):
                raise EngineError(f"racer did not reach the {name!r} barrier: {status} {reply!r}")
        for w, _ in waiting:
            w.conn.send(m.Go())

    def _twin(self, op: TwinRecover) -> Observation:
        from refmodel import Recover

        twin_dir = self.casedir / f"twin-{self.seq:04d}"
        twin_dir.mkdir()
        if self._command(self._worker(), m.CloneCommand(str(twin_dir)), op) is None:
            raise EngineError("clone_store: the worker did not answer")
        recover = Recover(op.thread)
        main = self._run(self._worker(), recover, self.seq, op.thread)
        twin_worker = self._worker(twin_dir)
        try:
            second = self._run(twin_worker, recover, self.seq, op.thread + _TWIN)
            if not twin_worker.alive():
                twin_worker = self._worker(twin_dir)
            twin_state, _ = self._query(twin_worker, op.thread)
        finally:
            cleanup = self._needs_cleanup()
            if not twin_worker.stop(self.session.grace() if cleanup else 1, cleanup=cleanup):
                self.session.clean_up(twin_dir)  # it did not close normally (and clean up)
        state, _ = self._query(self._worker(), op.thread)
        twin = Observation(second.outcome, self._effects(twin=True), twin_state, error=second.error)
        return Observation(main.outcome, self._effects(twin=False), state, twin, error=main.error)

    def _needs_cleanup(self) -> bool:
        """Should a worker that closes normally run the adapter's cleanup itself?  (Saves the
        short-lived worker ``Session.clean_up`` forks, ~40-90 ms a case; ``inprocess``: no
        worker.)"""
        return self.session.cleans_up and self.session.settings.mode != "inprocess"

    def close(self) -> None:
        """Close the case: its worker closes the case, cleans up and removes the case's
        directory on its way out (after answering ``Closed``); when it cannot (killed, or it
        did not answer), the cleanup and the removal are done here."""
        self.ledger.close()  # nothing reads it any more; closed before the directory goes
        remove = None if self.session.settings.keep_cases else self.casedir
        closed = False
        if self.worker is not None:
            # While it closes, the next case's worker is forked (unless the session has one);
            # where workers are reused, this one stays for the next case instead.
            stay = self.session.reuse and self.worker.cases < CASES_PER_WORKER
            closed = self.worker.stop(self.session.grace(), cleanup=self._needs_cleanup(),
                                      meanwhile=None if stay else self.session.fork_spare,
                                      remove=remove, stay=stay)
            if closed and self.worker.stayed:
                self.session.give_back(self.worker)
            elif stay:  # it did not stay (its case left something alive): fork the next one
                self.session.fork_spare()
        if not closed:
            self.session.clean_up(self.workdir)
            if remove is not None:
                shutil.rmtree(remove, ignore_errors=True)


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


# Cases one reused worker serves before it exits and a fresh fork takes over: bounds what a
# long-lived worker accumulates (memory its collector never returns, descriptors of libraries'
# own caches), so a campaign's ten-thousandth case runs in a process much like its first's.
CASES_PER_WORKER = 50


WARM_THREAD = "t0"  # the throwaway case's one thread


def warm_up_ops(workflow: Workflow) -> tuple:
    """A spare's throwaway case (``Settings.warm_spares``): a start, and where the workflow
    asks, the resume that answers it, each followed by the read of the thread; the paths every
    case takes and a recovery after a kill takes again (open the store, run, save, read).
    Kept short: a SIGKILL early in an op may come before the warm-up is done, and the recovery
    then waits for the rest of it."""
    start = Start(WARM_THREAD)
    if not workflow.gates:
        return (start,)
    return (start, Resume(WARM_THREAD, value=workflow.values[0]))


def _may_kill(op: Op) -> bool:
    """Does ``op`` carry a sigkill crash point (its worker may die, and the recovery then needs
    another)?"""
    crash = getattr(op, "crash", None)
    return crash is not None and crash.kind == "sigkill"


def _branch(op: Op) -> str:
    return op.new_thread if isinstance(op, Fork) else op.thread


def _describe(op: Op, racer: int = 0) -> str:
    """The op as a harness error names it: ``resume(t0)``, ``resume(t0) racer 2``."""
    return f"{op.name}({op.thread})" + (f" racer {racer}" if racer else "")


def _joined(ended: list) -> m.RacerOutcome:
    """The racers' outcomes as one: sorted, ``"|"``-joined; errors named per racer."""
    errors = "; ".join(f"racer {e.racer}: {e.error}" for e in ended if e.error)
    return m.RacerOutcome(0, "|".join(sorted(e.outcome for e in ended)), errors or None)


def _start(ctx, target, *args):
    """Start a child that dies with this process (``fuzz.internal.lifetime``)."""
    _reap()
    forked = ctx is _ctx
    read = lifetime.lifeline()[0] if forked else None  # a spawned child inherits no pipe
    process = ctx.Process(target=_child, args=(os.getpid(), read, target, *args), daemon=True)
    process.start()
    return process


_exiting: list = []  # processes of workers that answered ``Closed``, not reaped yet


def _reap(wait: float | None = None) -> None:
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
            _release(process)


def _drop_spares(spares: list) -> list:
    """Stop the session's idle workers: the directories of the throwaway cases that did not
    finish (``WarmUp``), which the caller cleans up."""
    unfinished = []
    while spares:
        spare = spares.pop()
        spare.stop(1.0)
        if spare.warm_dir is not None:
            unfinished.append(spare.warm_dir)
    return unfinished


def _close_servers(servers: list) -> None:
    """End the session's fork server, if it has one."""
    while servers:
        servers.pop().close()


def _signal(process, signum: int) -> None:
    """Send ``signum`` to a worker: through its pidfd where the fork server forked it (its pid
    may be another process's once the server has reaped it)."""
    if isinstance(process, Forked):
        process.signal(signum)
    else:
        os.kill(process.pid, signum)


def _release(process) -> None:
    """Close an ended child's sentinel pipe now: left to garbage collection, a long-lived
    process running many campaigns (a benchmark, a test session) piled them up past the 1024
    file descriptors ``select`` can watch."""
    if process.exitcode is not None:
        process.close()


def _child(parent_pid, lifeline_read, target, *args):
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
