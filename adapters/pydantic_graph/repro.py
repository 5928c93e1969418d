"""A pydantic-graph finding as a short script: the graph, the calls the case made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.toolkit.script.Script`` from the
definitions below (pasted into the script by name with ``inspect.getsource``: each is real code)
and the calls ``case.py`` recorded while the engine replayed the trace: the persistence it
opened, ``graph.initialize`` / ``graph.iter`` / ``graph.iter_from_persistence``, every
``await run.next()`` it made, in order.  Each operation is an ``async def`` run with
``asyncio.run``, as the case does.

Written for the ``single`` node shape (one ``Task(t, answer)`` class), the file and in-memory
persistences, start / resume / recover / fork, exception crash points and out-of-schema outputs.
Not (yet): the ``classes`` shape, tampering, races, SIGKILL and twin recovery; those fall back to
the older unchecked script (``repro_legacy.py``).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.persistence.file import FileStatePersistence

from adapters.protocol import installed_versions
from adapters.toolkit.repro_runtime import WORKDIR, crash_point, effect
from adapters.toolkit.script import (
    Script,
    Step,
    check_for,
    header,
    op_words,
    thread_label,
    without_docstring,
)

N, GATES, BAD_OUTPUT, PERSISTENCE = 2, {1}, None, None  # the script's glue sets these
graph = None
SUPPORTED_OPS = {"start", "resume", "recover", "fork", "query"}
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


def file_persistence(thread):
    p = FileStatePersistence(Path(WORKDIR) / f"{thread}.json")
    p.set_graph_types(graph)
    return p


MEMORY = {}


def memory_persistence(thread):
    if thread not in MEMORY:
        MEMORY[thread] = PERSISTENCE()
        MEMORY[thread].set_graph_types(graph)
    return MEMORY[thread]


def read_state(snapshots):
    """Tasks done, answers and the gate the latest snapshot waits at (none: nothing stored)."""
    if not snapshots or snapshots[-1] is None:
        return {"done": [], "answers": {}, "pending": None}
    last = snapshots[-1]
    task = getattr(getattr(last, "node", None), "t", None)
    return {"done": list(last.state.done), "pending": task if task in GATES else None,
            "answers": {str(t): v for t, v in last.state.answers.items()}}


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


def _without_outcome(calls: list) -> list:
    """The calls without the ``outcome(run.next_node)`` lines (an empty block gets ``pass``)."""
    out = []
    for line in calls:
        if line.strip().startswith("outcome("):
            if out and out[-1].rstrip().endswith(":"):
                out.append(line[: len(line) - len(line.lstrip())] + "pass")
            continue
        out.append(line)
    return out


def reproduction(variant, workflow, evidence) -> str | None:
    options = dict(variant.options)
    ops = evidence.ops[: evidence.step + 1]
    if options.get("shape") != "single" or any(op.name not in SUPPORTED_OPS for op in ops) or any(
            getattr(op, "crash", None) and op.crash.kind == "sigkill" for op in ops):
        return None
    check = check_for(evidence, state_readable=True)
    if check is None:
        return None
    if check.aspect == "state":
        check = replace(check, state_src=_state_src(options["backend"], ops[-1]))
    steps = []
    for i, op in enumerate(ops):
        calls = [src for kind, src in evidence.calls[i] if kind == "call"]
        if check.aspect != "outcome":  # only an outcome check needs the run's next node
            calls = _without_outcome(calls)
        if any("<unknown" in c for c in calls) or (op.name != "query" and not calls):
            return None
        crash = getattr(op, "crash", None)
        observed = evidence.observed[i] if i < len(evidence.observed) else None
        steps.append(Step(
            comment=op_words(op, observed),
            calls=tuple(calls) if op.name != "query" else (),
            crash=(crash.task, crash.phase, crash.kind) if crash else None,
            bad_output=getattr(op, "bad_output", None),
            guarded=observed is not None and observed.outcome in ("rejected", "crashed"),
            observed=i == evidence.step,
        ))
    instrumented = any(s.crash or s.bad_output for s in steps)
    body = task_body_crashing if instrumented else task_body
    backend = options["backend"]
    saver = file_persistence if backend == "file" else memory_persistence
    memory = ([] if backend == "file" else
              ["MEMORY = {}", f"PERSISTENCE = {'Full' if backend == 'full' else 'Simple'}StatePersistence"])
    glue = [f"N, GATES = {workflow.n}, {set(workflow.gates) or 'set()'}",
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if instrumented else []),
            *([f"task_body = {body.__name__}"] if body is not task_body else []),
            "graph = Graph(nodes=[Task], state_type=State, run_end_type=type(None))", *memory]
    versions = {**installed_versions(PINNED), **dict(evidence.versions)}
    pins = " ".join(f"{d}=={versions[d]}" for d in PINNED if d in versions)
    text = header("pydantic-graph", variant.description, evidence, pins)
    imports = ["from dataclasses import dataclass, field", "from pathlib import Path",
               "from pydantic_graph import BaseNode, End, GraphRunContext",
               "from pydantic_graph.graph import Graph"]
    imports.append("from pydantic_graph.persistence.file import FileStatePersistence"
                   if backend == "file" else
                   "from pydantic_graph.persistence.in_mem import "
                   f"{'Full' if backend == 'full' else 'Simple'}StatePersistence")
    return Script(
        header=text,
        imports=tuple(imports),
        workflow_src="\n".join([_source(State, body, Task, saver,
                                         *([outcome] if check.aspect == "outcome" else []),
                                         *([read_state] if check.aspect == "state" else [])),
                                 *glue]),
        steps=tuple(steps),
        check=check,
        stdlib=("os", "tempfile") if backend == "file" else (),
        asynchronous=True,
    ).source()
