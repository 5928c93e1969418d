"""The LangGraph adapter across processes: a SIGKILL lands inside the intended task and phase
and a fresh worker carries on from the store; a race really runs k processes on one store, all
of which have read the interrupted checkpoint before any writes; repro scripts run standalone."""

from __future__ import annotations


import pytest
from langgraph_testkit import forced_race, job, run_op, spawn

from adapters.protocol import CrashAt, Recover, Resume, Start

SIGKILLED = -9


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update",
                                  "postgres-func-sync-head-update"])
@pytest.mark.parametrize("phase", ["before_effect", "in_flight", "after_commit"])
def test_sigkill_lands_in_the_intended_task(name, phase, variant, workflow, open_case, ledger,
                                            tmp_path):
    v = variant(name)
    workdir = tmp_path / "case"
    case = open_case(v, workflow, workdir)  # the owner of the store (and of its database)
    run_op(case, Start("t0"), 0, ledger)
    op = Resume("t0", value="a", crash=CrashAt(2, phase, "sigkill"))
    proc = spawn(job(v, workflow, workdir, ledger, op, 1))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == SIGKILLED, err[-2000:]
    fired = ledger.rows(1)
    expected = {"before_effect": [], "in_flight": [("t0", 2, "a")],
                "after_commit": [("t0", 2, "a")]}[phase]
    assert fired == expected
    # A fresh worker (this process, reopening) reads the store and recovers on it.
    again = open_case(v, workflow, workdir)
    again.query("t0")
    outcome, rows, _ = run_op(again, Recover("t0"), 2, ledger)
    assert outcome in ("interrupted", "completed", "rejected")
    assert all(branch == "t0" for branch, _, _ in rows)


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update",
                                  "postgres-graph-sync-head-update",
                                  "sqlite-graph-sync-cpid-update", "sqlite-func-sync-map-update"])
def test_a_forced_race_runs_k_processes_that_all_read_first(name, variant, workflow, open_case,
                                                            ledger, tmp_path):
    k = 3
    v = variant(name)
    workdir = tmp_path / "case"
    case = open_case(v, workflow, workdir)
    run_op(case, Start("t0"), 0, ledger)
    replies = forced_race(v, workflow, workdir, ledger, 1, ["ab"[i % 2] for i in range(k)])
    pids = {reply["pid"] for reply in replies}
    assert len(pids) == k
    assert {pid for pid in ledger.db.execute("select pid from effects where seq = 1").fetchall()
            for pid in pid} <= pids
    case.query("t0")


@pytest.mark.parametrize("task, phase, lost", [(1, "after_commit", True),
                                               (2, "before_effect", True),
                                               (2, "in_flight", False)])
def test_the_barrier_variant_reaches_the_documented_async_loss_as_a_d(task, phase, lost):
    """``-barrier`` holds task t's saves until task t + 1 begins: a SIGKILL at t's
    ``after_commit`` or t + 1's ``before_effect`` lands inside the save and loses task t
    (durability='async' documents it: a D with LangGraph's own words, and the example goes on);
    once t + 1 began, t's saves are done, so a SIGKILL in t + 1's effect loses nothing of t."""
    from fuzz.replay import Replayer
    from fuzz.trace import Trace
    from refmodel import Query, Workflow

    linear = Workflow(3, frozenset(), ("a", "b"))
    ops = (Start("t0", crash=CrashAt(task, phase, "sigkill")), Recover("t0"), Query("t0"))
    result = Replayer(target="langgraph").replay_trace(
        Trace(linear, ops, "langgraph", "sqlite-graph-async-head-update-barrier"))
    if lost:
        # The lost save is the documented D (StateMismatch); the recovery then runs task t
        # again and fires its effect twice: EO under the same citation (a D's consequence,
        # docs/contract.md §5), which is what the trace reports.
        assert (result.status, result.category, result.verdict) == ("CHANGED", "Replay", "D")
        assert "'async'" in result.detail  # the citation of the durability docstring
        seen = [d.divergence.category for d in result.judged.deviations_seen]
        assert seen[:2] == ["StateMismatch", "Replay"]
    else:
        assert result.status == "FIXED", result.detail


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update", "sqlite-graph-async-head-update",
                                  "sqlite-func-exit-head-update", "memory-graph-sync-head-update",
                                  "postgres-graph-sync-head-update"])
def test_a_reused_worker_leaves_nothing_of_a_case_and_observes_what_a_fresh_one_does(
        name, adapter, variant, workflow, tmp_path):
    """``reuse_worker`` is declared for the built-in savers: one worker serves the cases in
    turn, and after each (an interrupt, an injected exception, a recovery, a fork, a tamper) no
    thread and no file outside the case's directory is left (``Session.left_behind`` would
    count it, and the worker would exit instead), and every observation equals a fresh
    worker's."""
    from adapters.protocol import Fork, Tamper
    from fuzz.runner import Session, Settings
    from fuzz.testing import run_cases

    v = variant(name)
    assert adapter.tuning(v).reuse_worker
    ops = [Start("t0"), Resume("t0", value="a", crash=CrashAt(2, "in_flight", "exception")),
           Recover("t0"), Resume("t0", value="a"), Fork("t0", gate=2, value="b", new_thread="t1")]
    if "tamper" in adapter.capabilities(v).operations:
        ops.append(Tamper("t1", how="corrupt"))
    seen = {}
    for reuse in (True, False):
        with Session(adapter, v, tmp_path / str(reuse), Settings(reuse=reuse)) as session:
            pids, observed = run_cases(session, workflow, ops, 3)
            left, last = session.left_behind, session.last_left
        seen[reuse] = observed
        assert len(set(pids)) == (1 if reuse else 3)
        assert left == 0, last
    assert seen[True] == seen[False]
    assert seen[True][0] == seen[True][1] == seen[True][2]


@pytest.mark.parametrize("name", ["postgres-graph-sync-head-update",
                                  "sqlite-graph-sync-head-update"])
def test_a_case_whose_worker_was_killed_is_cleaned_up_where_its_store_outlives_its_directory(
        name, adapter, variant, workflow, tmp_path):
    """``Tuning.needs_cleanup``: a PostgreSQL case's database outlives its directory, so
    after a case whose last worker was killed (it never reached ``Case.close``, which drops the
    database it created) the engine runs the adapter's cleanup in a worker of its own, and no
    database is left.  A SQLite case's store is in its directory: no cleanup is declared, none
    runs, and the directory goes all the same."""
    import json

    from adapters.langgraph import store as lgstore
    from fuzz.runner import Session, Settings

    v = variant(name)
    assert adapter.tuning(v).needs_cleanup == (name.startswith("postgres"))
    with Session(adapter, v, tmp_path / "cases", Settings(keep_cases=True)) as session:
        runner = session.case(workflow)
        try:
            killed = runner.apply(Start("t0", crash=CrashAt(1, "after_commit", "sigkill")))
        finally:
            runner.close()
        assert killed.outcome == "crashed"
        record = runner.workdir / lgstore.PG_FILE
        if name.startswith("postgres"):
            dbname = json.loads(record.read_text())["dbname"]
            assert not lgstore.database_exists(dbname)  # the killed owner never dropped it
        else:
            assert not record.exists() and (runner.workdir / lgstore.SQLITE_FILE).exists()
