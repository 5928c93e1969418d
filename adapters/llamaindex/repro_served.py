"""A llama-agents-server or llama-agents-dbos finding as a short script: the workflow served as a
user serves it, the calls the case made, the check.

``served_reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script``
from the core's workflow definition (``repro.py``) and the definitions below, pasted by name with
``inspect.getsource`` (real code, importable here):

- server (``server-*``): ``serving()`` starts a ``WorkflowServer`` on a ``SqliteWorkflowStore``,
  served with uvicorn on 127.0.0.1 and an ephemeral port as ``WorkflowServer.serve`` builds it,
  and yields the framework's ``WorkflowClient``; ``follow`` reads ``GET /events/{handler_id}``.
  Each step is one server process's life: ``async with serving() as client:`` and the HTTP calls
  the case recorded (``case_server.py``), in order, with the handler ids and event sequence
  numbers it used.  The ``-private`` variants call the server's service object in process; their
  case records the route behind each call, so their scripts make the same requests over HTTP.
  A race: one child process per racer, each with its own server on the one SQLite file; all
  servers are up (a barrier) before any racer answers.  Without racers, ``serving()`` does not
  wait for the start-up (``serving_queued``): its listening socket holds the first request
  until uvicorn, its lifespan started, accepts it.  A run that ends in its step (it completes
  or fails at its crash point) and whose outcome the check does not read is awaited, not
  followed (``waited``): ``POST /workflows/{name}/run`` in place of run-nowait and ``follow``,
  or ``wait_for_handler`` after an answer; no ``follow`` is defined where none is left.  The
  trace's one crash point, as a task starts, in such a step: the task raises where ``CRASH``
  is set, which the step sets around its run, the failed run's HTTP 500 suppressed there
  (``_flaggable``).  The store's file is in the runtime's ``WORKDIR``, which the script
  removes as it exits (with a tamper: the constant ``DB``); the list ``EFFECTS`` is appended
  to by the tasks themselves and sliced in the check (``_log_inlined``).
- DBOS (``dbos-wait``): ``launch()`` configures DBOS on a SQLite system database, the
  ``DBOSRuntime`` and the workflow on it; ``follow`` reads the run's published events.

- A hang (the last call ``stuck``) on one server: starts and answers only, which the fuzzer's
  case sent to the one server it kept running, so the script does too (``serve_in_background``:
  a thread serving it for the rest of the script); the last ``follow`` is bounded
  (``follow_in_time``, 60 s), and its ``stuck`` is the defect.  A SIGKILL crash point that the
  run never reached (it stopped at a question first) is left out: no process died.

Not written (the adapter falls back to ``repro_legacy.py`` or to no script): a SIGKILL that
fires, twin recovery, a recovery that waits for the server's start-up grace, a tamper other
than the journal's ``corrupt``, a check of the stored state, DBOS traces with more than one
start.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dataclasses
import os
import re
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
    MOMENTS,
    OUTCOME_WORDS,
    Check,
    Script,
    check_for,
    effect_inlined,
    fired_inlined,
    header,
    pins,
    snippet,
    source_as,
    step_of,
    suppressed,
    without_lines,
)

from .repro import (
    _source,
    as_raised,
    crash_points,
    definitions,
    outcome,
    unreached,
    without_unreached,
    workflow_imports,
)

Linear, EVENTS = None, []  # the script defines its workflow class (and lists its answer events)
SERVER_PINS = ("llama-index-workflows", "llama-agents-server", "llama-agents-client")
DBOS_PINS = ("llama-index-workflows", "llama-agents-dbos", "dbos")
SUPPORTED = {"server": {"start", "resume", "recover", "query", "race", "tamper"},
             "dbos": {"start", "query"}}


# -- what the script contains --------------------------------------------------------------------

DB = os.path.join(WORKDIR, "server.sqlite")
# DB, as the script writes it: in the runtime's WORKDIR, which the script removes as it exits,
# so no folder of a server's outlives the script.
DB_SRC = 'os.path.join(WORKDIR, "server.sqlite")'


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
    yield WorkflowClient(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    http.should_exit = True
    await serve


def serving_queued() -> str:
    """The source of ``serving`` without its wait for the start-up: the socket listens before
    uvicorn starts, so the client's first requests queue in it until uvicorn accepts them, which
    it does once its lifespan (the runtime) has started (ASGI's lifespan: no connection before
    start-up has completed)."""
    src = without_lines(_source(serving), "async with asyncio.timeout(30):", extra=2)
    return src.replace("a free port\n", "a free port, listening now\n", 1).replace(
        "http.serve(sockets=[sock]))\n", "http.serve(sockets=[sock]))  # accepts once the runtime is up\n", 1)


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


async def follow_once(client, handler_id, after):
    """Read ``GET /events/{handler_id}`` after sequence ``after`` until the run waits for an
    answer or stops (the event's type); a failed run raises."""
    stream = client.get_workflow_events(handler_id, include_internal_events=True, after_sequence=after)
    async with asyncio.timeout(60), contextlib.aclosing(stream):
        async for event in stream:
            kinds = {event.type, *(event.types or ())}
            if "WorkflowFailedEvent" in kinds:
                raise RuntimeError(f"the run failed: {event.value}")
            if stop := kinds & {"WorkflowIdleEvent", "StopEvent"}:
                return stop.pop()


async def follow(client, handler_id, after):
    """``follow_once``, for a run the server may still be rebuilding from its journal when the
    stream opens (an answer to an idle-released run): a stream silent for 5 s is opened again
    from the last event seen, as an SSE client reconnects."""
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


ANSWER = re.compile(r"Ans\d+\(response=[^()]*\)")


def _racers(log) -> tuple | None:
    """``(answer, racers)``: the helper every racer's child process runs (its own server, the
    barrier, then the calls it recorded, its answer event a parameter) and each racer's call of
    it; ``None`` when no racer recorded a line or the racers' calls differ otherwise."""
    kinds = list(dict.fromkeys(kind for kind, _ in log if kind.startswith("racer ")))
    calls = [[src for k, src in log if k == kind] for kind in kinds]
    shapes = {tuple(ANSWER.sub("event", c) for c in lines) for lines in calls}
    if not calls or len(shapes) != 1:
        return None
    body = _served(["ALL_UP.wait(60)  # every racer's server is up: all answer at once",
                    *shapes.pop()])
    answer = "\n".join(["async def answer(event):", *(f"    {c}" for c in body)])
    events = [next(m[0] for c in lines if (m := ANSWER.search(c))) for lines in calls]
    return answer, tuple((f"asyncio.run(answer({e}))",) for e in events)


FOLLOWED = re.compile(r"^(\s*)await follow\(client, ('[^']*'), after=[^()]*\)$")
STARTED_RE = re.compile(r"^(\s*)await client\.run_workflow_nowait\(('[^']*'), handler_id=('[^']*')\)$")
RUN = "{indent}await client.run_workflow({workflow}, handler_id={handler})"
WAITED = "{indent}await client.wait_for_handler({handler}, timeout=60)"


def waited(calls) -> list:
    """The calls of a step whose run ends there (it completes, or fails at its crash point),
    its last ``follow`` read from no event stream: with the ``run-nowait`` that started the run
    just before it, ``POST /workflows/{name}/run`` (the same start, answered once the run has
    ended); otherwise the client's ``wait_for_handler``, ``GET /handlers/{id}`` until its status
    is terminal.  Either raises (HTTP 500) where the run failed, as ``follow`` did.  A
    ``follow`` before it (a run that stopped at a question) stays."""
    k = next((k for k in range(len(calls) - 1, -1, -1) if FOLLOWED.match(calls[k])), None)
    if k is None:
        return list(calls)
    indent, handler = FOLLOWED.match(calls[k]).groups()
    start = STARTED_RE.match(calls[k - 1]) if k else None
    if start and start[1] == indent and start[3] == handler:
        said = [c.replace(": run-nowait with its handler id", ": a run with its handler id")
                for c in calls[:k - 1]]
        return [*said, RUN.format(indent=indent, workflow=start[2], handler=handler), *calls[k + 1:]]
    return [*calls[:k], WAITED.format(indent=indent, handler=handler), *calls[k + 1:]]


def _steps(evidence, ops, check, dbos: bool, helpers: list, one_server: bool = False) -> list | None:
    """One ``Step`` per operation; ``helpers`` receives the definitions the steps call.
    ``one_server``: the steps talk to the one server ``serve_in_background`` started (no
    ``serving()`` block each), and the last call's
    ``follow`` is ``follow_in_time``: a hang is the check's ``stuck``."""
    steps = []
    for i, op in enumerate(ops):
        log = evidence.calls[i]
        if any(kind == "grace" for kind, _ in log):
            return None  # the server's own start-up recovery, after its grace: not written
        if op.name == "race":
            raced = _racers(log)
            if raced is None:
                return None
            helpers.append(raced[0])
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
        if one_server and i == evidence.step:
            calls[-1] = calls[-1].replace("await follow(", "outcome(await follow_in_time(", 1) + ")"
        seen = evidence.observed[i] if i < len(evidence.observed) else None
        ends = seen is not None and seen.outcome in ("completed", "crashed")
        read = i == evidence.step and check.reads_outcome  # follow's last event is the outcome
        if ends and not (dbos or one_server or read):
            calls = waited(calls)
        if op.name in ("start", "resume", "recover") and not (dbos or one_server):
            calls = _served(calls)
        steps.append(without_unreached(evidence, i, step_of(evidence, i, calls)))
    return steps


def _server_parts(evidence, ops, check, steps, gates, helpers, one_server=False) -> tuple:
    """The server's definitions (``serving``, ``follow``, what the steps call) and imports;
    ``one_server``: ``serve_in_background`` and its client, the bounded ``follow_in_time``."""
    racers = max((len(s.racers) for s in steps), default=0)
    events = ", ".join(f"{k}{g}" for g in sorted(gates) for k in ("Ask", "Ans"))
    # Only racers wait for their server's start-up (their barrier says all are up): elsewhere the
    # listening socket holds the first requests until the server accepts them.
    serve = (_source(serve_in_background) if one_server else _source(serving) if racers
             else serving_queued()).replace(
        ", additional_events=EVENTS", f", additional_events=[{events}]" if gates else "")
    # An answer may reach a run the server is still rebuilding from its journal: the follow
    # that subscribes again when its stream is silent.
    answered = any(op.name in ("resume", "race") for op in ops)
    tampers = any(op.name == "tamper" for op in ops)
    if not tampers:  # only the tamper's SQL names the file again: no constant for it otherwise
        serve = serve.replace("SqliteWorkflowStore(DB)", f"SqliteWorkflowStore({DB_SRC})")
    # No step follows a stream where each run it awaits ends (``waited``): no ``follow``.
    followed = one_server or any("await follow(" in c for c in [*helpers, *(
        c for s in steps for c in s.calls)])
    follows = [_source(follow) if answered else source_as(follow_once, "follow")] if followed else []
    outcomes = [source_as(outcome_of_server, "outcome")] if check.reads_outcome else []
    if one_server:
        follows.append(_source(follow_in_time))
        outcomes = [source_as(outcome_in_time, "outcome")]
    parts = [*([f"DB = {DB_SRC}  # one file, every server's and the tamper's"] if tampers else []),
             *([f"ALL_UP = multiprocessing.Barrier({racers})"] if racers else []),
             serve, *follows, *helpers, *outcomes,
             *(["client = serve_in_background()  # one server process for every step below"]
               if one_server else [])]
    imports = ("import uvicorn", "from llama_agents.client import WorkflowClient",
               "from llama_agents.server import SqliteWorkflowStore, WorkflowServer")
    stdlib = ("contextlib", "os", "socket", *(["multiprocessing"] if racers else []),
              *(["sqlite3"] if tampers else []), *(["threading", "time"] if one_server else []))
    return parts, imports, stdlib


def _dbos_parts(check, gates) -> tuple:
    follow = source_as(follow_dbos, "follow")
    if not gates:  # nothing asks: the run never waits
        follow = without_lines(follow, "WorkflowIdleEvent", extra=1)
    parts = [_source(launch), follow, *([_source(outcome)] if check.reads_outcome else [])]
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
    gates = set(workflow.gates)
    steps = [as_raised(s, workflow.n) for s in steps]
    defined = definitions(workflow, variant.options["gate"], crash_points(steps, workflow.n), answers=False)
    flag = _flaggable(steps, evidence)
    if flag is not None:  # the one crash point: a flag the step sets, no runtime crash_point
        k, flagged, point, raised = flag
        steps[k] = flagged
        defined = [d.replace(point, raised) for d in defined]
    steps, defined = _constant_bad_output(steps, defined)
    parts, imports, stdlib = (_dbos_parts(check, gates) if dbos else
                              _server_parts(evidence, ops, check, steps, gates, helpers, one_server))
    if flag is not None:  # what the flagged step suppresses: the client's error of the failed run
        imports = tuple("import httpx, uvicorn" if i == "import uvicorn" else i for i in imports)
    if any(s.bad_output is not None for s in steps[1:]):
        parts.append("BAD_OUTPUT = None  # a task that writes a value outside the schema")
    # The event classes the definitions use (not the event names ``follow`` compares).
    used = "\n".join(defined + (parts if dbos else helpers))
    head = header("llama-agents-dbos" if dbos else "llama-agents-server", variant.description,
                  evidence, pins(evidence, DBOS_PINS if dbos else SERVER_PINS))
    if variant.options.get("api") == "private":
        head += "\n" + PRIVATE_NOTE
    source = _outcome_inlined(Script(header=head, imports=(*imports, *workflow_imports(used)),
                                     workflow_src="\n".join(defined + parts), steps=tuple(steps),
                                     check=check, stdlib=stdlib, asynchronous=True, lean=True).source())
    return _log_inlined(source if flag is None else _flag_set(source, steps[flag[0]], flag[0] + 1, flag[2]))


LOCAL_LOG = "EFFECTS = []\n" + snippet("local:effect") + "\n"
LOG_SAID = "EFFECTS = []  # each task's one effect (an email sent, say), as a (task, value) row\n"


def _log_inlined(source: str) -> str:
    """A script whose effect log is the list ``EFFECTS``: each task appends its row itself
    (``effect_inlined``: no ``effect`` helper for one line), and the check slices the rows of its
    step where it reads them (``fired_inlined``: no ``fired`` for one use).  Unchanged where
    anything else still names either."""
    if LOCAL_LOG not in source or (out := effect_inlined(source)) == source:
        return source
    out = fired_inlined(out)
    if "fired" in {n.id for n in ast.walk(ast.parse(out)) if isinstance(n, ast.Name)}:
        return source
    return out.replace("EFFECTS = []\n", LOG_SAID, 1)


FLAG_RAISE = 'if CRASH: raise RuntimeError("task {task} fails {moment}")  # the crash point of step {step}'


def _flaggable(steps, evidence) -> tuple | None:
    """``(i, step, point, raise)`` where the trace's one crash point is step ``i``'s, an
    exception as a task starts ("before its effect", or the previous task's "after it
    completed" as ``as_raised`` sets it), and the step's last call awaits its run's end
    (``waited``).  The task then raises by itself where ``CRASH`` is set, which that step alone
    sets (``_flag_set``; other steps may run the task: no unconditional raise): the
    ``crash_point(...)`` line ``point`` becomes ``raise``, and ``step`` (no crash left, not
    guarded) awaits the run inside ``contextlib.suppress(httpx.HTTPStatusError)``, the client's
    error for the failed run's HTTP 500 (another error, the script's own mistake, stops it), so
    it needs no ``observe``, ``Crash`` nor runtime ``crash_point``.  None otherwise."""
    crashing = [i for i, s in enumerate(steps) if s.crash is not None]
    if len(crashing) != 1:
        return None
    i = crashing[0]
    task, phase, kind = steps[i].crash
    calls = steps[i].calls
    last = calls[-1].lstrip() if calls else ""
    if kind != "exception" or phase != "before_effect" or steps[i].racers or not last.startswith(
            ("await client.run_workflow(", "await client.wait_for_handler(")):
        return None
    crash = evidence.ops[i].crash  # as the trace has it: task 1 "after it completed", say
    indent = calls[-1][: len(calls[-1]) - len(last)]
    step = dataclasses.replace(steps[i], crash=None, guarded=False, calls=(
        *calls[:-1], *suppressed([last], "httpx.HTTPStatusError", "the run fails there: HTTP 500", indent)))
    return i, step, f'crash_point({task}, "before its effect")', FLAG_RAISE.format(
        task=crash.task, moment=MOMENTS[crash.phase], step=i + 1)


def _flag_set(source: str, step, number: int, point: str) -> str:
    """``CRASH = True`` before the run of step ``number`` (``asyncio.run(step_<n>())``) and, unless
    the check comes next, ``CRASH = False`` after it; ``point``: the ``crash_point(...)`` call
    the task's ``raise`` stands for (its words say which task raises)."""
    run = f"asyncio.run(step_{number}())"
    lines = source.split("\n")
    if lines.count(run) != 1:
        raise ValueError(f"step {number} is not run as {run!r}")
    at = lines.index(run)
    task = re.match(r"crash_point\((\d+),", point)[1]
    said = f"CRASH = True  # task {task} raises as it starts (the crash point), in this step only"
    lines = [*lines[:at], said, run, *([] if step.observed else ["CRASH = False"]), *lines[at + 1:]]
    if number > 1:  # the steps before it run the task too: the flag exists, unset, for them
        first = next(k for k, line in enumerate(lines) if line.startswith("# 1. "))
        lines.insert(first, "CRASH = False")
    return "\n".join(lines)


_BAD_TASK = re.compile(r'(\()?"<bad>" if ([\w.]+) == BAD_OUTPUT else \2(?(1)\),|)')


def _constant_bad_output(steps, defined) -> tuple:
    """Every step with the same task writing outside the schema (one start, say): that task's
    body writes ``"<bad>"`` itself, the others their plain value, and no step sets
    ``BAD_OUTPUT``."""
    bad = {s.bad_output for s in steps}
    if len(bad) != 1 or None in bad:
        return steps, defined
    task = repr(bad.pop())

    def written(m):
        value = '"<bad>"' if m[2] == task else m[2]
        return f"{value}," if m[1] else value
    return ([dataclasses.replace(s, bad_output=None) for s in steps],
            [_BAD_TASK.sub(written, d) for d in defined])


def _outcome_inlined(source: str) -> str:
    """``outcome`` (``outcome_of_server``) called once, as a step's ``return outcome(...)``:
    its one line written there, no definition."""
    defined = source_as(outcome_of_server, "outcome")
    calls = re.findall(r"^( *)return outcome\((.*)\)$", source, flags=re.MULTILINE)
    if defined not in source or len(calls) != 1 or source.count("outcome(") != 2:
        return source
    indent, call = calls[0]
    body = defined.splitlines()[-1].strip().removeprefix("return ")
    return source.replace(defined + "\n", "", 1).replace(
        f"{indent}return outcome({call})",
        f"{indent}stopped_at = {call}\n{indent}return {body}", 1)


__all__ = ["served_reproduction"]
