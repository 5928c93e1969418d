"""LlamaIndex reproduction scripts of the server and DBOS variants: the workflow served over HTTP
on 127.0.0.1 (llama-agents-server) or run on a DBOS runtime (llama-agents-dbos), the calls the
case made, standalone, and their exit status is the verdict: 1 on a known finding, 0 on a trace
LlamaIndex gets right."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from fuzz import reprocheck
from fuzz.rate import Rate
from fuzz.testing import allowed_resume_trace, check_standalone, defect_entries
from fuzz.trace import load_trace

from llamaindex_testkit import collector_off

CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "llamaindex"
HARNESS = ("hooks", "CrashInjected", "_resumefuzz", "RunSlot", "_service", "HttpServerCase",
           "DBOSCase")  # and fuzz.testing.HARNESS_WORDS


def reproduce(adapter, trace, runs=1):
    return reprocheck.reproduce(adapter, adapter.variant(trace.variant), trace, runs=runs)


def test_server_race_script_shows_both_racers_running_the_task(adapter):
    """Two processes, each with its own server on one SQLite store, answer the same idle handler
    over HTTP: the task runs once per racer where the contract allows one."""
    trace = load_trace(defect_entries(CORPUS / "server-wait", "race")[0])
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert 'socket.create_server(("127.0.0.1", 0))' in script
    assert "await client.send_event('run-1', event)" in script
    assert script.index("ALL_UP.wait(60)") < script.index("await client.send_event(")
    # Each racer's server waits for its start-up before the barrier says all are up.
    assert "while not (http.started or serve.done()):" in script
    assert "verdict('effects fired'" in script
    assert repro.lines <= 125, script
    check_standalone(script, HARNESS, as_words=True)  # "multiprocessing" holds "tip"


def test_dbos_script_shows_an_output_outside_the_schema_accepted(adapter):
    """A step writes a string into ``RunState.done`` (a list of int) under the DBOS runtime: the
    run completes where the contract wants a refusal."""
    trace = load_trace(defect_entries(CORPUS / "dbos-wait", "start")[0])
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    assert "wf = await launch()" in repro.script
    assert "return outcome(await follow('run-1', wf.run(run_id='run-1')))" in repro.script
    assert "verdict('outcome', status, ['rejected'])" in repro.script
    assert "if isinstance(event, WorkflowIdleEvent):\n            return event" not in repro.script
    assert repro.lines <= 60, repro.script
    check_standalone(repro.script, HARNESS)


def test_server_script_of_what_llamaindex_gets_right_exits_0(adapter):
    """Start and answer over HTTP, recorded as if the answer had fired nothing: the script sees
    task 1 fire with 'a', which the contract allows, so it exits 0."""
    trace = allowed_resume_trace(load_trace(defect_entries(CORPUS / "server-wait", "race")[0]))
    # The recording replay runs in a worker forked from this process, with this process's
    # collection counters: after some earlier tests a collection lands while the started run
    # waits, LlamaIndex loses the idle run (its own defect, server-event/Stuck-bddff149f8ee,
    # docs/frameworks/llamaindex.md) and the resume waits out the variant's 120 s limit (121 s
    # in every CI run).  This test is about the script of what LlamaIndex gets right, so the
    # recording runs with the collector off; the script runs in fresh interpreters, with it on.
    with collector_off():
        repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(0, 1), repro.outputs
    assert "no defect" in repro.outputs[0], repro.outputs  # its verdict, not a time-out
    assert "await client.send_event('run-1', Ans1(response='a'))" in repro.script
    check_standalone(repro.script, HARNESS)


STUCK = CORPUS / "server-event" / "Stuck-bddff149f8ee.json"
# What the HTTP case records for that trace's operations (start, query, start, query, query,
# resume): its calls, without a replay whose last step waits out the 120 s op limit.
STUCK_CALLS = (
    (("call", "await client.run_workflow_nowait('linear', handler_id='run-1')"),
     ("call", "await follow(client, 'run-1', after=-1)")),
    (),
    (("call", "await client.run_workflow_nowait('linear', handler_id='run-2')"),
     ("call", "await follow(client, 'run-2', after=-1)")),
    (), (),
    (("call", "await client.send_event('run-1', Ans1(response='a'))"),
     ("call", "await follow(client, 'run-1', after=3)")),
)


def test_server_script_of_a_hang_keeps_one_server_and_bounds_the_wait(adapter):
    """An answer to an idle handler, after a second handler started on the same server, never
    reaches its run: the script keeps the one server the fuzzer's case kept (a restart per step
    hides the hang), leaves out the SIGKILL crash point the run never reached, and bounds the
    last wait, so the hang exits 1 instead of hanging the script."""
    trace = load_trace(STUCK)
    variant = adapter.variant(trace.variant)
    repro = reprocheck.script_for(adapter, variant, trace, STUCK_CALLS)
    script = repro.script
    assert repro.checked and repro.lines <= 120, script
    assert "client = serve_in_background()" in script and "async with serving()" not in script
    assert "crash_point" not in script and "os.kill" not in script
    assert "the crash point is never reached" in script
    assert "return outcome(await follow_in_time(client, 'run-1', after=3))" in script
    assert "verdict('outcome', status, ['interrupted'])" in script
    check_standalone(script, HARNESS)
    # A SIGKILL that fired (the server died) is not written this way: no checked script.
    crashed = replace(trace.observations[0], outcome="crashed", error="SIGKILL")
    killed = trace.with_(observations=(crashed, *trace.observations[1:]))
    assert not reprocheck.script_for(adapter, variant, killed, STUCK_CALLS).checked


def test_server_script_of_one_start_writes_its_constants_in_place(adapter, tmp_path):
    """One start whose task writes outside the schema, on one server: the task body writes
    ``"<bad>"`` itself (no ``BAD_OUTPUT``), the store's file lies in the script's ``WORKDIR``,
    which it removes as it exits, the outcome's one line is written in the step (no ``outcome``
    helper), and the script still shows the run completing where the contract wants a
    refusal."""
    trace = load_trace(CORPUS / "server-wait" / "InvalidPersist-dd2cf93a35b0.json")
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert 'state.done = [*state.done, "<bad>"]' in script and "BAD_OUTPUT" not in script
    assert 'SqliteWorkflowStore(os.path.join(WORKDIR, "server.sqlite"))' in script
    assert "tempfile.mkdtemp()" not in script and "shutil.rmtree(top, True)" in script
    assert "def outcome(" not in script
    assert "stopped_at = await follow(client, 'run-1', after=-1)" in script
    assert "verdict('outcome', status, ['rejected'])" in script
    # No racer: the listening socket holds the first request until the server has started.
    assert "http.started" not in script and "asyncio.sleep" not in script
    # 57 before 2026-12-07: +1, the exit-2 line; +2, WORKDIR and its removal at exit (the
    # store's file was in a folder of its own, left behind)
    assert repro.lines <= 60, script
    check_standalone(script, HARNESS)
    # The script leaves no folder behind (the store's stayed in the temporary folder before).
    assert _folders_left(script, tmp_path) == []


def _folders_left(script: str, tmp_path: Path) -> list:
    """What one run of ``script``, with a temporary folder of its own, leaves in it."""
    temp = tmp_path / "temp"
    temp.mkdir()
    path = tmp_path / "repro.py"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**env, "TMPDIR": str(temp)})
    assert proc.returncode == 1 and "DEFECT SHOWS" in proc.stdout, proc.stdout + proc.stderr
    return sorted(p.name for p in temp.iterdir())


def test_a_run_that_ends_is_awaited_not_followed():
    """``waited``: the last ``follow`` of a step whose run ends, with the run-nowait that started
    it just before, is ``POST /run`` (the same start, answered at the end; the recovery's words
    follow); after an answer, ``wait_for_handler``; an earlier follow (a run that stopped at
    a question) and a follow of another handler's start stay."""
    from adapters.llamaindex.repro_served import waited

    start = ["    # GET /handlers/run-1 says failed: run-nowait with its handler id continues it",
             "    await client.run_workflow_nowait('linear', handler_id='run-1')",
             "    await follow(client, 'run-1', after=-1)"]
    assert waited(start) == [
        "    # GET /handlers/run-1 says failed: a run with its handler id continues it",
        "    await client.run_workflow('linear', handler_id='run-1')"]
    answer = ["await client.run_workflow_nowait('linear', handler_id='run-1')",
              "await follow(client, 'run-1', after=-1)",
              "await client.send_event('run-1', Ans1(response='a'))",
              "await follow(client, 'run-1', after=3)"]
    assert waited(answer) == [*answer[:3], "await client.wait_for_handler('run-1', timeout=60)"]
    other = ["await client.run_workflow_nowait('linear', handler_id='run-2')",
             "await follow(client, 'run-1', after=3)"]
    assert waited(other) == [other[0], "await client.wait_for_handler('run-1', timeout=60)"]
    assert waited(["(await client.get_handler('run-1')).status"]) == [
        "(await client.get_handler('run-1')).status"]


def test_a_flag_set_for_a_later_step_exists_unset_for_the_steps_before():
    """``_flag_set``: ``CRASH = True`` around the flagged step's run, ``False`` after it; where
    earlier steps run the task too, ``CRASH = False`` before step 1 (a task reading an unset
    flag would fail in the server with a NameError)."""
    from types import SimpleNamespace

    from adapters.llamaindex.repro_served import _flag_set

    source = "x = 1\n# 1. Start\nasyncio.run(step_1())\n# 2. Recover\nasyncio.run(step_2())\nverdict()"
    point = 'crash_point(2, "before its effect")'
    later = _flag_set(source, SimpleNamespace(observed=False), 2, point).split("\n")
    assert later[:3] == ["x = 1", "CRASH = False", "# 1. Start"]
    assert later[-4:] == ["CRASH = True  # task 2 raises as it starts (the crash point), in this step only",
                          "asyncio.run(step_2())", "CRASH = False", "verdict()"]
    first = _flag_set(source, SimpleNamespace(observed=False), 1, point).split("\n")
    assert first[:2] == ["x = 1", "# 1. Start"] and first.count("CRASH = False") == 1


def test_server_script_of_a_tampered_store_awaits_its_start(adapter):
    """A start that completes, its newest tick cut in half in SQLite, a restarted server: the
    start is one ``POST /run`` (no event stream read: no ``follow`` defined), the store's file
    a constant in the script's ``WORKDIR``, which it removes as it exits, and the script still
    shows the handler completing where the contract wants a refusal."""
    trace = load_trace(CORPUS / "server-wait-private" / "InvalidPersist-308a5c3daa89.json")
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert "        await client.run_workflow('linear', handler_id='run-1')\n" in script
    assert "def follow(" not in script and "run_workflow_nowait" not in script
    assert 'DB = os.path.join(WORKDIR, "server.sqlite")' in script
    assert "shutil.rmtree(top, True)" in script and "with sqlite3.connect(DB) as db:" in script
    assert "http.started" not in script
    # 60 before 2026-12-07: +1, the exit-2 line; +2, WORKDIR and its removal at exit (the
    # store's file was in a folder of its own, left behind)
    assert repro.lines <= 63, script
    check_standalone(script, HARNESS)


def test_server_script_of_a_crash_sets_its_flag_around_its_step(adapter):
    """Task 1 raising after it completed (as task 2 starts), then a recovery that runs task 2
    again: task 2 raises where ``CRASH`` is set, which the crashing step alone sets; its
    ``POST /run`` answers the failed run with HTTP 500, suppressed there (no ``observe``, no
    ``Crash``, no runtime ``crash_point``); the tasks append their effects to ``EFFECTS``
    themselves and the check slices the recovery's rows; the script still shows task 1 firing
    again on recovery."""
    trace = load_trace(CORPUS / "server-event" / "Replay-8e0546652d37.json")
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    raised = ('        if CRASH: raise RuntimeError("task 1 fails after it completed")'
              '  # the crash point of step 1\n')
    assert raised in script and script.index(raised) < script.index("await task_body(ctx, 2, None)")
    assert ("        with contextlib.suppress(httpx.HTTPStatusError):  # the run fails there: HTTP 500\n"
            "            await client.run_workflow('linear', handler_id='run-1')\n"
            "CRASH = True  # task 2 raises as it starts (the crash point), in this step only\n"
            "asyncio.run(step_1())\nCRASH = False\n") in script
    assert "import httpx, uvicorn\n" in script
    assert "crash_point" not in script and "class Crash" not in script and "def observe(" not in script
    assert "def follow(" not in script and "http.started" not in script
    assert "def effect(" not in script and "    EFFECTS.append((t, value))\n" in script
    assert "fired" not in script.replace("'effects fired'", "")
    assert "verdict('effects fired', sorted(EFFECTS[before:], key=repr), [[(2, None)]])" in script
    # 60 before 2026-12-07: +2, the exit-2 line and WORKDIR's removal at exit
    assert repro.lines <= 62, script
    check_standalone(script, HARNESS)


def test_the_effect_log_stays_where_something_else_names_it():
    """``_log_inlined`` changes nothing where ``fired`` or ``effect`` is still read elsewhere."""
    from adapters.llamaindex.repro_served import LOCAL_LOG, _log_inlined

    tail = "before = len(EFFECTS)\nrun()\nfired = EFFECTS[before:]\nprint(fired)\n" \
           "verdict('effects fired', sorted(fired, key=repr), [])\n"
    source = LOCAL_LOG + "def task(t):\n    effect(t, None)\n" + tail
    assert _log_inlined(source) == source
    once = source.replace("print(fired)\n", "")
    assert "sorted(EFFECTS[before:], key=repr)" in _log_inlined(once)
    assert "    EFFECTS.append((t, None))\n" in _log_inlined(once)
    assert _log_inlined(once.replace("run()", "run(effect)")) == once.replace("run()", "run(effect)")
