"""Issue 12's verdict rules: tamper reach, PC label freedom, stale answers, whole-history rules.

Each test pairs the observation with a setting in which the same rule must *not* fire (another
tamper reach, no history, a label the contract does fix), so none of them can pass vacuously.
"""

import pytest

from refmodel import (
    RULES,
    CrashAt,
    Fork,
    Model,
    Observation,
    Race,
    Recover,
    Resume,
    Start,
    StateView,
    Tamper,
    Workflow,
    World,
    classify,
)

GATE2 = Workflow(3, {2}, ("a", "b"))


def walk(model, ops, world=None):
    """Apply ops on the model's canonical branch; returns the world and the history."""
    world, history = world or World(), []
    for op in ops:
        alternatives = model.step(world, op)
        observed, world = alternatives[0]
        history.append((op, observed, tuple(o for o, _ in alternatives)))
    return world, history


def judge(model, world, op, observed, history=()):
    allowed = [o for o, _ in model.step(world, op)]
    return classify(model, world, op, allowed, observed, history)


def view(wf, done, answers=(), pending=None):
    return StateView.of(wf, done, dict(answers), pending)


# -- tamper reach --------------------------------------------------------------------------------

COMPLETED_THEN_FORK_CRASHED = [
    Start("t0"), Resume("t0", value="a"),
    Fork("t0", gate=2, value="b", new_thread="f1", crash=CrashAt(3, "before_effect", "sigkill")),
]


def test_refusal_on_a_fork_of_a_lineage_tampered_thread_is_allowed():
    refused = Observation("rejected", (), None)
    for scope, expected in (("lineage", None), ("thread", "Stuck")):
        model = Model(GATE2, tamper_scope=scope)
        world, _ = walk(model, COMPLETED_THEN_FORK_CRASHED + [Tamper("t0", how="corrupt")])
        got = judge(model, world, Recover("f1"), refused)
        assert (got.category if got else None) == expected, scope


def test_a_fork_from_any_checkpoint_of_a_damaged_lineage_may_be_refused():
    refused = Observation("rejected", (), None)
    ops = [Start("t0"), Resume("t0", value="a"), Tamper("t0", how="corrupt")]
    fork = Fork("t0", gate=2, value="b", new_thread="f1")
    for scope, expected in (("lineage", None), ("thread", "ForkIgnore")):
        model = Model(GATE2, tamper_scope=scope)
        world, _ = walk(model, ops)
        got = judge(model, world, fork, refused)
        assert (got.category if got else None) == expected, scope


def test_silent_use_of_a_damaged_lineage_is_invalid_persist_not_fork_ignore():
    ops = [Start("t0"), Resume("t0", value="a"), Tamper("t0", how="forged")]
    fork = Fork("t0", gate=2, value="b", new_thread="f1")
    kept_a = Observation("completed", (("f1", 2, "a"), ("f1", 3, None)),
                         view(GATE2, (1, 2, 3), {2: "a"}))
    for scope, expected in (("lineage", "InvalidPersist"), ("thread", "ForkIgnore")):
        model = Model(GATE2, tamper_scope=scope)
        world, _ = walk(model, ops)
        assert judge(model, world, fork, kept_a).category == expected, scope


def test_a_listing_reach_allows_refusals_and_judges_the_rest_as_on_intact_rows():
    # One interrupt, two forks of it, the first one's branch tampered: under "listing" (every
    # checkpoint a row of its own, met by another branch only in a listing) the run t0 may refuse,
    # but two racers consuming its interrupt are LostUpdate's, not a use of damaged data.
    wf = Workflow(1, {1}, ("a", "b"))
    ops = [Start("t0"), Fork("t0", gate=1, value="a", new_thread="f1"),
           Tamper("f1", how="corrupt")]
    race = Race("t0", values=("a", "a"), forced=True)
    both = Observation("completed|completed", (("t0", 1, "a"), ("t0", 1, "a")),
                       view(wf, (1,), {1: "a"}))
    refused = Observation("rejected|rejected", (), None)
    for scope, expected in (("listing", "LostUpdate"), ("lineage", "InvalidPersist"),
                            ("thread", "LostUpdate")):
        model = Model(wf, tamper_scope=scope)
        world, _ = walk(model, ops)
        assert judge(model, world, race, both).category == expected, scope
        # A loud refusal: allowed wherever the tamper reached t0, a divergence where it did not.
        assert (judge(model, world, race, refused) is None) == (scope != "thread"), scope
    # The tampered branch itself is damaged under every reach: running on it is InvalidPersist.
    model = Model(wf, tamper_scope="listing")
    world, _ = walk(model, ops)
    ran = Observation("completed", (("f1", 1, "b"),), view(wf, (1,), {1: "b"}))
    assert judge(model, world, Resume("f1", value="b"), ran).category == "InvalidPersist"


def test_a_store_tamper_reaches_every_thread_and_new_runs():
    model = Model(GATE2, tamper_scope="store")
    world, _ = walk(model, [Start("t0"), Start("t1", crash=CrashAt(1, "in_flight", "sigkill")),
                            Tamper("t0", how="corrupt")])
    refused = Observation("rejected", (), None)
    assert judge(model, world, Recover("t1"), refused) is None
    assert judge(model, world, Start("t2"), refused) is None
    replayed = Observation("interrupted", (("t1", 1, None), ("t1", 1, None)),
                           view(GATE2, (1,), pending=2))
    assert judge(model, world, Recover("t1"), replayed).category == "InvalidPersist"
    thread_only = Model(GATE2)
    world, _ = walk(thread_only, [Start("t0"),
                                  Start("t1", crash=CrashAt(1, "in_flight", "sigkill")),
                                  Tamper("t0", how="corrupt")])
    assert judge(thread_only, world, Recover("t1"), refused).category == "Stuck"


def test_tamper_scope_is_validated():
    with pytest.raises(ValueError):
        Model(GATE2, tamper_scope="galaxy")


# -- PC: labels compared only where the contract fixes them --------------------------------------


def test_after_commit_of_the_task_before_a_gate_may_leave_either_label():
    model = Model(GATE2)
    op = Start("t0", crash=CrashAt(1, "after_commit"))
    for pending in (None, 2):
        observed = Observation("crashed", (("t0", 1, None),), view(GATE2, (1,), pending=pending))
        assert judge(model, World(), op, observed) is None, pending


def test_a_crash_while_consuming_may_leave_either_label_and_recovery_may_keep_the_answer():
    model = Model(GATE2)
    world, _ = walk(model, [Start("t0")])
    op = Resume("t0", value="a", crash=CrashAt(2, "before_effect"))
    unasked = Observation("crashed", (), view(GATE2, (1,)))
    assert judge(model, world, op, unasked) is None
    after = next(w for o, w in model.step(world, op) if o.same_as(unasked))
    finished = Observation("completed", (("t0", 2, "a"), ("t0", 3, None)),
                           view(GATE2, (1, 2, 3), {2: "a"}))
    assert judge(model, after, Recover("t0"), finished) is None


def test_a_label_the_contract_fixes_is_still_compared():
    # A run that returned at its gate must persist the gate as pending.
    model = Model(GATE2)
    observed = Observation("interrupted", (("t0", 1, None),), view(GATE2, (1,)))
    assert judge(model, World(), Start("t0"), observed).category == "StateMismatch"


# -- naming what is found -------------------------------------------------------------------------

TWO_GATES = Workflow(3, {1, 2}, ("a", "b"))


def test_a_stale_answer_completing_the_next_gate_is_double_consume():
    # LangGraph functional API: resume('a') answers gate 1, gate 2 pending; invoke(None)
    # completes gate 2 with 'a'.
    model = Model(TWO_GATES)
    world, history = walk(model, [Start("t0"), Resume("t0", value="a")])
    observed = Observation("completed", (("t0", 2, "a"), ("t0", 3, None)),
                           view(TWO_GATES, (1, 2, 3), {1: "a", 2: "a"}))
    divergence = judge(model, world, Recover("t0"), observed, history)
    assert divergence.category == "DoubleConsume"
    assert divergence.rule == "stale-answer-consumed"
    fresh = Observation("completed", (("t0", 2, "b"), ("t0", 3, None)),
                        view(TWO_GATES, (1, 2, 3), {1: "a", 2: "b"}))
    assert judge(model, world, Recover("t0"), fresh, history).category == "Unclassified"


def test_recovery_finishing_a_crashed_forks_gate_with_another_value_is_fork_ignore():
    model = Model(GATE2)
    ops = [Start("t0"), Resume("t0", value="a"),
           Fork("t0", gate=2, value="b", new_thread="f1", crash=CrashAt(2, "before_effect"))]
    world, history = walk(model, ops)
    observed = Observation("completed", (("f1", 2, "a"), ("f1", 3, None)),
                           view(GATE2, (1, 2, 3), {2: "a"}))
    divergence = judge(model, world, Recover("f1"), observed, history)
    assert divergence.category == "ForkIgnore"
    assert judge(model, world, Recover("f1"), observed).category != "ForkIgnore"  # needs history


def test_refusing_before_running_after_a_crash_is_stuck_even_with_a_bad_output():
    wf = Workflow(3, set(), ("a", "b"))
    model = Model(wf)
    world, _ = walk(model, [Start("t0", crash=CrashAt(1, "after_commit", "sigkill"))])
    refused = Observation("rejected", (), view(wf, (1,)))
    divergence = judge(model, world, Recover("t0", bad_output=3), refused)
    assert divergence.category == "Stuck"
    # Refused at the bad output, after running task 2: that is the reference's own answer.
    at_bad = Observation("rejected", (("t0", 2, None), ("t0", 3, None)), view(wf, (1, 2)))
    assert judge(model, world, Recover("t0", bad_output=3), at_bad) is None


# -- the table -----------------------------------------------------------------------------------


def test_rules_are_a_cited_table_ending_in_unclassified():
    assert RULES[0].name == "tampered-state-used" and RULES[0].category == "InvalidPersist"
    assert RULES[-1].category == "Unclassified"
    assert all(rule.clause.startswith("docs/contract.md §") for rule in RULES)
    assert len({rule.name for rule in RULES}) == len(RULES)


def test_every_divergence_names_its_rule_and_clause():
    model = Model(GATE2)
    observed = Observation("rejected", (), view(GATE2, ()))
    divergence = judge(model, World(), Start("t0"), observed)
    assert (divergence.rule, divergence.clause) == ("unexplained",
                                                     "docs/contract.md §5 Unclassified")


def test_a_forks_value_answering_a_gate_it_never_reaches_is_double_consume():
    # LangGraph functional API: a fork of gate 1 with 'a' that completes gate 2 with 'a'.
    model = Model(TWO_GATES)
    world, history = walk(model, [Start("t0"), Fork("t0", gate=1, value="a", new_thread="f1")])
    fork = Fork("f1", gate=1, value="a", new_thread="f2")
    observed = Observation("completed", (("f2", 2, "a"), ("f2", 3, None)),
                           view(TWO_GATES, (1, 2, 3), {1: "a", 2: "a"}))
    divergence = judge(model, world, fork, observed, history)
    assert divergence.category == "DoubleConsume"
    assert "another gate" in divergence.detail


def test_two_racers_going_past_the_gate_is_lost_update():
    from refmodel import Race

    model = Model(GATE2)
    world, _ = walk(model, [Start("t0")])
    race = Race("t0", values=("a", "a"))
    observed = Observation("completed|completed",
                           (("t0", 2, "a"), ("t0", 3, None), ("t0", 3, None)),
                           view(GATE2, (1, 2, 3), {2: "a"}))
    assert judge(model, world, race, observed).category == "LostUpdate"
    once = Observation("completed|completed", (("t0", 2, "a"), ("t0", 3, None)),
                       view(GATE2, (1, 2, 3), {2: "a"}))
    assert judge(model, world, race, once) is None  # a loser that reports a no-op is allowed


# -- the rules that named the last Unclassified entries ("name what is found") -------------------

ONE_GATE = Workflow(1, {1}, ("a", "b"))
ASKED = Observation("interrupted", (), view(ONE_GATE, (), pending=1))  # gate 1 asked, no effect


# -- answer-dropped-after-crash (pydantic-graph's docs idiom after an exception in the gate) -----


def test_an_answer_dropped_after_a_crash_while_consuming_is_stuck():
    model = Model(ONE_GATE)
    crashed, _ = walk(model, [Start("t0"),
                              Resume("t0", value="a", crash=CrashAt(1, "before_effect", "exception"))])
    divergence = judge(model, crashed, Resume("t0", value="a"), ASKED)
    assert (divergence.category, divergence.rule) == ("Stuck", "answer-dropped-after-crash")
    assert "dropped" in divergence.detail


def test_the_same_answer_dropped_without_a_crash_is_not_that_rule():
    # No crash before: the thread is not one that must go on after a crash (nothing names it).
    model = Model(ONE_GATE)
    world, _ = walk(model, [Start("t0")])
    divergence = judge(model, world, Resume("t0", value="a"), ASKED)
    assert divergence.rule != "answer-dropped-after-crash"


def test_asking_again_is_allowed_as_the_crashing_ops_own_outcome():
    model = Model(ONE_GATE)
    world, _ = walk(model, [Start("t0")])
    op = Resume("t0", value="a", crash=CrashAt(1, "before_effect", "exception"))
    crashed = Observation("crashed", (), view(ONE_GATE, (), pending=1))
    assert judge(model, world, op, crashed) is None


# -- fork-never-consumed: a refused fork consumed nothing -----------------------------------------


def test_a_refused_fork_whose_source_holds_the_same_answer_is_fork_ignore():
    # LangGraph functional API, -travel: the fork of f1's gate 1 with 'a' is refused (two
    # interrupts pending), and the state read back is f1's own, which already answers 'a'.
    model = Model(TWO_GATES)
    world, _ = walk(model, [Start("t0"), Fork("t0", gate=1, value="a", new_thread="f1")])
    refused = Observation("rejected", (), view(TWO_GATES, (1,), {1: "a"}, 2))
    divergence = judge(model, world, Fork("f1", gate=1, value="a", new_thread="f2"), refused)
    assert (divergence.category, divergence.rule) == ("ForkIgnore", "fork-never-consumed")


def test_a_refused_fork_is_never_consumed_whatever_answer_the_source_holds():
    # LangGraph functional API, -travel: f1 answered 'b'; its fork with 'a' is refused, and the
    # state read back is f1's own.  The fork kept nothing: it made no branch.
    model = Model(TWO_GATES)
    world, _ = walk(model, [Start("t0"), Fork("t0", gate=1, value="b", new_thread="f1")])
    refused = Observation("rejected", (), view(TWO_GATES, (1,), {1: "b"}, 2))
    divergence = judge(model, world, Fork("f1", gate=1, value="a", new_thread="f2"), refused)
    assert divergence.rule == "fork-never-consumed" and "(refused)" in divergence.detail
    # Not refused, the same state is a branch that kept the source's answer.
    kept = Observation("interrupted", (), view(TWO_GATES, (1,), {1: "b"}, 2))
    divergence = judge(model, world, Fork("f1", gate=1, value="a", new_thread="f2"), kept)
    assert divergence.rule == "fork-kept-another-value"


def test_a_fork_that_records_its_value_without_running_its_gate_is_fork_ignore():
    model = Model(TWO_GATES)
    world, _ = walk(model, [Start("t0"), Fork("t0", gate=1, value="a", new_thread="f1")])
    fork = Fork("f1", gate=1, value="a", new_thread="f2")
    # Recorded, not refused, no effect: the value is there, the gate never ran in the branch
    # (FD: "fires e_gate(v) in the new branch"), so not "never consumed" but rule 6.
    recorded = Observation("interrupted", (), view(TWO_GATES, (1,), {1: "a"}, 2))
    divergence = judge(model, world, fork, recorded)
    assert (divergence.category, divergence.rule) == ("ForkIgnore", "fork-gate-not-run")
    assert "e1('a') did not fire" in divergence.detail and "earlier" not in divergence.detail
    # The same observation with the gate's effect in the branch is the allowed one.
    ran = Observation("interrupted", (("f2", 1, "a"),), view(TWO_GATES, (1,), {1: "a"}, 2))
    assert judge(model, world, fork, ran) is None


def test_a_fork_that_took_the_result_of_an_earlier_run_says_so():
    # LangGraph's functional API, the Command(resume) fork spelling: a resume at the gate's
    # checkpoint completed the gate and crashed after task 1; the fork at that checkpoint with
    # the same value took that run's cached result, and e1 never fired in the new branch.
    model = Model(Workflow(2, {1}, ("a", "b")))
    world, history = walk(model, [
        Start("t0"), Resume("t0", value="a", crash=CrashAt(1, "after_commit", "exception"))])
    fork = Fork("t0", gate=1, value="a", new_thread="f1")
    completed = Observation("completed", (("f1", 2, None),),
                            view(model.workflow, (1, 2), {1: "a"}))
    divergence = judge(model, world, fork, completed, history)
    assert (divergence.category, divergence.rule) == ("ForkIgnore", "fork-gate-not-run")
    assert "fired earlier on t0" in divergence.detail
    # Without that earlier run in the history, the detail claims nothing about one.
    assert "earlier" not in judge(model, world, fork, completed).detail


def test_a_fork_whose_value_answers_an_earlier_gate_has_its_own_rule():
    # LangGraph's functional API: the fork at gate 2 re-runs the tasks before it, gate 1 asks
    # again and takes the fork's value, and gate 2 asks for an answer of its own.
    model = Model(TWO_GATES)
    world, _ = walk(model, [Start("t0"), Resume("t0", value="a")])
    fork = Fork("t0", gate=2, value="b", new_thread="f1")
    answered = Observation("interrupted", (("f1", 1, "b"),), view(TWO_GATES, (1,), {1: "b"}, 2))
    divergence = judge(model, world, fork, answered)
    assert (divergence.category, divergence.rule) == ("ForkIgnore", "fork-answered-earlier-gate")
    # Gate 2 asking again with nothing fired is only "never consumed".
    asked = Observation("interrupted", (), view(TWO_GATES, (1,), {1: "a"}, 2))
    assert judge(model, world, fork, asked).rule == "fork-never-consumed"


def test_a_fork_stopped_by_its_own_crash_point_in_a_re_run_task_is_prefix_replay():
    # LangGraph's functional copy fork at gate 3 re-runs tasks 1 and 2; its crash point at task
    # 1 (after commit) fires there and the branch dies before gate 3.  The crash stopped the
    # gate, the re-run reached the crash: PrefixReplay (rule 14), the re-run a framework may
    # document, not ForkIgnore (campaign of 2026-12-05, func-copy/ForkIgnore-72e5d06144a7).
    wf = Workflow(3, {3}, ("a", "b"))
    model = Model(wf)
    world, _ = walk(model, [Start("t0")])
    crash = CrashAt(1, "after_commit", "exception")
    fork = Fork("t0", gate=3, value="a", new_thread="f1", crash=crash)
    died = Observation("crashed", (), view(wf, (1, 2), {}, None))
    divergence = judge(model, world, fork, died)
    assert (divergence.category, divergence.rule) == ("PrefixReplay", "resume-refires-prefix")
    assert "crash point at task 1" in divergence.detail
    # The same branch, dead with no crash point of its own: the gate never consumed the value.
    divergence = judge(model, world, Fork("t0", gate=3, value="a", new_thread="f1"), died)
    assert (divergence.category, divergence.rule) == ("ForkIgnore", "fork-never-consumed")


# -- the history reach ---------------------------------------------------------------------------


def test_under_a_history_reach_a_fork_of_any_checkpoint_of_a_tampered_thread_may_refuse():
    ops = [Start("t0"), Resume("t0", value="a"), Tamper("t0", how="corrupt")]
    fork = Fork("t0", gate=1, value="a", new_thread="f1")
    refused = Observation("rejected", (), view(ONE_GATE, ()))
    for scope, allowed in (("history", True), ("thread", False)):
        model = Model(ONE_GATE, tamper_scope=scope)
        divergence = judge(model, walk(model, ops)[0], fork, refused)
        assert (divergence is None) == allowed, scope


def test_a_history_reach_does_not_reach_a_branch_forked_before_the_tamper():
    model = Model(ONE_GATE, tamper_scope="history")
    world, _ = walk(model, [Start("t0"), Fork("t0", gate=1, value="a", new_thread="f1"),
                            Tamper("t0", how="corrupt")])
    assert world.get("t0").damaged and not world.get("f1").damaged


# -- pending-gate-refused (LlamaIndex server: an idle handler's run garbage-collected) ----------


def test_a_refused_answer_to_a_pending_gate_is_stuck_and_names_a_crash_elsewhere():
    model = Model(ONE_GATE)
    ops = [Start("t0"), Start("t1"),
           Resume("t0", value="b", crash=CrashAt(1, "in_flight", "exception"))]
    world, history = walk(model, ops)
    refused = Observation("rejected", (), view(ONE_GATE, (), pending=1))
    divergence = judge(model, world, Resume("t1", value="b"), refused, history)
    assert (divergence.category, divergence.rule) == ("Stuck", "pending-gate-refused")
    assert "after the crash of t0 at step 3" in divergence.detail


def test_a_refused_answer_without_any_crash_is_stuck_too():
    model = Model(ONE_GATE)
    world, history = walk(model, [Start("t0"), Start("t1")])
    refused = Observation("rejected", (), view(ONE_GATE, (), pending=1))
    divergence = judge(model, world, Resume("t0", value="b"), refused, history)
    assert divergence.rule == "pending-gate-refused" and "crash" not in divergence.detail


def test_a_refusal_the_contract_allows_is_not_that_rule():
    # t1 already answered: nothing pending, a refusal (or a no-op) is allowed.
    model = Model(ONE_GATE)
    world, history = walk(model, [Start("t1"), Resume("t1", value="a")])
    refused = Observation("rejected", (), view(ONE_GATE, (1,), {1: "a"}))
    assert judge(model, world, Resume("t1", value="b"), refused, history) is None


def test_a_refused_start_is_not_that_rule():
    # Nothing pending: a run that cannot begin is named by no category (Unclassified).
    model = Model(ONE_GATE)
    refused = Observation("rejected", (), view(ONE_GATE, ()))
    assert judge(model, World(), Start("t0"), refused).category == "Unclassified"


# -- a race's loser may report the gate it read before the winner's commit ----------------------

RACE_WF = Workflow(2, {1}, ("a", "b"))
RACE_EFFECTS = (("t0", 1, "a"), ("t0", 2, None))


def judge_race(outcome, state):
    """Judge ``race(['a', 'a'])`` at gate 1 of a started run that fired RACE_EFFECTS."""
    from refmodel import Race

    model = Model(RACE_WF)
    world, history = walk(model, [Start("t0")])
    race = Race("t0", values=("a", "a"))
    return judge(model, world, race, Observation(outcome, RACE_EFFECTS, state), history)


def test_a_loser_reporting_the_gate_still_asked_is_allowed_when_nothing_else_differs():
    assert judge_race("completed|interrupted", view(RACE_WF, (1, 2), {1: "a"})) is None
    # The canonical outcome is still every loser refused.
    from refmodel import Race

    model = Model(RACE_WF)
    world, _ = walk(model, [Start("t0")])
    assert model.step(world, Race("t0", values=("a", "a")))[0][0].outcome == "completed|rejected"


def test_a_loser_whose_write_reverts_the_winners_completed_run_is_state_mismatch():
    # pydantic-graph's docs idiom after a crash: the loser's fresh run re-asks gate 1 and its
    # snapshot lands last.
    divergence = judge_race("completed|interrupted", view(RACE_WF, (), pending=1))
    assert (divergence.category, divergence.rule) == ("StateMismatch", "state-differs")


def test_a_loser_that_read_the_winners_run_mid_way_may_report_ok():
    # AutoGen's HITL loop: the loser loads the winner's state saved after the gate's answer,
    # nothing asks and nothing is finished, so it makes no run call (``Case.run`` -> "ok").
    assert judge_race("completed|ok", view(RACE_WF, (1, 2), {1: "a"})) is None


def test_an_ok_loser_that_consumed_the_gate_again_is_still_lost_update():
    # The label excuses nothing the loser did: the gate's effect twice is two consumes.
    from refmodel import Race

    model = Model(RACE_WF)
    world, history = walk(model, [Start("t0")])
    twice = RACE_EFFECTS + (("t0", 1, "a"),)
    observed = Observation("completed|ok", twice, view(RACE_WF, (1, 2), {1: "a"}))
    divergence = judge(model, world, Race("t0", values=("a", "a")), observed, history)
    assert divergence is not None and divergence.category == "LostUpdate"


def test_the_winners_label_is_still_compared():
    # Every racer reports the gate asked, yet the run completed: no racer reported the winner.
    assert judge_race("interrupted|interrupted", view(RACE_WF, (1, 2), {1: "a"})) is not None


# -- a crash point that fires at a completed task: the task ran again ----------------------------

ONE_TASK = Workflow(1, set(), ("a", "b"))


def test_a_crash_point_firing_at_a_completed_task_on_recovery_is_replay():
    model = Model(ONE_TASK)
    world, history = walk(model, [Start("t0")])  # completed
    op = Recover("t0", crash=CrashAt(1, "before_effect", "exception"))
    crashed = Observation("crashed", (), view(ONE_TASK, (1,)))
    divergence = judge(model, world, op, crashed, history)
    assert (divergence.category, divergence.rule) == ("Replay", "recovery-refires-completed")
    assert "re-entered completed task 1" in divergence.detail


def test_a_crash_point_firing_at_a_completed_task_on_resume_is_prefix_replay():
    # pydantic-graph's docs idiom on a finished run: load_next() finds nothing, a fresh run.
    model = Model(ONE_TASK)
    world, history = walk(model, [Start("t0")])
    op = Resume("t0", value="a", crash=CrashAt(1, "before_effect", "exception"))
    crashed = Observation("crashed", (), view(ONE_TASK, ()))
    divergence = judge(model, world, op, crashed, history)
    assert (divergence.category, divergence.rule) == ("PrefixReplay", "resume-refires-prefix")


def test_a_crash_point_at_a_task_not_yet_done_is_not_a_re_run():
    model = Model(GATE2)
    world, history = walk(model, [Start("t0")])  # task 1 done, gate 2 pending
    op = Resume("t0", value="a", crash=CrashAt(3, "before_effect", "exception"))
    early = Observation("crashed", (), view(GATE2, (1,), pending=2))  # crashed, nothing fired
    divergence = judge(model, world, op, early, history)
    assert divergence.rule not in ("resume-refires-prefix", "recovery-refires-completed")


# -- completed-work-lost: a fresh run replaces a finished one ------------------------------------


def test_a_resume_that_replaces_a_finished_run_with_a_fresh_one_is_state_mismatch():
    model = Model(ONE_GATE)
    world, history = walk(model, [Start("t0"), Resume("t0", value="a")])  # completed
    divergence = judge(model, world, Resume("t0", value="a"), ASKED, history)
    assert (divergence.category, divergence.rule) == ("StateMismatch", "completed-work-lost")
    assert "lost completed task(s) [1]" in divergence.detail


def test_asking_again_with_the_finished_run_kept_is_not_that_rule():
    model = Model(ONE_GATE)
    world, history = walk(model, [Start("t0"), Resume("t0", value="a")])
    kept = Observation("interrupted", (), view(ONE_GATE, (1,), {1: "a"}))
    divergence = judge(model, world, Resume("t0", value="a"), kept, history)
    assert divergence.rule != "completed-work-lost"


# -- a crash as recovery enters a pending gate again (issue 41) ----------------------------------


def test_a_crash_entering_the_pending_gate_on_recover_may_leave_nothing_pending():
    # LangGraph's graph API clears the interrupt as the gate node starts again: after a SIGKILL
    # there, the thread reads "incomplete, nothing pending".  docs/contract.md §3 allows that label
    # after any crash whose next task is a gate; the same label after task 1 completed is not
    # allowed.
    model = Model(GATE2)
    world, history = walk(model, [Start("t0")])
    recover = Recover("t0", crash=CrashAt(2, "before_effect", "sigkill"))
    unasked = Observation("crashed", (), view(GATE2, [1]))
    assert judge(model, world, recover, unasked, history) is None
    lost = Observation("crashed", (), view(GATE2, []))
    assert judge(model, world, recover, lost, history) is not None


# -- a store that reads back an old version (issue 42) -------------------------------------------


def test_a_state_read_back_as_it_was_earlier_is_a_stale_read():
    model = Model(GATE2)
    world, history = walk(model, [Start("t0")])
    after_start = history[-1][1].state
    resumed = model.step(world, Resume("t0", value="a"))[0][0]
    # The resume ran (its effects fired) but the read after it returned the pending state.
    stale = Observation(resumed.outcome, resumed.effects, after_start)
    found = judge(model, world, Resume("t0", value="a"), stale, history)
    assert found.category == "StateMismatch" and found.rule == "state-differs"
    assert found.detail.startswith("stale read (thread t0's state as it was after step 1, start)")
    # The same state with no history to have read it in: not named stale.
    plain = judge(model, world, Resume("t0", value="a"), stale, ())
    assert plain.rule == "state-differs" and "stale" not in plain.detail


def test_an_old_state_with_other_labels_is_still_the_stores_read_pc():
    model = Model(GATE2)
    world, history = walk(model, [Start("t0")])
    after_start = history[-1][1].state
    # The resume saw the old checkpoint: it says "interrupted", fires nothing, reads it back.
    stale = Observation("interrupted", (), after_start)
    found = judge(model, world, Resume("t0", value="a"), stale, history)
    assert (found.category, found.rule) == ("StateMismatch", "stale-read"), found
    # A refusal leaves the state as it was: that is the refusal's divergence, not a stale read.
    refused = Observation("rejected", (), after_start)
    assert judge(model, world, Resume("t0", value="a"), refused, history).rule != "stale-read"


def test_a_query_of_an_intact_thread_that_is_refused_is_read_refused():
    from refmodel import Query

    model = Model(GATE2)
    world, history = walk(model, [Start("t0")])
    refused = Observation("rejected", (), None, error="RuntimeError: lag [in MySaver.get_tuple]")
    found = judge(model, world, Query("t0"), refused, history)
    assert (found.category, found.rule) == ("StateMismatch", "read-refused")
    assert "[in MySaver.get_tuple]" in found.detail
    # On a tampered thread a query may refuse (docs/semantics.md): allowed, no divergence.
    tampered, _ = walk(model, [Tamper("t0", how="corrupt")], world)
    assert judge(model, tampered, Query("t0"), refused, history) is None


def test_a_refused_fork_of_an_intact_thread_is_fork_ignore():
    model = Model(GATE2)
    world, history = walk(model, [Start("t0")])
    # A fork killed at its gate, so that it consumes nothing either way: a refusal there is
    # no "fork never consumed" (rule 5), and was Unclassified before rule 24.
    fork = Fork("t0", gate=2, value="b", new_thread="f1",
                crash=CrashAt(2, "before_effect", "sigkill"))
    refused = Observation("rejected", (), None, error="Refused: no such checkpoint")
    found = judge(model, world, fork, refused, history)
    assert (found.category, found.rule) == ("ForkIgnore", "fork-refused"), found
    # Forking a thread the model says is damaged may be refused: no divergence there.
    tampered, _ = walk(model, [Tamper("t0", how="corrupt")], world)
    assert judge(model, tampered, fork, refused, history) is None


def test_an_op_answering_from_a_pause_the_thread_left_is_a_stale_read():
    model = Model(GATE2)
    world, history = walk(model, [Start("t0"), Resume("t0", value="a")])
    done = history[-1][1].state
    # Recovering the completed thread ran nothing but said "interrupted": it read the paused
    # checkpoint of step 1, although the state read back after it is the current one.
    answered = Observation("interrupted", (), done)
    found = judge(model, world, Recover("t0"), answered, history)
    assert (found.category, found.rule) == ("StateMismatch", "stale-read"), found
    assert "as it was after step 1, start" in found.detail
    # With no pause in the thread's history there is nothing it could have read: unexplained.
    assert judge(model, world, Recover("t0"), answered, ()).rule == "unexplained"
    # A fork's checkpoints grow from its source's: the pause read may be the source's.
    world, history = walk(model, [Start("t0"), Fork("t0", gate=2, value="a", new_thread="f1")])
    answered = Observation("interrupted", (), history[-1][1].state)
    found = judge(model, world, Recover("f1"), answered, history)
    assert found.rule == "stale-read" and "thread t0's checkpoint" in found.detail, found
