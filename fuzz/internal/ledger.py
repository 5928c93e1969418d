"""The effect ledger: one row per effect firing, in a SQLite file outside every store.

Rows are committed one by one (autocommit, WAL), so a row written before a SIGKILL survives it:
the ledger, not the dying process, says what fired (Jepsen's history, Elle's unique writes).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import sqlite_utils

SCHEMA = {
    "seq": int,  # the operation's index in the case
    "branch": str,
    "task": int,
    "value": str,
    "pid": int,
    "racer": int,
}


class Ledger:
    def __init__(self, path: Path):
        self.path = Path(path)
        # Frameworks run task bodies in worker threads (LangGraph's @task, CrewAI's methods):
        # effects arrive from threads other than the one that opened the ledger.
        self._lock = threading.Lock()
        self.db = sqlite_utils.Database(sqlite3.connect(self.path, check_same_thread=False))
        self.db.conn.execute("PRAGMA journal_mode=WAL")
        self.db.conn.execute("PRAGMA busy_timeout=30000")
        if "effects" not in self.db.table_names():
            try:
                self.db["effects"].create(SCHEMA, pk=None)
            except Exception:  # another racer created it first
                if "effects" not in self.db.table_names():
                    raise

    def fire(self, seq: int, branch: str, task: int, value: str | None, racer: int = 0) -> None:
        with self._lock:
            self.db["effects"].insert(
                {"seq": seq, "branch": branch, "task": task, "value": value,
                 "pid": os.getpid(), "racer": racer}
            )

    def rows(self, seq: int) -> list[tuple]:
        """``(branch, task, value)`` for every firing during operation ``seq``."""
        cursor = self.db.execute(
            "select branch, task, value from effects where seq = ? order by rowid", [seq]
        )
        return [tuple(row) for row in cursor.fetchall()]

    def count(self, seq: int, branch: str, racer: int = 0) -> int:
        """Rows one worker wrote during operation ``seq`` (to cross-check its own counter)."""
        cursor = self.db.execute(
            "select count(*) from effects where seq = ? and branch = ? and racer = ?",
            [seq, branch, racer],
        )
        return cursor.fetchone()[0]

    def close(self) -> None:
        self.db.conn.close()
