"""AutoGen reproduction scripts: composed from the calls the runner recorded, in AgentChat's
terms, standalone (AutoGen and the standard library), and their exit status is the verdict: 1 on
a known finding, 0 on a trace AutoGen gets right."""

from __future__ import annotations

from pathlib import Path

from fuzz import reprocheck
from fuzz.testing import allowed_resume_trace, check_standalone, defect_entries
from fuzz.trace import load_trace

from conftest import variant_named

CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "autogen"
BAD_OUTPUT = CORPUS / "graphflow-loop-hitl-json" / "InvalidPersist-2c1deb3646fd.json"
# Kept beside the test: the minimizer replaced them in the corpus, the free race by a forced one
# and the forged state before a fork by one before a resume; these paths stay tested.
DATA = Path(__file__).resolve().parent / "data"
RACE = DATA / "LostUpdate-f908235065c8.json"
FORGED = DATA / "InvalidPersist-d0909f1b757a.json"
HARNESS = ('hooks', 'CrashInjected', 'ReproHooks')  # and fuzz.testing.HARNESS_WORDS


def reproduce(adapter, path, runs=1):
    trace = load_trace(path)
    return reprocheck.reproduce(adapter, variant_named(adapter, trace.variant), trace, runs=runs)


def test_repro_of_an_output_outside_the_schema_exits_1(adapter):
    """An agent writes a TaskOutput whose ``out`` is a string; run() completes and save_state()
    keeps it, where the contract wants a refusal."""
    repro = reproduce(adapter, BAD_OUTPUT)
    assert repro.checked and repro.reproduces == (1, 1), repro.outputs
    assert repro.lines <= 60, repro.script
    assert "result = await team.run(task=TextMessage(source='user', content='start'))" in repro.script
    # One task, no gate: the team is that one task's graph, and nothing of the asking is left.
    assert "builder = DiGraphBuilder().add_node(Task(1))" in repro.script
    for asking in ("TextMentionTermination", "self.kind", "def ask(", "said", "asks(", "answer="):
        assert asking not in repro.script.split('"""', 2)[2], asking  # the header names it
    check_standalone(repro.script, HARNESS)


def test_repro_of_a_race_is_the_interleaving_where_both_read_first(adapter):
    repro = reproduce(adapter, RACE)
    assert repro.checked and repro.reproduces == (1, 1), repro.outputs
    script = repro.script
    assert script.index("await team_2.load_state(load('run-1'))") < script.index(
        "result = await team_1.run(task=HandoffMessage(source='user', target='t1', content='resume:a'))")
    check_standalone(script, HARNESS)


def test_repro_of_a_forged_state_writes_what_the_case_wrote(adapter):
    """The forged content is the case's own (``protocol.forge``), written by the same
    ``rewrite`` the case uses."""
    repro = reproduce(adapter, FORGED)
    assert repro.checked and repro.reproduces == (1, 1), repro.outputs
    assert "overwrite('run-1', rewrite(load('run-1'), [1], {1: 'a'}))" in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_what_autogen_gets_right_exits_0(adapter):
    """Start and resume with 'a', recorded as if the resume had fired nothing: the script sees
    task 1 fire with 'a', which the contract allows, so it exits 0."""
    trace = allowed_resume_trace(load_trace(BAD_OUTPUT))
    repro = reprocheck.reproduce(adapter, variant_named(adapter, trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == (0, 1), repro.outputs
    assert "await team.load_state(load('run-1'))" in repro.script
    check_standalone(repro.script, HARNESS)


def _entry(op: str):
    found = defect_entries(CORPUS, op)
    assert found, f"no FAILED ✗ entry ending in {op} left in the corpus"
    return found[0]


def test_repro_of_a_twin_recovery_checks_the_first_copy(adapter):
    """The fuzzer recovers the original store, then a copy taken before the call; a finding on
    the first needs only a plain recovery, which the script says."""
    repro = reproduce(adapter, _entry("twin_recover"))
    assert repro.checked and repro.reproduces == (1, 1), repro.outputs
    assert "after the failure, the first of two recoveries each on its own copy" in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_a_stale_resume_loads_the_state_held_since_the_gate_asked(adapter):
    repro = reproduce(adapter, _entry("stale_resume"))
    assert repro.checked and repro.reproduces == (1, 1), repro.outputs
    assert "state = load('run-1', 'interrupt:t1')  # held since gate 1 asked" in repro.script
    check_standalone(repro.script, HARNESS)
