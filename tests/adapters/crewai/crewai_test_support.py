"""Helpers shared by the CrewAI adapter tests (a uniquely named module: tests/ has no packages).

CrewAI runs sync flow methods in worker threads (``asyncio.to_thread``), so the effects reach the
ledger from a thread other than the one that opened it; the engine's Ledger allows that.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
import threading
from pathlib import Path

from adapters.protocol import Workflow

import pytest

HERE = Path(__file__).parent
PYTHON = sys.executable


def thread_safe_ledger(path: Path):
    from fuzz.internal.ledger import Ledger

    return Ledger(path)


def variant_named(adapter, name):
    return next(v for v in adapter.variants() if v.name == name)


VARIANTS = (
    "persist-sqlite",
    "checkpoint-json-from_checkpoint",
    "checkpoint-json-kickoff",
    "checkpoint-sqlite-from_checkpoint",
    "checkpoint-sqlite-kickoff",
)


class Harness:
    """One case, driven in process; ``do(op)`` returns ``(outcome or exception, ledger rows)``."""

    def __init__(self, adapter, variant, workflow: Workflow, workdir: Path, ledger_path: Path):
        self.adapter, self.variant, self.workflow, self.workdir = adapter, variant, workflow, workdir
        self.failed_writes = len(FAILED_WRITES)  # CrewAI's failed checkpoint writes until now
        self.ledger = thread_safe_ledger(ledger_path)
        self.case = adapter.open(variant, workflow, workdir)
        self.seq = 0

    def do(self, op):
        from fuzz.internal.hooks import EngineHooks

        self.seq += 1
        branch = getattr(op, "new_thread", "") or op.thread
        hooks = EngineHooks(op, seq=self.seq, branch=branch, ledger=self.ledger)
        # The call runs in a helper thread and this one only waits for it, with a deadline.  The
        # earlier watchdog, a SIGALRM sent to the main thread blocked inside CrewAI, did not end
        # a hung call in CI (a run sat 75 minutes in test_crewai_stale with it armed); a likely
        # reason is that the exception it raised had to unwind through asyncio.run's cleanup,
        # which joins the very threads that hung.  Waiting from outside needs no unwinding.
        box: dict = {}

        def call():
            try:
                box["outcome"] = self.case.run(op, hooks)
                hooks.run_returned()
            except BaseException as exc:  # noqa: BLE001 - the tests look at what was raised
                box["outcome"] = exc

        worker = threading.Thread(target=call, name=f"harness-op-{self.seq}", daemon=True)
        worker.start()
        worker.join(HANG_SECONDS)
        if worker.is_alive():
            ABANDONED.append(worker)
            raise FrameworkHang(f"the call did not return within {HANG_SECONDS} s (CrewAI's "
                                "checkpoint writers hung)")
        outcome = box["outcome"]
        if isinstance(outcome, (KeyboardInterrupt, SystemExit)):
            raise outcome
        skip_if_framework_race(outcome)
        return outcome, self.ledger.rows(self.seq)


def injected(exc) -> bool:
    from fuzz.testing import injected as engine_injected

    return engine_injected(exc)


FRAMEWORK_RACE = "PanicException"
ATTEMPTS = 3


class FrameworkRace(Exception):
    """CrewAI's checkpoint writer serialises the event record on a pool thread while the flow adds
    events; pydantic-core then panics ("dictionary changed size during iteration") and the
    ``PanicException`` (a BaseException) escapes the writer's ``except Exception`` into
    ``kickoff`` (about 1 run in 25 under load).  That is the framework's behaviour, which the
    fuzzer reports; a machinery test hit by it is run again on a fresh case (``retry_race``)."""


class FrameworkHang(FrameworkRace):
    """A call that never returned.  Seen in CI runs of the crewai environment
    (``checkpoint-sqlite-kickoff``, a fork's ``Flow.resume``; ``checkpoint-sqlite-from_checkpoint``
    in ``test_crewai_stale``): two of the event bus's pool threads sat in
    ``SqliteProvider.checkpoint`` closing their connections to the same checkpoint file, and
    ``resume``'s event loop waited for ever (py-spy dump in docs/frameworks/crewai.md).  The
    engine's workers turn that into a ``stuck`` observation after the op timeout; these tests
    drive the case in process, so ``Harness.do`` gives up on the call after ``HANG_SECONDS``
    (leaving its thread behind, in ``ABANDONED``) and the test runs again on a fresh case, like
    a panic of the writer."""


HANG_SECONDS = 90  # an op here takes well under 5 s; CI under load, under 20

# Threads of calls given up on.  They may hold CrewAI's pool threads for ever, and the
# interpreter's exit joins those (concurrent.futures, CrewAI's atexit flush), so the conftest ends
# a session that left any with os._exit, after pytest has reported.
ABANDONED: list[threading.Thread] = []


# What CrewAI's checkpoint listener logged of a checkpoint it failed to write (it logs a warning
# and goes on, the checkpoint lost): in one CI run, ``sqlite3.OperationalError: database is
# locked`` from ``SqliteProvider.checkpoint``'s ``PRAGMA journal_mode=WAL`` (likely the event
# bus's pool threads writing one checkpoint file at once, as in ``FrameworkHang``).
FAILED_WRITES: list[str] = []


class _FailedWrites(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        FAILED_WRITES.append(text)


# By name: this imports nothing of CrewAI's.
logging.getLogger("crewai.state.checkpoint_listener").addHandler(_FailedWrites(logging.WARNING))


def missing_pause_checkpoint(h: Harness, thread: str = "t0", gate: int = 2):
    """Raise for a case that recorded no checkpoint at ``gate``'s pause when ``kickoff``
    returned.  CrewAI writes checkpoints on its event bus's pool threads, and the adapter reads
    what had committed when the call returned (docs/frameworks/crewai.md, "Our choice"). Two
    ways that is the framework's timing, which the fuzzer observes and reports, not this
    machinery, and the test runs again on a fresh case (``FrameworkRace``): the pause's write
    landed later (waiting for the bus, its public ``flush``, makes it appear), or CrewAI logged
    that a checkpoint write of this case failed.  Otherwise fail, saying what the thread's
    location holds."""
    from adapters.crewai import store
    from crewai.events.event_bus import crewai_event_bus

    crewai_event_bus.flush()
    failed = FAILED_WRITES[h.failed_writes:]
    if failed:
        raise FrameworkRace(f"CrewAI failed to write a checkpoint: {failed[0][:300]}")
    info = h.case.side.get(thread) or {}
    paused = []
    where = info.get("location")  # none: the thread never started
    for loc in store.list_checkpoints(h.case.workdir, where) if where else ():
        try:
            paused.append(store.paused_gate(store.read_checkpoint(h.case.workdir, loc)))
        except Exception as exc:  # noqa: BLE001 - listed below as unreadable
            paused.append(f"unreadable: {type(exc).__name__}")
    if gate in paused:
        raise FrameworkRace("the pause's checkpoint was written after kickoff returned")
    raise AssertionError(f"no checkpoint at gate {gate} recorded for {thread} ({info!r}); "
                         f"after flush() its location holds checkpoints paused at {paused!r}")


def skip_if_framework_race(outcome) -> None:
    text = outcome if isinstance(outcome, str) else type(outcome).__name__
    if FRAMEWORK_RACE in text:
        raise FrameworkRace(text[:300])


def retry_race(test):
    """Run ``test`` again (fresh cases) when CrewAI's checkpoint writer raced; fail after
    ``ATTEMPTS`` tries.  Never a skip: adapter environments turn skips into failures."""

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return test(*args, **kwargs)
            except FrameworkRace:
                if attempt == ATTEMPTS:
                    raise
        return None

    return wrapper


def require_crewai() -> None:
    """Skip the calling test module when CrewAI is not installed (counted, and a failure in the
    adapter's tox environment).  ``find_spec``, not ``importorskip``: importing CrewAI before the
    adapter's environment is applied lets it write into the real home and phone home."""
    if importlib.util.find_spec("crewai") is None:
        pytest.skip("needs crewai (pip install -c constraints/crewai.txt crewai pysqlite3)",
                    allow_module_level=True)
