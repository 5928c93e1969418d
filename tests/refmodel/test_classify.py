"""The classifier: equal observations get no category; first match in section 5's order."""

from refmodel import (
    CATEGORIES,
    Model,
    Observation,
    Recover,
    Start,
    StateView,
    Workflow,
    World,
    classify,
)

WF = Workflow(2, set(), ("a", "b"))


def _start():
    model = Model(WF)
    allowed = model.step(World(), Start("t0"))
    return model, [o for o, _ in allowed]


def test_an_allowed_observation_gets_no_category():
    model, allowed = _start()
    assert classify(model, World(), Start("t0"), allowed, allowed[0]) is None


def test_state_only_divergence_is_state_mismatch():
    model, allowed = _start()
    observed = Observation("completed", allowed[0].effects, StateView("incomplete", (1,), (), None))
    assert classify(model, World(), Start("t0"), allowed, observed).category == "StateMismatch"


def test_a_state_mismatch_names_the_states_allowed_with_that_outcome_and_those_effects():
    """Not the canonical observation's state: that may belong to another outcome and equal
    the state observed (an AutoGen entry read "persisted state X != expected X")."""
    model, allowed = _start()
    kept = StateView("incomplete", (1,), (), None)
    refused = Observation("rejected", (), kept)
    observed = Observation("completed", allowed[0].effects, kept)
    divergence = classify(model, World(), Start("t0"), (refused, *allowed), observed)
    assert divergence.category == "StateMismatch"
    assert f"!= expected {allowed[0].state.to_json()}" in divergence.detail
    assert f"!= expected {kept.to_json()}" not in divergence.detail


def test_schema_breaking_state_is_invalid_persist():
    model, allowed = _start()
    observed = Observation("completed", allowed[0].effects, StateView("completed", (1, "x"), (), None))
    assert classify(model, World(), Start("t0"), allowed, observed).category == "InvalidPersist"


def test_no_answer_is_stuck():
    model, allowed = _start()
    observed = Observation("stuck", (), StateView("new"))
    assert classify(model, World(), Start("t0"), allowed, observed).category == "Stuck"


def test_unexplained_divergence_is_unclassified_never_hidden():
    model, allowed = _start()
    observed = Observation("rejected", (), StateView("new"))
    assert classify(model, World(), Start("t0"), allowed, observed).category == "Unclassified"


def test_recovery_refiring_completed_work_is_replay():
    model = Model(WF)
    from refmodel import CrashAt

    _, world = model.step(World(), Start("t0", crash=CrashAt(1, "after_commit")))[0]
    allowed = [o for o, _ in model.step(world, Recover("t0"))]
    observed = Observation("completed", (("t0", 1, None), ("t0", 2, None)), allowed[0].state)
    assert classify(model, world, Recover("t0"), allowed, observed).category == "Replay"


def test_categories_keep_the_contracts_order():
    assert CATEGORIES[0] == "Replay" and CATEGORIES[-2:] == ("StateMismatch", "Unclassified")


def test_a_fork_that_runs_on_its_tampered_checkpoint_is_invalid_persist():
    from refmodel import Fork, Tamper

    wf = Workflow(2, {1}, ("a", "b"))
    model, world = Model(wf), World()
    for op in (Start("t0"), Tamper("t0", how="forged")):
        world = model.step(world, op)[0][1]
    fork = Fork("t0", gate=1, value="a", new_thread="f1")
    allowed = [o for o, _ in model.step(world, fork)]
    observed = Observation("completed", (("f1", 2, None),),
                           StateView("completed", (1, 2), ((1, "a"),), None))
    assert classify(model, world, fork, allowed, observed).category == "InvalidPersist"
