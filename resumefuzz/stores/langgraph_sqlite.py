"""LangGraph's own SQLite savers through the factory protocol: the self-test of ``--store``.

``sqlite_saver`` (sync) and ``async_sqlite_saver`` (``AsyncSqliteSaver``, an ``async def``
factory) keep the database in ``workdir/checkpoints.sqlite``; clone copies the file and its
-wal/-shm; tamper(corrupt) overwrites the checkpoint's serialized bytes with SQL.
"""

from __future__ import annotations

import sqlite3

from adapters.storeprotocol import StoreContext, StoreHandle, TamperTarget

from ._common import GARBAGE, copy_tree

FILE = "checkpoints.sqlite"
FILES = (FILE, FILE + "-wal", FILE + "-shm")


def _corrupt(path, target: TamperTarget) -> str:
    conn = sqlite3.connect(str(path), timeout=60, isolation_level=None)
    try:
        n = conn.execute("UPDATE checkpoints SET checkpoint=? WHERE thread_id=? AND "
                         "checkpoint_ns='' AND checkpoint_id=?",
                         (GARBAGE, target.thread_id, target.checkpoint_id)).rowcount
        conn.execute("UPDATE writes SET value=? WHERE thread_id=? AND checkpoint_ns='' AND "
                     "checkpoint_id=? AND type='msgpack'",
                     (GARBAGE, target.thread_id, target.checkpoint_id))
    finally:
        conn.close()
    return f"checkpoint {target.checkpoint_id}: {n} checkpoint blob(s) and its writes overwritten"


def _handle(ctx: StoreContext, saver, close) -> StoreHandle:
    path = ctx.workdir / FILE
    return StoreHandle(
        store=saver,
        clone=lambda dest: copy_tree(ctx.workdir, dest.workdir, FILES),
        tamper=lambda target: _corrupt(path, target),
        tamper_hows=frozenset({"corrupt"}),
        # Each checkpoint a row of its own; the saver's list() decodes every checkpoint of the
        # thread, so another branch meets a damaged row only there, failing loudly.
        tamper_scope="listing",
        close=close,
    )


def sqlite_saver(ctx: StoreContext) -> StoreHandle:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(str(ctx.workdir / FILE), check_same_thread=False, timeout=60)
    return _handle(ctx, SqliteSaver(conn), conn.close)


sqlite_saver.store_name = "sqlite"
sqlite_saver.store_distribution = "langgraph-checkpoint-sqlite"
sqlite_saver.store_script = "resumefuzz.stores.scripts.langgraph_sqlite:SCRIPT"  # its scripts' store


async def async_sqlite_saver(ctx: StoreContext) -> StoreHandle:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    conn = await aiosqlite.connect(str(ctx.workdir / FILE), timeout=60)
    saver = AsyncSqliteSaver(conn)
    await saver.setup()
    return _handle(ctx, saver, conn.close)


async_sqlite_saver.store_name = "asyncsqlite"
async_sqlite_saver.store_distribution = "langgraph-checkpoint-sqlite"
async_sqlite_saver.store_script = "resumefuzz.stores.scripts.langgraph_sqlite:ASYNC_SCRIPT"  # its scripts' store
