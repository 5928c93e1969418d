"""Fixtures for the pydantic-graph adapter tests: a prepared adapter and an in-process harness.

The harness applies operations the way the engine's worker does (``EngineHooks`` on a real
ledger), in this process: exception-kind crash points only.  SIGKILL and races go through the
engine's own runner (``fuzz.runner``) in ``test_engine.py``.
"""

from __future__ import annotations

import pytest

from adapters.protocol import CrashInjected, Workflow


@pytest.fixture(scope="session")
def adapter():
    from adapters.pydantic_graph import PersistenceRemoved, PydanticGraphAdapter

    pytest.importorskip("pydantic_graph",
                        reason="needs pydantic-graph 1.x (constraints/pydantic_graph.txt)")
    a = PydanticGraphAdapter()
    try:
        a.prepare()
    except PersistenceRemoved as exc:
        pytest.skip(str(exc))
    return a


def variant_named(adapter, name):
    return next(v for v in adapter.variants() if v.name == name)


@pytest.fixture
def variant(adapter):
    """``variant(name)``: the adapter's variant of that name."""
    return lambda name: variant_named(adapter, name)


class Harness:
    """One case, driven in process; ``do(op)`` returns ``(outcome, ledger rows of that op)``."""

    def __init__(self, adapter, variant, workflow: Workflow, tmp_path):
        from fuzz.internal.ledger import Ledger

        self.adapter, self.variant, self.workflow = adapter, variant, workflow
        self.workdir = tmp_path / "store"
        self.workdir.mkdir(parents=True)
        self.ledger = Ledger(tmp_path / "ledger.sqlite")
        self.case = adapter.open(variant, workflow, self.workdir)
        self.seq = 0

    def do(self, op):
        from fuzz.internal.hooks import EngineHooks

        self.seq += 1
        branch = getattr(op, "new_thread", "") or op.thread
        hooks = EngineHooks(op, seq=self.seq, branch=branch, ledger=self.ledger)
        try:
            outcome = self.case.run(op, hooks)
            hooks.run_returned()
        except CrashInjected as exc:
            outcome = ("crashed", str(exc))
        except Exception as exc:  # noqa: BLE001 - a refusal is an outcome here
            if any(isinstance(e, CrashInjected) for e in _chain(exc)):
                outcome = ("crashed", str(exc))
            else:
                outcome = ("rejected", f"{type(exc).__name__}: {exc}")
        return outcome, self.ledger.rows(self.seq)

    def close(self):
        self.case.close()
        self.ledger.close()


def _chain(exc):
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


@pytest.fixture
def harness(adapter, tmp_path):
    made = []

    def make(name, workflow):
        h = Harness(adapter, variant_named(adapter, name), workflow, tmp_path / f"h{len(made)}")
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()
