"""``sqlite_saver``'s and ``async_sqlite_saver``'s stores in a reproduction script: LangGraph's
``SqliteSaver`` (``AsyncSqliteSaver``) on ``checkpoints.sqlite`` in the script's directory."""

import os
import sqlite3

import aiosqlite
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from adapters.storeprotocol import ScriptStore
from adapters.reproduction.runtime import WORKDIR


def sqlite_saver(cls=SqliteSaver):
    path = os.path.join(WORKDIR, "checkpoints.sqlite")
    return cls(sqlite3.connect(path, check_same_thread=False, timeout=60))


async def async_sqlite_saver(cls=AsyncSqliteSaver):
    """Built on the event loop that runs the graph (``AsyncSqliteSaver`` keeps it)."""
    path = os.path.join(WORKDIR, "checkpoints.sqlite")
    saver = cls(await aiosqlite.connect(path, timeout=60))
    await saver.setup()
    return saver


SCRIPT = ScriptStore(functions=(sqlite_saver,), build="sqlite_saver",
                     distributions=("langgraph-checkpoint-sqlite",))
ASYNC_SCRIPT = ScriptStore(functions=(async_sqlite_saver,), build="async_sqlite_saver",
                           distributions=("langgraph-checkpoint-sqlite", "aiosqlite"),
                           # aiosqlite's worker thread is no daemon: open, it keeps the script alive
                           close=("run(graph.checkpointer.conn.close())",))
