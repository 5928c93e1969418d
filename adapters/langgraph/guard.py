"""A consume-once guard for LangGraph resumes (ours, not LangGraph's): the variants
``sqlite-graph-sync-cpid-update-guarded`` and ``sqlite-graph-sync-head-update-guarded``, and a
mitigation users can copy.

Standalone on purpose: the standard library and LangGraph's public API only (``graph.invoke``,
``graph.get_state``, ``graph.update_state``, ``StateSnapshot.tasks``, ``Interrupt.id``,
``Command``), so that this file can be copied into an application as it is.

What it fixes
-------------
LangGraph (1.2.24, every saver) lets one interrupt be consumed more than once: k processes that
resume the same pending interrupt all run the gate's node (``LostUpdate``), a resume through a
handle held from before (a ``checkpoint_id`` the thread has moved past) runs it again
(``DoubleConsume``, documented there as time travel), and after a node failed *after* reading
its answer, the next ``Command(resume=b)`` is silently handed the earlier answer ``a`` again
(the task's stored ``__resume__`` write wins over the new one; ``DoubleConsume``).

How (the REMIT shape: claim, then consume)
-----------------------------------------
``ConsumeOnceGraph(graph, db_path)`` wraps a compiled graph; use it wherever the application
answers interrupts.  Everything except ``invoke(Command(resume=...))`` passes through.  A resume:

1. reads what it would answer: ``graph.get_state(config)``, the interrupts of the checkpoint the
   call addresses (at the thread head: the pending ones; at an addressed ``checkpoint_id``: every
   interrupt raised there, answered or not), or the ids a resume map names;
   With nothing to answer there, the resume is refused (``InterruptNotPending``): LangGraph
   would run whatever the checkpoint has next, and a racer that arrives after the winner
   consumed the interrupt would then run the winner's remaining tasks a second time, alongside
   it (found by the first campaign on the ``-head-`` variant);
2. claims each interrupt id in one SQLite transaction (``BEGIN IMMEDIATE``) on a ``claims`` table
   in the saver's own file, ``UNIQUE(thread_id, interrupt_id)``.  A second claimant is refused
   loudly (``InterruptBeingConsumed`` while the holder's process lives, ``InterruptAlreadyConsumed``
   once the interrupt was consumed) before anything runs, so the gate's node never starts;
3. invokes, then settles the claim: ``consumed`` when the gate task finished, released when the
   run ended without finishing it (an exception), left to its dead owner after a SIGKILL.

"Consumed" is LangGraph's own record (``StateSnapshot.tasks[i].result`` is set once the task that
raised the interrupt finished), so an interrupt consumed without the guard (a ``recover``,
``invoke(None)``, finishing an answer that was stored) still refuses later resumes.  A claim
whose owner died before the gate finished is taken over: the contract says a crash before the
gate's effect leaves the interrupt unconsumed, so the next resume must consume it.  Liveness is
an ``flock`` held on ``<db>.claims/<owner>.lock`` for the whole run (released by the kernel when
the process dies, so no timeout guesses); the SQLite file is single-host anyway.

A task that failed after it read an answer keeps that answer: LangGraph would hand it back
instead of the new one.  The guard then answers on a fresh copy of the checkpoint
(``graph.update_state(C, None)``, the same fork LangGraph documents for re-asking an interrupt),
and records the claim there, so the new answer is the one consumed, once.

Forks are bound to their own key: LangGraph derives an interrupt id from the checkpoint and the
task, so a fork (``update_state(C, None)``, then the gate asks again) asks with a new id and
claims under it; forking never collides with the original's claim.

Why a wrapper around ``invoke`` and not a ``BaseCheckpointSaver``
---------------------------------------------------------------
A saver sees a resume only as the ``put_writes`` of the ``__resume__`` write, which LangGraph
submits to a background executor and does not wait for: the gate's node runs (and fires its
effect) before that write, or a refusal raised in it, is done (measured at the pinned release:
a SqliteSaver subclass refusing that write let the effect fire 0.5 s before its refusal
surfaced).  A saver cannot refuse
*before* the gate runs, so the claim has to happen where the caller answers.

Limits
------
- A plain ``Command(resume=v)`` at the thread head says nothing about *which* question it
  answers: a caller that arrives after the winner consumed the interrupt and the thread asked
  its next question answers that next question (found by the first campaign on the ``-head-``
  variant: a late racer's answer to gate 1 consumed by gate 2).  No guard can tell that caller
  from a later resume of the head.  Name the interrupt (``Command(resume={interrupt.id: v})``)
  or address the checkpoint it was raised at (``config["configurable"]["checkpoint_id"]``, the
  ``-cpid-`` variant) to make it a refusal too.
- One question per node is claimed exactly; a node asking several questions is claimed per
  question as LangGraph ids them (``interrupt()`` index), the fresh-checkpoint remedy re-asks
  them all.
- Single host (``flock`` and SQLite file locks); a server store needs a lease instead.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
import uuid
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

BUSY_TIMEOUT = 60.0  # seconds a claimant waits for SQLite's write lock

SCHEMA = """
CREATE TABLE IF NOT EXISTS claims (
    thread_id     TEXT NOT NULL,
    interrupt_id  TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,  -- where the claimed answer is being consumed
    task_name     TEXT NOT NULL,
    owner         TEXT NOT NULL,  -- <pid>-<random>: <db>.claims/<owner>.lock is flocked while it runs
    state         TEXT NOT NULL CHECK (state IN ('claimed', 'consumed')),
    attempts      INTEGER NOT NULL DEFAULT 1,
    updated       REAL NOT NULL,
    UNIQUE (thread_id, interrupt_id)
)
"""


class ConsumeOnceError(RuntimeError):
    """The guard refused a resume: its interrupt is, or is being, consumed by another call."""


class InterruptBeingConsumed(ConsumeOnceError):
    """Another live process holds the claim on this interrupt (a concurrent resume)."""


class InterruptAlreadyConsumed(ConsumeOnceError):
    """The interrupt was consumed (its task finished): this resume would consume it again."""


class InterruptNotPending(ConsumeOnceError):
    """Nothing to answer where the call points: LangGraph would run whatever comes next there
    (a second runner of tasks another process is running right now), so the guard refuses."""


@dataclass(frozen=True)
class Target:
    """One interrupt a resume would answer, where it was raised."""

    thread_id: str
    interrupt_id: str
    checkpoint_id: str
    task_id: str
    task_name: str
    failed: bool  # the task recorded an error and did not finish: it may keep an old answer


class ConsumeOnceGraph:
    """``graph`` (a compiled LangGraph graph) whose resumes consume each interrupt once.

    ``db_path``: the SQLite file of the graph's ``SqliteSaver`` (the claims live next to the
    checkpoints; any file every process of the application shares would do).  ``refusal``:
    an optional exception class to raise instead of the guard's own (the guard's then becomes
    its ``__cause__``), for callers that map refusals to their own error type.
    """

    def __init__(self, graph, db_path, *, refusal: type[BaseException] | None = None):
        self.graph = graph
        self.db_path = Path(db_path)
        self.lockdir = Path(f"{db_path}.claims")
        self.refusal = refusal

    def __getattr__(self, name):  # get_state, update_state, stream, ...: LangGraph's own
        return getattr(self.graph, name)

    # -- the guarded call -----------------------------------------------------------------------
    def invoke(self, input, config=None, **kwargs):
        from langgraph.types import Command

        if not isinstance(input, Command) or input.resume is None:
            return self.graph.invoke(input, config, **kwargs)
        named = _named(input.resume)
        targets = self._targets(config, named)
        with self._owner() as owner:
            self._claim(targets, named, owner, config)
            if not targets:
                self._refuse(InterruptNotPending,
                             "nothing to resume: no interrupt "
                             f"{'of ' + ', '.join(sorted(named)) + ' ' if named else ''}is "
                             "pending at the checkpoint this call addresses")
            try:
                if any(t.failed for t in targets):
                    input, config = self._fresh(input, config, targets, owner, kwargs)
                return self.graph.invoke(input, config, **kwargs)
            finally:
                self._settle(targets, owner)

    # -- what a resume answers ------------------------------------------------------------------
    def _targets(self, config, named) -> list[Target]:
        snapshot = self.graph.get_state(config)
        conf = (snapshot.config or {}).get("configurable", {})
        checkpoint_id = conf.get("checkpoint_id")
        if checkpoint_id is None:
            return []
        thread_id = str(conf.get("thread_id", config["configurable"]["thread_id"]))
        return [Target(thread_id, i.id, checkpoint_id, task.id, task.name,
                       failed=task.error is not None and task.result is None)
                for task in snapshot.tasks for i in task.interrupts
                if named is None or i.id in named]

    # -- claims ---------------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.db_path), timeout=BUSY_TIMEOUT, isolation_level=None,
                               check_same_thread=False)
        conn.execute(SCHEMA)
        return conn

    def _claim(self, targets, named, owner: str, config) -> None:
        thread_id = str(config["configurable"]["thread_id"])
        keys = {(t.thread_id, t.interrupt_id): t for t in targets}
        for i in sorted(named or ()):  # a map naming an id not raised here: its claim, if any
            keys.setdefault((thread_id, i), None)
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for (thread, interrupt_id), target in sorted(keys.items()):
                    row = conn.execute(
                        "SELECT checkpoint_id, task_name, owner, state FROM claims "
                        "WHERE thread_id = ? AND interrupt_id = ?", (thread, interrupt_id)
                    ).fetchone()
                    if target is None and row is None:
                        continue
                    if self._consumed(thread, target, row):
                        self._refuse(InterruptAlreadyConsumed,
                                     f"interrupt {interrupt_id} of thread {thread} was already "
                                     "consumed: this resume would consume it again")
                    if row is not None and _alive(self.lockdir, row[2]):
                        self._refuse(InterruptBeingConsumed,
                                     f"interrupt {interrupt_id} of thread {thread} is being "
                                     f"consumed by another live process (claim {row[2]})")
                    if target is None:
                        continue  # an abandoned claim on an id not raised here: nothing to do
                    if row is None:
                        conn.execute(
                            "INSERT INTO claims (thread_id, interrupt_id, checkpoint_id, "
                            "task_name, owner, state, updated) VALUES (?, ?, ?, ?, ?, "
                            "'claimed', ?)",
                            (thread, interrupt_id, target.checkpoint_id, target.task_name,
                             owner, time.time()))
                    else:  # its owner died before the gate finished: the interrupt is unconsumed
                        conn.execute(
                            "UPDATE claims SET checkpoint_id = ?, task_name = ?, owner = ?, "
                            "state = 'claimed', attempts = attempts + 1, updated = ? "
                            "WHERE thread_id = ? AND interrupt_id = ?",
                            (target.checkpoint_id, target.task_name, owner, time.time(),
                             thread, interrupt_id))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _consumed(self, thread_id: str, target: Target | None, row) -> bool:
        """Consumed: the claim says so, or LangGraph's record shows the gate task finished at
        the checkpoint where it asked, or where the claim was being consumed."""
        if row is not None and row[3] == "consumed":
            return True
        if target is not None and self._finished(thread_id, target.checkpoint_id,
                                                 task_id=target.task_id):
            return True
        return row is not None and (target is None or row[0] != target.checkpoint_id) \
            and self._finished(thread_id, row[0], name=row[1])

    def _finished(self, thread_id: str, checkpoint_id: str, *, task_id=None, name=None) -> bool:
        snapshot = self.graph.get_state({"configurable": {
            "thread_id": thread_id, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}})
        return any(task.result is not None and (task.id == task_id or task.name == name)
                   for task in snapshot.tasks)

    def _settle(self, targets, owner: str) -> None:
        """After the run: ``consumed`` if the gate finished, released if it did not.  A state
        LangGraph cannot read back leaves the claim to its (then dead) owner: the next claimant
        looks again."""
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for t in targets:
                    row = conn.execute("SELECT checkpoint_id, task_name FROM claims WHERE "
                                       "thread_id = ? AND interrupt_id = ? AND owner = ?",
                                       (t.thread_id, t.interrupt_id, owner)).fetchone()
                    if row is None:
                        continue
                    try:
                        finished = self._finished(t.thread_id, row[0], task_id=t.task_id,
                                                  name=row[1])
                    except Exception:  # noqa: BLE001 - unreadable: leave the claim as it is
                        continue
                    if finished:
                        conn.execute("UPDATE claims SET state = 'consumed', updated = ? WHERE "
                                     "thread_id = ? AND interrupt_id = ?",
                                     (time.time(), t.thread_id, t.interrupt_id))
                    else:  # the run ended without finishing the gate: nothing was consumed
                        conn.execute("DELETE FROM claims WHERE thread_id = ? AND "
                                     "interrupt_id = ?", (t.thread_id, t.interrupt_id))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    # -- a failed task keeps its old answer: consume on a fresh copy of its checkpoint ------------
    def _fresh(self, input, config, targets, owner: str, kwargs):
        from langgraph.types import Command

        at = targets[0].checkpoint_id
        base = dict(config["configurable"])
        forked = self.graph.update_state(
            {"configurable": {**base, "checkpoint_ns": "", "checkpoint_id": at}}, None)
        run = {**config, "configurable": {**base, **forked["configurable"]}}
        fresh = forked["configurable"]["checkpoint_id"]
        with closing(self._connect()) as conn:
            conn.execute("BEGIN IMMEDIATE")
            for t in targets:
                conn.execute("UPDATE claims SET checkpoint_id = ?, updated = ? WHERE "
                             "thread_id = ? AND interrupt_id = ? AND owner = ?",
                             (fresh, time.time(), t.thread_id, t.interrupt_id, owner))
            conn.execute("COMMIT")
        named = _named(input.resume)
        if named is None:
            return input, run
        # A map names the old ids; the copy asks again under new ones: ask, then answer by task.
        self.graph.invoke(None, run, **kwargs)
        by_task = {t.task_name: input.resume[t.interrupt_id] for t in targets}
        asked = self.graph.get_state(run)
        resume = {i.id: by_task[task.name] for task in asked.tasks for i in task.interrupts
                  if task.name in by_task}
        return Command(resume=resume), run

    # -- owners and refusals ---------------------------------------------------------------------
    @contextmanager
    def _owner(self):
        """A claim owner for one call: a lock file flocked until the call returns (or the
        process dies, when the kernel releases it)."""
        self.lockdir.mkdir(parents=True, exist_ok=True)
        owner = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        path = self.lockdir / f"{owner}.lock"
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield owner
        finally:
            try:
                os.unlink(path)
            finally:
                os.close(fd)

    def _refuse(self, kind: type[ConsumeOnceError], message: str):
        error = kind(message)
        if self.refusal is None:
            raise error
        raise self.refusal(f"{kind.__name__}: {message}") from error


def _named(resume):
    """The interrupt ids a resume map names (``Command(resume={id: value})``), else None."""
    if isinstance(resume, dict) and resume and all(
            isinstance(k, str) and len(k) == 32 and all(c in "0123456789abcdef" for c in k)
            for k in resume):
        return set(resume)
    return None


def _alive(lockdir: Path, owner: str) -> bool:
    """Whether the process that claimed as ``owner`` is still running its call."""
    try:
        fd = os.open(lockdir / f"{owner}.lock", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
