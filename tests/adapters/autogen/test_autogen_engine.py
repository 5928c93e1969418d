"""The AutoGen adapter through the engine's workers: SIGKILL barriers, k racing processes, twins.

Machinery only: the barrier kills the worker inside the intended task and phase (the ledger shows
which effects fired before the kill), a fresh worker reopens the same store, a race really runs k
processes on one store, twin recovery runs on a byte-identical copy.  No verdict is asserted.
"""

from __future__ import annotations

import pytest

from adapters.protocol import CrashAt, Race, Recover, Resume, Start, TwinRecover

runner = pytest.importorskip("fuzz.runner")


@pytest.fixture
def session(adapter, tmp_path, request):
    name = request.param
    variant = next(v for v in adapter.variants() if v.name == name)
    return runner.Session(adapter, variant, tmp_path / "fuzz", runner.Settings(op_timeout=60))


def rows_of(case, seq):
    return case.ledger.db.execute(
        "select branch, task, value, pid, racer from effects where seq = ? order by rowid", [seq]
    ).fetchall()


@pytest.mark.parametrize("session", ["graphflow-loop-step-sqlite", "swarm-handoff-hitl-json"],
                         indirect=True)
@pytest.mark.parametrize("phase", ["before_effect", "in_flight", "after_commit"])
def test_sigkill_barrier_kills_inside_the_intended_task_and_phase(session, workflow, phase):
    case = session.case(workflow)
    try:
        first_pid = case._worker().process.pid
        obs = case.apply(Start("t0", crash=CrashAt(1, phase, "sigkill")))
        assert obs.outcome == "crashed"
        assert case.worker.process.pid != first_pid  # killed; a fresh worker reopened the store
        fired = [(b, t, v) for b, t, v, _, _ in rows_of(case, case.seq)]
        assert fired == ([] if phase == "before_effect" else [("t0", 1, None)])
        obs = case.apply(Recover("t0"))
        assert obs.outcome in ("interrupted", "rejected", "completed")
    finally:
        case.close()


@pytest.mark.parametrize("session", ["graphflow-split-hitl-sqlite", "swarm-handoff-step-json"],
                         indirect=True)
@pytest.mark.parametrize("forced", [False, True])
def test_race_runs_k_processes_on_one_store(session, workflow, forced):
    case = session.case(workflow)
    try:
        case.apply(Start("t0"))
        main_pid = case.worker.process.pid
        obs = case.apply(Race("t0", values=("a", "b", "a"), forced=forced))
        outcomes = obs.outcome.split("|")
        assert len(outcomes) == 3
        rows = rows_of(case, case.seq)
        assert all(pid != main_pid and 1 <= racer <= 3 for *_, pid, racer in rows)
        # One process per racer: a racer's rows all carry one pid, and racers never share one.
        by_racer = {}
        for *_, pid, racer in rows:
            by_racer.setdefault(racer, set()).add(pid)
        pids = [p for ps in by_racer.values() for p in ps]
        assert all(len(ps) == 1 for ps in by_racer.values()) and len(set(pids)) == len(pids)
    finally:
        case.close()


@pytest.mark.parametrize("session", ["graphflow-loop-step-json", "graphflow-split-hitl-sqlite"],
                         indirect=True)
def test_twin_recover_recovers_both_copies(session, workflow):
    case = session.case(workflow)
    try:
        case.apply(Start("t0"))
        case.apply(Resume("t0", value="a", crash=CrashAt(3, "before_effect", "sigkill")))
        obs = case.apply(TwinRecover("t0"))
        assert obs.twin is not None
        assert obs.outcome in ("completed", "rejected") and obs.twin.outcome in ("completed", "rejected")
        branches = {b for b, *_ in rows_of(case, case.seq)}
        assert branches <= {"t0", "t0~twin"}
    finally:
        case.close()
