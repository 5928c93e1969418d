"""Fixtures for the CrewAI adapter tests: a prepared adapter and an in-process harness.

The harness applies operations the way the engine's worker does (``EngineHooks`` on a ledger), in
this process: exception-kind crash points only.  SIGKILL, races and twins go through the engine's
runner in a fresh interpreter (``engine_probe.py``), because the runner refuses to fork from a
process that has threads and CrewAI starts its event-bus threads on the first flow.

The helpers live in ``crewai_test_support.py``.  A call the harness gave up on (CrewAI hung) leaves
its thread blocked, and the interpreter's exit would join it for ever; a session that left one ends
with ``os._exit`` and pytest's own exit status, after pytest has reported.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from crewai_test_support import Harness, variant_named


@pytest.fixture(scope="session")
def adapter():
    from adapters.crewai import CrewAIAdapter

    a = CrewAIAdapter()
    saved = dict(os.environ)
    os.environ.update(a.environment())
    a.prepare()
    yield a
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture
def harness(adapter, tmp_path):
    """``harness(variant_name, workflow)``: opens a case; restores cwd, stdio and env after."""
    saved = (os.getcwd(), sys.stdout, sys.stderr, dict(os.environ), tempfile.tempdir)
    opened = []

    def make(name, workflow, workdir=None):
        workdir = Path(workdir or tmp_path / f"case{len(opened)}" / "store-root")
        workdir.mkdir(parents=True, exist_ok=True)
        h = Harness(adapter, variant_named(adapter, name), workflow, workdir,
                    workdir.parent / f"ledger{len(opened)}.sqlite")
        sys.stdout, sys.stderr = saved[1], saved[2]  # keep pytest's capture, not the case log
        opened.append(h)
        return h

    yield make
    for h in opened:
        h.ledger.close()
    os.chdir(saved[0])
    sys.stdout, sys.stderr = saved[1], saved[2]
    os.environ.clear()
    os.environ.update(saved[3])
    tempfile.tempdir = saved[4]


_STATUS: dict[str, int] = {}


def pytest_sessionfinish(session, exitstatus):
    _STATUS["exit"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    import crewai_test_support as support

    alive = [t for t in support.ABANDONED if t.is_alive()]
    if alive:
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(2, (f"resumefuzz: {len(alive)} CrewAI call(s) given up on are still blocked; "
                     "the process ends without the interpreter's exit, which would join them\n"
                     ).encode())
        os._exit(_STATUS.get("exit", 1))
