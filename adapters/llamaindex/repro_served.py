"""A llama-agents-server or llama-agents-dbos finding as a standalone script: the workflow served
as a user serves it, the calls the case made, the check.

``served_reproduction(variant, workflow, evidence)`` writes the script with ``repro.py``'s
``definitions`` (the adapter's one workflow definition) and ``script_source``, and the
definitions below, pasted by name with ``inspect.getsource`` (real code, importable here):

- server (``server-*``): ``serving()`` starts a ``WorkflowServer`` on a ``SqliteWorkflowStore``
  in the file ``DB``, served with uvicorn on 127.0.0.1 and an ephemeral port as
  ``WorkflowServer.serve`` builds it, and yields the framework's ``WorkflowClient``; ``follow``
  reads ``GET /events/{handler_id}`` (opened again after 5 s of silence: an answered run may
  still be rebuilt from the journal).  Each step is one server process's life: ``async with
  serving() as client:`` and the HTTP calls the case recorded (``case_server.py``), in order,
  with the handler ids and event sequence numbers it used.  The ``-private`` variants call the
  server's service object in process; their case records the route behind each call, so their
  scripts make the same requests over HTTP.  A race: one child process per racer, each with its
  own server on the one SQLite file; all servers are up (a barrier) before any racer answers.
  ``DB`` lies in the runtime's ``WORKDIR``, which the script removes as it exits.
- A hang (the last call ``stuck``) on one server: starts and answers only, which the fuzzer's
  case sent to the one server it kept running, so the script does too (``serve_in_background``:
  a thread serving it for the rest of the script); the last ``follow`` is bounded
  (``follow_in_time``, 60 s), and its ``stuck`` is the defect.  A SIGKILL crash point that the
  run never reached (it stopped at a question first) is left out: no process died.
- DBOS (``dbos-wait``): ``launch()`` configures DBOS on a SQLite system database, the
  ``DBOSRuntime`` and the workflow on it; ``follow`` reads the run's published events.

Not written (the report gives the replay line): a SIGKILL that fires, twin recovery, a recovery
that waits for the server's start-up grace, a tamper other than the journal's ``corrupt``, a
check of the stored state, DBOS traces with more than one start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time

import uvicorn
from dbos import DBOS
from llama_agents.client import WorkflowClient
from llama_agents.dbos import DBOSRuntime
from llama_agents.server import SqliteWorkflowStore, WorkflowServer
from workflows.events import StopEvent, WorkflowIdleEvent

from adapters.reproduction.runtime import WORKDIR
from adapters.reproduction.script import (
    OUTCOME_WORDS,
    Check,
    check_for,
    header,
    pins,
    source_as,
    step_of,
)

from .repro import definitions, outcome, pasted, script_source, unreached, without_unreached

Linear, EVENTS, ALL_UP = None, [], None  # what a script defines before these run
SERVER_PINS = ("llama-index-workflows", "llama-agents-server", "llama-agents-client")
DBOS_PINS = ("llama-index-workflows", "llama-agents-dbos", "dbos")
SUPPORTED = {"server": {"start", "resume", "recover", "query", "race", "tamper"},
             "dbos": {"start", "query"}}


# -- what the script contains --------------------------------------------------------------------

DB = os.path.join(WORKDIR, "server.sqlite")


@contextlib.asynccontextmanager
async def serving():
    """A ``WorkflowServer`` on the SQLite store, served by uvicorn on 127.0.0.1 and an
    ephemeral port (as ``WorkflowServer.serve`` builds it) until the block ends."""
    server = WorkflowServer(workflow_store=SqliteWorkflowStore(DB))
    server.add_workflow("linear", Linear(timeout=None), additional_events=EVENTS)
    sock = socket.create_server(("127.0.0.1", 0))  # loopback only, a free port
    http = uvicorn.Server(uvicorn.Config(server.app, log_level="warning"))
    serve = asyncio.create_task(http.serve(sockets=[sock]))
    async with asyncio.timeout(30):
        while not (http.started or serve.done()):  # until the lifespan (the runtime) has started
            await asyncio.sleep(0.01)
    try:
        yield WorkflowClient(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    finally:  # a failed run's error too: the server stops before it propagates
        http.should_exit = True
        await serve


def serve_in_background():
    """The same server in a thread of its own for the rest of the script: every step talks to
    this one server process, as the fuzzer's steps did (no restart between them)."""
    server = WorkflowServer(workflow_store=SqliteWorkflowStore(DB))
    server.add_workflow("linear", Linear(timeout=None), additional_events=EVENTS)
    sock = socket.create_server(("127.0.0.1", 0))  # loopback only, a free port
    http = uvicorn.Server(uvicorn.Config(server.app, log_level="warning"))
    threading.Thread(target=asyncio.run, args=(http.serve(sockets=[sock]),), daemon=True).start()
    for _ in range(3000):  # until the lifespan (the runtime) has started: 30 s at most
        if http.started:
            break
        time.sleep(0.01)
    return WorkflowClient(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}")


async def follow(client, handler_id, after):
    """Read ``GET /events/{handler_id}`` after sequence ``after`` until the run waits for an
    answer or stops (the event's type); a failed run raises.  A stream silent for 5 s is opened
    again from the last event seen, as an SSE client reconnects: the server may still be
    rebuilding an answered run from its journal when the stream opens."""
    async with asyncio.timeout(60):
        while True:
            stream = client.get_workflow_events(handler_id, include_internal_events=True, after_sequence=after)
            events = aiter(stream)
            async with contextlib.aclosing(stream):
                with contextlib.suppress(TimeoutError):  # silent: subscribe again
                    while (event := await asyncio.wait_for(anext(events, None), 5)) is not None:
                        after, kinds = stream.last_sequence, {event.type, *(event.types or ())}
                        if "WorkflowFailedEvent" in kinds:
                            raise RuntimeError(f"the run failed: {event.value}")
                        if stop := kinds & {"WorkflowIdleEvent", "StopEvent"}:
                            return stop.pop()


async def follow_in_time(client, handler_id, after):
    """``follow``, bounded: ``None`` when the run neither waits nor stops within its 60 s."""
    with contextlib.suppress(TimeoutError):
        return await follow(client, handler_id, after)


def outcome_in_time(stopped_at):
    """``follow_in_time``'s last event: the run waits for an answer, has ended, or hangs."""
    return {None: "stuck", "WorkflowIdleEvent": "interrupted"}.get(stopped_at, "completed")


def outcome_of_server(stopped_at):
    """``follow``'s last event, or a handler's status (a restart leaves it running: at its
    question): the run waits for an answer, or it has ended."""
    return "interrupted" if stopped_at in ("WorkflowIdleEvent", "running") else "completed"


async def launch():
    """DBOS on a SQLite system database (no admin server), the llama runtime, the workflow."""
    DBOS(config={"name": "repro", "system_database_url": f"sqlite:///{WORKDIR}/dbos.sqlite",
                 "run_admin_server": False, "notification_listener_polling_interval_sec": 0.01})
    runtime = DBOSRuntime(polling_interval_sec=0.01)
    wf = Linear(timeout=None, runtime=runtime)
    await runtime.launch()
    return wf


async def follow_dbos(run_id, handler):
    """The run's published events until it waits for an answer or stops; then its result."""
    async for event in handler.stream_events(expose_internal=True):
        if isinstance(event, WorkflowIdleEvent):
            return event
        if isinstance(event, StopEvent):
            break
    handle = await DBOS.retrieve_workflow_async(run_id)
    return await handle.get_result(polling_interval_sec=0.01)


# -- composing it ----------------------------------------------------------------------------------

RACE_NOTE = " (here: every racer's server is up before any of them answers)"
PRIVATE_NOTE = ("The fuzzer's variant calls the server's service object in process; this script "
                "makes the same requests over HTTP (the code behind each route).")


def _served(calls) -> list:
    """One server process's life: its HTTP calls inside ``async with serving() as client:``."""
    return ["async with serving() as client:", *(f"    {c}" for c in calls)]


def _racers(log) -> tuple | None:
    """``(helpers, racers)``: the coroutine a racer's child process runs (its own server, the
    barrier, then the calls it recorded; one per distinct list of calls) and each racer's call
    of it; ``None`` when no racer recorded a line."""
    kinds = list(dict.fromkeys(kind for kind, _ in log if kind.startswith("racer ")))
    if not kinds:
        return None
    calls = [tuple(src for k, src in log if k == kind) for kind in kinds]
    distinct = list(dict.fromkeys(calls))
    names = {lines: "answer" if len(distinct) == 1 else f"answer_{n}"
             for n, lines in enumerate(distinct, 1)}
    helpers = ["\n".join([f"async def {names[lines]}():", *(f"    {c}" for c in _served([
        "ALL_UP.wait(60)  # every racer's server is up: all answer at once", *lines]))])
        for lines in distinct]
    return helpers, tuple((f"asyncio.run({names[lines]}())",) for lines in calls)


def _steps(evidence, ops, check, dbos: bool, helpers: list, one_server: bool) -> list | None:
    """One ``Step`` per operation; ``helpers`` receives the racers' coroutines.
    ``one_server``: the steps talk to the one server ``serve_in_background`` started (no
    ``serving()`` block each), and the last call's ``follow`` is ``follow_in_time``: a hang is
    the check's ``stuck``."""
    steps = []
    for i, op in enumerate(ops):
        log = evidence.calls[i]
        if any(kind == "grace" for kind, _ in log):
            return None  # the server's own start-up recovery, after its grace: not written
        if op.name == "race":
            raced = _racers(log)
            if raced is None:
                return None
            helpers += raced[0]
            steps.append(step_of(evidence, i, (), note=RACE_NOTE, racers=raced[1]))
            continue
        calls = [src for _, src in log]
        if op.name == "query":
            calls = []  # a read: the check does it
        elif not calls:
            return None  # the case made no call: nothing to repeat
        last = calls[-1].lstrip() if calls else ""
        if i == evidence.step and check.aspect == "outcome" and not last.startswith(
                ("await follow(", "(await client.get_handler(")):
            return None
        if one_server and i == evidence.step:  # the bounded wait: a hang is the outcome
            calls[-1] = calls[-1].replace("await follow(", "await follow_in_time(", 1)
        if op.name in ("start", "resume", "recover") and not (dbos or one_server):
            calls = _served(calls)
        steps.append(without_unreached(evidence, i, step_of(evidence, i, calls)))
    return steps


def _server_parts(workflow, ops, steps, helpers, one_server: bool) -> tuple:
    """The server's definitions (``serving``, ``follow``, what the steps call) and imports;
    ``one_server``: ``serve_in_background`` and its client, the bounded ``follow_in_time``."""
    racers = max((len(s.racers) for s in steps), default=0)
    answers = ", ".join(f"{k}{g}" for g in sorted(workflow.gates) for k in ("Ask", "Ans"))
    parts = ['DB = os.path.join(WORKDIR, "server.sqlite")  # the store of every server',
             f"EVENTS = [{answers}]  # what the server decodes besides the steps' events",
             *([f"ALL_UP = multiprocessing.Barrier({racers})"] if racers else []),
             pasted(serve_in_background if one_server else serving, follow),
             *([pasted(follow_in_time), source_as(outcome_in_time, "outcome"),
                "client = serve_in_background()  # one server process for every step below"]
               if one_server else [source_as(outcome_of_server, "outcome")]),
             *helpers]
    imports = ("import uvicorn", "from llama_agents.client import WorkflowClient",
               "from llama_agents.server import SqliteWorkflowStore, WorkflowServer")
    tampers = any(op.name == "tamper" for op in ops)  # the journal altered with sqlite3
    stdlib = ("contextlib", "os", "socket", *(["sqlite3"] if tampers else []),
              *(["multiprocessing"] if racers else []),
              *(["threading", "time"] if one_server else []))
    return parts, imports, stdlib


def _dbos_parts() -> tuple:
    parts = [pasted(launch), source_as(follow_dbos, "follow"), pasted(outcome)]
    return parts, ("from dbos import DBOS", "from llama_agents.dbos import DBOSRuntime"), ()


def hang_check(evidence) -> Check | None:
    """The check of a call that never returned (``stuck``), which ``check_for`` leaves out (a
    script that waits for it would hang too): the call's outcome, ``stuck`` once the bounded
    ``follow_in_time`` gives up, where the contract allows it to return."""
    observed = evidence.observed[evidence.step]
    outcomes = tuple(dict.fromkeys(a.outcome for a in evidence.allowed))
    if observed.outcome != "stuck" or not outcomes or "stuck" in outcomes:
        return None
    return Check(aspect="outcome", allowed=outcomes,
                 expected="the call " + " or ".join(OUTCOME_WORDS[o] for o in outcomes),
                 observed=f"the call never returns ({observed.error})" if observed.error
                 else "the call never returns")


def _hang_trace(backend: str, evidence, ops) -> bool:
    """A hang on one server: starts and answers only (no restart between them in the fuzzer's
    case), every SIGKILL crash point unreached (``unreached``: no process died), the last call
    stuck."""
    return (backend == "server" and evidence.observed[evidence.step].outcome == "stuck"
            and all(op.name in ("start", "resume", "query") for op in ops)
            and all(unreached(evidence, i) for i, op in enumerate(ops)
                    if getattr(op, "crash", None) and op.crash.kind == "sigkill"))


def served_reproduction(variant, workflow, evidence) -> str | None:
    backend = variant.options["backend"]
    dbos = backend == "dbos"
    ops = evidence.ops[: evidence.step + 1]
    one_server = _hang_trace(backend, evidence, ops)
    if any(op.name not in SUPPORTED[backend] for op in ops) or (not one_server and any(
            getattr(op, "crash", None) and op.crash.kind == "sigkill" for op in ops)):
        return None
    if dbos and sum(op.name == "start" for op in ops) != 1:
        return None  # one launch of DBOS per process (a second fails in llama-agents-dbos 0.7.0)
    check = (hang_check(evidence) if one_server else
             check_for(evidence, state_readable=False, outcome_readable=ops[-1].name != "race"))
    # A step failing at its crash point and a run the server failed both raise from ``follow``
    # (the failure is an event): the script cannot tell their outcomes apart.
    if check is None or (check.reads_outcome and getattr(ops[-1], "crash", None)):
        return None
    helpers = []
    steps = _steps(evidence, ops, check, dbos, helpers, one_server)
    if steps is None:
        return None
    parts, imports, stdlib = _dbos_parts() if dbos else _server_parts(workflow, ops, steps,
                                                                       helpers, one_server)
    head = header("llama-agents-dbos" if dbos else "llama-agents-server", variant.description,
                  evidence, pins(evidence, DBOS_PINS if dbos else SERVER_PINS))
    if variant.options.get("api") == "private":
        head += "\n" + PRIVATE_NOTE
    return script_source(head, imports, [definitions(workflow, variant.options["gate"], steps),
                                         *parts], steps, check, stdlib)


__all__ = ["served_reproduction"]
