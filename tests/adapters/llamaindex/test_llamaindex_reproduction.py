"""LlamaIndex reproduction scripts (core variants): composed from the calls the case recorded, in
Workflows' terms, standalone (llama-index-workflows and the standard library), and their exit
status is the verdict: 1 on a known finding, 0 on a trace LlamaIndex gets right."""

from __future__ import annotations

from pathlib import Path

from fuzz import reprocheck
from fuzz.rate import Rate
from fuzz.testing import allowed_resume_trace, check_standalone
from fuzz.trace import load_trace

CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "llamaindex"
BAD_OUTPUT = CORPUS / "core-event-idle" / "InvalidPersist-fb660b0688d5.json"
# Kept beside the test: the minimizer replaced it in the corpus by a shorter race on the first run
# (this one races after three forks).
RACE = Path(__file__).resolve().parent / "data" / "LostUpdate-d58cac3f2ad9.json"
CRASH = CORPUS / "core-wait-idle" / "StateMismatch-a6a32f1dd824.json"
STALE = CORPUS / "core-wait-idle" / "DoubleConsume-d44f616effe9.json"
NO_GATES = CORPUS / "core-event-idle" / "StateMismatch-5829d95fd604.json"
HARNESS = ('hooks', 'CrashInjected', '_resumefuzz', 'RunSlot')  # and fuzz.testing.HARNESS_WORDS


def reproduce(adapter, trace, runs=1):
    return reprocheck.reproduce(adapter, adapter.variant(trace.variant), trace, runs=runs)


def test_repro_of_an_output_outside_the_schema_exits_1(adapter):
    """A step writes a string into ``RunState.done`` (a list of int): the run completes where
    the contract wants a refusal."""
    repro = reproduce(adapter, load_trace(BAD_OUTPUT))
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert 'state.done = [*state.done, "<bad>" if t == BAD_OUTPUT else t]' in repro.script
    assert "BAD_OUTPUT = 1\n" in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_pastes_the_workflow_the_case_runs(adapter):
    """The script's workflow is the adapter's one definition: ``RunState``, ``task_body`` and the
    class ``workflow_source`` writes, which ``workflow_class`` executes for the cases."""
    import inspect

    from adapters.llamaindex.events import RunState
    from adapters.llamaindex.workflow import task_body, workflow_class, workflow_source
    from adapters.reproduction.script import without_docstring

    trace = load_trace(NO_GATES)
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    gate = adapter.variant(trace.variant).options["gate"]
    assert workflow_source(trace.workflow, gate) in repro.script
    assert without_docstring(inspect.getsource(RunState)) in repro.script
    assert "async def task_body(ctx, t, value):\n    effect(t, value)\n" in repro.script
    assert "task_body" in inspect.getsource(workflow_class) and task_body.__module__.endswith(".workflow")
    check_standalone(repro.script, HARNESS)


def test_repro_of_a_race_is_the_interleaving_where_both_read_first(adapter):
    repro = reproduce(adapter, load_trace(RACE))
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert script.index("restored_2 = Context.from_dict(wf, load('run-1'))") < script.index(
        "handler = wf.run(ctx=restored_1)")
    check_standalone(script, HARNESS)


def test_repro_of_a_stale_resume_restores_the_snapshot_of_the_question(adapter):
    """``start; resume a; stale_resume a``: the caller restores the ``ctx.to_dict()`` it stored
    when the gate asked (the first snapshot, answered since) and answers again; the step runs
    again.  The script says so with the snapshot's index."""
    repro = reproduce(adapter, load_trace(STALE), runs=2)
    assert repro.checked and repro.reproduces == Rate(2, 2), repro.outputs
    assert "restored = Context.from_dict(wf, snapshot(1))" in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_a_crash_checks_the_stored_snapshot(adapter):
    """Task 1 raises after it completed in the fork: the runtime's crash point raises it as
    task 2 starts, and the check reads the fork's stored snapshot."""
    repro = reproduce(adapter, load_trace(CRASH))
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert "verdict('stored state', read_state('branch-1'), " in script
    assert 'crash_point(2, "before its effect")' in script
    assert "observe_crashing(lambda: asyncio.run(step_2()), (1, 'after it completed', 'exception'))" \
        in script
    check_standalone(script, HARNESS)


def test_repro_of_what_llamaindex_gets_right_exits_0(adapter):
    """Start and resume with 'a', recorded as if the resume had fired nothing: the script sees
    task 1 fire with 'a', which the contract allows, so it exits 0."""
    trace = allowed_resume_trace(load_trace(RACE))
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    assert "handler.ctx.send_event(Ans1(response='a'))" in repro.script
    check_standalone(repro.script, HARNESS)



def test_repro_leaves_out_a_crash_point_its_run_never_reached(adapter):
    """Run-1 is started with task 2 to raise "after it completed", but it stops at task 1's
    question first: its step runs without a crash point (none fired); the fork that does raise
    keeps its own.  Judged from the observation: had the start died, it would keep it."""
    from dataclasses import replace

    trace = load_trace(CRASH)
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert "(it stops at task 1's question first: the crash point is never reached)" in script
    assert "(2, 'after it completed', 'exception')" not in script
    calls = reprocheck.record(adapter, adapter.variant(trace.variant), trace)
    died = replace(trace.observations[0], outcome="crashed", state=trace.observations[0].state)
    kept = reprocheck.script_for(adapter, adapter.variant(trace.variant),
                                 trace.with_(observations=(died, *trace.observations[1:])), calls)
    assert "(2, 'after it completed', 'exception')" in kept.script


def test_repro_without_gates_reads_the_tasks_done(adapter):
    """No task asks: the events are ``Done<t>`` alone, and ``read_state`` finds nothing
    pending."""
    repro = reproduce(adapter, load_trace(NO_GATES))
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert "class Done1(Event):" in script and "class Ask" not in script
    assert "verdict('stored state', read_state(" in script
    check_standalone(script, HARNESS)
