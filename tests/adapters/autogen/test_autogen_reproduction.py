"""AutoGen reproduction scripts: composed from the calls the runner recorded, in AgentChat's
terms, standalone (AutoGen and the standard library), and their exit status is the verdict: 1 on
a known finding, 0 on a trace AutoGen gets right."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest

from adapters.autogen import statefmt, workflow
from adapters.reproduction.script import without_docstring
from fuzz import reprocheck
from fuzz.rate import Rate
from fuzz.testing import allowed_resume_trace, check_standalone, defect_entries
from fuzz.trace import load_trace

from conftest import variant_named

CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "autogen"
# A start whose task returns a value outside the schema: retired from the corpus (BadOutput is
# n/a on AutoGen, whose StructuredMessage validates every output: adapters/autogen/variants.py
# NO_BAD_OUTPUT), kept here as the base trace of the test that AutoGen's resume exits 0.
BAD_OUTPUT = Path(__file__).resolve().parent / "data" / "InvalidPersist-2c1deb3646fd.json"
# A task raising in the one run, nothing saved before it (JSON, SQLite), and in the resume after
# a start that never entered that task.
CRASHED_JSON = CORPUS / "graphflow-loop-hitl-json" / "StateMismatch-feab32168e0d.json"
CRASHED_SQLITE = CORPUS / "graphflow-loop-hitl-sqlite" / "StateMismatch-e78646ec6693.json"
# Kept beside the test: the minimizer replaced them in the corpus, the free race by a forced one
# and the forged state before a fork by one before a resume; these paths stay tested.  So are
# two that `resumefuzz dedupe` removed from the corpus (2026-12-05) for a shorter witness of the
# same defect: a raise in the resume after a start that never entered that task, and the last
# task of a Swarm raising.
DATA = Path(__file__).resolve().parent / "data"
CRASHED_ON_RESUME = DATA / "StateMismatch-9925b971a352.json"
RACE = DATA / "LostUpdate-f908235065c8.json"
FORGED = DATA / "InvalidPersist-d0909f1b757a.json"
# start, resume, tamper(forged, part "done"), resume: the last resume loads the forgery and,
# nothing asking, runs nothing (``ok``)
FORGED_DONE_NOOP = DATA / "InvalidPersist-948e8588a64e.json"
# start, resume(a, raise after task 1), twin_recover: the first copy's recovery answers gate 1
# again.  Removed from the corpus (2026-12-05) once the hitl deviation named DoubleConsume (the
# recovery re-issues the crashed run's answer: documented); the script it needs stays tested.
TWIN = DATA / "DoubleConsume-242f0efeb611.json"
# A forgery of the state written by the case's own ``statefmt.rewrite`` (JSON, SQLite, step saves).
FORGED_JSON = CORPUS / "graphflow-loop-step-json" / "InvalidPersist-6fb42ff8fa72.json"
FORGED_SQLITE = CORPUS / "graphflow-loopany-hitl-sqlite" / "InvalidPersist-37cfa0fe6ae2.json"
FORGED_SQLITE_STEP = CORPUS / "graphflow-loopany-step-sqlite" / "InvalidPersist-5473cfea2299.json"
# No task fires its effect, in the trace nor in what the checked step allows.
QUIET = CORPUS / "swarm-handoff-hitl-json" / "InvalidPersist-67fd7f2c3b57.json"
SWARM_LAST_RAISES = DATA / "StateMismatch-5367fa02901a.json"
# The case's names a script must not carry (and fuzz.testing.HARNESS_WORDS).  ``hooks`` is no
# longer one: the script's agents are the case's ``TaskAgent``, which calls its hooks (in the
# script, ``Hooks``: the crash points and the effect log).
HARNESS = ('CrashInjected', 'ReproHooks', '_CrashWatch')


def reproduce(adapter, path, runs=1):
    trace = load_trace(path)
    return reprocheck.reproduce(adapter, variant_named(adapter, trace.variant), trace, runs=runs)


def _reproduces(adapter, path):
    repro = reproduce(adapter, path)
    assert repro.checked and repro.reproduces == Rate(1, 1), (path, repro.outputs)
    check_standalone(repro.script, HARNESS)
    return repro.script


def test_the_script_runs_the_workflow_the_case_runs(adapter):
    """One workflow definition: the script's agents and team builder are ``workflow.py``'s own
    source, called as the case calls them."""
    script = _reproduces(adapter, CRASHED_JSON)
    for definition in (workflow.TaskOutput, workflow.TaskAgent, workflow.loop_graph):
        assert without_docstring(inspect.getsource(definition)) in script, definition
    assert ("def build_team():\n    return loop_graph(n=2, gates=set(), hooks=Hooks(), max_turns=None, "
            "shape='loop')") in script


def test_the_script_builds_the_team_the_case_builds():
    """The script's ``build_team()`` calls the variant's builder with the arguments the case's
    ``workflow.build_team`` passes it, for every shape and save policy."""
    from adapters.autogen.repro import Hooks, _build_team

    for shape in ("loop", "loopany", "split", "handoff"):
        for step in (False, True):
            for n, gates in ((1, set()), (2, {1}), (3, {1, 3})):
                namespace = {**vars(workflow), "Hooks": Hooks}
                exec(_build_team(shape, SimpleNamespace(n=n, gates=gates), step), namespace)
                ours, theirs = namespace["build_team"](), workflow.build_team(shape, step, n, gates, Hooks())
                assert _team_shape(ours) == _team_shape(theirs), (shape, step, n, gates)


def _team_shape(team) -> dict:
    stop = team._termination_condition
    graph = getattr(team, "_graph", None)
    return {"type": type(team).__name__, "max_turns": team._max_turns,
            "agents": [(a.name, a.task, a.kind, a.shape, a.handoff_to) for a in team._participants],
            "stop": None if stop is None else stop.dump_component().model_dump(),
            "graph": None if graph is None else graph.model_dump(exclude={"nodes": {"__all__": {"edges": {
                "__all__": {"condition_function"}}}}})}


def test_repro_of_a_race_is_the_interleaving_where_both_read_first(adapter):
    script = _reproduces(adapter, RACE)
    assert script.index("await team_2.load_state(load_json('run-1'))") < script.index(
        "await team_1.run(task=HandoffMessage(source='user', target='t1', content='resume:a'))")


def test_repro_of_a_forged_state_writes_what_the_case_wrote(adapter):
    """The forged content is the case's own (``protocol.forge``), written by the same
    ``rewrite`` the case uses."""
    script = _reproduces(adapter, FORGED)
    assert without_docstring(inspect.getsource(statefmt.rewrite)) in script
    assert "overwrite_sqlite('run-1', rewrite(load_sqlite('run-1'), [1], {1: 'a'}))" in script


@pytest.mark.parametrize("path", [FORGED_JSON, FORGED_SQLITE, FORGED_SQLITE_STEP])
def test_repro_of_a_forged_output_that_load_state_takes(adapter, path):
    script = _reproduces(adapter, path)
    assert "rewrite(load_" in script


def test_repro_of_a_forged_part_and_a_noop_resume_is_checked(adapter):
    """A forgery of the done log alone needs no change to the gate's request message: it is
    written with ``rewrite`` as the plain forgery is (not an ``<unknown>`` line), and the
    resume that runs nothing is its ``load_state`` alone."""
    script = _reproduces(adapter, FORGED_DONE_NOOP)
    assert "<unknown" not in script
    assert "overwrite_sqlite('run-1', rewrite(load_sqlite('run-1'), [1], {1: 'a'}))" in script
    assert "result = None  # load_state() took it; no message in it asks: nothing to run" in script


def test_repro_of_what_autogen_gets_right_exits_0(adapter):
    """Start and resume with 'a', recorded as if the resume had fired nothing: the script sees
    task 1 fire with 'a', which the contract allows, so it exits 0."""
    trace = allowed_resume_trace(load_trace(BAD_OUTPUT))
    repro = reprocheck.reproduce(adapter, variant_named(adapter, trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    assert "await team.load_state(load_json('run-1'))" in repro.script
    check_standalone(repro.script, HARNESS)


def _entry(op: str):
    found = defect_entries(CORPUS, op)
    assert found, f"no FAILED ✗ entry ending in {op} left in the corpus"
    return found[0]


def test_repro_of_a_twin_recovery_checks_the_first_copy(adapter):
    """The fuzzer recovers the original store, then a copy taken before the call; a finding on
    the first needs only a plain recovery, which the script says."""
    script = _reproduces(adapter, TWIN)
    assert "after the failure, the first of two recoveries each on its own copy" in script
    assert "observe_crashing(" in script


def test_repro_of_a_stale_resume_loads_the_state_held_since_the_gate_asked(adapter):
    script = _reproduces(adapter, _entry("stale_resume"))
    assert "state = load_sqlite('run-1', 'interrupt:t1')  # held since gate 1 asked" in script


@pytest.mark.parametrize("path", [CRASHED_JSON, CRASHED_SQLITE, CRASHED_ON_RESUME, SWARM_LAST_RAISES])
def test_repro_of_a_task_raising_at_its_crash_point(adapter, path):
    """The task raises at the runtime's crash point, which the script's ``Hooks`` call; the
    check reads the stored state with the case's own ``statefmt.parse``."""
    script = _reproduces(adapter, path)
    assert 'crash_point(task, "before its effect")' in script
    assert "verdict('stored state', read_state(load_" in script


def test_repro_of_a_quiet_trace(adapter):
    _reproduces(adapter, QUIET)


def test_the_script_stores(tmp_path):
    """The script's stores: the newest state per run (SQLite: under a label, if asked; and
    overwritten in place), ``None`` for a run never saved."""
    from adapters.autogen import repro

    for kind, functions in repro.STORES.items():
        (workdir := tmp_path / kind).mkdir()  # pytest's, not a mkdtemp() left behind
        namespace = {"WORKDIR": str(workdir)}
        exec("import json, os, pathlib, sqlite3\n" + "\n".join(
            without_docstring(inspect.getsource(f)) for f in functions), namespace)
        save, load = namespace[f"save_{kind}"], namespace[f"load_{kind}"]
        assert load("run-1") is None
        save("run-1", {"n": 1}, *(["interrupt:t1"] if kind == "sqlite" else []))
        save("run-1", {"n": 2})
        assert load("run-1") == {"n": 2}
        if kind == "sqlite":
            assert load("run-1", "interrupt:t1") == {"n": 1}
            namespace["overwrite_sqlite"]("run-1", {"n": 3})
            assert load("run-1") == {"n": 3} and load("run-1", "interrupt:t1") == {"n": 1}
