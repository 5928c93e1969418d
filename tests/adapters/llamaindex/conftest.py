"""Fixtures for the LlamaIndex adapter's machinery tests (run in the LlamaIndex venv; skipped
elsewhere).  SIGKILL barriers, races and twins go through ``fuzz.runner`` worker processes."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("workflows", reason="llama-index-workflows is not installed "
                    "(constraints/llamaindex.txt)")

from adapters.llamaindex import LlamaIndexAdapter  # noqa: E402
from llamaindex_testkit import WORKFLOW, Driver  # noqa: E402


@pytest.fixture(scope="session")
def adapter():
    a = LlamaIndexAdapter()
    for key, value in a.environment().items():
        os.environ.setdefault(key, value)
    a.prepare()
    return a


@pytest.fixture
def make_driver(adapter, tmp_path):
    drivers = []

    def make(name, workflow=WORKFLOW):
        sub = tmp_path / f"d{len(drivers)}"
        sub.mkdir()
        d = Driver(adapter, adapter.variant(name), sub, workflow)
        drivers.append(d)
        return d

    yield make
    for d in drivers:
        d.close()
