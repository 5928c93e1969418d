"""Fixtures for the AutoGen adapter's machinery tests (run in the AutoGen venv; skipped elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("autogen_agentchat", reason="AutoGen AgentChat is not installed (constraints/autogen.txt)")

from adapters.autogen import AutoGenAdapter  # noqa: E402
from adapters.protocol import Workflow  # noqa: E402
from fuzz.testing import InProcessCase  # noqa: E402

WORKFLOW = Workflow(3, {2}, ("a", "b"))


@pytest.fixture(scope="session")
def adapter():
    a = AutoGenAdapter()
    for key, value in a.environment().items():
        os.environ.setdefault(key, value)
    a.prepare()
    return a


def variant_named(adapter, name):
    return next(v for v in adapter.variants() if v.name == name)


class Driver(InProcessCase):
    """Applies ops in this process with the engine's hooks and ledger (exception crashes only)."""

    def __init__(self, adapter, variant, tmp: Path, workflow=WORKFLOW):
        super().__init__(adapter, variant, workflow, tmp)


@pytest.fixture
def workflow():
    return WORKFLOW


@pytest.fixture
def make_driver(adapter, tmp_path):
    drivers = []

    def make(name, workflow=WORKFLOW):
        sub = tmp_path / f"d{len(drivers)}"
        sub.mkdir()
        d = Driver(adapter, variant_named(adapter, name), sub, workflow)
        drivers.append(d)
        return d

    yield make
    for d in drivers:
        d.close()
