"""A pydantic-graph finding as a standalone script: the graph, the calls the case made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script``.
The workflow is the case's own: ``workflow.py``'s ``State``, ``Deps``, ``task_body``, the shape's
graph function (``single_graph``: one ``Task(t, answer)`` class; ``classes_graph``: ``T1`` ..
``Tn``), ``drive`` (the docs' loop over ``run.next()``, up to a gate with no answer) and
``outcome``, pasted by their source with ``inspect.getsource`` and called as the case's
``build`` calls them.  The run's ``deps`` carry what a task calls out to: here the script's
``Hooks`` (the runtime's effect log; ``CrashingHooks`` adds the points where a step makes a task
fail, ``BAD_OUTPUT`` a value outside the state schema).  The script's own definitions below open
the persistence (``file_persistence``, ``memory_persistence``) and read the stored state
(``read_state``).  The steps are the calls ``case.py`` recorded while the engine replayed the
trace, in order, each operation an ``async def`` run with ``asyncio.run``, as the case runs it.

Written for both node shapes, the file and in-memory persistences, start / resume / recover /
fork, exception crash points and out-of-schema outputs.  A race on the file persistence is
written as its racers in processes of their own, released together (the runtime's ``race``),
each with the calls of the variant's resume spelling and its own value (``file_racers``): racer
1 claims the gate, and every later racer's claim (``load_next``, in ``HeldPersistence``) waits
at a ``multiprocessing.Barrier`` until racer 1's call has returned.  That is the order in which
the fuzzer's racers showed their defects: the file lock orders the claims, and the racer that
lost it retried until the winner was done.  A later racer then finds the next gate and answers
it (pydantic-graph's nodes carry no interrupt identity), or, the run ended, nothing: the docs'
idiom then starts a fresh run on the same file.  Every race of this adapter is free
(``forced_race=False``); on a custom store it is written as its racers one after the other
(``racer_calls``).  A tamper is the edit ``case.py`` made, written in the script: the file cut
short, given a stale lock, or edited as JSON on disk; in memory, the newest snapshot object
replaced (``NodeSnapshot`` / ``EndSnapshot``) or edited.  Not written: a forged file, SIGKILL and
twin recovery, a shaped workflow (docs/contract.md §7); for those the report gives the replay
line instead.

A custom store (``--store``) is written with its factory's ``ScriptStore`` (``_store_calls``):
the script pastes the store's own functions and builds the store with them where the case called
the factory (``p = latest_persistence()``); a tamper is the store's function named after it
(``corrupt()``), if it has one.  The factory is called once per run, on that run's directory: a
script with several runs gives each run a ``WORKDIR`` of its own (``use_run_dir``).  Not written
on a custom store: a check of the stored state (the script would need the store's reader).
"""

from __future__ import annotations

import inspect
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

from pydantic_graph.persistence.file import FileStatePersistence
from pydantic_graph.persistence.in_mem import FullStatePersistence, SimpleStatePersistence

from adapters.reproduction.runtime import WORKDIR, crash_point, effect
from adapters.reproduction.script import (
    Script,
    check_for,
    header,
    pins,
    source_as,
    step_of,
    store_class,
    store_parts,
    thread_label,
    unwritten,
    without_docstring,
)

from . import workflow as shared
from .custom import describe

BAD_OUTPUT = None  # the script sets these: a task that writes a value outside the schema,
graph = deps = HOLD = None  # the graph, the run's deps, the racers' meeting point
MEMORY: dict = {}
RUNS = WORKDIR  # a custom store's runs, one directory each
SUPPORTED_OPS = {"start", "resume", "recover", "fork", "query", "race", "tamper"}
PINNED = ("pydantic-graph", "pydantic")


# -- what the script contains besides workflow.py's definitions ---------------------------------


class Hooks:
    """What the tasks call out to (``task_body``): their effect, and what they write."""

    def task_begins(self, task):
        pass

    def effect(self, task, value):
        effect(task, value)  # the task's one external effect, in the script's log

    def output(self, task, value):
        return "<bad>" if task == BAD_OUTPUT else task


class CrashingHooks(Hooks):
    """``Hooks`` with the points where a step makes a task fail (``CRASH``)."""

    def task_begins(self, task):
        crash_point(task, "before its effect")

    def effect(self, task, value):
        super().effect(task, value)
        crash_point(task, "after its effect")


def file_persistence(thread, cls=FileStatePersistence):
    p = cls(Path(WORKDIR) / f"{thread}.json")
    p.set_graph_types(graph)
    return p


class HeldPersistence(FileStatePersistence):
    """A later racer's persistence: its ``load_next()`` (the claim of the run's next node, which
    ``iter_from_persistence`` makes too) first waits at ``HOLD`` until racer 1's call has
    returned."""

    async def load_next(self):
        HOLD.wait(timeout=60)  # blocks this racer's event loop, which runs nothing else
        return await super().load_next()


# One in-memory persistence per run; the script takes the one of its variant.
def memory_persistence_simple(thread):
    return MEMORY.setdefault(thread, SimpleStatePersistence())


def memory_persistence_full(thread):
    return MEMORY.setdefault(thread, FullStatePersistence())


def use_run_dir(run):
    """From here on ``WORKDIR`` is the run's own directory (a custom store's factory is called
    once per run, on that run's directory)."""
    global WORKDIR
    WORKDIR = os.path.join(RUNS, run)
    os.makedirs(WORKDIR, exist_ok=True)


def read_state(snapshots):
    """Tasks done, answers and the gate the latest snapshot waits at (none: nothing stored)."""
    if not snapshots or snapshots[-1] is None:
        return {"done": [], "answers": {}, "pending": None}
    last = snapshots[-1]
    task = getattr(getattr(last, "node", None), "t", None)
    return {"done": list(last.state.done), "pending": task if task in deps.gates else None,
            "answers": {str(t): v for t, v in last.state.answers.items()}}


# -- the steps -------------------------------------------------------------------------------------


def _resume_calls(options: dict, value, opened: str, fresh: list | None = None) -> list:
    """One resume in the variant's spelling, its persistence opened with ``opened``; with
    ``fresh`` (the docs' idiom), its branch for a ``load_next()`` that finds nothing to run: a
    fresh run on the same persistence (the docs' first invocation), as ``case.py`` takes it."""
    if options["resume"] == "ifp":
        return [opened, "async with graph.iter_from_persistence(p, deps=deps) as run:",
                f"    run.next_node.answer = {value!r}", "    await drive(run)"]
    node = "Task(snapshot.node.t, " if options["shape"] == "single" else "type(snapshot.node)("
    answered = [f"async with graph.iter({node}answer={value!r}), state=snapshot.state, "
                "deps=deps, persistence=p) as run:", "    await drive(run)"]
    if not fresh:
        return [opened, "snapshot = await p.load_next()", *answered]
    return [opened, "snapshot = await p.load_next()",
            "if snapshot is None:  # the docs' first invocation: a fresh run, on the same file",
            *(f"    {c}" for c in fresh), "else:", *(f"    {c}" for c in answered)]


def fresh_run_calls(options: dict, workflow) -> list:
    """``case.py``'s fresh run (``_fresh_run``) on the persistence ``p``: the gate at task 1
    persisted by ``graph.initialize``, or the run from task 1 (``initialize`` then
    ``iter_from_persistence`` where the variant starts so)."""
    first = "Task(1)" if options["shape"] == "single" else "T1()"
    initialize = f"await graph.initialize({first}, p, state=State())"
    if 1 in workflow.gates:
        return [initialize]
    if options.get("start") == "initialize":
        return [initialize, "async with graph.iter_from_persistence(p, deps=deps) as run:",
                "    await drive(run)"]
    return [f"async with graph.iter({first}, state=State(), deps=deps, persistence=p) as run:",
            "    await drive(run)"]


def racer_calls(options: dict, op) -> list:
    """A race as its racers one after the other: each one's resume, in the variant's spelling,
    with its value; the second finds whatever the first left next (an answered gate's
    successor), as a racer that arrives once the other has returned does."""
    opened = "custom_persistence" if options["backend"] == "custom" else "file_persistence"
    return [c for value in op.values
            for c in _resume_calls(options, value, f"p = {opened}({thread_label(op.thread)!r})")]


def file_racers(options: dict, op, workflow) -> tuple:
    """A race on the file persistence as racers in processes of their own (the script's
    ``race``, which releases them together), racer 1 first to claim the gate: every later
    racer's claim (``HeldPersistence.load_next``) waits at ``HOLD`` until racer 1's call has
    returned.  Nothing holds the fuzzer's racers of this adapter between their read and their
    writes (``forced_race=False``), so they race freely; the file lock orders their claims
    (``load_next`` marks the first ``'created'`` snapshot ``'pending'`` under it), and the
    divergent runs are those in which the loser's claim (its lock retried every 10 ms) came
    once the winner's call had written where it stopped.  A later racer then finds the next
    gate racer 1 stopped at and answers it; or, racer 1 having run to the end, nothing: the
    docs' idiom then takes its branch for a run with nothing to run."""
    thread = thread_label(op.thread)
    fresh = fresh_run_calls(options, workflow) if options["resume"] == "docs" else None
    racers = []
    for r, value in enumerate(op.values, 1):
        if r == 1:
            calls = _resume_calls(options, value, f"p = file_persistence({thread!r})")
        else:
            held = (f"p = file_persistence({thread!r}, HeldPersistence)  # its load_next() "
                    "waits for racer 1")
            calls = _resume_calls(options, value, held, fresh)
        lines = ["async def resume():", *(f"    {c}" for c in calls), "asyncio.run(resume())"]
        if r == 1:
            lines.append("HOLD.wait(timeout=60)  # racer 1's call has returned: the others claim")
        racers.append(tuple(lines))
    return tuple(racers)


# How case.py records a custom store's persistence and its tamper (``STORE_TAMPER``).
_OPENED = re.compile(r"^(?P<indent>\s*)(?P<var>\w+) = custom_persistence\((?P<run>'[^']*')\)$")
_TAMPERED = re.compile(r"<unknown: the store factory's own tamper '(?P<how>\w+)' of "
                       r"(?P<run>'[^']*')>")


def _store_calls(calls: list, recipe, *, per_run: bool) -> list | None:
    """A custom store's step in the store's own terms: the factory's persistence built by the
    ``ScriptStore``'s ``build`` and given the graph's types (as the case's ``CustomStore``
    gives them), its tamper the recipe's function of that name; in a script with several runs,
    each run's directory chosen first.  ``None``: a tamper the recipe does not write."""
    build = recipe.builder
    opened = f"{'await ' if inspect.iscoroutinefunction(build) else ''}{recipe.build}()"
    out = []
    for c in calls:
        opening, tampered = _OPENED.match(c), _TAMPERED.fullmatch(c)
        if tampered:
            if tampered["how"] not in {f.__name__ for f in recipe.functions}:
                return None
            out += [*([f"use_run_dir({tampered['run']})"] if per_run else []),
                    f"{tampered['how']}()"]
        elif opening:
            i, var = opening["indent"], opening["var"]
            out += [*([f"{i}use_run_dir({opening['run']})"] if per_run else []),
                    f"{i}{var} = {opened}", f"{i}{var}.set_graph_types(graph)"]
        else:
            out.append(c)
    return out


def _steps(options: dict, workflow, evidence, recipe, per_run: bool) -> list | None:
    """One ``Step`` per operation up to the diverging one: the calls the case recorded (a
    custom store's in its own terms), a race's racers; ``None`` where a step cannot be written."""
    steps = []
    for i, op in enumerate(evidence.ops[: evidence.step + 1]):
        if op.name == "race" and options["backend"] == "file":
            steps.append(step_of(evidence, i, (), racers=file_racers(options, op, workflow),
                                 note=" (here: racer 1 claims the gate first, the others once "
                                      "it has returned)"))
            continue
        if op.name == "query":
            steps.append(step_of(evidence, i, ()))
            continue
        race = op.name == "race"
        calls = (racer_calls(options, op) if race else
                 [src for kind, src in evidence.calls[i] if kind == "call"])
        if calls and options["backend"] == "custom":
            calls = _store_calls(calls, recipe, per_run=per_run)
        if not calls or unwritten(calls):
            return None
        note = (" (here: one racer after the other, the second shown the same interrupt as "
                "the first)" if race else "")
        steps.append(step_of(evidence, i, calls, note=note))
    return steps


def _state_src(backend: str, op) -> str:
    """How the script reads the state of the run ``op`` wrote, after it."""
    thread = thread_label(op.new_thread if op.name == "fork" else op.thread)
    if backend == "file":
        return f"read_state(asyncio.run(file_persistence({thread!r}).load_all()))"
    if backend == "full":
        return f"read_state(memory_persistence({thread!r}).history)"
    return f"read_state([memory_persistence({thread!r}).last_snapshot])"


# -- the script's parts --------------------------------------------------------------------------


def _source(*objects) -> str:
    return "\n".join(without_docstring(inspect.getsource(o)) for o in objects)


def _workflow_src(shape: str, crashing: bool, check) -> str:
    """The hooks the script's deps carry, and workflow.py's definitions of the shape (with
    ``outcome`` where the check reads the outcome of a call)."""
    graph_of = shared.single_graph if shape == "single" else shared.classes_graph
    hooks = (Hooks, CrashingHooks) if crashing else (Hooks,)
    return _source(*hooks, shared.State, shared.Deps, shared.task_body, graph_of, shared.drive,
                   *([shared.outcome] if check.reads_outcome else []))


def _persistence_parts(options: dict, recipe, per_run: bool) -> tuple:
    """The part of the script that opens the persistence: its source, the standard-library
    modules and the imports it needs, and the variant in words."""
    backend = options["backend"]
    if backend == "custom":
        stdlib, imports, src = store_parts(recipe)
        if per_run:
            src += "\n" + _source(use_run_dir)
        who = f"{store_class(recipe)} of {options['store_distribution']} {options['store_version']}"
        return src, stdlib + (("os",) if per_run else ()), list(imports), describe(options, who)
    if backend == "file":
        src = _source(file_persistence)
        imports = ["from pydantic_graph.persistence.file import FileStatePersistence"]
    else:
        saver = memory_persistence_full if backend == "full" else memory_persistence_simple
        src = source_as(saver, "memory_persistence")
        kind = "Full" if backend == "full" else "Simple"
        imports = [f"from pydantic_graph.persistence.in_mem import {kind}StatePersistence"]
    return src, (), imports, None


def _glue(options: dict, workflow, steps: list, crashing: bool, per_run: bool) -> list:
    """The statements that build the graph and the run's deps, as ``workflow.build`` and the
    case do, and the script's own globals its definitions read."""
    n, gates = workflow.n, sorted(workflow.gates)
    if options["shape"] == "single":
        graph_line = f"graph, Task = single_graph({n})"
    else:
        names = ", ".join(f"T{t}" for t in range(1, n + 1)) + ("," if n == 1 else "")
        graph_line = f"graph, ({names}) = classes_graph({n}, GATES)"
    held = max((len(s.racers) for s in steps), default=0)
    return [f"GATES = frozenset({set(gates) if gates else ''})", graph_line,
            f"deps = Deps({'CrashingHooks' if crashing else 'Hooks'}(), GATES)",
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if steps[0].bad_output is None and any(s.bad_output is not None for s in steps)
              else []),
            *(["MEMORY = {}"] if options["backend"] in ("full", "simple") else []),
            *([f"HOLD = multiprocessing.Barrier({held})  # the racers' meeting point"]
              if held else []),
            *(["RUNS = WORKDIR"] if per_run else [])]


def _imports(options: dict, imports: list, written: str) -> list:
    """The script's ``from`` imports: the standard library's first (a custom store's ``from
    pathlib ...``), then the framework's and the store's."""
    first = [i for i in imports if i.split()[1].split(".")[0] in sys.stdlib_module_names]
    classes = options["shape"] == "classes"
    out = ["from dataclasses import dataclass, field" + (", make_dataclass" if classes else ""),
           *(["from pathlib import Path"] if options["backend"] == "file" else []), *first,
           *(["from pydantic_graph import End"] if "End(" in written else []),
           *(i for i in imports if i not in first)]
    snapshots = [k for k in ("EndSnapshot", "NodeSnapshot") if k + "(" in written]
    if snapshots:  # a tamper that replaces the newest snapshot object
        out.append(f"from pydantic_graph.persistence import {', '.join(snapshots)}")
    return list(dict.fromkeys(out))


# -- the script ----------------------------------------------------------------------------------


def _unwritable(options: dict, ops, recipe) -> bool:
    """Does the trace hold what no script of this backend writes: an operation it does not
    support, a SIGKILL, a custom store without a ``ScriptStore`` (or one to release before the
    verdict), or a race whose racers would share nothing?"""
    if any(op.name not in SUPPORTED_OPS for op in ops) or any(
            getattr(op, "crash", None) and op.crash.kind == "sigkill" for op in ops):
        return True
    if options["backend"] != "custom":
        return False
    if recipe is None or recipe.close:
        return True
    # Racers in other processes (or one after the other) share what the store keeps outside
    # the process: a custom store's functions must keep it in ``WORKDIR`` (the ScriptStore
    # contract: each ``build`` returns a new store object on the same data).
    return any(op.name == "race" for op in ops) and not _stored_in_workdir(recipe)


def _stored_in_workdir(recipe) -> bool:
    return "WORKDIR" in store_parts(recipe)[2]


def reproduction(variant, workflow, evidence, recipe=None) -> str | None:
    """The checked script, or ``None`` where it cannot be written; ``recipe``: a custom
    store's ``ScriptStore`` (none: no script on a custom store)."""
    if workflow.shape is not None:  # a shaped workflow: no script, the report's replay line
        return None
    options = dict(variant.options)
    backend = options["backend"]
    ops = evidence.ops[: evidence.step + 1]
    if _unwritable(options, ops, recipe):
        return None
    runs = {t for op in ops for t in (op.thread, getattr(op, "new_thread", None)) if t}
    per_run = backend == "custom" and len(runs) > 1  # each run its own WORKDIR (use_run_dir)
    if per_run and not _stored_in_workdir(recipe):
        return None
    check = check_for(evidence, state_readable=backend != "custom",
                      outcome_readable=ops[-1].name != "race")
    steps = _steps(options, workflow, evidence, recipe, per_run) if check else None
    if steps is None:
        return None
    if check.aspect == "state":
        check = replace(check, state_src=_state_src(backend, ops[-1]))
    crashing = any(s.crash for s in steps)
    opener, stdlib, imports, description = _persistence_parts(options, recipe, per_run)
    written = "\n".join(c for s in steps for c in (*s.calls, *sum(s.racers, ())))
    held = any(s.racers for s in steps)
    definitions = [_workflow_src(options["shape"], crashing, check), opener,
                   *([_source(HeldPersistence)] if held else []),
                   *([_source(read_state)] if check.aspect == "state" else [])]
    pinned = PINNED + (recipe.distributions if backend == "custom" else ())
    return Script(
        header=header("pydantic-graph", description or variant.description, evidence,
                      pins(evidence, pinned)),
        imports=tuple(_imports(options, imports, written)),
        workflow_src="\n".join([*definitions,
                                *_glue(options, workflow, steps, crashing, per_run)]),
        steps=tuple(steps),
        check=check,
        stdlib=stdlib + (("typing",) if options["shape"] == "classes" else ())
        + (("json",) if "json." in written else ()) + (("multiprocessing",) if held else ()),
        asynchronous=True,
    ).source()
