"""Beyond linear chains (docs/contract.md §7): the shape of a workflow, its runs, and the mutants
only a shape can expose."""

import json

import pytest

from refmodel import (
    CATEGORIES,
    MUTANTS,
    Observation,
    classify,
    SHAPE_SWITCHES,
    SWITCHES,
    CrashAt,
    Fork,
    InvalidWorkflow,
    Loop,
    Model,
    Race,
    Recover,
    Resume,
    Shape,
    StateView,
    StaleResume,
    Start,
    Task,
    Workflow,
    World,
    mutant_category,
    op_from_json,
    properties,
    shortest_exposure,
)
from refmodel.ops import Step

# Stage 1: a gated task beside a plain one; stage 2 after the join.
BESIDE = Workflow.of(Shape(((Task(1), Task()), (Task(),))))
# Two questions pending at once.
TWO = Workflow.of(Shape(((Task(1), Task(1)), (Task(),))))
# A task with work before its two questions.
ASKS = Workflow.of(Shape(((Task(2, pre_effect=True),), (Task(),))))
# A stage visited again while its question is answered "a", twice at most.
LOOP = Workflow.of(Shape(((Task(1),), (Task(),)), Loop(1, 2, "a")))
# Two plain branches, joined before a gate.
SIBLINGS = Workflow.of(Shape(((Task(), Task()), (Task(1),))))


def run(workflow, ops, mutant=None):
    """Apply ops, canonical choice each time; returns the observations."""
    model, world, out = Model(workflow, mutant), World(), []
    for op in ops:
        observation, world = model.step(world, op)[0]
        out.append(observation)
    return out


# -- the shape ---------------------------------------------------------------------------------


def test_a_linear_shape_is_the_chain_it_describes():
    chain = Workflow.of(Shape(((Task(),), (Task(1),), (Task(),))))
    assert chain == Workflow(3, {2}, ("a", "b")) and hash(chain) == hash(Workflow(3, {2}))
    assert chain.shape is None
    assert chain.to_json() == {"n": 3, "gates": [2], "values": ["a", "b"]}


def test_a_shape_round_trips_with_its_version():
    for workflow in (BESIDE, TWO, ASKS, LOOP, SIBLINGS):
        doc = json.loads(json.dumps(workflow.to_json()))
        assert doc["shape"]["version"] == 1
        assert Workflow.from_json(doc) == workflow
    doc = LOOP.to_json()
    doc["shape"]["version"] = 2
    with pytest.raises(InvalidWorkflow, match="version"):
        Workflow.from_json(doc)


@pytest.mark.parametrize("make", [
    lambda: Shape(()),
    lambda: Shape(((Task(0, pre_effect=True),),)),
    lambda: Shape(((Task(),),), Loop(1, 2, "a")),  # a loop whose stage asks nothing
    lambda: Workflow.of(Shape(((Task(1),),), Loop(1, 2, "z"))),
    lambda: Workflow(2, {1}, ("a", "b"), Shape(((Task(1), Task(1)),))),
])
def test_shapes_the_contract_does_not_allow_are_refused(make):
    with pytest.raises(InvalidWorkflow):
        make()


def test_maps_and_racers_questions_keep_old_json_forms_without_them():
    assert "answers" not in Resume("t0", value="a").to_json()
    assert "gates" not in Race("t0", values=("a", "b")).to_json()
    resume = Resume("t0", answers={"2.q1": "b", "1.q1": "a"})
    assert resume.to_json()["answers"] == {"1.q1": "a", "2.q1": "b"}
    assert op_from_json(json.loads(json.dumps(resume.to_json()))) == resume
    race = Race("t0", values=("a", "b"), gates=("1.q1", "2.q1"))
    assert op_from_json(json.loads(json.dumps(race.to_json()))) == race


def test_a_chain_has_no_question_maps():
    model = Model(Workflow(3, {2}))
    _, world = model.step(World(), Start("t0"))[0]
    assert "shaped" in model.why_disabled(world, Resume("t0", answers={"2": "a"}))


# -- runs ----------------------------------------------------------------------------------------


def test_branches_run_until_none_can_move_and_the_join_waits():
    start, resume = run(BESIDE, [Start("t0"), Resume("t0", value="a")])
    assert start.outcome == "interrupted" and start.effects == (("t0", "2", None),)
    assert (start.state.done, start.state.pending) == (("2",), ("1.q1",))
    assert resume.effects == (("t0", "1", "a"), ("t0", "3", None))
    assert resume.state.status == "completed" and resume.state.done == ("1", "2", "3")


def test_several_pending_a_plain_resume_is_refused_a_map_answers_what_it_names():
    start, plain, named = run(TWO, [Start("t0"), Resume("t0", value="a"),
                                    Resume("t0", answers={"2.q1": "b"})])
    assert start.state.pending == ("1.q1", "2.q1")
    assert plain.outcome == "rejected" and not plain.effects and plain.state == start.state
    assert named.effects == (("t0", "2", "b"),) and named.state.pending == ("1.q1",)
    *_, last = run(TWO, [Start("t0"), Resume("t0", answers={"1.q1": "a", "2.q1": "b"})])
    assert last.outcome == "completed" and last.state.answers == (("1.q1", "a"), ("2.q1", "b"))


def test_questions_in_order_one_effect_after_the_last_and_the_pre_effect_once():
    start, first, second = run(ASKS, [Start("t0"), Resume("t0", value="a"),
                                      Resume("t0", value="b")])
    assert start.effects == (("t0", "1.pre", None),) and start.state.pending == ("1.q1",)
    assert not first.effects and first.state.pending == ("1.q2",)
    assert second.effects == (("t0", "1", "a/b"), ("t0", "2", None))


def test_each_loop_visit_is_a_new_instance_with_new_ids():
    start, again, last = run(LOOP, [Start("t0"), Resume("t0", value="a"),
                                    Resume("t0", value="b")])
    assert again.effects == (("t0", "1", "a"),) and again.state.pending == ("1#2.q1",)
    assert last.effects == (("t0", "1#2", "b"), ("t0", "2", None))
    *_, leave = run(LOOP, [Start("t0"), Resume("t0", value="b")])
    assert leave.state.done == ("1", "2")  # the condition did not hold: one visit


def test_recovery_runs_the_crashed_branch_only():
    crashed, recovered = run(SIBLINGS, [Start("t0", crash=CrashAt("2", "before_effect")),
                                        Recover("t0")])
    assert crashed.effects == (("t0", "1", None),) and crashed.state.done == ("1",)
    assert recovered.effects == (("t0", "2", None),) and recovered.state.pending == ("3.q1",)


def test_recovery_runs_a_branch_beside_a_pending_question():
    crashed, recovered = run(BESIDE, [Start("t0", crash=CrashAt("2", "before_effect")),
                                      Recover("t0")])
    assert crashed.state.status == "interrupted" and crashed.state.pending == ("1.q1",)
    assert recovered.effects == (("t0", "2", None),) and recovered.state.pending == ("1.q1",)


def test_fork_and_stale_handle_by_question_id():
    ops = [Start("t0"), Resume("t0", answers={"1.q1": "a"}),
           Fork("t0", gate="2.q1", value="b", new_thread="f1")]
    *_, fork = run(TWO, ops)
    # The latest checkpoint with 2.q1 pending is the one after 1.q1 was answered.
    assert fork.effects == (("f1", "2", "b"), ("f1", "3", None))
    assert fork.state.answers == (("1.q1", "a"), ("2.q1", "b"))
    model, world = Model(TWO), World()
    for op in ops[:2]:
        world = model.step(world, op)[0][1]
    stale = model.step(world, StaleResume("t0", gate="1.q1", value="b"))
    assert {o.outcome for o, _ in stale} == {"rejected", "interrupted"}
    assert all(not o.effects for o, _ in stale)


def test_a_fork_takes_a_map_of_the_questions_pending_at_its_checkpoint():
    assert "answers" not in Fork("t0", gate=2, value="a", new_thread="f1").to_json()
    fork = Fork("t0", gate="1.q1", value="a", new_thread="f1", answers={"2.q1": "b"})
    assert op_from_json(json.loads(json.dumps(fork.to_json()))) == fork
    *_, branch = run(TWO, [Start("t0"), fork])
    assert branch.effects == (("f1", "1", "a"), ("f1", "2", "b"), ("f1", "3", None))
    model = Model(TWO)
    _, world = model.step(World(), Start("t0"))[0]
    bad = Fork("t0", gate="1.q1", value="a", new_thread="f1", answers={"1.q1": "b"})
    assert "map names other questions" in model.why_disabled(world, bad)


def test_racers_on_different_questions_each_consume_theirs():
    model = Model(TWO)
    _, world = model.step(World(), Start("t0"))[0]
    both = model.step(world, Race("t0", values=("a", "b"), gates=("1.q1", "2.q1")))
    assert {o.effects for o, _ in both} == {(("t0", "1", "a"), ("t0", "2", "b"), ("t0", "3", None))}
    one = model.step(world, Race("t0", values=("a", "b"), gates=("1.q1", "1.q1")))
    assert {o.effects for o, _ in one} == {(("t0", "1", "a"),), (("t0", "1", "b"),)}
    assert "name theirs" in model.why_disabled(world, Race("t0", values=("a", "a")))


# -- mutants -------------------------------------------------------------------------------------

# The shape each switch is exposed on, and the length of its shortest exposure there.
EXPOSED = {
    "SiblingReplay": (SIBLINGS, 2),
    "LostSiblingWrite": (BESIDE, 2),
    "CrossedAnswer": (ASKS, 2),
    "LoopCarry": (LOOP, 2),
    "AskedAgain": (ASKS, 2),
    "PlainResumePicks": (TWO, 2),
    "PreEffectAgain": (ASKS, 2),
}


def test_every_shape_switch_names_a_category_and_is_no_fuzz_target_yet():
    assert set(EXPOSED) == set(SHAPE_SWITCHES)
    assert not set(SHAPE_SWITCHES) & set(SWITCHES)
    assert all(mutant_category(m) in CATEGORIES for m in SHAPE_SWITCHES)


@pytest.mark.parametrize("mutant", sorted(SHAPE_SWITCHES))
def test_shape_switch_is_exposed_minimally_with_its_category(mutant):
    workflow, length = EXPOSED[mutant]
    exposure = shortest_exposure(workflow, mutant, depth=3)
    assert exposure is not None
    assert exposure.divergence.category == mutant_category(mutant)
    assert exposure.length == length
    # The model-free predicates see the same property broken on that trace.
    reference, target = Model(workflow), Model(workflow, mutant)
    world, twin, history = World(), World(), []
    for op in exposure.trace:
        observed, twin = target.step(twin, op)[0]
        allowed = reference.step(world, op)
        history.append(Step(op, observed, tuple(o for o, _ in allowed)))
        world = next((w for o, w in allowed if o.same_as(observed)), world)
    assert exposure.divergence.property in properties.broken(workflow, history)


@pytest.mark.parametrize("workflow", [BESIDE, TWO, ASKS, LOOP, SIBLINGS])
def test_reference_never_diverges_from_itself_on_a_shape(workflow):
    assert shortest_exposure(workflow, None, depth=2) is None


# Replay and NondetRecovery need a resume first: a crash beside the pending question leaves
# nothing to recover.
ON_A_SHAPE = {"Replay": 3, "ForkIgnore": 3, "InvalidPersist": 1, "NondetRecovery": 3,
              "DoubleConsume": 3, "PrefixReplay": 2, "LostUpdate": 2, "Stuck": 2,
              "StateMismatch": 2}


@pytest.mark.parametrize("mutant", MUTANTS)
def test_every_category_mutant_still_shows_on_a_shape(mutant):
    exposure = shortest_exposure(BESIDE, mutant, depth=3)
    assert exposure is not None and exposure.divergence.category == mutant
    assert exposure.length == ON_A_SHAPE[mutant]


def test_a_shaped_observation_round_trips():
    *_, observed = run(ASKS, [Start("t0"), Resume("t0", value="a")])
    doc = json.loads(json.dumps(observed.to_json()))
    assert doc["state"]["pending"] == ["1.q2"]
    assert Observation.from_json(doc) == observed


def test_a_documented_pre_effect_rerun_is_adopted_and_the_search_goes_on():
    # A framework that re-runs the task from its start (a D) fires the pre-effect again; the
    # judge adopts what it persisted, and the next resume is judged from there.
    model = Model(ASKS)
    _, world = model.step(World(), Start("t0"))[0]
    op = Resume("t0", value="a")
    expected = model.step(world, op)[0][0]
    observed = Observation("interrupted", (("t0", "1.pre", None),), expected.state)
    divergence = classify(model, world, op, [expected], observed)
    assert divergence.rule == "pre-effect-fired-again" and divergence.category == "PrefixReplay"
    after = model.adopt(world, op, observed)
    assert after.get("t0").durable.pending == ("1.q2",)
    assert model.step(after, Resume("t0", value="b"))[0][0].effects == (
        ("t0", "1", "a/b"), ("t0", "2", None))


def test_a_crash_while_consuming_leaves_the_answer_kept_or_the_question_to_ask_again():
    # docs/contract.md §3's freedom, per question: the crashed resume's question may read as
    # pending or as not asked, and recovery may finish it once with the kept answer.
    model = Model(TWO)
    _, world = model.step(World(), Start("t0"))[0]
    crashed = model.step(world, Resume("t0", answers={"1.q1": "a"},
                                       crash=CrashAt("1", "before_effect")))
    assert {o.state.pending for o, _ in crashed} == {("1.q1", "2.q1"), ("2.q1",)}
    for _, after in crashed:
        recovered = model.step(after, Recover("t0"))
        assert (("t0", "1", "a"),) in {o.effects for o, _ in recovered}
        assert all(len(o.effects) <= 1 for o, _ in recovered)  # finished once, at most


def test_after_a_crash_the_next_question_may_read_as_asked():
    # The label freedom after a task whose successor asks (docs/contract.md §3), per question.
    model = Model(SIBLINGS)
    crashed = model.step(World(), Start("t0", crash=CrashAt("2", "after_commit")))
    assert {o.state.pending for o, _ in crashed} == {None, ("3.q1",)}
    # Not where asking records a pre-effect: that label would hide or excuse a second one.
    crashed = Model(ASKS).step(World(), Start("t0", crash=CrashAt("1", "before_effect")))
    assert {o.state.pending for o, _ in crashed} == {None}


def test_an_answer_never_given_is_a_state_mismatch_not_a_second_consume():
    model = Model(ASKS)
    _, world = model.step(World(), Start("t0"))[0]
    op = Resume("t0", value="a")
    allowed = [o for o, _ in model.step(world, op)]
    crossed = StateView.of(ASKS, (), {"1.q1": "a", "1.q2": "a"}, None)
    invented = StateView.of(ASKS, (), {"1.q1": "a", "1.q2": "b"}, None)
    assert classify(model, world, op, allowed, Observation("interrupted", (), crossed)).rule == (
        "question-took-another-answer")
    assert classify(model, world, op, allowed, Observation("interrupted", (), invented)).rule == (
        "state-differs")


def test_adopting_a_fork_keeps_only_the_checkpoints_its_branch_went_through():
    # The canonical branch (the fork answers "a", so the loop asks visit 2) reaches 1#2.q1;
    # the branch adopted took another way, so that checkpoint is none of its own, even though
    # the label "1#2.q1" sorts before "1.q1" as a string.
    model = Model(LOOP)
    _, world = model.step(World(), Start("t0"))[0]
    fork = Fork("t0", gate="1.q1", value="a", new_thread="f1")
    observed = Observation("completed", (("f1", "1", "a"), ("f1", "2", None)),
                           StateView.of(LOOP, ("1", "2"), {"1.q1": "b"}, None))
    branch = model.adopt(world, fork, observed).get("f1")
    assert {g for g, _ in branch.gate_checkpoints} == {"1.q1"}
