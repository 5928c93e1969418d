"""An AutoGen finding as a standalone script: the case's own team, the calls the runner made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script``
from definitions pasted by name with ``inspect.getsource``, each real code that the adapter runs
or tests:

- the workflow as the case runs it (``workflow.py``): ``TaskOutput``, ``TaskAgent`` and the
  variant's builder (``swarm_team``, ``loop_graph`` or ``split_graph``), called by the script's
  ``build_team()`` with the workflow's tasks and gates, the save policy's ``max_turns`` and the
  script's ``Hooks``: where the case's hooks reach the fuzzer, these fire the runtime's crash
  points and write the task's effect to the script's effect log;
- the caller's store (AutoGen has none), as the functions below: one JSON file per run
  (``save_json``, ``load_json``), or an append-only SQLite table whose labels let a fork or a
  stale resume find the state saved when a gate asked (``save_sqlite``, ``load_sqlite``,
  ``overwrite_sqlite``), each connecting anew so that a forked process may call them;
- where the check reads the stored state, ``statefmt.parse`` (what the case's ``query`` reads)
  behind ``read_state``; where a step forges the state, ``statefmt.rewrite`` (what the case's
  ``tamper`` wrote); where the check reads how a run ended, ``outcome``.

The steps are the lines ``driver.py`` and ``case.py`` recorded while the engine replayed the
trace (``team = build_team()``, ``await team.load_state(load_json('run-1'))``, ``result = await
team.run(task=...)``, ``save_json('run-1', await team.save_state())``).  A race becomes straight
lines: every racer loads the saved state, then each runs and saves in turn: the interleaving in
which the racers all read before any writes (AutoGen has no lock, so the fuzzer's racers reach
it; a forced race holds them there).  A twin recovery is written as the recovery of the
original store, the first of the two the fuzzer runs (the second, on a copy, runs after it and
cannot change it): enough for a finding on the first; one only in the copy has no check
(``check_for`` looks at the first).  Written for every team shape, both save policies and
stores, start / resume / recover / fork / race / query / stale resume, the ``forged`` tamper,
exception and SIGKILL crash points and out-of-schema outputs.  Not: the ``corrupt`` and
``invalid`` tampers, nor a forged part the case cannot write as a call; for those the report
gives the replay line instead.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import pathlib
import sqlite3
from dataclasses import replace

from adapters.reproduction.runtime import WORKDIR, crash_point, effect
from adapters.reproduction.script import (
    Script,
    check_for,
    header,
    looped,
    pins,
    race_interleaving,
    step_of,
    thread_label,
    unwritten,
    without_docstring,
)

from . import statefmt, workflow as flow
from .statefmt import parse
from .workflow import is_request

BAD_OUTPUT = None  # the script's steps set it: the task that writes a value outside the schema
PINNED = ("autogen-agentchat", "autogen-core")
SUPPORTED_OPS = {"start", "resume", "recover", "twin_recover", "fork", "query", "race", "tamper",
                 "stale_resume"}


# -- what only the script contains -----------------------------------------------------------------


class Hooks:
    """What ``TaskAgent`` calls besides writing its output, in the script: its crash points
    (the runtime's ``crash_point``), its one effect, and its output."""

    def task_begins(self, task):
        crash_point(task, "before its effect")

    def effect(self, task, value):
        effect(task, value)
        crash_point(task, "after its effect")

    def output(self, task, value):
        return "<bad>" if task == BAD_OUTPUT else task


def save_json(thread, state):
    """The "Managing State" tutorial's store: the saved team state as one JSON file per run."""
    pathlib.Path(WORKDIR, f"{thread}.json").write_text(json.dumps(state))


def load_json(thread):
    path = pathlib.Path(WORKDIR, f"{thread}.json")
    return json.loads(path.read_text()) if path.exists() else None


def save_sqlite(thread, state, label=""):
    """Every saved team state, as a row of an append-only SQLite table, labelled."""
    with sqlite3.connect(os.path.join(WORKDIR, "saves.sqlite")) as db:
        db.execute("CREATE TABLE IF NOT EXISTS saves (thread, label, state)")
        db.execute("INSERT INTO saves VALUES (?, ?, ?)", (thread, label, json.dumps(state)))


def load_sqlite(thread, label="%"):
    """The newest state saved for ``thread`` (with ``label``, if given)."""
    with sqlite3.connect(os.path.join(WORKDIR, "saves.sqlite")) as db:
        db.execute("CREATE TABLE IF NOT EXISTS saves (thread, label, state)")
        row = db.execute("SELECT state FROM saves WHERE thread = ? AND label LIKE ? "
                         "ORDER BY rowid DESC", (thread, label)).fetchone()
    return json.loads(row[0]) if row else None


def overwrite_sqlite(thread, state):
    """Replace the newest saved state of ``thread`` in place, with plain SQL."""
    with sqlite3.connect(os.path.join(WORKDIR, "saves.sqlite")) as db:
        db.execute("UPDATE saves SET state = ? WHERE rowid = (SELECT max(rowid) FROM saves "
                   "WHERE thread = ?)", (json.dumps(state), thread))


STORES = {"json": (save_json, load_json), "sqlite": (save_sqlite, load_sqlite, overwrite_sqlite)}


def read_state(state):
    """Tasks done, answers and the gate asking, as a saved team state has them (``None``: the
    run was never saved)."""
    if state is None:
        return {"done": [], "answers": {}, "pending": None}
    done, answers, pending = parse(state)
    return {"done": done, "answers": {str(t): v for t, v in answers.items()}, "pending": pending}


def outcome(result):
    """How run() ended: "interrupted" if its last message asks; "completed" if not, or if the
    caller did not run the team (``None``: the state it loaded asks for no answer)."""
    return "interrupted" if result and is_request(result.messages[-1]) else "completed"


# -- composing it ----------------------------------------------------------------------------------


BUILDERS = {"handoff": flow.swarm_team, "loop": flow.loop_graph, "loopany": flow.loop_graph,
            "split": flow.split_graph}


def _source(obj) -> str:
    return without_docstring(inspect.getsource(obj))


def _assignments(module, names) -> list:
    """The module-level assignments of ``names`` in ``module``, as written there."""
    text = inspect.getsource(module)
    return [ast.get_source_segment(text, node) for node in ast.parse(text).body
            if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) in names]


def _build_team(shape: str, workflow, step: bool) -> str:
    """The script's ``build_team()``: the variant's builder, called as the case calls it."""
    builder = BUILDERS[shape]
    args = [f"n={workflow.n}", f"gates={set(workflow.gates)!r}", "hooks=Hooks()",
            f"max_turns={1 if step else None}"]
    if builder is flow.loop_graph:
        args.append(f"shape={shape!r}")
    return f"def build_team():\n    return {builder.__name__}({', '.join(args)})"


def _imports(source: str) -> tuple:
    """The import statements of ``workflow.py`` (pydantic, AutoGen) that ``source`` uses."""
    used = {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}
    out = []
    for node in ast.parse(inspect.getsource(flow)).body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names = [a for a in node.names if a.name in used]
            if names:
                out.append(ast.unparse(ast.ImportFrom(node.module, names, 0)))
    return tuple(out)


def _definitions(shape: str, workflow, step: bool, *, store: str, calls: str, check) -> str:
    """The workflow definition and what the steps and the check call, in the script's order."""
    builder = BUILDERS[shape]
    parts = [*_assignments(flow, ("INTERRUPT", "ANSWER", "USER")), _source(flow.TaskOutput),
             *_assignments(flow, ("Output",)),
             *map(_source, (flow.is_request, flow.answer_in, flow.TaskAgent)),
             *([_source(flow.not_request)] if builder is flow.loop_graph else []),
             _source(builder), _source(Hooks), _build_team(shape, workflow, step)]
    if check.reads_state:  # read as the case's query reads it
        parts += [*_assignments(statefmt, ("OUTPUT_TYPE", "INTERRUPT_PREFIX")),
                  *map(_source, (statefmt.BadState, statefmt.manager, statefmt.is_output,
                                 statefmt.asked_gate, statefmt.parse, read_state))]
    uses = calls + ("\n" + check.state_src if check.reads_state else "")
    parts += [_source(f) for f in STORES[store] if f"{f.__name__}(" in uses]
    if "rewrite(" in calls:  # the forgery as the case's tamper wrote it
        parts.append(_source(statefmt.rewrite))
    if "outcome(" in calls:
        parts.append(_source(outcome))
    return "\n".join(parts)


def reproduction(variant, workflow, evidence) -> str | None:
    if getattr(workflow, "shape", None) is not None:
        return None  # a shaped workflow (docs/contract.md §7): no script; the report replays it
    options = dict(variant.options)
    ops = evidence.ops[: evidence.step + 1]
    if any(op.name not in SUPPORTED_OPS or (op.name == "tamper" and op.how != "forged") for op in ops):
        return None
    check = check_for(evidence, state_readable=True, outcome_readable=ops[-1].name != "race",
                      joint=True)
    if check is None:
        return None
    steps = []
    for i, op in enumerate(ops):
        log = evidence.calls[i]
        if op.name == "race":
            calls = race_interleaving(log, rename="team", read="load_state(")
            if calls is None:
                return None  # no racer reached AutoGen: nothing to repeat
        else:
            calls = looped([src for kind, src in log if kind == "call"])
        if unwritten(calls):
            return None  # a step the case could not write as a call (a forged part)
        if op.name not in ("query", "race") and not calls:
            return None  # the runner made no call (a no-op resume): nothing to repeat
        if op.name == "query":
            calls = []  # a read: the check does it
        if i == evidence.step and check.reads_outcome:
            if not any(c.lstrip().startswith("result = ") for c in calls):
                calls = [*calls, "result = None  # load_state() took it; no message in it asks: "
                                 "nothing to run"]
            calls = [*calls, "outcome(result)"]
        note = (" (here: every racer loads the saved state before any saves)"
                if op.name == "race" else "")
        steps.append(step_of(evidence, i, calls, note=note))
    if check.reads_state:
        thread = ops[-1].new_thread if ops[-1].name == "fork" else ops[-1].thread
        check = replace(check, state_src=f"read_state(load_{options['store']}("
                                         f"{thread_label(thread)!r}))")
    calls = "\n".join(c for s in steps for c in s.calls)
    definitions = _definitions(options["gate"], workflow, options["save"] == "step",
                               store=options["store"], calls=calls, check=check)
    if any(s.bad_output is not None for s in steps):
        definitions += "\nBAD_OUTPUT = None  # the task that writes a value outside the schema"
    used = {node.id for node in ast.walk(ast.parse(definitions)) if isinstance(node, ast.Name)}
    return Script(
        header=header("AutoGen AgentChat", variant.description, evidence,
                      pins(evidence, PINNED)),
        imports=_imports(definitions),
        workflow_src=definitions,
        steps=tuple(steps),
        check=check,
        stdlib=tuple(m for m in ("copy", "json", "os", "pathlib", "sqlite3", "uuid") if m in used),
        asynchronous=True,
    ).source()


__all__ = ["reproduction"]
