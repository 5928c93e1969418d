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
A race on the file persistence is written as its racers in processes of their own, released
together (the script's ``race``), each with the calls of the variant's resume spelling and its
own value (``file_racers``; the lines the racers logged in one replay show only how far
each got there): racer 1 claims the gate, and every later racer's claim (``load_next``, in a
``FileStatePersistence`` subclass, ``HeldPersistence``) waits at a ``multiprocessing.Barrier``
until racer 1's call has returned.  That is the order in which the fuzzer's racers showed their
defects: the file lock orders the claims, and the racer that lost it retried until the winner
was done.  A later racer then finds the next gate and answers it (pydantic-graph's nodes carry
no interrupt identity), or, the run ended, nothing: the docs' idiom then starts a fresh run on
the same file.  Every race of this adapter is free (``forced_race=False``: nothing holds its
racers between read and write); on a custom store it is written as its racers one after the
other (``racer_calls``): the same order, without processes.  A tamper is the edit
``case.py`` made, written in the script: the file cut short, given a stale lock, or edited as
JSON on disk; in memory, the newest snapshot object replaced (``NodeSnapshot`` /
``EndSnapshot``) or edited.  Not (yet): a forged file, SIGKILL and twin recovery; those fall
back to the older unchecked script (``repro_legacy.py``).

A custom store (``--store``) is written with its factory's ``ScriptStore`` (``store_script``):
the script pastes the store's own functions and builds the store with them where the case called
the factory (``p = latest_persistence()``); a tamper is the store's function named after it
(``corrupt()``), if it has one.  The factory is called once per run, on that run's directory: a
script with several runs gives each run a ``WORKDIR`` of its own (``use_run_dir``), the
directory the store's functions keep their data in.  Not (yet) on a custom store: a check of
the stored state (the script would need the store's reader).
"""

from __future__ import annotations

import inspect
import os
import re
import sys
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
    store_class,
    store_parts,
    thread_label,
    without_docstring,
    without_lines,
)

from .case import STORE_LAST, STORE_TAMPER
from .custom import describe

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


class HeldPersistence(FileStatePersistence):
    """A later racer's persistence: its ``load_next()`` (the claim of the run's next node, which
    ``iter_from_persistence`` makes too) first waits at ``HOLD`` until racer 1's call has
    returned."""

    async def load_next(self):
        HOLD.wait(timeout=60)  # blocks this racer's event loop, which runs nothing else
        return await super().load_next()


# ``file_persistence`` where a race's later racers open the file as a ``HeldPersistence``.
def file_persistence_held(thread, cls=FileStatePersistence):
    p = cls(Path(WORKDIR) / f"{thread}.json")
    p.set_graph_types(graph)
    return p


HOLD = None  # the racers' meeting point: the script's glue sets it


# ``graph.iter``, ``iter_from_persistence`` and ``initialize`` give the persistence the graph's
# types themselves: only a direct ``load_next()`` or ``load_all()`` needs them set first.
def file_persistence_untyped(thread):
    return FileStatePersistence(Path(WORKDIR) / f"{thread}.json")


MEMORY = {}
RUNS = WORKDIR  # a custom store's runs, one directory each (the script's glue sets it)


# One in-memory persistence per thread (``graph.iter``, ``iter_from_persistence`` and
# ``initialize`` give it the graph's types themselves); the script takes the one of its variant.
def memory_persistence_simple(thread):
    return MEMORY.setdefault(thread, SimpleStatePersistence())


def memory_persistence_full(thread):
    return MEMORY.setdefault(thread, FullStatePersistence())


def use_run_dir(run):
    """From here on ``WORKDIR`` is the run's own directory (a custom store's factory is called
    once per run, on that run's directory)."""
    global WORKDIR  # the store's functions keep one run's data there: each run its own
    WORKDIR = os.path.join(RUNS, run)
    os.makedirs(WORKDIR, exist_ok=True)


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
    opened = "custom_persistence" if options["backend"] == "custom" else "file_persistence"
    p = f"p = {opened}({thread_label(op.thread)!r})"
    if options["resume"] == "ifp":
        one = lambda v: [p, "async with graph.iter_from_persistence(p) as run:",  # noqa: E731
                         f"    run.next_node.answer = {v!r}", "    await drive(run)"]
    else:  # the docs' idiom: load_next(), a new node with the answer, graph.iter
        node = "Task(snapshot.node.t, " if options["shape"] == "single" else "type(snapshot.node)("
        one = lambda v: [p, "snapshot = await p.load_next()",  # noqa: E731
                         f"async with graph.iter({node}answer={v!r}), "
                         "state=snapshot.state, persistence=p) as run:", "    await drive(run)"]
    return [line for value in op.values for line in one(value)]


def _resume_calls(options: dict, value, p: str, fresh: list | None = None) -> list:
    """One racer's resume in the variant's spelling, its persistence opened with ``p``; with
    ``fresh`` (the docs' idiom), its branch for a ``load_next()`` that finds nothing to run: a
    fresh run on the same persistence (the example's first invocation), as ``case.py`` takes it."""
    if options["resume"] == "ifp":
        return [p, "async with graph.iter_from_persistence(p) as run:",
                f"    run.next_node.answer = {value!r}", "    await drive(run)"]
    node = "Task(snapshot.node.t, " if options["shape"] == "single" else "type(snapshot.node)("
    answered = [f"async with graph.iter({node}answer={value!r}), state=snapshot.state, "
                "persistence=p) as run:", "    await drive(run)"]
    if not fresh:
        return [p, "snapshot = await p.load_next()", *answered]
    branch = [p, "snapshot = await p.load_next()",
              "if snapshot is None:  # the docs' first invocation: a fresh run, on the same file"]
    if len(fresh) == 1:  # one call: returned, no ``else`` to write
        return [*branch, f"    return {fresh[0]}", *answered]
    return [*branch, *(f"    {c}" for c in fresh), "else:", *(f"    {c}" for c in answered)]


def fresh_run_calls(options: dict, workflow) -> list:
    """``case.py``'s fresh run (``_fresh_run``) on the persistence ``p``: the gate at task 1
    persisted by ``graph.initialize``, or the run from task 1 (``initialize`` then
    ``iter_from_persistence`` where the variant starts so)."""
    first = "Task(1)" if options["shape"] == "single" else "T1()"
    initialize = f"await graph.initialize({first}, p, state=State())"
    if 1 in workflow.gates:
        return [initialize]
    if options.get("start") == "initialize":
        return [initialize, "async with graph.iter_from_persistence(p) as run:",
                "    await drive(run)"]
    return [f"async with graph.iter({first}, state=State(), persistence=p) as run:",
            "    await drive(run)"]


def _pending_before(evidence, i: int, thread: str):
    """The gate pending on ``thread`` before operation ``i``, as the last observation of that
    thread showed it (``None``: none, or not known)."""
    for op, seen in zip(reversed(evidence.ops[:i]), reversed(evidence.observed[:i])):
        if thread in (op.thread, getattr(op, "new_thread", None)) and seen.state is not None:
            return seen.state.pending
    return None


def file_racers(options: dict, op, workflow, pending) -> tuple:
    """A race on the file persistence as racers in processes of their own (the script's
    ``race``, which releases them together), racer 1 first to claim the gate: every later
    racer's claim (``HeldPersistence.load_next``) waits at ``HOLD`` until racer 1's call has
    returned.  Nothing holds the fuzzer's racers of this adapter between their read and their
    writes (``forced_race=False``: the case never calls ``race_ready``), so they race freely;
    the file lock orders their claims (``load_next`` marks the first ``'created'`` snapshot
    ``'pending'`` under it), and the divergent runs are
    those in which the loser's claim (its lock retried every 10 ms) came once the winner's call
    had written where it stopped: a claim made while the winner still ran finds nothing too, but
    its writes land before the winner's.  A later racer then finds the next gate racer 1 stopped
    at, and answers it; or, racer 1 having run to the end, nothing: the docs' idiom then takes
    its branch for a run with nothing to run, a fresh run written after racer 1's end."""
    thread = thread_label(op.thread)
    later = any(g > pending for g in workflow.gates) if pending is not None else False
    fresh = fresh_run_calls(options, workflow) if not later or len(op.values) > 2 else None
    racers = []
    for r, value in enumerate(op.values, 1):
        if r == 1:
            calls = _resume_calls(options, value, f"p = file_persistence({thread!r})")
        else:
            held = f"p = file_persistence({thread!r}, HeldPersistence)"
            calls = _resume_calls(options, value, held,
                                  fresh if options["resume"] == "docs" else None)
            calls[0] += "  # its load_next() waits for racer 1"
        lines = ["async def resume():", *(f"    {c}" for c in calls), "asyncio.run(resume())"]
        if r == 1:
            lines.append("HOLD.wait(timeout=60)  # racer 1's call has returned: the others claim")
        racers.append(tuple(lines))
    return tuple(racers)


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
    """The step's calls without ``last = p.last_snapshot`` (or a custom store's read through its
    factory) when nothing after it reads ``last``: the case reads the snapshot to choose its
    path (a field of the persistence, no call the framework could refuse), and the path taken
    is written out."""
    reads = ("last = p.last_snapshot", STORE_LAST)
    return [c for i, c in enumerate(calls) if c.strip() not in reads
            or any(re.search(r"\blast\b", later) for later in calls[i + 1:])]


_OPENED = re.compile(r"^(?P<indent>\s*)(?P<var>\w+) = custom_persistence\((?P<run>'[^']*')\)$")
_TAMPER_HOWS = ("corrupt", "invalid", "forged")  # a recipe's tamper: its function of that name
_TAMPERED = re.compile(re.escape(STORE_TAMPER).replace(r"\{how!r\}", "'(?P<how>[a-z]+)'")
                       .replace(r"\{run!r\}", "(?P<run>'[^']*')"))


def _store_calls(calls: list, recipe, *, per_run: bool) -> list | None:
    """A custom store's step in the store's own terms: the factory's persistence built by the
    ``ScriptStore``'s ``build`` (typed, when the step reads it itself: ``load_next``), its
    tamper the recipe's function of that name; in a script with several runs, each run's
    directory chosen first.  ``None``: a tamper the recipe does not write."""
    typed = any(".load" in c for c in calls)
    build = recipe.builder
    opened = f"{'await ' if inspect.iscoroutinefunction(build) else ''}{recipe.build}()"
    out = []
    for c in calls:
        m, tampered = _OPENED.match(c), _TAMPERED.fullmatch(c)
        if tampered:
            if tampered["how"] not in {f.__name__ for f in recipe.functions}:
                return None
            out += [*([f"use_run_dir({tampered['run']})"] if per_run else []),
                    f"{tampered['how']}()"]
        elif m:
            i, var = m["indent"], m["var"]
            out += [*([f"{i}use_run_dir({m['run']})"] if per_run else []),
                    f"{i}{var} = {opened}",
                    *([f"{i}{var}.set_graph_types(graph)"] if typed else [])]
        else:
            out.append(c)
    return out


def reproduction(variant, workflow, evidence, recipe=None) -> str | None:
    """The checked script, or ``None`` where it cannot be written; ``recipe``: a custom
    store's ``ScriptStore`` (none: no script on a custom store)."""
    options = dict(variant.options)
    backend = options["backend"]
    custom = backend == "custom"
    ops = evidence.ops[: evidence.step + 1]
    if any(op.name not in SUPPORTED_OPS for op in ops) or any(
            getattr(op, "crash", None) and op.crash.kind == "sigkill" for op in ops):
        return None
    if custom and (recipe is None or recipe.close):
        return None  # no ScriptStore; or one to release before the verdict: not written yet
    stored_in_workdir = custom and "WORKDIR" in store_parts(recipe)[2]
    # A race on a custom store is written as its racers one after the other (``racer_calls``),
    # one on the file persistence as racers in processes (``file_racers``), each opening the
    # run's persistence anew, as racers in other processes do: they share what the persistence
    # keeps outside the process.  The in-memory persistences keep nothing there (a race on them
    # is n/a anyway); FileStatePersistence keeps the run's file.  A custom store's ``build``
    # returns a new store object on the same data at each call (the ScriptStore contract), and
    # where the store's functions keep that data in ``WORKDIR`` (LatestStatePersistence's
    # callbacks: one JSON file, replaced atomically), every racer's object reads and writes that
    # one file, as the campaign's racers did in the run's directory.
    if any(op.name == "race" for op in ops) and not (backend == "file" or stored_in_workdir):
        return None  # racers in other processes share only a file
    runs = {t for op in ops for t in (op.thread, getattr(op, "new_thread", None)) if t}
    per_run = custom and len(runs) > 1  # each run its own WORKDIR (use_run_dir)
    if per_run and not stored_in_workdir:
        return None
    check = check_for(evidence, state_readable=not custom,
                      outcome_readable=ops[-1].name != "race")
    if check is None:
        return None
    if check.aspect == "state":
        check = replace(check, state_src=_state_src(options["backend"], ops[-1]))
    steps = []
    # A race on the file persistence: its racers in processes of their own, racer 1 claiming
    # first (``file_racers``); a custom store's, one after the other.
    held = [op for op in ops if op.name == "race" and backend == "file"]
    for i, op in enumerate(ops):
        if op in held:
            steps.append(step_of(evidence, i, (), racers=file_racers(
                options, op, workflow, _pending_before(evidence, i, op.thread)),
                note=" (here: racer 1 claims the gate first, the others once it has returned)"))
            continue
        calls = (racer_calls(options, op) if op.name == "race" else
                 [src for kind, src in evidence.calls[i] if kind == "call"])
        if op.name != "query" and not calls:
            return None
        if custom:
            calls = _store_calls(calls, recipe, per_run=per_run)
        calls = _live(calls) if op.name != "query" and calls is not None else calls
        if calls is None or any("<unknown" in c for c in calls):
            return None
        note = (" (here: one racer after the other, the second shown the same interrupt as "
                "the first)" if op.name == "race" else "")
        steps.append(step_of(evidence, i, calls if op.name != "query" else (), note=note))
    single = options["shape"] == "single"
    bad = any(s.bad_output is not None for s in steps)
    body = (task_body_crashing if any(s.crash for s in steps) else
            task_body_bad_output if bad else task_body)
    written = " ".join(c for step in steps for c in (*step.calls, *sum(step.racers, ())))
    if custom:
        saver_src, stdlib, imports, description = _store_parts(recipe, options, written, per_run)
    else:
        saver_src, stdlib, imports = _builtin_parts(backend, check, written)
        description = variant.description
    memory = [] if backend in ("file", "custom") else ["MEMORY = {}"]
    glue = [f"N, GATES = {workflow.n}, {set(workflow.gates) or 'set()'}",
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if bad and steps[0].bad_output is None else []),
            *shape_glue(options["shape"], workflow.n), *memory,
            *([f"HOLD = multiprocessing.Barrier({max(len(op.values) for op in held)})  # the "
               "racers' meeting point"] if held else []),
            *(["RUNS = WORKDIR"] if per_run else [])]
    text = header("pydantic-graph", description, evidence,
                  pins(evidence, PINNED + (recipe.distributions if custom else ())))
    # The standard library's ``from`` imports first (a custom store's ``from pathlib ...``).
    first = [i for i in imports if i.split()[1].split(".")[0] in sys.stdlib_module_names]
    imports = ["from dataclasses import dataclass, field" + ("" if single else ", make_dataclass"),
               *(["from pathlib import Path"] if backend == "file" else []), *first,
               "from pydantic_graph import BaseNode, End, GraphRunContext",
               "from pydantic_graph.graph import Graph", *(i for i in imports if i not in first)]
    snapshots = [k for k in ("EndSnapshot", "NodeSnapshot") if k + "(" in written]
    if snapshots:  # a tamper that replaces the newest snapshot object
        imports.append(f"from pydantic_graph.persistence import {', '.join(snapshots)}")
    task_body_src = source_as(body, "task_body")
    if not workflow.gates:
        task_body_src = _gateless(task_body_src)
    return Script(
        header=text,
        imports=tuple(dict.fromkeys(imports)),
        # The task body the steps need: inside ``Task.run`` (single shape), or under the one
        # name the node classes call; the persistence under the name the calls use.
        workflow_src="\n".join([_source(State),
                                 *([] if single else [task_body_src]),
                                 _inlined(_source(Task), task_body_src) if single
                                 else _source(task_class),
                                 saver_src,
                                 *([_source(HeldPersistence)] if held else []),
                                 _source(*([drive] if "drive(" in written else []),
                                         *([outcome] if check.aspect == "outcome" else []),
                                         *([read_state] if check.aspect == "state" else [])),
                                 *glue]),
        steps=tuple(steps),
        check=check,
        stdlib=stdlib + (() if single else ("typing",)) + (("json",) if "json." in written else ())
        + (("multiprocessing",) if held else ()),
        asynchronous=True,
    ).source()


def _builtin_parts(backend: str, check, written: str) -> tuple:
    """A built-in persistence's part of the script: the function the calls open it with
    (under the name they use), the standard-library modules and the import it needs."""
    saver = {"file": file_persistence, "full": memory_persistence_full,
             "simple": memory_persistence_simple}[backend]
    everything = written + " " + check.state_src
    if backend == "file" and ".load" not in everything:  # no read of p outside the graph's calls
        saver = file_persistence_untyped
    if "HeldPersistence" in written:  # a race's later racers: their own class
        saver = file_persistence_held
    imports = ["from pydantic_graph.persistence.file import FileStatePersistence"
               if backend == "file" else
               "from pydantic_graph.persistence.in_mem import "
               f"{'Full' if backend == 'full' else 'Simple'}StatePersistence"]
    src = source_as(saver, "file_persistence" if backend == "file" else "memory_persistence")
    return src, (("os", "tempfile") if backend == "file" else ()), imports


def _store_parts(recipe, options: dict, written: str, per_run: bool) -> tuple:
    """A custom store's part of the script, from its ``ScriptStore``: the store's functions
    (a tamper function only if a step calls it), ``use_run_dir`` for several runs, their
    standard-library modules and imports, and the variant in words naming the store's class."""
    kept = tuple(f for f in recipe.functions
                 if f.__name__ == recipe.build or f.__name__ not in _TAMPER_HOWS
                 or f"{f.__name__}()" in written)
    stdlib, imports, src = store_parts(replace(recipe, functions=kept))
    if per_run:
        src += "\n" + _source(use_run_dir)
    who = f"{store_class(recipe)} of {options['store_distribution']} {options['store_version']}"
    return src, stdlib + (("os",) if per_run else ()), list(imports), describe(options, who)
