"""The Python source of the CrewAI flow that runs one workflow, generated per ``Workflow``.

Why source text rather than classes built with ``type()``: CrewAI builds a flow's definition
from the class and reads method source (``FlowDefinition``); a real module file behaves exactly as
a user's flow does.

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

Every task body follows ``adapters.protocol.Hooks``: ``H.task_begins``, ``H.effect``, then the
task writes ``H.output`` into the typed state by assignment (``done: list[int]``,
``answers: dict[int, str]``), as a user's method would.  ``H`` is a module global that the case
(or the repro script) sets before each run.
"""

from __future__ import annotations

import inspect

from adapters.protocol import Workflow

HEADER = '''\
from crewai.flow.flow import Flow, FlowState, listen, start
from crewai.flow.async_feedback import HumanFeedbackPending
from crewai.flow.human_feedback import human_feedback
from crewai.flow.persistence import SQLiteFlowPersistence, persist

H = None  # the hooks of the running operation: set by the caller before every run


class PendingProvider:
    """A HumanFeedbackProvider that pauses the flow durably (no console, no LLM)."""

    def request_feedback(self, context, flow):
        raise HumanFeedbackPending(context=context)


PROVIDER = PendingProvider()


{feedback_of}

class WorkflowState(FlowState):
    done: list[int] = []
    answers: dict[int, str] = {}


{persist}class WorkflowFlow(Flow[WorkflowState]):
    _skip_auto_memory = True  # a Memory would import lancedb and write under the cwd
'''

PERSIST = "@persist(SQLiteFlowPersistence({path!r}))\n"
# A custom store (--store): CrewAI's documented hook for a custom backend, the default
# persistence that set_flow_persistence_factory registers, which @persist() resolves.
PERSIST_DEFAULT = "@persist()\n"

TASK = '''
    @{decorator}
    def task_{t}(self, result=None):
        H.task_begins({t})
        value = {value}
        H.effect({t}, value)
        out = H.output({t}, value)
        if out not in self.state.done:  # a re-run shows in the effects, not as a duplicate
            self.state.done = [*self.state.done, out]{answer}
        return out
'''

GATE = '''
    @{decorator}
    @human_feedback(message="gate {t}", provider=PROVIDER)
    def gate_{t}(self):
        H.task_begins({t})  # runs before the pause; the effect is in task_{t}
        return "gate {t}"
'''


def feedback_of(flow, result):
    """The gate's answer: the listener is passed a HumanFeedbackResult, but a flow restored from
    a checkpoint passes it as a plain dict and has no last_human_feedback (crewai 1.15.30)."""
    if isinstance(result, dict):
        return result.get("feedback")
    return result.feedback if result is not None else flow.last_human_feedback.feedback


def gate_of_method(name: str) -> int | None:
    """``gate_3`` -> 3; anything else -> None."""
    prefix, _, number = name.partition("_")
    return int(number) if prefix == "gate" and number.isdigit() else None


def flow_source(workflow: Workflow, persist_path: str | None = None,
                persist_default: bool = False) -> str:
    """The module text defining ``WorkflowFlow`` for ``workflow``; with ``persist_path``, the class
    is decorated ``@persist(SQLiteFlowPersistence(persist_path))`` (class-level: every method);
    with ``persist_default``, ``@persist()`` (the registered default persistence)."""
    persist = PERSIST.format(path=persist_path) if persist_path else ""
    if persist_default:
        persist = PERSIST_DEFAULT
    # One definition of feedback_of, in the flow module and in the scripts (repro.py).
    parts = [HEADER.replace("{persist}", persist)
             .replace("{feedback_of}", inspect.getsource(feedback_of))]
    previous = None
    for t in range(1, workflow.n + 1):
        if t in workflow.gates:
            decorator = "start()" if previous is None else f"listen({previous})"
            parts.append(GATE.format(t=t, decorator=decorator))
            previous = f"gate_{t}"
            parts.append(
                TASK.format(
                    t=t,
                    decorator=f"listen({previous})",
                    value="feedback_of(self, result)",
                    answer=f"\n        self.state.answers = {{**self.state.answers, {t}: value}}",
                )
            )
        else:
            decorator = "start()" if previous is None else f"listen({previous})"
            parts.append(TASK.format(t=t, decorator=decorator, value="None", answer=""))
        previous = f"task_{t}"
    return "".join(parts)
