"""The contract's workflow as a pydantic-graph 1.x ``Graph``, in the two node shapes users write.

``single``: one parametrised node class ``Task(t, answer)`` serves every task (the persisted node is
``{"t": 2, "answer": null, "node_id": "Task"}`` and the snapshot schema has no discriminator,
``persistence/_utils.py:30``).  ``classes``: N distinct classes ``T1..TN``, each returning the next,
only the gated ones with an ``answer`` field (``{"node_id": "T2", "answer": null}``; ``node_id``
selects the class, ``persistence/_utils.py:32-34``).  The persisted schema differs, which matters
for tampering and for decoding, so the shape is a variant axis.

There is no interrupt primitive in pydantic-graph: a gate is a node whose ``answer`` is unset, and
the driver stops before running it (``case.py``).  The node object carries the resume value.

This module imports no framework at import time: ``build`` does, when a worker opens a case.
"""

import typing  # no ``from __future__ import annotations``: node annotations must be real types
from dataclasses import dataclass, field, fields, make_dataclass

from adapters.protocol import Hooks, Workflow

SHAPES = ("single", "classes")


@dataclass
class WfState:
    """The workflow state: ``done`` (tasks completed, in order) and ``answers`` (gate -> value)."""

    done: list[int] = field(default_factory=list)
    answers: dict[int, str] = field(default_factory=dict)


@dataclass
class Deps:
    """What the node bodies need and the store must not hold: the engine's hooks."""

    hooks: Hooks
    gates: frozenset = frozenset()


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
        if self.shape == "single":
            return getattr(node, "t", None)
        name = type(node).__name__
        return int(name[1:]) if name[:1] == "T" and name[1:].isdigit() else None

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
        _CACHE[key] = _single(workflow) if shape == "single" else _classes(workflow)
    return _CACHE[key]


def _body(node, task: int, ctx, answer: str | None) -> None:
    """The task body of docs/contract.md: begin, (gate value), one effect, write the output."""
    hooks = ctx.deps.hooks
    hooks.task_begins(task)
    value = answer if task in _gates(ctx) else None
    hooks.effect(task, value)
    if value is not None:
        ctx.state.answers[task] = value
    ctx.state.done.append(hooks.output(task, value))


def _gates(ctx) -> frozenset:
    return ctx.deps.gates


def _single(workflow: Workflow) -> Built:
    from pydantic_graph import BaseNode, End, GraphRunContext
    from pydantic_graph.graph import Graph

    n = workflow.n

    @dataclass
    class Task(BaseNode[WfState, Deps, None]):
        t: int
        answer: str | None = None

        async def run(self, ctx: GraphRunContext[WfState, Deps]):
            _body(self, self.t, ctx, self.answer)
            return End(None) if self.t >= n else Task(self.t + 1)

    # Edges come from the return annotation (basenode.py:105-136); give it as real types.
    Task.run.__annotations__["return"] = typing.Union[Task, End[None]]
    graph = Graph(nodes=[Task], name="resumefuzz", state_type=WfState, run_end_type=type(None))
    return Built(graph, workflow, "single", {t: Task for t in range(1, n + 1)})


def _classes(workflow: Workflow) -> Built:
    from pydantic_graph import BaseNode, End, GraphRunContext
    from pydantic_graph.graph import Graph

    n = workflow.n
    classes: dict[int, type] = {}
    following = None  # the class of task t + 1, built first
    for t in range(n, 0, -1):

        def run(self, ctx, _t=t, _next=following):
            return _run_classes(self, ctx, _t, _next)

        async def arun(self, ctx: GraphRunContext[WfState, Deps], _run=run):
            return _run(self, ctx)

        arun.__annotations__["return"] = End[None] if following is None else following
        fieldspec = [("answer", typing.Optional[str], None)] if t in workflow.gates else []
        cls = make_dataclass(
            f"T{t}", fieldspec, bases=(BaseNode[WfState, Deps, None],), namespace={"run": arun}
        )
        cls.__module__ = __name__
        classes[t] = following = cls
    graph = Graph(
        nodes=[classes[t] for t in range(1, n + 1)],
        name="resumefuzz",
        state_type=WfState,
        run_end_type=type(None),
    )
    return Built(graph, workflow, "classes", classes)


def _run_classes(node, ctx, task: int, following):
    from pydantic_graph import End

    _body(node, task, ctx, getattr(node, "answer", None))
    return End(None) if following is None else following()
