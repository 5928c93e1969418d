"""The core variants' store: ``Context.to_dict()`` snapshots, one SQLite row each.

LlamaIndex's core has no checkpointer: the documented persistence is the caller storing
``ctx.to_dict()`` and restoring it with ``Context.from_dict``.  This table is that caller's
storage, kept append-only so that older snapshots stay addressable (a fork restores the one at
which its gate was pending).  Rollback journal (not WAL), autocommit, a long busy timeout: racing
processes write to it, and ``clone_store`` copies one file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

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
