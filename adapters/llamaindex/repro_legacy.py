"""``repro_script``: a standalone script (LlamaIndex API only) that replays a shrunk trace.

The script builds the same linear workflow with hand-written classes, runs the operations in one
process and prints, per operation, the effects that fired and the stored state.  Exception-kind
crash points raise inside the task as in the fuzzer; a ``sigkill`` crash point becomes the same
exception (the script has no second process), which the script says where it happens.
Core and server variants are covered; DBOS returns ``None`` (its recovery needs a second process).
"""

from __future__ import annotations

import json

from adapters.protocol import Variant, Workflow

HEADER = '''\
"""Replay of a resumefuzz trace on LlamaIndex Workflows ({variant}).

pip install llama-index-workflows==2.26.1 llama-agents-server==0.8.0
Workflow: tasks 1..{n} in order, gates {gates}; each task fires one effect (printed), then
appends itself to state.done (a gate also sets state.answers[t]).
Operations: {ops}
"""
import asyncio, atexit, json, os, shutil, sqlite3, tempfile
from pydantic import BaseModel
from workflows import Context, Workflow, step
from workflows.events import (Event, HumanResponseEvent, InputRequiredEvent, StartEvent,
                              StopEvent, WorkflowIdleEvent)

N, GATES, GATE_STYLE = {n}, {gates}, {gate!r}
EFFECTS = []          # (branch, task, value), one per firing
CURRENT = {{"branch": None, "crash": None, "bad": None}}


class InjectedCrash(Exception):
    pass


class RunState(BaseModel):
    done: list[int] = []
    answers: dict[int, str] = {{}}


def point(task, phase):
    if CURRENT["crash"] == (task, phase):
        CURRENT["crash"] = None
        raise InjectedCrash(f"crash at task {{task}}, {{phase}}")


async def body(ctx, t, value):
    EFFECTS.append((CURRENT["branch"], t, value))
    point(t, "in_flight")
    out = "<bad>" if CURRENT["bad"] == t else t
    async with ctx.store.edit_state() as s:
        s.done = [*s.done, out]
        if value is not None:
            s.answers = {{**s.answers, t: value}}
'''


def script(variant: Variant, workflow: Workflow, ops) -> str | None:
    backend = variant.options["backend"]
    if backend == "dbos":
        return None
    gate = variant.options["gate"]
    n, gates = workflow.n, sorted(workflow.gates)
    parts = [HEADER.format(variant=variant.name, n=n, gates=set(gates) or "{}", gate=gate,
                           ops=json.dumps([op.to_json() for op in ops]))]
    for t in range(1, n + 1):
        parts.append(f"class Done{t}(Event):\n    pass\n\n\n")
    for t in gates:
        parts.append(f"class Ask{t}(InputRequiredEvent):\n    pass\n\n\n"
                     f"class Ans{t}(HumanResponseEvent):\n    pass\n\n\n")
    parts.append("class Linear(Workflow):\n")
    for t in range(1, n + 1):
        prev = "StartEvent" if t == 1 else f"Done{t - 1}"
        ret = "StopEvent" if t == n else f"Done{t}"
        result = 'StopEvent(result="done")' if t == n else f"Done{t}()"
        begins = f"        point({t - 1}, 'after_commit')\n" if t > 1 else ""
        begins += f"        point({t}, 'before_effect')\n"
        if t in gates and gate == "event":
            parts.append(f"    @step\n    async def ask{t}(self, ctx: Context[RunState], ev: {prev})"
                         f" -> Ask{t}:\n{begins}        return Ask{t}()\n\n")
            parts.append(f"    @step\n    async def task{t}(self, ctx: Context[RunState], ev: Ans{t})"
                         f" -> {ret}:\n        point({t}, 'before_effect')\n"
                         f"        await body(ctx, {t}, ev.response)\n        return {result}\n\n")
        elif t in gates:
            parts.append(f"    @step\n    async def task{t}(self, ctx: Context[RunState], ev: {prev})"
                         f" -> {ret}:\n{begins}"
                         f"        ans = await ctx.wait_for_event(Ans{t}, waiter_event=Ask{t}(),"
                         f" waiter_id='gate{t}', timeout=None)\n"
                         f"        await body(ctx, {t}, ans.response)\n        return {result}\n\n")
        else:
            parts.append(f"    @step\n    async def task{t}(self, ctx: Context[RunState], ev: {prev})"
                         f" -> {ret}:\n{begins}        await body(ctx, {t}, None)\n"
                         f"        return {result}\n\n")
    parts.append("\n" + _format_driver(CORE_DRIVER if backend == "core" else SERVER_DRIVER, variant))
    parts.append("\n\nOPS = json.loads(" + repr(json.dumps([op.to_json() for op in ops])) + ")\n")
    parts.append(MAIN)
    return "".join(parts)


CORE_DRIVER = '''
# The caller stores ctx.to_dict() snapshots (the documented persistence), one per row.
SNAPSHOTS = []        # (thread, asked_gate_or_None, snapshot dict)
SCHEDULE = {schedule!r}


def head(thread):
    rows = [r for r in SNAPSHOTS if r[0] == thread]
    return rows[-1] if rows else None


async def drive(wf, thread, handler, asked=None):
    async for ev in handler.stream_events(expose_internal=True):
        if isinstance(ev, InputRequiredEvent):
            asked = int(type(ev).__name__[3:])
        if isinstance(ev, WorkflowIdleEvent):
            SNAPSHOTS.append((thread, asked, handler.ctx.to_dict()))
            await handler.cancel_run()
            return "interrupted"
        if SCHEDULE == "step":
            snap = handler.ctx.to_dict()
            if snap["is_running"]:
                SNAPSHOTS.append((thread, None, snap))
    await handler
    SNAPSHOTS.append((thread, None, handler.ctx.to_dict()))
    return "completed"


async def apply(wf, op):
    thread = op["thread"]
    if op["op"] == "start":
        return await drive(wf, thread, wf.run())
    if op["op"] == "fork":
        rows = [r for r in SNAPSHOTS if r[0] == thread and r[1] == op["gate"]]
        SNAPSHOTS.append((op["new_thread"], rows[-1][1], rows[-1][2]))
        thread = op["new_thread"]
    if op["op"] in ("resume", "fork"):
        _, asked, snap = head(thread)
        if asked is None:
            raise RuntimeError("nothing pending in the head snapshot")
        handler = wf.run(ctx=Context.from_dict(wf, json.loads(json.dumps(snap))))
        handler.ctx.send_event(globals()[f"Ans{{asked}}"](response=op["value"]))
        return await drive(wf, thread, handler)
    if op["op"] == "recover":
        row = head(thread)
        if row is None:
            return await drive(wf, thread, wf.run())
        if not row[2]["is_running"]:
            return "completed"
        return await drive(wf, thread, wf.run(ctx=Context.from_dict(wf, row[2])), row[1])
    raise NotImplementedError(op["op"])


def state(thread):
    row = head(thread)
    if row is None:
        return "nothing stored"
    value = json.loads(row[2]["state"]["state_data"])["value"]
    return {{"done": value["done"], "answers": value["answers"], "asked": row[1],
            "is_running": row[2]["is_running"]}}
'''

SERVER_DRIVER = '''
# llama-agents-server: WorkflowServer on a SqliteWorkflowStore; thread name = handler id.
import llama_agents.server.server as server_module
from llama_agents.server import SqliteWorkflowStore, WorkflowServer

DB = os.path.join(tempfile.mkdtemp(), "server.sqlite")
# Removed at exit, by this process only.
atexit.register(lambda pid=os.getpid(): os.getpid() == pid and shutil.rmtree(os.path.dirname(DB), True))
SERVER = {{"s": None}}


async def server(recovering=False):
    if SERVER["s"] is not None and not recovering:
        return SERVER["s"]
    if SERVER["s"] is not None:
        await SERVER["s"].stop()
    from datetime import timedelta
    server_module.RESUME_FRESH_HANDLER_GRACE = None if recovering else timedelta(days=36500)
    s = WorkflowServer(workflow_store=SqliteWorkflowStore(DB))
    extra = [globals()[f"{{k}}{{g}}"] for g in GATES for k in ("Ask", "Ans")]
    s.add_workflow("linear", Linear(timeout=None), additional_events=extra)
    await s.start()
    if s._runtime_core._persistence.resume_task is not None:
        await s._runtime_core._persistence.resume_task
    SERVER["s"] = s
    return s


async def follow(s, run_id):
    handler = s._service._workflow_run_handler("linear", run_id)
    async for ev in handler.stream_events(expose_internal=True):
        if isinstance(ev, WorkflowIdleEvent):
            return "interrupted"
    await handler
    return "completed"


def asked(run_id):
    rows = sqlite3.connect(DB).execute(
        "select event_json from events where run_id = ? order by sequence desc", (run_id,))
    for (text,) in rows:
        kind = json.loads(text).get("type", "")
        if kind.startswith("Ask"):
            return int(kind[3:])
    return max(GATES)


async def apply(wf, op):
    thread = op["thread"]
    if op["op"] == "start":
        s = await server()
        data = await s._service.start_workflow(s._service.get_workflow("linear"), thread)
        return await follow(s, data.run_id)
    if op["op"] == "resume":
        s = await server()
        data = await s._service.resolve_handler(thread)
        event = globals()[f"Ans{{op.get('gate') or asked(data.run_id)}}"](response=op["value"])
        # POST /events/{{handler_id}} = _service.send_event, which only schedules the delivery;
        # await the same adapter call so that an idle-released run is rebuilt before following.
        from workflows.runtime.types.ticks import TickAddEvent
        adapter = s._runtime_core._runtime.get_external_adapter(data.run_id)
        await adapter.send_event(TickAddEvent(event=event))
        return await follow(s, data.run_id)
    if op["op"] == "recover":
        s = await server(recovering=True)
        data = await s._service.load_persistent_handler(thread)
        if data is None or data.status in ("failed", "cancelled"):
            data = await s._service.start_workflow(s._service.get_workflow("linear"), thread)
        elif data.status == "completed":
            return "completed"
        elif data.idle_since is not None:
            return "interrupted"
        return await follow(s, data.run_id)
    raise NotImplementedError(op["op"])


def state(thread):
    con = sqlite3.connect(DB)
    row = con.execute("select run_id, status from handlers where handler_id = ?", (thread,))
    row = row.fetchone()
    if row is None:
        return "nothing stored"
    st = con.execute("select state_json from workflow_state where run_id = ?", (row[0],))
    st = st.fetchone()
    value = json.loads(st[0])["value"] if st else {{}}
    return {{"handler": row[1], "done": value.get("done"), "answers": value.get("answers")}}
'''

MAIN = '''

async def main():
    wf = Linear(timeout=None)
    for i, op in enumerate(OPS):
        crash = op.get("crash")
        CURRENT.update(branch=op.get("new_thread") or op["thread"], bad=op.get("bad_output"),
                       crash=(crash["task"], crash["phase"]) if crash else None)
        if crash and crash.get("kind") == "sigkill":
            print("  (the fuzzer killed the process here with SIGKILL; this script raises)")
        before = len(EFFECTS)
        if op["op"] in ("tamper", "race", "twin_recover", "query"):
            print(f"op {i}: {op} -- not replayed by this script (see the shrink report)")
            continue
        try:
            outcome = await apply(wf, op)
        except Exception as exc:  # noqa: BLE001
            outcome = f"raised {type(exc).__name__}: {exc}"
        print(f"op {i}: {op}\\n  outcome: {outcome}\\n  effects: {EFFECTS[before:]}\\n"
              f"  state: {state(op.get('new_thread') or op['thread'])}")


asyncio.run(main())
'''


def _format_driver(driver: str, variant: Variant) -> str:
    return driver.format(schedule=variant.options.get("snapshot", "idle"))
