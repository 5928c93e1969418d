"""Shrink reports: table cells escaped, every allowed outcome shown, the framework's words,
banners that agree with the script's measured rate, a paste-ready upstream section, a replay
line that works for a dotted-path adapter, and ``resumefuzz report`` regenerating an entry."""

from __future__ import annotations

import re

from fuzz.cli import main
from fuzz.rate import Rate
from fuzz.report import cell, render, replay_line
from fuzz.reprocheck import Reproduction, allowed_steps
from fuzz.trace import Finding, Trace, dump_trace, load_trace
from refmodel import Observation, Recover, Resume, Start, StateView, Workflow

WF = Workflow(2, {1, 2}, ("a", "b"))


def trace(target="langgraph", error="ValueError: a | b"):
    """start, resume('a'), recover: the recover completes where the contract allows a
    refusal or the interrupt (two allowed outcomes)."""
    ops = (Start("t0"), Resume("t0", value="a"), Recover("t0"))
    first = Observation("interrupted", (), StateView.of(WF, [], {}, 1))
    second = Observation("interrupted", (("t0", 1, "a"),), StateView.of(WF, [1], {1: "a"}, 2))
    third = Observation("rejected", (), StateView.of(WF, [1], {1: "a"}, 2), error=error)
    finding = Finding("Unclassified", "-", 2, "observed rejected | oddly", "✗")
    return Trace(WF, ops, target, "v1", (first, second, third), (first, second, second),
                 finding, "FAILED", {"langgraph": "1.0"}, "abc123", "2026-11-30")


def rows(text: str) -> list:
    return [line for line in text.splitlines() if line.startswith("| ") and line[2].isdigit()]


def test_pipes_inside_cells_are_escaped_so_every_row_has_four_cells():
    assert cell("a | b\nc") == "a \\| b<br>c"
    text = render(trace(), "corpus/x.json", allowed=allowed_steps(trace()))
    for row in rows(text):
        assert len(re.findall(r"(?<!\\)\|", row)) == 5, row  # four cells
    assert "ValueError: a \\| b" in rows(text)[2]


def test_every_allowed_outcome_is_shown_not_only_the_canonical_one():
    t = trace()
    allowed = allowed_steps(t)
    assert len(allowed[2]) >= 2
    diverging = rows(render(t, "corpus/x.json", allowed=allowed))[2]
    assert diverging.count("*or*") == len(allowed[2]) - 1
    for o in allowed[2]:
        assert f"**{o.outcome}**" in diverging


def test_the_semantics_link_is_relative_inside_the_repository(tmp_path):
    from fuzz.report import write

    path = write(trace(), "corpus/x.json", None, tmp_path)
    text = path.read_text()
    assert "](../../../docs/semantics.md)" in text and "/work/" not in text


def test_banners_agree_with_the_measured_rate():
    def top(repro):
        text = render(trace(), "corpus/x.json", repro)
        return text.split("- **Category**")[0]

    assert "did NOT reproduce" in top(Reproduction(script="x\n", reproduces=Rate(0, 3)))
    assert "2 of 3 runs" in top(Reproduction(script="x\n", reproduces=Rate(2, 3)))
    assert top(Reproduction(script="x\n", reproduces=Rate(3, 3))).count(">") == 0
    assert "No checked script" in top(Reproduction(script=None))
    assert "`resumefuzz report <entry> --verify 3`" in top(None)  # none was asked for
    selftest = trace().with_(target="mutant:Replay")
    assert "self-test targets have no framework" in render(selftest, "c.json", None)


def test_the_upstream_section_has_title_versions_promise_and_script():
    text = render(trace(), "corpus/x.json",
                  Reproduction(script="print('hi')\n", reproduces=Rate(3, 3)),
                  allowed=allowed_steps(trace()))
    upstream = text.split("## Upstream issue (ready to paste)")[1]
    assert "**Title**: langgraph: Unclassified on recover" in upstream
    assert "**Versions**: langgraph 1.0" in upstream
    assert "The framework raised `ValueError: a | b`" in upstream
    assert "allows, at this step, only: rejected or interrupted" in upstream
    assert "```python\nprint('hi')\n```" in upstream and "3 of 3 fresh runs" in upstream


def test_a_stuck_step_says_where_it_waited_not_what_it_raised():
    base = trace()
    waited = "no answer within 30s, waiting in select (selectors.py:468), called from run (x.py:9)"
    stuck = Observation("stuck", (), base.observations[2].state, error=waited)
    text = render(base.with_(observations=(*base.observations[:2], stuck)), "corpus/x.json",
                  allowed=allowed_steps(base))
    upstream = text.split("## Upstream issue (ready to paste)")[1]
    assert f"The operation gave {waited}." in upstream and "raised" not in upstream
    assert f"; `{waited}`" in rows(text)[2] and "raised" not in rows(text)[2]


def test_the_upstream_section_of_a_third_party_store_names_it():
    stored = trace().with_(versions={"langgraph": "1.0", "mystore": "0.1",
                                     "store-factory": "mypkg.savers:make_saver"})
    text = render(stored, "corpus/x.json",
                  Reproduction(script="print('hi')\n", reproduces=Rate(3, 3)))
    upstream = text.split("## Upstream issue (ready to paste)")[1]
    assert "**Title**: langgraph with a third-party store: Unclassified on recover" in upstream
    assert "mystore 0.1" in upstream
    assert "the framework's public API, the store's package and the standard library" in upstream
    assert "store's package" not in render(trace(), "corpus/x.json", Reproduction(
        script="x\n", reproduces=Rate(3, 3)))


def test_an_unclassified_entrys_note_says_first_why_no_category_fits(tmp_path):
    from dataclasses import replace

    noted = trace().with_(finding=replace(trace().finding, note="nothing is pending"))
    text = render(noted, "corpus/x.json")
    assert text.splitlines()[2] == "> **Why no category fits**: nothing is pending"
    path = tmp_path / "e.json"
    dump_trace(noted, path)
    assert load_trace(path).finding.note == "nothing is pending"  # kept in the entry
    assert "Why no category fits" not in render(trace(), "corpus/x.json")  # only with a note


def test_the_replay_line_names_the_dotted_target():
    assert replay_line(trace(), "c.json") == "resumefuzz replay c.json"
    third = trace(target="mine")
    assert replay_line(third, "c.json", "mypkg.mod:Mine") == (
        "resumefuzz replay c.json --target mypkg.mod:Mine")


def test_report_command_regenerates_an_entry_and_records_the_script(in_tmp, capsys):
    entry = in_tmp / "corpus" / "mutant_Replay" / "default" / "e.json"
    t = trace(target="mutant:Replay")
    finding = Finding("Replay", "EO", 2, "replayed", "✗")
    dump_trace(t.with_(finding=finding, variant="default"), entry)
    assert main(["report", str(entry), "--verify", "2", "--reports", "out"]) == 0
    (report,) = (in_tmp / "out").rglob("*.md")
    assert "the self-test targets have no framework" in report.read_text()
    assert load_trace(entry).finding.script is None


def test_report_command_refuses_bad_input_in_one_line(in_tmp, capsys):
    assert main(["report", "nowhere.json"]) == 2
    assert "nowhere.json" in capsys.readouterr().err
    assert main(["report", str(in_tmp), "--verify", "-1"]) == 2
    assert list(in_tmp.iterdir()) == []


REMOVED_BANNER = "> **Removed from the corpus"


def test_every_committed_report_has_its_entry_and_every_entry_its_report():
    """``shrink_reports/`` holds one report per corpus entry.  A report whose entry was removed
    (deduplicated, relabelled, withdrawn) reads as a live finding to a maintainer browsing the
    folder, unless its first line says it was removed (``REMOVED_BANNER``: the 30 kept as the
    record of a withdrawn verdict); 11 without it had piled up before 2026-12-05."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    entries = {p.relative_to(root / "corpus").with_suffix("")
               for p in (root / "corpus").rglob("*.json")}
    reports = {p.relative_to(root / "shrink_reports").with_suffix("")
               for p in (root / "shrink_reports").rglob("*.md")}
    assert entries, "no corpus here"
    orphans = sorted(str(r) for r in reports - entries
                     if not (root / "shrink_reports" / r).with_suffix(".md").read_text()
                     .startswith(REMOVED_BANNER))
    assert not orphans, f"reports without a corpus entry (remove them): {orphans}"
    missing = sorted(str(e) for e in entries - reports)
    assert not missing, f"corpus entries without a report (resumefuzz report): {missing}"


def test_a_record_offers_no_upstream_issue():
    """A FIXED or CHANGED entry, or a divergence that never came back, is a record: a
    maintainer who pasted its "ready to paste" section would file what is not there."""
    live = render(trace(), "c.json", Reproduction(script="print(1)\n", 
                                                  reproduces=Rate(3, 3)))
    assert "## Upstream issue (ready to paste)" in live and "print(1)" in live
    for status, why in (("FIXED", "matches the reference"), ("CHANGED", "another category")):
        fixed = trace().with_(status=status)
        bare = render(fixed, "c.json", Reproduction(script=None))
        assert "ready to paste" not in bare
        assert "## Upstream issue: nothing to file" in bare and why in bare
        checked = render(fixed, "c.json", Reproduction(script="print(2)\n", 
                                                       reproduces=Rate(0, 3)))
        assert "ready to paste" not in checked and "**Regression script**" in checked
        assert "print(2)" in checked and "disagree" not in checked
        still = render(fixed, "c.json", Reproduction(script="print(2)\n", 
                                                     reproduces=Rate(2, 3)))
        assert "exited 1 in 2 of 3 fresh runs" in still  # a script that still shows it says so
    gone = trace().with_(finding=Finding("Unclassified", "-", 2, "odd", "✗",
                                         reproduced=Rate(0, 5)))
    text = render(gone, "c.json", Reproduction(script="print(3)\n", 
                                               reproduces=Rate(0, 3)))
    assert "ready to paste" not in text and "never came back" in text


def test_every_committed_report_offering_an_upstream_issue_is_live_and_checks_its_defect():
    """Only a report of a live corpus entry (last replay ``FAILED``) with a checked script may
    say "ready to paste"; a record (removed from the corpus, ``FIXED``, ``CHANGED``), a
    caller-owned D (the state is the caller's) and a D's consequence (what a documented loss
    costs) say why there is nothing to file and show no script that only prints."""
    import json
    from pathlib import Path

    from fuzz.judge import CONSEQUENCE_WORDS

    root = Path(__file__).resolve().parents[2]
    wrong = []
    for report in sorted((root / "shrink_reports").rglob("*.md")):
        text = report.read_text()
        entry = (root / "corpus" / report.relative_to(root / "shrink_reports")).with_suffix(".json")
        doc = json.loads(entry.read_text()) if entry.exists() else {}
        finding = doc.get("finding") or {}
        # Nothing for the maintainers: the caller's state, or what a documented loss costs.
        owed = (finding.get("owner") != "caller"
                and not finding.get("detail", "").startswith(
                    f"{finding.get('property')} {CONSEQUENCE_WORDS}"))
        live = (entry.exists() and not text.startswith(REMOVED_BANNER)
                and doc.get("status") in (None, "FAILED") and owed)
        offers = "## Upstream issue (ready to paste)" in text
        checked = "- **Reproduction script**: checks the defect" in text
        if offers != live or (offers and not checked):
            wrong.append(str(report.relative_to(root)))
        if not live and "## Upstream issue: nothing to file" not in text:
            wrong.append(str(report.relative_to(root)))
    assert not wrong, f"reports that offer the wrong thing upstream: {wrong[:10]}"


def test_a_script_is_made_from_a_recording_that_diverges_as_the_trace_did(monkeypatch):
    """An unforced race (or a SIGKILL racing a writer) may run another way when the calls are
    recorded for the script; a script of that way shows nothing.  ``record`` records again,
    up to ``RECORD_ATTEMPTS`` times, until the finding's step is observed as recorded."""
    from adapters.reference import ReferenceAdapter
    from fuzz import reprocheck

    t = trace(target="reference")
    recorded = t.observations[t.finding.step]
    other = Observation("completed", (), recorded.state)
    runs = iter([(("one way",), other), (("the recorded way",), recorded)] +
                [(("never",), other)] * reprocheck.RECORD_ATTEMPTS)
    made = []

    def once(session, trace):
        made.append(1)
        return next(runs)

    monkeypatch.setattr(reprocheck, "_record_once", once)
    adapter = ReferenceAdapter()
    variant = adapter.variants()[0]
    assert reprocheck.record(adapter, variant, t) == ("the recorded way",) and len(made) == 2
    made.clear()
    assert reprocheck.record(adapter, variant, t) == ("never",)  # the last, when none diverged
    assert len(made) == reprocheck.RECORD_ATTEMPTS


def test_an_unforced_race_that_never_records_as_it_ran_is_recorded_forced(monkeypatch):
    """Under load the racers of an unforced race may run one after the other in every
    recording; the one whose reads all come first (a forced race) is then recorded, where the
    variant can force it, and kept if it diverges as the trace did.  Only the finding's race is
    forced."""
    from adapters.reference import ReferenceAdapter
    from fuzz import reprocheck
    from refmodel import Race

    t = trace(target="reference")
    ops = (Start("t0"), Race("t0", values=("a", "a")), Race("t0", values=("b", "b")))
    t = t.with_(operations=ops)  # the finding is step 2: the second race
    recorded = t.observations[t.finding.step]
    other = Observation("completed", (), recorded.state)
    seen = []

    def once(session, tr):
        seen.append(tuple(op.forced for op in tr.operations[1:]))
        forced = tr.operations[2].forced
        return (("both read first",) if forced else ("one after the other",)), (
            recorded if forced else other)

    monkeypatch.setattr(reprocheck, "_record_once", once)
    adapter = ReferenceAdapter()
    variant = adapter.variants()[0]
    assert adapter.capabilities(variant).forced_race
    assert reprocheck.record(adapter, variant, t) == ("both read first",)
    assert seen == [(False, False)] * reprocheck.RECORD_ATTEMPTS + [(False, True)]
    # A recording as the trace ran is preferred: the forced one is never tried then.
    seen.clear()
    monkeypatch.setattr(reprocheck, "_record_once",
                        lambda session, tr: (seen.append(1), (("as it ran",), recorded))[1])
    assert reprocheck.record(adapter, variant, t) == ("as it ran",) and seen == [1]


def test_a_timing_dependent_findings_script_runs_its_scenario_until_it_shows(tmp_path):
    """A script that checks a timing-dependent defect once exits 0 in most runs (LangGraph's
    SIGKILL loss: 0 of 10); ``repeated`` makes it run its scenario in fresh interpreters until
    one shows the defect (exit 1), at most ``attempts_for(trace)`` times; a run that ends with
    any other code (it broke) ends the script at once with that code."""
    from fuzz.reprocheck import REPEAT_CAP, attempts_for, repeated, verify

    counter = tmp_path / "runs"
    script = (f'"""Shows on the third run."""\nimport pathlib, sys\n'
              f'c = pathlib.Path({str(counter)!r})\n'
              'n = int(c.read_text()) + 1 if c.exists() else 1\nc.write_text(str(n))\n'
              'print("DEFECT SHOWS" if n == 3 else "no defect")\nsys.exit(1 if n == 3 else 0)\n')
    assert repeated(script, 1, "") == script
    assert verify(repeated(script, 5, "1/3"), 1)[0] == 1 and counter.read_text() == "3"
    counter.unlink()
    assert verify(repeated(script, 2, "1/3"), 1)[0] == 0 and counter.read_text() == "2"
    counter.unlink()
    broken = repeated(script.replace("sys.exit(1 if", "sys.exit(2 if"), 5, "1/3")
    assert verify(broken, 1)[1][0].startswith("exit 2") and counter.read_text() == "3"
    assert repeated(script, 5, "1/3").startswith('"""Shows on the third run."""\n# The defect')

    def rated(k, n):
        return trace().with_(finding=Finding("Replay", "EO", 0, "why", reproduced=Rate(k, n)))

    assert attempts_for(trace()) == attempts_for(rated(5, 5)) == attempts_for(rated(0, 5)) == 1
    assert attempts_for(rated(1, 2)) == 7 and attempts_for(rated(31, 305)) == REPEAT_CAP


def test_without_a_script_the_upstream_section_gives_the_replay_line():
    """Where the adapter writes no checked script (or its generator raised, a tool error), the
    upstream section says why and gives the replay line: a script that only printed would read
    as a reproduction to file while proving nothing."""
    for repro in (None, Reproduction(script=None), Reproduction(script=None, error="KeyError: 'x'")):
        upstream = render(trace(), "corpus/x.json", repro).split("## Upstream issue")[1]
        assert "no checked script" in upstream and "```python" not in upstream
        assert "```\nresumefuzz replay corpus/x.json\n```" in upstream
    failed = render(trace(), "corpus/x.json", Reproduction(script=None, error="KeyError: 'x'"))
    assert "generator failed on this finding (a tool error" in failed and "KeyError: 'x'" in failed
    checked = render(trace(), "corpus/x.json", Reproduction(script="print('hi')\n",
                                                            reproduces=Rate(3, 3)))
    assert "```python\nprint('hi')\n```" in checked and "no checked script" not in checked


def test_a_script_that_could_not_run_says_what_failed(tmp_path):
    """A script that stops before its verdict (the user's store module, run without its
    ``PYTHONPATH``) was reported as one that "misses something the harness does"."""
    from fuzz.reprocheck import COULD_NOT_RUN, verify

    k, outputs = verify("import mypkg_that_is_not_here\n", 2)
    assert k == 0 and len(outputs) == 2
    assert all(COULD_NOT_RUN + "ModuleNotFoundError: No module named 'mypkg_that_is_not_here'"
               in o for o in outputs), outputs
    stored = trace().with_(versions={"langgraph": "1.0", "store-factory": "mypkg.savers:make"})
    repro = Reproduction(script="x\n", reproduces=Rate(0, 2), outputs=outputs)
    top = render(stored, "corpus/x.json", repro).split("- **Category**")[0]
    assert "**The reproduction script could not run**" in top and "misses something" not in top
    assert "ModuleNotFoundError: No module named 'mypkg_that_is_not_here'" in top
    assert "`mypkg.savers` must be importable" in top and "PYTHONPATH" in top
    # A script that reached its verdict and said "no defect" still misses something.
    k, outputs = verify("print('no defect - outcome')\n", 1)
    missed = Reproduction(script="x\n", reproduces=Rate(0, 1), outputs=outputs)
    assert "misses something the harness does" in render(stored, "corpus/x.json", missed)
