# The body of the standalone reproduction script that ``repro.py`` writes: pydantic-graph 1.x and
# the standard library only.  ``repro.py`` prepends a CONFIG dict; this file is never imported by
# the adapter (it imports the framework at module level, as a script does).
#
# Usage: python repro.py            replays every operation, one child process per operation
#        (file backend: a SIGKILL crash point kills only that child); memory backends run in one
#        process.  It prints one line per effect and the persisted state after each operation.
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import typing
import uuid
from dataclasses import dataclass, field, fields, make_dataclass
from pathlib import Path

from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.graph import Graph
from pydantic_graph.persistence.file import FileStatePersistence
from pydantic_graph.persistence.in_mem import FullStatePersistence, SimpleStatePersistence

CONFIG = globals().get("CONFIG") or json.loads(os.environ["PG_REPRO_CONFIG"])
N, GATES, VALUES = CONFIG["n"], set(CONFIG["gates"]), CONFIG["values"]
BACKEND, SHAPE = CONFIG["backend"], CONFIG["shape"]
RESUME, RECOVER, CORRUPT = CONFIG["resume"], CONFIG["recover"], CONFIG.get("corrupt", "truncate")
OPS = CONFIG["ops"]
STORE = Path(os.environ.get("PG_REPRO_STORE", "pg_repro_store")).resolve()


@dataclass
class WfState:
    done: list[int] = field(default_factory=list)
    answers: dict[int, str] = field(default_factory=dict)


class Op:
    """What the running operation needs inside the nodes (passed as deps, never persisted)."""

    def __init__(self, doc, branch):
        self.crash, self.bad, self.branch = doc.get("crash"), doc.get("bad_output"), branch
        self.last_effect = None

    def point(self, task, phase):
        c = self.crash
        if c and (c["task"], c["phase"]) == (task, phase):
            self.crash = None
            print(f"crash {c['kind']} at task {task} {phase}", flush=True)
            if c["kind"] == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected crash at task {task}, {phase}")

    def begins(self, task):
        if self.last_effect is not None and self.last_effect != task:
            done, self.last_effect = self.last_effect, None
            self.point(done, "after_commit")
        self.point(task, "before_effect")

    def effect(self, task, value):
        print(f"effect branch={self.branch} task={task} value={value}", flush=True)
        self.last_effect = task
        self.point(task, "in_flight")

    def returned(self):
        if self.last_effect is not None:
            self.point(self.last_effect, "after_commit")


def body(ctx, task, answer):
    op = ctx.deps
    op.begins(task)
    value = answer if task in GATES else None
    op.effect(task, value)
    if value is not None:
        ctx.state.answers[task] = value
    ctx.state.done.append("<bad>" if op.bad == task else task)


if SHAPE == "single":

    @dataclass
    class Task(BaseNode[WfState, Op, None]):
        t: int
        answer: typing.Optional[str] = None

        async def run(self, ctx: GraphRunContext[WfState, Op]):
            body(ctx, self.t, self.answer)
            return End(None) if self.t >= N else Task(self.t + 1)

    Task.run.__annotations__["return"] = typing.Union[Task, End[None]]
    CLASSES = {t: Task for t in range(1, N + 1)}
else:
    CLASSES, following = {}, None
    for _t in range(N, 0, -1):

        async def _run(self, ctx: GraphRunContext[WfState, Op], _t=_t, _next=following):
            body(ctx, _t, getattr(self, "answer", None))
            return End(None) if _next is None else _next()

        _run.__annotations__["return"] = End[None] if following is None else following
        spec = [("answer", typing.Optional[str], None)] if _t in GATES else []
        CLASSES[_t] = following = make_dataclass(
            f"T{_t}", spec, bases=(BaseNode[WfState, Op, None],), namespace={"run": _run})

graph = Graph(nodes=list(dict.fromkeys(CLASSES[t] for t in range(1, N + 1))), name="repro",
              state_type=WfState, run_end_type=type(None))


def make_node(task, answer=None):
    kw = {"answer": answer} if task in GATES else {}
    return CLASSES[task](t=task, **kw) if SHAPE == "single" else CLASSES[task](**kw)


def task_of(node):
    if SHAPE == "single":
        return getattr(node, "t", None)
    name = type(node).__name__
    return int(name[1:]) if name[1:].isdigit() else None


def unanswered_gate(node):
    return task_of(node) in GATES and getattr(node, "answer", None) is None


MEMORY = {}


def persistence(thread, create=False):
    if BACKEND == "file":
        path = STORE / f"run-{thread}.json"
        if create and path.exists():
            raise FileExistsError(path)
        p = FileStatePersistence(path)
        p.set_graph_types(graph)
        return p
    if create:
        MEMORY[thread] = FullStatePersistence() if BACKEND == "full" else SimpleStatePersistence()
        MEMORY[thread].set_graph_types(graph)
    return MEMORY[thread]


async def drive(run):
    while True:
        node = run.next_node
        if isinstance(node, End):
            return "completed"
        if unanswered_gate(node):
            return "interrupted"
        await run.next()


async def last_snapshot(p):
    if BACKEND == "simple":
        return p.last_snapshot
    snaps = await p.load_all()
    return snaps[-1] if snaps else None


async def execute(doc, op):
    kind, thread = doc["op"], doc["thread"]
    if kind == "start":
        p = persistence(thread, create=True)
        first = make_node(1)
        if unanswered_gate(first):
            await graph.initialize(first, p, state=WfState())
            return "interrupted"
        async with graph.iter(first, state=WfState(), deps=op, persistence=p) as run:
            return await drive(run)
    if kind == "resume":
        p = persistence(thread)
        if RESUME == "ifp":
            async with graph.iter_from_persistence(p, deps=op) as run:
                if task_of(run.next_node) not in GATES:
                    raise RuntimeError(f"nothing pending: next node {run.next_node!r}")
                run.next_node.answer = doc["value"]
                return await drive(run)
        snap = await p.load_next()
        if snap is None or task_of(snap.node) not in GATES:
            raise RuntimeError("nothing pending: load_next() gave no gate")
        node = make_node(task_of(snap.node), doc["value"])
        async with graph.iter(node, state=snap.state, deps=op, persistence=p) as run:
            return await drive(run)
    if kind == "recover":
        p = persistence(thread)
        last = await last_snapshot(p)
        if last is None:
            raise RuntimeError("nothing persisted")
        if last.kind == "node" and last.status == "created" and unanswered_gate(last.node):
            return "interrupted"
        if RECOVER == "initialize":
            if last.kind == "end":
                return "completed"
            if last.status != "created":
                node = type(last.node)(**{f.name: getattr(last.node, f.name)
                                          for f in fields(last.node)})
                await graph.initialize(node, p, state=last.state)
                if unanswered_gate(node):
                    return "interrupted"
        async with graph.iter_from_persistence(p, deps=op) as run:
            return await drive(run)
    if kind == "fork":
        snaps = await persistence(thread).load_all()
        cp = next(s for s in reversed(snaps) if s.kind == "node" and task_of(s.node) == doc["gate"])
        target = persistence(doc["new_thread"], create=True)
        await graph.initialize(make_node(doc["gate"], doc["value"]), target, state=cp.state)
        async with graph.iter_from_persistence(target, deps=op) as run:
            return await drive(run)
    raise ValueError(kind)


def run_op(doc):
    branch = doc.get("new_thread") or doc["thread"]
    op = Op(doc, branch)
    try:
        outcome = asyncio.run(execute(doc, op))
        op.returned()
    except Exception as exc:  # noqa: BLE001 - every refusal is printed, as the fuzzer saw it
        outcome = f"raised {type(exc).__name__}: {str(exc)[:200]}"
    print(f"outcome {outcome}", flush=True)


def latest(thread):
    """The thread's latest snapshot as stored: (done, answers, next node or None)."""
    if BACKEND == "file":
        path = STORE / f"run-{thread}.json"
        if not path.exists():
            return None
        doc = json.loads(path.read_bytes())
        if not doc:
            return None
        last = doc[-1]
        return last["state"]["done"], last["state"]["answers"], last.get("node")
    p = MEMORY.get(thread)
    if p is None:
        snaps = []
    elif BACKEND == "full":
        snaps = p.history
    else:
        snaps = [p.last_snapshot] if p.last_snapshot else []
    if not snaps:
        return None
    last = snaps[-1]
    return last.state.done, last.state.answers, None if last.kind == "end" else last.node


def query(thread):
    try:
        print(f"state {thread}: {latest(thread)}", flush=True)
    except Exception as exc:  # noqa: BLE001
        print(f"state {thread}: unreadable ({type(exc).__name__}: {str(exc)[:120]})", flush=True)


def forge(done, answers):
    """A well-formed state this run did not produce (resumefuzz's refmodel.forge)."""
    done, answers = list(done), dict(answers)
    if answers:
        key = sorted(answers, key=int)[-1]
        answers[key] = next(v for v in VALUES + [answers[key] + "'"] if v != answers[key])
    elif len(done) < N:
        done.append(len(done) + 1)
    else:
        done.pop()
    return done, answers


def node_json(task):
    gate = {"answer": None} if task in GATES else {}
    if SHAPE == "single":
        return {"t": task, **gate, "node_id": "Task"}
    return {**gate, "node_id": f"T{task}"}


def tamper(thread, how):
    """Alter the latest snapshot directly (the JSON file, or the stored objects in memory)."""
    if BACKEND == "file":
        path = STORE / f"run-{thread}.json"
        if how == "corrupt":
            if CORRUPT == "stale_lock":
                (STORE / f"{path.name}.pydantic-graph-persistence-lock").write_bytes(b"stale\n")
            else:
                data = path.read_bytes()
                path.write_bytes(data[: max(1, len(data) // 2)])
            return
        doc = json.loads(path.read_bytes())
        last = doc[-1]
        if how == "invalid":
            last["state"]["done"].append("<invalid>")
        else:
            done, answers = forge(last["state"]["done"], last["state"]["answers"])
            state = {"done": done, "answers": {str(k): v for k, v in answers.items()}}
            k = len(done) + 1
            current = None
            if last["kind"] == "node":
                node = last["node"]
                current = node.get("t") if SHAPE == "single" else int(node["node_id"][1:])
            if k > N and last["kind"] != "end":
                last = {"state": state, "result": {"data": None}, "ts": "2000-01-01T00:00:00Z",
                        "kind": "end", "id": f"end:{uuid.uuid4().hex}"}
            elif k <= N and current != k:
                node = node_json(k)
                last = {"state": state, "node": node, "start_ts": None, "duration": None,
                        "status": "created", "kind": "node",
                        "id": f"{node['node_id']}:{uuid.uuid4().hex}"}
            last["state"] = state
            doc[-1] = last
        path.write_bytes(json.dumps(doc, indent=2).encode())
        return
    from pydantic_graph.persistence import EndSnapshot, NodeSnapshot

    p = MEMORY[thread]
    last = p.history[-1] if BACKEND == "full" else p.last_snapshot
    if how == "invalid":
        last.state.done.append("<invalid>")
        return
    done, answers = forge(last.state.done, {k: v for k, v in last.state.answers.items()})
    state = WfState(done, {int(k): v for k, v in answers.items()})
    k = len(done) + 1
    current = None if last.kind == "end" else task_of(last.node)
    if k > N and last.kind != "end":
        last = EndSnapshot(state=state, result=End(None))
    elif k <= N and current != k:
        last = NodeSnapshot(state=state, node=make_node(k))
    last.state = state
    if BACKEND == "full":
        p.history[-1] = last
    else:
        p.last_snapshot = last


def child(index):
    doc = OPS[index]
    if doc["op"] == "race":  # one racer: a resume with its own value
        doc = {"op": "resume", "thread": doc["thread"], "value": sys.argv[3]}
    elif doc["op"] == "twin_recover":
        doc = {"op": "recover", "thread": doc["thread"]}
    run_op(doc)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "op":
        return child(int(sys.argv[2]))
    if BACKEND == "file":
        shutil.rmtree(STORE, ignore_errors=True)
        STORE.mkdir(parents=True)
    env = dict(os.environ, PG_REPRO_CONFIG=json.dumps(CONFIG), PG_REPRO_STORE=str(STORE))
    for i, doc in enumerate(OPS):
        print(f"--- op {i + 1}: {json.dumps(doc)}", flush=True)
        kind, thread = doc["op"], doc["thread"]
        if kind == "query":
            query(thread)
            continue
        if kind == "tamper":
            tamper(thread, doc["how"])
        elif kind == "race":  # k processes resume the same pending gate from one file
            procs = [subprocess.Popen([sys.executable, __file__, "op", str(i), v], env=env)
                     for v in doc["values"]]
            for proc in procs:
                proc.wait()
        elif kind == "twin_recover":  # recover twice, from two byte-identical copies
            twin = STORE.with_name(STORE.name + "-twin")
            shutil.rmtree(twin, ignore_errors=True)
            shutil.copytree(STORE, twin)
            for store in (STORE, twin):
                print(f"recover on {store.name}", flush=True)
                subprocess.run([sys.executable, __file__, "op", str(i)],
                               env=dict(env, PG_REPRO_STORE=str(store)))
        elif BACKEND == "file":
            proc = subprocess.run([sys.executable, __file__, "op", str(i)], env=env)
            if proc.returncode < 0:
                print(f"outcome killed by signal {-proc.returncode}", flush=True)
        else:
            run_op(doc)
        query(doc.get("new_thread") or thread)


if __name__ == "__main__":
    main()
