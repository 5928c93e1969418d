"""The idle workers a session keeps between cases: spares, reused workers, racers.

A *spare* is a worker forked while the parent waits for another worker (an op running, a case
closing): the next case, or the recovery after a SIGKILL, takes it instead of forking on its
way.  A worker gets its case (``Open``) when it is taken and opens the store only on its first
command, so a spare taken after a kill has never read the store before the kill (it is sent
only once the killed worker is dead and reaped).

Where the variant allows it (``Tuning.reuse_worker``), a worker that closed its case
normally stays, as the spare, for the next case (at most ``CASES_PER_WORKER`` cases): a fork,
the copy-on-write faults that follow it, and an exit less per case.  A worker that finds a
thread or an open file of its case still alive after closing it exits instead
(``worker.Residue``, counted in ``Transport.left_behind``).  There a spare first runs a
throwaway case of its own (``warm_up_ops``, in ``warm-NNNNNN/``), so that the recovery after a
kill runs in a process that has run a case before, as a reused worker has; a session that has
run a SIGKILL crash point keeps such a spare ready beside the worker that serves the next case
(``WorkerPool._keeps``).  The racers of a finished race stay too, for the next race, kept apart
from the spares.
"""

from __future__ import annotations

import shutil
import weakref
from pathlib import Path

from refmodel import Resume, Start, Workflow

from .policy import Policy
from .transport import ProcessWorker, Transport

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


class WorkerPool:
    """The session's idle workers (``fork`` and ``spawn`` modes): who takes which, who stays."""

    def __init__(self, policy: Policy, transport: Transport, root: Path):
        self.policy, self.transport, self.root = policy, transport, root
        # A worker forked ahead of its case (``fork`` mode only), while the parent waits for
        # another worker anyway: the next case, or the recovery after a SIGKILL, takes it
        # instead of forking on its critical path.  A list, so the finalizer holds it, not us.
        self.spares: list[ProcessWorker] = []
        weakref.finalize(self, drop_idle, self.spares)
        # Racers that stayed after their race, for the next one (``end_race``): reused workers
        # too, kept apart from the spares.
        self.racers: list[ProcessWorker] = []
        weakref.finalize(self, drop_idle, self.racers)
        self.workflow: Workflow | None = None  # the last case's: what a spare warms up with
        self._warm_ups = 0
        # A SIGKILL crash point ran in this session: more will (a campaign draws them from
        # the same strategy), so a warm spare is kept ready for them (``_keeps``).
        self.killing = False

    def worker(self, workflow: Workflow, workdir: Path, ledger_path: Path) -> ProcessWorker:
        """A worker for the case on ``workdir``: an idle one if there is one (one ready first:
        done warming up, else the oldest), else a new one."""
        while self.spares:
            ready = [w for w in self.spares if w.ready()]
            spare = ready[-1] if ready else self.spares[0]
            self.spares.remove(spare)
            if spare.alive() and spare.warmed(self.policy.grace()):
                try:
                    spare.adopt(workflow, workdir, ledger_path)
                    return spare
                except OSError:
                    pass
            self._let_go(spare)  # it died idle, or its warm-up failed: a new one
        return self.transport.worker(workflow, workdir, ledger_path)

    def fork_spare(self) -> None:
        """Fork a spare worker, unless the session has an idle one (``fork`` mode only):
        called while the parent waits for a worker anyway (its op, its close), so the fork is
        off the case's critical path.  A spare is only a head start: a fork that fails here is
        not an error (the next worker is forked when it is needed, and fails there if it must).
        Where spares warm up (``Policy.warm``), it is sent its throwaway case at once."""
        if self.policy.settings.mode != "fork" or self.idle():
            return
        try:
            spare = self.transport.worker()
        except OSError:
            return
        self.spares.append(spare)
        if self.policy.warm and self.workflow is not None:
            self._warm_ups += 1
            spare.warm_up(self.workflow, warm_up_ops(self.workflow),
                          self.root / f"warm-{self._warm_ups:06d}")

    def wants_spare(self) -> bool:
        """Should the op about to run fork a spare meanwhile, though its worker will serve the
        next case (``reuse``) and it carries no SIGKILL crash point?  Only when the spare the
        last kill took is to be replaced ahead of the next kill (``_keeps``)."""
        return self.policy.warm and self.killing and not self.idle()

    def may_stay(self, worker: ProcessWorker) -> bool:
        """May ``worker``, closing its case, stay for another (``reuse``, ``CASES_PER_WORKER``)?"""
        return self.policy.reuse and worker.cases < CASES_PER_WORKER

    def give_back(self, worker: ProcessWorker) -> None:
        """A worker that closed its case and stayed (``reuse``) waits for the next case, unless
        the session has all the idle workers it keeps (a spare forked for a sigkill crash point
        that did not fire: fresher); then it exits."""
        if len(self.idle()) >= self._keeps():
            worker.stop(1.0)  # no warm-up owed: it served a case since
            return
        self.spares.append(worker)

    def racer(self, workflow: Workflow, workdir: Path, ledger_path: Path) -> ProcessWorker:
        """A worker for one racer of a race on ``workdir``: one that served a racer of an
        earlier race and stayed (``end_race``), else a new one.  Racers are kept apart from the
        spares: those are the next case's and the next recovery's head start, warmed up for it."""
        while self.racers:
            racer = self.racers.pop()
            if racer.alive():
                try:
                    racer.adopt(workflow, workdir, ledger_path)
                    return racer
                except OSError:
                    pass
            racer.kill()
        return self.transport.worker(workflow, workdir, ledger_path)

    def end_race(self, racer: ProcessWorker, finished: bool) -> None:
        """Close a racer's case.  Where workers are reused (``reuse``), a racer of a race that
        ``finished`` (ran to its end, not cut short by an error or the deadline) stays for the
        next race, up to the variant's ``max_racers``, if it closes its case normally with
        nothing left alive: a race then forks no process once as many racers have run
        (measured: half of a reference campaign's forks were racers; each fork, its first
        writes to the pages it shares with its parent, and its exit cost about 10 ms of CPU,
        ``perf``).  Otherwise it closes and exits, off the case's way (``transport.reap``)."""
        stay = finished and self.may_stay(racer) and len(self.racers) < max(
            2, getattr(self.policy.capabilities, "max_racers", 2))
        if racer.stop(1.0, stay=stay) and racer.stayed:
            self.racers.append(racer)

    def idle(self) -> list:
        """The live idle workers (spares, and a reused worker waiting for the next case); the
        dead ones are let go."""
        for worker in [w for w in self.spares if not w.alive()]:
            self.spares.remove(worker)
            self._let_go(worker)
        return self.spares

    def close(self) -> None:
        """Stop the idle workers, cleaning up a throwaway case one did not finish."""
        for casedir in drop_idle(self.spares):
            self._clean_warm_up(casedir)
        drop_idle(self.racers)  # no throwaway case: nothing to clean up

    def _let_go(self, worker: ProcessWorker) -> None:
        """Kill an idle worker of no use; a throwaway case it had not finished is cleaned up
        here (a database of the adapter's, the directory)."""
        worker.kill()
        if worker.warm_dir is not None:
            self._clean_warm_up(worker.warm_dir)

    def _clean_warm_up(self, casedir: Path) -> None:
        self.transport.clean_up(casedir / "store")
        shutil.rmtree(casedir, ignore_errors=True)

    def _keeps(self) -> int:
        """Idle workers the session keeps between cases: one, the next case's head start; two
        where spares warm up and this session has run a SIGKILL crash point (``killing``): the
        reused worker for the next case, and a spare warmed up ahead for the next kill.  A
        spare forked only when the killing op starts is still warming up when an early crash
        point fires, and the recovery would wait for the rest of its throwaway case."""
        return 2 if self.policy.warm and self.killing else 1


def drop_idle(workers: list) -> list:
    """Stop the session's idle workers: the directories of the throwaway cases that did not
    finish (``WarmUp``), which the caller cleans up."""
    unfinished = []
    while workers:
        worker = workers.pop()
        worker.stop(1.0)
        if worker.warm_dir is not None:
            unfinished.append(worker.warm_dir)
    return unfinished
