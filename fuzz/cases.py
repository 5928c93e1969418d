"""Run operations on one case of a real target, in worker processes, and observe them.

``CaseRunner`` (made by ``Session.case(workflow)``: one fresh store) takes its worker from the
session's pool (``fuzz.pools``) and keeps it across operations until a crash point kills it.
``apply(op)`` returns the ``Observation`` of docs/contract.md §3: the outcome, the effect rows
the ledger holds for this op, and the state ``query`` reads afterwards (the worker reads it
right after the op and sends it unasked: one round trip per op).  A race runs k racers on the
one store; a twin recovery runs on a byte copy of it in a worker of its own.

Every wait is bounded by the op's time limit (``Policy.op_time``): an op that does not answer
is ``stuck`` and its worker is killed; one the deadline cuts short raises ``OutOfTime``, never
``stuck``, since it did not get its time.  A refusal of the framework is an observation
(``rejected``, with its exception); a failure of the adapter is a ``HarnessFailure``, a tool
error for the example.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from refmodel import (Fork, Observation, Op, Query, Race, Recover, Resume, StateView,
                      TwinRecover, Workflow)

from .errors import EngineError, HarnessFailure, OutOfTime
from .internal import lifetime
from .internal import messages as m
from .internal.ledger import Ledger, MemoryLedger
from .internal.worker import OUTPUT_LIMIT
from .internal.worker import TWIN as _TWIN
from .internal.worker import output_path as _output_path
from .transport import LocalWorker, ProcessWorker, waiting_in


class CaseRunner:
    """Applies operations to one case of the target and observes them."""

    def __init__(self, session, workflow: Workflow, casedir: Path):
        # ``session``: the ``fuzz.runner.Session`` whose workers this case takes; its policy,
        # pool and transport are read here, and its ``on_harness_failure`` is told.
        self.session, self.workflow = session, workflow
        self.policy, self.pool, self.transport = session.policy, session.pool, session.transport
        self.casedir = casedir
        self.workdir = casedir / "store"
        self.workdir.mkdir(parents=True)
        self.ledger_path = casedir / "ledger.sqlite"
        # In process, every worker is this process and borrows this ledger: a list in memory.
        inprocess = self.policy.inprocess
        self.ledger = MemoryLedger() if inprocess else Ledger(self.ledger_path)
        self.seq = 0
        self.worker: ProcessWorker | LocalWorker | None = None
        self.log: list[str] = []  # what happened beyond the observation (errors, kills)
        self.applied: list[Op] = []  # the ops of this case so far: a tool error's evidence

    @property
    def timeout(self) -> float:
        return self.policy.op_time()

    def _worker(self, workdir: Path | None = None) -> ProcessWorker | LocalWorker:
        if self.policy.inprocess:
            def make(where):
                return LocalWorker(self.policy, self.workflow, where, self.ledger)
        else:
            def make(where):
                return self.pool.worker(self.workflow, where, self.ledger_path)
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
        if self.policy.out_of_time():
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

    def _run(self, worker: ProcessWorker | LocalWorker, op: Op, seq: int, branch: str,
             query: str | None = None) -> m.RacerOutcome:
        command = m.RunCommand(op=op.to_json(), seq=seq, branch=branch, query=query)
        # While the op runs, the session's spare is forked (unless it has one): it reads the
        # state and recovers if a SIGKILL ends this op (opening the store only on its first
        # command, sent once the killed worker is dead), or serves the next case.  Where this
        # worker will serve the next case itself (``reuse``), only an op that may kill it needs
        # a spare (or, once kills have run, any op while the last kill's spare is not yet
        # replaced: ``wants_spare``): forking one per case would pay the fork the reuse saves.
        if _may_kill(op):
            self.pool.killing = True
        meanwhile = self.pool.fork_spare if worker is self.worker and (
            not self.policy.reuse or _may_kill(op) or self.pool.wants_spare()) else None
        status, reply = worker.call(command, self.timeout, meanwhile)
        return self._outcome(worker, status, reply, op, seq, branch)

    def _outcome(self, worker, status, reply: m.Reply | None, op: Op, seq: int, branch: str,
                 racer: int = 0) -> m.RacerOutcome:
        """How one run (or one racer) ended; ``HarnessFailure`` when the adapter failed."""
        if status == "killed":
            crash = getattr(op, "crash", None)
            where = f" at task {crash.task} {crash.phase}" if crash is not None else ""
            return m.RacerOutcome(racer, "crashed", f"SIGKILL{where}")
        if status == "timeout" and self.policy.out_of_time():
            raise OutOfTime()  # the deadline cut the op short: no verdict on it
        if status == "timeout":
            limit = self.policy.op_limit()
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

    def _query(self, worker: ProcessWorker | LocalWorker, thread: str, owed: bool = False):
        """``(state, None)``, or ``(None, error)`` when the query was refused or not answered;
        ``HarnessFailure`` when the adapter's query failed.  ``owed``: the worker sends this
        query's reply unasked, after the op's (``messages.follows``)."""
        op = Query(thread)
        reply = self._command(worker, m.QueryCommand(thread), op, refusals=True, owed=owed)
        if reply is None:
            return None, "the worker did not answer the query"
        if reply.kind == m.REJECTED:
            return None, reply.error
        return StateView.from_json(reply.value, self.workflow), None

    def _command(self, worker: ProcessWorker | LocalWorker, message, op: Op, refusals: bool = False,
                 owed: bool = False):
        """A query, tamper or clone: its ``Reply`` (``None`` when the worker did not answer).
        A failure of the adapter is a ``HarnessFailure``; so is a refusal, unless ``refusals``
        (a query may be refused: a store the framework cannot read).  ``owed``: read the reply
        the worker sends unasked instead of sending ``message``."""
        if owed:
            status, reply = worker.owed_reply(self.timeout)
        else:
            status, reply = worker.call(message, self.timeout)
        if status == "timeout" and self.policy.out_of_time():
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
        if self.policy.inprocess:
            # Racers are processes, and they write a ledger file; an in-process case has neither.
            raise EngineError("a race needs worker processes: not in the inprocess mode")
        # Every racer answers the interrupt pending now: the one it was shown.
        state, _ = self._query(self._worker(), op.thread)
        gate = state.pending if state is not None else None
        if isinstance(gate, tuple):  # a shape's questions: a racer names its own, or the one
            gate = gate[0] if len(gate) == 1 else None
        gates = op.gates or (gate,) * len(op.values)
        racers, finished = [], False
        try:
            for value, gate in zip(op.values, gates):
                w = self.pool.racer(self.workflow, self.workdir, self.ledger_path)
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
            # resume stays for the next race where workers are reused (``WorkerPool.end_race``).
            for w, _ in racers:
                self.pool.end_race(w, finished)

    def _barrier(self, racers, name: str) -> None:
        waiting = list(racers)
        for w, _ in waiting:
            status, reply = w.wait(self.timeout)
            if status == "timeout" and self.policy.out_of_time():
                raise OutOfTime()
            if status != "reply" or reply != m.Barrier(name):
                raise EngineError(f"racer did not reach the {name!r} barrier: {status} {reply!r}")
        for w, _ in waiting:
            w.conn.send(m.Go())

    def _twin(self, op: TwinRecover) -> Observation:
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
            if not twin_worker.stop(self.policy.grace() if cleanup else 1, cleanup=cleanup):
                self.transport.clean_up(twin_dir)  # it did not close normally (and clean up)
        state, _ = self._query(self._worker(), op.thread)
        twin = Observation(second.outcome, self._effects(twin=True), twin_state, error=second.error)
        return Observation(main.outcome, self._effects(twin=False), state, twin, error=main.error)

    def _needs_cleanup(self) -> bool:
        """Should a worker that closes normally run the adapter's cleanup itself?  (Saves the
        short-lived worker ``Transport.clean_up`` forks, ~40-90 ms a case; ``inprocess``: no
        worker.)"""
        return self.policy.cleans_up and not self.policy.inprocess

    def close(self) -> None:
        """Close the case: its worker closes the case, cleans up and removes the case's
        directory on its way out (after answering ``Closed``); when it cannot (killed, or it
        did not answer), the cleanup and the removal are done here."""
        self.ledger.close()  # nothing reads it any more; closed before the directory goes
        remove = None if self.policy.settings.keep_cases else self.casedir
        closed = False
        if self.worker is not None:
            # While it closes, the next case's worker is forked (unless the session has one);
            # where workers are reused, this one stays for the next case instead.
            stay = self.pool.may_stay(self.worker)
            closed = self.worker.stop(self.policy.grace(), cleanup=self._needs_cleanup(),
                                      meanwhile=None if stay else self.pool.fork_spare,
                                      remove=remove, stay=stay)
            if closed and self.worker.stayed:
                self.pool.give_back(self.worker)
            elif stay:  # it did not stay (its case left something alive): fork the next one
                self.pool.fork_spare()
        if not closed:
            self.transport.clean_up(self.workdir)
            if remove is not None:
                shutil.rmtree(remove, ignore_errors=True)


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
