"""``repro_script``: the older, unchecked script (CrewAI's API only, no resumefuzz) that replays a
trace; used only where ``repro.py`` cannot write a checked one.

The script embeds the very flow the fuzzer ran (``workflow.flow_source``), switches telemetry off
and keeps every file in a temporary directory before it imports CrewAI, then runs each executing
operation in a forked child (so a ``sigkill`` crash point kills only that child) and prints the
outcome, the effects (from an append-only file that survives the kill) and the stored state after
each step.
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.protocol import Op, Variant, Workflow

from . import sandbox, store
from .case import ON_EVENTS
from .workflow import flow_source

TEMPLATE = r'''#!/usr/bin/env python3
"""Replays a resumefuzz trace on CrewAI Flows, variant {variant_name!s}.

{description}
Requires: {requirements}. No LLM, no network: every task is plain Python that appends its
effect to effects.jsonl.  Run: python this_script.py
"""
import atexit, contextvars, glob, importlib.util, json, multiprocessing, os, shutil, signal, sqlite3, sys, tempfile

WORK = tempfile.mkdtemp(prefix="crewai-repro-")
# Removed at exit, by this process only (its forked children exit too).
atexit.register(lambda pid=os.getpid(): os.getpid() == pid and shutil.rmtree(WORK, True))
os.environ.update({switches})
for key in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "TMPDIR"):
    os.environ[key] = os.path.join(WORK, "sandbox", key.lower())
    os.makedirs(os.environ[key], exist_ok=True)
os.environ["CREWAI_STORAGE_DIR"] = "crewai-storage"
tempfile.tempdir = os.environ["TMPDIR"]
os.chdir(WORK)
os.makedirs("store", exist_ok=True)

OPTIONS = {options}
WORKFLOW = {workflow}
OPS = {ops}
FLOWS_DB = "store/flows.db"
ON_EVENTS = {on_events}
FLOW_SOURCE = {source}

with open("repro_flow.py", "w") as f:
    f.write(FLOW_SOURCE)
spec = importlib.util.spec_from_file_location("repro_flow", "repro_flow.py")
flowmod = importlib.util.module_from_spec(spec)
sys.modules["repro_flow"] = flowmod
spec.loader.exec_module(flowmod)

from crewai.flow.async_feedback import HumanFeedbackPending
from crewai.flow.persistence import SQLiteFlowPersistence
from crewai.flow.persistence.factory import set_flow_persistence_factory
from crewai.state.checkpoint_config import CheckpointConfig
from crewai.state.provider.json_provider import JsonProvider
from crewai.state.provider.sqlite_provider import SqliteProvider
from crewai.events.utils.console_formatter import ConsoleFormatter

ConsoleFormatter.print_panel = lambda *args, **kwargs: None  # quiet: flow panels ignore verbose

if OPTIONS["backend"] == "sqlite":  # SqliteProvider needs SQLite >= 3.45 (jsonb)
    import pysqlite3.dbapi2 as newer_sqlite
    import crewai.state.provider.sqlite_provider as _provider
    _provider.sqlite3 = newer_sqlite

Flow = flowmod.WorkflowFlow
P = SQLiteFlowPersistence(FLOWS_DB)
set_flow_persistence_factory(lambda: SQLiteFlowPersistence(FLOWS_DB))
SIDE = "store/sidetable.json"


class Crash(Exception):
    pass


class Hooks:
    def __init__(self, op, branch):
        self.crash, self.bad, self.branch, self.last = op.get("crash"), op.get("bad_output"), branch, None

    def _point(self, task, phase):
        c = self.crash
        if c and (c["task"], c["phase"]) == (task, phase):
            self.crash = None
            print(f"    crash point: task {{task}} {{phase}} ({{c['kind']}})", flush=True)
            if c["kind"] == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise Crash(f"injected at task {{task}} {{phase}}")

    def task_begins(self, t):
        if self.last is not None and self.last != t:
            done, self.last = self.last, None
            self._point(done, "after_commit")
        self._point(t, "before_effect")

    def effect(self, t, v):
        with open(os.path.join(WORK, "effects.jsonl"), "a") as f:
            f.write(json.dumps([self.branch, t, v]) + "\n")
        self.last = t
        self._point(t, "in_flight")

    def output(self, t, v):
        return "<bad>" if self.bad == t else t

    def returned(self):
        if self.last is not None:
            self._point(self.last, "after_commit")


def side():
    return json.load(open(SIDE)) if os.path.exists(SIDE) else {{}}


def set_side(thread, info):
    data = side()
    data[thread] = info
    with open(SIDE + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(SIDE + ".tmp", SIDE)


def location(thread):
    return {{"json": f"store/ck/{{thread}}", "sqlite": f"store/ck/{{thread}}.db"}}.get(OPTIONS["backend"])


def config(thread):
    provider = JsonProvider() if OPTIONS["backend"] == "json" else SqliteProvider()
    return CheckpointConfig(location=location(thread), provider=provider, on_events=list(ON_EVENTS))


def checkpoints(loc):
    """Oldest first, as `crewai checkpoint resume <location>` orders them (mtime / rowid)."""
    if loc.endswith(".db"):
        if not os.path.exists(loc):
            return []
        conn = newer_sqlite.connect(loc)
        try:
            return [f"{{loc}}#{{r[0]}}" for r in conn.execute("SELECT id FROM checkpoints ORDER BY rowid")]
        except Exception:
            return []
        finally:
            conn.close()
    files = glob.glob(os.path.join(loc, "**", "*.json"), recursive=True)
    return sorted(files, key=lambda p: (os.stat(p).st_mtime_ns, p))


def read_checkpoint(loc):
    if "#" in loc:
        db, cid = loc.rsplit("#", 1)
        conn = newer_sqlite.connect(db)
        try:
            return json.loads(conn.execute("SELECT json(data) FROM checkpoints WHERE id = ?", (cid,)).fetchone()[0])
        finally:
            conn.close()
    return json.load(open(loc))


def paused_gate(doc):
    if doc.get("trigger") != "method_execution_paused":
        return None
    events = [n["event"] for n in doc["event_record"]["nodes"].values()
              if n["event"]["type"] == "method_execution_paused"]
    name = max(events, key=lambda e: (e["timestamp"], e["emission_sequence"]))["method_name"]
    return int(name.split("_")[1])


def finish(thread, result):
    if isinstance(result, HumanFeedbackPending):
        gate = int(result.context.method_name.split("_")[1])
        if OPTIONS["backend"] != "persist":
            info = side()[thread]
            for loc in reversed(checkpoints(info["location"])):
                try:
                    if paused_gate(read_checkpoint(loc)) == gate:
                        info.setdefault("gates", {{}})[str(gate)] = loc
                        set_side(thread, info)
                        break
                except Exception:
                    continue
        return f"interrupted (gate {{gate}} pending)"
    return "completed"


def run(op, barrier=None):
    kind, thread = op["op"], op["thread"]
    if kind == "start":
        flow = Flow() if OPTIONS["backend"] == "persist" else Flow(checkpoint=config(thread), persistence=P)
        set_side(thread, {{"fid": flow.state.id, "location": location(thread)}})
        return finish(thread, flow.kickoff())
    info = side()[thread]
    if kind == "resume":
        kwargs = {{}} if OPTIONS["backend"] == "persist" else {{"checkpoint": config(thread)}}
        flow = Flow.from_pending(info["fid"], P, **kwargs)
        if barrier is not None:
            barrier.wait()  # every racer has read the pending row; none has written
        return finish(thread, flow.resume(op["value"]))
    if kind == "recover":
        if OPTIONS["backend"] == "persist":
            return finish(thread, Flow().kickoff(inputs={{"id": info["fid"]}}))
        found = checkpoints(info["location"])
        if not found:
            return finish(thread, Flow(checkpoint=config(thread)).kickoff(inputs={{"id": info["fid"]}}))
        print(f"    restoring {{found[-1]}}")
        if OPTIONS["recover"] == "from_checkpoint":
            flow = Flow.from_checkpoint(CheckpointConfig(restore_from=found[-1]))
            flow.checkpoint = config(thread)
            return finish(thread, flow.kickoff())
        restore = config(thread).model_copy(update={{"restore_from": found[-1]}})
        return finish(thread, Flow().kickoff(from_checkpoint=restore))
    if kind == "fork":
        new, gate = op["new_thread"], op["gate"]
        if OPTIONS["backend"] == "persist":
            import uuid
            new_fid = str(uuid.uuid4())
            set_side(new, {{"fid": new_fid, "location": None}})
            result = Flow().kickoff(inputs={{"id": new_fid}}, restore_from_state_id=info["fid"])
            kwargs = {{}}
        else:
            loc = info.get("gates", {{}}).get(str(gate))
            print(f"    forking {{loc}}")
            flow = Flow.fork(CheckpointConfig(restore_from=loc), branch=new)
            new_fid = flow.state.id
            set_side(new, {{"fid": new_fid, "location": location(new), "gates": {{str(gate): loc}}}})
            kwargs = {{"checkpoint": config(new)}}
            flow.checkpoint = kwargs["checkpoint"]
            result = flow.kickoff()
        if isinstance(result, HumanFeedbackPending) and result.context.method_name == f"gate_{{gate}}":
            result = Flow.from_pending(new_fid, P, **kwargs).resume(op["value"])
        return finish(new, result)
    if kind == "stale_resume":  # the handle kept from the pause at op["gate"], answered since
        if OPTIONS["backend"] == "persist":
            return run(dict(op, op="resume"))  # its flow id: the feedback handler's call
        gate = op["gate"]
        loc = info.get("gates", {{}}).get(str(gate))
        print(f"    restoring {{loc}} (the checkpoint of the pause at gate {{gate}})")
        if OPTIONS["recover"] == "from_checkpoint":
            flow = Flow.from_checkpoint(CheckpointConfig(restore_from=loc))
            flow.checkpoint = config(thread)
            result = flow.kickoff()
        else:
            restore = config(thread).model_copy(update={{"restore_from": loc}})
            result = Flow().kickoff(from_checkpoint=restore)
        if isinstance(result, HumanFeedbackPending) and result.context.method_name == f"gate_{{gate}}":
            finish(thread, result)
            result = Flow.from_pending(info["fid"], P, checkpoint=config(thread)).resume(op["value"])
        return finish(thread, result)
    raise ValueError(kind)


def child(op, branch, conn, barrier=None):
    flowmod.H = Hooks(op, branch)
    try:
        outcome = contextvars.copy_context().run(run, op, barrier)
        flowmod.H.returned()
    except BaseException as exc:
        chain, e = [], exc
        while e is not None:
            chain.append(e)
            e = e.__cause__ or e.__context__
        outcome = "crashed" if any(isinstance(e, Crash) for e in chain) else f"rejected ({{type(exc).__name__}}: {{exc}})"
    conn.send(outcome)


def in_child(op, branch, workdir=None, barrier=None):
    ctx = multiprocessing.get_context("fork")
    parent, conn = ctx.Pipe()
    here = os.getcwd()
    if workdir:
        os.chdir(workdir)
    proc = ctx.Process(target=child, args=(op, branch, conn, barrier))
    proc.start()
    conn.close()
    os.chdir(here)
    return proc, parent


def wait(proc, parent):
    proc.join()
    try:
        if parent.poll():
            return parent.recv()
    except EOFError:
        pass
    return f"crashed (child exit {{proc.exitcode}})"


def query(thread, workdir="."):
    path = lambda p: os.path.join(workdir, p)
    sidetable = json.load(open(path(SIDE))) if os.path.exists(path(SIDE)) else {{}}
    info = sidetable.get(thread)
    if info is None:
        return "nothing stored"
    conn = sqlite3.connect(path(FLOWS_DB))
    try:
        row = conn.execute("SELECT state_json FROM flow_states WHERE flow_uuid = ? ORDER BY id DESC LIMIT 1", (info["fid"],)).fetchone()
        pend = conn.execute("SELECT context_json FROM pending_feedback WHERE flow_uuid = ?", (info["fid"],)).fetchone()
    finally:
        conn.close()
    try:
        state = json.loads(row[0]) if row else None
        if OPTIONS["backend"] != "persist":
            here = os.getcwd()
            os.chdir(workdir)
            try:
                found = checkpoints(info["location"])
                doc = read_checkpoint(found[-1]) if found else None
            finally:
                os.chdir(here)
            state = next(e for e in doc["entities"] if e["entity_type"] == "flow")["checkpoint_state"] if doc else None
    except Exception as exc:
        return f"unreadable ({{type(exc).__name__}}: {{exc}})"
    pending = json.loads(pend[0])["method_name"] if pend else None
    return f"state={{state}} pending={{pending}}"


def tamper(thread, how):
    """Alter the thread's latest stored state directly (SQL / file edits), not through CrewAI."""
    info = side()[thread]

    def edit(state):
        if how == "corrupt":
            return None
        if how == "invalid":
            if state.get("answers"):
                state["answers"][sorted(state["answers"])[-1]] = "<not-a-value>"
            else:
                state["done"] = state.get("done", []) + [WORKFLOW["n"] + 1]
        else:  # forged: a different answer for the last gate, else the next task marked done
            if state.get("answers"):
                k = sorted(state["answers"])[-1]
                v = state["answers"][k]
                state["answers"][k] = next(x for x in WORKFLOW["values"] + [v + "'"] if x != v)
            else:
                state["done"] = state.get("done", []) + [len(state.get("done", [])) + 1]
        return state

    conn = sqlite3.connect(FLOWS_DB)
    with conn:
        for table in ("flow_states", "pending_feedback"):
            row = conn.execute(f"SELECT id, state_json FROM {{table}} WHERE flow_uuid = ? ORDER BY id DESC LIMIT 1", (info["fid"],)).fetchone()
            if row:
                new = edit(json.loads(row[1]))
                conn.execute(f"UPDATE {{table}} SET state_json = ? WHERE id = ?", (row[1][: len(row[1]) // 2] if new is None else json.dumps(new), row[0]))
    conn.close()
    if OPTIONS["backend"] == "persist":
        return
    found = checkpoints(info["location"])
    if not found:
        return
    loc = found[-1]
    doc = read_checkpoint(loc)
    flow = next(e for e in doc["entities"] if e["entity_type"] == "flow")
    new = edit(flow.get("checkpoint_state") or {{}})
    if "#" in loc:
        db, cid = loc.rsplit("#", 1)
        c = newer_sqlite.connect(db)
        with c:
            if new is None:
                c.execute("UPDATE checkpoints SET data = ? WHERE id = ?", (b"\x00not jsonb", cid))
            else:
                flow["checkpoint_state"] = new
                c.execute("UPDATE checkpoints SET data = jsonb(?) WHERE id = ?", (json.dumps(doc), cid))
        c.close()
    else:
        st = os.stat(loc)
        raw = open(loc, "rb").read()
        if new is None:
            data = raw[: len(raw) // 2]
        else:
            flow["checkpoint_state"] = new
            data = json.dumps(doc).encode()
        open(loc, "wb").write(data)
        os.utime(loc, ns=(st.st_atime_ns, st.st_mtime_ns))


def effects_since(mark):
    try:
        lines = open(os.path.join(WORK, "effects.jsonl")).read().splitlines()
    except FileNotFoundError:
        lines = []
    return [tuple(json.loads(line)) for line in lines[mark:]], len(lines)


def main():
    mark = 0
    print(f"workdir: {{WORK}}")
    for i, op in enumerate(OPS, 1):
        print(f"op {{i}}: {{json.dumps(op)}}")
        kind = op["op"]
        if kind in ("start", "resume", "recover", "fork", "stale_resume"):
            branch = op.get("new_thread") or op["thread"]
            print(f"  outcome: {{wait(*in_child(op, branch))}}")
        elif kind == "race":
            ctx = multiprocessing.get_context("fork")
            barrier = ctx.Barrier(len(op["values"])) if op.get("forced") else None
            kids = [in_child({{"op": "resume", "thread": op["thread"], "value": v}}, op["thread"], barrier=barrier)
                    for v in op["values"]]
            print(f"  outcomes: {{[wait(*kid) for kid in kids]}}")
        elif kind == "twin_recover":
            twin = WORK + "-twin"
            shutil.rmtree(twin, ignore_errors=True)
            shutil.copytree("store", os.path.join(twin, "store"), copy_function=shutil.copy2)
            rec = {{"op": "recover", "thread": op["thread"]}}
            print(f"  outcome (store): {{wait(*in_child(rec, op['thread']))}}")
            print(f"  outcome (byte-identical copy): {{wait(*in_child(rec, op['thread'] + '~twin', workdir=twin))}}")
            print(f"  copy's state: {{query(op['thread'], twin)}}")
        elif kind == "tamper":
            tamper(op["thread"], op["how"])
            print(f"  tampered ({{op['how']}})")
        fired, mark = effects_since(mark)
        print(f"  effects: {{fired}}")
        print(f"  state of {{op.get('new_thread') or op['thread']}}: {{query(op.get('new_thread') or op['thread'])}}")


if __name__ == "__main__":
    main()
'''


def script(variant: Variant, workflow: Workflow, ops: Sequence[Op]) -> str:
    persist = str(store.FLOWS_DB) if variant.options["backend"] == "persist" else None
    requirements = "crewai==1.15.30" + (" pysqlite3" if variant.options["backend"] == "sqlite" else "")
    return TEMPLATE.format(
        variant_name=variant.name,
        description=variant.description,
        requirements=requirements,
        switches=repr(dict(sandbox.SWITCHES)),
        options=repr(dict(variant.options)),
        workflow=repr(workflow.to_json()),
        ops=repr([op.to_json() for op in ops]),
        on_events=repr(list(ON_EVENTS)),
        source=repr(flow_source(workflow, persist_path=persist)),
    )
