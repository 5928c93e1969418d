"""The adapter through the engine's own runner: SIGKILL barriers, races, twin recovery.

Workers are forked from this process (``fuzz.runner``), so these tests also check that the
adapter leaves no framework threads behind in the parent.
"""

from __future__ import annotations

import json
import os

import pytest

from adapters.protocol import CrashAt, Race, Recover, Start, TwinRecover, Workflow

pytestmark = pytest.mark.slow

LINEAR = Workflow(3, set(), ("a", "b"))
GATED = Workflow(3, {2}, ("a", "b"))


@pytest.fixture
def session(adapter, variant, tmp_path):
    from fuzz.runner import Session, Settings

    def make(name):
        return Session(adapter, variant(name), root=tmp_path,
                       settings=Settings(op_timeout=30))

    return make


def last_snapshot(runner, thread):
    table = json.loads((runner.workdir / "pydantic_graph_threads.json").read_text())
    return json.loads((runner.workdir / table[thread]).read_bytes())[-1]


@pytest.mark.parametrize("phase, fired", [("before_effect", [1]), ("in_flight", [1, 2])])
def test_sigkill_barrier_kills_the_worker_inside_the_intended_task(session, phase, fired):
    runner = session("file-single-resume_ifp-recover_ifp").case(LINEAR)
    try:
        observation = runner.apply(Start("t0", crash=CrashAt(2, phase, "sigkill")))
        assert observation.outcome == "crashed"
        assert list(observation.effects) == [("t0", t, None) for t in fired]
        last = last_snapshot(runner, "t0")
        # Killed while node 2 ran: record_run had marked it 'running' and nothing closed it.
        assert (last["node"]["t"], last["status"]) == (2, "running")
        assert runner.ledger.rows(1) == [("t0", t, None) for t in fired]
    finally:
        runner.close()


def test_sigkill_after_commit_dies_when_the_next_task_begins(session):
    runner = session("file-classes-resume_docs-recover_initialize").case(LINEAR)
    try:
        observation = runner.apply(Start("t0", crash=CrashAt(1, "after_commit", "sigkill")))
        assert observation.outcome == "crashed"
        assert list(observation.effects) == [("t0", 1, None)]
        last = last_snapshot(runner, "t0")
        assert (last["node"]["node_id"], last["status"]) == ("T2", "running")
        # A fresh worker opens the same workdir and reads the same state.
        assert runner.apply(Recover("t0")).state is not None
    finally:
        runner.close()


@pytest.mark.parametrize("name", ["file-single-resume_ifp-recover_ifp",
                                  "file-classes-resume_docs-recover_initialize"])
def test_race_runs_k_processes_on_one_persistence_file(session, name):
    runner = session(name).case(GATED)
    try:
        runner.apply(Start("t0"))
        observation = runner.apply(Race("t0", values=("a", "a", "a")))
        outcomes = observation.outcome.split("|")
        assert len(outcomes) == 3  # one outcome per racer process
        json_files = [p for p in runner.workdir.iterdir() if p.name.startswith("run-")]
        assert len(json_files) == 1  # all of them on the one file
        rows = runner.ledger.db.execute("select pid, racer from effects where seq = 2").fetchall()
        assert all(pid != os.getpid() and 1 <= racer <= 3 for pid, racer in rows)
        refusals = [line for line in runner.log if line.startswith("op 2 (resume) rejected")]
        assert len(refusals) == outcomes.count("rejected")
    finally:
        runner.close()


def test_twin_recover_recovers_from_two_copies(session):
    runner = session("file-single-resume_ifp-recover_initialize").case(LINEAR)
    try:
        runner.apply(Start("t0", crash=CrashAt(2, "in_flight", "sigkill")))
        observation = runner.apply(TwinRecover("t0"))
        assert observation.twin is not None
        assert observation.state is not None and observation.twin.state is not None
    finally:
        runner.close()


def test_in_memory_store_lives_in_the_worker_across_operations(session):
    runner = session("full-single-resume_docs-recover_initialize").case(GATED)
    try:
        assert runner.apply(Start("t0")).state.pending == 2
        observation = runner.apply(Recover("t0"))
        assert observation.state.pending == 2  # the same worker, the same FullStatePersistence
    finally:
        runner.close()
