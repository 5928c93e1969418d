"""The HTTP server variants through the engine's workers (one worker process per case, as in a
campaign): the worker serves ``server.app`` with uvicorn on 127.0.0.1 and drives it through its
routes with ``WorkflowClient``.  Machinery only: what a run stored, that a refusal is the
server's HTTP status, that recover restarts the server after the stock 30 s grace.

In one pytest process, several HTTP cases in a row hung a resume (cause not found, see the issue
13 report); the engine gives every case its own worker, so these tests do too."""

from __future__ import annotations

import pytest

from adapters.protocol import CrashAt, Query, Recover, Resume, Start
from llamaindex_testkit import HTTP, WORKFLOW

runner = pytest.importorskip("fuzz.runner")
pytestmark = pytest.mark.slow


@pytest.fixture
def session(adapter, tmp_path, request):
    return runner.Session(adapter, adapter.variant(request.param), tmp_path / "fuzz",
                          runner.Settings(op_timeout=30))


@pytest.mark.parametrize("session", HTTP, indirect=True)
def test_runs_and_refusals_go_through_the_routes(session):
    case = session.case(WORKFLOW)
    try:
        obs = case.apply(Start("t0"))
        assert (obs.outcome, obs.effects) == ("interrupted", (("t0", 1, None),))
        assert (obs.state.done, obs.state.pending) == ((1,), 2)
        obs = case.apply(Resume("t0", value="a"))
        assert (obs.outcome, obs.effects) == ("interrupted", (("t0", 2, "a"),))
        obs = case.apply(Resume("t0", value="b"))
        assert (obs.outcome, obs.effects) == ("completed", (("t0", 3, "b"), ("t0", 4, None)))
        obs = case.apply(Resume("t0", value="a"))
        assert (obs.outcome, obs.effects) == ("rejected", ())
        if obs.error is not None:  # the engine records the refusal's words (issue 12)
            assert "Refused" in obs.error and "409" in obs.error, obs.error
    finally:
        case.close()


@pytest.mark.parametrize("session", ["server-wait"], indirect=True)
def test_recover_after_sigkill_waits_out_the_stock_grace(session):
    """The variant declares a 120 s op limit (the grace is 30 s); recover restarts the server in
    a fresh worker once the handler is older than the grace, and the run goes on."""
    assert session.adapter.capabilities(session.variant).op_timeout >= 60
    case = session.case(WORKFLOW)
    try:
        assert case.apply(Start("t0")).outcome == "interrupted"
        killed = case.worker.process.pid  # the server process the crash point kills
        obs = case.apply(Resume("t0", value="b", crash=CrashAt(2, "in_flight", "sigkill")))
        assert obs.outcome == "crashed"
        obs = case.apply(Recover("t0"))
        assert obs.outcome in ("interrupted", "completed", "rejected", "crashed"), obs
        assert case.worker.process.pid != killed
        assert case.apply(Query("t0")).outcome in ("ok", "rejected")
    finally:
        case.close()
