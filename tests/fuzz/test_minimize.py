"""The trace-level minimizer (fuzz.minimize): it reaches explore's minimum, keeps the finding's
identity, judges each candidate once, respects its deadline and the timing rule.

Most tests judge candidates on a mutant *model* (the refmodel with one switch on, beside the
reference): pure, fast and deterministic.  The campaign tests at the end run the real thing:
Hypothesis's shrink, then this pass, on the built-in mutant targets.
"""

import json
import time

import pytest

from fuzz.minimize import (
    Diverged,
    admissible,
    canonical_names,
    key_of,
    minimize,
    reshape_workflow,
)
from fuzz.rate import Rate
from fuzz.trace import Finding, Trace
from refmodel import (
    CATEGORY_INFO,
    CrashAt,
    Fork,
    Model,
    Query,
    Race,
    Recover,
    Resume,
    Start,
    Tamper,
    Workflow,
    World,
    classify,
    shortest_exposure,
)

WF = Workflow(3, {2}, ("a", "b"))


def model_judge(mutant, calls=None, flaky=None, scope="thread"):
    """Judge on ``Model(workflow, mutant)`` as the target; ``flaky(candidate) -> bool`` says
    whether this run shows the divergence (timing stand-in); ``scope``: the tamper's reach."""

    def judge(candidate):
        if calls is not None:
            calls.append(key_of(candidate.workflow, candidate.operations))
        if flaky is not None and not flaky(candidate):
            return None
        reference = Model(candidate.workflow, tamper_scope=scope)
        target = Model(candidate.workflow, mutant, tamper_scope=scope)
        world, target_world = World(), World()
        for i, op in enumerate(candidate.operations):
            allowed = reference.step(world, op)
            observed, target_world = target.step(target_world, op)[0]
            divergence = classify(reference, world, op, [o for o, _ in allowed], observed)
            if divergence is not None:
                finding = Finding(divergence.category, divergence.property, i, divergence.detail)
                return Diverged(finding.category, finding.property, "✗", candidate.with_(
                    operations=candidate.operations[:i + 1], finding=finding))
            world = next(w for o, w in allowed if o.same_as(observed))
        return None

    return judge


def failing(mutant, ops, workflow=WF):
    trace = Trace(workflow, tuple(ops), f"mutant:{mutant}")
    judged = model_judge(mutant)(trace)
    assert judged is not None and judged.category == mutant, "the test trace must fail"
    return judged.trace


NOISY_LOST_UPDATE = [
    Start("t0"),
    Start("t1", crash=CrashAt(1, "after_commit")),
    Query("t0"),
    Recover("t1"),
    Tamper("t1", how="corrupt"),
    Recover("t0"),
    Query("t1"),
    Fork("t0", gate=2, value="b", new_thread="f2"),
    Query("f2"),
    Race("t0", values=("b", "a", "a"), forced=False),
]


def test_noisy_lost_update_reaches_explores_minimum():
    trace = failing("LostUpdate", NOISY_LOST_UPDATE)
    assert len(trace.operations) == 10
    result = minimize(trace, model_judge("LostUpdate"))
    minimum = shortest_exposure(WF, "LostUpdate", 3).length
    assert result.after == minimum == 2, result.trace.operations
    start, race = result.trace.operations
    assert start == Start("t0") and isinstance(race, Race) and len(race.values) == 2
    assert race.values == ("a", "a") and race.forced
    assert result.trace.finding.category == "LostUpdate"
    assert result.trace.finding.property == CATEGORY_INFO["LostUpdate"].breaks
    assert result.stopped == "fixpoint" and result.before == 10


def test_a_race_stays_free_where_the_store_cannot_force_it():
    # pydantic-graph's file persistence cannot hold racers between their read and their write
    # (forced_race=False): a race made forced there would still run free, so the trace would
    # claim a schedule the run never had.  The same noisy trace as above, on such a variant.
    from adapters.protocol import Capabilities

    calls = []
    caps = Capabilities(forced_race=False, max_racers=3, tamper_hows=frozenset({"corrupt"}))
    trace = failing("LostUpdate", NOISY_LOST_UPDATE)
    result = minimize(trace, model_judge("LostUpdate", calls), caps=caps)
    race = result.trace.operations[-1]
    assert isinstance(race, Race) and not race.forced, result.trace.operations
    assert result.after == 2 and result.rejected > 0  # the forced candidates: refused, not run
    assert calls and not any('"forced": true' in key for key in calls)  # none was run


@pytest.mark.parametrize("mutant, ops", [
    ("Replay", [Start("t0"), Query("t0"), Start("t1"), Resume("t1", value="b"),
                Recover("t1", crash=CrashAt(3, "in_flight")), Tamper("t1", how="forged"),
                Start("t2", crash=CrashAt(1, "after_commit", "sigkill")), Recover("t2")]),
    ("DoubleConsume", [Start("t0"), Start("t1"), Query("t1"), Resume("t1", value="b"),
                       Query("t0"), Resume("t1", value="b")]),
    ("InvalidPersist", [Start("t0"), Query("t0"), Start("t1", bad_output=1)]),
])
def test_noisy_traces_reach_explores_minimum(mutant, ops):
    trace = failing(mutant, ops)
    result = minimize(trace, model_judge(mutant))
    assert result.after == shortest_exposure(WF, mutant, 3).length, result.trace.operations
    assert result.trace.finding.category == mutant
    assert canonical_names(result.trace.operations) == result.trace.operations


def test_each_candidate_is_judged_once():
    # A forced race: deterministic, so one run decides a candidate (a free race is run up to
    # five times per candidate, by the timing rule).
    calls = []
    trace = failing("LostUpdate", NOISY_LOST_UPDATE[:-1] + [Race("t0", ("b", "a"), forced=True)])
    result = minimize(trace, model_judge("LostUpdate", calls))
    assert len(calls) == len(set(calls)) == result.judged
    assert result.cached > 0  # passes re-proposed candidates already judged


def test_candidates_the_reference_does_not_admit_are_never_run():
    calls = []
    trace = failing("DoubleConsume", [Start("t0"), Resume("t0", value="a"), Resume("t0", value="a")])
    result = minimize(trace, model_judge("DoubleConsume", calls))
    assert result.rejected > 0
    # Dropping the start leaves resumes on a thread that does not exist: never judged.
    assert not admissible(WF, (Resume("t0", value="a"), Resume("t0", value="a")))
    assert all('"start"' in doc for doc in calls)


def test_a_different_category_is_not_kept():
    # A judge that calls every shorter candidate another category: none may be kept.
    trace = failing("LostUpdate", NOISY_LOST_UPDATE)
    inner = model_judge("LostUpdate")

    def relabel(candidate):
        judged = inner(candidate)
        if judged is None or len(candidate.operations) == len(trace.operations):
            return judged
        return Diverged("Replay", "EO", "✗", judged.trace)

    result = minimize(trace, relabel)
    assert result.after == len(trace.operations)


def test_the_deadline_stops_the_pass():
    trace = failing("LostUpdate", NOISY_LOST_UPDATE)
    result = minimize(trace, model_judge("LostUpdate"), deadline=time.monotonic() - 1)
    assert result.stopped == "deadline" and result.judged == 0
    assert result.trace == trace


def test_the_timing_rule():
    assert Rate(5, 5).needed(5) == 3
    assert Rate(1, 5).needed(5) == 1
    assert Rate(3, 5).needed(5) == 2
    assert 0 < Rate(1, 5).lower_bound() < Rate(3, 5).lower_bound() < Rate(5, 5).lower_bound() < 1


def test_a_timing_dependent_candidate_must_reproduce_at_the_measured_rate():
    # The original (10 ops) reproduces every time; shorter candidates only one run in five.
    trace = failing("LostUpdate", NOISY_LOST_UPDATE)
    runs = {}

    def one_in_five(candidate):
        if len(candidate.operations) == len(trace.operations):
            return True
        key = candidate.operations
        runs[key] = runs.get(key, 0) + 1
        return runs[key] % 5 == 0

    result = minimize(trace, model_judge("LostUpdate", flaky=one_in_five), rate=Rate(5, 5))
    assert result.after == len(trace.operations)  # 1/5 is below the 3/5 that 5/5 demands
    result = minimize(trace, model_judge("LostUpdate", flaky=one_in_five), rate=Rate(1, 5))
    assert result.after == 2  # 1/5 meets a measured 1/5


def test_canonical_names():
    ops = (Start("t1"), Fork("t1", gate=2, value="a", new_thread="f3"), Query("f3"))
    assert canonical_names(ops) == (Start("t0"), Fork("t0", gate=2, value="a", new_thread="f1"),
                                    Query("f1"))


# -- the whole thing: Hypothesis's shrink, then this pass, on the built-in mutants ------------


@pytest.mark.slow
@pytest.mark.parametrize("mutant", ["InvalidPersist", "PrefixReplay", "DoubleConsume"])
def test_campaign_reaches_explores_minimum(mutant, tmp_path):
    from fuzz.campaign import CampaignOptions, run_campaign
    from fuzz.targets import prepare, resolve

    adapter = prepare(resolve(f"mutant:{mutant}"))
    options = CampaignOptions(max_examples=500, seed=1, profile="ci", stop_on_finding=True,
                              corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              workdir=tmp_path / "work")
    (result,) = run_campaign(adapter, list(adapter.variants()), options)
    found = next(f for f in result.findings if f.category == mutant)
    assert found.length == shortest_exposure(WF, mutant, 3).length
    entry = json.loads(open(found.corpus).read())
    assert len(entry["operations"]) == len(entry["observations"]) == len(entry["expected"])
    assert entry["finding"]["step"] == found.length - 1


# -- a variant's minimum, and the command line ---------------------------------------------------


def test_a_variants_minimum_uses_only_what_it_can_express():
    from adapters.protocol import Capabilities
    from fuzz.minimize import expressible

    every = expressible(Capabilities())
    assert shortest_exposure(WF, "InvalidPersist", 3, every).length == 1  # BadOutput
    # Without BadOutput, tampered state used silently: start, tamper, then a read that runs.
    no_bad = expressible(Capabilities(bad_output=False))
    exposure = shortest_exposure(WF, "InvalidPersist", 3, no_bad)
    assert exposure.length == 3 and exposure.trace[1].name == "tamper"
    # Stuck's mutant refuses recovery after a SIGKILL: a variant without SIGKILL cannot show it.
    assert shortest_exposure(WF, "Stuck", 3, expressible(
        Capabilities(crash_kinds=frozenset({"exception"})))) is None


def test_minimize_command_refuses_bad_input_up_front(tmp_path, capsys):
    from fuzz.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["minimize", str(bad), "--corpus", str(tmp_path / "c")]) == 2
    assert "not JSON" in capsys.readouterr().err and not (tmp_path / "c").exists()


@pytest.mark.slow
def test_minimize_command_replaces_an_entry_with_a_shorter_one(tmp_path, capsys):
    from fuzz.cli import main
    from fuzz.corpus import fingerprint
    from fuzz.trace import dump_trace, load_trace

    noisy = [Start("t0"), Start("t1"), Query("t1"), Resume("t1", value="b"), Query("t0"),
             Tamper("t0", how="corrupt"), Resume("t1", value="b")]
    trace = failing("DoubleConsume", noisy).with_(target="mutant:DoubleConsume",
                                                  variant="default", status="FAILED")
    trace = trace.with_(fingerprint=fingerprint("DoubleConsume", trace))
    old = tmp_path / "corpus" / "mutant_DoubleConsume" / "default" / "old.json"
    dump_trace(trace, old)
    status = main(["minimize", str(old), "--corpus", str(tmp_path / "corpus"),
                   "--reports", str(tmp_path / "reports"), "--replace", "--json"])
    assert status == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["before"], row["after"]) == (7, 3) and not old.exists()
    new = load_trace(row["written"])
    assert new.finding.category == "DoubleConsume" and len(new.expected) == 3
    assert list((tmp_path / "reports").rglob("DoubleConsume-*.md"))


@pytest.mark.slow
def test_minimize_command_drops_the_cut_short_note_at_its_fixpoint(tmp_path, capsys):
    # A campaign whose shrink ran out of time wrote "shrink cut short (...): the best trace so
    # far: " before the detail.  Once the passes reach their fixpoint on such an entry and find
    # nothing shorter, the note is gone: same file, same fingerprint, report rewritten.
    from dataclasses import replace

    from fuzz.cli import main
    from fuzz.corpus import fingerprint
    from fuzz.trace import dump_trace, load_trace

    trace = failing("DoubleConsume", [Start("t0"), Start("t1"), Resume("t1", value="b"),
                                      Resume("t1", value="b")])
    shortest = minimize(trace, model_judge("DoubleConsume")).trace
    noted = shortest.with_(target="mutant:DoubleConsume", variant="default", status="FAILED")
    noted = noted.with_(fingerprint=fingerprint("DoubleConsume", noted))
    detail = noted.finding.detail
    noted = noted.with_(finding=replace(
        noted.finding, detail=f"shrink cut short (time limit): the best trace so far: {detail}"))
    entry = tmp_path / "corpus" / "mutant_DoubleConsume" / "default" / "entry.json"
    dump_trace(noted, entry)
    assert main(["minimize", str(entry), "--corpus", str(tmp_path / "corpus"), "--verify", "0",
                 "--reports", str(tmp_path / "reports"), "--replace", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["written"] == str(entry) and row["stopped"] == "fixpoint"
    again = load_trace(entry)
    assert again.finding.detail == detail and again.fingerprint == noted.fingerprint
    (written,) = (tmp_path / "reports").rglob("*.md")
    assert "shrink cut short" not in written.read_text()


def test_a_workflow_of_another_shape_can_take_fewer_operations():
    # With gates 1 and 2, PrefixReplay's mutant needs a resume and then a race (the resume
    # re-runs nothing, a second resume would re-consume gate 1: DoubleConsume); with a task
    # before the first gate, one resume shows it (explore's minimum, 2).
    workflow = Workflow(2, {1, 2}, ("a", "b"))
    ops = [Start("t0"), Resume("t0", value="a"), Race("t0", ("a", "a"), forced=True)]
    trace = failing("PrefixReplay", ops, workflow)
    result = minimize(trace, model_judge("PrefixReplay"))
    assert result.after == 2
    only_reshape = minimize(trace, model_judge("PrefixReplay"), passes=(reshape_workflow,))
    assert only_reshape.after == 2 and only_reshape.trace.workflow.gates != {1, 2}


def test_a_branch_merges_into_its_source():
    # Hypothesis's shrink of PrefixReplay, seed 1 (500 examples): a fork, then a race on the
    # branch.  The fork becomes a resume of t0, the race a resume, and the workflow sheds gate 1.
    workflow = Workflow(2, {1, 2}, ("a", "b"))
    ops = [Start("t0"), Fork("t0", gate=1, value="a", new_thread="f1"),
           Race("f1", ("a", "a"), forced=True)]
    trace = failing("PrefixReplay", ops, workflow)
    result = minimize(trace, model_judge("PrefixReplay"))
    assert result.after == 2 and result.passes.get("merge_threads"), result.trace.operations


def test_a_resume_folds_into_the_fork_before_it():
    # LangGraph's drophead InvalidPersist had this shape: a tamper of a branch reaches its
    # source (lineage reach), and the source's run then goes wrong (here DoubleConsume's mutant
    # re-consumes the answered gate), which the damage explains (tampered-state-used).  No drop
    # or merge shortens it: each loses the resume or the branch the tamper needs.  Run as the
    # fork itself, the resume is one operation fewer: start; fork f1; tamper t0; resume f1.
    from fuzz.minimize import PASSES, fold_into_fork

    workflow = Workflow(1, {1}, ("a", "b"))
    ops = (Start("t0"), Fork("t0", gate=1, value="a", new_thread="f1"), Resume("t0", value="a"),
           Tamper("f1", how="corrupt"), Resume("t0", value="b"))
    judge = model_judge("DoubleConsume", scope="lineage")
    trace = judge(Trace(workflow, ops, "mutant:DoubleConsume")).trace
    assert trace.finding.category == "InvalidPersist" and len(trace.operations) == 5
    without = tuple(p for p in PASSES if p is not fold_into_fork)
    assert minimize(trace, judge, passes=without).after == 5
    result = minimize(trace, judge)
    assert result.after == 4 and result.passes.get("fold_into_fork"), result.trace.operations
    start, fork, tamper, resume = result.trace.operations
    assert (tamper.thread, resume.thread) == ("t0", "f1") and fork.new_thread == "f1"
    assert result.trace.finding.category == "InvalidPersist"


def test_a_candidate_the_harness_fails_on_is_dropped_not_the_campaign(tmp_path):
    # A campaign's minimizer runs outside Hypothesis: a harness failure on one candidate must
    # drop that candidate (and be counted by the campaign's hook), never end the campaign.
    from adapters.protocol import HarnessError
    from adapters.reference import ReferenceAdapter
    from fuzz.campaign import discard_example
    from fuzz.minimize import session_judge
    from fuzz.runner import Session, Settings
    from fuzz.targets import prepare

    class QueryFails(ReferenceAdapter):
        def open(self, variant, workflow, workdir):
            case = super().open(variant, workflow, workdir)
            case.query_before = case.query

            def query(thread):
                if thread == "t1":
                    raise HarnessError("the adapter lost track of t1")
                return case.query_before(thread)

            case.query = query
            return case

    adapter = prepare(QueryFails("Replay"))
    failed = []
    ops = [Start("t0", crash=CrashAt(1, "after_commit")), Start("t1"), Query("t1"), Recover("t0")]
    with Session(adapter, adapter.variants()[0], tmp_path / "work", Settings()) as session:
        session.on_harness_failure = lambda exc: (failed.append(exc), discard_example())
        judge = session_judge(session)
        noisy = Trace(WF, tuple(ops), "mutant:Replay")
        assert judge(noisy) is None and failed  # the harness failed: not a candidate
        kept = judge(noisy.with_(operations=(ops[0], ops[3])))
        assert kept is not None and kept.category == "Replay"


def test_known_exposures_moves_a_bad_output_to_the_start():
    # A BadOutput on a resume (2 operations) shows InvalidPersist; on a gateless workflow the
    # start alone shows it (explore's minimum, 1): no drop or merge gets there, the category's
    # own exposure does.  Without the variant's capabilities the pass does not run.
    from adapters.protocol import Capabilities

    workflow = Workflow(1, {1}, ("a", "b"))
    trace = failing("InvalidPersist", [Start("t0"), Resume("t0", value="a", bad_output=1)],
                    workflow)
    assert minimize(trace, model_judge("InvalidPersist")).after == 2
    result = minimize(trace, model_judge("InvalidPersist"), caps=Capabilities())
    assert result.after == 1 and result.passes.get("known_exposures")
    (start,) = result.trace.operations
    assert start.bad_output is not None and result.trace.finding.category == "InvalidPersist"


def test_known_exposures_keeps_the_findings_mechanism():
    # A forged checkpoint accepted (InvalidPersist through a tamper) is not traded for a
    # BadOutput accepted, however much shorter: the exposures use only what the trace uses.
    from adapters.protocol import Capabilities
    from fuzz.minimize import known_exposures, mechanism_caps

    ops = (Start("t0"), Tamper("t0", how="forged"), Recover("t0"))
    caps = mechanism_caps(Capabilities(), ops)
    assert not caps.bad_output and caps.tamper_hows == {"forged"}
    proposed = list(known_exposures("InvalidPersist", caps, timed=False)(
        Workflow(2, set(), ("a", "b")), ops + (Query("t0"),)))
    assert proposed and all(not getattr(op, "bad_output", None)
                            for _, candidate in proposed for op in candidate)


def test_minimize_command_leaves_out_entries_of_another_store(tmp_path, capsys):
    from fuzz.cli import main
    from fuzz.trace import dump_trace

    trace = failing("LostUpdate", [Start("t0"), Race("t0", ("a", "a"), forced=True)]).with_(
        target="mutant:LostUpdate", variant="default", versions={"store-factory": "m:f"})
    dump_trace(trace, tmp_path / "e.json")
    assert main(["minimize", str(tmp_path), "--corpus", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "left out 1 entries fuzzed on the store factory m:f (run again with --store m:f)" in err
    assert not (tmp_path / "c").exists()


def test_minimize_command_leaves_fixed_entries_as_they_are(tmp_path, capsys):
    from fuzz.cli import main
    from fuzz.trace import dump_trace

    trace = failing("LostUpdate", [Start("t0"), Race("t0", ("a", "a"), forced=True)]).with_(
        target="mutant:LostUpdate", variant="default", status="FIXED")
    dump_trace(trace, tmp_path / "e.json")
    assert main(["minimize", str(tmp_path), "--corpus", str(tmp_path / "c")]) == 2
    assert "left out 1 entries recorded FIXED" in capsys.readouterr().err


def test_a_shaped_finding_keeps_only_the_shape_it_needs():
    """``simplify_shape``: the loop, the pre-effect, a task's second question and the last
    stage go when the finding shows without them.  PlainResumePicks needs two questions pending
    at once: two parallel tasks asking one each."""
    from refmodel import Loop, Shape, Task

    big = Shape(((Task(2, pre_effect=True), Task(1)), (Task(1),)), Loop(1, 2, "a"))
    judge = model_judge("PlainResumePicks")
    trace = judge(Trace(Workflow.of(big, ("a", "b", "c")),
                        (Start("t0"), Resume("t0", value="a")), "mutant:PlainResumePicks")).trace
    assert trace.finding.category == "DoubleConsume"
    result = minimize(trace, judge)
    assert result.trace.workflow.shape == Shape(((Task(1), Task(1)),))
    assert result.trace.workflow.values == ("a", "b") and result.after == 2
    assert result.passes.get("simplify_shape", 0) >= 4
