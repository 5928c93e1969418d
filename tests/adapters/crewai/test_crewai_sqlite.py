"""The SQLite under the SqliteProvider variants: one with ``jsonb`` and without the 3.51.0-3.51.1
unix VFS deadlock (``adapters.crewai.store.DEADLOCKING_SQLITE``).

That deadlock hung the crewai environment in CI: two of CrewAI's checkpoint writers on one file
stopped for good, and every later SQLite open of the process with them.  It was our choice of
SQLite build (pysqlite3-binary 0.5.4.post2 bundles 3.51.1), not CrewAI's behaviour, so the adapter
refuses such a build in one line instead of hanging.
"""

from __future__ import annotations

import sys
import types

import pytest

from crewai_test_support import require_crewai

require_crewai()


def _fake_pysqlite3(monkeypatch, version: str) -> None:
    module = types.ModuleType("pysqlite3.dbapi2")
    module.sqlite_version = version
    module.sqlite_version_info = tuple(int(p) for p in version.split("."))
    package = types.ModuleType("pysqlite3")
    package.dbapi2 = module
    monkeypatch.setitem(sys.modules, "pysqlite3", package)
    monkeypatch.setitem(sys.modules, "pysqlite3.dbapi2", module)


@pytest.mark.parametrize("version", ["3.51.0", "3.51.1"])
def test_a_sqlite_with_the_vfs_deadlock_is_refused_in_one_line(monkeypatch, version):
    from adapters.crewai import store
    from adapters.crewai.adapter import CrewAIAdapter

    _fake_pysqlite3(monkeypatch, version)
    with pytest.raises(ImportError, match=rf"SQLite {version}, .*deadlock.*3\.51\.2"):
        store.newer_sqlite()
    assert CrewAIAdapter().versions()["sqlite (pysqlite3)"] == version  # what is installed


@pytest.mark.parametrize("version", ["3.50.4", "3.51.2", "3.53.4"])
def test_other_releases_are_used(monkeypatch, version):
    from adapters.crewai import store

    _fake_pysqlite3(monkeypatch, version)
    assert store.newer_sqlite().sqlite_version == version


def test_the_installed_build_has_jsonb_and_is_not_refused():
    from adapters.crewai import store

    module = store.newer_sqlite()  # raises for a refused release: this environment must not have one
    assert module.sqlite_version_info >= (3, 45, 0)
    db = module.connect(":memory:")
    assert db.execute("SELECT json(jsonb('[1]'))").fetchone() == ("[1]",)
    db.close()
