"""Our consume-once guard (``adapters/langgraph/guard.py``, variants
``sqlite-graph-sync-{head,cpid}-update-guarded``): a race of k processes on one interrupt has
exactly one consumer, where the same race without the guard has k; a consumed interrupt refuses a
stale handle; a fork claims under its own key; a resume after a failed or killed consumer
consumes the new answer once; a resume that finds nothing pending runs nothing."""

from __future__ import annotations

import sqlite3

import pytest
from langgraph_testkit import forced_race, job, run_op, spawn

from adapters.protocol import CrashAt, Fork, Resume, Start, StaleResume

GUARDED = "sqlite-graph-sync-head-update-guarded"
GUARDED_CPID = "sqlite-graph-sync-cpid-update-guarded"
PLAIN = "sqlite-graph-sync-head-update"
SIGKILLED = -9


def gate_effects(ledger, seq):
    return [row for row in ledger.rows(seq) if row[1] == 2]


@pytest.mark.parametrize("name,k", [(GUARDED, 2), (GUARDED, 3), (GUARDED_CPID, 3)])
def test_a_forced_race_on_the_guarded_variant_has_exactly_one_consumer(name, k, variant,
                                                                      workflow, open_case,
                                                                      ledger, tmp_path):
    v = variant(name)
    workdir = tmp_path / "case"
    case = open_case(v, workflow, workdir)
    run_op(case, Start("t0"), 0, ledger)
    outcomes = [r["outcome"] for r in forced_race(v, workflow, workdir, ledger, 1, ["a"] * k)]
    assert gate_effects(ledger, 1) == [("t0", 2, "a")]
    assert sorted(outcomes) == ["completed"] + ["rejected: Refused"] * (k - 1)
    state = case.query("t0")
    assert (state.status, list(state.done), dict(state.answers)) == \
        ("completed", [1, 2, 3], {2: "a"})
    with sqlite3.connect(workdir / "checkpoints.sqlite") as db:
        assert db.execute("SELECT state FROM claims").fetchall() == [("consumed",)]


def test_the_same_race_without_the_guard_consumes_more_than_once(variant, workflow, open_case,
                                                                 ledger, tmp_path):
    """The control of the control: the race above does reach LangGraph's LostUpdate."""
    v = variant(PLAIN)
    workdir = tmp_path / "case"
    case = open_case(v, workflow, workdir)
    run_op(case, Start("t0"), 0, ledger)
    forced_race(v, workflow, workdir, ledger, 1, ["a"] * 3)
    assert len(gate_effects(ledger, 1)) > 1


def test_a_stale_handle_is_refused_and_a_fork_claims_under_its_own_key(variant, workflow,
                                                                       open_case, ledger):
    case = open_case(variant(GUARDED), workflow)
    run_op(case, Start("t0"), 0, ledger)
    assert run_op(case, Resume("t0", value="a"), 1, ledger)[:2] == \
        ("completed", [("t0", 2, "a"), ("t0", 3, None)])
    assert run_op(case, StaleResume("t0", gate=2, value="b"), 2, ledger)[:2] == ("rejected", [])
    outcome, rows, _ = run_op(case, Fork("t0", gate=2, value="b", new_thread="f1"), 3, ledger)
    assert (outcome, [r for r in rows if r[1] == 2]) == ("completed", [("f1", 2, "b")])
    assert dict(case.query("f1").answers) == {2: "b"}
    assert dict(case.query("t0").answers) == {2: "a"}


def test_after_a_consumer_failed_in_flight_the_new_answer_is_consumed_once(variant, workflow,
                                                                           open_case, ledger):
    """Unguarded, LangGraph hands the failed task's answer 'a' back to resume('b')."""
    case = open_case(variant(GUARDED), workflow)
    run_op(case, Start("t0"), 0, ledger)
    crashed = Resume("t0", value="a", crash=CrashAt(2, "in_flight", "exception"))
    assert run_op(case, crashed, 1, ledger)[:2] == ("crashed", [("t0", 2, "a")])
    assert case.query("t0").pending == 2
    assert run_op(case, Resume("t0", value="b"), 2, ledger)[:2] == \
        ("completed", [("t0", 2, "b"), ("t0", 3, None)])
    assert dict(case.query("t0").answers) == {2: "b"}
    assert run_op(case, StaleResume("t0", gate=2, value="a"), 3, ledger)[:2] == ("rejected", [])


def test_a_claim_whose_owner_was_killed_before_the_effect_is_taken_over(variant, workflow,
                                                                        open_case, ledger,
                                                                        tmp_path):
    v = variant(GUARDED)
    workdir = tmp_path / "case"
    case = open_case(v, workflow, workdir)
    run_op(case, Start("t0"), 0, ledger)
    op = Resume("t0", value="a", crash=CrashAt(2, "before_effect", "sigkill"))
    proc = spawn(job(v, workflow, workdir, ledger, op, 1))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == SIGKILLED, err[-2000:]
    with sqlite3.connect(workdir / "checkpoints.sqlite") as db:  # the dead owner's claim
        assert db.execute("SELECT state FROM claims").fetchall() == [("claimed",)]
    again = open_case(v, workflow, workdir)
    assert again.query("t0").pending == 2
    assert run_op(again, Resume("t0", value="b"), 2, ledger)[:2] == \
        ("completed", [("t0", 2, "b"), ("t0", 3, None)])


@pytest.mark.parametrize("name", [GUARDED, GUARDED_CPID])
def test_a_resume_that_finds_nothing_pending_runs_nothing(name, variant, workflow, open_case,
                                                         ledger):
    """What a racer arriving after the winner consumed the interrupt finds: the run past the
    gate, nothing asked (here frozen by a crash at task 3).  Unguarded, LangGraph runs task 3
    for it: a second runner of the winner's remaining tasks (campaign 1's LostUpdate)."""
    case = open_case(variant(name), workflow)
    run_op(case, Start("t0"), 0, ledger)
    crashed = Resume("t0", value="a", crash=CrashAt(3, "before_effect", "exception"))
    assert run_op(case, crashed, 1, ledger)[:2] == ("crashed", [("t0", 2, "a")])
    assert case.query("t0").pending is None
    assert run_op(case, Resume("t0", value="b"), 2, ledger)[:2] == ("rejected", [])
    state = case.query("t0")
    assert (list(state.done), dict(state.answers)) == ([1, 2], {2: "a"})
