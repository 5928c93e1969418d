"""The HTTP server variants through the engine's workers (one worker process per case, as in a
campaign): the worker serves ``server.app`` with uvicorn on 127.0.0.1 and drives it through its
routes with ``WorkflowClient``.  Machinery only: what a run stored, that a refusal is the
server's HTTP status, that recover restarts the server after the stock 30 s grace.

Each scenario runs in a fresh interpreter (``http_scenarios.py``, which says why): in this pytest
process, after the in-process tests, the first HTTP resumes hung three cases in a row in a CI run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llamaindex_testkit import HTTP

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def run_scenario(name: str, variant: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    proc = subprocess.run([sys.executable, str(HERE / "http_scenarios.py"), name, variant],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]


@pytest.mark.parametrize("variant", HTTP)
def test_runs_and_refusals_go_through_the_routes(variant):
    run_scenario("routes", variant)


def test_recover_after_sigkill_waits_out_the_stock_grace():
    run_scenario("recover_after_sigkill", "server-wait")


def test_a_scenario_that_does_not_hold_fails():
    # The subprocess's verdict reaches pytest: a scenario that cannot hold fails the test.
    with pytest.raises(AssertionError, match="KeyError"):
        run_scenario("no-such-scenario", "server-wait")
