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
    assert "await client.send_event('run-1', Ans1(response='a'))" in script
    assert script.index("ALL_UP.wait(60)") < script.index("await client.send_event(")
    # Each racer's server waits for its start-up before the barrier says all are up.
    assert "while not (http.started or serve.done()):" in script
    assert "verdict('effects fired'" in script
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
    hides the hang), runs no SIGKILL for the crash point the run never reached, and bounds the
    last wait, so the hang exits 1 instead of hanging the script."""
    trace = load_trace(STUCK)
    variant = adapter.variant(trace.variant)
    repro = reprocheck.script_for(adapter, variant, trace, STUCK_CALLS)
    script = repro.script
    assert repro.checked, script
    assert "client = serve_in_background()" in script and "async with serving()" not in script
    assert "os.kill" not in script and "in_child(" not in script
    assert "the crash point is never reached" in script
    assert "return outcome(await follow_in_time(client, 'run-1', after=3))" in script
    assert "verdict('outcome', status, ['interrupted'])" in script
    check_standalone(script, HARNESS)
    # A SIGKILL that fired (the server died) is not written this way: no checked script.
    crashed = replace(trace.observations[0], outcome="crashed", error="SIGKILL")
    killed = trace.with_(observations=(crashed, *trace.observations[1:]))
    assert not reprocheck.script_for(adapter, variant, killed, STUCK_CALLS).checked


def test_server_script_of_one_start_leaves_no_folder_behind(adapter, tmp_path):
    """One start whose task writes outside the schema, on one server: the store's file lies in
    the script's ``WORKDIR``, which it removes as it exits, and the script still shows the run
    completing where the contract wants a refusal."""
    trace = load_trace(CORPUS / "server-wait" / "InvalidPersist-dd2cf93a35b0.json")
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert 'DB = os.path.join(WORKDIR, "server.sqlite")' in script
    assert "SqliteWorkflowStore(DB)" in script and "shutil.rmtree(top, True)" in script
    assert "BAD_OUTPUT = 1\n" in script
    assert "verdict('outcome', status, ['rejected'])" in script
    check_standalone(script, HARNESS)
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


def test_server_script_of_a_tampered_store_reads_the_restarted_handler(adapter):
    """A start that completes, its newest tick cut in half in SQLite, a restarted server: the
    script alters the store's file ``DB`` with ``sqlite3`` and still shows the handler completing
    where the contract wants a refusal."""
    trace = load_trace(CORPUS / "server-wait-private" / "InvalidPersist-308a5c3daa89.json")
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert "with sqlite3.connect(DB) as db:" in script
    assert "return outcome((await client.get_handler('run-1')).status)" in script
    check_standalone(script, HARNESS)


def test_server_script_of_a_crash_raises_at_the_runtime_crash_point(adapter):
    """Task 1 raising after it completed (as task 2 starts), then a recovery that runs task 2
    again: the crashing step runs through ``observe_crashing``, and the script still shows task
    1 firing again on recovery."""
    trace = load_trace(CORPUS / "server-event" / "Replay-8e0546652d37.json")
    repro = reproduce(adapter, trace)
    assert repro.checked and repro.reproduces == Rate(1, 1), repro.outputs
    script = repro.script
    assert 'crash_point(2, "before its effect")' in script
    assert "(1, 'after it completed', 'exception')" in script
    assert "verdict('effects fired', sorted(fired, key=repr), [[(2, None)]])" in script
    check_standalone(script, HARNESS)
