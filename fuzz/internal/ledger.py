"""The effect ledger: one row per effect firing, in a SQLite file outside every store.

Rows are committed one by one (autocommit, WAL), so a row written before a SIGKILL survives it:
the ledger, not the dying process, says what fired (Jepsen's history, Elle's unique writes).
A case run ``inprocess`` has no other process to outlive: its ``MemoryLedger`` is a list.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

# One row per firing.  Plain sqlite3, one prepared statement: an effect is recorded inside the
# framework's task body, so its cost lands on every operation the fuzzer times.  ``task`` has no
# declared type: a chain's task is a number, a shape's a label ("3", "3.pre"), and an integer
# column would read the label "3" back as the number 3.
CREATE = ("create table if not exists effects (seq integer, branch text, task, "
          "value text, pid integer, racer integer)")
INSERT = "insert into effects (seq, branch, task, value, pid, racer) values (?, ?, ?, ?, ?, ?)"


class Ledger:
    """The ledger of a case whose workers are processes: a SQLite file they all write."""

    def __init__(self, path: Path):
        self.path = Path(path)
        # Frameworks run task bodies in worker threads (LangGraph's @task, CrewAI's methods):
        # effects arrive from threads other than the one that opened the ledger.
        self._lock = threading.Lock()
        # Autocommit: each row is committed as it is written.  WAL with synchronous=OFF: a
        # commit is in the OS's hands (the WAL file, the shared-memory index) before the call
        # returns, so a SIGKILL of this process right after it loses nothing; only a machine
        # crash could, and a ledger does not outlive its case.  OFF, set before WAL, also spares
        # the fsyncs of switching a new file to WAL and of the checkpoint on the last close
        # (NORMAL kept those: ~10-25 ms each per case on a VM's disk; FULL's fsync per row was
        # most of a firing's cost).  ``db`` is the connection; tests query the ledger through it.
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA busy_timeout=30000")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(CREATE)  # racers opening one ledger at once: "if not exists" and the wait

    def fire(self, seq: int, branch: str, task: int, value: str | None, racer: int = 0) -> None:
        with self._lock:
            self.db.execute(INSERT, (seq, branch, task, value, os.getpid(), racer))

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
        self.db.close()


class MemoryLedger:
    """The ledger of a case run ``inprocess``: a list.  Nothing there can kill the process
    between a firing and its read, and no other process writes it, so a file (its creation, its
    WAL, its removal) buys nothing; nor does SQLite in memory, whose connection and table a case,
    insert a firing and two selects an operation were ~0.7 ms of a LangGraph case's ~19
    (``benchmarks/history/round-12.md``).  Same methods and rows as ``Ledger``, ``path``
    ``None``."""

    path = None

    def __init__(self):
        self._rows: list[tuple] = []  # (seq, branch, task, value, racer), in firing order
        self._lock = threading.Lock()  # effects arrive from the frameworks' threads

    def fire(self, seq: int, branch: str, task: int, value: str | None, racer: int = 0) -> None:
        with self._lock:
            self._rows.append((seq, branch, task, value, racer))

    def rows(self, seq: int) -> list[tuple]:
        """``(branch, task, value)`` for every firing during operation ``seq``."""
        return [(b, t, v) for s, b, t, v, _ in self._rows if s == seq]

    def count(self, seq: int, branch: str, racer: int = 0) -> int:
        """Rows written during operation ``seq`` by ``racer`` on ``branch``."""
        return sum(1 for s, b, _, _, r in self._rows if (s, b, r) == (seq, branch, racer))

    def close(self) -> None:
        pass
