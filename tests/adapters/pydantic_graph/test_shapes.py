"""Shaped workflows (docs/contract.md §7) on pydantic-graph: several questions in one task, a
pre-effect and a looped stage, run by the case and observed as the reference semantics allows;
a short shaped campaign finds nothing and has no harness errors.

As in ``test_case.py``, these check what the adapter does to the real framework, never a verdict
on the framework.
"""

from __future__ import annotations

import pytest

from adapters.protocol import Fork, Recover, Resume, Start
from refmodel import Loop, Shape, Task, Workflow
from refmodel.run import Durable, Effect, execute_shape

# Task 1 plain; task 2 asks two questions after its pre-effect, its stage looped while the
# visit's first answer is "b" (up to two visits); task 3 plain.
SHAPE = Shape(((Task(0),), (Task(2, pre_effect=True),), (Task(0),)), Loop(2, 2, "b"))
WORKFLOW = Workflow.of(SHAPE, ("a", "b"))
SHAPED_VARIANTS = [
    "file-single-resume_ifp-recover_ifp",
    "file-single-resume_docs-recover_initialize",
    "full-single-resume_ifp-recover_initialize",
    "simple-single-resume_docs-recover_ifp",
]


def reference(durable, given):
    """The reference run from ``durable`` with ``given``: its effects and the state it leaves."""
    events = execute_shape(WORKFLOW, durable, given)
    effects = [(e.task, e.value) for e in events if isinstance(e, Effect)]
    last = events[-1].durable
    return effects, last


def rows(effects, thread="t0"):
    return [(thread, task, value) for task, value in effects]


def test_declared_features(adapter, variant):
    caps = adapter.capabilities(variant("file-single-resume_ifp-recover_ifp"))
    assert caps.shapes == {"questions", "pre_effect", "loop"}
    assert "pydantic-graph 1.x runs one node at a time" in caps.not_expressible["shape:parallel"]
    classes = adapter.capabilities(variant("file-classes-resume_ifp-recover_ifp"))
    assert classes.shapes == frozenset()
    assert "shape:loop" in classes.not_expressible


@pytest.mark.parametrize("name", SHAPED_VARIANTS)
def test_two_questions_and_a_loop_as_the_reference_runs_them(harness, name):
    h = harness(name, WORKFLOW)
    durable = Durable()
    steps = [(Start("t0"), None),
             (Resume("t0", value="b"), {"2.q1": "b"}),            # loop condition holds
             (Resume("t0", answers={"2.q2": "a"}), {"2.q2": "a"}),  # a map naming the question
             (Resume("t0", value="a"), {"2#2.q1": "a"}),          # second visit: no more loop
             (Resume("t0", value="b"), {"2#2.q2": "b"})]
    for op, given in steps:
        effects, durable = reference(durable, given)
        outcome, got = h.do(op)
        assert got == rows(effects), op
        view = h.case.query("t0")
        assert view == durable.view(WORKFLOW), op
        assert outcome == view.status
    assert h.case.query("t0").done == ("1", "2", "2#2", "3")
    assert dict(h.case.query("t0").answers) == {"2.q1": "b", "2.q2": "a",
                                                "2#2.q1": "a", "2#2.q2": "b"}


def test_the_pre_effect_fires_once_and_the_effect_carries_both_answers(harness):
    h = harness("file-single-resume_ifp-recover_ifp", WORKFLOW)
    assert h.do(Start("t0")) == ("interrupted", [("t0", "1", None), ("t0", "2.pre", None)])
    assert h.case.query("t0").pending == ("2.q1",)
    assert h.do(Resume("t0", value="a")) == ("interrupted", [])
    assert h.case.query("t0").pending == ("2.q2",)
    assert h.do(Recover("t0")) == ("interrupted", [])  # waits for an answer: nothing runs
    assert h.do(Resume("t0", value="b")) == ("completed", [("t0", "2", "a/b"), ("t0", "3", None)])


def test_a_fork_answers_the_question_pending_at_its_checkpoint(harness):
    h = harness("full-single-resume_ifp-recover_ifp", WORKFLOW)
    h.do(Start("t0"))
    h.do(Resume("t0", value="a"))
    h.do(Resume("t0", value="a"))
    outcome, got = h.do(Fork("t0", gate="2.q2", value="b", new_thread="f1"))
    assert (outcome, got) == ("completed", [("f1", "2", "a/b"), ("f1", "3", None)])
    assert dict(h.case.query("f1").answers) == {"2.q1": "a", "2.q2": "b"}
    assert dict(h.case.query("t0").answers) == {"2.q1": "a", "2.q2": "a"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["file-single-resume_ifp-recover_ifp",
                                  "full-single-resume_docs-recover_initialize"])
def test_a_short_shaped_campaign_finds_nothing(tmp_path, name):
    """Shapes only, without the operations behind the framework's chain findings (crash points,
    out-of-schema outputs, tampers, races, stale handles: docs/frameworks/pydantic_graph.md): nothing is found,
    and no example is a harness error."""
    from dataclasses import replace

    from fuzz.campaign import CampaignOptions, run_campaign
    from fuzz.targets import prepare, resolve

    adapter = prepare(resolve("pydantic-graph"))

    class ShapesOnly(type(adapter)):
        def capabilities(self, variant):
            caps = super().capabilities(variant)
            return replace(caps, crash_kinds=frozenset(), bad_output=False,
                           tamper_hows=frozenset(),
                           operations=caps.operations - {"race", "twin_recover", "tamper",
                                                           "stale_resume"})

    shapes_only = ShapesOnly()
    (chosen,) = [v for v in shapes_only.variants() if v.name == name]
    options = CampaignOptions(max_examples=60, seed=3, profile="ci", stop_on_finding=True,
                              mode="inprocess", corpus_dir=tmp_path / "corpus",
                              reports_dir=tmp_path / "reports", workdir=tmp_path / "work")
    (result,) = run_campaign(shapes_only, [chosen], options)
    assert result.harness_errors == 0, result.harness_messages
    assert not result.errors
    assert [f for f in result.findings if f.verdict != "D"] == []


def test_a_shaped_trace_gets_no_script(adapter, variant):
    """repro.py writes chains only: a shaped finding's report gives the replay line."""
    assert adapter.reproduction(variant("file-single-resume_ifp-recover_ifp"), WORKFLOW,
                                evidence=None) is None
