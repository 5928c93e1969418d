"""The adapter's reads of a case's SQLite store: "nothing stored" only when nothing is."""

import sqlite3

import pytest

from adapters.llamaindex.store import stored_rows
from adapters.protocol import HarnessError


def test_a_missing_file_or_table_is_nothing_stored(tmp_path):
    db = tmp_path / "store.sqlite"
    assert stored_rows(db, "SELECT run_id FROM handlers") == []
    assert not db.exists()  # a read never creates the store
    sqlite3.connect(db).close()
    assert stored_rows(db, "SELECT run_id FROM handlers") == []


def test_rows_that_are_stored_are_read(tmp_path):
    db = tmp_path / "store.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE handlers (handler_id TEXT, run_id TEXT)")
        conn.execute("INSERT INTO handlers VALUES ('t0', 'r1')")
    assert stored_rows(db, "SELECT run_id FROM handlers WHERE handler_id = ?", ("t0",)) == [("r1",)]


def test_any_other_failure_to_read_is_a_harness_error_not_nothing_stored(tmp_path):
    # Reading such a failure as "nothing stored" once made a crashed run's state `new`.
    db = tmp_path / "store.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE handlers (handler_id TEXT, run_id TEXT)")
    with pytest.raises(HarnessError, match="could not read"):
        stored_rows(db, "SELECT no_such_column FROM handlers")
