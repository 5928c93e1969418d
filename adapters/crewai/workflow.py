"""The CrewAI flow that runs one workflow: one definition, for the case and the scripts.

``flow_source(workflow, persist)`` is the Python source of the flow: ``PendingProvider``,
``feedback_of``, ``WorkflowState``, ``task_body`` and the ``WorkflowFlow`` class.  The case
imports it as a module behind ``CASE_HEADER`` (``module_source``); a reproduction script
(``repro.py``) pastes the same text after its own imports and the runtime's ``crash_point`` and
``effect``.  Why source text rather than classes built with ``type()``: CrewAI builds a flow's
definition from the class and reads method source (``FlowDefinition``); a real module file
behaves exactly as a user's flow does.

Shape (tasks ``1..n`` in order, one ``@listen`` chain, no Crew, Agent or LLM):

- a normal task ``t`` is one method ``task_t``;
- a gated task ``g`` is two methods: ``gate_g`` decorated with ``@human_feedback`` whose provider
  raises ``HumanFeedbackPending`` (the durable pause; its body runs *before* the pause, so it has
  no effect), and ``task_g``, which listens to it and applies the answer (``feedback_of``: the
  ``HumanFeedbackResult`` the listener is passed).  CrewAI cannot pause inside a body and continue
  that body with a value, so the gated effect lives in the listener.  A flow restored from a
  checkpoint re-runs a listener that was in flight with the result as a plain dict and
  ``last_human_feedback`` None; read as the live run reads it, the answer raised
  ``AttributeError`` in our own listener, a tool error (docs/frameworks/crewai.md).

Every task calls ``task_body``: ``crash_point(t, "before its effect")``, ``effect(t, value)``,
``crash_point(t, "after its effect")``, then the task writes its number into the typed state by
assignment (``done: list[int]``, ``answers: dict[int, str]``), as a user's method would; a
gate calls ``crash_point(g, "before its effect")`` before it asks.  In the case, ``crash_point``
and ``effect`` are the engine's ``Hooks`` (``H``, set before every run: ``task_begins``, and
``effect``, where the crash point after the effect fires) and ``BAD_OUTPUT`` the task the
operation's ``BadOutput`` names; in a script they are the runtime's.
"""

from __future__ import annotations

import inspect

from adapters.protocol import Workflow

IMPORTS = '''\
from crewai.flow.async_feedback import HumanFeedbackPending
from crewai.flow.flow import Flow, FlowState, listen, start
from crewai.flow.human_feedback import human_feedback
from crewai.flow.persistence import SQLiteFlowPersistence, persist
'''

PROVIDER = '''\
class PendingProvider:
    """Asked for feedback, it pauses the flow durably (no console, no LLM)."""

    def request_feedback(self, context, flow):
        raise HumanFeedbackPending(context=context)
'''

STATE = '''\
class WorkflowState(FlowState):
    done: list[int] = []
    answers: dict[int, str] = {}
'''

CLASS = '''\
{persist}class WorkflowFlow(Flow[WorkflowState]):
    _skip_auto_memory = True  # no Memory: it would import lancedb and write under the cwd
'''

TASK = '''
    @{decorator}
    def task_{t}(self, result=None):
        return task_body(self.state, {t}, {value})
'''

GATE = '''
    @{decorator}
    @human_feedback(message="gate {t}", provider=PendingProvider())
    def gate_{t}(self):
        crash_point({t}, "before its effect")
        return "gate {t}"
'''

H = None  # the case's: the hooks of the running operation, set before every run
BAD_OUTPUT = None  # the task that writes a value outside the state schema, if any


def crash_point(t, moment):
    """The case's: where the engine's crash points fire.  Before a task's effect (and after
    the previous task's completion) at ``task_begins``; after the effect, in ``effect``."""
    if moment == "before its effect":
        H.task_begins(t)


def effect(t, value):
    """The case's: the task's one effect, a row of the engine's ledger."""
    H.effect(t, value)


def feedback_of(flow, result):
    """The gate's answer: the listener is passed a HumanFeedbackResult, but a flow restored from
    a checkpoint passes it as a plain dict and has no last_human_feedback (crewai 1.15.30)."""
    if isinstance(result, dict):
        return result.get("feedback")
    return result.feedback if result is not None else flow.last_human_feedback.feedback


def task_body(state, t, value):
    """Task t: its one effect (with the answer, if it is a gate), then its number in the state;
    task BAD_OUTPUT writes a string where the schema has a task number."""
    crash_point(t, "before its effect")
    effect(t, value)
    crash_point(t, "after its effect")
    out = "<bad>" if t == BAD_OUTPUT else t
    if out not in state.done:  # a re-run shows in the effects, not as a duplicate
        state.done = [*state.done, out]
    if value is not None:
        state.answers = {**state.answers, t: value}
    return out


def gate_of_method(name: str) -> int | None:
    """``gate_3`` -> 3; anything else -> None."""
    prefix, _, number = name.partition("_")
    return int(number) if prefix == "gate" and number.isdigit() else None


def flow_source(workflow: Workflow, persist: str | None = None) -> str:
    """The flow's definitions for ``workflow``; ``persist``: the argument of the class's
    ``@persist(...)`` (``""``: the registered default persistence), None for no ``@persist``."""
    decorator = f"@persist({persist})\n" if persist is not None else ""
    parts = [PROVIDER, inspect.getsource(feedback_of), STATE, inspect.getsource(task_body),
             CLASS.format(persist=decorator)]
    previous = None
    for t in range(1, workflow.n + 1):
        value = "None"
        if t in workflow.gates:
            parts.append(GATE.format(t=t, decorator="start()" if previous is None else f"listen({previous})"))
            previous, value = f"gate_{t}", "feedback_of(self, result)"
        parts.append(TASK.format(t=t, decorator="start()" if previous is None else f"listen({previous})",
                                 value=value))
        previous = f"task_{t}"
    return "\n\n".join(parts[:5]) + "".join(parts[5:])


def module_source(workflow: Workflow, persist: str | None = None) -> str:
    """The case's module: the imports, the engine's ``crash_point`` and ``effect``, the flow."""
    case = [inspect.getsource(f) for f in (crash_point, effect)]
    return "\n\n".join([IMPORTS, "H = None\nBAD_OUTPUT = None\n", *case, flow_source(workflow, persist)])
