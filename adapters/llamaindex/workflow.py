"""Build the contract's linear workflow (tasks ``1..n``, gates) as a LlamaIndex ``Workflow``.

Steps are routed by the event type they take, so task ``t`` is a step taking ``Done<t-1>``
(``StartEvent`` for task 1) and returning ``Done<t>`` (``StopEvent`` for task n).  A gate is
written one of the two ways users write it (the variant's ``gate`` option):

- ``wait``: the task's step calls ``ctx.wait_for_event(Ans<t>, waiter_event=Ask<t>(), ...)``
  before its effect.  The runtime suspends the step and *replays it from its beginning* when the
  answer arrives (the documented PrefixReplay of ``wait_for_event``), so ``task_begins(t)`` runs
  once when the gate asks and once when it is answered, exactly as the reference's ``Begin(t)``.
- ``event``: a step ``ask<t>`` takes the previous event and returns ``Ask<t>`` (an
  ``InputRequiredEvent``, written to the stream); the task's step takes ``Ans<t>`` (a
  ``HumanResponseEvent``) sent by the caller.

Every task body follows ``adapters.protocol.Hooks``; the hooks of the running operation are read
from ``workflow._resumefuzz`` (a ``RunSlot``) because one workflow object serves every operation of
a case.  Imports the framework: call only after ``prepare()``.
"""

from __future__ import annotations

from adapters.protocol import CrashInjected
from adapters.protocol import Workflow as Plan
from workflows import Context, Workflow, step
from workflows.events import StartEvent, StopEvent

from . import events
from .events import RunState, event_class


class RunSlot:
    """The hooks of the operation in progress, and the injected crash if one fired.

    ``crash`` lets a case re-raise ``CrashInjected`` when the framework reports the failure only
    as a stored event (the server) rather than by raising the step's exception."""

    def __init__(self):
        self.hooks = None
        self.crash: CrashInjected | None = None


_CLASSES: dict = {}


def workflow_class(plan: Plan, gate: str) -> type:
    """The ``Workflow`` subclass for ``plan`` and gate idiom ``gate`` (cached: the DBOS runtime
    registers steps by name, once per process)."""
    key = (plan.n, tuple(sorted(plan.gates)), gate)
    cls = _CLASSES.get(key)
    if cls is None:
        name = f"Linear{plan.n}G{'_'.join(map(str, key[1])) or 'none'}{gate.capitalize()}"
        namespace = {"__module__": __name__, "__qualname__": name}
        for t in range(1, plan.n + 1):
            namespace.update(_steps_for(plan, t, gate, name))
        cls = type(name, (Workflow,), namespace)
        globals()[name] = cls  # resolvable by qualified name, as the serializers expect
        _CLASSES[key] = cls
    return cls


def build(plan: Plan, gate: str, slot: RunSlot | None = None, **kwargs) -> Workflow:
    """A workflow instance with ``timeout=None`` (the default is 45 s) reading its hooks from
    ``slot`` (a fresh one if not given)."""
    wf = workflow_class(plan, gate)(timeout=None, **kwargs)
    wf._resumefuzz = slot if slot is not None else RunSlot()
    return wf


def answer_event(task: int, value: str):
    return event_class("Ans", task)(response=value)


def answer_classes(plan: Plan) -> list[type]:
    """Events that appear in no step signature under the ``wait`` idiom (the server's serializer
    allow-list needs them registered)."""
    return [event_class(k, g) for g in sorted(plan.gates) for k in ("Ask", "Ans")]


def _steps_for(plan: Plan, t: int, gate: str, owner: str) -> dict:
    previous = StartEvent if t == 1 else event_class("Done", t - 1)
    result = StopEvent if t == plan.n else event_class("Done", t)
    steps = {}
    if t in plan.gates and gate == "event":
        ask = event_class("Ask", t)

        async def ask_body(self, ctx, ev):
            slot = self._resumefuzz
            with _remember_crash(slot):
                slot.hooks.task_begins(t)
            return ask()

        steps[f"ask{t}"] = _as_step(ask_body, owner, f"ask{t}", previous, ask)
        previous = event_class("Ans", t)

    async def task_body(self, ctx, ev):
        slot = self._resumefuzz
        with _remember_crash(slot):
            hooks = slot.hooks
            hooks.task_begins(t)  # first line, on every execution (the wait idiom's replay too)
            value = None
            if t in plan.gates:
                if gate == "wait":
                    answer = await ctx.wait_for_event(
                        event_class("Ans", t),
                        waiter_event=event_class("Ask", t)(),
                        waiter_id=f"gate{t}",
                        timeout=None,  # the default is 2000 s
                    )
                else:
                    answer = ev
                value = answer.response
            hooks.effect(t, value)
            out = hooks.output(t, value)
            async with ctx.store.edit_state() as state:
                state.done = [*state.done, out]
                if value is not None:
                    state.answers = {**state.answers, t: value}
        return StopEvent(result="done") if t == plan.n else result()

    steps[f"task{t}"] = _as_step(task_body, owner, f"task{t}", previous, result)
    return steps


def _as_step(fn, owner: str, name: str, accepts: type, returns: type):
    fn.__name__, fn.__qualname__ = name, f"{owner}.{name}"  # a method, not a free function
    fn.__annotations__ = {"ctx": Context[RunState], "ev": accepts, "return": returns}
    return step(fn)


class _remember_crash:
    """Record ``CrashInjected`` on the slot and let it propagate (never swallows anything)."""

    def __init__(self, slot: RunSlot):
        self.slot = slot

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if isinstance(exc, CrashInjected):
            self.slot.crash = exc
        return False


__all__ = ["RunSlot", "answer_classes", "answer_event", "build", "events", "workflow_class"]
