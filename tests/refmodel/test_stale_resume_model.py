"""A resume through a stale handle (docs/contract.md §2): allowed outcomes, preconditions,
labels."""

import pytest

from refmodel import (
    Fork,
    InvalidOperation,
    Model,
    Observation,
    Resume,
    StaleResume,
    Start,
    StateView,
    Step,
    Tamper,
    Workflow,
    World,
    classify,
    op_from_json,
    properties,
    shortest_exposure,
)

WF = Workflow(3, {2}, ("a", "b"))
STALE = StaleResume("t0", gate=2, value="b")


def world_after(ops, model=None):
    model = model or Model(WF)
    world = World()
    for op in ops:
        world = model.step(world, op)[0][1]
    return world


CONSUMED = [Start("t0"), Resume("t0", value="a")]


def test_a_stale_handle_may_be_refused_or_be_a_no_op_never_a_second_consume():
    model, world = Model(WF), world_after(CONSUMED)
    allowed = model.step(world, STALE)
    assert {o.outcome for o, _ in allowed} == {"rejected", "completed", "interrupted"}
    for observation, after in allowed:
        assert observation.effects == () and after == world  # nothing fires, nothing changes
        assert observation.state == StateView("completed", (1, 2, 3), ((2, "a"),), None)


def test_preconditions_a_handle_exists_and_its_gate_was_consumed():
    model = Model(WF)
    interrupted = world_after([Start("t0")])
    with pytest.raises(InvalidOperation, match="not consumed yet"):
        model.step(interrupted, STALE)
    consumed = world_after(CONSUMED)
    assert "no checkpoint" in model.why_disabled(consumed, StaleResume("t0", gate=3, value="a"))
    assert "values" in model.why_disabled(consumed, StaleResume("t0", gate=2, value="z"))
    tampered = world_after(CONSUMED + [Tamper("t0", how="corrupt")])
    assert "tamper" in model.why_disabled(tampered, STALE)
    forked = world_after(CONSUMED + [Fork("t0", gate=2, value="b", new_thread="f1"),
                                     Resume("t0", value="a")])
    assert "fork" in model.why_disabled(forked, StaleResume("f1", gate=2, value="a"))


def classify_observed(observed):
    model, world = Model(WF), world_after(CONSUMED)
    allowed = [o for o, _ in model.step(world, STALE)]
    return classify(model, world, STALE, allowed, observed)


def test_re_running_the_gate_through_the_handle_is_double_consume():
    done = StateView("completed", (1, 2, 3), ((2, "b"),), None)
    divergence = classify_observed(Observation("completed", (("t0", 2, "b"), ("t0", 3, None)), done))
    assert divergence.category == "DoubleConsume"
    assert divergence.rule == "stale-handle-consumed-again"


def test_a_task_after_the_gate_running_again_is_double_consume():
    done = StateView("completed", (1, 2, 3), ((2, "a"),), None)
    divergence = classify_observed(Observation("completed", (("t0", 3, None),), done))
    assert (divergence.category, divergence.rule) == ("DoubleConsume", "stale-handle-consumed-again")


def test_the_answer_replaced_without_an_effect_is_double_consume():
    replaced = StateView("completed", (1, 2, 3), ((2, "b"),), None)
    divergence = classify_observed(Observation("completed", (), replaced))
    assert divergence.category == "DoubleConsume" and "replaced" in divergence.detail


def test_a_rollback_to_the_handle_without_an_effect_is_a_state_mismatch():
    rolled_back = StateView("interrupted", (1,), (), 2)
    divergence = classify_observed(Observation("interrupted", (), rolled_back))
    assert divergence.category == "StateMismatch"


def test_the_mutant_consumes_through_the_handle_and_co_sees_it():
    mutant, world = Model(WF, "DoubleConsume"), world_after(CONSUMED)
    (observation, _), = mutant.step(world, STALE)
    assert ("t0", 2, "b") in observation.effects
    steps = []
    model, w = Model(WF, "DoubleConsume"), World()
    for op in CONSUMED + [STALE]:
        o, w = model.step(w, op)[0]
        steps.append(Step(op, o))
    assert properties.co(WF, steps) == 2
    reference = Model(WF)
    assert classify(reference, world, STALE, [o for o, _ in reference.step(world, STALE)],
                    observation).category == "DoubleConsume"


def test_co_sees_an_answer_replaced_through_a_stale_handle():
    before = Observation("completed", (("t0", 2, "a"), ("t0", 3, None)),
                         StateView("completed", (1, 2, 3), ((2, "a"),), None))
    replaced = Observation("completed", (), StateView("completed", (1, 2, 3), ((2, "b"),), None))
    steps = [Step(Start("t0"), Observation("interrupted", (("t0", 1, None),),
                                           StateView("interrupted", (1,), (), 2))),
             Step(CONSUMED[1], before), Step(STALE, replaced)]
    assert properties.co(WF, steps) == 2


def test_explore_reaches_the_stale_path_when_resume_twice_is_not_admitted():
    # No plain resume at all (a race consumes the gate), so the second consume can only come
    # through the stale handle: the search must still find DoubleConsume, at the same depth.
    def admit(op):
        return not isinstance(op, Resume)

    exposure = shortest_exposure(WF, "DoubleConsume", 3, admit)
    assert exposure is not None and exposure.divergence.category == "DoubleConsume"
    assert isinstance(exposure.trace[-1], StaleResume)


def test_json_round_trip():
    assert op_from_json(STALE.to_json()) == STALE
    assert STALE.to_json() == {"op": "stale_resume", "thread": "t0", "gate": 2, "value": "b"}
