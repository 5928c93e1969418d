"""Event and state classes of the generated workflows, resolvable by qualified name.

LlamaIndex serializes events and typed state by qualified name (``module.Class``) and resolves
them by importing the module on decode: the snapshot store, the server's tick journal and DBOS's
step outputs all hold such names.  A workflow of any length needs ``Done<t>``, ``Ask<t>`` and
``Ans<t>`` classes for every task ``t``, so this module makes them on first access (PEP 562
``__getattr__``): a fresh worker that decodes a snapshot written by another process resolves the
same names to equivalent classes without having built the workflow first.

Imported only after ``LlamaIndexAdapter.prepare()``: it imports the framework.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field
from workflows.events import Event, HumanResponseEvent, InputRequiredEvent


class RunState(BaseModel):
    """The workflow state of the contract: ``done`` (tasks in order) and ``answers`` (gate ->
    value).  A plain typed model, as the LlamaIndex docs write one (``Context[RunState]``, edited
    with ``ctx.store.edit_state()``): no ``validate_assignment``, so what a task writes is not
    validated on assignment."""

    done: list[int] = Field(default_factory=list)
    answers: dict[int, str] = Field(default_factory=dict)


_KINDS = {"Done": Event, "Ask": InputRequiredEvent, "Ans": HumanResponseEvent}
_NAME = re.compile(r"^(Done|Ask|Ans)([1-9][0-9]{0,3})$")


def event_class(kind: str, task: int) -> type:
    """``Done<t>`` (task t finished; task t+1 takes it), ``Ask<t>`` (gate t asks, an
    ``InputRequiredEvent``), ``Ans<t>`` (the answer to gate t, a ``HumanResponseEvent``)."""
    name = f"{kind}{task}"
    cls = globals().get(name)
    if cls is None:
        cls = type(name, (_KINDS[kind],), {"__module__": __name__, "__qualname__": name})
        globals()[name] = cls
    return cls


def __getattr__(name: str):
    match = _NAME.match(name)
    if match is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return event_class(match.group(1), int(match.group(2)))
