"""What every LlamaIndex case shares: the event loop a case keeps, how a failed run is
reported, and ``SqliteCase``, the server's and DBOS's common ground (``open_case`` in
``case.py`` picks the case class)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.protocol import Case, CrashInjected, Refused, Resume, StaleResume, Workflow

from .store import connect, copy_side_files, copy_sqlite
from .workflow import SLOT, operation


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left on a case's loop and close it (runs that were paused stay paused in
    the store: the framework persisted them before reporting the pause)."""
    if loop.is_closed():
        return
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


class RecordedFailure(Refused):
    """The framework reported a failure recorded by an earlier operation (for instance DBOS
    replaying a step's stored exception): a refusal of this operation, not a crash in it.  A
    ``Refused``, so the engine records it as the framework's (``rejected`` with these words),
    never as a tool error: the framework raised it, the adapter only strips the earlier
    operation's injected crash from its chain."""


def crash_in_chain(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, CrashInjected):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def failure(exc: BaseException, slot) -> BaseException:
    """What a case raises for a failed run: the crash this operation injected if one fired
    (so the engine sees ``crashed``); otherwise, when the framework hands back an *earlier*
    operation's ``CrashInjected``, a ``RecordedFailure`` carrying no chain (``rejected``)."""
    if slot.crash is not None:
        if slot.crash is not exc:
            slot.crash.__cause__ = exc
        return slot.crash
    if crash_in_chain(exc):
        plain = RecordedFailure(f"{type(exc).__name__}: {exc}")
        plain.__cause__ = plain.__context__ = None
        plain.__suppress_context__ = True
        return plain
    return exc


def as_retried_answer(op):
    """A ``StaleResume`` on a server or DBOS handler: the handle is the handler id and the
    question its event stream showed (``Ans<gate>``), so answering through it is the same call
    as answering the question then, repeated (a retried ``POST /events/{handler_id}``): a
    ``Resume`` naming that gate.  Any other op is returned as it is."""
    if isinstance(op, StaleResume):
        return Resume(op.thread, value=op.value, gate=op.gate)
    return op


class SqliteCase(Case):
    """A case whose framework keeps its store in one SQLite file of the case's folder (``FILE``,
    in WAL mode) and runs on the case's event loop: each operation is ``_run`` on that loop with
    the operation's hooks; ``_shutdown`` ends what the framework runs before the loop closes."""

    FILE = ""

    def __init__(self, variant, plan: Workflow, workdir: Path):
        self.plan, self.workdir = plan, Path(workdir)
        self.gate = variant.options["gate"]
        self.db = self.workdir / self.FILE
        self.slot = SLOT
        self.loop = asyncio.new_event_loop()

    def run(self, op, hooks) -> str:
        with operation(hooks, self.plan):
            return self.loop.run_until_complete(self._run(op, hooks))

    async def _run(self, op, hooks) -> str:  # pragma: no cover - each case defines it
        raise NotImplementedError

    async def _shutdown(self) -> None:
        """Stop the framework's server or runtime, if one runs."""

    def _connect(self):
        return connect(self.db)

    def clone_store(self, dest) -> None:
        copy_sqlite(self.db, dest, wal=True)
        copy_side_files(self.workdir, dest)

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self._shutdown())
        finally:
            close_loop(self.loop)
