"""The contract's linear workflow (tasks ``1..n``, gates) as a LlamaIndex ``Workflow``: one
definition, which the cases run and a reproduction script pastes.

Steps are routed by the event type they take, so task ``t`` is a step taking ``Done<t-1>``
(``StartEvent`` for task 1) and returning ``Done<t>`` (``StopEvent`` for task n).  A gate is
written one of the two ways users write it (the variant's ``gate`` option):

- ``wait``: the task's step calls ``ctx.wait_for_event(Ans<t>, waiter_event=Ask<t>(), ...)``
  before its effect.  The runtime suspends the step and *replays it from its beginning* when the
  answer arrives (the documented PrefixReplay of ``wait_for_event``), so the task's first line
  runs once when the gate asks and once when it is answered, exactly as the reference's
  ``Begin(t)``.
- ``event``: a step ``ask<t>`` takes the previous event and returns ``Ask<t>`` (an
  ``InputRequiredEvent``, written to the stream); the task's step takes ``Ans<t>`` (a
  ``HumanResponseEvent``) sent by the caller.

``workflow_source(plan, gate)`` writes the class as Python source; ``workflow_class`` executes
that source for a case, and a script (``repro.py``) pastes the same source, with ``task_body``
and ``events.RunState`` by ``inspect.getsource``.  The task bodies call ``crash_point``,
``effect`` and read ``BAD_OUTPUT``: in a script, the reproduction runtime's; in a case, the
functions below, which hand the call to the engine's hooks of the operation in progress
(``SLOT``, set by ``operation``) and follow ``adapters.protocol.Hooks``.  Imports the framework:
call only after ``prepare()``.
"""

from __future__ import annotations

import contextlib

from adapters.protocol import CrashInjected
from adapters.protocol import Workflow as Plan
from workflows import Context, Workflow, step
from workflows.events import StartEvent, StopEvent

from . import events
from .events import RunState, event_class

BAD_OUTPUT = None  # the task that writes a value outside the state schema in this operation


async def task_body(ctx, t, value):
    """Task t's work: its one effect, then its result in the typed state."""
    effect(t, value)
    crash_point(t, "after its effect")
    async with ctx.store.edit_state() as state:
        state.done = [*state.done, "<bad>" if t == BAD_OUTPUT else t]
        if value is not None:
            state.answers = {**state.answers, t: value}


def workflow_source(plan: Plan, gate: str, name: str = "Linear") -> str:
    """``class <name>(Workflow)``: one ``@step`` per task (and per ``ask<t>`` in the ``event``
    idiom), each starting with the task's crash point "before its effect"."""
    lines = [f"class {name}(Workflow):"]
    for t in range(1, plan.n + 1):
        takes = "StartEvent" if t == 1 else f"Done{t - 1}"
        gives = "StopEvent" if t == plan.n else f"Done{t}"
        begin = f'        crash_point({t}, "before its effect")'
        value = "None"
        wait = []
        if t in plan.gates and gate == "event":
            lines += ["    @step", f"    async def ask{t}(self, ev: {takes}) -> Ask{t}:", begin,
                      f"        return Ask{t}()"]
            takes, value = f"Ans{t}", "ev.response"
        elif t in plan.gates:
            wait = [f"        answer = await ctx.wait_for_event(Ans{t}, waiter_event=Ask{t}(), "
                    f'waiter_id="gate{t}", timeout=None)']
            value = "answer.response"
        done = 'StopEvent(result="done")' if t == plan.n else f"Done{t}()"
        lines += ["    @step",
                  f"    async def task{t}(self, ctx: Context[RunState], ev: {takes}) -> {gives}:",
                  begin, *wait, f"        await task_body(ctx, {t}, {value})",
                  f"        return {done}"]
    return "\n".join(lines)


def event_names(plan: Plan) -> list[str]:
    """The event classes the workflow's steps name: ``Done<t>``, and ``Ask<g>``, ``Ans<g>`` per
    gate ``g``."""
    names = [f"Done{t}" for t in range(1, plan.n)]
    return names + [f"{kind}{g}" for g in sorted(plan.gates) for kind in ("Ask", "Ans")]


_CLASSES: dict = {}


def workflow_class(plan: Plan, gate: str) -> type:
    """The ``Workflow`` subclass for ``plan`` and gate idiom ``gate``: ``workflow_source``
    executed with this module's ``task_body`` and crash points and the events of ``events.py``
    (cached: the DBOS runtime registers steps by name, once per process)."""
    key = (plan.n, tuple(sorted(plan.gates)), gate)
    cls = _CLASSES.get(key)
    if cls is None:
        name = f"Linear{plan.n}G{'_'.join(map(str, key[1])) or 'none'}{gate.capitalize()}"
        scope = {"__name__": __name__, "Workflow": Workflow, "step": step, "Context": Context,
                 "RunState": RunState, "StartEvent": StartEvent, "StopEvent": StopEvent,
                 "task_body": task_body, "crash_point": crash_point}
        scope.update({n: getattr(events, n) for n in event_names(plan)})
        exec(compile(workflow_source(plan, gate, name), __file__, "exec", dont_inherit=True), scope)
        cls = scope[name]
        globals()[name] = cls  # resolvable by qualified name, as the serializers expect
        _CLASSES[key] = cls
    return cls


def build(plan: Plan, gate: str, **kwargs) -> Workflow:
    """A workflow instance with ``timeout=None`` (the default is 45 s)."""
    return workflow_class(plan, gate)(timeout=None, **kwargs)


def answer_event(task: int, value: str):
    return event_class("Ans", task)(response=value)


def answer_classes(plan: Plan) -> list[type]:
    """Events that appear in no step signature under the ``wait`` idiom (the server's serializer
    allow-list needs them registered)."""
    return [event_class(k, g) for g in sorted(plan.gates) for k in ("Ask", "Ans")]


# -- what the task bodies call in a case: the engine's hooks ---------------------------------------


class RunSlot:
    """The hooks of the operation in progress, and the injected crash if one fired.

    ``crash`` lets a case re-raise ``CrashInjected`` when the framework reports the failure only
    as a stored event (the server) rather than by raising the step's exception."""

    def __init__(self):
        self.hooks = None
        self.crash: CrashInjected | None = None


SLOT = RunSlot()  # one operation runs at a time in a process


@contextlib.contextmanager
def operation(hooks, plan: Plan):
    """The task bodies call ``hooks`` inside the block; ``BAD_OUTPUT`` is the task whose output
    the operation wants outside the schema (``Hooks.wants_bad_output``), if any."""
    global BAD_OUTPUT
    SLOT.hooks, SLOT.crash = hooks, None
    BAD_OUTPUT = next((t for t in range(1, plan.n + 1) if hooks.wants_bad_output(t)), None)
    try:
        yield SLOT
    finally:
        SLOT.hooks, BAD_OUTPUT = None, None


def crash_point(task: int, moment: str) -> None:
    """"before its effect" is the first line of every execution of a task's step:
    ``Hooks.task_begins``, where the engine fires those crash points; "after its effect" fires in
    ``Hooks.effect`` (nothing to do here)."""
    if moment == "before its effect":
        with _remember_crash():
            SLOT.hooks.task_begins(task)


def effect(task: int, value) -> None:
    with _remember_crash():
        SLOT.hooks.effect(task, value)


@contextlib.contextmanager
def _remember_crash():
    """Record ``CrashInjected`` on the slot and let it propagate (never swallows anything)."""
    try:
        yield
    except CrashInjected as exc:
        SLOT.crash = exc
        raise


__all__ = ["SLOT", "RunSlot", "answer_classes", "answer_event", "build", "event_names", "events",
           "operation", "task_body", "workflow_class", "workflow_source"]
