"""Each operation's semantics on hand-written cases (docs/contract.md §2 and §3)."""

import pytest

from refmodel import (
    CrashAt,
    Fork,
    InvalidOperation,
    Model,
    Query,
    Race,
    Recover,
    Resume,
    Start,
    StateView,
    Tamper,
    TwinRecover,
    Workflow,
    World,
)

WF = Workflow(3, {2}, ("a", "b"))


def run(ops, workflow=WF, mutant=None):
    """Apply ops, canonical choice each time; returns the observations and the final world."""
    model, world, out = Model(workflow, mutant), World(), []
    for op in ops:
        observation, world = model.step(world, op)[0]
        out.append(observation)
    return out, world


def allowed(ops, last, workflow=WF):
    _, world = run(ops, workflow)
    return [o for o, _ in Model(workflow).step(world, last)]


def test_start_runs_to_the_gate():
    (obs,), _ = run([Start("t0")])
    assert obs.outcome == "interrupted"
    assert obs.effects == (("t0", 1, None),)
    assert obs.state == StateView("interrupted", (1,), (), 2)


def test_start_without_gates_completes():
    (obs,), _ = run([Start("t0")], Workflow(2))
    assert obs.outcome == "completed"
    assert obs.state.status == "completed" and obs.state.done == (1, 2)


def test_resume_consumes_once_and_continues():
    obs, _ = run([Start("t0"), Resume("t0", value="b")])
    assert obs[1].outcome == "completed"
    assert obs[1].effects == (("t0", 2, "b"), ("t0", 3, None))
    assert obs[1].state.answers == ((2, "b"),)


def test_second_resume_is_refused_or_a_noop():
    options = allowed([Start("t0"), Resume("t0", value="a")], Resume("t0", value="b"))
    assert {o.outcome for o in options} == {"rejected", "completed"}
    assert all(o.effects == () for o in options)


def test_crash_after_commit_keeps_the_task_and_recover_continues_after_it():
    crash = CrashAt(1, "after_commit", "sigkill")
    obs, _ = run([Start("t0", crash=crash), Recover("t0")])
    assert obs[0].outcome == "crashed" and obs[0].state.done == (1,)
    assert obs[0].state.status == "incomplete"
    assert obs[1].effects == ()  # the gate interrupts before its effect
    assert obs[1].outcome == "interrupted"


def test_crash_before_effect_persists_nothing():
    (obs,), _ = run([Start("t0", crash=CrashAt(1, "before_effect"))])
    assert obs.outcome == "crashed" and obs.effects == ()
    assert obs.state.status == "new"


def test_in_flight_effect_may_fire_again_on_recovery():
    options = allowed([Start("t0", crash=CrashAt(1, "in_flight"))], Recover("t0"))
    assert {o.effects for o in options} == {(("t0", 1, None),), ()}


def test_crash_while_consuming_lets_recovery_ask_again_or_keep_the_answer():
    crash = CrashAt(2, "before_effect")
    options = allowed([Start("t0"), Resume("t0", value="a", crash=crash)], Recover("t0"))
    outcomes = {(o.outcome, o.effects) for o in options}
    assert ("interrupted", ()) in outcomes  # ask again
    assert ("completed", (("t0", 2, "a"), ("t0", 3, None))) in outcomes  # keep the answer


def test_fork_answers_its_own_value_in_a_new_branch():
    obs, world = run([Start("t0"), Resume("t0", value="a"),
                      Fork("t0", gate=2, value="b", new_thread="f1")])
    assert obs[2].effects == (("f1", 2, "b"), ("f1", 3, None))
    assert obs[2].state.answers == ((2, "b"),)
    assert world.get("t0").durable.answers == ((2, "a"),)  # the source is untouched


def test_query_fires_nothing():
    obs, _ = run([Start("t0"), Query("t0")])
    assert obs[1].outcome == "ok" and obs[1].effects == ()
    assert obs[1].state == obs[0].state


@pytest.mark.parametrize("how", ["corrupt", "invalid", "forged"])
def test_tampered_store_is_refused_loudly(how):
    obs, _ = run([Start("t0"), Tamper("t0", how=how), Resume("t0", value="a")])
    assert obs[2].outcome == "rejected" and obs[2].effects == ()


def test_fork_from_an_older_checkpoint_of_a_tampered_thread_is_allowed():
    wf = Workflow(3, {1, 3}, ("a", "b"))
    obs, _ = run([Start("t0"), Resume("t0", value="a"), Tamper("t0", how="corrupt"),
                  Fork("t0", gate=1, value="b", new_thread="f1")], wf)
    assert obs[3].outcome == "interrupted"
    assert obs[3].effects == (("f1", 1, "b"), ("f1", 2, None))


def test_race_lets_exactly_one_racer_consume():
    options = allowed([Start("t0")], Race("t0", values=("a", "b")))
    for o in options:
        assert sum(1 for _, t, _ in o.effects if t == 2) == 1
    assert {o.state.answers for o in options} == {((2, "a"),), ((2, "b"),)}


def test_twin_recover_expects_identical_decisions():
    obs, _ = run([Start("t0", crash=CrashAt(1, "after_commit")), TwinRecover("t0")])
    assert obs[1].twin is not None
    assert (obs[1].outcome, obs[1].effects, obs[1].state) == (
        obs[1].twin.outcome, obs[1].twin.effects, obs[1].twin.state)


def test_bad_output_is_refused_and_nothing_invalid_is_persisted():
    (obs,), world = run([Start("t0", bad_output=1)])
    assert obs.outcome == "rejected"
    assert obs.effects == (("t0", 1, None),)
    assert obs.state.status == "new"
    assert world.get("t0").needs_recovery


@pytest.mark.parametrize("op, why", [
    (Resume("t0", value="a"), "no such thread"),
    (Resume("t0", value="z"), "values"),
    (TwinRecover("t0"), "crash"),
    (Fork("t0", gate=2, value="a", new_thread="t0"), "new thread"),
])
def test_inapplicable_operations_are_refused_with_a_reason(op, why):
    model = Model(WF)
    world = World() if why == "no such thread" else run([Start("t0")])[1]
    with pytest.raises(InvalidOperation, match=why):
        model.step(world, op)


def test_model_is_deterministic():
    ops = [Start("t0", crash=CrashAt(1, "in_flight", "sigkill")), Recover("t0"),
           Race("t0", values=("a", "b")), Fork("t0", gate=2, value="b", new_thread="f1")]
    assert run(ops) == run(ops)
