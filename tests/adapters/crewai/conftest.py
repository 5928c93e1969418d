"""Fixtures for the CrewAI adapter tests: a prepared adapter and an in-process harness.

The harness applies operations the way the engine's worker does (``EngineHooks`` on a ledger), in
this process: exception-kind crash points only.  SIGKILL, races and twins go through the engine's
runner in a fresh interpreter (``engine_probe.py``), because the runner refuses to fork from a
process that has threads and CrewAI starts its event-bus threads on the first flow.

The helpers live in ``crewai_test_support.py``.
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


