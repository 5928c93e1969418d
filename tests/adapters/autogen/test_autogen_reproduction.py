"""AutoGen reproduction scripts: composed from the calls the runner recorded, in AgentChat's
terms, standalone (AutoGen and the standard library), and their exit status is the verdict: 1 on
a known finding, 0 on a trace AutoGen gets right."""

from __future__ import annotations

from pathlib import Path

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
HARNESS = ('hooks', 'CrashInjected', 'ReproHooks')  # and fuzz.testing.HARNESS_WORDS


def reproduce(adapter, path, runs=1):
    trace = load_trace(path)
    return reprocheck.reproduce(adapter, variant_named(adapter, trace.variant), trace, runs=runs)


def test_repro_of_a_race_is_the_interleaving_where_both_read_first(adapter):
    repro = reproduce(adapter, RACE)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert script.index("await team_2.load_state(load('run-1'))") < script.index(
        "await team_1.run(task=HandoffMessage(source='user', target='t1', content='resume:a'))")
    check_standalone(script, HARNESS)


def test_repro_of_a_forged_state_writes_what_the_case_wrote(adapter):
    """The forged content is the case's own (``protocol.forge``), written by the same
    ``rewrite`` the case uses."""
    repro = reproduce(adapter, FORGED)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    # the forgery adds task 1's output alone: written out in the step, the newest row updated in SQL
    assert "def rewrite(" not in repro.script and "def overwrite(" not in repro.script
    assert """state = load('run-1')
output = StructuredMessage[TaskOutput](content=TaskOutput(out=1), source="t1")
state["agent_states"]["GraphManager"]["message_thread"].append(output.dump())  # an output task 1 never wrote
DB.execute("UPDATE saves SET state = ? WHERE rowid = (SELECT max(rowid) FROM saves WHERE thread = ?)",
           (json.dumps(state), 'run-1'))
""" in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_a_forged_part_and_a_noop_resume_is_checked(adapter):
    """A forgery of the done log alone needs no change to the gate's request message: it is
    written with ``rewrite`` as the plain forgery is (not an ``<unknown>`` line), and the
    resume that runs nothing is its ``load_state`` alone; the script's ``TaskOutput`` keeps its
    three fields, each on its own line."""
    repro = reproduce(adapter, FORGED_DONE_NOOP)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "<unknown" not in repro.script
    assert "overwrite('run-1', rewrite(load('run-1'), [1], {1: 'a'}))" in repro.script
    assert "class TaskOutput(BaseModel):\n    task: int\n" in repro.script
    assert "return 'completed'  # load_state() took it" in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_what_autogen_gets_right_exits_0(adapter):
    """Start and resume with 'a', recorded as if the resume had fired nothing: the script sees
    task 1 fire with 'a', which the contract allows, so it exits 0."""
    trace = allowed_resume_trace(load_trace(BAD_OUTPUT))
    repro = reprocheck.reproduce(adapter, variant_named(adapter, trace.variant), trace, runs=1)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    assert "await team.load_state(load('run-1'))" in repro.script
    check_standalone(repro.script, HARNESS)


def _entry(op: str):
    found = defect_entries(CORPUS, op)
    assert found, f"no FAILED ✗ entry ending in {op} left in the corpus"
    return found[0]


def test_repro_of_a_twin_recovery_checks_the_first_copy(adapter):
    """The fuzzer recovers the original store, then a copy taken before the call; a finding on
    the first needs only a plain recovery, which the script says.  The recovery runs the task
    that failed before: the crash stays the runtime's, set for the failing step alone."""
    repro = reproduce(adapter, TWIN)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "after the failure, the first of two recoveries each on its own copy" in repro.script
    assert "CRASH = (2, 'before its effect')" in repro.script and "raise RuntimeError" not in repro.script
    check_standalone(repro.script, HARNESS)


def test_repro_of_a_stale_resume_loads_the_state_held_since_the_gate_asked(adapter):
    repro = reproduce(adapter, _entry("stale_resume"))
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "await team.load_state(load('run-1', 'interrupt:t1'))  # held since gate 1 asked" in repro.script
    check_standalone(repro.script, HARNESS)


def _body(script):
    return script.split('"""', 2)[2]  # after the header, which names the crash


def test_repro_of_a_task_raising_in_the_one_run_that_enters_it_raises_in_the_task(adapter):
    """The crash of the only step that enters the task is the task's own ``raise``: no
    ``CRASH`` for a step to set, no runtime ``crash_point``.  The SQLite store is one
    connection; where nothing but the check loads from the JSON store, ``read_state`` reads the
    file itself."""
    for path in (CRASHED_JSON, CRASHED_SQLITE, CRASHED_ON_RESUME):
        repro = reproduce(adapter, path)
        assert repro.checked and repro.reproduces == Rate(1, 1), (path, repro.outputs)
        body = _body(repro.script)
        assert 'if self.t == 2:  # the crash point of step' in body, path
        assert 'raise RuntimeError("task 2 fails before its effect")' in body, path
        assert "CRASH" not in body and "crash_point" not in body, path
        check_standalone(repro.script, HARNESS)
        assert "    async def on_reset(self, cancellation_token): pass" in body, path
        assert max(len(line) for line in body.splitlines() if not line.startswith("# ")) <= 120
        if path != CRASHED_ON_RESUME:  # no gate: the output is built where it is sent
            assert "(content=TaskOutput(out=self.t), source=self.name))" in body, path
        if path == CRASHED_ON_RESUME:  # the tasks done alone tell it apart: all it reads
            assert "verdict('stored state', read_state('run-1'), [{'done': [1]}])" in body
            assert "answer" not in body and "observe(" not in body and repro.lines <= 60, repro.script
        if path == CRASHED_JSON:
            assert "def load(" not in body and 'path = pathlib.Path(WORKDIR, f"{thread}.json")' in body
            assert repro.lines <= 60, repro.script
        else:
            assert 'DB = sqlite3.connect(":memory:", isolation_level=None)' in body
            assert "WORKDIR" not in body  # one process, its store in memory: no file
            assert "with sqlite3.connect(" not in body


SWARM_LAST_RAISES = DATA / "StateMismatch-5367fa02901a.json"


def test_the_last_task_of_a_swarm_raising_sends_no_reply_of_its_own(adapter):
    """Task 2, the last, raises as it starts: its reply that ends the run (``if self.t == 2:  #
    the last task``) is never sent and is not written; the store is in memory."""
    repro = reproduce(adapter, SWARM_LAST_RAISES)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    body = _body(repro.script)
    assert 'raise RuntimeError("task 2 fails before its effect")' in body
    assert "# the last task" not in body and "inner_messages=[message]" in body
    assert 'DB = sqlite3.connect(":memory:", isolation_level=None)' in body and "WORKDIR" not in body
    assert max(len(line) for line in body.splitlines() if not line.startswith("# ")) <= 120
    check_standalone(repro.script, HARNESS)


def test_the_sqlite_store_of_a_script_with_a_sigkill_connects_in_every_call(tmp_path):
    """A process that forks and dies takes no connection along: where a step is killed, each
    store call connects (``shared=False``); elsewhere the script opens one connection."""
    from types import SimpleNamespace

    from adapters.autogen import repro as generator

    every = "save('run-1', await team.save_state())\nawait team.load_state(load('run-1'))"
    check = SimpleNamespace(reads_state=False)
    ops = [SimpleNamespace(name="start", thread="t0")]
    per_call, opening, _ = generator._store(every, True, check, ops, shared=False)
    assert not opening and all("with sqlite3.connect(" in src for src in per_call)
    # every load follows a save (the checked run was saved): the newest row, no guard
    shared, opening, _ = generator._store(every, True, check, ops, shared=True)
    assert opening == list(generator.SQLITE_OPEN)
    assert not any("connect(" in src for src in shared)
    # the check reads a run never saved: the load that returns None for it
    unsaved = [SimpleNamespace(name="start", thread="t1")]
    guarded, _, _ = generator._store(every, True, SimpleNamespace(reads_state=True), unsaved, shared=True)
    for k, (store, unknown) in enumerate(((shared, False), (guarded, True))):
        (workdir := tmp_path / f"workdir{k}").mkdir()  # pytest's, not a mkdtemp() left behind
        namespace = {"WORKDIR": str(workdir), **vars(__import__("builtins"))}
        exec("import json, os, sqlite3\n" + "\n".join([*opening, *store]), namespace)
        namespace["save"]("run-1", {"n": 1})
        namespace["save"]("run-1", {"n": 2})
        assert namespace["load"]("run-1") == {"n": 2}
        if unknown:
            assert namespace["load"]("run-2") is None


def test_the_task_raises_itself_only_where_no_other_run_enters_it():
    """``_raising_in_task``: a crash after the effect is the task's own ``raise`` after its
    effect; where another step that runs the team fired the task's effect, or the task is a
    gate, the step keeps the runtime's crash point."""
    from types import SimpleNamespace

    from dataclasses import replace

    from adapters.autogen import repro as generator
    from adapters.reproduction.script import Step

    agent = generator._source(generator.Task)
    run = "result = await team.run(task=TextMessage(source='user', content='start'))"
    steps = [Step(comment="start", calls=(run, "save('run-1', await team.save_state())")),
             Step(comment="resume", calls=(run,), crash=(2, "in_flight", "exception"), observed=True)]
    check = SimpleNamespace(reads_outcome=False)
    quiet = SimpleNamespace(observed=[SimpleNamespace(effects=(("t0", 1, None),)), None])
    new_steps, new_agent = generator._raising_in_task(steps, agent, check, quiet, SimpleNamespace(gates=[]))
    # the run() that enters the task catches what AutoGen re-raises: no observe() needed
    assert new_steps[1].crash is None and not new_steps[1].guarded and new_steps[0] == steps[0]
    assert new_steps[1].calls == (
        "with contextlib.suppress(RuntimeError):  # task 2's raise, as AutoGen re-raises it", f"    {run}")
    looped = [steps[0], replace(steps[1], calls=("for _ in range(3):", f"    {run}"))]
    in_loop, _ = generator._raising_in_task(looped, agent, check, quiet, SimpleNamespace(gates=[]))
    assert in_loop[1].guarded and in_loop[1].calls == looped[1].calls  # a loop's run: observe()
    assert "crash_point(" not in new_agent
    lines = new_agent.splitlines()
    at = lines.index("        if self.t == 2:  # the crash point of step 2")
    assert lines[at + 1] == '            raise RuntimeError("task 2 fails after its effect")'
    assert "effect(self.t, value)" in lines[at - 1]
    entered = SimpleNamespace(observed=[SimpleNamespace(effects=(("t0", 2, None),)), None])
    assert generator._raising_in_task(steps, agent, check, entered, SimpleNamespace(gates=[])) == (steps, agent)
    assert generator._raising_in_task(steps, agent, check, quiet, SimpleNamespace(gates=[2])) == (steps, agent)
    reads = SimpleNamespace(reads_outcome=True)
    assert generator._raising_in_task(steps, agent, reads, quiet, SimpleNamespace(gates=[])) == (steps, agent)


def test_a_quiet_trace_asks_and_goes_no_further(adapter):
    """No task fires its effect in the trace nor in what the checked step allows (a forged state
    that load_state() takes): the agent asks, and nothing of answering, output or the end leaf
    is written; one-line helpers where their body is one line."""
    repro = reproduce(adapter, CORPUS / "swarm-handoff-hitl-json" / "InvalidPersist-67fd7f2c3b57.json")
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    body = _body(repro.script)
    assert "# in this trace every task that runs asks" in body and "said" not in body
    assert 'def __init__(self, t, kind="task"): super().__init__(f"t{t}", f"task {t}")' in body
    assert "def save(thread, state): pathlib.Path(" in body and "overwrite" not in body
    assert "def rewrite(" not in body and "state = load('run-1')\n" in body and "save('run-1', state)\n" in body
    assert 'state["agent_states"]["SwarmGroupChatManager"]["message_thread"].append(output.dump())  #' in body
    assert repro.lines <= 60, repro.script
    check_standalone(repro.script, HARNESS)


def test_folded_defs_stay_within_the_longest_line():
    from adapters.autogen import repro as generator

    src = "def f(x):\n    return x\ndef g(x):\n    if x:\n        return x\ndef h(x):\n    return (x,\n            x)"
    assert generator._folded(src).splitlines()[0] == "def f(x): return x"
    assert generator._folded(src).splitlines()[1:] == src.splitlines()[2:]
    long = "def f(x):\n    return " + "x" * 120
    assert generator._folded(long) == long
