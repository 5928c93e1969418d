"""The trace format: round trips, one-line refusals, and schema-valid input never crashes us."""

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_jsonschema import from_schema

from fuzz.errors import UsageError
from fuzz.rate import Rate
from fuzz.trace import Trace, dump_trace, load_trace, parse_trace, replay_on_model, schema
from refmodel import MUTANTS, Workflow, shortest_exposure

WF = Workflow(3, {2}, ("a", "b"))


@pytest.mark.parametrize("mutant", MUTANTS)
def test_round_trip(tmp_path, mutant):
    exposure = shortest_exposure(WF, mutant, 3)
    observations = tuple(o for _, o in replay_on_model(Trace(WF, exposure.trace)))
    trace = Trace(WF, exposure.trace, f"mutant:{mutant}", observations=observations)
    dump_trace(trace, tmp_path / "t.json")
    assert load_trace(tmp_path / "t.json") == trace


def test_written_traces_validate_against_the_schema(tmp_path):
    import jsonschema

    exposure = shortest_exposure(WF, "ForkIgnore", 3)
    dump_trace(Trace(WF, exposure.trace), tmp_path / "t.json")
    jsonschema.validate(json.loads((tmp_path / "t.json").read_text()), schema())


@pytest.mark.parametrize("text, field", [
    ("{", "not JSON"),
    ('{"format": "resumefuzz-trace", "version": 9}', "version 9"),
    ('{"format": "resumefuzz-trace", "version": 1, "workflow": {"n": 0, "gates": [], '
     '"values": ["a"]}, "operations": []}', "workflow/n"),
    ('{"format": "resumefuzz-trace", "version": 1, "workflow": {"n": 2, "gates": [], '
     '"values": ["a"]}, "operations": [{"op": "launch", "thread": "t0"}]}', "operations/0"),
    ('{"format": "resumefuzz-trace", "version": 1, "workflow": {"n": 2, "gates": [5], '
     '"values": ["a"]}, "operations": []}', "gates"),
])
def test_bad_input_is_refused_in_one_line_naming_the_field(tmp_path, text, field):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        load_trace(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and field in message


def test_missing_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="cannot read"):
        load_trace(tmp_path / "absent.json")


# hypothesis-jsonschema resolves local $refs only against an anonymous base: drop the $id.
LOCAL_SCHEMA = {k: v for k, v in schema().items() if k != "$id"}


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(from_schema(LOCAL_SCHEMA))
def test_any_schema_valid_trace_replays_or_is_refused_cleanly(doc):
    try:
        trace = parse_trace(doc)
        replay_on_model(trace)
    except UsageError as exc:
        assert "\n" not in str(exc)


def test_dedupe_keeps_one_entry_per_variant_category_and_mechanism(tmp_path, capsys):
    # Two campaigns found one defect the same way: the longer entry is redundant; an entry of
    # another mechanism (a tamper) is kept beside them.
    from fuzz.cli import main
    from fuzz.corpus import duplicates, save
    from fuzz.trace import Finding
    from refmodel import Recover, Start, Tamper, Workflow
    from refmodel.ops import CrashAt

    wf = Workflow(n=2, gates=(), values=("a", "b"))
    crash = Start("t0", crash=CrashAt(task=1, phase="after_commit"))
    finding = Finding("Replay", "EO", 1, "recovery re-fired completed task(s) [1]")
    short = Trace(wf, (crash, Recover("t0")), "mutant:Replay", finding=finding, status="FAILED")
    longer = short.with_(operations=(crash, Start("t1"), Recover("t0")),
                         finding=replace(finding, step=2))
    tampered = short.with_(operations=(crash, Tamper("t1"), Recover("t0")))
    paths = [save(t.with_(fingerprint=f), tmp_path / "corpus")
             for t, f in ((short, "aaa"), (longer, "bbb"), (tampered, "ccc"))]
    assert duplicates(paths) == [(paths[1], paths[0])]
    assert main(["dedupe", str(tmp_path / "corpus"), "--apply",
                 "--reports", str(tmp_path / "reports")]) == 0
    assert not paths[1].exists() and paths[0].exists() and paths[2].exists()
    assert "1 of 3 entries removed" in capsys.readouterr().out


def test_dedupe_never_ranks_an_unmeasured_timing_dependent_entry_as_reproducing_every_time(
        tmp_path):
    """A campaign stopped before measuring a timing-dependent finding's rate: the entry says
    "timing-dependent (not measured: ...)" and has no rate.  It is not known to reproduce every
    time, so a longer witness that does is kept over it; among flaky ones, the shorter (a
    LangGraph campaign, 2026-12-05, kept an unmeasured 2-operation entry over a measured 7/44
    one of 1 operation)."""
    from fuzz.corpus import duplicates, save
    from fuzz.trace import Finding
    from refmodel import Start, Workflow
    from refmodel.ops import CrashAt

    wf = Workflow(n=2, gates=(), values=("a", "b"))
    crash = Start("t0", crash=CrashAt(task=1, phase="after_commit", kind="sigkill"))
    steady = Trace(wf, (Start("t1"), crash), "mutant:Replay", status="FAILED", fingerprint="aaa",
                   finding=Finding("StateMismatch", "PC", 1, "persisted state differs"))
    unmeasured = steady.with_(  # shorter: without the rule, it would be kept
        operations=(crash,), fingerprint="bbb",
        finding=Finding("StateMismatch", "PC", 0, "timing-dependent (not measured: time "
                        "limit): persisted state differs"))
    measured = unmeasured.with_(fingerprint="ccc", operations=(crash, Start("t2")),
                                finding=replace(steady.finding, reproduced=Rate(7, 44)))
    assert unmeasured.finding.unmeasured and not steady.finding.unmeasured
    paths = [save(t, tmp_path / "corpus") for t in (steady, unmeasured)]
    assert duplicates(paths) == [(paths[1], paths[0])]
    flaky = [save(t, tmp_path / "flaky") for t in (unmeasured, measured)]
    assert duplicates(flaky) == [(flaky[1], flaky[0])]  # both flaky: the shorter
