"""Run operations on a real target, in worker processes, and observe them: the entry point.

``Session(adapter, variant, root, settings)`` lives in the parent, which has imported the
framework once; ``session.case(workflow)`` makes a ``CaseRunner`` (``fuzz.cases``): one fresh
store, whose ``apply(op)`` returns the ``Observation`` of docs/contract.md §3.  The session
composes the parts that serve its cases, each in its own module:

- ``fuzz.policy.Policy``: the ``Settings`` read against the variant's ``Capabilities``
  (worker reuse, warm spares, cleanup, time limits);
- ``fuzz.transport.Transport``: the worker processes (forked from the parent, or spawned) and
  the short-lived cleanup workers;
- ``fuzz.pools.WorkerPool``: the idle workers kept between cases (spares, reused workers,
  racers), and which worker a case, a recovery or a racer takes;
- ``fuzz.cases.CaseRunner``: one case's operations, races and twins.

Why fork: the frameworks take 0.6-8 s to import; a forked child of a pre-imported parent
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

import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from adapters.protocol import Adapter, Variant
from refmodel import Workflow

from .cases import CaseRunner
from .errors import EngineError
from .internal import lifetime
from .policy import Policy
from .pools import WorkerPool
from .transport import Transport, reap

MODES = ("fork", "spawn", "inprocess")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    op_timeout: float = 30.0  # seconds an operation may take before it is ``stuck``
    keep_cases: bool = False  # keep each case's directory (stores, ledger) after it closes
    # ``fork``: workers forked from the prepared parent (the default).  ``spawn``: a fresh
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


class Session:
    """One adapter variant, prepared in this (parent) process, ready to fork workers: the
    policy, transport and pool its cases share."""

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
        self.adapter, self.variant = adapter, variant
        self._own_root = root is None  # a temp folder of ours, removed by close()
        self.root = Path(root) if root is not None else lifetime.make_root()
        self.root.mkdir(parents=True, exist_ok=True)
        self._cases = 0
        self.policy = Policy(adapter, variant, settings)
        self.transport = Transport(self.policy)
        self.pool = WorkerPool(self.policy, self.transport, self.root)

    @property
    def settings(self) -> Settings:
        return self.policy.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        # One copy, the policy's: every part of the session reads the same settings.
        self.policy.settings = settings

    @property
    def left_behind(self) -> int:
        """Workers told to stay that exited instead, their case still alive in them."""
        return self.transport.left_behind

    @property
    def last_left(self) -> str:
        """What the last of them left alive (``worker.Residue``)."""
        return self.transport.last_left

    def case(self, workflow: Workflow) -> CaseRunner:
        self._cases += 1
        self.pool.workflow = workflow  # what a spare warms up with
        casedir = self.root / f"case-{self._cases:06d}"
        return CaseRunner(self, workflow, casedir)

    def close(self) -> None:
        """Stop the idle workers (cleaning up a throwaway case one did not finish); remove the
        session's temp folder (unless ``keep_cases``, or the caller gave one)."""
        self.pool.close()
        reap(self.policy.grace())
        if self._own_root and not self.settings.keep_cases:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
