"""Build the contract's workflow (tasks 1..n, gates pause for a resume value) in LangGraph.

It speaks the standard library, LangGraph and pydantic only.

Two API styles, each an adapter variant:

- ``graph``: a ``StateGraph`` with one node per task (``t1`` -> ``t2`` -> ...), so one superstep
  and one checkpoint per task.  The state has two channels: ``done`` (a list, appended to) and
  ``answers`` (a dict, merged).  ``state="typed"`` declares it as a ``TypedDict``;
  ``state="pydantic"`` as a Pydantic model (``done: list[int]``, ``answers: dict[int,
  Literal[values]]``), the shape of langgraph issue #6491, where a node can still write a value
  outside the schema and the fuzzer sees what the saver keeps and what later reads do.
- ``func``: an ``@entrypoint`` calling one ``@task`` per task.  The tasks' results are stored
  as pending writes of the entrypoint's checkpoint; the entrypoint body re-runs on resume and
  the completed ``@task`` calls are memoised.  A task returns ``{"task": t, "done": output,
  "answer": v}`` so that ``read`` can tell its stored result apart from the others.

Every task body is the contract's: ``task_begins`` first (on every execution, re-runs too),
then the gate's ``interrupt()`` (whose value names the gate), the effect, the output.  ``box``
is a ``Box``, whose ``hooks`` the caller sets before each run: the engine's hooks in the case
(``driver.py``), the crash points and the effect log of a reproduction script, which pastes
these functions (``repro.py``).
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal

GATE_KEY = "gate"  # interrupt({"gate": t}): how a stored interrupt names its gate


class Box:
    """Where the task bodies find the current run's hooks."""

    def __init__(self, hooks=None):
        self.hooks = hooks


def merge_answers(left: dict | None, right: dict | None) -> dict:
    """The ``answers`` reducer: later answers override earlier ones, key by key."""
    return {**(left or {}), **(right or {})}


def initial_input(spec: dict) -> dict:
    """What ``start`` (and a ``recover`` with nothing persisted) passes as the run's input."""
    return {"done": [], "answers": {}}


def state_schema(spec: dict):
    if spec.get("state", "typed") == "pydantic":
        from pydantic import create_model

        values = tuple(spec["values"])
        return create_model(
            "ResumeState",
            done=(Annotated[list[int], operator.add], []),
            answers=(Annotated[dict[int, Literal[values]], merge_answers], {}),
        )
    from typing_extensions import TypedDict

    class ResumeState(TypedDict, total=False):
        done: Annotated[list, operator.add]
        answers: Annotated[dict, merge_answers]

    return ResumeState


def task_body(spec: dict, box, t: int):
    """Run task ``t``'s body once; returns ``(output, value)``."""
    from langgraph.types import interrupt

    hooks = box.hooks
    hooks.task_begins(t)
    value = interrupt({GATE_KEY: t}) if t in spec["gates"] else None
    hooks.effect(t, value)
    return hooks.output(t, value), value


def build(spec: dict, saver, box):
    """The compiled workflow (a Pregel: ``invoke``, ``get_state``, ``update_state``)."""
    if spec["api"] == "func":
        return build_entrypoint(spec, saver, box)
    return build_graph(spec, saver, box)


def build_graph(spec: dict, saver, box):
    from langgraph.graph import END, START, StateGraph

    def node_for(t: int):
        def node(state: Any) -> dict:
            output, value = task_body(spec, box, t)
            update: dict = {"done": [output]}
            if value is not None:
                update["answers"] = {t: value}
            return update

        node.__name__ = f"t{t}"
        return node

    builder = StateGraph(state_schema(spec))
    previous = START
    for t in range(1, spec["n"] + 1):
        builder.add_node(f"t{t}", node_for(t))
        builder.add_edge(previous, f"t{t}")
        previous = f"t{t}"
    builder.add_edge(previous, END)
    return builder.compile(checkpointer=saver)


def build_entrypoint(spec: dict, saver, box):
    from langgraph.func import entrypoint, task

    @task
    def step(t: int) -> dict:
        output, value = task_body(spec, box, t)
        return {"task": t, "done": output, "answer": value}

    @entrypoint(checkpointer=saver)
    def workflow(inputs: dict) -> dict:
        done, answers = [], {}
        for t in range(1, spec["n"] + 1):
            result = step(t).result()
            done.append(result["done"])
            if result["answer"] is not None:
                answers[result["task"]] = result["answer"]
        return {"done": done, "answers": answers}

    return workflow
