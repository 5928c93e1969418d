"""The trace format: round trips, one-line refusals, and schema-valid input never crashes us."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_jsonschema import from_schema

from fuzz.errors import UsageError
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
