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
HARNESS = ('hooks', 'CrashInjected', '_resumefuzz', 'RunSlot')  # and fuzz.testing.HARNESS_WORDS


def reproduce(adapter, trace, runs=1):
    return reprocheck.reproduce(adapter, adapter.variant(trace.variant), trace, runs=runs)


def test_repro_of_an_output_outside_the_schema_exits_1(adapter):
    """A step writes a string into ``RunState.done`` (a list of int): the run completes where
    the contract wants a refusal."""
    repro = reproduce(adapter, load_trace(BAD_OUTPUT))
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert repro.lines <= 60, repro.script
    # One task: its body is the step's own (no helper); nothing asks, and the variant saves at
    # the end only: no answers field, no stream to read.
    assert 'state.done = [*state.done, "<bad>" if 1 == BAD_OUTPUT else 1]' in repro.script
    assert "task_body" not in repro.script and "answers" not in repro.script
    assert "stream_events" not in repro.script
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
    again.  The script says so with the snapshot's index, the one ``save`` kept."""
    repro = reproduce(adapter, load_trace(STALE), runs=2)
    assert repro.checked and repro.reproduces == Rate(2, 2), repro.outputs
    assert "restored = Context.from_dict(wf, SNAPSHOTS[0][2])" in repro.script
    assert repro.lines <= 70, repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_a_crash_checks_the_stored_snapshot(adapter):
    repro = reproduce(adapter, load_trace(CRASH))
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert "verdict('stored state', read_state('branch-1'), " in script
    # Task 1 raising "after it completed" is set where it fires, as task 2 starts; no other step
    # enters task 2 (the start stops at task 1's question), so task 2 raises by itself there:
    # no CRASH for the step to set, no runtime crash_point.
    assert "task 1 raises after it completed (as task 2 starts)" in script
    assert 'raise RuntimeError("task 2 fails before its effect")  # the crash point of step 2' in script
    assert "CRASH" not in script.split('"""', 2)[2] and "crash_point" not in script
    assert "observe_crashing" not in script
    # Task 2 always raises: task 3 never runs (no step, no Done2), nor the rest of task 2's
    # step; task 2 ends the workflow; task 1, the only task left calling task_body, has its
    # body; the raising call runs inside contextlib.suppress(RuntimeError), no observe().
    assert "task3" not in script and "Done2" not in script and "task_body" not in script
    assert "ev: Done1) -> StopEvent:" in script
    assert "    with contextlib.suppress(RuntimeError): await drive('branch-1', handler)" \
           "  # task 2 raises here (the crash point)\n" in script
    assert "def observe(" not in script
    # snapshot(1) and load('branch-1'), called once, written out there; the fork saves a row of
    # branch-1 first: read_state needs no "no row" case; nothing reads what drive returns.
    assert "save('branch-1', SNAPSHOTS[0][2], asked=1)" in script
    assert "Context.from_dict(wf, [s for t, _, s in SNAPSHOTS if t == 'branch-1'][-1])" in script
    assert "def snapshot(" not in script and "def load(" not in script
    assert "if not rows:" not in script and "return result" not in script
    assert repro.lines <= 60, script
    check_standalone(script, HARNESS)


def test_repro_workflow_ends_at_the_task_that_always_raises():
    """``workflow_class`` with ``raising``: the raising task is the last step written, returns
    ``StopEvent`` and holds only its raise; later tasks, their events and gates are left out;
    the class is still a valid LlamaIndex workflow."""
    from adapters.llamaindex.repro import definitions
    from refmodel import Workflow as Plan

    imports = ("from pydantic import BaseModel\nfrom workflows import Context, Workflow, step\n"
               "from workflows.events import Event, HumanResponseEvent, InputRequiredEvent, "
               "StartEvent, StopEvent\n")

    for idiom in ("event", "wait"):
        state, *rest = definitions(Plan(4, {1, 3}, ("a", "b")), idiom, set(), answers=False,
                                   raising=(1, 2, "before its effect"))
        linear = rest[-1]
        assert "task3" not in linear and "task4" not in linear and "Ask3" not in linear
        assert "Done2" not in linear and "task_body" not in linear  # task 1's body inlined
        assert linear.rstrip().endswith('raise RuntimeError("task 2 fails before its effect")  '
                                        '# the crash point of step 2')
        scope = {}
        exec(imports + state + "\n" + linear, scope)
        scope["Linear"](timeout=None)._validate()
    # Raising at task 1: no task calls task_body, and no gate is left.
    state, linear = definitions(Plan(2, {2}, ("a",)), "event", set(), answers=False,
                                raising=(0, 1, "before its effect"))
    assert "answers" not in state and "Ask" not in linear and "task2" not in linear


def test_repro_helpers_called_once_are_written_out():
    from adapters.llamaindex.repro import stored_before, written_out
    from adapters.reproduction.script import Step

    steps = [Step(comment="1", calls=("await drive('run-1', wf.run())",)),
             Step(comment="2", calls=("save('branch-1', snapshot(1), asked=1)",
                                      "restored = Context.from_dict(wf, load('branch-1'))"))]
    out = written_out(steps)
    assert out[1].calls == ("save('branch-1', SNAPSHOTS[0][2], asked=1)",
                            "restored = Context.from_dict(wf, [s for t, _, s in SNAPSHOTS if t == 'branch-1'][-1])")
    twice = steps + [Step(comment="3", calls=("x = load('run-1')",))]
    assert written_out(twice)[1].calls[1] == steps[1].calls[1]  # load twice: the helper stays
    assert stored_before(out, "branch-1") and stored_before(out, "run-1")
    assert not stored_before([Step(comment="1", calls=steps[0].calls, guarded=True)], "run-1")


def test_repro_of_what_llamaindex_gets_right_exits_0(adapter):
    """Start and resume with 'a', recorded as if the resume had fired nothing: the script sees
    task 1 fire with 'a', which the contract allows, so it exits 0."""
    trace = allowed_resume_trace(load_trace(RACE))
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    assert "handler.ctx.send_event(Ans1(response='a'))" in repro.script
    check_standalone(repro.script, HARNESS)


NO_GATES = CORPUS / "core-event-idle" / "StateMismatch-5829d95fd604.json"


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
    assert "CRASH = (3, 'before its effect')" not in script and 'crash_point(3, ' not in script
    # The fork's crash, then the only one, is task 2's own raise (``sole_raising_crash``).
    assert 'raise RuntimeError("task 2 fails before its effect")' in script
    # The wait idiom's drive notes no question: the open waiter is the pause.
    assert "asked = int(type(event).__name__[3:])" not in script
    calls = reprocheck.record(adapter, adapter.variant(trace.variant), trace)
    died = replace(trace.observations[0], outcome="crashed", state=trace.observations[0].state)
    kept = reprocheck.script_for(adapter, adapter.variant(trace.variant),
                                 trace.with_(observations=(died, *trace.observations[1:])), calls)
    assert "CRASH = (3, 'before its effect')" in kept.script


def test_repro_without_gates_reads_the_tasks_done_alone(adapter):
    """No task asks: no answers field in the state, and ``read_state`` reads the tasks done (no
    answers, nothing pending); the events are one line each."""
    repro = reproduce(adapter, load_trace(NO_GATES))
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert "answers: dict" not in script and "class Done1(Event): pass" in script
    assert 'return {"done": value["done"], "answers": {}, "pending": None}' in script
    assert repro.lines <= 66, script
    check_standalone(script, HARNESS)
