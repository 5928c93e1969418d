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

The case builds its graph with ``build``; a reproduction script pastes ``State``, ``Deps``,
``task_body``, the shape's graph function, ``drive`` and ``outcome`` by their source
(``repro.py``) and calls them as ``build`` does.  So they import the framework inside:
this module imports none at import time, only ``build`` does, when a worker opens a case.
"""

import typing  # no ``from __future__ import annotations``: node annotations must be real types
from dataclasses import dataclass, field, fields, make_dataclass

from adapters.protocol import Hooks, Workflow

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


_CACHE: dict = {}


def build(shape: str, workflow: Workflow) -> Built:
    """Build (once per worker) the graph for ``workflow`` in ``shape``; imports the framework."""
    key = (shape, workflow)
    if key not in _CACHE:
        if shape == "single":
            graph, task = single_graph(workflow.n)
            classes = {t: task for t in range(1, workflow.n + 1)}
        else:
            graph, nodes = classes_graph(workflow.n, workflow.gates)
            classes = dict(enumerate(nodes, 1))
        _CACHE[key] = Built(graph, workflow, shape, classes)
    return _CACHE[key]
