"""A pydantic-graph finding as a short script: the graph, the calls the case made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.toolkit.script.Script`` from the
definitions below (pasted into the script by name with ``inspect.getsource``: each is real code)
and the calls ``case.py`` recorded while the engine replayed the trace: the persistence it
opened, ``graph.initialize`` / ``graph.iter`` / ``graph.iter_from_persistence``, then ``drive(run)``
(the docs' loop over ``run.next()``, up to a gate with no answer), in order.  Each operation is
an ``async def`` run with ``asyncio.run``, as the case does.

Written for both node shapes (one ``Task(t, answer)`` class, or ``T1`` .. ``Tn`` from
``task_class``), the file and in-memory persistences, start / resume / recover / fork, exception
crash points and out-of-schema outputs.
A race on the file persistence is written as its racers one after the other, each with the
calls of the variant's resume spelling and its own value (``racer_calls``; the lines the racers
logged in one replay show only how far each got there): the interleaving in which the second racer,
shown the same interrupt, arrives once the first has returned (how pydantic-graph's nodes,
which carry no interrupt identity, let one answer reach the next gate).  A tamper is the edit
``case.py`` made, written in the script: the file cut short, given a stale lock, or edited as
JSON on disk; in memory, the newest snapshot object replaced (``NodeSnapshot`` /
``EndSnapshot``) or edited.  Not (yet): a forged file, SIGKILL and twin recovery; those fall
back to the older unchecked script (``repro_legacy.py``).
"""

from __future__ import annotations

import inspect
import re
import typing
from dataclasses import dataclass, field, make_dataclass, replace
from pathlib import Path

from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.persistence.file import FileStatePersistence
from pydantic_graph.persistence.in_mem import FullStatePersistence, SimpleStatePersistence

from adapters.toolkit.repro_runtime import WORKDIR, crash_point, effect
from adapters.toolkit.script import (
    Script,
    check_for,
    header,
    pins,
    source_as,
    step_of,
    thread_label,
    without_docstring,
    without_lines,
)

N, GATES, BAD_OUTPUT = 2, {1}, None  # the script's glue sets these
graph = None
SUPPORTED_OPS = {"start", "resume", "recover", "fork", "query", "race", "tamper"}
PINNED = ("pydantic-graph", "pydantic")


# -- what the script contains --------------------------------------------------------------------


@dataclass
class State:
    done: list[int] = field(default_factory=list)
    answers: dict[int, str] = field(default_factory=dict)


def task_body(t, answer, state):
    """Task t: its one effect (with the answer, if it is a gate), then its result in the state."""
    value = answer if t in GATES else None
    effect(t, value)
    if value is not None:
        state.answers[t] = value
    state.done.append(t)


def task_body_bad_output(t, answer, state):
    """``task_body``; task ``BAD_OUTPUT`` writes a value outside the state schema (a string
    where it has a task number)."""
    value = answer if t in GATES else None
    effect(t, value)
    if value is not None:
        state.answers[t] = value
    state.done.append("<bad>" if t == BAD_OUTPUT else t)


def task_body_crashing(t, answer, state):
    """``task_body``, with the points where a run may be made to fail, and task ``BAD_OUTPUT``
    writing a value outside the state schema (a string where it has a task number)."""
    crash_point(t, "before its effect")
    value = answer if t in GATES else None
    effect(t, value)
    crash_point(t, "after its effect")
    if value is not None:
        state.answers[t] = value
    state.done.append("<bad>" if t == BAD_OUTPUT else t)


@dataclass
class Task(BaseNode[State, None, None]):
    """Task t of N; a gate waits until a caller sets its ``answer``."""

    t: int
    answer: str | None = None

    async def run(self, ctx: GraphRunContext[State]) -> "Task | End[None]":
        task_body(self.t, self.answer, ctx.state)
        return End(None) if self.t >= N else Task(self.t + 1)


def task_class(t, following):
    """The ``classes`` shape: task t's own node class ``T<t>`` (a gate's has an ``answer``
    field), whose run returns a ``following()`` node, or End after the last task."""
    async def run(self, ctx: GraphRunContext[State]) -> following or End[None]:
        task_body(t, getattr(self, "answer", None), ctx.state)
        return following() if following else End(None)
    fields = [("answer", typing.Optional[str], None)] if t in GATES else []
    return make_dataclass(f"T{t}", fields, bases=(BaseNode[State, None, None],),
                          namespace={"run": run, "t": t})


def file_persistence(thread):
    p = FileStatePersistence(Path(WORKDIR) / f"{thread}.json")
    p.set_graph_types(graph)
    return p


# ``graph.iter``, ``iter_from_persistence`` and ``initialize`` give the persistence the graph's
# types themselves: only a direct ``load_next()`` or ``load_all()`` needs them set first.
def file_persistence_untyped(thread):
    return FileStatePersistence(Path(WORKDIR) / f"{thread}.json")


MEMORY = {}


# One in-memory persistence per thread (``graph.iter``, ``iter_from_persistence`` and
# ``initialize`` give it the graph's types themselves); the script takes the one of its variant.
def memory_persistence_simple(thread):
    return MEMORY.setdefault(thread, SimpleStatePersistence())


def memory_persistence_full(thread):
    return MEMORY.setdefault(thread, FullStatePersistence())


def read_state(snapshots):
    """Tasks done, answers and the gate the latest snapshot waits at (none: nothing stored)."""
    if not snapshots or snapshots[-1] is None:
        return {"done": [], "answers": {}, "pending": None}
    last = snapshots[-1]
    task = getattr(getattr(last, "node", None), "t", None)
    return {"done": list(last.state.done), "pending": task if task in GATES else None,
            "answers": {str(t): v for t, v in last.state.answers.items()}}


async def drive(run):
    """Run nodes until the run ends or waits at a gate nobody answered (the docs' loop over
    ``run.next()``); the node it stopped at."""
    while not isinstance(run.next_node, End) and (run.next_node.t not in GATES or run.next_node.answer):
        await run.next()
    return run.next_node


def outcome(next_node):
    return "completed" if isinstance(next_node, End) else "interrupted"


# -- composing it ----------------------------------------------------------------------------------


def _source(*objects) -> str:
    return "\n".join(without_docstring(inspect.getsource(o)) for o in objects)


def _state_src(backend: str, op) -> str:
    """How the script reads the state of the thread ``op`` wrote, after it."""
    thread = thread_label(op.new_thread if op.name == "fork" else op.thread)
    if backend == "file":
        return f"read_state(asyncio.run(file_persistence({thread!r}).load_all()))"
    if backend == "full":
        return f"read_state(memory_persistence({thread!r}).history)"
    return f"read_state([memory_persistence({thread!r}).last_snapshot])"


def shape_glue(shape: str, n: int) -> list:
    """The graph: one ``Task`` class, or (``classes``) ``T1`` .. ``Tn``, built last to first."""
    if shape == "single":
        return ["graph = Graph(nodes=[Task], state_type=State, run_end_type=type(None))"]
    made = [f"T{t} = task_class({t}, {f'T{t + 1}' if t < n else 'None'})" for t in range(n, 0, -1)]
    nodes = ", ".join(f"T{t}" for t in range(1, n + 1))
    return [*made, f"graph = Graph(nodes=[{nodes}], state_type=State, run_end_type=type(None))"]


def racer_calls(options: dict, op) -> list:
    """A race as its racers one after the other: each one's resume, in the variant's spelling,
    with its value; the second finds whatever the first left next (an answered gate's
    successor), as a racer that arrives once the other has returned does."""
    p = f"p = file_persistence({thread_label(op.thread)!r})"
    if options["resume"] == "ifp":
        one = lambda v: [p, "async with graph.iter_from_persistence(p) as run:",  # noqa: E731
                         f"    run.next_node.answer = {v!r}", "    await drive(run)"]
    else:  # the docs' idiom: load_next(), a new node with the answer, graph.iter
        node = "Task(snapshot.node.t, " if options["shape"] == "single" else "type(snapshot.node)("
        one = lambda v: [p, "snapshot = await p.load_next()",  # noqa: E731
                         f"async with graph.iter({node}answer={v!r}), "
                         "state=snapshot.state, persistence=p) as run:", "    await drive(run)"]
    return [line for value in op.values for line in one(value)]


def _gateless(body: str) -> str:
    """A task body for a workflow without gates: no answer to read or record, the effect's
    value ``None``."""
    body = without_lines(body, "if value is not None:", extra=1)
    body = without_lines(body, "value = answer if t in GATES else None")
    assert "value" not in body.replace("effect(t, value)", ""), "a task body reads its value"
    return body.replace("effect(t, value)", "effect(t, None)")


def _inlined(task_src: str, body_src: str) -> str:
    """The ``single`` shape's ``Task`` with its task body written inside ``run`` (no
    ``task_body`` to define and call): the body's lines, its parameters read off the node and
    the context."""
    lines = body_src.splitlines()[1:]  # the body, under its ``def`` line
    names = {"t": "self.t", "answer": "self.answer", "state": "ctx.state"}
    lines = [re.sub(r"\b(t|answer|state)\b", lambda m: names[m.group(1)], "    " + line)
             for line in lines]
    call = "        task_body(self.t, self.answer, ctx.state)"
    assert call in task_src.splitlines(), "Task.run no longer calls task_body"
    return task_src.replace(call, "\n".join(lines))


def _live(calls: list) -> list:
    """The step's calls without ``last = p.last_snapshot`` when nothing after it reads ``last``:
    the case reads the snapshot to choose its path (a field of the persistence, no call the
    framework could refuse), and the path taken is written out."""
    read = "last = p.last_snapshot"
    return [c for i, c in enumerate(calls)
            if c.strip() != read or any(re.search(r"\blast\b", later) for later in calls[i + 1:])]


def reproduction(variant, workflow, evidence) -> str | None:
    options = dict(variant.options)
    ops = evidence.ops[: evidence.step + 1]
    if any(op.name not in SUPPORTED_OPS for op in ops) or any(
            getattr(op, "crash", None) and op.crash.kind == "sigkill" for op in ops):
        return None
    if options["backend"] != "file" and any(op.name == "race" for op in ops):
        return None  # racers in other processes share only a file
    check = check_for(evidence, state_readable=True, outcome_readable=ops[-1].name != "race")
    if check is None:
        return None
    if check.aspect == "state":
        check = replace(check, state_src=_state_src(options["backend"], ops[-1]))
    steps = []
    for i, op in enumerate(ops):
        calls = (racer_calls(options, op) if op.name == "race" else
                 [src for kind, src in evidence.calls[i] if kind == "call"])
        if any("<unknown" in c for c in calls) or (op.name != "query" and not calls):
            return None
        note = (" (here: one racer after the other, the second shown the same interrupt as "
                "the first)" if op.name == "race" else "")
        steps.append(step_of(evidence, i, _live(calls) if op.name != "query" else (), note=note))
    single = options["shape"] == "single"
    bad = any(s.bad_output is not None for s in steps)
    body = (task_body_crashing if any(s.crash for s in steps) else
            task_body_bad_output if bad else task_body)
    backend = options["backend"]
    saver = {"file": file_persistence, "full": memory_persistence_full,
             "simple": memory_persistence_simple}[backend]
    everything = " ".join(c for st in steps for c in st.calls) + " " + check.state_src
    if backend == "file" and ".load" not in everything:  # no read of p outside the graph's calls
        saver = file_persistence_untyped
    memory = [] if backend == "file" else ["MEMORY = {}"]
    glue = [f"N, GATES = {workflow.n}, {set(workflow.gates) or 'set()'}",
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if bad and steps[0].bad_output is None else []),
            *shape_glue(options["shape"], workflow.n), *memory]
    text = header("pydantic-graph", variant.description, evidence, pins(evidence, PINNED))
    imports = ["from dataclasses import dataclass, field" + ("" if single else ", make_dataclass"),
               *(["from pathlib import Path"] if backend == "file" else []),
               "from pydantic_graph import BaseNode, End, GraphRunContext",
               "from pydantic_graph.graph import Graph"]
    imports.append("from pydantic_graph.persistence.file import FileStatePersistence"
                   if backend == "file" else
                   "from pydantic_graph.persistence.in_mem import "
                   f"{'Full' if backend == 'full' else 'Simple'}StatePersistence")
    written = " ".join(c for step in steps for c in step.calls)
    snapshots = [k for k in ("EndSnapshot", "NodeSnapshot") if k + "(" in written]
    if snapshots:  # a tamper that replaces the newest snapshot object
        imports.append(f"from pydantic_graph.persistence import {', '.join(snapshots)}")
    task_body_src = source_as(body, "task_body")
    if not workflow.gates:
        task_body_src = _gateless(task_body_src)
    return Script(
        header=text,
        imports=tuple(imports),
        # The task body the steps need: inside ``Task.run`` (single shape), or under the one
        # name the node classes call; the persistence under the name the calls use.
        workflow_src="\n".join([_source(State),
                                 *([] if single else [task_body_src]),
                                 _inlined(_source(Task), task_body_src) if single
                                 else _source(task_class),
                                 source_as(saver, "file_persistence" if backend == "file"
                                           else "memory_persistence"),
                                 _source(*([drive] if any("drive(" in c for st in steps
                                                          for c in st.calls) else []),
                                         *([outcome] if check.aspect == "outcome" else []),
                                         *([read_state] if check.aspect == "state" else [])),
                                 *glue]),
        steps=tuple(steps),
        check=check,
        stdlib=(("os", "tempfile") if backend == "file" else ()) + (() if single else ("typing",))
        + (("json",) if "json." in written else ()),
        asynchronous=True,
    ).source()
