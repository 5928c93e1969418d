"""The adapter's machinery, in process: crash points, ledger rows, query, tamper, clone, fork.

These tests check what the adapter does to the real framework and its store, never a verdict on
the framework (no test asserts that pydantic-graph has or lacks a bug).
"""

from __future__ import annotations

import json

import pytest

from adapters.protocol import (
    CrashAt,
    Durable,
    Fork,
    HarnessError,
    Recover,
    Resume,
    Start,
    Unreadable,
    Workflow,
    forge,
    forge_parts,
)
from adapters.pydantic_graph.store import LOCK_SUFFIX

FILE_VARIANTS = [
    "file-single-resume_ifp-recover_ifp",
    "file-classes-resume_docs-recover_initialize",
]
ALL_SPELLINGS = [
    "file-single-resume_ifp-recover_ifp",
    "file-single-resume_docs-recover_initialize",
    "file-classes-resume_ifp-recover_initialize",
    "file-classes-resume_docs-recover_ifp",
    "full-single-resume_ifp-recover_initialize",
    "full-single-resume_docs-recover_ifp",
    "simple-single-resume_ifp-recover_ifp",
    "simple-single-resume_docs-recover_initialize",
]
LINEAR = Workflow(3, set(), ("a", "b"))
GATED = Workflow(3, {2}, ("a", "b"))


def stored(h, thread):
    """The thread's JSON snapshots, read directly from its file."""
    return json.loads(h.case.store.path(thread).read_bytes())


def test_every_variant_is_declared_once(adapter):
    names = [v.name for v in adapter.variants()]
    assert len(names) == len(set(names)) == 17
    for v in adapter.variants():
        assert {"backend", "shape", "resume", "recover", "fork"} <= set(v.options)


@pytest.mark.parametrize("name", ALL_SPELLINGS)
def test_start_resume_fork_run_end_to_end(harness, name):
    h = harness(name, GATED)
    assert h.do(Start("t0")) == ("interrupted", [("t0", 1, None)])
    view = h.case.query("t0")
    assert (view.status, view.done, view.pending) == ("interrupted", (1,), 2)
    assert h.do(Resume("t0", value="a")) == ("completed", [("t0", 2, "a"), ("t0", 3, None)])
    view = h.case.query("t0")
    assert (view.status, view.done, view.answers) == ("completed", (1, 2, 3), ((2, "a"),))
    if "fork" in h.adapter.capabilities(h.variant).operations:
        outcome, rows = h.do(Fork("t0", gate=2, value="b", new_thread="f1"))
        assert (outcome, rows) == ("completed", [("f1", 2, "b"), ("f1", 3, None)])
        assert h.case.query("f1").answers == ((2, "b"),)
        assert h.case.query("t0").answers == ((2, "a"),)  # the source branch is untouched


def test_a_gate_at_task_1_is_persisted_before_anything_runs(harness):
    h = harness("file-single-resume_ifp-recover_ifp", Workflow(2, {1}))
    assert h.do(Start("t0")) == ("interrupted", [])
    snapshots = stored(h, "t0")
    assert [(s["node"]["t"], s["status"]) for s in snapshots] == [(1, "created")]
    assert h.case.query("t0").pending == 1


@pytest.mark.parametrize("name", FILE_VARIANTS + ["full-single-resume_ifp-recover_ifp"])
@pytest.mark.parametrize(
    "phase, fired, done",
    [("before_effect", [1], (1,)), ("in_flight", [1, 2], (1,)), ("after_commit", [1, 2], (1, 2))],
)
def test_exception_crash_fires_inside_the_intended_task_and_phase(harness, name, phase, fired,
                                                                  done):
    h = harness(name, LINEAR)
    outcome, rows = h.do(Start("t0", crash=CrashAt(2, phase)))
    assert outcome[0] == "crashed" and f"task 2, {phase}" in outcome[1]
    assert rows == [("t0", t, None) for t in fired]
    view = h.case.query("t0")
    assert view.done == done and view.status == "incomplete"
    if h.variant.options["backend"] == "file":
        last = stored(h, "t0")[-1]
        # after_commit of task 2 fires when task 3 begins: the node that errored is task 3's.
        crashed_node = 3 if phase == "after_commit" else 2
        shape = h.variant.options["shape"]
        task = last["node"]["t"] if shape == "single" else int(last["node"]["node_id"][1:])
        assert (task, last["status"]) == (crashed_node, "error")


def test_after_commit_of_the_last_task_fires_after_the_run_returned(harness):
    h = harness("file-single-resume_ifp-recover_ifp", LINEAR)
    outcome, rows = h.do(Start("t0", crash=CrashAt(3, "after_commit")))
    assert outcome[0] == "crashed"
    assert rows == [("t0", 1, None), ("t0", 2, None), ("t0", 3, None)]
    assert h.case.query("t0").status == "completed"


def test_query_reads_what_the_run_stored(harness):
    h = harness("file-classes-resume_ifp-recover_ifp", GATED)
    h.do(Start("t0"))
    last = stored(h, "t0")[-1]
    assert last["node"] == {"answer": None, "node_id": "T2"} and last["status"] == "created"
    assert last["state"] == {"done": [1], "answers": {}}
    view = h.case.query("t0")
    assert (view.done, view.answers, view.pending) == ((1,), (), 2)
    assert h.case.query("nobody").status == "new"


def test_recover_spellings_leave_different_traces_in_the_store(harness):
    """initialize appends a fresh 'created' snapshot for the crashed node; ifp does not."""
    for name, appended in [("file-single-resume_ifp-recover_initialize", True),
                           ("file-single-resume_ifp-recover_ifp", False)]:
        h = harness(name, LINEAR)
        h.do(Start("t0", crash=CrashAt(2, "before_effect")))
        before = len(stored(h, "t0"))
        outcome, rows = h.do(Recover("t0"))
        snapshots = stored(h, "t0")
        statuses = [s.get("status") for s in snapshots[before - 1:before + 1]]
        if appended:
            assert statuses == ["error", "success"] and rows[0] == ("t0", 2, None)
        else:
            assert len(snapshots) == before and outcome[0] == "rejected"


@pytest.mark.parametrize("name", ["file-single-resume_docs-recover_ifp",
                                  "file-single-resume_ifp-recover_ifp"])
def test_a_resume_answers_the_gate_the_framework_restores(harness, name):
    """No check of the adapter's own stands in for the interrupt identity pydantic-graph lacks:
    a plain resume's answer goes on the gate the framework restores.  (A racer, which names the
    gate it was shown, resumes that gate's snapshot by id: test_racer_gate.py.)"""
    h = harness(name, GATED)
    h.do(Start("t0"))
    outcome, rows = h.do(Resume("t0", value="a"))
    assert (outcome, rows) == ("completed", [("t0", 2, "a"), ("t0", 3, None)])


def test_a_resume_of_a_finished_run_is_refused_by_the_framework(harness):
    h = harness("file-single-resume_ifp-recover_ifp", GATED)
    h.do(Start("t0"))
    h.do(Resume("t0", value="a"))
    outcome, rows = h.do(Resume("t0", value="b"))
    assert outcome[0] == "rejected" and "GraphRuntimeError" in outcome[1] and rows == []


def test_the_docs_idiom_starts_afresh_when_nothing_is_next(harness):
    """question_graph's main: load_next() is None -> a fresh run on the same persistence."""
    h = harness("file-single-resume_docs-recover_ifp", GATED)
    h.do(Start("t0"))
    h.do(Resume("t0", value="a"))
    assert h.do(Resume("t0", value="b")) == ("interrupted", [("t0", 1, None)])


@pytest.mark.parametrize("name", ["file-single-resume_ifp-recover_ifp",
                                  "full-single-resume_ifp-recover_ifp"])
@pytest.mark.parametrize("task", [1, 2])
def test_before_effect_at_a_gate_fires_where_it_asks(harness, name, task):
    """The gate asks when its unanswered node is persisted: the crash point fires right after
    that write (a gate at task 1 too, persisted by initialize), with the pause durable."""
    h = harness(name, Workflow(3, {task}, ("a", "b")))
    outcome, rows = h.do(Start("t0", crash=CrashAt(task, "before_effect")))
    assert outcome[0] == "crashed"
    assert h.case.query("t0").pending == task
    assert rows == [("t0", t, None) for t in range(1, task)]


def test_after_commit_before_a_gate_fires_after_the_commit(harness):
    """Task 1's results become durable in the snapshot of the node after it (the gate)."""
    h = harness("file-single-resume_ifp-recover_ifp", GATED)
    outcome, _ = h.do(Start("t0", crash=CrashAt(1, "after_commit")))
    assert outcome[0] == "crashed"
    assert [s["status"] for s in stored(h, "t0")] == ["success", "created"]
    assert h.case.query("t0").done == (1,)


@pytest.mark.parametrize("name", FILE_VARIANTS)
def test_tamper_corrupt_changes_the_bytes(harness, name):
    h = harness(name, GATED)
    h.do(Start("t0"))
    before = h.case.store.path("t0").read_bytes()
    h.case.tamper("t0", "corrupt")
    after = h.case.store.path("t0").read_bytes()
    assert after != before and before.startswith(after)
    with pytest.raises(Unreadable):
        h.case.query("t0")


def test_tamper_corrupt_as_a_stale_lock_leaves_the_lock_file(harness):
    h = harness("file-single-resume_ifp-recover_ifp-stale_lock", GATED)
    h.do(Start("t0"))
    before = h.case.store.path("t0").read_bytes()
    h.case.tamper("t0", "corrupt")
    lock = h.case.store.path("t0").with_name(h.case.store.path("t0").name + LOCK_SUFFIX)
    assert lock.exists() and h.case.store.path("t0").read_bytes() == before


@pytest.mark.parametrize("name", FILE_VARIANTS)
def test_tamper_invalid_decodes_and_breaks_the_schema(harness, name):
    h = harness(name, GATED)
    h.do(Start("t0"))
    h.case.tamper("t0", "invalid")
    assert stored(h, "t0")[-1]["state"]["done"] == [1, "<invalid>"]
    assert not h.case.query("t0").is_valid(GATED)


@pytest.mark.parametrize("name", FILE_VARIANTS + ["full-single-resume_ifp-recover_ifp",
                                                  "simple-single-resume_ifp-recover_ifp"])
@pytest.mark.parametrize("resume", [False, True])
def test_tamper_forged_writes_the_forged_state(harness, name, resume):
    h = harness(name, GATED)
    h.do(Start("t0"))
    if resume:
        h.do(Resume("t0", value="a"))
    view = h.case.query("t0")
    expected = forge(GATED, Durable(view.done, view.answers, view.pending)).view(GATED)
    h.case.tamper("t0", "forged")
    forged = h.case.query("t0")
    assert forged == expected and forged != view


@pytest.mark.parametrize("name", FILE_VARIANTS + ["full-single-resume_ifp-recover_ifp"])
def test_tamper_forged_by_part_edits_that_part_alone(harness, name):
    """done / answer: the state as ``forge(part)`` says; pending: the gate's snapshot alone is
    marked run (its state and node kept), the pending-gate record of this framework."""
    two = Workflow(3, {1, 3}, ("a", "b"))
    h = harness(name, two)
    h.do(Start("t0"))
    h.do(Resume("t0", value="a"))  # done (1, 2), gate 1 answered, gate 3 pending
    view = h.case.query("t0")
    durable = Durable(view.done, view.answers, view.pending)
    assert forge_parts(two, durable) == ("done", "answer:1", "pending")
    for part in ("done", "answer:1"):
        hh = harness(name, two)
        hh.do(Start("t0"))
        hh.do(Resume("t0", value="a"))
        hh.case.tamper("t0", "forged", part)
        assert hh.case.query("t0") == forge(two, durable, part).view(two), part
    last = lambda: h.case.store.snapshots("t0")[-1] if h.case.backend != "file" \
        else stored(h, "t0")[-1]  # noqa: E731
    status = lambda s: s["status"] if isinstance(s, dict) else s.status  # noqa: E731
    assert status(last()) == "created"
    h.case.tamper("t0", "forged", "pending")
    assert status(last()) == "success" and h.case.query("t0") == view


@pytest.mark.parametrize("name", FILE_VARIANTS + ["full-single-resume_ifp-recover_ifp"])
def test_a_fork_after_a_forged_tamper_reaches_the_framework(harness, name):
    """The fork addresses the gate's checkpoint by the snapshot id kept when the run paused:
    a forgery of that snapshot hands pydantic-graph the forged state, never a tool error (the
    adapter once searched the snapshots by node and lost the rewritten one)."""
    h = harness(name, GATED)
    h.do(Start("t0"))  # gate 2 pending: the forgery marks it done, rewriting its snapshot
    h.case.tamper("t0", "forged")
    outcome, _ = h.do(Fork("t0", gate=2, value="b", new_thread="f1"))
    assert "HarnessError" not in str(outcome)


@pytest.mark.parametrize("name", ["full-single-resume_ifp-recover_ifp",
                                  "simple-single-resume_docs-recover_ifp"])
def test_tamper_invalid_in_memory_edits_the_stored_objects(harness, name):
    h = harness(name, GATED)
    h.do(Start("t0"))
    h.case.tamper("t0", "invalid")
    assert h.case.query("t0").done == (1, "<invalid>")
    with pytest.raises(HarnessError):
        h.case.clone_store(h.workdir.parent / "clone")


def test_clone_store_is_byte_identical(harness, tmp_path):
    h = harness("file-single-resume_ifp-recover_ifp", GATED)
    h.do(Start("t0"))
    h.do(Start("t1", crash=CrashAt(1, "in_flight")))
    dest = tmp_path / "clone"
    dest.mkdir()
    h.case.clone_store(dest)
    files = sorted(p.name for p in h.workdir.iterdir())
    assert files == sorted(p.name for p in dest.iterdir())
    assert len(files) == 5  # 2 runs + table + gate snapshot ids + the call log (calls.jsonl)
    for name in files:
        assert (h.workdir / name).read_bytes() == (dest / name).read_bytes()
    twin = h.adapter.open(h.variant, GATED, dest)
    assert twin.query("t1") == h.case.query("t1")


def test_reopening_the_workdir_finds_every_thread(harness):
    """A fresh worker opens the same workdir: the side table maps threads to files."""
    h = harness("file-classes-resume_docs-recover_ifp", GATED)
    h.do(Start("t0"))
    h.do(Resume("t0", value="b"))
    h.do(Fork("t0", gate=2, value="a", new_thread="f1"))
    again = h.adapter.open(h.variant, GATED, h.workdir)
    assert again.query("t0") == h.case.query("t0") and again.query("f1").answers == ((2, "a"),)


@pytest.mark.parametrize("name", FILE_VARIANTS + ["full-single-resume_ifp-recover_ifp"])
def test_bad_output_reaches_the_store_or_is_refused(harness, name):
    """Record which of the two happened; assert only that one did."""
    h = harness(name, LINEAR)
    outcome, rows = h.do(Start("t0", bad_output=2))
    assert rows[:2] == [("t0", 1, None), ("t0", 2, None)]
    try:
        persisted = "<bad>" in h.case.query("t0").done
    except Unreadable:
        persisted = False
    refused = isinstance(outcome, tuple) and outcome[0] == "rejected"
    assert persisted or refused
