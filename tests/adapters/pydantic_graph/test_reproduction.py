"""pydantic-graph reproduction scripts: composed from the calls the case recorded, short, in
pydantic-graph's terms, standalone, and their exit status is the verdict: 1 on a known defect,
0 on a trace pydantic-graph gets right."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fuzz import reprocheck
from fuzz.trace import load_trace

CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "pydantic-graph"
# A fixed trace kept beside the test (the corpus copy was re-minimized away): a crash after task
# 1 completed, then a recovery.
STUCK = Path(__file__).resolve().parent / "data" / "Stuck-49bd1e2cc4ce.json"
BAD_OUTPUT = CORPUS / "file-single-resume_docs-recover_ifp" / "InvalidPersist-82f3a3375369.json"
HARNESS = ("'t0'", "'f1'", "tip", "after_commit", "before_effect", "in_flight", "Deps", "hooks")


def check_standalone(script: str) -> None:
    body = script.split('"""', 2)[2]
    for word in HARNESS:
        assert word not in body, word
    for module in ("refmodel", "fuzz", "adapters", "resumefuzz", "hypothesis"):
        assert f"import {module}" not in script and f"from {module}" not in script


def test_repro_of_an_output_outside_the_schema_exits_1(adapter, variant):
    """A task writes a string where the state has a task number; the run completes where the
    contract wants a refusal."""
    trace = load_trace(BAD_OUTPUT)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == (1, 1), repro.outputs
    assert repro.lines <= 120, repro.script
    assert 'state.done.append("<bad>" if t == BAD_OUTPUT else t)' in repro.script
    check_standalone(repro.script)


def test_repro_of_a_crash_runs_the_crash_point_inside_the_node(adapter, variant):
    trace = load_trace(STUCK)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=0)
    assert repro.checked and repro.lines <= 120, repro.script
    assert "observe_crashing(lambda: asyncio.run(step_1()), (1, 'after it completed', " \
           "'exception'))" in repro.script
    assert "graph.iter_from_persistence(p)" in repro.script
    check_standalone(repro.script)


def test_repro_of_what_pydantic_graph_gets_right_exits_0(adapter, variant):
    """Start and resume with 'a', recorded as if the resume had fired nothing: the script sees
    task 1 fire with 'a', which is what the contract allows, so it exits 0."""
    from refmodel import Observation, Resume, Start, StateView, Workflow

    wf = Workflow(1, {1}, ("a", "b"))
    start = Observation("interrupted", (), StateView.of(wf, [], {}, 1))
    wrong = Observation("completed", (), StateView.of(wf, [1], {1: "a"}, None))
    trace = load_trace(STUCK)
    trace = trace.with_(workflow=wf, operations=(Start("t0"), Resume("t0", value="a")),
                        observations=(start, wrong),
                        finding=replace(trace.finding, category="Unclassified", step=1))
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == (0, 1), repro.outputs
    assert repro.lines <= 60, repro.script
    check_standalone(repro.script)
