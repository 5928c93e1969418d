"""The cases' stores, as the adapter reads and copies them directly (never through the framework).

``SnapshotStore`` is the core variants' store: ``Context.to_dict()`` snapshots, one SQLite row
each.  LlamaIndex's core has no checkpointer: the documented persistence is the caller storing
``ctx.to_dict()`` and restoring it with ``Context.from_dict``.  This table is that caller's
storage, kept append-only so that older snapshots stay addressable (a fork restores the one at
which its gate was pending).  Rollback journal (not WAL), autocommit, a long busy timeout: racing
processes write to it, and ``clone_store`` copies one file.

The server and DBOS variants' stores are the framework's own SQLite files (``server.sqlite``,
``dbos.sqlite``): ``connect`` and ``stored_rows`` read them, ``copy_sqlite`` and
``copy_side_files`` copy a case's store byte for byte.  What ``tamper`` writes into a store is
``tamper.py``'s.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from adapters.protocol import HarnessError
from adapters.files import copy_apart

FILE = "snapshots.sqlite"


class SnapshotStore:
    def __init__(self, workdir: Path):
        self.path = Path(workdir) / FILE
        self.conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.conn.execute("PRAGMA busy_timeout=60000")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS snapshots (id INTEGER PRIMARY KEY AUTOINCREMENT,"
            " thread TEXT NOT NULL, reason TEXT NOT NULL, pid INTEGER, asked INTEGER,"
            " body TEXT NOT NULL)"
        )

    def append(self, thread: str, reason: str, snapshot: dict, asked: int | None = None) -> int:
        """``asked``: the gate whose ``InputRequiredEvent`` the caller saw before the run went
        idle (what the user's code answers); ``None`` for rows not written at a pause."""
        cur = self.conn.execute(
            "INSERT INTO snapshots (thread, reason, pid, asked, body) VALUES (?, ?, ?, ?, ?)",
            (thread, reason, os.getpid(), asked, json.dumps(snapshot)),
        )
        return cur.lastrowid

    def copy_row(self, row_id: int, thread: str, reason: str) -> int:
        cur = self.conn.execute(
            "INSERT INTO snapshots (thread, reason, pid, asked, body)"
            " SELECT ?, ?, ?, asked, body FROM snapshots WHERE id = ?",
            (thread, reason, os.getpid(), row_id),
        )
        return cur.lastrowid

    def latest(self, thread: str) -> tuple[int, int | None, str] | None:
        """``(id, asked, body)`` of the thread's newest row (its head)."""
        return self.conn.execute(
            "SELECT id, asked, body FROM snapshots WHERE thread = ? ORDER BY id DESC LIMIT 1",
            (thread,),
        ).fetchone()

    def asked(self, row_id: int) -> int | None:
        row = self.conn.execute("SELECT asked FROM snapshots WHERE id = ?", (row_id,)).fetchone()
        return row[0] if row else None

    def rows(self, thread: str) -> list[tuple[int, int | None, str]]:
        return self.conn.execute(
            "SELECT id, asked, body FROM snapshots WHERE thread = ? ORDER BY id", (thread,)
        ).fetchall()

    def overwrite(self, row_id: int, body: str) -> None:
        """Direct SQL write, for ``tamper`` only."""
        self.conn.execute("UPDATE snapshots SET body = ? WHERE id = ?", (body, row_id))

    def close(self) -> None:
        self.conn.close()


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
