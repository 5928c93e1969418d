"""Verdicts a maintainer can trust (issue 12): flaky is not ✓, the witness shows the property
directly, a ✓ says what was exercised and unexercised is ``?``.

Fast tests on synthetic evidence and corpus files (no workers), and two on a real campaign
failure kept by ``fuzz.campaign._keep`` (forked workers, the mutant and the reference).
"""

import json

import pytest

from fuzz import evidence, matrix
from fuzz.campaign import CampaignOptions, VariantResult, _keep
from fuzz.errors import UsageError
from fuzz.failures import FAILURES
from fuzz.rate import TRIALS, Rate
from fuzz.targets import prepare, resolve
from fuzz.trace import Finding, Trace, dump_trace, load_trace, parse_trace
from refmodel import (
    CrashAt,
    Fork,
    Model,
    Query,
    Race,
    Recover,
    Resume,
    Start,
    Tamper,
    TwinRecover,
    Workflow,
    World,
    shortest_exposure,
)

WF = Workflow(3, {2}, ("a", "b"))
ALL_OPS = ["fork", "query", "race", "recover", "resume", "start", "tamper", "twin_recover"]


# -- helpers ------------------------------------------------------------------------------------


def caps(operations=ALL_OPS, **over):
    doc = {"operations": sorted(operations),
           "missing": sorted(set(ALL_OPS) - set(operations)), "crash_kinds": ["sigkill"],
           "tamper_hows": ["corrupt"], "bad_output": True, "forced_race": True,
           "not_expressible": {}, "intents": {"resume": "RETRY", "fork": "FORK"}}
    doc.update(over)
    return doc


def write_evidence(root, variant="v", version=evidence.VERSION, exercised=None, **caps_over):
    doc = {"format": evidence.FORMAT, "version": version, "target": "t", "variant": variant,
           "description": "", "options": {}, "updated": evidence.now(),
           "latest": {"examples": 10, "operations": 30, "seconds": 1.0, "categories": []},
           "total_examples": 10, "total_operations": 30, "campaigns": 1,
           "capabilities": caps(**caps_over), "deviations": [], "versions": {}}
    if exercised is not None:
        doc["exercised"] = exercised
    path = evidence.path_for("t", variant, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def write_entry(corpus, ops, category="ForkIgnore", step=None, reproduced=None, verdict="✗",
                fingerprint=None, variant="v"):
    step = len(ops) - 1 if step is None else step
    finding = Finding(category, "FD" if category == "ForkIgnore" else "CO", step, "why", verdict,
                      "the docs" if verdict == "D" else "", reproduced)
    fingerprint = fingerprint or f"{len(ops):02d}{abs(hash((tuple(ops), step))) % 10**8:08d}"
    trace = Trace(WF, tuple(ops), "t", variant, finding=finding, status="FAILED",
                  fingerprint=fingerprint, created=evidence.now())
    dump_trace(trace, corpus / "t" / variant / f"{category}-{fingerprint}.json")
    return trace


def cells(tmp_path):
    (row,) = matrix.build(None, tmp_path / "results", tmp_path / "corpus", tmp_path / "reports")
    return row.cells


START = Start("t0")
RESUME = Resume("t0", value="a")
FORK = Fork("t0", gate=2, value="b", new_thread="f1")


# -- 1. flaky is not ✓ ------------------------------------------------------------------------


def test_reproduced_round_trips_and_is_validated(tmp_path):
    trace = Trace(WF, (START,), finding=Finding("Replay", "EO", 0, "x", reproduced=Rate(2, 5)))
    dump_trace(trace, tmp_path / "t.json")
    back = load_trace(tmp_path / "t.json")
    assert back.finding.reproduced == Rate(2, 5) and back.finding.rate == "2/5"
    doc = json.loads((tmp_path / "t.json").read_text())
    doc["finding"]["reproduced"] = {"k": 6, "n": 5}
    with pytest.raises(UsageError, match="finding/reproduced"):
        parse_trace(doc, "t.json")
    doc["finding"]["reproduced"] = {"k": 1}
    with pytest.raises(UsageError, match="finding"):
        parse_trace(doc, "t.json")
    # Every time (k == n) or not measured: no rate to show.
    assert Finding("Replay", "EO", 0, "x", reproduced=Rate(5, 5)).rate == ""
    assert Finding("Replay", "EO", 0, "x").rate == ""


def test_a_flaky_finding_is_a_cross_with_its_rate(tmp_path):
    write_evidence(tmp_path / "results", exercised={"FD": {"fork of a consumed gate": 50}})
    write_entry(tmp_path / "corpus", [START, RESUME, FORK], reproduced=Rate(3, 5))
    fd = cells(tmp_path)["FD"]
    assert fd.verdict == "✗" and fd.rate == "3/5" and fd.label == "✗ (3/5)"
    assert "reproduced 3/5" in fd.text
    page = matrix.render_md([matrix.build(None, tmp_path / "results", tmp_path / "corpus",
                                          tmp_path / "reports")[0]])
    assert "✗ (3/5)" in page


def test_a_finding_that_never_came_back_is_not_a_cross(tmp_path):
    write_evidence(tmp_path / "results", exercised={"FD": {"fork of a consumed gate": 50}})
    write_entry(tmp_path / "corpus", [START, RESUME, FORK], reproduced=Rate(0, 5))
    assert cells(tmp_path)["FD"].verdict == "✓"


def _replay_failure():
    """The shortest Replay failure (a real one: the Replay mutant diverges on it)."""
    exposure = shortest_exposure(WF, "Replay", 3)
    mutant, reference = Model(WF, "Replay"), Model(WF)
    world_m, world_r, history = World(), World(), []
    for op in exposure.trace:
        observed, world_m = mutant.step(world_m, op)[0]
        allowed = reference.step(world_r, op)
        history.append((op, observed, tuple(o for o, _ in allowed)))
        world_r = allowed[0][1]
    failure = FAILURES["Replay"]("Replay", history=history, divergence=exposure.divergence,
                                 workflow=WF)
    failure.timing = True  # as when Hypothesis could not reproduce it every time
    return failure


@pytest.mark.slow
@pytest.mark.parametrize("target, kept", [("mutant:Replay", True), ("reference", False)])
def test_keep_measures_the_rate_and_drops_only_what_never_came_back(tmp_path, target, kept):
    adapter = prepare(resolve(target))
    (variant,) = adapter.variants()
    options = CampaignOptions(corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              op_timeout=30)
    result = VariantResult(variant.name)
    _keep(adapter, variant, _replay_failure(), options, result, lambda *a, **k: None)
    reports = list((tmp_path / "reports").rglob("*.md"))
    assert len(reports) == 1
    report = reports[0].read_text()
    if kept:  # on the mutant it comes back every time: kept, with its rate
        (entry,) = (tmp_path / "corpus").rglob("*.json")
        finding = load_trace(entry).finding
        assert finding.reproduced == Rate(TRIALS, TRIALS)
        assert [f.category for f in result.findings] == ["Replay"]
        assert f"{TRIALS} of {TRIALS} replays" in report
    else:  # on the reference it never comes back: dropped, and the report says so
        assert not (tmp_path / "corpus").exists()
        assert result.findings == [] and "never came back" in result.flaky[0]
        assert f"Never came back**: 0 of {TRIALS}" in report


def test_keep_keeps_a_partial_rate(tmp_path, monkeypatch):
    adapter = prepare(resolve("mutant:Replay"))
    (variant,) = adapter.variants()
    statuses = iter(["FAILED", "FIXED", "FAILED", "FIXED", "FIXED"])

    class Scripted:
        def __init__(self, *a, **k):
            pass

        def replay_trace(self, trace):
            return type("R", (), {"status": next(statuses)})()

    import fuzz.replay

    monkeypatch.setattr(fuzz.replay, "Replayer", Scripted)
    options = CampaignOptions(corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports")
    result = VariantResult(variant.name)
    _keep(adapter, variant, _replay_failure(), options, result, lambda *a, **k: None)
    (entry,) = (tmp_path / "corpus").rglob("*.json")
    assert load_trace(entry).finding.reproduced == Rate(2, 5)
    assert result.findings[0].reproduced == Rate(2, 5)


def test_replay_mark_timing_records_the_rate(tmp_path):
    from fuzz.cli import _mark_timing

    path = tmp_path / "e.json"
    dump_trace(Trace(WF, (START,), finding=Finding("Replay", "EO", 0, "why"), status="FAILED"),
               path)
    _mark_timing(path, ["FAILED", "FIXED", "FIXED"])
    finding = load_trace(path).finding
    assert finding.reproduced == Rate(1, 3) and finding.detail == "why"
    # Measured again: pooled with what was recorded (a few replays under one load are no better
    # an estimate than these), a miss counted too.
    _mark_timing(path, ["FIXED", "FIXED"])
    assert load_trace(path).finding.reproduced == Rate(1, 5)
    _mark_timing(path, ["FAILED", "FAILED"])
    assert load_trace(path).finding.reproduced == Rate(3, 7)


def test_mark_timing_counts_a_fixed_entrys_finding_not_its_fix(tmp_path):
    # A FIXED entry's rate is how often its finding still comes back: pooling its FIXED trials
    # into it would turn 1 of 14 into 28 of 44, a finding that shows nearly every time.
    from fuzz.cli import _mark_timing

    path = tmp_path / "e.json"
    dump_trace(Trace(WF, (START,), finding=Finding("Replay", "EO", 0, "why",
                                                   reproduced=Rate(1, 14)),
                     status="FIXED"), path)
    _mark_timing(path, ["FAILED", "FIXED", "FIXED"])
    assert load_trace(path).finding.reproduced == Rate(2, 17)


def test_mark_timing_leaves_an_entry_that_always_came_back_without_a_rate(tmp_path):
    from fuzz.cli import _mark_timing

    path = tmp_path / "e.json"
    dump_trace(Trace(WF, (START,), finding=Finding("Replay", "EO", 0, "why"), status="FAILED"),
               path)
    _mark_timing(path, ["FAILED", "FAILED"])
    _mark_timing(path, ["FIXED", "FIXED"])  # never came back, and no rate: --update decides
    assert load_trace(path).finding.reproduced is None


# -- 2. witness choice ------------------------------------------------------------------------


def test_witness_without_a_tamper_before_the_divergence_wins_over_a_shorter_one(tmp_path):
    write_evidence(tmp_path / "results")
    tampered = write_entry(tmp_path / "corpus", [START, Tamper("t0", how="corrupt"), FORK])
    direct = write_entry(tmp_path / "corpus", [START, Query("t0"), RESUME, FORK])
    longer = write_entry(tmp_path / "corpus", [START, Query("t0"), Query("t0"), RESUME, FORK])
    fd = cells(tmp_path)["FD"]
    assert fd.link.endswith(f"ForkIgnore-{direct.fingerprint}.md"), fd.link
    assert tampered.fingerprint not in fd.link and longer.fingerprint not in fd.link
    assert fd.detail["entries"] == 3


def test_witness_with_only_tampered_traces_says_so(tmp_path):
    write_evidence(tmp_path / "results")
    write_entry(tmp_path / "corpus", [START, Tamper("t0", how="corrupt"), FORK])
    fd = cells(tmp_path)["FD"]
    assert fd.verdict == "✗" and "tamper before the divergence" in fd.text


def test_witness_prefers_a_deterministic_entry_and_a_tamper_after_the_divergence_is_fine(tmp_path):
    write_evidence(tmp_path / "results")
    flaky = write_entry(tmp_path / "corpus", [START, FORK], reproduced=Rate(1, 5))
    after = write_entry(tmp_path / "corpus", [START, RESUME, FORK, Tamper("t0", how="corrupt")],
                        step=2)
    fd = cells(tmp_path)["FD"]
    assert after.fingerprint in fd.link and fd.rate == "" and flaky.fingerprint not in fd.link


# -- 3. a ✓ says what was exercised ------------------------------------------------------------


def test_exercise_counts_from_ops_alone():
    ex = evidence.Exercise()
    ex.example()
    ex.op(op=Start("t0", crash=CrashAt(1, "in_flight", "sigkill")))
    ex.op(op=Recover("t0"))
    ex.op(op=Resume("t0", value="a"))
    ex.op(op=Resume("t0", value="b"))  # a second resume of the thread: a consumed gate
    ex.op(op=Fork("t0", gate=2, value="b", new_thread="f1"))
    ex.op(op=Tamper("t0", how="forged"))
    ex.op(op=Query("t0"))  # reads the tamper, runs nothing: not a CV exercise
    ex.op(op=Recover("t0", bad_output=2))
    ex.op(op=Race("f1", values=("a", "a", "a")))
    ex.example()  # a new example forgets the threads of the last
    ex.op(op=Recover("t0"))
    ex.op(op=TwinRecover("t0"))  # no crash in this example: not counted for RD
    got = ex.to_json()
    assert got["EO"] == got["LV"] == {"sigkill/in_flight": 1}
    assert got["CO"] == {"resume after a consume": 1, "race of 3": 1}
    assert got["FD"] == {"fork of a consumed gate": 1}
    assert got["CV"] == {"tamper:forged": 1, "bad_output": 1}
    assert got["RD"] == {}
    assert got["PC"] == {"start": 1, "recover": 3, "resume": 2, "fork": 1, "race": 1,
                         "twin_recover": 1}


def test_exercise_uses_observed_and_world_when_given():
    """With the machine's ``observed`` and ``world``, a crash point that did not fire and a fork
    of a gate its source never consumed are not counted."""
    model, world = Model(WF), World()
    ex = evidence.Exercise()

    def run(op):
        nonlocal world
        observed, after = model.step(world, op)[0]
        ex.op(op=op, observed=observed, world=world, allowed=(observed,))
        world = after

    run(Start("t0", crash=CrashAt(3, "in_flight", "sigkill")))  # stops at gate 2 first: no crash
    run(Fork("t0", gate=2, value="a", new_thread="f1"))  # gate 2 is pending, not consumed
    run(Resume("t0", value="a", crash=CrashAt(3, "after_commit", "sigkill")))
    run(TwinRecover("t0"))
    run(Start("t1"))
    run(Race("t1", values=("b", "b")))
    run(Start("t2"))
    run(Tamper("t2", how="corrupt"))
    run(Race("t2", values=("b", "b")))  # refused as tampered data: not a consume attempt
    got = ex.to_json()
    assert got["FD"] == {}
    assert got["EO"] == {"sigkill/after_commit": 1} and got["RD"] == {"twin_recover": 1}
    assert got["CO"] == {"race of 2": 1}


def test_unexercised_or_uncounted_is_unknown_never_a_tick(tmp_path):
    few = evidence.MIN_EXERCISED - 1
    write_evidence(tmp_path / "results", "counted", exercised={
        "PC": {"start": 40}, "CO": {"race of 2": few}, "RD": {"twin_recover": 9}})
    write_evidence(tmp_path / "results", "old", version=1)
    rows = {r.variant: r.cells for r in matrix.build(None, tmp_path / "results",
                                                     tmp_path / "corpus", tmp_path / "reports")}
    counted, old = rows["counted"], rows["old"]
    assert counted["PC"].verdict == "✓" and "start ×40" in counted["PC"].text
    assert counted["CO"].verdict == "?" and f"only {few}" in counted["CO"].text
    assert counted["RD"].verdict == "✓"
    assert counted["EO"].verdict == "?"  # nothing counted for it at all
    assert {old[p].verdict for p in matrix.PROPERTIES if p != "FI"} == {"?"}
    assert "not counted" in old["PC"].text


def test_fi_is_declared_and_na_without_fork(tmp_path):
    write_evidence(tmp_path / "results", "forks")
    write_evidence(tmp_path / "results", "noforks", operations=[o for o in ALL_OPS if o != "fork"],
                   not_expressible={"fork": "no checkpoint history"})
    rows = {r.variant: r.cells for r in matrix.build(None, tmp_path / "results",
                                                     tmp_path / "corpus", tmp_path / "reports")}
    assert rows["forks"]["FI"].verdict == "declared"
    assert "resume=RETRY" in rows["forks"]["FI"].text
    assert rows["noforks"]["FI"].verdict == "n/a" and rows["noforks"]["FD"].verdict == "n/a"
    assert rows["noforks"]["FI"].text == "no checkpoint history"


def test_evidence_merges_counts_over_campaigns(tmp_path):
    adapter = prepare(resolve("reference"))
    (variant,) = adapter.variants()
    for n in (3, 4):
        result = VariantResult(variant.name, examples=1, operations=n)
        for _ in range(n):
            result.exercised.op(op=Start("t0"))
        evidence.record(adapter, variant, result, tmp_path)
    doc = evidence.load(evidence.path_for("reference", variant.name, tmp_path))
    assert doc["version"] == 2 and doc["exercised"]["PC"] == {"start": 7}
    assert doc["latest"]["exercised"]["PC"] == {"start": 4}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**doc, "version": 7}))
    with pytest.raises(UsageError, match="version 1 or 2"):
        evidence.load(bad)


def test_counts_of_a_withdrawn_capability_leave_the_totals(tmp_path):
    # A campaign counted tamper:corrupt and a sigkill crash; the variant has since declared
    # both n/a (as AutoGen's corrupt became on 2026-12-04).  The next record moves those totals
    # to `withdrawn`, where no cell reads them, and keeps the rest.
    import dataclasses

    reference = prepare(resolve("reference"))
    (variant,) = reference.variants()
    full = VariantResult(variant.name, examples=1, operations=4)
    for op in (Start("t0"), Tamper("t0", how="corrupt"), Recover("t0"), Tamper("t0", how="invalid"),
               Recover("t0")):
        full.exercised.op(op=op)
    full.exercised.op(op=Start("t1", crash=CrashAt(1, "before_effect", "sigkill")))
    full.exercised.op(op=Recover("t1"))
    evidence.record(reference, variant, full, tmp_path)
    doc = evidence.load(evidence.path_for("reference", variant.name, tmp_path))
    assert doc["exercised"]["CV"] == {"tamper:corrupt": 1, "tamper:invalid": 1}
    assert doc["exercised"]["EO"] == {"sigkill/before_effect": 1} and "withdrawn" not in doc

    class Narrowed:  # the same adapter, declaring less
        def __getattr__(self, name):
            return getattr(reference, name)

        def capabilities(self, v):
            return dataclasses.replace(reference.capabilities(v), tamper_hows=frozenset({"invalid"}),
                                       crash_kinds=frozenset({"exception"}))

    later = VariantResult(variant.name, examples=1, operations=2)
    for op in (Tamper("t0", how="invalid"), Recover("t0")):
        later.exercised.op(op=op)
    evidence.record(Narrowed(), variant, later, tmp_path)
    doc = evidence.load(evidence.path_for("reference", variant.name, tmp_path))
    assert doc["exercised"]["CV"] == {"tamper:invalid": 2}
    assert doc["exercised"]["EO"] == {} and doc["exercised"]["LV"] == {}
    assert doc["withdrawn"] == {"CV": {"tamper:corrupt": 1}, "EO": {"sigkill/before_effect": 1},
                                "LV": {"sigkill/before_effect": 1}}
    assert doc["exercised"]["PC"]["recover"] == 4  # what still is expressible stays counted
    assert evidence.exercised_total(doc, "CV") == 2


def test_links_are_made_relative_to_the_page_unclassified_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_evidence(tmp_path / "results")
    write_entry(tmp_path / "corpus", [START, RESUME, FORK])
    write_entry(tmp_path / "corpus", [START, RESUME], category="Unclassified")
    rows = matrix.relative_links(matrix.build(None, tmp_path / "results", tmp_path / "corpus",
                                              tmp_path / "reports"), tmp_path / "results")
    assert rows[0].cells["FD"].link.startswith("../reports/t/v/ForkIgnore-")
    assert rows[0].other[0].startswith("../reports/t/v/Unclassified-")
