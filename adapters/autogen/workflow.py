"""The AutoGen teams a workflow becomes: one deterministic ``BaseChatAgent`` per task, no LLM.

This module imports AutoGen at import time, so the adapter imports it only from ``prepare()`` and
``open()``.  It talks to the caller's hooks by duck typing (``task_begins``, ``effect``,
``output``), so it needs nothing of resumefuzz: a finding's reproduction script (``repro.py``)
pastes ``TaskOutput``, ``TaskAgent`` and the variant's team builder (``swarm_team``,
``loop_graph``, ``split_graph``) from here, with hooks of its own (its crash points and effect
log), and the case builds the same teams through ``build_team``.

Every task writes its result as a typed ``StructuredMessage[TaskOutput]`` (AgentChat's own way of
carrying structured data between agents): the message thread *is* the workflow state that
``save_state()`` hands back.  A gate asks for its answer with a message whose content starts with
``__INTERRUPT__ t<g>``; the caller's answer is the newest message in the gate's buffer, written by
``"user"`` and starting with ``resume:``.  Three gate shapes, one per team spelling:

- ``loop`` (GraphFlow): the gate asks itself; a conditional self-edge re-enqueues it and
  ``TextMentionTermination("__INTERRUPT__")`` ends ``run()``.  A new run carries the answer.
  The self-edge has an activation group of its own (``DiGraphBuilder``'s documented loop-back
  spelling); ``loopany`` instead puts the forward edge and the self-edge in one ``"any"`` group.
- ``split`` (GraphFlow): an effect-free node ``ask<g>`` asks before the gate; no cycle.
- ``handoff`` (Swarm): the gate hands off to ``"user"`` and ``HandoffTermination("user")`` ends
  ``run()``; the answer comes back as ``HandoffMessage(source="user", target="t<g>")``.
"""

from __future__ import annotations

from pydantic import BaseModel

from autogen_agentchat.agents import BaseChatAgent
from autogen_agentchat.base import Response
from autogen_agentchat.conditions import (
    HandoffTermination,
    SourceMatchTermination,
    TextMentionTermination,
)
from autogen_agentchat.messages import HandoffMessage, StructuredMessage, TextMessage
from autogen_agentchat.teams import DiGraphBuilder, GraphFlow, Swarm

INTERRUPT = "__INTERRUPT__"
ANSWER = "resume:"
USER = "user"
START = "start"
GRAPH_COMPLETE = "Digraph execution is complete"  # autogen_agentchat .../_digraph_group_chat.py:22


class TaskOutput(BaseModel):
    """What task ``task`` writes into the workflow state (``out`` is ``task`` itself)."""

    task: int
    out: int
    answer: str | None = None


Output = StructuredMessage[TaskOutput]


def is_request(message) -> bool:
    """Does ``message`` ask the caller for an answer?"""
    content = getattr(message, "content", None)
    return isinstance(content, str) and content.startswith(INTERRUPT)


def answer_in(messages) -> str | None:
    """The answer addressed to a gate: the newest message of its buffer, if the caller wrote it."""
    if not messages:
        return None
    last = messages[-1]
    content = getattr(last, "content", None)
    if last.source == USER and isinstance(content, str) and content.startswith(ANSWER):
        return content[len(ANSWER):]
    return None


def answer_message(shape: str, value: str, gate: int):
    """The task of the run that carries an answer (the documented resume spelling per team)."""
    if shape == "handoff":
        return HandoffMessage(source=USER, target=f"t{gate}", content=ANSWER + value)
    return TextMessage(source=USER, content=ANSWER + value)


def start_message():
    return TextMessage(source=USER, content=START)


class TaskAgent(BaseChatAgent):
    """Task ``task`` of the workflow; ``kind`` is task, gate, ask (split's asker) or end (a leaf).

    Every execution calls ``hooks.task_begins`` first (the asking visit of a gate too: in the
    reference a gate begins, then interrupts), then the effect, then writes its output.
    """

    def __init__(self, name: str, task: int, hooks, *, kind: str, shape: str, handoff_to=None):
        super().__init__(name, f"task {task} ({kind})")
        self.task, self.hooks, self.kind, self.shape, self.handoff_to = task, hooks, kind, shape, handoff_to

    @property
    def produced_message_types(self):
        return (Output, TextMessage, HandoffMessage)

    async def on_messages(self, messages, cancellation_token) -> Response:
        if self.kind == "end":
            return Response(chat_message=TextMessage(content="end", source=self.name))
        t = self.task
        self.hooks.task_begins(t)
        if self.kind == "ask":
            return Response(chat_message=self._request())
        value = None
        if self.kind == "gate":
            value = answer_in(messages)
            if value is None:
                if self.shape == "split":
                    # The split shape's gate has nothing to ask with (its asker did): this is
                    # the application's dead end, not AutoGen's refusal.  AutoGen re-raises an
                    # agent's exception as a bare RuntimeError, so the hooks are told first.
                    error = RuntimeError(f"gate t{t} ran without an answer in its buffer")
                    getattr(self.hooks, "application_failed", lambda exc: None)(error)
                    raise error
                return Response(chat_message=self._request())
        self.hooks.effect(t, value)
        out = self.hooks.output(t, value)
        if isinstance(out, int) and not isinstance(out, bool):
            content = TaskOutput(task=t, out=out, answer=value)
        else:  # BadOutput: a value outside the schema, built as a buggy agent would
            content = TaskOutput.model_construct(task=t, out=out, answer=value)
        output = Output(content=content, source=self.name)
        if self.handoff_to is None:
            return Response(chat_message=output)
        handoff = HandoffMessage(target=self.handoff_to, content=f"t{t} done", source=self.name)
        return Response(chat_message=handoff, inner_messages=[output])

    def _request(self):
        text = f"{INTERRUPT} t{self.task}"
        if self.shape == "handoff":
            return HandoffMessage(target=USER, content=text, source=self.name)
        return TextMessage(content=text, source=self.name)

    async def on_reset(self, cancellation_token) -> None:
        pass


def build_team(shape: str, step: bool, n: int, gates, hooks):
    """A fresh team for the workflow (tasks ``1..n``, ``gates``); ``step``: ``max_turns=1``."""
    max_turns = 1 if step else None
    if shape == "handoff":
        return swarm_team(n, gates, hooks, max_turns)
    if shape in ("loop", "loopany"):
        return loop_graph(n, gates, hooks, max_turns, shape)
    if shape == "split":
        return split_graph(n, gates, hooks, max_turns)
    raise ValueError(f"unknown gate shape {shape!r}")


def swarm_team(n: int, gates, hooks, max_turns):
    """Swarm t1 -> t2 -> ... by handoffs: a gate hands off to the user, which ends ``run()``, and
    the last task's output ends it too."""
    agents = [
        TaskAgent(
            f"t{t}", t, hooks, kind="gate" if t in gates else "task", shape="handoff",
            handoff_to=f"t{t + 1}" if t < n else None,
        )
        for t in range(1, n + 1)
    ]
    stop = HandoffTermination(target=USER) | SourceMatchTermination([f"t{n}"])
    return Swarm(agents, termination_condition=stop, max_turns=max_turns)


def not_request(message) -> bool:
    return not is_request(message)


def loop_graph(n: int, gates, hooks, max_turns, shape: str = "loop"):
    """GraphFlow t1 -> t2 -> ...: a gate loops back to itself while it asks, and the asking ends
    ``run()`` (``shape``: ``loop`` or ``loopany``, which spell the loop-back edge apart)."""
    builder = DiGraphBuilder()
    names = [f"t{t}" for t in range(1, n + 1)]
    for t, name in enumerate(names, 1):
        builder.add_node(TaskAgent(name, t, hooks, kind="gate" if t in gates else "task", shape=shape))
    if n in gates:  # a self-looping node is no leaf, and a graph needs one: add an effect-free end
        names.append("end")
        builder.add_node(TaskAgent("end", 0, hooks, kind="end", shape=shape))

    def into(target: str) -> dict:
        # loopany: every edge into a gate (its own loop too) shares one "any" activation group.
        gate = target.startswith("t") and int(target[1:]) in gates
        if shape == "loopany" and gate:
            return {"activation_group": f"into_{target}", "activation_condition": "any"}
        return {}

    # loop: the DiGraphBuilder docstring's spelling (_graph_builder.py:77-82, "A -> B -> C -> B"):
    # the forward edge keeps its default group, the loop-back edge has a group of its own.
    back = {"activation_group": "loop_back"} if shape == "loop" else {}
    for i, name in enumerate(names[:n]):
        t = i + 1
        nxt = names[i + 1] if i + 1 < len(names) else None
        if t in gates:
            builder.add_edge(name, name, condition=is_request, **(back or into(name)))
            if nxt:
                builder.add_edge(name, nxt, condition=not_request, **into(nxt))
        elif nxt:
            builder.add_edge(name, nxt, **into(nxt))
    builder.set_entry_point(names[0])
    asking = [f"t{g}" for g in sorted(gates)]
    stop = TextMentionTermination(INTERRUPT, sources=asking) if asking else None
    return GraphFlow(
        builder.get_participants(), graph=builder.build(), termination_condition=stop,
        max_turns=max_turns,
    )


def split_graph(n: int, gates, hooks, max_turns):
    """GraphFlow t1 -> ask2 -> t2 -> ...: before each gate t<g>, an agent ask<g> without effect
    asks, and the asking ends ``run()``; no cycle."""
    builder = DiGraphBuilder()
    chain = []
    for t in range(1, n + 1):
        if t in gates:
            chain.append(TaskAgent(f"ask{t}", t, hooks, kind="ask", shape="split"))
        chain.append(TaskAgent(f"t{t}", t, hooks, kind="gate" if t in gates else "task", shape="split"))
    for agent in chain:
        builder.add_node(agent)
    for a, b in zip(chain, chain[1:]):
        builder.add_edge(a.name, b.name)
    builder.set_entry_point(chain[0].name)
    asking = [f"ask{g}" for g in sorted(gates)]
    stop = TextMentionTermination(INTERRUPT, sources=asking) if asking else None
    return GraphFlow(
        builder.get_participants(), graph=builder.build(), termination_condition=stop,
        max_turns=max_turns,
    )


def ending(shape: str, n: int, result) -> str:
    """How one ``run()`` ended, read from its ``TaskResult`` as a caller would.

    ``interrupted`` (the last message asks), ``completed``, or ``step`` (``max_turns`` reached).
    """
    last = result.messages[-1] if result.messages else None
    if last is not None and is_request(last):
        return "interrupted"
    reason = result.stop_reason or ""
    if reason.startswith("Maximum number of turns"):
        return "step"
    if shape != "handoff" and reason == GRAPH_COMPLETE:
        return "completed"
    if shape == "handoff" and last is not None and last.source == f"t{n}":
        return "completed"
    raise RuntimeError(f"the run stopped for an unexpected reason: {reason!r}")
