"""The AutoGen case's machinery, in process: runs, crash points, query, tamper, clone, fork.

These tests never assert a verdict about AutoGen: only that the adapter does what it says (the
crash fires in the intended task and phase, the ledger shows which effects fired, query reads
what the run stored, tamper changes what is stored, a clone is byte for byte).
"""

from __future__ import annotations

import json
import threading

import pytest

from adapters.protocol import (
    CrashAt,
    Durable,
    Fork,
    Recover,
    Refused,
    Resume,
    Start,
    Unreadable,
    Workflow,
    forge,
    forge_parts,
)
from adapters.calls import CALL_LOG
from refmodel.workflow import sorted_pairs

ALL = [
    f"{team}-{gate}-{save}-{store}"
    for team, gate in (("graphflow", "loop"), ("graphflow", "loopany"), ("graphflow", "split"),
                       ("swarm", "handoff"))
    for save in ("hitl", "step")
    for store in ("json", "sqlite")
]
SQLITE = [n for n in ALL if n.endswith("sqlite")]


@pytest.mark.parametrize("name", ALL)
def test_start_and_resume_run_the_workflow_and_query_reads_it(make_driver, name):
    d = make_driver(name)
    assert d.case.query("t0").status == "new"
    outcome, rows, _ = d.run(Start("t0"))
    assert (outcome, rows) == ("interrupted", [("t0", 1, None)])
    view = d.case.query("t0")
    assert (view.status, view.done, view.pending) == ("interrupted", (1,), 2)
    outcome, rows, _ = d.run(Resume("t0", value="b"))
    assert (outcome, rows) == ("completed", [("t0", 2, "b"), ("t0", 3, None)])
    view = d.case.query("t0")
    assert (view.status, view.done, view.answers) == ("completed", (1, 2, 3), ((2, "b"),))
    assert threading.active_count() == 1  # nothing left running that would spoil a later fork()


@pytest.mark.parametrize("gate_shape", ["loop", "loopany", "split", "handoff"])
@pytest.mark.parametrize("gates", [{1}, {3}, {1, 3}, set()])
def test_gates_at_either_end(make_driver, gate_shape, gates):
    from adapters.protocol import Workflow

    team = "swarm" if gate_shape == "handoff" else "graphflow"
    d = make_driver(f"{team}-{gate_shape}-step-sqlite", Workflow(3, gates, ("a", "b")))
    outcome, _, _ = d.run(Start("t0"))
    fired = []
    while outcome == "interrupted":
        pending = d.case.query("t0").pending
        outcome, rows, _ = d.run(Resume("t0", value="a"))
        fired.append(pending)
    assert outcome == "completed" and fired == sorted(gates)
    view = d.case.query("t0")
    assert view.done == (1, 2, 3) and dict(view.answers) == {g: "a" for g in gates}


PHASE_ROWS = {  # Resume(a) from gate 2 of Workflow(3, {2}), crash at task 3
    "before_effect": [("t0", 2, "a")],
    "in_flight": [("t0", 2, "a"), ("t0", 3, None)],
    "after_commit": [("t0", 2, "a"), ("t0", 3, None)],
}


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("phase", sorted(PHASE_ROWS))
def test_exception_crash_fires_in_the_intended_task_and_phase(make_driver, name, phase):
    d = make_driver(name)
    d.run(Start("t0"))
    # Task 3 is the last: its after_commit fires when the run returns (EngineHooks.run_returned).
    outcome, rows, error = d.run(Resume("t0", value="a", crash=CrashAt(3, phase)))
    assert outcome == "crashed", error
    assert rows == PHASE_ROWS[phase]
    # A replacement worker opens the same workdir and can recover the thread.
    d.reopen()
    outcome, _, error = d.run(Recover("t0"))
    assert outcome in ("completed", "interrupted"), error
    assert d.case.query("t0").status in ("completed", "interrupted")


@pytest.mark.parametrize("name", ALL)
def test_after_commit_of_a_middle_task_fires_when_the_next_begins(make_driver, name):
    d = make_driver(name)
    outcome, rows, _ = d.run(Start("t0", crash=CrashAt(1, "after_commit")))
    assert outcome == "crashed" and rows == [("t0", 1, None)]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("how", ["corrupt", "invalid", "forged"])
def test_tamper_changes_what_is_stored(make_driver, name, how, workflow):
    d = make_driver(name)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a"))
    before = d.case.store.latest("t0")
    view = d.case.query("t0")
    d.case.tamper("t0", how)
    after = d.case.store.latest("t0")
    assert after != before
    if how == "corrupt":
        with pytest.raises(ValueError):
            json.loads(after)
        with pytest.raises(Unreadable):
            d.case.query("t0")
    elif how == "invalid":
        json.loads(after)  # still decodes
        assert not d.case.query("t0").is_valid(workflow)
    else:
        durable = Durable(view.done, sorted_pairs(view.answers), view.pending)
        fake = forge(workflow, durable)
        tampered = d.case.query("t0")
        assert (tampered.done, tampered.answers) == (fake.done, fake.answers)
        assert tampered.is_valid(workflow)


@pytest.mark.parametrize("name", ["graphflow-loop-hitl-json", "swarm-handoff-step-sqlite"])
@pytest.mark.parametrize("op", [Resume("t0", value="a"), Recover("t0")])
def test_a_saved_state_that_does_not_parse_is_refused_not_a_tool_error(make_driver, name, op):
    # The documented persistence's load step (json.load, then load_state) refuses a corrupted
    # file loudly: a refusal (rejected, with the decoder's words), never a HarnessError.
    d = make_driver(name)
    d.run(Start("t0"))
    d.case.tamper("t0", "corrupt")
    outcome, rows, error = d.run(op)
    assert outcome == "rejected" and rows == []
    assert isinstance(error, Refused) and "not JSON" in str(error), repr(error)


@pytest.mark.parametrize("name", ["graphflow-loop-hitl-sqlite", "swarm-handoff-hitl-json"])
def test_a_resume_of_a_state_that_neither_asks_nor_ended_is_a_noop_ok(make_driver, name):
    # The HITL loop answers only a state that asks, so it makes no run call: the no-op label
    # ``ok`` (Case.run), never a HarnessError.  Here the state is a forgery of the done log
    # (load_state takes it); a racer that loads the winner's run mid-way is the other way in.
    d = make_driver(name)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a"))
    d.case.tamper("t0", "forged", "done")
    assert d.case.query("t0").status == "incomplete"
    outcome, rows, error = d.run(Resume("t0", value="a"))
    assert (outcome, rows, error) == ("ok", [], None)


@pytest.mark.parametrize("name", ["graphflow-loop-step-json", "swarm-handoff-hitl-sqlite"])
def test_clone_store_is_byte_for_byte(make_driver, name, tmp_path):
    d = make_driver(name)
    d.run(Start("t0", crash=CrashAt(2, "before_effect")))  # leaves an outstanding input too
    d.run(Recover("t0"))
    dest = tmp_path / "clone"
    dest.mkdir()
    d.case.clone_store(dest)
    # The call log (``calls.jsonl``) is ours, kept for reproduction scripts: not the store.
    src_files = sorted(p.relative_to(d.workdir) for p in d.workdir.rglob("*")
                       if p.is_file() and p.name != CALL_LOG)
    dst_files = sorted(p.relative_to(dest) for p in dest.rglob("*") if p.is_file())
    assert src_files == dst_files and src_files
    for rel in src_files:
        assert (d.workdir / rel).read_bytes() == (dest / rel).read_bytes()


@pytest.mark.parametrize("name", SQLITE)
def test_fork_makes_a_queryable_branch(make_driver, name):
    d = make_driver(name)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a"))
    outcome, rows, error = d.run(Fork("t0", gate=2, value="b", new_thread="f1"))
    assert outcome == "completed", error
    assert all(branch == "f1" for branch, _, _ in rows)
    assert d.case.query("f1").status == "completed"
    assert d.case.query("t0").answers == ((2, "a"),)  # the source is untouched
    history = d.case.store.history("f1")
    assert history[0][1] == "interrupt:t2"  # the branch starts at the copied checkpoint


@pytest.mark.parametrize("name", ALL)
def test_bad_output_reaches_the_store_or_is_refused(make_driver, name, workflow):
    d = make_driver(name)
    outcome, rows, error = d.run(Start("t0", bad_output=1))
    assert rows == [("t0", 1, None)]  # the task ran and fired its effect
    stored = d.case.query("t0")
    persisted = "<bad>" in stored.done
    refused = outcome == "rejected"
    assert persisted or refused, (outcome, stored)
    print(f"{name}: bad output {'persisted' if persisted else 'refused'} ({outcome})")


def test_resume_with_a_gate_it_was_not_shown_is_nothing_to_do(make_driver):
    d = make_driver("graphflow-loop-hitl-sqlite")
    d.run(Start("t0"))
    outcome, rows, _ = d.run(Resume("t0", value="a", gate=3))
    assert rows == [] and outcome in ("interrupted", "rejected")


TWO_GATES = Workflow(3, {1, 3}, ("a", "b"))


@pytest.mark.parametrize("name", [n for n in ALL if n.endswith("-json")])
@pytest.mark.parametrize("part", ["done", "answer:1", "pending"])
def test_tamper_forged_by_part_writes_that_part(make_driver, name, part):
    """Each part as ``forge(part)`` says; ``pending`` alone removes the gate's open request
    message (the saved team state's record of the pending gate), the outputs untouched."""
    d = make_driver(name, TWO_GATES)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a"))  # done (1, 2), gate 1 answered, gate 3 pending
    view = d.case.query("t0")
    durable = Durable(view.done, sorted_pairs(view.answers), view.pending)
    assert part in forge_parts(TWO_GATES, durable)
    d.case.tamper("t0", "forged", part)
    got, fake = d.case.query("t0"), forge(TWO_GATES, durable, part)
    assert (got.done, got.answers, got.pending) == (fake.done, fake.answers, fake.pending)


@pytest.mark.parametrize("name", ["graphflow-loop-step-json", "graphflow-split-step-json",
                                  "swarm-handoff-step-json"])
def test_tamper_forged_pending_adds_the_request_of_a_gate_not_asked(make_driver, name):
    d = make_driver(name, TWO_GATES)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a", crash=CrashAt(3, "before_effect")))
    assert d.case.query("t0").pending is None  # task 2 saved, gate 3 not asked
    d.case.tamper("t0", "forged", "pending")
    assert d.case.query("t0").pending == 3


@pytest.mark.parametrize("name", ["graphflow-loop-hitl-json", "swarm-handoff-step-sqlite"])
@pytest.mark.parametrize("part", ["done", "pending"])
def test_recover_of_a_forged_unfinished_state_calls_autogen(make_driver, name, part):
    """A forgery that leaves the saved state neither asking nor finished, then recover: the
    application continues the loaded team with ``run()`` (AutoGen decides), never a tool
    error for want of an outstanding run."""
    from adapters.protocol import HarnessError

    d = make_driver(name, TWO_GATES)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a"))
    d.case.tamper("t0", "forged", part)
    assert d.case.query("t0").status == "incomplete"
    outcome, _, exc = d.run(Recover("t0"))
    assert not isinstance(exc, HarnessError), exc
