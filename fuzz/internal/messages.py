"""The messages between the runner (parent) and its workers, one frozen dataclass per kind.

They cross the worker's pipe pickled (``multiprocess``); operations travel as their JSON
documents, so a message holds plain data only.  Parent -> worker: the commands and ``Go``.
Worker -> parent: ``Barrier`` (a sigkill crash point, or a race's start/read barrier) and
``Reply``.
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
class RunCommand:
    """Run one executing operation (its JSON document) as op ``seq`` on ``branch``."""

    op: dict
    seq: int
    branch: str
    racer: int = 0


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


@dataclass(frozen=True)
class CloneCommand:
    dest: str


@dataclass(frozen=True)
class Close:
    """End the worker's loop (it closes the case)."""


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
