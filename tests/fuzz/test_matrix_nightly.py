"""The matrix and the nightly run, on the built-in targets.

The nightly run is done once (module fixture) in its own directory; every test that changes
directory does it with monkeypatch (restored after the test), and a test that modifies the files
works on a copy of its own, so the tests pass in any order and alone.
"""

import json
import shutil
from pathlib import Path

import pytest

from fuzz import evidence
from fuzz.cli import main
from fuzz.nightly import NightlyOptions, run_nightly

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def nightly(tmp_path_factory):
    root = tmp_path_factory.mktemp("nightly")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        options = NightlyOptions(targets=["reference", "mutant:Replay"], max_examples=40,
                                 seed=3, profile="ci", jobs=2)
        summary = run_nightly(options, log=lambda line: None)
    return root, summary


@pytest.fixture
def nightly_copy(nightly, tmp_path, monkeypatch):
    """A private copy of the nightly run's directory, as the working directory."""
    root, _ = nightly
    copy = tmp_path / "nightly"
    shutil.copytree(root, copy)
    monkeypatch.chdir(copy)
    return copy


def test_nightly_runs_campaigns_replays_and_renders(nightly):
    root, summary = nightly
    assert {(c["target"], c["variant"]) for c in summary.campaigns} == {
        ("reference", "default"), ("mutant:Replay", "default")}
    assert all("error" not in c for c in summary.campaigns)
    replay = next(c for c in summary.campaigns if c["target"] == "mutant:Replay")
    assert [f["category"] for f in replay["findings"]] == ["Replay"]
    assert summary.replays and all(r["status"] == "FAILED" for r in summary.replays)
    assert summary.changed == []
    assert (root / "results" / "matrix.md").exists() and (root / "results" / "matrix.html").exists()


def test_nightly_records_what_was_exercised(nightly):
    root, _ = nightly
    doc = evidence.load(root / "results" / "reference" / "default.json")
    assert doc["version"] == evidence.VERSION
    counted = doc["exercised"]
    assert set(counted) == set(evidence.COUNTED)
    # Every executing op counts for PC; the counts are a subset of the operations run.
    assert 0 < sum(counted["PC"].values()) <= doc["total_operations"]
    assert doc["latest"]["exercised"] == counted  # one campaign so far: latest == totals


def test_matrix_cells(nightly_copy, capsys):
    assert main(["matrix", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["target"], r["variant"]): r["cells"] for r in doc["rows"]}
    replay = rows[("mutant:Replay", "default")]
    assert replay["EO"]["verdict"] == "✗" and replay["EO"]["link"].endswith(".md")
    assert replay["PC"]["verdict"] == "✓" and replay["PC"]["examples"] > 0
    assert replay["PC"]["exercised"] >= evidence.MIN_EXERCISED
    ref = rows[("reference", "default")]
    assert ref["FI"]["verdict"] == "declared"
    for prop, cell in ref.items():
        if prop == "FI":
            continue
        # No finding on the reference; a ✓ stands on enough exercised operations, a ? on few.
        assert cell["verdict"] in ("✓", "?"), (prop, cell)
        enough = cell["exercised"] >= evidence.MIN_EXERCISED
        assert (cell["verdict"] == "✓") == enough, (prop, cell)
    assert all(c["age_days"] is not None for c in ref.values())


def test_matrix_html_works_offline(nightly):
    root, _ = nightly
    page = (root / "results" / "matrix.html").read_text()
    assert '<table id="matrix">' in page and "http://" not in page and "https://" not in page
    assert 'href="../shrink_reports/' in page  # links relative to the page, to local files
    assert page.index('id="summary"') < page.index('id="matrix"')  # the summary comes first


def test_nightly_flags_an_entry_a_release_fixed(nightly_copy):
    root = nightly_copy
    entry = next((root / "corpus" / "mutant_Replay").rglob("*.json"))
    doc = json.loads(entry.read_text())
    doc["target"] = "reference"  # as if the framework had been fixed
    fixed = root / "corpus" / "reference" / "default" / entry.name
    fixed.parent.mkdir(parents=True, exist_ok=True)
    fixed.write_text(json.dumps(doc))
    summary = run_nightly(NightlyOptions(targets=["reference"], max_examples=5, seed=1,
                                         profile="ci"), log=lambda line: None)
    assert [c["now"] for c in summary.changed] == ["FIXED"]
    assert json.loads(fixed.read_text())["status"] == "FIXED"


def test_nightly_does_not_record_a_replay_that_never_reached_the_finding(nightly_copy,
                                                                          monkeypatch):
    # Every replay diverges at step 0, before the recorded finding (taken elsewhere by some
    # timing-dependent behaviour): no evidence about the finding, so its status stays.
    import fuzz.nightly
    from fuzz.replay import ReplayResult

    class EarlyDivergence:
        def __init__(self, *args, **kwargs):
            pass

        def replay(self, path):
            return ReplayResult(str(path), "CHANGED", "Replay", "Stuck", "step 1: other", step=0)

    monkeypatch.setattr(fuzz.nightly, "Replayer", EarlyDivergence)
    entry = next((nightly_copy / "corpus" / "mutant_Replay").rglob("*.json"))
    assert json.loads(entry.read_text())["finding"]["step"] > 0
    summary = run_nightly(NightlyOptions(targets=["mutant:Replay"], max_examples=5, seed=1,
                                         profile="ci"), log=lambda line: None)
    assert summary.changed == []
    assert json.loads(entry.read_text())["status"] == "FAILED"
    assert {r["status"] for r in summary.replays} == {"CHANGED"}  # shown, not recorded


def test_nightly_records_by_the_rule_replay_update_records_by(nightly_copy, monkeypatch):
    # A FIXED entry whose finding came back in one of its trials is a finding again: `replay
    # --update` wrote FAILED, the nightly run kept FIXED because FIXED came up too (its own copy
    # of the rule, until both called replay.updated).
    import fuzz.nightly
    from fuzz.corpus import replays_for
    from fuzz.replay import ReplayResult
    from fuzz.trace import load_trace

    entry = next((nightly_copy / "corpus" / "mutant_Replay").rglob("*.json"))
    doc = json.loads(entry.read_text())
    doc["status"], doc["finding"]["reproduced"] = "FIXED", {"k": 1, "n": 14}
    entry.write_text(json.dumps(doc))
    step = doc["finding"]["step"]
    trials = ["FIXED"] * (replays_for(load_trace(entry)) - 1) + ["FAILED"]
    assert len(trials) > 1

    class OnceFailing:
        def __init__(self, *args, **kwargs):
            pass

        def replay(self, path):
            if Path(path).resolve() != entry.resolve():  # every other entry: its recorded finding, unchanged
                other = load_trace(path)
                return ReplayResult(str(path), other.status or "FAILED", None, None, "",
                                    step=other.finding.step if other.finding else None)
            status = trials.pop(0)
            return ReplayResult(str(path), status, "Replay", "Replay" if status == "FAILED"
                                else None, status, step=step if status == "FAILED" else None)

    monkeypatch.setattr(fuzz.nightly, "Replayer", OnceFailing)
    summary = run_nightly(NightlyOptions(targets=["mutant:Replay"], max_examples=5, seed=1,
                                         profile="ci"), log=lambda line: None)
    assert [(c["was"], c["now"]) for c in summary.changed] == [("FIXED", "FAILED")]
    assert json.loads(entry.read_text())["status"] == "FAILED"


def test_nightly_removes_an_entry_another_one_makes_redundant(nightly_copy):
    # A second campaign found the known defect again with a longer trace: the nightly run keeps
    # the shorter entry and removes the longer one with its report.
    from fuzz.trace import dump_trace, load_trace

    root = nightly_copy
    entry = next((root / "corpus" / "mutant_Replay").rglob("*.json"))
    trace = load_trace(entry)
    longer = trace.with_(operations=(*trace.operations[:-1], trace.operations[0].__class__("t9"),
                                     trace.operations[-1]), fingerprint="ffffffffffff")
    copy = entry.with_name(f"{trace.finding.category}-ffffffffffff.json")
    dump_trace(longer, copy)
    report = root / "shrink_reports" / copy.relative_to(root / "corpus").with_suffix(".md")
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("# a longer witness\n")
    summary = run_nightly(NightlyOptions(targets=["mutant:Replay"], max_examples=5, seed=1,
                                         profile="ci"), log=lambda line: None)
    assert [Path(r).name for r, _ in summary.deduped] == [copy.name]
    assert not copy.exists() and not report.exists() and entry.exists()


def test_job_cores_pins_only_jobs_that_fill_the_cpus_evenly():
    from fuzz.nightly import job_cores

    assert job_cores(2, {0, 1}) == [0, 1]
    assert job_cores(4, {2, 5}) == [2, 5, 2, 5]
    assert job_cores(3, {0, 1}) is None  # one core would carry two campaigns, the other one
    assert job_cores(2, {0, 1, 2, 3}) is None  # idle cores left for a campaign's side work
    assert job_cores(1, {0, 1}) is None and job_cores(2, {0}) is None


def test_each_job_runs_on_the_core_of_its_slot(monkeypatch):
    """The campaigns of ``--jobs N`` run in forked processes; each one (and so every worker it
    forks) sees the affinity ``job_cores`` gives its slot, and a slot freed by a finished
    campaign is taken by the next one (which slot frees first is timing)."""
    import os

    from fuzz import nightly as nightly_mod

    def campaign(adapter, variant, budget, options):  # runs in the job's process
        return {"target": adapter, "variant": variant, "findings": [], "examples": 0,
                "operations": 0, "seconds": 0.0, "cpus": sorted(os.sched_getaffinity(0))}

    monkeypatch.setattr(nightly_mod, "_campaign", campaign)
    jobs = [("t", f"v{i}") for i in range(4)]
    out = nightly_mod._run_jobs({"t": "t"}, jobs, 1.0, NightlyOptions(jobs=2), lambda line: None)
    cpus = sorted(os.sched_getaffinity(0))
    cores = nightly_mod.job_cores(2, cpus)
    seen = sorted(tuple(r["cpus"]) for r in out)
    if cores is None:
        assert seen == [tuple(cpus)] * 4
    else:
        # The first two jobs fill both slots; each later one takes whichever slot freed first,
        # so how many ran on each core is timing (one CI run under load: 3 and 1).
        assert set(seen) == {(c,) for c in cores} and len(seen) == 4
