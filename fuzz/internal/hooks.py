"""The engine's implementation of ``adapters.protocol.Hooks``: crash points, effects, races.

A crash point fires at most once per operation.  ``exception`` raises ``CrashInjected`` inside the
task.  ``sigkill`` calls ``barrier``, which tells the parent over the worker's pipe and then kills
the worker with SIGKILL itself, at once (``worker.sigkill_barrier``): no thread of the process
runs past the point.  No sleep, no timing window.
"""

from __future__ import annotations

import os
import signal

from adapters.protocol import CrashInjected, Hooks, Op


class EngineHooks(Hooks):
    def __init__(
        self,
        op: Op,
        *,
        seq: int,
        branch: str,
        ledger,
        barrier=None,
        racer: int = 0,
        race_ready=None,
    ):
        self.crash = getattr(op, "crash", None)
        self.bad = getattr(op, "bad_output", None)
        self.seq, self.branch, self.ledger, self.racer = seq, branch, ledger, racer
        self.barrier = barrier
        self._race_ready = race_ready
        self.fired = 0  # the in-process counter, cross-checked against the ledger
        self._last_effect: int | None = None
        self._crashed = False

    # -- Hooks -------------------------------------------------------------------------------
    def task_begins(self, task: int) -> None:
        if self._last_effect is not None and self._last_effect != task:
            done, self._last_effect = self._last_effect, None
            self._point(done, "after_commit")
        self._point(task, "before_effect")

    def effect(self, task: int, value: str | None) -> None:
        self.ledger.fire(self.seq, self.branch, task, value, self.racer)
        self.fired += 1
        self._last_effect = task
        self._point(task, "in_flight")

    def wants_bad_output(self, task: int) -> bool:
        return self.bad == task

    def race_ready(self) -> None:
        if self._race_ready is not None:
            ready, self._race_ready = self._race_ready, None  # once per racer
            ready()

    # -- engine side -------------------------------------------------------------------------
    def run_returned(self) -> None:
        """The run returned: the last task completed and was reported (``after_commit``)."""
        if self._last_effect is not None:
            done, self._last_effect = self._last_effect, None
            self._point(done, "after_commit")

    def _point(self, task: int, phase: str) -> None:
        crash = self.crash
        if self._crashed or crash is None or (crash.task, crash.phase) != (task, phase):
            return
        self._crashed = True
        if crash.kind == "exception":
            raise CrashInjected(f"injected crash at task {task}, {phase}")
        if self.barrier is not None:
            self.barrier()  # never returns: it kills this process
        # No parent is watching (an in-process test), or it went away: die as SIGKILL would.
        os.kill(os.getpid(), signal.SIGKILL)
