"""A LangGraph finding as a short script: the workflow, the calls the adapter made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.toolkit.script.Script`` from
the functions below (pasted into the script by name, with ``inspect.getsource``: each is real
code, importable and tested here) and the calls ``driver.py`` recorded while the engine replayed
the trace (``graph.invoke(Command(resume='a'), checkpoint('run-1', 2), durability='sync')``).
A checkpoint is named by its position in its thread's history (``checkpoint(thread, k)``): its
id differs on every run, its position does not.

Written for the memory and SQLite savers, both API styles and every resume and fork spelling,
with exception and SIGKILL crash points.  Not (yet): tampering with the store, races, twin
recovery, out-of-schema outputs, the pydantic state and PostgreSQL; for those the adapter falls
back to the older unchecked script (``repro_legacy.py``).
"""

from __future__ import annotations

import inspect
import operator
import os
import sqlite3
from typing import Annotated, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.func import entrypoint, task
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt

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

N, GATES = 2, {1}  # the script's own line sets these: tasks 1..N, the tasks that interrupt
PINNED = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite")
SUPPORTED_OPS = {"start", "resume", "recover", "fork", "query", "race", "tamper"}


# -- what the script contains --------------------------------------------------------------------


class State(TypedDict, total=False):
    done: Annotated[list, operator.add]
    answers: Annotated[dict, operator.or_]


def task_body(t):
    """Task t: it asks for a value (if it is a gate), fires its one effect, returns
    ``(what it writes into the state, the value)``."""
    value = interrupt({"task": t}) if t in GATES else None
    effect(t, value)
    return t, value


def task_body_bad_output(t):
    """``task_body``; task ``BAD_OUTPUT`` writes a value outside the state schema (a string
    where the schema has a task number)."""
    value = interrupt({"task": t}) if t in GATES else None
    effect(t, value)
    return ("<bad>" if t == BAD_OUTPUT else t), value


def task_body_crashing(t):
    """``task_body_bad_output``, with the points where a run may be made to fail."""
    crash_point(t, "before its effect")
    value = interrupt({"task": t}) if t in GATES else None
    effect(t, value)
    crash_point(t, "after its effect")
    return ("<bad>" if t == BAD_OUTPUT else t), value


def build_graph(checkpointer, body):
    """One node per task, t1 -> t2 -> ... -> tN; ``body(t)`` is task t's work."""
    def node(t):
        def run(state):
            output, value = body(t)
            return {"done": [output], **({"answers": {t: value}} if value is not None else {})}
        return run
    builder = StateGraph(State).add_sequence([(f"t{t}", node(t)) for t in range(1, N + 1)])
    return builder.add_edge(START, "t1").compile(checkpointer=checkpointer)


def build_entrypoint(checkpointer, body):
    """An @entrypoint calling one @task per task; ``body(t)`` is task t's work."""
    @task
    def step(t):
        output, value = body(t)
        return {"task": t, "done": output, "answer": value}

    @entrypoint(checkpointer=checkpointer)
    def graph(inputs):
        results = [step(t).result() for t in range(1, N + 1)]
        return {"done": [r["done"] for r in results],
                "answers": {r["task"]: r["answer"] for r in results if r["answer"] is not None}}
    return graph


def sqlite_saver():
    path = os.path.join(WORKDIR, "checkpoints.sqlite")
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False))


def corrupt(config):
    """Overwrite a stored checkpoint and its pending writes, in the SQLite file, with bytes
    that msgpack never decodes (0xc1 is a code it reserves)."""
    where = (config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"])
    db = sqlite3.connect(os.path.join(WORKDIR, "checkpoints.sqlite"), isolation_level=None)
    db.execute("UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
               (b"\xc1" * 16, *where))
    db.execute("UPDATE writes SET value = ? WHERE thread_id = ? AND checkpoint_id = ? "
               "AND type = 'msgpack'", (b"\xc1" * 16, *where))
    db.close()


def forge(config, done, answers):
    """Write, in the SQLite file, state the run never produced into a stored checkpoint: its
    channels now hold ``done`` and ``answers`` (encoded with the saver's own serializer)."""
    where, serde = (config["configurable"]["thread_id"],
                    config["configurable"]["checkpoint_id"]), graph.checkpointer.serde
    db = sqlite3.connect(os.path.join(WORKDIR, "checkpoints.sqlite"), isolation_level=None)
    row = db.execute("SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? "
                     "AND checkpoint_id = ?", where).fetchone()
    stored = serde.loads_typed(tuple(row))
    stored["channel_values"].update(done=done, answers=answers)
    db.execute("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = ? "
               "AND checkpoint_id = ?", (*serde.dumps_typed(stored), *where))
    db.close()


def checkpoint(thread_id, k):
    """The config of the k-th checkpoint LangGraph saved in this thread (0: the first)."""
    history = list(graph.get_state_history({"configurable": {"thread_id": thread_id}}))
    return history[::-1][k].config


def outcome(result):
    return "interrupted" if isinstance(result, dict) and "__interrupt__" in result else "completed"


def read_state(snapshot):
    """Tasks done, answers and the pending interrupt, as the snapshot has them."""
    if snapshot is None:
        return {"done": [], "answers": {}, "pending": None}
    values = snapshot.values if isinstance(snapshot.values, dict) else {}
    done, answers = list(values.get("done", [])), dict(values.get("answers", {}))
    for t in snapshot.tasks:  # @task results stored in an interrupted run
        if isinstance(t.result, dict) and "task" in t.result and t.result["done"] not in done:
            done.append(t.result["done"])
            if t.result["answer"] is not None:
                answers[t.result["task"]] = t.result["answer"]
    pending = [i.value["task"] for i in snapshot.interrupts]
    return {"done": sorted(done, key=repr), "answers": {str(t): v for t, v in answers.items()},
            "pending": pending[0] if pending else None}


# -- composing it ----------------------------------------------------------------------------------


def _source(*objects) -> str:
    return "\n".join(without_docstring(inspect.getsource(o)) for o in objects)


def reproduction(variant, workflow, evidence) -> str | None:
    options = dict(variant.options)
    if (options.get("saver") not in ("memory", "sqlite") or options.get("state", "typed") != "typed"
            or any(op.name not in SUPPORTED_OPS for op in evidence.ops[: evidence.step + 1])):
        return None
    ops = evidence.ops[: evidence.step + 1]
    if any(op.name == "race" and op.forced for op in ops):
        return None  # racers held until all have read: needs a saver that blocks (harness)
    check = check_for(evidence, state_readable=True,
                      outcome_readable=ops[-1].name != "race")
    if check is None:
        return None
    body = (task_body_crashing if any(getattr(op, "crash", None) for op in ops) else
            task_body_bad_output if any(getattr(op, "bad_output", None) for op in ops)
            else task_body)
    steps = []
    for i, op in enumerate(ops):
        calls = [src for kind, src in evidence.calls[i] if kind == "call"]
        reads = [src for kind, src in evidence.calls[i] if kind == "read"]
        if any("<unknown" in c for c in calls + reads):
            return None  # a checkpoint the script cannot name
        if op.name not in ("query", "race") and not calls:
            return None  # the adapter failed before any framework call: nothing to repeat
        crash = getattr(op, "crash", None)
        observed = evidence.observed[i] if i < len(evidence.observed) else None
        racers = ()
        if op.name == "race":
            if len(calls) != len(op.values):
                return None  # a racer that made no call, or more than one
            racers, calls = tuple((c,) for c in calls), []
        steps.append(Step(
            comment=op_words(op, observed),
            racers=racers,
            calls=tuple(calls) if op.name != "query" else (),  # a read: the check does it
            crash=(crash.task, crash.phase, crash.kind) if crash else None,
            bad_output=getattr(op, "bad_output", None),
            guarded=observed is not None and observed.outcome in ("rejected", "crashed"),
            observed=i == evidence.step,
            child_setup=_child_setup(options, body.__name__),
        ))
        if i == evidence.step and check.aspect == "state":
            read = reads[-1] if reads else "None"
            check = _with_state(check, f"read_state({read})")
    build = build_graph if options["api"] == "graph" else build_entrypoint
    glue = [f"N, GATES = {workflow.n}, {set(workflow.gates) or 'set()'}",
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if body is not task_body else []),
            f"graph = {build.__name__}({_saver(options)}, {body.__name__})"]
    parts = [State] if options["api"] == "graph" else []
    calls = " ".join(c for step in steps for c in step.calls) + " " + check.state_src
    readers = [f for f in (corrupt, forge, checkpoint, outcome, read_state)
               if f.__name__ + "(" in calls
               or (f is outcome and check.aspect == "outcome")]
    savers = [sqlite_saver] if options["saver"] == "sqlite" else []
    workflow_src = "\n".join([_source(*parts, body, build, *savers, *readers), *glue])
    versions = {**installed_versions(PINNED), **dict(evidence.versions)}
    return Script(
        header=header("LangGraph", variant.description, evidence,
                      " ".join(f"{d}=={versions[d]}" for d in PINNED if d in versions)),
        imports=_imports(options, "Command(" in calls),
        workflow_src=workflow_src,
        steps=tuple(steps),
        check=check,
        stdlib=("os", "sqlite3") if options["saver"] == "sqlite" else (),
    ).source()


def _with_state(check, state_src):
    from dataclasses import replace

    return replace(check, state_src=state_src)


def _saver(options) -> str:
    return "sqlite_saver()" if options["saver"] == "sqlite" else "InMemorySaver()"


def _child_setup(options, body: str) -> tuple:
    if options["saver"] == "memory":
        return ()  # the child works on its copy of the parent's memory: lost when it dies
    build = "build_graph" if options["api"] == "graph" else "build_entrypoint"
    return ("global graph", f"graph = {build}(sqlite_saver(), {body})  # the child's own connection")


def _imports(options, command: bool) -> tuple:
    out = ["import operator", "from typing import Annotated, TypedDict"] if options["api"] == "graph" else []
    if options["api"] == "graph":
        out += ["from langgraph.graph import START, StateGraph"]
    else:
        out += ["from langgraph.func import entrypoint, task"]
    if options["saver"] == "memory":
        out.append("from langgraph.checkpoint.memory import InMemorySaver")
    else:
        out.append("from langgraph.checkpoint.sqlite import SqliteSaver")
    out += [f"from langgraph.types import {'Command, ' if command else ''}interrupt"]
    return tuple(out)


__all__ = ["reproduction", "thread_label"]
