"""pydantic-graph reproduction scripts: the case's own workflow definition and the calls the case
recorded, in pydantic-graph's terms, standalone, and their exit status is the verdict: 1 on a
known defect, 0 on a trace pydantic-graph gets right."""

from __future__ import annotations

from pathlib import Path

import pytest

from fuzz import reprocheck
from fuzz.rate import Rate
from fuzz.testing import allowed_resume_trace, check_standalone
from fuzz.trace import load_trace

CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "pydantic-graph"
# A fixed trace kept beside the test (the corpus copy was re-minimized away): a crash after task
# 1 completed, then a recovery.
STUCK = Path(__file__).resolve().parent / "data" / "Stuck-49bd1e2cc4ce.json"
BAD_OUTPUT = CORPUS / "file-single-resume_docs-recover_ifp" / "InvalidPersist-82f3a3375369.json"
HARNESS = ()  # fuzz.testing.HARNESS_WORDS (the run's Deps and its hooks are workflow.py's)


def test_repro_of_an_output_outside_the_schema_exits_1(adapter, variant):
    """A task writes a string where the state has a task number; the run completes where the
    contract wants a refusal."""
    trace = load_trace(BAD_OUTPUT)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert 'return "<bad>" if task == BAD_OUTPUT else task' in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_a_crash_runs_the_crash_point_inside_the_node(adapter, variant):
    trace = load_trace(STUCK)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=0)
    assert repro.checked, repro.script
    assert "observe_crashing(lambda: asyncio.run(step_1()), (1, 'after it completed', " \
           "'exception'))" in repro.script
    assert "crash_point(task, \"before its effect\")" in repro.script  # in CrashingHooks
    assert "graph.iter_from_persistence(p, deps=deps)" in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_what_pydantic_graph_gets_right_exits_0(adapter, variant):
    """Start and resume with 'a', recorded as if the resume had fired nothing: the script sees
    task 1 fire with 'a', which is what the contract allows, so it exits 0."""
    trace = allowed_resume_trace(load_trace(STUCK))
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    check_standalone(repro.script, HARNESS)


# Kept beside the test (corpus entries move when campaigns re-find them): races whose later racer
# answers the next gate with its value, one on the single node shape, one on the classes shape.
RACE = Path(__file__).resolve().parent / "data" / "DoubleConsume-8ad8933ccc55.json"
RACE_CLASSES = Path(__file__).resolve().parent / "data" / "DoubleConsume-ea601c37ea7e.json"


def test_repro_of_a_race_runs_the_racers_in_processes_the_later_claim_after(adapter, variant):
    """The racers run in processes of their own; the second, shown gate 1 too, claims once the
    first has returned and answers gate 2: deterministic in the script (a barrier, not timing),
    so it reproduces every time."""
    trace = load_trace(RACE)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=2)
    assert repro.checked and repro.reproduces == Rate(2, 2), repro.outputs
    assert repro.script.count("graph.iter_from_persistence(p, deps=deps) as run:") == 2, \
        repro.script
    assert "race(racer_1, racer_2)" in repro.script, repro.script
    check_standalone(repro.script, HARNESS, as_words=True)  # "multiprocessing" holds "tip"


def test_repro_on_the_classes_shape_defines_one_node_class_per_task(adapter, variant):
    """A race: its racers in processes, the later one's claim held (see below)."""
    trace = load_trace(RACE_CLASSES)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "graph, (T1, T2) = classes_graph(2, GATES)" in repro.script
    assert "race(racer_1, racer_2)" in repro.script, repro.script
    check_standalone(repro.script, HARNESS, as_words=True)  # "multiprocessing" holds "tip"


# A race on one gate (kept beside the test): racer 1 answers it and runs to the end; the
# other's load_next() then finds nothing to run, and the docs' idiom starts a fresh run on the
# same file, whose unanswered gate becomes the run's latest snapshot.
RACE_FRESH = Path(__file__).resolve().parent / "data" / "StateMismatch-2d9b7f1eca6a.json"


def test_repro_of_a_race_runs_the_racers_at_once_the_later_claim_held(adapter, variant):
    """The racers run in processes of their own, released together; the later racer's
    load_next() (a FileStatePersistence subclass's) waits at a barrier, not a sleep, until racer
    1's call has returned: the order the fuzzer's racers showed it in, every time."""
    trace = load_trace(RACE_FRESH)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=2)
    assert repro.checked and repro.reproduces == Rate(2, 2), repro.outputs
    script = repro.script
    assert "race(racer_1, racer_2)" in script and "HOLD = multiprocessing.Barrier(2)" in script
    assert "class HeldPersistence(FileStatePersistence):" in script
    assert "p = file_persistence('run-1', HeldPersistence)" in script
    assert "if snapshot is None:" in script  # the docs' branch: a fresh run on the same file
    assert "await graph.initialize(T1(), p, state=State())" in script
    assert "sleep" not in script
    check_standalone(script, HARNESS, as_words=True)


FORGED = Path(__file__).resolve().parent / "data" / "InvalidPersist-17d0e43f2562.json"


def test_repro_of_a_forged_snapshot_replaces_it_in_pydantic_graphs_classes(adapter, variant):
    """In memory, the tamper is the newest snapshot replaced by one the run never wrote; the
    recovery then runs it without a word."""
    trace = load_trace(FORGED)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "p.last_snapshot = NodeSnapshot(state=State(done=[], answers={}), node=Task(1), " \
           "id=p.last_snapshot.id)" in repro.script
    check_standalone(repro.script, HARNESS)


# Kept beside the test: soft traces (no SIGKILL, race or twin), each a script that exits 1.
SOFT = [Path(__file__).resolve().parent / "data" / name for name in (
    "Stuck-5c9ab37ac9f7.json",  # a crash in memory, then a recovery
    "Stuck-5c12a12f0628.json",  # the classes shape with one task
    "Stuck-a54b4a4f16a1.json",  # a recovery of a file the framework refuses
    "InvalidPersist-d5a85fb7c547.json",  # a resume whose outcome the check reads
)]


@pytest.mark.parametrize("path", SOFT, ids=lambda p: p.stem)
def test_repro_of_a_soft_trace_exits_1(adapter, variant, path):
    """The script defines the workflow with workflow.py's own functions and shows the defect."""
    trace = load_trace(path)
    repro = reprocheck.reproduce(adapter, variant(trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), (repro.outputs, repro.script)
    assert "def task_body(t, answer, ctx):" in repro.script
    assert "async def drive(run):" in repro.script
    check_standalone(repro.script, HARNESS)
