"""The one comparison step (fuzz.judge) and replay's per-entry summary over trials."""

from adapters.protocol import Capabilities, Deviation
from fuzz.judge import judge_step, judge_trace, model_for
from fuzz.rate import Rate
from fuzz.replay import ReplayResult, summarize
from refmodel import (
    CrashAt,
    Observation,
    Recover,
    Resume,
    Start,
    StateView,
    Tamper,
    Workflow,
    World,
)

WF = Workflow(3, {3}, ("a", "b"))
LAGGING = Deviation("StateMismatch", "docs: durability='exit' writes at exit", "after a SIGKILL",
                    after_crash_kinds=frozenset({"sigkill"}))


class Scripted:
    """A runner that answers each op with the next scripted observation."""

    def __init__(self, observations):
        self.observations = list(observations)
        self.closed = False

    def apply(self, op):
        return self.observations.pop(0)

    def close(self):
        self.closed = True


def view(done, answers=(), pending=None):
    return StateView.of(WF, done, dict(answers), pending)


OPS = [Start("t0", crash=CrashAt(2, "after_commit", "sigkill")), Recover("t0"),
       Resume("t0", value="a")]
# The checkpoint lags after the SIGKILL (done (1,) though task 2 completed): a documented PC
# deviation.  Recovery then re-runs task 2 from what was persisted: allowed under the adopted
# branch.  The resume then re-fires task 1: a PrefixReplay defect after the D.
SCRIPT = [
    Observation("crashed", (("t0", 1, None), ("t0", 2, None)), view((1,))),
    Observation("interrupted", (("t0", 2, None),), view((1, 2), pending=3)),
    Observation("completed", (("t0", 1, None), ("t0", 3, "a")), view((1, 2, 3), {3: "a"})),
]


def test_a_documented_deviation_does_not_end_the_search():
    runner = Scripted(SCRIPT)
    verdict = judge_trace(lambda wf: runner, WF, OPS, Capabilities(), [LAGGING])
    assert verdict.verdict == "✗" and verdict.divergence.category == "PrefixReplay"
    assert verdict.first_divergence_index == 2
    # The recovery's second e_2 is the D's consequence (EO), excused by the same citation.
    assert [(d.index, d.divergence.category) for d in verdict.deviations_seen] == [
        (0, "StateMismatch"), (1, "Replay")]
    assert runner.closed and len(verdict.observations) == 3


def test_the_adopted_branch_is_the_frameworks_and_a_d_alone_is_the_verdict():
    verdict = judge_trace(lambda wf: Scripted(SCRIPT[:1]), WF, OPS[:1], Capabilities(), [LAGGING])
    assert verdict.verdict == "D" and verdict.divergence.category == "StateMismatch"
    assert verdict.first_divergence_index == 0 and verdict.citation == LAGGING.citation


def test_a_d_excuses_its_consequence_but_records_it():
    # docs/contract.md §5: after the lagging checkpoint (a D), recovery re-runs task 2, whose effect
    # fires a second time.  The adopted branch allows it, so the model alone would read EO ✓;
    # the verdict is a D on EO (Replay) with the same citation, and it is the one reported.
    verdict = judge_trace(lambda wf: Scripted(SCRIPT[:2]), WF, OPS[:2], Capabilities(), [LAGGING])
    assert verdict.verdict == "D" and verdict.divergence.category == "Replay"
    assert verdict.divergence.property == "EO" and verdict.divergence.rule == "consequence"
    assert verdict.first_divergence_index == 1 and verdict.citation == LAGGING.citation
    # Without the deviation the same history is a ✗ at its first step (the next test): a
    # consequence is owed only after a D.


def test_without_the_deviation_the_first_divergence_is_a_defect():
    verdict = judge_trace(lambda wf: Scripted(SCRIPT), WF, OPS, Capabilities(), [])
    assert verdict.verdict == "✗" and verdict.divergence.category == "StateMismatch"
    assert verdict.first_divergence_index == 0 and verdict.deviations_seen == ()


def test_judge_step_applies_the_adapters_tamper_reach():
    wf = Workflow(2, set(), ("a", "b"))
    ops = [Start("t0"), Start("t1", crash=CrashAt(1, "in_flight", "sigkill")),
           Tamper("t0", how="corrupt")]
    refused = Observation("rejected", (), None)
    for scope, category in (("store", None), ("thread", "Stuck")):
        caps = Capabilities(tamper_scope=scope)
        model, world = model_for(wf, caps), World()
        for op in ops:
            world = model.step(world, op)[0][1]
        judgement = judge_step(model, world, Recover("t1"), refused, caps)
        assert (judgement.divergence.category if judgement.divergence else None) == category


def test_judge_step_follows_the_allowed_branch_the_target_took():
    model, world = model_for(WF, Capabilities()), World()
    op = Start("t0", crash=CrashAt(2, "after_commit"))
    asked = Observation("crashed", (("t0", 1, None), ("t0", 2, None)), view((1, 2), pending=3))
    judgement = judge_step(model, world, op, asked)
    assert judgement.ok and judgement.world.get("t0").durable.pending == 3
    assert judgement.allowed[0].state.pending is None  # the canonical branch was the other


def result(status):
    return ReplayResult("e.json", status, "Replay", None, status.lower())


def test_a_tie_never_turns_a_failing_entry_into_fixed():
    summary = summarize([result("FIXED"), result("FAILED"), result("CHANGED")])
    assert summary.status == "FAILED"
    assert summary.rates == {"FAILED": 1, "CHANGED": 1, "FIXED": 1}
    assert summary.detail.startswith("[FAILED 1/3, CHANGED 1/3, FIXED 1/3]")


def test_summary_status_rules():
    assert summarize([result("FIXED")] * 26 + [result("FAILED")] * 4).status == "FAILED"
    assert summarize([result("FIXED"), result("CHANGED")]).status == "CHANGED"
    assert summarize([result("FIXED")] * 3).status == "FIXED"
    assert summarize([result("FIXED"), result("ERROR")]).status == "ERROR"
    single = summarize([result("FAILED")])
    assert single.rates == {"FAILED": 1} and single.detail == "failed"
    assert summarize([result("FIXED")] * 2).to_json()["rates"] == {"FIXED": 2}


def test_relabel_rewrites_a_changed_entry_under_the_category_found_now():
    from fuzz.corpus import fingerprint
    from fuzz.replay import relabelled
    from fuzz.trace import Finding, Trace

    old = Trace(WF, tuple(OPS), "t", "v", finding=Finding("Unclassified", "-", 2, "old"),
                status="FAILED", fingerprint="0" * 12)
    judged = judge_trace(lambda wf: Scripted(SCRIPT), WF, OPS, Capabilities(), [LAGGING])
    changed = ReplayResult("e.json", "CHANGED", "Unclassified", "PrefixReplay", "", "✗",
                           judged=judged)
    fixed = ReplayResult("e.json", "FIXED", "Unclassified", None, "")
    assert relabelled(old, [fixed, fixed]) is None  # nothing changed: nothing to rewrite
    new = relabelled(old, [changed, fixed, changed])
    assert (new.finding.category, new.finding.step, new.finding.verdict) == ("PrefixReplay", 2, "✗")
    assert new.finding.reproduced == Rate(2, 3)  # not every trial showed it
    assert new.status == "FAILED" and new.fingerprint == fingerprint("PrefixReplay", new)
    assert len(new.operations) == len(new.observations) == len(new.expected) == 3
    assert relabelled(old, [changed]).finding.reproduced is None
    assert "judged" not in changed.to_json()


def test_relabel_keeps_the_witness_the_corpus_already_has(tmp_path):
    # AutoGen swarm-handoff-hitl-sqlite, 2026-12-05: the relabelled entry, cut at its new
    # divergence, was the corpus's StateMismatch-f05868e005c5 itself, which --relabel then wrote
    # over (its checked script and its date lost).  Now that entry stays as it was.
    from fuzz.cli import _relabel
    from fuzz.corpus import entry_path
    from fuzz.replay import relabelled
    from fuzz.trace import Finding, Trace, dump_trace

    old = Trace(WF, tuple(OPS), "t", "v", finding=Finding("Unclassified", "-", 2, "old"),
                status="FAILED", fingerprint="0" * 12)
    judged = judge_trace(lambda wf: Scripted(SCRIPT), WF, OPS, Capabilities(), [LAGGING])
    trials = [ReplayResult("e.json", "CHANGED", "Unclassified", "PrefixReplay", "", "✗",
                           judged=judged)]
    root = tmp_path / "corpus"
    old_path = entry_path(old, root)
    dump_trace(old, old_path)
    there = entry_path(relabelled(old, trials), root)
    there.parent.mkdir(parents=True, exist_ok=True)
    there.write_text("the entry as the corpus has it")
    _relabel(old_path, trials, trials[0])
    assert not old_path.exists()
    assert there.read_text() == "the entry as the corpus has it"
    assert "already in the corpus" in trials[0].detail



def test_an_adopted_fork_keeps_only_the_gates_its_branch_reached():
    """A fork that deviates (documented) and dies before the gate its canonical run would have
    asked: after adopting what the framework persisted, that gate is no checkpoint of the branch,
    so no later fork addresses it (one was generated, and the LangGraph adapter could not find
    it: a tool error, 1 in 20,412 examples of a campaign, 2026-12-05); the source's gates up to
    the fork's stay addressable."""
    import pytest

    from refmodel import Fork, InvalidOperation

    wf = Workflow(3, {2, 3}, ("a", "b"))
    # The fork re-runs task 1 (its effect fires again) and dies there, at its own crash point:
    # the re-run is the divergence (rule 14), which the adapter documents.
    reruns = Deviation("PrefixReplay", "docs: a fork re-runs from its checkpoint", "fork",
                       ops=frozenset({"fork"}))
    model, world = model_for(wf, Capabilities()), World()
    start = Observation("interrupted", (("t0", 1, None),), StateView.of(wf, [1], {}, 2))
    world = judge_step(model, world, Start("t0"), start, Capabilities(), [reruns]).world
    fork = Fork("t0", gate=2, value="a", new_thread="f1",
                crash=CrashAt(1, "after_commit", "exception"))
    died = Observation("crashed", (("f1", 1, None),), StateView.of(wf, [1], {}, None))
    judged = judge_step(model, world, fork, died, Capabilities(), [reruns])
    assert judged.verdict == "D" and judged.divergence.rule == "resume-refires-prefix"
    assert [g for g, _ in judged.world.get("f1").gate_checkpoints] == [2]
    with pytest.raises(InvalidOperation):
        model.step(judged.world, Fork("f1", gate=3, value="a", new_thread="f2"))
    model.step(judged.world, Fork("f1", gate=2, value="b", new_thread="f2"))  # still there


TIME_TRAVEL = Deviation("Replay", "docs: a call at a checkpoint the thread moved past reruns "
                        "its finished tasks", "recover of a superseded thread",
                        rules=frozenset({"recovery-refires-completed"}), superseded=True)


def _recover_after(fork: bool):
    """``start; [fork(gate 3, b);] recover(t0)`` where the recovery runs tasks 1 and 2 again
    (LangGraph's functional API, ``func-command/Replay-8009beb33d3e``): the verdict."""
    from refmodel import Fork

    asked = Observation("interrupted", (("t0", 1, None), ("t0", 2, None)), view((1, 2), pending=3))
    ops, script = [Start("t0")], [asked]
    if fork:
        ops.append(Fork("t0", gate=3, value="b", new_thread="f1"))
        script.append(Observation("completed", (("f1", 3, "b"),), view((1, 2, 3), {3: "b"})))
    ops.append(Recover("t0"))
    script.append(asked)
    return judge_trace(lambda wf: Scripted(script), WF, ops, Capabilities(), [TIME_TRAVEL])


def test_a_superseded_deviation_covers_only_a_thread_behind_its_lineage():
    behind = _recover_after(fork=True)  # the branch f1 wrote after t0: t0 is behind
    assert behind.verdict == "D" and behind.divergence.rule == "recovery-refires-completed"
    # The same re-run at the thread's head is the defect it always was.
    at_head = _recover_after(fork=False)
    assert at_head.verdict == "✗" and at_head.divergence.rule == "recovery-refires-completed"


def test_superseded_reads_the_lineage_and_the_order_of_its_writes():
    from fuzz.judge import superseded
    from refmodel import Fork, Resume

    model, world, history = model_for(WF, Capabilities()), World(), []

    def apply(op, outcome=None):
        nonlocal world
        observed, after = model.step(world, op)[0]
        if outcome is not None:  # what the target did instead
            observed = Observation(outcome, (), None)
        history.append((op, observed, (observed,)))
        world = after

    apply(Start("t0"))
    apply(Start("t1"))
    apply(Fork("t1", gate=3, value="b", new_thread="g1"), outcome="rejected")
    assert not superseded(world, Recover("t1"), history)  # a refused fork wrote nothing
    apply(Fork("t0", gate=3, value="b", new_thread="f1"))
    assert superseded(world, Recover("t0"), history)  # its branch wrote after it
    assert not superseded(world, Recover("f1"), history)  # the newest of its lineage
    assert not superseded(world, Recover("t1"), history)  # another run: not its lineage
    apply(Resume("t0", value="a"))
    assert superseded(world, Recover("f1"), history)  # now the source wrote after the branch
    assert not superseded(world, Recover("t0"), history)



def test_every_category_has_its_failure_class_declared_in_source():
    """Written out, not made with ``type()``: grep finds ``LostUpdateFailure`` where it is."""
    import inspect

    from fuzz import failures
    from refmodel import CATEGORIES, CATEGORY_INFO

    assert list(failures.FAILURES) == list(CATEGORIES)
    source = inspect.getsource(failures)
    for category, cls in failures.FAILURES.items():
        assert cls.__name__ == f"{category}Failure" and cls.category == category
        assert f"class {cls.__name__}(Failure):" in source
        assert cls.__doc__.startswith(f"{category} ({CATEGORY_INFO[category].paper_switch}, ")


def test_where_the_model_and_the_predicates_disagree_the_run_is_no_verdict(monkeypatch):
    """As Elle checks a history without a model: a step the model allows that a model-free
    predicate reads as broken means one of our two readings is wrong, an engine error naming the
    step and the operations, never a finding about the framework."""
    import pytest

    from fuzz.errors import EngineError, OracleDisagreement
    from refmodel import properties

    asked = Observation("interrupted", (("t0", 1, None), ("t0", 2, None)),
                        view([1, 2], pending=3))
    assert judge_trace(lambda wf: Scripted([asked]), WF, [Start("t0")],
                       Capabilities(), []).verdict is None
    monkeypatch.setitem(properties.PROPERTIES, "LV", lambda wf, steps, scope: len(steps) - 1)
    with pytest.raises(OracleDisagreement) as raised:
        judge_trace(lambda wf: Scripted([asked]), WF, [Start("t0")], Capabilities(), [])
    assert isinstance(raised.value, EngineError)
    assert "step 1 (start t0, observed interrupted)" in str(raised.value)
    assert "breaking LV" in str(raised.value) and '"op": "start"' in str(raised.value)
