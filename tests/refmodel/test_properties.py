"""The property predicates read histories alone; each mutant's exposure breaks its property."""

import pytest

from refmodel import (
    CATEGORY_INFO,
    MUTANTS,
    Model,
    Observation,
    Start,
    StateView,
    Step,
    Workflow,
    World,
    properties,
    shortest_exposure,
)

WF = Workflow(3, {2}, ("a", "b"))


def history_of(mutant: str, trace) -> list[Step]:
    model, world, steps = Model(WF, mutant), World(), []
    for op in trace:
        observation, world = model.step(world, op)[0]
        steps.append(Step(op, observation))
    return steps


@pytest.mark.parametrize("mutant", [m for m in MUTANTS if CATEGORY_INFO[m].breaks != "-"])
def test_exposure_breaks_the_property_its_category_names(mutant):
    exposure = shortest_exposure(WF, mutant, depth=3)
    steps = history_of(mutant, exposure.trace)
    prop = CATEGORY_INFO[mutant].breaks
    assert properties.broken(WF, steps).get(prop) == len(steps) - 1


def test_reference_histories_break_nothing():
    exposure = shortest_exposure(WF, "DoubleConsume", depth=3)  # any valid trace will do
    steps = history_of(None, exposure.trace)
    assert properties.broken(WF, steps) == {}


def test_eo_names_the_first_step_that_fires_twice():
    start = Step(Start("t0"), Observation("interrupted", (("t0", 1, None),),
                                          StateView("interrupted", (1,), (), 2)))
    again = Step(Start("t1"), Observation("interrupted", (("t0", 1, None),),
                                          StateView("interrupted", (1,), (), 2)))
    assert properties.eo(WF, [start, start, again]) == 1


def test_a_refusal_on_a_thread_a_tamper_reached_breaks_no_liveness():
    from refmodel import CrashAt, Fork, Recover, Resume, Tamper

    wf = Workflow(3, {2}, ("a", "b"))
    refused = Observation("rejected", (), None)
    ops = [Start("t0"), Resume("t0", value="a"),
           Fork("t0", gate=2, value="b", new_thread="f1",
                crash=CrashAt(3, "before_effect", "sigkill")),
           Tamper("t0", how="corrupt")]
    model, world, steps = Model(wf), World(), []
    for op in ops:
        observation, world = model.step(world, op)[0]
        steps.append(Step(op, observation))
    steps.append(Step(Recover("f1"), refused))
    assert properties.lv(wf, steps, "lineage") is None
    assert properties.lv(wf, steps, "store") is None
    assert properties.lv(wf, steps, "thread") == len(steps) - 1
