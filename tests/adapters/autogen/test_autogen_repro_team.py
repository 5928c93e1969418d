"""The reproduction script's written-out ``build_team`` (``repro._team_source``) builds the team
the generic builders of ``repro.py`` build (as ``_builder_source`` trims them), and its ``rewrite`` of a forgery that adds the next
task's output writes what ``statefmt.rewrite`` writes."""

from __future__ import annotations

import copy
from itertools import combinations
from types import SimpleNamespace

import pytest

from autogen_agentchat.messages import TextMessage

from adapters.autogen import repro, statefmt

ASKING = TextMessage(content="__INTERRUPT__ t1", source="t1")
DONE = TextMessage(content="done", source="t1")


def _generic(shape, n, gates, step):
    """The team the script built before: the generic builder, trimmed (``_builder_source``)."""
    namespace = {**vars(repro), "N": n, "GATES": set(gates)}
    exec(repro._builder_source(shape, SimpleNamespace(n=n, gates=list(gates)), step), namespace)
    return namespace["build_team"]()


def _written(shape, n, gates, step):
    namespace = dict(vars(repro))
    exec(repro._team_source(shape, SimpleNamespace(n=n, gates=list(gates)), step), namespace)
    return namespace["build_team"]()


def _shape_of(team) -> dict:
    stop = team._termination_condition
    out = {"type": type(team).__name__, "max_turns": team._max_turns,
           "agents": [(a.name, a.t, getattr(a, "kind", "task")) for a in team._participants],
           "stop": None if stop is None else stop.dump_component().model_dump()}
    graph = getattr(team, "_graph", None)
    if graph is not None:
        out["start"] = graph.get_start_nodes()  # a chain's is its first node, named or not
        out["edges"] = {name: [(e.target, e.activation_group, e.activation_condition,
                                e.condition_function is None and e.condition is None
                                or (e.condition_function(ASKING), e.condition_function(DONE)))
                               for e in node.edges] for name, node in graph.nodes.items()}
    return out


WORKFLOWS = [(n, set(g)) for n in (1, 2, 3) for k in range(n + 1) for g in combinations(range(1, n + 1), k)]


@pytest.mark.parametrize("shape", ["loop", "loopany", "split", "handoff"])
@pytest.mark.parametrize("n,gates", WORKFLOWS)
@pytest.mark.parametrize("step", [False, True])
def test_written_team_is_the_generic_one(shape, n, gates, step):
    assert _shape_of(_written(shape, n, gates, step)) == _shape_of(_generic(shape, n, gates, step))


def _output(t, answer):
    return {"id": f"id{t}", "source": f"t{t}", "models_usage": None, "metadata": {},
            "created_at": "2026-01-01T00:00:00Z", "format_string": None,
            "content": {"task": t, "out": t, "answer": answer},
            "type": "StructuredMessage[TaskOutput]"}


def _state(outputs):
    thread = [{"id": "s", "source": "user", "content": "start", "type": "TextMessage"}, *outputs]
    return {"type": "TeamState", "agent_states": {
        "t1": {"type": "ChatAgentContainerState", "message_buffer": copy.deepcopy(thread)},
        "manager": {"type": "GraphManagerState", "message_thread": thread}}}


def _without_ids(state):
    """``state`` without its messages' ids and times (a forged message's are new)."""
    state = copy.deepcopy(state)
    for entry in state["agent_states"].values():
        for m in entry.get("message_thread", []) + entry.get("message_buffer", []):
            m.pop("id", None)
            m.pop("created_at", None)
    return state


@pytest.mark.parametrize("outputs,done,answers", [
    ([], [1], {1: "a"}),
    ([], [1], {}),
    ([_output(1, "a")], [1, 2], {1: "a"}),
    ([_output(1, None)], [1, 2], {2: "b"}),
])
def test_trimmed_rewrite_writes_what_statefmt_writes(outputs, done, answers):
    state = _state(outputs)
    # the script's rewrite alters the state it was given (just loaded): each its own copy
    assert _without_ids(repro.rewrite_next_output(copy.deepcopy(state), done, answers)) == _without_ids(
        statefmt.rewrite(state, done, answers))
