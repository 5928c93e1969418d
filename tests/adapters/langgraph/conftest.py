"""Fixtures for the LangGraph adapter's machinery tests.

Tests that need LangGraph skip (visibly, at run time, through the ``adapter`` fixture) where it
is not installed; ``RESUMEFUZZ_NO_SKIP=1`` turns those skips into failures.  PostgreSQL tests need the server at RESUMEFUZZ_PG_DSN (default 127.0.0.1:5432): a missing
server fails them, it does not skip them.
"""

from __future__ import annotations

import os

import pytest

from adapters.langgraph import LangGraphAdapter  # imports no LangGraph: prepare() does
from adapters.protocol import Workflow
from fuzz.internal.ledger import Ledger


@pytest.fixture(scope="session")
def adapter():
    pytest.importorskip("langgraph", reason="needs the LangGraph pins: constraints/langgraph.txt")
    a = LangGraphAdapter()
    os.environ.update(a.environment())
    a.prepare()
    return a


@pytest.fixture
def variant(adapter):
    def by_name(name):
        return next(v for v in adapter.variants() if v.name == name)

    return by_name


@pytest.fixture
def workflow():
    return Workflow(3, {2}, ("a", "b"))


@pytest.fixture
def ledger(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    yield ledger
    ledger.close()


@pytest.fixture
def open_case(adapter, tmp_path):
    """Open cases in fresh workdirs; close and clean them up after the test."""
    opened = []

    def _open(v, wf, workdir=None):
        workdir = workdir or tmp_path / f"case{len(opened)}"
        workdir.mkdir(exist_ok=True)
        case = adapter.open(v, wf, workdir)
        opened.append((case, workdir))
        return case

    yield _open
    for case, workdir in opened:
        case.close()
        adapter.cleanup(None, workdir)
