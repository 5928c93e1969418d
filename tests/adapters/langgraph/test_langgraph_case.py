"""The LangGraph adapter's case, in process: crash points, ledger rows, query, fork, spellings.

These tests check the machinery, never a verdict: where LangGraph may do either of two things
(accept or refuse an out-of-schema output, keep or drop a fork's answer), they assert that one
of them happened and that the store and the ledger agree with it.
"""

from __future__ import annotations

import pytest
from langgraph_testkit import run_op

from adapters.protocol import CrashAt, Fork, Recover, Resume, Start, StateView, Workflow

DEFAULTS = ["sqlite-graph-sync-head-update", "sqlite-func-sync-head-update",
            "memory-graph-sync-head-update", "postgres-graph-sync-head-update"]


@pytest.mark.parametrize("name", DEFAULTS)
def test_query_reads_what_a_run_stored(name, variant, workflow, open_case, ledger):
    case = open_case(variant(name), workflow)
    assert case.query("t0") == StateView.of(workflow, (), {}, None)  # nothing stored: new
    outcome, rows, hooks = run_op(case, Start("t0"), 0, ledger)
    assert outcome == "interrupted" and rows == [("t0", 1, None)] and hooks.fired == 1
    view = case.query("t0")
    assert (view.status, view.done, view.pending) == ("interrupted", (1,), 2)
    outcome, rows, hooks = run_op(case, Resume("t0", value="a"), 1, ledger)
    assert outcome == "completed" and rows == [("t0", 2, "a"), ("t0", 3, None)]
    assert case.query("t0") == StateView.of(workflow, (1, 2, 3), {2: "a"}, None)


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update", "sqlite-func-sync-head-update"])
@pytest.mark.parametrize("phase", ["before_effect", "in_flight", "after_commit"])
@pytest.mark.parametrize("task", [1, 3])
def test_exception_crash_fires_inside_the_intended_task(name, phase, task, variant, open_case,
                                                        ledger):
    wf = Workflow(3, frozenset(), ("a",))
    case = open_case(variant(name), wf)
    outcome, rows, hooks = run_op(case, Start("t0", crash=CrashAt(task, phase)), 0, ledger)
    fired_through = task - 1 if phase == "before_effect" else task
    # after_commit of the last task fires when the run returns, outside the framework.
    assert outcome == "crashed"
    assert rows == [("t0", t, None) for t in range(1, fired_through + 1)]
    assert hooks.fired == len(rows)
    # The store is readable after the crash, and a recover runs on it.
    case.query("t0")
    outcome, rows, _ = run_op(case, Recover("t0"), 1, ledger)
    assert outcome in ("completed", "rejected")
    assert all(branch == "t0" for branch, _, _ in rows)


FORK_CALLS = {
    "update": ["update_state(<gate checkpoint>, None)", "invoke(None, checkpoint_id=<tip>",
               "invoke(Command(resume='b'), checkpoint_id=<tip>"],
    "copy": ["update_state(<gate checkpoint>, None, as_node=__copy__)",
             "invoke(None, checkpoint_id=<tip>", "invoke(Command(resume='b'), checkpoint_id=<tip>"],
    "travel": ["invoke(None, checkpoint_id=<tip>", "invoke(Command(resume='b'), thread head"],
    "command": ["invoke(Command(resume='b'), checkpoint_id=<tip>"],
}


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update", "sqlite-graph-sync-head-copy",
                                  "sqlite-graph-sync-head-travel", "sqlite-graph-sync-head-command",
                                  "sqlite-func-sync-head-travel", "sqlite-func-sync-head-copy",
                                  "sqlite-func-sync-head-command",
                                  "memory-graph-sync-head-update",
                                  "postgres-graph-sync-head-update"])
def test_a_forked_branch_is_queryable(name, variant, workflow, open_case, ledger):
    v = variant(name)
    case = open_case(v, workflow)
    run_op(case, Start("t0"), 0, ledger)
    run_op(case, Resume("t0", value="a"), 1, ledger)
    before = case.query("t0")
    outcome, rows, _ = run_op(case, Fork("t0", gate=2, value="b", new_thread="f1"), 2, ledger)
    assert outcome in ("interrupted", "completed", "rejected")
    calls = case.log[-1].removeprefix("fork: ").split("; ")
    expected = FORK_CALLS[v.options["fork"]]
    # The spelling's calls, in order; the final resume is skipped when the branch did not
    # stop at the gate again (nothing to answer), so it may be missing.
    assert len(expected) - 1 <= len(calls) <= len(expected)
    assert all(c.startswith(e) for c, e in zip(calls, expected, strict=False))
    assert all(branch == "f1" for branch, _, _ in rows)  # labelled with the new branch
    branch = case.query("f1")
    assert isinstance(branch, StateView)
    # The source thread still reads its own branch, not the fork's.
    assert case.query("t0") == before
    driver = case.driver
    assert driver.tip("f1") != driver.tip("t0")


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update", "sqlite-graph-sync-head-copy",
                                  "sqlite-func-sync-head-copy"])
def test_a_branch_whose_fork_crashed_can_be_forked_again(name, variant, open_case, ledger):
    """The branch's history includes the checkpoint it was forked from: a ``__copy__`` fork
    checkpoint's parent is not that source, so the adapter records it (it used to lose it and
    answer with a LookupError of its own, which is no refusal of LangGraph's)."""
    case = open_case(variant(name), Workflow(1, {1}, ("a", "b")))
    assert run_op(case, Start("t0"), 0, ledger)[0] == "interrupted"
    crash = CrashAt(1, "before_effect", "exception")
    fork = Fork("t0", gate=1, value="a", new_thread="f1", crash=crash)
    assert run_op(case, fork, 1, ledger)[0] == "crashed"
    outcome, rows, _ = run_op(case, Fork("f1", gate=1, value="b", new_thread="f2"), 2, ledger)
    assert outcome == "completed"
    assert [(branch, task, value) for branch, task, value in rows] == [("f2", 1, "b")]


@pytest.mark.parametrize("name", ["sqlite-func-sync-head-command", "sqlite-graph-sync-head-command"])
def test_a_fork_source_the_thread_moved_past_reads_without_its_finished_tasks(name, variant,
                                                                            open_case, ledger):
    """start, resume 'a' (the run finishes from the gate's checkpoint), then a fork of that
    checkpoint whose run dies before task 1: the branch's tip is still the gate's checkpoint,
    which holds the finished run's writes.  The thread has moved past it, so a resume there
    reruns task 1 (LangGraph's ``_first``): the branch asks at gate 1, it has not done task 1
    (the harness used to read the other run's task 1 as the branch's: StateMismatch-1361e1a6b365,
    withdrawn)."""
    wf = Workflow(1, {1}, ("a", "b"))
    case = open_case(variant(name), wf)
    run_op(case, Start("t0"), 0, ledger)
    assert run_op(case, Resume("t0", value="a"), 1, ledger)[0] == "completed"
    crash = CrashAt(1, "before_effect", "exception")
    assert run_op(case, Fork("t0", gate=1, value="a", new_thread="f1", crash=crash), 2,
                  ledger)[0] == "crashed"
    assert case.query("f1") == StateView.of(wf, (), {}, 1)
    assert case.query("t0") == StateView.of(wf, (1,), {1: "a"}, None)


# A Command(resume) addressed at a checkpoint the thread has moved past writes that run's task
# results (and the interrupt it stops at) into that checkpoint, no new one: the branch's tip,
# shared with the writes of the runs that went on from it.  The reader counts the results the
# branch's own last run finished there, and no others (sqlite-func-sync-head-copy/
# StateMismatch-8b00bfa0aa20 and sqlite-func-sync-head-command/StateMismatch-79ae269f3839 read
# "done []" where LangGraph held task 1's result: false ✗, 2026-12-07).


def test_a_resume_at_a_tip_the_thread_moved_past_reads_the_tasks_it_finished(variant, open_case,
                                                                             ledger):
    """start; a __copy__ fork of gate 1 (its checkpoint is the newest); a resume of t0, which
    reaches its tip by id and finishes task 1 there, then asks gate 2."""
    wf = Workflow(2, {1, 2}, ("a", "b"))
    case = open_case(variant("sqlite-func-sync-head-copy"), wf)
    run_op(case, Start("t0"), 0, ledger)
    assert run_op(case, Fork("t0", gate=1, value="a", new_thread="f1"), 1,
                  ledger)[0] == "interrupted"
    branch = case.query("f1")
    outcome, rows, _ = run_op(case, Resume("t0", value="a"), 2, ledger)
    assert (outcome, rows) == ("interrupted", [("t0", 1, "a")])
    assert "checkpoint_id=<tip>" in case.log[-1]  # the tip the thread moved past, by its id
    assert case.query("t0") == StateView.of(wf, (1,), {1: "a"}, 2)
    assert case.query("f1") == branch


@pytest.mark.parametrize("kind", ["exception", "sigkill"])
def test_a_fork_at_a_source_the_thread_moved_past_reads_the_tasks_it_finished(kind, variant,
                                                                             open_case, ledger,
                                                                             tmp_path):
    """start; resume 'a' (the run finishes: the gate's checkpoint holds its task 1 and task 2
    results); a command fork of gate 1 there that dies after task 1.  The branch's tip is that
    checkpoint: task 1 is the branch's (its run finished it there), task 2 is t0's only.  With
    a SIGKILL the branch's run records its finished task before it dies."""
    from langgraph_testkit import spawn

    v = variant("sqlite-func-sync-head-command")
    wf = Workflow(2, {1}, ("a", "b"))
    workdir = tmp_path / "case"
    case = open_case(v, wf, workdir)
    run_op(case, Start("t0"), 0, ledger)
    assert run_op(case, Resume("t0", value="a"), 1, ledger)[0] == "completed"
    fork = Fork("t0", gate=1, value="a", new_thread="f1", crash=CrashAt(1, "after_commit", kind))
    if kind == "exception":
        assert run_op(case, fork, 2, ledger)[0] == "crashed"
    else:
        proc = spawn({"variant": v.name, "workflow": wf.to_json(), "workdir": str(workdir),
                      "ledger": str(ledger.path), "op": fork.to_json(), "seq": 2})
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == -9, err[-2000:]
        case = open_case(v, wf, workdir)  # a fresh worker reads the store
    assert ledger.rows(2) == [("f1", 1, "a")]
    assert case.query("f1") == StateView.of(wf, (1,), {1: "a"}, None)
    assert case.query("t0") == StateView.of(wf, (1, 2), {1: "a"}, None)


def test_a_command_fork_of_a_gate_whose_checkpoint_asks_the_next_gate_is_not_expressible(
        variant, open_case, ledger):
    """start; resume 'a' (task 1 returns, gate 2 asks, in the same checkpoint); a command fork
    of gate 1.  No checkpoint asks gate 1 any more, and a Command(resume) at the one that asked
    it answers gate 2: the adapter says it cannot express the fork (a tool error), where it
    used to resume gate 2 (sqlite-func-sync-head-command/DoubleConsume-80a1cc254014, a false
    ✗).  Nothing runs, nothing is written."""
    from adapters.protocol import HarnessError
    from fuzz.internal.hooks import EngineHooks

    wf = Workflow(2, {1, 2}, ("a", "b"))
    case = open_case(variant("sqlite-func-sync-head-command"), wf)
    run_op(case, Start("t0"), 0, ledger)
    assert run_op(case, Resume("t0", value="a"), 1, ledger)[0] == "interrupted"

    def stored():
        return (case.query("t0"), sorted(r.checkpoint_id for r in case.store.rows("t0")),
                repr(case.driver._saved("t0").pending_writes))

    before = stored()
    fork = Fork("t0", gate=1, value="a", new_thread="f1")
    with pytest.raises(HarnessError, match="not expressible with the command spelling"):
        case.run(fork, EngineHooks(fork, seq=2, branch="f1", ledger=ledger))
    assert ledger.rows(2) == []
    assert stored() == before
    assert case.driver.table.get("thread:f1") is None
    # The gate still asked (gate 2) forks as before.
    outcome, rows, _ = run_op(case, Fork("t0", gate=2, value="b", new_thread="f2"), 3, ledger)
    assert (outcome, rows) == ("completed", [("f2", 2, "b")])


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update",
                                  "sqlite-graph-sync-head-update-pydantic",
                                  "memory-graph-sync-head-update"])
@pytest.mark.parametrize("task", [1, 2])
def test_out_of_schema_output_is_stored_or_refused(name, task, variant, workflow, open_case,
                                                   ledger):
    case = open_case(variant(name), workflow)
    outcome, rows, _ = run_op(case, Start("t0", bad_output=task), 0, ledger)
    if task == 2:  # the gate: answer it, with the bad output
        outcome, rows, _ = run_op(case, Resume("t0", value="a", bad_output=2), 1, ledger)
    stored = "<bad>" in case.query("t0").done
    refused = outcome == "rejected"
    assert stored or refused  # record which: one of the two happened
    assert (task, None if task != 2 else "a") in [(t, v) for _, t, v in rows]


@pytest.mark.parametrize("name,expected", [
    ("sqlite-graph-sync-head-update", "thread head"),
    ("sqlite-graph-sync-cpid-update", "checkpoint_id=<tip>"),
    ("sqlite-graph-sync-map-update", "interrupt id"),
    ("sqlite-graph-sync-mapstrict-update", "interrupt id"),
    ("sqlite-func-sync-map-update", "interrupt id"),
])
def test_each_resume_spelling_makes_its_own_call(name, expected, variant, workflow, open_case,
                                                 ledger):
    case = open_case(variant(name), workflow)
    run_op(case, Start("t0"), 0, ledger)
    outcome, rows, _ = run_op(case, Resume("t0", value="b"), 1, ledger)
    assert expected in case.log[-1]
    assert outcome == "completed" and ("t0", 2, "b") in rows
    # A second resume (nothing pending) is still spelled the same way.
    run_op(case, Resume("t0", value="a"), 2, ledger)
    assert expected in case.log[-1]


def test_map_resume_without_pending_resends_the_last_interrupt_id(variant, workflow, open_case,
                                                                  ledger):
    case = open_case(variant("sqlite-graph-sync-map-update"), workflow)
    run_op(case, Start("t0"), 0, ledger)
    first = case.driver.pending_interrupt_ids("t0")
    assert len(first) == 1
    run_op(case, Resume("t0", value="a"), 1, ledger)
    assert case.driver.pending_interrupt_ids("t0") == []
    assert case.driver.last_interrupt_ids("t0") == first


def test_a_branch_that_is_not_the_newest_is_addressed_by_id(variant, workflow, open_case, ledger):
    case = open_case(variant("sqlite-graph-sync-head-update"), workflow)
    run_op(case, Start("t0"), 0, ledger)
    run_op(case, Fork("t0", gate=2, value="b", new_thread="f1"), 1, ledger)
    run_op(case, Resume("t0", value="a"), 2, ledger)
    assert "checkpoint_id=<tip>" in case.log[-1]


def test_recover_with_nothing_stored_starts_from_the_input(variant, open_case, ledger):
    wf = Workflow(2, frozenset(), ("a",))
    case = open_case(variant("memory-graph-exit-head-update"), wf)
    case.driver.table.set("thread:t0", {"lg": "t0", "hint": None})
    outcome, rows, _ = run_op(case, Recover("t0"), 0, ledger)
    assert "invoke(input" in case.log[-1]
    assert outcome == "completed" and rows == [("t0", 1, None), ("t0", 2, None)]


def test_a_reopened_case_finds_its_threads(adapter, variant, workflow, open_case, ledger, tmp_path):
    v = variant("sqlite-graph-sync-head-update")
    workdir = tmp_path / "shared"
    case = open_case(v, workflow, workdir)
    run_op(case, Start("t0"), 0, ledger)
    run_op(case, Fork("t0", gate=2, value="a", new_thread="f1"), 1, ledger)
    views = case.query("t0"), case.query("f1")
    case.store.release()
    again = adapter.open(v, workflow, workdir)  # a fresh worker's open
    try:
        assert (again.query("t0"), again.query("f1")) == views
    finally:
        again.store.release()


@pytest.mark.parametrize("name", ["sqlite-func-sync-head-update", "sqlite-graph-sync-head-update"])
def test_hooks_run_on_the_thread_that_called_run(name, variant, workflow, open_case):
    """LangGraph runs @task bodies in executor threads; the adapter relays every hook call to
    the caller's thread (the engine's ledger connection belongs to that thread)."""
    import threading

    from adapters.protocol import Hooks

    class Recording(Hooks):
        threads: set = set()

        def task_begins(self, task):
            self.threads.add(threading.get_ident())

        def effect(self, task, value):
            self.threads.add(threading.get_ident())

        def wants_bad_output(self, task):
            return False

    case = open_case(variant(name), workflow)
    hooks = Recording()
    assert case.run(Start("t0"), hooks) == "interrupted"
    assert case.run(Resume("t0", value="a"), hooks) == "completed"
    assert hooks.threads == {threading.get_ident()}


# A forged or corrupt tamper of one thread can reach a checkpoint another branch depends on:
# the fork's source (``copy``), or the very checkpoint a ``Command(resume)`` at the thread's
# head writes the branch into (functional ``command``).  The reference counts that branch
# damaged (reach ``listing``).  The adapter used to lose track there: a tool error, 9 of 3,966
# examples of a campaign (2026-12-05).  ``run_op`` reports an exception of the adapter as
# "rejected", so each test names what LangGraph does instead.


@pytest.mark.parametrize("name, gates, crash, forked, part, gate, expected", [
    # copy: f1's fork died before its gate, so its gate-1 checkpoint is its fork source, whose
    # interrupt writes t0's forgery deletes; LangGraph runs on from the forged source.
    ("sqlite-func-sync-head-copy", {1}, CrashAt(1, "before_effect", "exception"), "crashed",
     "done", 1, "completed"),
    # functional command: the fork at t0's head writes f1 into that very checkpoint, so t0's
    # forgery of its pending record deletes f1's gate 2.
    ("sqlite-func-sync-head-command", {1, 2}, None, "interrupted", "pending", 2, "completed"),
])
def test_a_branch_forks_after_another_threads_forgery_deleted_its_question(
        name, gates, crash, forked, part, gate, expected, variant, open_case, ledger):
    case = open_case(variant(name), Workflow(2, gates, ("a", "b")))
    run_op(case, Start("t0"), 0, ledger)
    assert run_op(case, Fork("t0", gate=1, value="a", new_thread="f1", crash=crash), 1,
                  ledger)[0] == forked
    case.tamper("t0", "forged", part)
    outcome, _, _ = run_op(case, Fork("f1", gate=gate, value="a", new_thread="f2"), 2, ledger)
    assert outcome == expected


def test_a_tamper_of_bytes_another_tamper_corrupted_leaves_them_as_they_are(
        variant, open_case, ledger):
    wf = Workflow(3, {2, 3}, ("a", "b"))
    case = open_case(variant("sqlite-func-sync-head-command"), wf)
    run_op(case, Start("t1"), 0, ledger)
    assert run_op(case, Fork("t1", gate=2, value="a", new_thread="f2"), 1,
                  ledger)[0] == "interrupted"
    case.tamper("f2", "corrupt")  # the checkpoint t1 and f2 share
    case.tamper("t1", "invalid")  # used to raise the decoder's ValueError
    assert run_op(case, Resume("t1", value="b"), 2, ledger)[0] == "rejected"
