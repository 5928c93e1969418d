"""An AutoGen finding as a short script: the team, the calls the runner made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.toolkit.script.Script`` from the
definitions below (pasted into the script by name with ``inspect.getsource``: each is real code,
importable and tested here) and the lines ``driver.py`` recorded while the engine replayed the
trace: ``team = build_team()``, ``await team.load_state(load('run-1'))``, ``result = await
team.run(task=...)``, ``save('run-1', await team.save_state())``.  The store is the caller's (AutoGen
has none): one JSON file per run, or an append-only SQLite table whose labels let a fork find the
state saved when a gate asked, as in the adapter (``stores.py``).

A race becomes straight lines: every racer loads the saved state, then each runs and saves in
turn: the interleaving in which the racers all read before any writes (AutoGen has no lock, so
the fuzzer's racers reach it; a forced race holds them there).  Written for every team shape,
both save policies and stores, start / resume / recover / fork / race / query / stale resume,
the ``forged`` tamper, exception and SIGKILL crash points and out-of-schema outputs.  A twin
recovery is written as the recovery of the original store, the first of the two the fuzzer runs
(the second, on a copy, runs after it and cannot change it): enough for a finding on the first;
one only in the copy has no check (``check_for`` looks at the first).  Not: the ``corrupt`` and
``invalid`` tampers; for those the adapter falls back to the older unchecked script
(``repro_legacy.py``).
"""

from __future__ import annotations

import inspect
import json
import os
import sqlite3
from dataclasses import replace

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

from adapters.protocol import installed_versions
from adapters.toolkit.repro_runtime import WORKDIR, crash_point, effect
from adapters.toolkit.script import (
    Script,
    check_for,
    header,
    looped,
    race_interleaving,
    source_as,
    step_of,
    thread_label,
    without_docstring,
    without_lines,
)

from .statefmt import rewrite

N, GATES, MAX_TURNS, BAD_OUTPUT = 2, {1}, None, None  # the script's own line sets these
PINNED = ("autogen-agentchat", "autogen-core")
SUPPORTED_OPS = {"start", "resume", "recover", "twin_recover", "fork", "query", "race", "tamper",
                 "stale_resume"}


# -- what the script contains --------------------------------------------------------------------


class TaskOutput(BaseModel):
    task: int
    out: int
    answer: str | None = None


class Task(BaseChatAgent):
    """Task t as an agent without an LLM.  A gate asks ("__INTERRUPT__ t<g>") until the newest
    message it was sent is the user's "resume:<answer>"; then, like every task, it fires its
    one effect and writes a TaskOutput."""

    def __init__(self, t, kind="task", name=None, handoff_to=None):
        super().__init__(name or f"t{t}", f"task {t}")
        self.t, self.kind, self.handoff_to = t, kind, handoff_to

    @property
    def produced_message_types(self):
        return (StructuredMessage[TaskOutput], TextMessage, HandoffMessage)

    async def on_messages(self, messages, cancellation_token):
        if self.kind == "end":  # an effect-free leaf after a gate that is the last task
            return Response(chat_message=TextMessage(content="end", source=self.name))
        crash_point(self.t, "before its effect")
        said = str(messages[-1].content) if messages and messages[-1].source == "user" else ""
        value = said.removeprefix("resume:") if self.kind == "gate" and said.startswith("resume:") else None
        if self.kind == "ask" or (self.kind == "gate" and value is None):
            return Response(chat_message=self.ask(f"__INTERRUPT__ t{self.t}"))
        effect(self.t, value)
        crash_point(self.t, "after its effect")
        output = TaskOutput(task=self.t, out=self.t, answer=value)
        if self.t == BAD_OUTPUT:  # a value outside the schema, as a buggy agent builds it
            output = TaskOutput.model_construct(task=self.t, out="<bad>", answer=value)
        return self.reply(StructuredMessage[TaskOutput](content=output, source=self.name))

    def ask(self, text):
        return TextMessage(content=text, source=self.name)

    def reply(self, message):
        return Response(chat_message=message)

    async def on_reset(self, cancellation_token):
        pass


class SwarmTask(Task):
    """In a Swarm a task hands off to the next one when it is done, and a gate asks the user."""

    def ask(self, text):
        return HandoffMessage(target="user", content=text, source=self.name)

    def reply(self, message):
        if self.handoff_to is None:
            return Response(chat_message=message)
        done = HandoffMessage(target=self.handoff_to, content=f"t{self.t} done", source=self.name)
        return Response(chat_message=done, inner_messages=[message])


def asks(message):
    return str(getattr(message, "content", "")).startswith("__INTERRUPT__")


def build_loop_team():
    """GraphFlow t1 -> t2 -> ...; a gate loops back to itself (an activation group of its own,
    DiGraphBuilder's loop-back spelling) while it asks, and the asking ends run()."""
    builder = DiGraphBuilder()
    names = [f"t{t}" for t in range(1, N + 1)] + (["end"] if N in GATES else [])
    for t in range(1, N + 1):
        builder.add_node(Task(t, "gate" if t in GATES else "task"))
    if N in GATES:
        builder.add_node(Task(0, "end", name="end"))
    for t, (name, after) in enumerate(zip(names, names[1:]), 1):
        if t in GATES:
            builder.add_edge(name, name, condition=asks, activation_group="loop_back")
        builder.add_edge(name, after, **({"condition": lambda m: not asks(m)} if t in GATES else {}))
    builder.set_entry_point("t1")
    stop = TextMentionTermination("__INTERRUPT__", sources=[f"t{g}" for g in GATES]) if GATES else None
    return GraphFlow(builder.get_participants(), graph=builder.build(), termination_condition=stop,
                     max_turns=MAX_TURNS)


def build_loopany_team():
    """GraphFlow t1 -> t2 -> ...; a gate loops back to itself while it asks, every edge into a
    gate (its own loop too) in one activation_condition="any" group; the asking ends run()."""
    builder = DiGraphBuilder()
    names = [f"t{t}" for t in range(1, N + 1)] + (["end"] if N in GATES else [])
    for t in range(1, N + 1):
        builder.add_node(Task(t, "gate" if t in GATES else "task"))
    if N in GATES:
        builder.add_node(Task(0, "end", name="end"))

    def into(name):
        gate = name != "end" and int(name[1:]) in GATES
        return {"activation_group": f"into_{name}", "activation_condition": "any"} if gate else {}
    for t, (name, after) in enumerate(zip(names, names[1:]), 1):
        if t in GATES:
            builder.add_edge(name, name, condition=asks, **into(name))
        builder.add_edge(name, after, **({"condition": lambda m: not asks(m)} if t in GATES else {}),
                         **into(after))
    builder.set_entry_point("t1")
    stop = TextMentionTermination("__INTERRUPT__", sources=[f"t{g}" for g in GATES]) if GATES else None
    return GraphFlow(builder.get_participants(), graph=builder.build(), termination_condition=stop,
                     max_turns=MAX_TURNS)


def build_split_team():
    """GraphFlow t1 -> ask2 -> t2 -> ...: before each gate t<g>, an agent ask<g> without effect
    asks, and the asking ends run(); no cycle."""
    chain = []
    for t in range(1, N + 1):
        chain += [Task(t, "ask", name=f"ask{t}")] if t in GATES else []
        chain.append(Task(t, "gate" if t in GATES else "task"))
    builder = DiGraphBuilder()
    for agent in chain:
        builder.add_node(agent)
    for a, b in zip(chain, chain[1:]):
        builder.add_edge(a.name, b.name)
    builder.set_entry_point(chain[0].name)
    stop = TextMentionTermination("__INTERRUPT__", sources=[f"ask{g}" for g in GATES]) if GATES else None
    return GraphFlow(builder.get_participants(), graph=builder.build(), termination_condition=stop,
                     max_turns=MAX_TURNS)


def build_handoff_team():
    """Swarm t1 -> t2 -> ... by handoffs; a gate hands off to the user, which ends run()."""
    agents = [SwarmTask(t, "gate" if t in GATES else "task", handoff_to=f"t{t + 1}" if t < N else None)
              for t in range(1, N + 1)]
    stop = HandoffTermination(target="user") | SourceMatchTermination([f"t{N}"])
    return Swarm(agents, termination_condition=stop, max_turns=MAX_TURNS)


def save_json(thread, state, label=""):
    """The "Managing State" tutorial's store: the saved team state as one JSON file per run."""
    with open(os.path.join(WORKDIR, f"{thread}.json"), "w") as f:
        json.dump(state, f)


def load_json(thread):
    try:
        with open(os.path.join(WORKDIR, f"{thread}.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def save_sqlite(thread, state, label=""):
    """Every saved team state, as a row of an append-only SQLite table, labelled."""
    with sqlite3.connect(os.path.join(WORKDIR, "saves.sqlite")) as db:
        db.execute("CREATE TABLE IF NOT EXISTS saves (thread, label, state)")
        db.execute("INSERT INTO saves VALUES (?, ?, ?)", (thread, label, json.dumps(state)))


def load_sqlite(thread, label="%"):
    """The newest state saved for ``thread`` (with ``label``, if given)."""
    with sqlite3.connect(os.path.join(WORKDIR, "saves.sqlite")) as db:
        db.execute("CREATE TABLE IF NOT EXISTS saves (thread, label, state)")
        row = db.execute("SELECT state FROM saves WHERE thread = ? AND label LIKE ? "
                         "ORDER BY rowid DESC", (thread, label)).fetchone()
    return json.loads(row[0]) if row else None


def overwrite_sqlite(thread, state):
    """Replace the newest saved state of ``thread`` in place, with plain SQL."""
    with sqlite3.connect(os.path.join(WORKDIR, "saves.sqlite")) as db:
        db.execute("UPDATE saves SET state = ? WHERE rowid = (SELECT max(rowid) FROM saves "
                   "WHERE thread = ?)", (json.dumps(state), thread))


def outcome(result):
    """How run() ended: "interrupted" if its last message asks; "completed" if not, or if the
    caller did not run the team (``None``: the state it loaded asks for no answer)."""
    return "interrupted" if result and asks(result.messages[-1]) else "completed"


def read_state(thread):
    """Tasks done, answers and the gate asking, as the newest saved team state has them."""
    state, done, answers, pending = load(thread), [], {}, None
    agents = state["agent_states"].values() if state else []
    for m in [m for a in agents if "message_thread" in a for m in a["message_thread"]]:
        if m.get("type") == "StructuredMessage[TaskOutput]":
            done.append(m["content"]["out"])
            if m["content"]["answer"] is not None:
                answers[str(m["content"]["task"])] = m["content"]["answer"]
            pending = None
        elif str(m.get("content")).startswith("__INTERRUPT__"):
            pending = int(m["content"].split()[1][1:])
    return {"done": done, "answers": answers, "pending": pending}


# -- composing it ----------------------------------------------------------------------------------


def build_chain_team():
    """GraphFlow t1 -> t2 -> ... when no task is a gate: what each GraphFlow shape above builds
    then (no loop-back, no asking agent, no termination condition), in the script's fewest
    lines."""
    builder = DiGraphBuilder()
    for t in range(1, N + 1):
        builder.add_node(Task(t))
    for t in range(1, N):
        builder.add_edge(f"t{t}", f"t{t + 1}")
    builder.set_entry_point("t1")
    return GraphFlow(builder.get_participants(), graph=builder.build(), max_turns=MAX_TURNS)


BUILDERS = {"loop": build_loop_team, "loopany": build_loopany_team, "split": build_split_team,
            "handoff": build_handoff_team}


def _source(*objects) -> str:
    return "\n".join(without_docstring(inspect.getsource(o)) for o in objects)


def reproduction(variant, workflow, evidence) -> str | None:
    options = dict(variant.options)
    ops = evidence.ops[: evidence.step + 1]
    if any(op.name not in SUPPORTED_OPS or (op.name == "tamper" and op.how != "forged") for op in ops):
        return None
    check = check_for(evidence, state_readable=True, outcome_readable=ops[-1].name != "race",
                      joint=True)
    if check is None:
        return None
    steps, sqlite_store = [], options["store"] == "sqlite"
    for i, op in enumerate(ops):
        log = evidence.calls[i]
        if op.name == "race":
            calls = race_interleaving(log, rename="team", read="load_state(")
            if calls is None:
                return None  # no racer reached AutoGen: nothing to repeat
        else:
            calls = looped([src for kind, src in log if kind == "call"])
        if op.name not in ("query", "race") and not calls:
            return None  # the runner made no call (a no-op resume): nothing to repeat
        if op.name == "query":
            calls = []  # a read: the check does it
        last = i == evidence.step
        if last and check.reads_outcome:
            if any(c.lstrip().startswith("result = ") for c in calls):
                calls = calls + ["outcome(result)"]
            else:  # the runner loaded the state, found nothing asking, and did not run the team
                calls = calls + ["# load_state() took it, and no message in it asks: nothing to run",
                                 "outcome(None)"]
        steps.append(step_of(evidence, i, calls,
                             note=" (here: every racer loads the saved state before any saves)" if op.name == "race" else ""))
    if check.reads_state:
        thread = ops[-1].new_thread if ops[-1].name == "fork" else ops[-1].thread
        check = replace(check, state_src=f"read_state({thread_label(thread)!r})")
    every = "\n".join(c for s in steps for c in s.calls)
    agent = _source(Task)
    if not any(s.crash for s in steps):
        agent = without_lines(agent, "crash_point(")
    if not any(s.bad_output is not None for s in steps):
        agent = without_lines(agent, "if self.t == BAD_OUTPUT", extra=1)
    shape = options["gate"]
    if not (shape in ("loop", "loopany") and workflow.n in workflow.gates):
        agent = without_lines(agent, 'if self.kind == "end"', extra=1)  # no end node
    build = BUILDERS[shape]
    if not workflow.gates and shape != "handoff":  # nothing asks: a chain, tasks that never ask
        build = build_chain_team
        agent = without_lines(agent, "said = str(")
        agent = without_lines(agent, 'if self.kind == "ask" or', extra=1)
        agent = "\n".join("        value = None" if line.lstrip().startswith("value = said.")
                          else line for line in agent.splitlines())
    if shape != "handoff":  # no SwarmTask overrides ask/reply: say it inline
        agent = agent.replace("self.ask(f\"__INTERRUPT__ t{self.t}\")",
                              "TextMessage(content=f\"__INTERRUPT__ t{self.t}\", source=self.name)")
        agent = agent.replace("return self.reply(", "return Response(chat_message=")
        agent = without_lines(without_lines(agent, "def ask(self, text):", extra=1),
                         "def reply(self, message):", extra=1)
        agent = agent.replace(", handoff_to=None", "").replace(", self.handoff_to", "").replace(
            ", handoff_to", "").replace(", TextMessage, HandoffMessage)", ", TextMessage)")
    if build is build_chain_team:  # every task is a plain task: no kind to tell
        agent = agent.replace(', kind="task"', "").replace("self.t, self.kind = t, kind",
                                                           "self.t = t")
    loads = "load(" in every or check.reads_state
    store = [save_sqlite, *([load_sqlite] if loads else [])] if sqlite_store else [
        save_json, *([load_json] if loads else [])]
    if "overwrite(" in every and sqlite_store:
        store.append(overwrite_sqlite)
    # The builder and the store's functions under the names the calls use (build_team, save,
    # load, overwrite): one definition each, no alias lines.
    named = {build: "build_team", store[0]: "save",
             **({store[1]: "load"} if loads else {}),
             **({overwrite_sqlite: "overwrite"} if overwrite_sqlite in store else {})}
    parts = [_source(TaskOutput), agent, *([_source(SwarmTask)] if shape == "handoff" else []),
             *(source_as(f, name) for f, name in named.items()),
             _source(*([rewrite] if "rewrite(" in every else []),
                     *([outcome] if check.reads_outcome else []),
                     *([read_state] if check.reads_state else []))]
    if "asks(" in "\n".join(parts) + every:  # what tells an asking message (not in a chain)
        parts.insert(-1 - len(named), _source(asks))
    glue = [*(["logging.getLogger('autogen_core').setLevel(logging.CRITICAL)  # it logs each crash"]
              if any(s.crash for s in steps) else []),
            *(["overwrite = save  # the JSON store holds one state per run"]
              if "overwrite(" in every and not sqlite_store else []),
            f"N, GATES, MAX_TURNS = {workflow.n}, {set(workflow.gates) or 'set()'}, "
            f"{1 if options['save'] == 'step' else None}"
            + ("  # MAX_TURNS=1: the state is saved after every turn" if options["save"] == "step" else ""),
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if any(s.bad_output is not None for s in steps[1:]) else [])]
    versions = {**installed_versions(PINNED), **dict(evidence.versions)}
    pins = " ".join(f"{d}=={versions[d]}" for d in PINNED if d in versions)
    messages = sorted({m for m in ("HandoffMessage", "StructuredMessage", "TextMessage")
                       if m in "\n".join(parts) + every})
    conditions = None if build is build_chain_team else {
        "loop": "TextMentionTermination", "loopany": "TextMentionTermination",
        "split": "TextMentionTermination",
        "handoff": "HandoffTermination, SourceMatchTermination"}[shape]
    imports = ("from pydantic import BaseModel",
               "from autogen_agentchat.agents import BaseChatAgent",
               "from autogen_agentchat.base import Response",
               *([f"from autogen_agentchat.conditions import {conditions}"] if conditions else []),
               f"from autogen_agentchat.messages import {', '.join(messages)}",
               "from autogen_agentchat.teams import "
               + ("Swarm" if shape == "handoff" else "DiGraphBuilder, GraphFlow"))
    stdlib = ["json", "os"] + (["sqlite3"] if sqlite_store else []) + (
        ["copy", "uuid"] if "rewrite(" in every else []) + (
        ["logging"] if any(s.crash for s in steps) else [])
    return Script(
        header=header("AutoGen AgentChat", variant.description, evidence, pins),
        imports=imports,
        workflow_src="\n".join([*parts, *glue]),
        steps=tuple(steps),
        check=check,
        stdlib=tuple(stdlib),
        asynchronous=True,
    ).source()


__all__ = ["reproduction"]
