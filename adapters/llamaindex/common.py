"""Reads and byte copies of the cases' SQLite stores (the server's and DBOS's, and the core's
snapshot table)."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from adapters.protocol import HarnessError, copy_apart


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
