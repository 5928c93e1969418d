"""The caller's store for saved team states: AutoGen has none, so the store design is a variant.

- ``JsonStore``: one file per thread, ``store/<thread>.json``, holding exactly the dict
  ``team.save_state()`` returned (the "Managing State" tutorial's ``json.dump``), replaced
  atomically (tmp + fsync + ``os.replace``).  Latest only: no earlier state survives a save.
- ``SqliteStore``: an append-only table ``ckpt(seq, thread, label, state)`` in
  ``store/checkpoints.sqlite``.  History: the label names the save (``interrupt:t<g>``, ``step``,
  ``complete``, ``fork``), so the caller can find the state at which gate ``g`` asked.

Standard library only.  Every method
takes and returns the stored *text*; decoding it is the caller's business (and a loud refusal
when it does not decode).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import tempfile
from pathlib import Path



def copy_files(src, dest) -> None:
    """A restore of the store directory (flat): the bytes, fresh metadata, directory order.
    (``adapters.files.copy_files``, which this standalone module may not import.)"""
    os.makedirs(dest, exist_ok=True)
    files = [e.path for e in os.scandir(src) if e.is_file(follow_symlinks=False)]
    if files:  # by cp, in a child: closing a file here would drop this process's SQLite locks
        subprocess.run(["cp", "--", *files, str(dest)], check=True)


class JsonStore:
    kind = "json"

    def __init__(self, root: Path):
        self.dir = Path(root) / "store"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, thread: str) -> Path:
        return self.dir / f"{thread}.json"

    def latest(self, thread: str) -> str | None:
        try:
            return self._path(thread).read_text()
        except FileNotFoundError:
            return None

    def at_gate(self, thread: str, gate: int) -> str | None:
        raise NotImplementedError("a latest-only store keeps no earlier state to fork from")

    def save(self, thread: str, label: str, text: str) -> None:
        path = self._path(thread)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def overwrite_latest(self, thread: str, text: str) -> None:
        """Tampering: write ``text`` over the file in place, bypassing the atomic save."""
        self._path(thread).write_text(text)

    def clone(self, dest: Path) -> None:
        copy_files(self.dir, Path(dest) / "store")  # bytes, fresh metadata: a restore

    def close(self) -> None:
        pass


class SqliteStore:
    kind = "sqlite"

    def __init__(self, root: Path):
        self.dir = Path(root) / "store"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "checkpoints.sqlite"
        # Autocommit, rollback journal: every save is one INSERT, durable when it returns, and the
        # database is one file between operations (no -wal to copy along).
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=60)
        self.db.execute("PRAGMA busy_timeout=60000")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS ckpt (seq INTEGER PRIMARY KEY AUTOINCREMENT,"
            " thread TEXT NOT NULL, label TEXT NOT NULL, state TEXT NOT NULL)"
        )

    def latest(self, thread: str) -> str | None:
        row = self.db.execute(
            "SELECT state FROM ckpt WHERE thread = ? ORDER BY seq DESC LIMIT 1", (thread,)
        ).fetchone()
        return None if row is None else row[0]

    def at_gate(self, thread: str, gate: int) -> str | None:
        row = self.db.execute(
            "SELECT state FROM ckpt WHERE thread = ? AND label = ? ORDER BY seq DESC LIMIT 1",
            (thread, f"interrupt:t{gate}"),
        ).fetchone()
        return None if row is None else row[0]

    def save(self, thread: str, label: str, text: str) -> None:
        self.db.execute("INSERT INTO ckpt (thread, label, state) VALUES (?, ?, ?)", (thread, label, text))

    def overwrite_latest(self, thread: str, text: str) -> None:
        """Tampering: rewrite the newest row of ``thread`` with plain SQL."""
        self.db.execute(
            "UPDATE ckpt SET state = ? WHERE seq = (SELECT max(seq) FROM ckpt WHERE thread = ?)",
            (text, thread),
        )

    def history(self, thread: str) -> list[tuple[int, str]]:
        return self.db.execute(
            "SELECT seq, label FROM ckpt WHERE thread = ? ORDER BY seq", (thread,)
        ).fetchall()

    def clone(self, dest: Path) -> None:
        # The database, and a -journal if one were left: bytes, fresh metadata (a restore).
        copy_files(self.dir, Path(dest) / "store")

    def close(self) -> None:
        self.db.close()


STORES = {"json": JsonStore, "sqlite": SqliteStore}


def label_for(ending: str, gate: int | None) -> str:
    """The history label of a save, from how the run that preceded it ended."""
    if ending == "interrupted":
        return f"interrupt:t{gate}"
    return {"completed": "complete"}.get(ending, ending)
