"""A racer answers only the question it was shown (docs/contract.md §2, ``race``).

The engine runs a race as k ``Resume(thread, value, gate=<the gate pending when the race began>)``
ops in k worker processes.  On pydantic-graph a racer that came once another had returned used to
claim the run's *next* node (``iter_from_persistence`` / ``load_next``: the first ``'created'``
snapshot) and answer the next gate with its value, which the classifier reports as a
DoubleConsume the framework never made.  The racer now resumes the snapshot that asked its gate,
by id, and the framework's own status check (``record_run``) refuses it once another racer ran
it.  Here the late racer is the second of two racers applied one after the other, in process:
the schedule the fuzzer's free races showed, made deterministic.
"""

from __future__ import annotations

import json

import pytest

from adapters.protocol import Resume, Start, Workflow

TWO_GATES = Workflow(2, {1, 2}, ("a", "b"))
GATE_THEN_GATE = Workflow(3, {2, 3}, ("a", "b"))

FILE_SPELLINGS = [
    "file-single-resume_ifp-recover_ifp",
    "file-single-resume_docs-recover_initialize",
    "file-classes-resume_ifp-recover_initialize",
    "file-classes-resume_docs-recover_ifp",
]


def stored(h, thread):
    return json.loads(h.case.store.path(thread).read_bytes())


@pytest.mark.parametrize("name", FILE_SPELLINGS)
def test_a_late_racer_is_refused_not_given_the_next_gate(harness, name):
    h = harness(name, TWO_GATES)
    assert h.do(Start("t0"))[0] == "interrupted"
    first = h.do(Resume("t0", value="a", gate=1))
    assert first == ("interrupted", [("t0", 1, "a")])
    outcome, rows = h.do(Resume("t0", value="b", gate=1))  # shown gate 1, arrives late
    assert outcome[0] == "rejected" and "GraphNodeStatusError" in outcome[1], outcome
    assert rows == []
    view = h.case.query("t0")
    assert (view.pending, view.done, dict(view.answers)) == (2, (1,), {1: "a"})
    # Gate 2 is still asked, untouched: a later resume answers it once.
    assert [s["status"] for s in stored(h, "t0")][-1] == "created"
    assert h.do(Resume("t0", value="b")) == ("completed", [("t0", 2, "b")])


@pytest.mark.parametrize("name", FILE_SPELLINGS[:2])
def test_the_first_racer_answers_the_gate_it_was_shown(harness, name):
    """The gate pending when the race began is answered, even when it is not the first one."""
    h = harness(name, GATE_THEN_GATE)
    h.do(Start("t0"))
    assert h.do(Resume("t0", value="a", gate=2)) == ("interrupted", [("t0", 2, "a")])
    outcome, rows = h.do(Resume("t0", value="a", gate=2))
    assert outcome[0] == "rejected" and rows == []
    assert h.case.query("t0").pending == 3


@pytest.mark.parametrize("name", ["file-single-resume_ifp-recover_ifp",
                                  "file-single-resume_docs-recover_ifp"])
def test_a_resume_without_a_shown_gate_keeps_the_spelling(harness, name):
    """A plain ``resume`` (no gate named) still answers whatever the framework restores."""
    h = harness(name, TWO_GATES)
    h.do(Start("t0"))
    h.do(Resume("t0", value="a"))
    assert h.do(Resume("t0", value="b")) == ("completed", [("t0", 2, "b")])
