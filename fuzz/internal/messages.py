"""The messages between the runner (parent) and its workers, one frozen dataclass per kind.

They cross the worker's pipe pickled (``multiprocess``); operations travel as their JSON
documents, so a message holds plain data only.  Parent -> worker: ``Open`` (first; a spare
may get a ``WarmUp`` before it), the commands, ``Go`` and ``Close``.  Worker -> parent:
``Barrier`` (a sigkill crash point, or a race's start/read barrier), ``Reply``, ``Warmed`` and
``Closed``.
"""

from __future__ import annotations

from dataclasses import dataclass

# Reply.kind: how a command ended.
OK = "ok"  # ran; ``outcome`` ("interrupted" / "completed") or ``value`` (query, tamper, clone)
REJECTED = "rejected"  # the framework refused: ``error`` = "ExcType: first line"
CRASHED = "crashed"  # a CrashInjected reached Case.run's caller: ``error`` says where
HARNESS = "harness"  # the adapter (or engine) failed: ``error`` and ``traceback``; never a verdict

SIGKILL = "sigkill"  # Barrier.name of a sigkill crash point: the worker waits to be killed


@dataclass(frozen=True, kw_only=True)
class Open:
    """A worker's first message: its case (the workflow, the store's ``workdir``, the case's
    ledger).  It opens the case itself on the first command after it, never before."""

    workflow: object
    workdir: str
    ledger_path: str
    collect: bool = False  # a full garbage collection before each command (``Settings``)


@dataclass(frozen=True, kw_only=True)
class RunCommand:
    """Run one executing operation (its JSON document) as op ``seq`` on ``branch``."""

    op: dict
    seq: int
    branch: str
    racer: int = 0
    # The thread to read right after, unasked (``follows``): the runner's next command would
    # be that query, so one round trip less per operation.  None: no read.
    query: str | None = None


@dataclass(frozen=True, kw_only=True)
class RaceCommand:
    """One racer's resume: open, wait for ``Go``; in a ``forced`` race also wait after reading."""

    op: dict
    seq: int
    branch: str
    racer: int
    forced: bool


@dataclass(frozen=True)
class QueryCommand:
    thread: str


@dataclass(frozen=True)
class TamperCommand:
    thread: str
    how: str
    part: str | None = None  # a forged edit of one stored part (``Tamper.part``)
    query: str | None = None  # as ``RunCommand.query``


@dataclass(frozen=True)
class CloneCommand:
    dest: str


@dataclass(frozen=True)
class Close:
    """End the worker's loop (it closes the case, then answers ``Closed``).  ``cleanup``: also
    run the adapter's ``cleanup`` for the worker's workdir after closing the case, in this
    worker, which saves the runner a short-lived one; ``Closed`` says that it succeeded."""

    cleanup: bool = False
    # A directory to remove after ``Closed`` is sent (the case's own, which the runner no
    # longer uses): the removal is the exiting worker's, not on the runner's way to its next case.
    remove: str | None = None
    # Stay for another case: after ``Closed`` (and the removal), wait for the next ``Open``
    # instead of exiting (``Session`` reuses a worker whose adapter allows it).
    stay: bool = False


@dataclass(frozen=True)
class Closed:
    """The worker closed its case (and cleaned up, when asked) without an error; it exits
    right after (or, told to ``stay``, waits for its next ``Open``): nothing of the case is in
    use any more.  ``left``: told to stay, the worker found something of the case still alive
    in its process (a thread, an open file; ``worker.Residue``), so it exits instead: what
    it found, for the runner's count."""

    left: str = ""


@dataclass(frozen=True, kw_only=True)
class WarmUp:
    """A spare's throwaway case, run while it waits for its real one (``WorkerPool.fork_spare``,
    where workers are reused): open a case on ``workdir`` (a directory of the session's own,
    never a case's store), run ``ops`` (JSON documents) reading each one's thread after it,
    close and clean the case up, remove ``remove``, answer ``Warmed``.  What a process pays on
    its first case (a framework's lazy imports and first-use caches, the first connection) is
    then paid while the spare waits, not after a SIGKILL on the recovery's way.  ``cleanup``:
    run the adapter's cleanup after the close, as a real case's worker would
    (``Policy.cleans_up``)."""

    workflow: object
    workdir: str
    ledger_path: str
    ops: tuple
    remove: str
    cleanup: bool = True


@dataclass(frozen=True)
class Warmed:
    """The spare ran its ``WarmUp``.  ``left``: what the throwaway case left alive in the
    process (``worker.Residue``), or how it failed; the runner then lets it go unused.
    ``finished``: it closed, cleaned up and removed its directory (else the runner does)."""

    left: str = ""
    finished: bool = True


@dataclass(frozen=True)
class Barrier:
    """The worker stopped at barrier ``name`` ("sigkill", "opened", "read") and waits."""

    name: str


@dataclass(frozen=True)
class Go:
    """Release a worker waiting at a race barrier."""


@dataclass(frozen=True, kw_only=True)
class Reply:
    """How a command ended (``kind``, see above), with what the worker saw.

    ``fired``: effects the worker counted (cross-checked against the ledger); ``output``: the
    last few KB the framework printed (fds 1 and 2, logging included) during the command;
    ``traceback``: the adapter's traceback of a ``harness`` reply."""

    kind: str
    outcome: str | None = None
    value: object = None
    error: str | None = None
    fired: int = 0
    output: str = ""
    traceback: str = ""


@dataclass(frozen=True)
class RacerOutcome:
    """One racer's end, as the runner reads it (racers are numbered from 1)."""

    racer: int
    outcome: str
    error: str | None = None


def follows(command, reply: Reply) -> bool:
    """Does the worker read ``command.query`` right after answering ``command`` with ``reply``,
    and send that query's ``Reply`` as a second message?  Exactly when the runner goes on to
    read the state: after a run that did not fail the harness, after a tamper that succeeded
    (the runner raises ``HarnessFailure`` on the others).  A worker that dies or hangs in that
    query is seen as it was when the query was a command of its own: on the query, not the op."""
    if getattr(command, "query", None) is None:
        return False
    if isinstance(command, RunCommand):
        return reply.kind != HARNESS
    return isinstance(command, TamperCommand) and reply.kind == OK
