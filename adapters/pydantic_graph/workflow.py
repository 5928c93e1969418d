"""The contract's workflow as a pydantic-graph 1.x ``Graph``, in the two node shapes users write.

``single``: one parametrised node class ``Task(t, answer)`` serves every task (the persisted node is
``{"t": 2, "answer": null, "node_id": "Task"}`` and the snapshot schema has no discriminator,
``persistence/_utils.py:30``).  ``classes``: N distinct classes ``T1..TN``, each returning the next,
only the gated ones with an ``answer`` field (``{"node_id": "T2", "answer": null}``; ``node_id``
selects the class, ``persistence/_utils.py:32-34``).  The persisted schema differs, which matters
for tampering and for decoding, so the shape is a variant axis.

There is no interrupt primitive in pydantic-graph: a gate is a node whose ``answer`` is unset, and
the driver (``drive``, the docs' loop over ``run.next()``) stops before running it.  The node
object carries the resume value.  What a task calls out to comes in the run's ``deps``
(``Deps``): the engine's ``Hooks`` in a case, the script's own in a reproduction script.

A shaped workflow (docs/contract.md §7, no parallel stages) is ``shaped_graph``'s one node class
``Task(t, visit, k, answer)``, driven by ``drive_shape`` and described by ``ShapedBuilt``; it has
no reproduction script.

The case builds its graph with ``build``; a reproduction script pastes ``State``, ``Deps``,
``task_body``, the shape's graph function, ``drive`` and ``outcome`` by their source
(``repro.py``) and calls them as ``build`` does.  So they import the framework inside:
this module imports none at import time, only ``build`` does, when a worker opens a case.
"""

import typing  # no ``from __future__ import annotations``: node annotations must be real types
from dataclasses import dataclass, field, fields, make_dataclass

from adapters.protocol import HarnessError, Hooks, Workflow
from refmodel.workflow import instance, parse, pre, question

SHAPES = ("single", "classes")


@dataclass
class State:
    """The workflow state: ``done`` (tasks completed, in order) and ``answers`` (gate -> value)."""

    done: list[int] = field(default_factory=list)
    answers: dict[int, str] = field(default_factory=dict)


@dataclass
class Deps:
    """What the tasks need and the persistence must not hold: what a task calls out to
    (``task_begins``, ``effect``, ``output``: the engine's ``Hooks``, or a script's) and the
    gates, the tasks that wait for an answer."""

    hooks: Hooks
    gates: frozenset = frozenset()


def task_body(t, answer, ctx):
    """Task t (docs/contract.md): it begins, fires its one effect (with the answer, if it is a
    gate), then records its result in the state."""
    hooks = ctx.deps.hooks
    hooks.task_begins(t)
    value = answer if t in ctx.deps.gates else None
    hooks.effect(t, value)
    if value is not None:
        ctx.state.answers[t] = value
    ctx.state.done.append(hooks.output(t, value))


def single_graph(n):
    """The ``single`` shape: one node class ``Task(t, answer)`` for every task; the graph and
    ``Task``.  A gate's node runs once a caller has set its ``answer``."""
    from pydantic_graph import BaseNode, End, GraphRunContext
    from pydantic_graph.graph import Graph

    @dataclass
    class Task(BaseNode[State, Deps, None]):
        t: int
        answer: str | None = None

        async def run(self, ctx: GraphRunContext[State, Deps]) -> "Task | End[None]":
            task_body(self.t, self.answer, ctx)
            return End(None) if self.t >= n else Task(self.t + 1)

    return Graph(nodes=[Task], state_type=State, run_end_type=type(None)), Task


def classes_graph(n, gates):
    """The ``classes`` shape: a node class per task, ``T1`` .. ``Tn``, each returning the next
    (a gate's with an ``answer`` field), built last to first; the graph and the classes."""
    from pydantic_graph import BaseNode, End, GraphRunContext
    from pydantic_graph.graph import Graph

    classes = []
    following = None  # the class of task t + 1
    for t in range(n, 0, -1):

        async def run(self, ctx: GraphRunContext[State, Deps], t=t, following=following):
            task_body(t, getattr(self, "answer", None), ctx)
            return End(None) if following is None else following()

        run.__annotations__["return"] = End[None] if following is None else following
        answer = [("answer", typing.Optional[str], None)] if t in gates else []
        following = make_dataclass(f"T{t}", answer, bases=(BaseNode[State, Deps, None],),
                                   namespace={"run": run, "t": t})
        classes.insert(0, following)
    return Graph(nodes=classes, state_type=State, run_end_type=type(None)), classes


async def drive(run):
    """The docs' loop over ``run.next()``: run nodes until the run ends or its next node is a
    gate nobody answered; the node it stopped at (or the ``End``)."""
    from pydantic_graph import End

    while not isinstance(run.next_node, End) and (
            run.next_node.t not in run.deps.gates or run.next_node.answer is not None):
        await run.next()
    return run.next_node


def outcome(next_node):
    """What a call that stopped at ``next_node`` returns: the run ended, or waits at a gate."""
    from pydantic_graph import End

    return "completed" if isinstance(next_node, End) else "interrupted"


@dataclass
class Built:
    """A built graph and what the adapter needs to know about its nodes."""

    graph: object
    workflow: Workflow
    shape: str
    classes: dict  # task -> node class (``single``: every task -> Task)

    def node(self, task: int, answer: str | None = None):
        """A fresh node for ``task`` (no snapshot id yet), carrying ``answer`` if it is a gate."""
        cls = self.classes[task]
        kwargs = {"answer": answer} if task in self.workflow.gates else {}
        if self.shape == "single":
            return cls(t=task, **kwargs)
        return cls(**kwargs)

    def task_of(self, node) -> int | None:
        """The task a node object runs (``None`` for an ``End`` or a foreign object)."""
        t = getattr(node, "t", None)
        return t if isinstance(t, int) else None

    def is_gate(self, node) -> bool:
        return self.task_of(node) in self.workflow.gates

    def is_unanswered_gate(self, node) -> bool:
        return self.is_gate(node) and getattr(node, "answer", None) is None

    def fresh_copy(self, node):
        """The same node without its snapshot id (``dataclasses.replace`` runs ``__init__``)."""
        return type(node)(**{f.name: getattr(node, f.name) for f in fields(node)})

    def first(self):
        """The key of the node a run starts with."""
        return 1

    def new_state(self):
        return State()

    def key_of_json(self, node) -> int | None:
        """The task a stored node (its JSON form) runs."""
        return task_of_json(self.shape, node)

    async def drive(self, run):
        """Run ``run`` on to its next pause (``drive``, ``drive_shape``); the node it stopped at."""
        return await drive(run)


def task_of_json(shape: str, node: dict) -> int | None:
    """The task a *stored* node runs, read from its JSON form (for ``query`` and ``tamper``)."""
    if not isinstance(node, dict):
        return None
    if shape == "single":
        t = node.get("t")
        return t if isinstance(t, int) and not isinstance(t, bool) else None
    node_id = node.get("node_id")
    if isinstance(node_id, str) and node_id[:1] == "T" and node_id[1:].isdigit():
        return int(node_id[1:])
    return None


def node_json(shape: str, workflow: Workflow, task: int, answer: str | None = None) -> dict:
    """A node's JSON form exactly as ``FileStatePersistence`` writes it (for forged content)."""
    gate = {"answer": answer} if task in workflow.gates else {}
    if shape == "single":
        return {"t": task, **gate, "node_id": "Task"}
    return {**gate, "node_id": f"T{task}"}


# -- shaped workflows (docs/contract.md §7) ---------------------------------------------------------


def shape_key(t: int, visit: int, k: int) -> str:
    """The key of a shaped node: its task instance (``"3"``, ``"3#2"``) while it asks nothing
    (``k == 0``: the task begins), its question id (``"3.q2"``) when it asks question ``k``."""
    label = instance(t, visit)
    return label if k == 0 else question(label, k)


def parse_key(key) -> tuple[int, int, int] | None:
    """``"3#2.q1"`` -> ``(3, 2, 1)``; ``None`` for anything else."""
    if not isinstance(key, str):
        return None
    base, _, rest = key.partition(".")
    try:
        t, visit = parse(base)
    except ValueError:
        return None
    if not rest:
        return t, visit, 0
    if rest[:1] == "q" and rest[1:].isdigit():
        return t, visit, int(rest[1:])
    return None


def shaped_graph(shape):
    """A shaped workflow without parallel stages (pydantic-graph 1.x runs one node at a time):
    one node class ``Task(t, visit, k, answer)``.  ``k == 0`` is task ``t``'s visit ``visit``
    beginning: it does its pre-effect, if any, and returns the node of its first question (the
    run stops before it: the question is asked).  ``k >= 1`` is its ``k``-th question, run once
    a caller has set ``answer``: it records the answer in the state and returns the node of the
    next question, or fires the task's effect (its answers joined), records the instance done and
    returns the next stage's first node (the looped stage's again while the visit's first answer
    is the loop's ``again``: ``Shape.after``) or ``End``.  The state's labels are strings of the
    shape's form (``Label``: pydantic validates them on load, as the chain's ``list[int]``)."""
    from typing import Annotated

    from pydantic import StringConstraints
    from pydantic_graph import BaseNode, End, GraphRunContext
    from pydantic_graph.graph import Graph

    Label = Annotated[str, StringConstraints(pattern=r"^[0-9]+(#[0-9]+)?$")]

    @dataclass
    class ShapeState:
        done: list[Label] = field(default_factory=list)
        answers: dict[str, str] = field(default_factory=dict)

    @dataclass
    class Task(BaseNode[ShapeState, Deps, None]):
        t: int
        visit: int = 1
        k: int = 0
        answer: str | None = None

        async def run(self, ctx: GraphRunContext[ShapeState, Deps]) -> "Task | End[None]":
            hooks = ctx.deps.hooks
            label = instance(self.t, self.visit)
            questions = shape.questions(label)
            hooks.task_begins(label)
            if self.k == 0 and shape.spec(self.t).pre_effect:
                hooks.effect(pre(label), None)  # the work before the first question
            if self.k >= 1:
                ctx.state.answers[questions[self.k - 1]] = self.answer
            if self.k < len(questions):
                return Task(self.t, self.visit, self.k + 1)  # asks the next question
            value = "/".join(ctx.state.answers[q] for q in questions) or None
            hooks.effect(label, value)
            ctx.state.done.append(hooks.output(label, value))
            following = shape.after(shape.stage_of(self.t), self.visit, ctx.state.answers)
            if following is None:
                return End(None)
            return Task(shape.tasks(following[0])[0], following[1])

    graph = Graph(nodes=[Task], state_type=ShapeState, run_end_type=type(None))
    return graph, Task, ShapeState


async def drive_shape(run):
    """``drive`` for a shaped graph: stop at ``End`` or before a question node nobody answered."""
    from pydantic_graph import End

    while not isinstance(run.next_node, End) and (
            run.next_node.k == 0 or run.next_node.answer is not None):
        await run.next()
    return run.next_node


@dataclass
class ShapedBuilt(Built):
    """A shaped workflow's graph: nodes are keyed by ``shape_key`` (a task instance beginning,
    or a question), where a chain's are keyed by task number."""

    state_type: type = None
    node_class: type = None

    def node(self, key, answer: str | None = None):
        t, visit, k = parse_key(key)
        return self.node_class(t=t, visit=visit, k=k, answer=answer if k else None)

    def task_of(self, node):
        t, visit, k = (getattr(node, name, None) for name in ("t", "visit", "k"))
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (t, visit, k)):
            return None
        return shape_key(t, visit, k)

    def is_gate(self, node) -> bool:
        return (getattr(node, "k", 0) or 0) >= 1 and self.task_of(node) is not None

    def key_of_json(self, node):
        if not isinstance(node, dict):
            return None
        return self.task_of(type("Stored", (), {n: node.get(n) for n in ("t", "visit", "k")}))

    def first(self):
        return "1"

    def new_state(self):
        return self.state_type()

    async def drive(self, run):
        return await drive_shape(run)


_CACHE: dict = {}


def build(shape: str, workflow: Workflow) -> Built:
    """Build (once per worker) the graph for ``workflow`` in ``shape``; imports the framework."""
    key = (shape, workflow)
    if key not in _CACHE and workflow.shape is not None:
        if shape != "single":
            raise HarnessError(f"a shaped workflow runs on the single node shape, not {shape!r}")
        graph, task, state_type = shaped_graph(workflow.shape)
        _CACHE[key] = ShapedBuilt(graph, workflow, shape, {}, state_type, task)
    if key not in _CACHE:
        if shape == "single":
            graph, task = single_graph(workflow.n)
            classes = {t: task for t in range(1, workflow.n + 1)}
        else:
            graph, nodes = classes_graph(workflow.n, workflow.gates)
            classes = dict(enumerate(nodes, 1))
        _CACHE[key] = Built(graph, workflow, shape, classes)
    return _CACHE[key]
