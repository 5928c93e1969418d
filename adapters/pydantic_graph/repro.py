"""A pydantic-graph finding as a short script: the graph, the calls the case made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script`` from the
definitions below (pasted into the script by name with ``inspect.getsource``: each is real code)
and the calls ``case.py`` recorded while the engine replayed the trace: the persistence it
opened, ``graph.initialize`` / ``graph.iter`` / ``graph.iter_from_persistence``, then ``drive(run)``
(the docs' loop over ``run.next()``, up to a gate with no answer), in order.  Each operation is
an ``async def`` run with ``asyncio.run``, as the case does (one awaited call that nothing
observes: ``asyncio.run(call)``).

Each script is specialised to its trace, to stay short: ``drive``'s loop written where it runs
when it runs once or twice (``_drive_inlined``), its condition without ``GATES`` where the
workflow has no gate or only gates (``_loop``); one persistence object ``p`` made before the
steps where there is one run and no race (``_one_persistence``: the in-memory one is one object
anyway, a ``FileStatePersistence`` holds only its path and types), typed only where the script
loads from it before a graph call has typed it; a one-task classes shape's ``T1`` written out
(no ``task_class``); the fields, names and helpers nothing in the script reads left out (a
gateless workflow's ``answer`` and ``answers``, ``N`` / ``GATES``, ``outcome``, a ``load_all()``
whose result is unread, ``snapshot =`` where the docs' idiom found none).

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
``EndSnapshot``) or edited.  Not (yet): a forged file, SIGKILL and twin recovery; for those the
report gives the replay line instead.

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

from adapters.reproduction.runtime import WORKDIR, crash_point, effect
from adapters.reproduction.script import (
    Script,
    check_for,
    header,
    pins,
    sole_raising_crash,
    source_as,
    step_of,
    store_class,
    store_parts,
    thread_label,
    unwritten,
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


@dataclass
class T1(BaseNode[State, None, None]):
    """The ``classes`` shape for a workflow of one task: its node class written out (no
    ``task_class`` factory for one class); a gate's has an ``answer`` field."""

    answer: str | None = None

    async def run(self, ctx: GraphRunContext[State]) -> End[None]:
        task_body(1, self.answer, ctx.state)
        return End(None)


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
    """The graph: one ``Task`` class, or (``classes``) ``T1`` .. ``Tn``, built last to first
    (one task: ``T1``, written out)."""
    if shape == "single" or n == 1:
        node = "Task" if shape == "single" else "T1"
        return [f"graph = Graph(nodes=[{node}], state_type=State, run_end_type=type(None))"]
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


def _inlined(task_src: str, body_src: str, names=None) -> str:
    """A node class (the ``single`` shape's ``Task``, the one-task ``T1``) with its task body
    written inside ``run`` (no ``task_body`` to define and call): the body's lines, its
    parameters read off the node and the context (``names``: what each parameter becomes)."""
    names = names or {"t": "self.t", "answer": "self.answer", "state": "ctx.state"}
    lines = body_src.splitlines()[1:]  # the body, under its ``def`` line
    lines = [re.sub(r"\b(t|answer|state)\b", lambda m: names[m.group(1)], "    " + line)
             for line in lines]
    call = next((line for line in task_src.splitlines()
                 if line.strip().startswith("task_body(")), None)
    assert call is not None, "the node's run no longer calls task_body"
    return task_src.replace(call, "\n".join(lines))


def _all_gates(body: str) -> str:
    """A task body for a workflow whose every task is a gate: the answer is the value (no
    ``value`` to compute from ``GATES``), and it is recorded as it is: a gate's node runs only
    with its answer set (``drive``'s loop stops at a gate without one, and every node a script
    runs, it runs through that loop)."""
    body = without_lines(body, "value = answer if t in GATES else None")
    lines = re.sub(r"\bvalue\b", "answer", body).splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip() == "if answer is not None:":
            continue
        if i and lines[i - 1].strip() == "if answer is not None:":
            line = line.replace("    ", "", 1)
        out.append(line)
    return "\n".join(out)


def _node_src(shape: str, workflow, body_src: str, *, reads_task: bool) -> str:
    """The node classes, each with the task body written inside its ``run``: ``Task`` (single
    shape), ``T1`` written out (classes shape, one task), or the ``task_class`` factory; the
    fields nothing reads left out (a gateless workflow's ``answer``; a one-task ``Task``'s
    number, unless ``reads_task``: the calls then make ``Task()``, see ``_unnumbered``), and a
    one-task ``Task``'s successor (there is none)."""
    if shape == "single" and workflow.n == 1 and not reads_task:
        src = _inlined(_source(Task), body_src, {"t": "1", "answer": "self.answer",
                                                  "state": "ctx.state"})
        src = without_lines(src.replace("return End(None) if self.t >= N else Task(self.t + 1)",
                                        "return End(None)"), "    t: int")
    elif shape == "single":
        src = _inlined(_source(Task), body_src)
        if workflow.n == 1:
            src = src.replace("return End(None) if self.t >= N else Task(self.t + 1)",
                              "return End(None)")
    elif workflow.n == 1:
        src = _inlined(_source(T1), body_src, {"t": "1", "answer": "self.answer",
                                                "state": "ctx.state"})
        if reads_task:  # read_state tells a gate's snapshot by its node's task number
            src = src.replace("    answer: str | None = None",
                              "    t = 1\n    answer: str | None = None")
    else:  # ``task_class``'s run, for each task t
        answer = "self.answer" if set(workflow.gates) == set(range(1, workflow.n + 1)) \
            else 'getattr(self, "answer", None)'
        return _inlined(_source(task_class), body_src,
                        {"t": "t", "answer": answer, "state": "ctx.state"})
    if not workflow.gates:
        src = without_lines(src, "    answer: str | None = None")
    return src


def _unnumbered(steps: list) -> list:
    """The steps of a one-task workflow on the single shape whose ``Task`` has no number (the
    script reads none): ``Task(1)`` made as ``Task()``, ``Task(1, answer=v)`` as
    ``Task(answer=v)``."""
    def call(c):
        return re.sub(r"\bTask\(1\)", "Task()", re.sub(r"\bTask\(1, ", "Task(", c))
    return [replace(s, calls=tuple(map(call, s.calls))) for s in steps]


def _loop(workflow) -> str:
    """``drive``'s loop header, for this workflow: no gate to stop at (none), or every task a
    gate (the node's answer says it all)."""
    if not workflow.gates:
        return "while not isinstance(run.next_node, End):"
    if set(workflow.gates) == set(range(1, workflow.n + 1)):
        return "while not isinstance(run.next_node, End) and run.next_node.answer:"
    return ("while not isinstance(run.next_node, End) and (run.next_node.t not in GATES or "
            "run.next_node.answer):")


_DRIVE = "await drive(run)"


def _drive_inlined(steps: list, loop: str, check) -> list | None:
    """The steps with ``drive``'s loop written where it is called, when it is called once or
    twice (``None``: more often, or never; the script then defines ``drive``); the checked
    step's outcome read off ``run.next_node`` after it."""
    uses = sum(c.strip() == _DRIVE for s in steps for c in s.calls)
    if not 0 < uses <= 2:
        return None
    out = []
    for s in steps:
        calls = []
        for k, c in enumerate(s.calls):
            if c.strip() != _DRIVE:
                calls.append(c)
                continue
            indent = c[: len(c) - len(c.lstrip())]
            calls += [indent + loop, indent + "    await run.next()"]
            if s.observed and check.reads_outcome and k == len(s.calls) - 1:
                calls.append(indent + "outcome(run.next_node)")  # returned, by Script
        out.append(replace(s, calls=tuple(calls)))
    return out


_OPEN = re.compile(r"^p = (?:file|memory)_persistence\((?P<run>'[^']*')\)$")


def _one_persistence(ops, steps, backend: str) -> str | None:
    """The run whose persistence every step opens as ``p``, where the script can make it once,
    before the steps: a built-in persistence, one run, no race (racers open it in their own
    processes).  In memory it is one object anyway; a ``FileStatePersistence`` keeps nothing
    but its file's path (and the graph's types), so one object reads and writes what the
    steps' own did.  ``None``: each step opens its own."""
    if backend == "custom" or any(op.name == "race" for op in ops):
        return None
    runs = {t for op in ops for t in (op.thread, getattr(op, "new_thread", None)) if t}
    opened = [c for s in steps for c in s.calls if re.search(r"\b(file|memory)_persistence\(", c)]
    if len(runs) != 1 or not all(_OPEN.match(c) for c in opened):
        return None
    return thread_label(runs.pop())


def _one_call(step, check):
    """A step that is one awaited call, run where nothing observes it (no crash point, no
    refusal to tell, no outcome checked): ``asyncio.run(call)`` written as it is, a straight
    line (no ``async def`` to run it in); and a ``load_next()`` whose snapshot nothing reads
    (the docs' idiom found nothing to run, and started afresh) without the name."""
    calls = list(step.calls)
    for k, c in enumerate(calls):
        if c.startswith("snapshot = await p.load_next()") and not any(
                re.search(r"\bsnapshot\b", later) for later in calls[k + 1:]):
            calls[k] = "await p.load_next()  # None: nothing to run, the docs' idiom starts afresh"
    watched = step.crash or step.guarded or (step.observed and check.reads_outcome)
    if len(calls) == 1 and calls[0].startswith("await ") and not watched and not step.racers:
        calls = [f"asyncio.run({calls[0].removeprefix('await ')})"]
    return replace(step, calls=tuple(calls))


_GRAPH_CALL = re.compile(r"\bgraph\.(iter|iter_from_persistence|initialize)\(")


def _loads_untyped(steps, check) -> bool:
    """Does the script load from the one persistence ``p`` itself (``load_next()``,
    ``load_all()``) before any of the graph's calls has given it the graph's types
    (``graph.iter``, ``iter_from_persistence`` and ``initialize`` set them, on entry)?"""
    for c in (c for s in steps for c in (*s.calls, *sum(s.racers, ()))):
        if _GRAPH_CALL.search(c):
            return False
        if ".load" in c:
            return True
    return ".load" in check.state_src


def _one_persistence_src(backend: str, run: str, typed: bool) -> list:
    """The glue that makes the one persistence ``p`` (after ``graph``: typed for the script's
    own ``load_next()`` / ``load_all()``, which the graph's calls do not type)."""
    if backend == "file":
        return [f"p = FileStatePersistence(Path(WORKDIR) / {run + '.json'!r})  # {run}'s snapshots",
                *(["p.set_graph_types(graph)"] if typed else [])]
    kind = "Full" if backend == "full" else "Simple"
    return [f"p = {kind}StatePersistence()  # {run}'s snapshots, every step's"]


def _live(calls: list) -> list:
    """The step's calls without ``last = p.last_snapshot`` (or a custom store's read through its
    factory, or the file's ``load_all()`` when a call follows it) when nothing after it reads
    ``last``: the case reads the snapshot to choose its path (a field of the persistence, no
    call the framework could refuse; a ``load_all()`` followed by a call did not raise), and
    the path taken is written out."""
    reads = ("last = p.last_snapshot", STORE_LAST)
    # ``load_all()`` is kept where it is the step's last call (it may be what raised).
    loaded = "last = (await p.load_all())[-1]"
    return [c for i, c in enumerate(calls)
            if (c.strip() not in reads and (c.strip() != loaded or i == len(calls) - 1))
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
        if calls is None or unwritten(calls):
            return None
        note = (" (here: one racer after the other, the second shown the same interrupt as "
                "the first)" if op.name == "race" else "")
        steps.append(step_of(evidence, i, calls if op.name != "query" else (), note=note))
    single = options["shape"] == "single"
    bad = any(s.bad_output is not None for s in steps)
    # The one crash that no other step reaches: its task raises by itself, no CRASH to set.  A
    # gate is no exception here: its node runs only once answered (``drive`` stops before an
    # unanswered one), and then it fires its effect, which the other steps' effects would show.
    raising = sole_raising_crash(steps, evidence, set(), check)
    if raising is not None:
        steps[raising[0]] = replace(steps[raising[0]], crash=None, guarded=True)
    body = (task_body_crashing if raising or any(s.crash for s in steps) else
            task_body_bad_output if bad else task_body)
    # One persistence object ``p`` made before the steps, where the script can (one run, no
    # race, a built-in persistence): no ``p = ..._persistence(run)`` in each step.
    one = _one_persistence(ops, steps, backend)
    if one is not None:
        steps = [replace(s, calls=tuple(c for c in s.calls if not _OPEN.match(c))) for s in steps]
        check = replace(check, state_src=re.sub(r"(?:file|memory)_persistence\('[^']*'\)", "p",
                                                check.state_src))
    steps = [_one_call(s, check) for s in steps]
    loop = _loop(workflow)
    inlined = None if held or any(op.name == "race" for op in ops) else \
        _drive_inlined(steps, loop, check)
    steps = inlined or steps
    written = " ".join(c for step in steps for c in (*step.calls, *sum(step.racers, ())))
    if custom:
        saver_src, stdlib, imports, description = _store_parts(recipe, options, written, per_run)
    else:
        saver_src, stdlib, imports = _builtin_parts(backend, check, written)
        description = variant.description
    if one is not None:  # the glue makes ``p``: no function to open it
        saver_src = ""
        made = _one_persistence_src(backend, one, _loads_untyped(steps, check))
    memory = [] if backend in ("file", "custom") or one is not None else ["MEMORY = {}"]
    task_body_src = source_as(body, "task_body")
    if raising is not None:
        task_body_src = _raising(task_body_src, raising, workflow.n)
    if not workflow.gates:
        task_body_src = _gateless(task_body_src)
    elif set(workflow.gates) == set(range(1, workflow.n + 1)):
        task_body_src = _all_gates(task_body_src)
    factory = not single and workflow.n > 1  # the classes made by ``task_class``
    # A node's task number, where the script reads it: read_state, a racer's next node.
    reads_task = check.aspect == "state" or any(op.name == "race" for op in ops)
    nodes_src = _node_src(options["shape"], workflow, task_body_src, reads_task=reads_task)
    if bad:  # a node of one task: "is it task 1 that writes outside the schema?"
        nodes_src = nodes_src.replace('"<bad>" if 1 == BAD_OUTPUT else 1',
                                      '"<bad>" if BAD_OUTPUT == 1 else 1')
    if single and workflow.n == 1 and not reads_task:
        steps = _unnumbered(steps)
        written = " ".join(c for step in steps for c in (*step.calls, *sum(step.racers, ())))
    drive_src = _source(drive).replace(_source(drive).splitlines()[1].strip(), loop)
    readers = "\n".join(filter(None, [
        drive_src if "drive(" in written and not inlined else "",
        _source(outcome) if check.reads_outcome else "",
        _source(read_state) if check.aspect == "state" else ""]))
    classes = shape_glue(options["shape"], workflow.n)
    state_src = _source(State)
    if not workflow.gates and "answers" not in written + check.state_src + readers:
        state_src = without_lines(state_src, "answers: dict[int, str]")  # no gate: no answer
    defined = "\n".join(filter(None, [state_src, nodes_src, saver_src,
                                       *([_source(HeldPersistence)] if held else []), readers]))
    uses = "\n".join([defined, *classes, written, check.state_src])
    counts = [(name, value) for name, value in
              (("N", str(workflow.n)), ("GATES", str(set(workflow.gates) or "set()")))
              if re.search(rf"\b{name}\b", uses)]
    glue = [*([f"{', '.join(n for n, _ in counts)} = {', '.join(v for _, v in counts)}"]
              if counts else []),
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if bad and steps[0].bad_output is None else []),
            *classes, *memory,
            *(made if one is not None else []),
            *([f"HOLD = multiprocessing.Barrier({max(len(op.values) for op in held)})  # the "
               "racers' meeting point"] if held else []),
            *(["RUNS = WORKDIR"] if per_run else [])]
    text = header("pydantic-graph", description, evidence,
                  pins(evidence, PINNED + (recipe.distributions if custom else ())))
    # The standard library's ``from`` imports first (a custom store's ``from pathlib ...``).
    first = [i for i in imports if i.split()[1].split(".")[0] in sys.stdlib_module_names]
    imports = ["from dataclasses import dataclass, field" + (", make_dataclass" if factory else ""),
               *(["from pathlib import Path"] if backend == "file" else []), *first,
               "from pydantic_graph import BaseNode, End, GraphRunContext",
               "from pydantic_graph.graph import Graph", *(i for i in imports if i not in first)]
    snapshots = [k for k in ("EndSnapshot", "NodeSnapshot") if k + "(" in written]
    if snapshots:  # a tamper that replaces the newest snapshot object
        imports.append(f"from pydantic_graph.persistence import {', '.join(snapshots)}")
    source = Script(
        header=text,
        imports=tuple(dict.fromkeys(imports)),
        # The task body the steps need: inside the node class's ``run`` (``Task``, ``T1``), or
        # under the one name ``task_class``'s classes call; the persistence under the name the
        # calls use (or made once, in the glue).
        workflow_src="\n".join([defined, *glue]),
        steps=tuple(steps),
        check=check,
        stdlib=stdlib + (("typing",) if factory else ()) + (("json",) if "json." in written else ())
        + (("multiprocessing",) if held else ()),
        asynchronous=True,
        lean=True,
    ).source()
    return _without_unused(source)


def _raising(body: str, raising: tuple, n: int) -> str:
    """``task_body``'s source with the crash point of ``raising`` (``sole_raising_crash``: step
    i, task, moment) written as the task's own raise (unconditional in a workflow of one task),
    and without the other crash point."""
    i, task, moment = raising
    point = f'    crash_point(t, "{moment}")'
    fails = f'raise RuntimeError("task {task} fails {moment}")'
    raise_src = (f"    {fails}  # the crash point of step {i + 1}" if n == 1 else
                 f"    if t == {task}:  # the crash point of step {i + 1}\n        {fails}")
    return without_lines(body.replace(point, raise_src), "crash_point(")


def _without_unused(source: str) -> str:
    """The script without ``outcome`` where no step's result goes through it (the checked step
    ends in a block: ``Script`` returns "completed" after it), and without ``drive``'s return
    where no caller reads it."""
    outcome_src = _source(outcome) + "\n"
    calls = len(re.findall(r"\boutcome\(", source))  # observe_outcome( is another name
    if calls == 1 and outcome_src in source:
        source = source.replace(outcome_src, "")
    elif calls == 2 and outcome_src in source:
        source = _outcome_inlined(source.replace(outcome_src, ""))
    if "def drive(run):" in source and not re.search(r"(outcome\(|=|return) await drive\(",
                                                     source):
        source = source.replace("        await run.next()\n    return run.next_node\n",
                                "        await run.next()\n")
    return source


def _outcome_inlined(source: str) -> str:
    """``outcome(x)`` written out at its one call: a two-line function read once is two lines a
    maintainer reads for nothing."""
    start = re.search(r"\boutcome\(", source).start()
    depth, end = 0, start + len("outcome")
    for end in range(start + len("outcome"), len(source)):
        depth += {"(": 1, ")": -1}.get(source[end], 0)
        if depth == 0:
            break
    arg = source[start + len("outcome("):end]
    return (source[:start] + f'"completed" if isinstance({arg}, End) else "interrupted"'
            + source[end + 1:])


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
