"""Fixtures for the AutoGen adapter's machinery tests (run in the AutoGen venv; skipped elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("autogen_agentchat", reason="AutoGen AgentChat is not installed (constraints/autogen.txt)")

from adapters.autogen import AutoGenAdapter  # noqa: E402
from adapters.protocol import Workflow  # noqa: E402
from fuzz.internal.hooks import EngineHooks  # noqa: E402
from fuzz.internal.ledger import Ledger  # noqa: E402

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


class Driver:
    """Applies ops in this process with the engine's hooks and ledger (exception crashes only)."""

    def __init__(self, adapter, variant, tmp: Path, workflow=WORKFLOW):
        self.adapter, self.variant, self.workflow = adapter, variant, workflow
        self.workdir = tmp / "case"
        self.workdir.mkdir()
        self.ledger = Ledger(tmp / "ledger.sqlite")
        self.case = adapter.open(variant, workflow, self.workdir)
        self.seq = 0

    def run(self, op):
        """``(outcome, effect rows, exception)``; outcome as the engine would name it."""
        self.seq += 1
        branch = getattr(op, "new_thread", "") or op.thread
        hooks = EngineHooks(op, seq=self.seq, branch=branch, ledger=self.ledger)
        error = None
        try:
            outcome = self.case.run(op, hooks)
            hooks.run_returned()
        except Exception as exc:  # noqa: BLE001 - the outcome is what we look at
            from fuzz.runner import _injected

            error = exc
            outcome = "crashed" if _injected(exc) else "rejected"
        return outcome, self.ledger.rows(self.seq), error

    def reopen(self):
        """A fresh case on the same workdir, as a replacement worker would open it."""
        self.case.close()
        self.case = self.adapter.open(self.variant, self.workflow, self.workdir)
        return self.case

    def close(self):
        self.case.close()
        self.ledger.close()


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
