"""Helpers every case shares: the event loop a case keeps, reads and byte copies of SQLite stores."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from adapters.protocol import HarnessError, Refused, Resume, StaleResume, copy_apart


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


def connect(db: Path):
    """A connection to a case's SQLite store, closed on leaving its ``with`` (autocommit; it
    waits up to 60 s for a lock the framework holds)."""
    return closing(sqlite3.connect(db, timeout=60, isolation_level=None))


def stored_rows(db: Path, sql: str, args=()) -> list:
    """The rows of ``sql`` on a case's SQLite store; none while the file or the table does not
    exist yet (the framework has stored nothing).  Any other failure to read (a lock, an I/O
    error) is the harness's, never "nothing stored": reading it so once made a state `new`."""
    if not db.exists():
        return []
    with connect(db) as conn:
        try:
            return conn.execute(sql, args).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                return []
            raise HarnessError(f"the adapter could not read {db.name}: {exc}") from exc


def copy_sqlite(path: Path, dest: Path, *, wal: bool) -> None:
    """Copy one SQLite database byte for byte into directory ``dest``.

    A WAL database is checkpointed (TRUNCATE) first, so that the main file holds every committed
    page; the copy is taken while holding a write lock, so that no writer changes it midway.
    """
    path, dest = Path(path), Path(dest)
    conn = sqlite3.connect(path, timeout=60, isolation_level=None)
    try:
        if wal:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("BEGIN IMMEDIATE")
        try:
            copy_apart([src for src in (path, Path(f"{path}-wal"))  # this process's locks kept
                        if src.exists() and (src == path or src.stat().st_size > 0)], dest)
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()


def copy_side_files(workdir: Path, dest: Path, names=("sidetable.json",)) -> None:
    for name in names:
        src = Path(workdir) / name
        if src.exists():
            shutil.copyfile(src, Path(dest) / name)


class RecordedFailure(Refused):
    """The framework reported a failure recorded by an earlier operation (for instance DBOS
    replaying a step's stored exception): a refusal of this operation, not a crash in it.  A
    ``Refused``, so the engine records it as the framework's (``rejected`` with these words),
    never as a tool error: the framework raised it, the adapter only strips the earlier
    operation's injected crash from its chain."""


def crash_in_chain(exc: BaseException) -> bool:
    from adapters.protocol import CrashInjected

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
