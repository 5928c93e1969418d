"""An AutoGen finding as a short script: the team, the calls the runner made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script`` from the
definitions below (pasted into the script by name with ``inspect.getsource``: each is real code,
importable and tested here) and the lines ``driver.py`` recorded while the engine replayed the
trace: ``team = build_team()``, ``await team.load_state(load('run-1'))``, ``result = await
team.run(task=...)``, ``save('run-1', await team.save_state())``.  The store is the caller's (AutoGen
has none): one JSON file per run, or an append-only SQLite table whose labels let a fork find the
state saved when a gate asked, as in the adapter (``store.py``).  Each definition is trimmed to
what the trace uses: a workflow without gates gets a plain chain (one task: its one-node graph)
whose ``Task`` never asks, ``TaskOutput`` fields, store functions, ``outcome``, ``read_state``
and constants appear only where something reads them, and a crash of task t "after it
completed" is written as task t + 1 failing as it starts, which it is, when t is not the last;
where no other step that runs the team enters the failing task, the task itself raises there
(``_raising_in_task``), with no ``CRASH`` for a step to set (and, the last task of a Swarm, no
reply of its own).  The SQLite store is one connection the script opens to a database in memory
(``SQLITE_OPEN``) unless a process is killed (then each call connects to a file); the JSON store
reads and writes with ``pathlib``, and where only the check reads it, ``read_state`` reads the
file itself; the guard against a run never saved is written only where the checked
run has no save.  The team itself is written out for the workflow's tasks (``_team_source``:
each agent added and each edge drawn by name, tested against the generic builders below as
``_builder_source`` trims them); a forgery that only adds the next task's output pastes the
``rewrite`` that does that alone (the output built and serialised by AgentChat's own message
class); a save after the checked step's last run is left out where the check counts effects;
a single-use output is built where it is sent, and ``on_reset``, which does nothing, is one
line.  Where no task fires its effect, in the trace or in what the checked step allows, every
task that runs asks (``_asking_only``: no answer to find, no output, no end leaf); where nothing
reads a gate's answer, it has no name (``_without_value``); where the tasks done alone tell a
stored state apart, the check compares them alone, read by ``read_done`` (``_done_alone``); a
task raising at its crash point is caught by the ``run()`` that enters it (``_catching``: no
``observe``); a ``def`` whose body is one line is written on one line (``_folded``); the JSON
store's tamper is a ``save``; the SQLite store in memory loads a saved run's newest row (by label
with its query named, ``NEWEST``, so that ``load`` is one line).  A ``run()`` whose result nothing
reads assigns no name (``_unread_results``); a state held since a gate asked is loaded where
``load_state`` takes it (``_held_state_loaded``); a step that only loads a state in which nothing
asks builds its team in that line and says so on its ``return 'completed'``
(``_team_built_where_used``, ``_nothing_run_returned``); a forgery that only adds the next task's
output is written out in its step, in AgentChat's terms (the output appended to the
``GraphManager``'s or ``SwarmGroupChatManager``'s thread), with the output's task number and
answer only where the check reads them, and the SQLite store in memory's one ``overwrite``
written as its ``UPDATE`` there (``_forged_in_place``, ``_overwritten_in_place``); a
``TaskOutput`` of one field is one line; where every task is a gate and its answer is read once,
by its effect, it asks until answered with no ``value`` to name (``_every_task_a_gate``); with
the effect log a list, the task appends its row itself and the verdict reads
``EFFECTS[before:]`` (the reproduction layer's ``effect_inlined`` and ``fired_inlined``).

A race becomes straight lines: every racer loads the saved state, then each runs and saves in
turn: the interleaving in which the racers all read before any writes (AutoGen has no lock, so
the fuzzer's racers reach it; a forced race holds them there).  Written for every team shape,
both save policies and stores, start / resume / recover / fork / race / query / stale resume,
the ``forged`` tamper, exception and SIGKILL crash points and out-of-schema outputs.  A twin
recovery is written as the recovery of the original store, the first of the two the fuzzer runs
(the second, on a copy, runs after it and cannot change it): enough for a finding on the first;
one only in the copy has no check (``check_for`` looks at the first).  Not: the ``corrupt`` and
``invalid`` tampers; for those the report gives the replay line instead.
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import os
import pathlib
import re
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

from adapters.reproduction.runtime import WORKDIR, crash_point, effect
from adapters.reproduction.script import (
    LONGEST,
    Script,
    check_for,
    effect_inlined,
    fired_inlined,
    header,
    looped,
    pins,
    race_interleaving,
    sole_raising_crash,
    source_as,
    state_value,
    step_of,
    suppressed,
    thread_label,
    unwritten,
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
    one effect and writes a TaskOutput.  (In a Swarm, ``SwarmSpelling``'s lines take the place
    of its two ``return`` lines that send a message.)"""

    produced_message_types = (StructuredMessage[TaskOutput], HandoffMessage)

    def __init__(self, t, kind="task", name=None):
        super().__init__(name or f"t{t}", f"task {t}")
        self.t, self.kind = t, kind

    async def on_messages(self, messages, cancellation_token):
        if self.kind == "end":  # an effect-free leaf after a gate that is the last task
            return Response(chat_message=TextMessage(content="end", source=self.name))
        crash_point(self.t, "before its effect")
        said = str(messages[-1].content) if messages and messages[-1].source == "user" else ""
        value = said.removeprefix("resume:") if self.kind == "gate" and said.startswith("resume:") else None
        if self.kind == "ask" or (self.kind == "gate" and value is None):
            return Response(chat_message=TextMessage(content=f"__INTERRUPT__ t{self.t}", source=self.name))
        effect(self.t, value)
        crash_point(self.t, "after its effect")
        out = "<bad>" if self.t == BAD_OUTPUT else self.t  # BAD_OUTPUT: a value outside the schema
        output = TaskOutput.model_construct(task=self.t, out=out, answer=value)  # not validated
        return Response(chat_message=StructuredMessage[TaskOutput](content=output, source=self.name))

    async def on_reset(self, cancellation_token):
        pass


class SwarmSpelling(Task):
    """Never run: the source of a Swarm's spelling of ``Task``'s two sending lines, which
    ``_task_source`` writes in their place (``swarm_lines``).  A gate hands off to the user when
    it asks, and a task hands off to the next one when it is done, its output an inner message."""

    async def on_messages(self, messages, cancellation_token):
        if self.kind == "gate":  # asks
            ask = HandoffMessage(target="user", content=f"__INTERRUPT__ t{self.t}", source=self.name)
            return Response(chat_message=ask)
        output = TaskOutput(task=self.t, out=self.t)  # done
        message = StructuredMessage[TaskOutput](content=output, source=self.name)
        if self.t == N:  # the last task: its output ends the run
            return Response(chat_message=message)
        done = HandoffMessage(target=f"t{self.t + 1}", content=f"t{self.t} done", source=self.name)
        return Response(chat_message=done, inner_messages=[message])


def swarm_lines() -> tuple[list, list]:
    """``SwarmSpelling``'s lines that ask and those that reply, indented as in ``Task``."""
    lines = inspect.getsource(SwarmSpelling.on_messages).splitlines()
    asking = lines.index(next(line for line in lines if line.endswith("# asks")))
    done = lines.index(next(line for line in lines if line.endswith("# done")))
    return lines[asking + 1:done], lines[done + 1:]


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
    stop = TextMentionTermination("__INTERRUPT__", sources=[f"t{g}" for g in GATES])
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
    stop = TextMentionTermination("__INTERRUPT__", sources=[f"t{g}" for g in GATES])
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
    stop = TextMentionTermination("__INTERRUPT__", sources=[f"ask{g}" for g in GATES])
    return GraphFlow(builder.get_participants(), graph=builder.build(), termination_condition=stop,
                     max_turns=MAX_TURNS)


def build_handoff_team():
    """Swarm t1 -> t2 -> ... by handoffs; a gate hands off to the user, which ends run(), and
    the last task's output ends it too."""
    agents = [Task(t, "gate" if t in GATES else "task") for t in range(1, N + 1)]
    stop = HandoffTermination(target="user") | SourceMatchTermination([f"t{N}"])
    return Swarm(agents, termination_condition=stop, max_turns=MAX_TURNS)


def build_chain_team():
    """GraphFlow t1 -> t2 -> ... when no task is a gate: what each GraphFlow shape above builds
    then (no loop-back, no asking agent, no termination condition: the graph ends)."""
    builder = DiGraphBuilder()
    for t in range(1, N + 1):
        builder.add_node(Task(t))
    for t in range(1, N):
        builder.add_edge(f"t{t}", f"t{t + 1}")
    return GraphFlow(builder.get_participants(), graph=builder.build(), max_turns=MAX_TURNS)


def build_one_task_team():
    """GraphFlow of the one task t1, when it is no gate."""
    builder = DiGraphBuilder().add_node(Task(1))
    return GraphFlow(builder.get_participants(), graph=builder.build(), max_turns=MAX_TURNS)


def build_one_task_swarm():
    """Swarm of the one task t1, when it is no gate: its output ends the run."""
    return Swarm([Task(1)], termination_condition=SourceMatchTermination(["t1"]), max_turns=MAX_TURNS)


def save_json(thread, state):
    """The "Managing State" tutorial's store: the saved team state as one JSON file per run."""
    pathlib.Path(WORKDIR, f"{thread}.json").write_text(json.dumps(state))


def load_json(thread):
    path = pathlib.Path(WORKDIR, f"{thread}.json")
    return json.loads(path.read_text()) if path.exists() else None


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


def load_newest_sqlite(thread):
    """The newest state saved for ``thread``: ``load_sqlite`` where no call asks for a label."""
    with sqlite3.connect(os.path.join(WORKDIR, "saves.sqlite")) as db:
        db.execute("CREATE TABLE IF NOT EXISTS saves (thread, label, state)")
        row = db.execute("SELECT state FROM saves WHERE thread = ? ORDER BY rowid DESC",
                         (thread,)).fetchone()
    return json.loads(row[0]) if row else None


def overwrite_sqlite(thread, state):
    """Replace the newest saved state of ``thread`` in place, with plain SQL."""
    with sqlite3.connect(os.path.join(WORKDIR, "saves.sqlite")) as db:
        db.execute("UPDATE saves SET state = ? WHERE rowid = (SELECT max(rowid) FROM saves "
                   "WHERE thread = ?)", (json.dumps(state), thread))


# The SQLite store of a script in which no process is killed: one connection, to a database in
# memory (the one process is its only reader: no file, no WORKDIR), opened (and the table made)
# by the script's two lines ``SQLITE_OPEN``; a script with a SIGKILL connects anew in every call
# (the functions above) to a file, as a process that forked must.
SQLITE_OPEN = ('DB = sqlite3.connect(":memory:", isolation_level=None)  # one process: no file needed',
               'DB.execute("CREATE TABLE saves (thread, label, state)")')
DB: sqlite3.Connection | None = None


def save_db(thread, state, label=""):
    """Every saved team state, as a row of an append-only SQLite table, labelled."""
    DB.execute("INSERT INTO saves VALUES (?, ?, ?)", (thread, label, json.dumps(state)))


def load_db(thread, label="%"):
    """The newest state saved for ``thread`` (with ``label``, if given)."""
    rows = DB.execute("SELECT state FROM saves WHERE thread = ? AND label LIKE ? ORDER BY rowid DESC",
                      (thread, label))
    return next((json.loads(state) for (state,) in rows), None)


def load_newest_db(thread):
    """The newest state saved for ``thread``: ``load_db`` where no call asks for a label."""
    rows = DB.execute("SELECT state FROM saves WHERE thread = ? ORDER BY rowid DESC", (thread,))
    return next((json.loads(state) for (state,) in rows), None)


def load_saved_db(thread):
    """``load_newest_db`` where every call loads a run that was saved: the newest row's state."""
    return json.loads(next(DB.execute("SELECT state FROM saves WHERE thread = ? ORDER BY rowid DESC", (thread,)))[0])


NEWEST = "SELECT state FROM saves WHERE thread = ? AND label LIKE ? ORDER BY rowid DESC"


def load_saved_labelled_db(thread, label="%"):
    """``load_db`` where every call loads a state that was saved: the newest row's (the query
    named, ``NEWEST``, for the definition to fit on one line)."""
    return json.loads(DB.execute(NEWEST, (thread, label)).fetchone()[0])


def overwrite_db(thread, state):
    """Replace the newest saved state of ``thread`` in place, with plain SQL."""
    DB.execute("UPDATE saves SET state = ? WHERE rowid = (SELECT max(rowid) FROM saves WHERE thread = ?)",
               (json.dumps(state), thread))


def outcome(result):
    """How run() ended: "interrupted" if its last message asks; "completed" if not, or if the
    caller did not run the team (``None``: the state it loaded asks for no answer)."""
    return "interrupted" if result and asks(result.messages[-1]) else "completed"


def outcome_without_gates(result):
    """``outcome`` of a team in which no task asks."""
    return "completed"  # no task of this team asks: a run() that returns has completed


def read_state(thread):
    """Tasks done, answers and the gate asking, as the newest saved team state has them."""
    state, done, answers, pending = load(thread), [], {}, None
    for m in [m for a in state["agent_states"].values() for m in a.get("message_thread", [])]:
        if m.get("type") == "StructuredMessage[TaskOutput]":
            done.append(m["content"]["out"])
            if m["content"]["answer"] is not None:
                answers[str(m["content"]["task"])] = m["content"]["answer"]
            pending = None
        elif str(m.get("content")).startswith("__INTERRUPT__"):
            pending = int(m["content"].split()[1][1:])
    return {"done": done, "answers": answers, "pending": pending}


def read_state_without_gates(thread):
    """``read_state`` of a team in which no task asks: the tasks done."""
    state = load(thread)
    done = [m["content"]["out"] for a in state["agent_states"].values() for m in a.get("message_thread", [])
            if m.get("type") == "StructuredMessage[TaskOutput]"]
    return {"done": done, "answers": {}, "pending": None}


def read_done(thread):
    """``read_state`` where the check compares the tasks done alone (they tell the observation
    apart from every allowed one): the outputs in the manager's thread."""
    return {"done": [m["content"]["out"] for a in load(thread)["agent_states"].values()
                     for m in a.get("message_thread", []) if m.get("type") == "StructuredMessage[TaskOutput]"]}


def read_done_of_state(thread):
    """``read_done`` with the state read on a line of its own (where the read is longer than
    ``load(thread)``: the JSON file read in place, or a guard against a run never saved)."""
    state = load(thread)
    return {"done": [m["content"]["out"] for a in state["agent_states"].values()
                     for m in a.get("message_thread", []) if m.get("type") == "StructuredMessage[TaskOutput]"]}


def rewrite_next_output(state, done, answers):
    """``rewrite`` where the forgery only adds the next task's output (one task more than the run
    wrote): task ``done[-1]``'s output, as AutoGen serialises a message, appended to the
    manager's thread (what ``statefmt.rewrite`` appends then, but for its id and time).  It
    alters ``state``, which the script's call has just loaded, in place."""
    thread = next(a["message_thread"] for a in state["agent_states"].values() if "message_thread" in a)
    output = TaskOutput(task=done[-1], out=done[-1], answer=answers.get(done[-1]))
    thread.append(StructuredMessage[TaskOutput](content=output, source=f"t{done[-1]}").dump())
    return state


def _rewriter(evidence, i: int, call: str):
    """The ``rewrite`` the forgery of operation ``i`` (its ``call``) needs: where the state it
    alters is known (the one the operation before left on that thread) and the forgery only
    adds the next task's output, the function that does that alone; else the whole of it."""
    args = re.search(r"rewrite\(load\([^()]*\), (\[.*?\]), (\{.*?\})\)\)", call)
    before = [o for j, o in enumerate(evidence.observed[:i])
              if evidence.ops[j].thread == evidence.ops[i].thread]
    real = state_value(before[-1].state) if before and args and before[-1].state else None
    if real is None:
        return rewrite
    done, answers = ast.literal_eval(args.group(1)), ast.literal_eval(args.group(2))
    kept = {str(t): v for t, v in answers.items() if t in real["done"]}
    if done[:-1] != real["done"] or kept != {str(t): v for t, v in real["answers"].items()}:
        return rewrite  # an answer changed, or a task less
    return rewrite_next_output


# -- composing it ----------------------------------------------------------------------------------


BUILDERS = {"loop": build_loop_team, "loopany": build_loopany_team, "split": build_split_team,
            "handoff": build_handoff_team}


def _source(*objects) -> str:
    return "\n".join(without_docstring(inspect.getsource(o)) for o in objects)


def _task_source(shape: str, workflow_n: int, gated: bool, end: bool, bad: bool) -> str:
    """``Task`` trimmed to what the trace uses: no "end" leaf, no asking where nothing asks, no
    name where every agent is t<t>, no BAD_OUTPUT where no task writes one; the Swarm spelling
    of its two sending lines in a Swarm."""
    agent = _source(Task)
    if not end:
        agent = without_lines(agent, 'if self.kind == "end"', extra=1)
    if not bad:  # every output as the schema has it, validated
        agent = without_lines(agent, "BAD_OUTPUT: a value outside").replace(
            "TaskOutput.model_construct(task=self.t, out=out, answer=value)  # not validated",
            "TaskOutput(task=self.t, out=self.t, answer=value)")
    if not gated:  # nothing asks: no answer to find, no kind to tell
        for marker in ("said = str(", "value = said."):
            agent = without_lines(agent, marker)
        agent = without_lines(agent, 'if self.kind == "ask" or', extra=1)
        agent = agent.replace("effect(self.t, value)", "effect(self.t, None)").replace(
            ", answer=value", "").replace(', kind="task"', "").replace(
            "self.t, self.kind = t, kind", "self.t = t")
    if shape != "split":  # no agent asks without being the gate
        agent = agent.replace('self.kind == "ask" or (self.kind == "gate" and value is None)',
                              'self.kind == "gate" and value is None')
    if not (end or (gated and shape == "split")):  # every agent is named t<t>
        agent = agent.replace(", name=None", "").replace("name or f\"t{t}\"", "f\"t{t}\"")
    if shape != "handoff":
        return agent.replace(", HandoffMessage)", ",)")
    lines = agent.splitlines()
    ask = next((i for i, line in enumerate(lines) if "f\"__INTERRUPT__ t{self.t}\"" in line), None)
    asking, replying = swarm_lines()
    if ask is not None:
        lines[ask:ask + 1] = asking
    if workflow_n > 1:  # a task before the last hands off to the next
        last = next(i for i, line in enumerate(lines)
                    if "StructuredMessage[TaskOutput](content=" in line)
        lines[last:last + 1] = [line.replace("self.t == N:", f"self.t == {workflow_n}:")
                                for line in replying]
    return "\n".join(lines)


def _inlined_output(agent: str) -> str:
    """``agent`` with its output built where it is sent (``content=TaskOutput(out=self.t)``) when
    that line stays short, and its ``on_reset``, which does nothing, on one line."""
    agent = agent.replace("    async def on_reset(self, cancellation_token):\n        pass",
                          "    async def on_reset(self, cancellation_token): pass")
    match = re.search(r"^ +output = (TaskOutput\([^()]*\))\n(.*)content=output,(.*)$", agent,
                      flags=re.MULTILINE)
    line = match and f"{match.group(2)}content={match.group(1)},{match.group(3)}"
    if not line or len(line) > LONGEST:
        return agent
    return agent.replace(match.group(0), line)




def _builder_source(shape: str, workflow, step: bool) -> str:
    """The variant's team builder, as ``build_team``, for what the workflow has: a plain chain
    (or one task) when nothing asks, the Swarm without a user to hand off to; ``max_turns=1``
    written in for the step save policy, nothing for the other.  What scripts pasted before
    ``_team_source``; now the reference its tests compare the written-out team with."""
    if workflow.gates:
        build = BUILDERS[shape]
    elif shape == "handoff":
        build = build_handoff_team
    else:
        build = build_one_task_team if workflow.n == 1 else build_chain_team
    src = source_as(build, "build_team")
    if not workflow.gates and shape == "handoff":  # nothing hands off to the user
        src = src.replace('Task(t, "gate" if t in GATES else "task")', "Task(t)").replace(
            'HandoffTermination(target="user") | ', "")
        if workflow.n == 1:
            src = source_as(build_one_task_swarm, "build_team")
    if build in (build_loop_team, build_loopany_team):  # the "end" leaf, if the last task asks
        end = workflow.n in workflow.gates
        src = src.replace(' + (["end"] if N in GATES else [])', ' + ["end"]' if end else "")
        src = src.replace('    if N in GATES:\n        builder.add_node(Task(0, "end", name="end"))',
                          '    builder.add_node(Task(0, "end", name="end"))' if end else "")
        if not end:
            src = src.replace('name != "end" and ', "")
        src = "\n".join(line for line in src.splitlines() if line.strip())
    if step:
        return src.replace("max_turns=MAX_TURNS)", "max_turns=1)")
    return src.replace(",\n                     max_turns=MAX_TURNS)", ")").replace(
        ", max_turns=MAX_TURNS)", ")")


def _team_source(shape: str, workflow, step: bool) -> str:
    """``build_team`` written out for this workflow's tasks: each agent added and each edge drawn
    by name, as ``BUILDERS`` (and the plain chain, one task, the Swarm without a user) build them
    for it; ``max_turns=1`` for the step save policy.  (Tested against them.)"""
    n, gates = workflow.n, set(workflow.gates)
    turns = ", max_turns=1" if step else ""
    task = lambda t: f'Task({t}, "gate")' if t in gates else f"Task({t})"  # noqa: E731
    if shape == "handoff":
        agents = ", ".join(task(t) for t in range(1, n + 1))
        stop = ('HandoffTermination(target="user") | ' if gates else "") + \
            f'SourceMatchTermination(["t{n}"])'
        one = f"    return Swarm([{agents}], termination_condition={stop}{turns})"
        if len(one) <= LONGEST:
            return "\n".join(["def build_team():", one])
        return "\n".join(["def build_team():", f"    stop = {stop}",
                          f"    return Swarm([{agents}], termination_condition=stop{turns})"])
    edges = []
    if shape == "split" or not gates:  # a chain, an asking agent before each gate
        chain = []
        for t in range(1, n + 1):
            chain += [(f"ask{t}", f'Task({t}, "ask", name="ask{t}")')] if t in gates else []
            chain.append((f"t{t}", task(t)))
        nodes = [src for _, src in chain]
        edges = [f'builder.add_edge("{a}", "{b}")' for (a, _), (b, _) in zip(chain, chain[1:])]
        asking, entry = [f"ask{g}" for g in sorted(gates)], None
    else:
        names = [f"t{t}" for t in range(1, n + 1)] + (["end"] if n in gates else [])
        nodes = [task(t) for t in range(1, n + 1)] + (['Task(0, "end", name="end")']
                                                      if n in gates else [])

        def into(target):
            if shape == "loopany" and target != "end" and int(target[1:]) in gates:
                return f', activation_group="into_{target}", activation_condition="any"'
            return ""
        back = ', activation_group="loop_back"' if shape == "loop" else ""
        for t, name in enumerate(names[:n], 1):
            after = names[t] if t < len(names) else None
            if t in gates:
                edges.append(f'builder.add_edge("{name}", "{name}", condition=asks'
                             f'{back or into(name)})')
            if after:
                edges.append(f'builder.add_edge("{name}", "{after}"'
                             + (", condition=lambda m: not asks(m)" if t in gates else "")
                             + f"{into(after)})")
        asking, entry = [f"t{g}" for g in sorted(gates)], "t1"
    lines, line = ["def build_team():"], "    builder = DiGraphBuilder()"
    for node in nodes:  # chained, as AutoGen's examples add them
        if len(line) + len(f".add_node({node})") > 100:
            lines.append(line)
            line = "    builder"
        line += f".add_node({node})"
    lines += [line, *(f"    {e}" for e in edges)]
    if entry:  # a cycle at the first task: no node without a parent to start from
        chained = f'{lines[-1]}.set_entry_point("{entry}")'  # the builder's methods return it
        if lines[-1].startswith("    builder.add_edge(") and len(chained) <= LONGEST:
            lines[-1] = chained
        else:
            lines.append(f'    builder.set_entry_point("{entry}")')
    if not asking:
        return "\n".join([*lines, "    return GraphFlow(builder.get_participants(), "
                                  f"graph=builder.build(){turns})"])
    sources = ", ".join(f'"{a}"' for a in asking)
    stop = f'TextMentionTermination("__INTERRUPT__", sources=[{sources}])'
    inline = f"                     termination_condition={stop})"
    if step and len(inline) <= LONGEST:  # two lines either way: the condition where it is used
        return "\n".join([*lines, "    return GraphFlow(builder.get_participants(), graph=builder.build(), "
                                  f"max_turns=1,\n{inline}"])
    return "\n".join([*lines, f"    stop = {stop}",
                      "    return GraphFlow(builder.get_participants(), graph=builder.build(),"
                      + ("\n                     " if step else " ")
                      + f"termination_condition=stop{turns})"])


def _store(every: str, sqlite_store: bool, check, ops, shared: bool):
    """The store as the script writes it: the sources of the functions its calls use, each under
    the name the calls use (``save`` where a call saves, ``load`` where one loads or the check
    reads the state, ``overwrite`` for a tamper), the lines that open it (the one SQLite
    connection where ``shared``: no process is killed), and what makes ``read_state``'s source
    read the state: with a guard against a run never saved only where the checked run has no
    save, and, where nothing else loads from the JSON store, reading the file itself."""
    thread = ops[-1].new_thread if ops[-1].name == "fork" else ops[-1].thread
    unsaved = check.reads_state and f"save({thread_label(thread)!r}" not in every
    labelled = re.search(r"\bload\([^()]*,", every) is not None
    setup, inline = [], False
    if sqlite_store and shared:
        store = {"save": source_as(save_db, "save"),
                 "load": (source_as(load_db, "load") if unsaved else
                          f'NEWEST = "{NEWEST}"\n' + source_as(load_saved_labelled_db, "load")) if labelled
                 else source_as(load_newest_db if unsaved else load_saved_db, "load"),
                 "overwrite": source_as(overwrite_db, "overwrite")}
        setup = list(SQLITE_OPEN)
    elif sqlite_store:
        loader = source_as(load_sqlite if labelled else load_newest_sqlite, "load")
        if not unsaved:  # something was saved before anything loads: the table exists
            loader = without_lines(loader, "CREATE TABLE")
        store = {"save": source_as(save_sqlite, "save"), "load": loader,
                 "overwrite": source_as(overwrite_sqlite, "overwrite")}
    else:
        loader = source_as(load_json, "load")
        if not unsaved:  # the file exists when anything loads
            loader = loader.replace(
                '    path = pathlib.Path(WORKDIR, f"{thread}.json")\n'
                '    return json.loads(path.read_text()) if path.exists() else None',
                f'    return {JSON_READ}')
        store = {"save": source_as(save_json, "save"), "load": loader}
        inline = "load(" not in every  # only read_state loads: it reads the file
    used = {"save": "save(" in every, "load": "load(" in every or (check.reads_state and not inline),
            "overwrite": "overwrite(" in every}

    def reader(src: str) -> str:
        if "load(thread)[" in src:  # read_done: the state read in place where it is that short
            if not (inline or unsaved):
                return src
            src = source_as(read_done_of_state, "read_state")
        if inline and unsaved:
            src = src.replace("):\n", '):\n    path = pathlib.Path(WORKDIR, f"{thread}.json")\n', 1)
            read = f"{JSON_READ_PATH} if path.exists() else {NOTHING_SAVED}"
        elif inline:
            read = JSON_READ
        elif unsaved:
            read = f"load(thread) or {NOTHING_SAVED}"
        else:
            return src
        # alone on its line as is; in a tuple (``state, done, ... = load(thread), [], ...``) in
        # parentheses where it is a conditional expression
        src = src.replace("= load(thread)\n", f"= {read}\n").replace(
            "load(thread),", f"({read})," if " if " in read or " or " in read else f"{read},")
        tuple_line = f"    state, done, answers, pending = ({read}), [], {{}}, None"
        if len(tuple_line) > LONGEST:  # the state read on a line of its own
            src = src.replace(tuple_line, f"    state = {read}\n    done, answers, pending = [], {{}}, None")
        return src
    return [src for name, src in store.items() if used[name]], setup, reader


JSON_READ = 'json.loads(pathlib.Path(WORKDIR, f"{thread}.json").read_text())'
JSON_READ_PATH = "json.loads(path.read_text())"
NOTHING_SAVED = '{"agent_states": {}}'  # the state of a run never saved: no agent, no message


def _crash_at_next_task(step, workflow):
    """A crash "after it completed" of task t < n, written as what it is: task t + 1 failing as
    it starts (before its effect); the script then needs no crash after a call returns."""
    if step.crash is None or step.crash[1] != "after_commit" or step.crash[0] >= workflow.n:
        return step
    t, _, kind = step.crash
    return replace(step, crash=(t + 1, "before_effect", kind), comment=step.comment.replace(
        " after it completed", f" after it completed (as task {t + 1} starts)", 1))


def _raising_in_task(steps: list, agent: str, check, evidence, workflow):
    """Where the one crash of the trace is an exception at a task's own moment, the check does
    not tell a crash from a refusal, and no other step that runs the team enters that task (it
    is no gate, nor a gate's asker, and fired no effect there): the task itself raising there
    (``if self.t == t: raise``), in place of the runtime's ``crash_point`` and the ``CRASH``
    the step would set.  The step's last call, the ``run()`` that enters the task, catches the
    ``RuntimeError`` AutoGen re-raises it as (``_catching``); where that call is not a plain
    line of its own, the step runs through ``observe``, which catches it."""
    found = sole_raising_crash(steps, evidence, workflow.gates, check,
                               runs=lambda step: any(RUNS.search(c) for c in step.calls))
    if found is None:
        return steps, agent
    i, t, moment = found
    point = f'        crash_point(self.t, "{moment}")\n'
    if point not in agent:
        return steps, agent
    raising = (f"        if self.t == {t}:  # the crash point of step {i + 1}\n"
               f'            raise RuntimeError("task {t} fails {moment}")\n')
    caught = _catching(steps[i].calls, t)
    crashed = replace(steps[i], crash=None, calls=caught, guarded=False) if caught else replace(steps[i], crash=None, guarded=True)
    steps = [*steps[:i], crashed, *steps[i + 1:]]
    # the last task of a Swarm raising before it replies: its reply, which ends the run, is
    # never sent (the others' hand-off stays)
    agent = without_lines(agent, f"if self.t == {t}:  # the last task: its output ends", extra=1)
    return steps, without_lines(agent.replace(point, raising), "crash_point(")


def _done_alone(check, evidence):
    """A check of the stored state where the tasks done alone tell the observation apart from
    every allowed state: ``(check, True)`` with the check comparing those alone (the script's
    ``read_state`` reads no more, ``read_done``), its words saying them; else ``(check, False)``."""
    mine = state_value(evidence.observed[evidence.step].state)
    if check.aspect != "state" or mine is None or any(a["done"] == mine["done"] for a in check.allowed):
        return check, False
    words = lambda done: "stored afterwards: tasks done: " + (", ".join(map(str, done)) or "none")  # noqa: E731
    allowed = list({json.dumps(a["done"]): a["done"] for a in check.allowed}.values())
    return replace(check, allowed=tuple({"done": done} for done in allowed),
                   expected=" or ".join(dict.fromkeys(map(words, allowed))),
                   observed=words(mine["done"])), True


def _quiet(evidence) -> bool:
    """Does no task fire its effect in any step of the trace, nor in any observation the
    checked step allows?  Then no task gets past asking (or its crash point): every one that
    runs asks, and nothing writes an output or runs the "end" leaf."""
    seen = [o for o in evidence.observed[: evidence.step + 1] if o is not None]
    return not any(o.effects for o in [*seen, *evidence.allowed])


def _asking_only(agent: str, shape: str, crashing: bool) -> str:
    """``Task`` of a quiet trace (``_quiet``): ``on_messages`` as far as its crash point, if
    any, then asking; no answer to find, no kind to tell (the builder still names each).  Where
    each agent that asks is the gate itself, named t<g> (not split's asker), it asks with its
    name, and ``__init__`` only names it."""
    lines = agent.splitlines()
    start = next(i for i, line in enumerate(lines) if "async def on_messages(" in line)
    end = next(i for i, line in enumerate(lines) if "async def on_reset(" in line)
    body = lines[start + 1:end]
    said = next(i for i, line in enumerate(body) if line.lstrip().startswith("said = "))
    kept = [line for line in body[:said] if ("crash_point(" in line and crashing) or "raise " in line
            or "# the crash point of step" in line]  # no crash point where no step crashes
    ask = next(i for i, line in enumerate(body) if "__INTERRUPT__ t{self.t}" in line)
    asking = body[ask:ask + 2] if body[ask].lstrip().startswith("ask = ") else body[ask:ask + 1]
    asking = [line[4:] for line in asking]  # out of the ``if`` it was in
    head = lines[start] + "  # in this trace every task that runs asks"
    lines = [*lines[:start], head, *kept, *asking, *lines[end:]]
    agent = "\n".join(lines).replace("self.t, self.kind = t, kind", "self.t = t")
    named = agent.replace('f"__INTERRUPT__ t{self.t}"', 'f"__INTERRUPT__ {self.name}"')
    if shape == "split" or re.search(r"self\.t\b(?! = t$)", named, re.MULTILINE):
        return agent  # an asker ask<g>, or a crash point: t is read
    init = re.search(r"^(    def __init__\(.*\):)\n        (super\(\).*)\n        self\.t = t$", named, re.MULTILINE)
    one = init and f"{init.group(1)} {init.group(2)}"
    return named.replace(init.group(0), one) if one and len(one) <= LONGEST else agent


def _without_value(agent: str) -> str:
    """``Task`` where the answer a gate is given is not read (no output's ``answer``, no effect
    log, ``Script``'s lean drops the ``effect`` line, here already): the gate asks until the
    user's message is an answer, with no ``value`` to name."""
    agent = without_lines(without_lines(agent, "value = said.removeprefix("), "effect(self.t, value)")
    return agent.replace("value is None", 'not said.startswith("resume:")')


def _folded(src: str) -> str:
    """``src`` with each top-level ``def`` whose body is one line written on its line (``def
    save(thread, state): ...``), where that stays within ``LONGEST``."""
    lines, out, i = src.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        body = lines[i + 1] if i + 1 < len(lines) else ""
        after = lines[i + 2] if i + 2 < len(lines) else ""
        one = f"{line} {body.strip()}"
        if (line.startswith("def ") and line.endswith(":") and body.startswith("    ")
                and not body.startswith("     ") and not after.startswith(" ")
                and not re.match(r"(if|for|while|with|try)\b", body.strip()) and len(one) <= LONGEST):
            out.append(one)
            i += 2
        else:
            out.append(line)
            i += 1
    return "\n".join(out)


RUNS = re.compile(r"\.run(_stream)?\(")  # a call that runs the team: its tasks execute


_RESULT = re.compile(r"^(\s*)result = (await \w+\.run(_stream)?\(.*)$")


def _unread_results(calls) -> list:
    """A step's calls with ``result = await team.run(...)`` written as the bare ``await
    team.run(...)`` where nothing in the step reads ``result`` (no ``outcome(result)``)."""
    calls = list(calls)
    if any(re.search(r"\bresult\b", c) and not _RESULT.match(c) for c in calls):
        return calls
    return [_RESULT.sub(r"\1\2", c) for c in calls]


_HELD = re.compile(r"^state = (load\([^()]*\))(  # .*)?$")


def _held_state_loaded(calls) -> list:
    """``state = load(...)  # held since ...`` and ``await team.load_state(state)`` as the one
    line ``await team.load_state(load(...))  # held since ...``, where nothing else reads
    ``state`` (a stale resume; a fork saves it again and keeps both)."""
    calls = list(calls)
    for i, call in enumerate(calls[:-1]):
        m = _HELD.match(call)
        if not m or calls[i + 1] != "await team.load_state(state)":
            continue
        if any(re.search(r"\bstate\b", c) for c in calls[i + 2:]):
            continue
        line = f"await team.load_state({m.group(1)}){m.group(2) or ''}"
        if len(line) <= LONGEST:
            return [*calls[:i], line, *calls[i + 2:]]
    return calls


def _team_built_where_used(calls) -> list:
    """``team = build_team()`` and the one line that uses it, ``await team.load_state(...)``
    (a step that loads a state with nothing in it to run), as ``await
    build_team().load_state(...)``."""
    calls = list(calls)
    if "team = build_team()" not in calls:
        return calls
    i = calls.index("team = build_team()")
    users = [k for k, c in enumerate(calls) if k != i and re.search(r"\bteam\b", c)]
    if len(users) != 1 or not calls[users[0]].startswith("await team.load_state("):
        return calls
    k = users[0]
    calls[k] = calls[k].replace("await team.load_state(", "await build_team().load_state(", 1)
    return [c for j, c in enumerate(calls) if j != i]


_FORGED = re.compile(r"^(?P<fn>save|overwrite)\((?P<to>'[^']*'), rewrite\(load\((?P<source>[^()]*)\), "
                     r"(?P<done>\[[^\]]*\]), (?P<answers>\{[^}]*\})\)\)$")


def _expanded(calls, pattern, lines_of) -> tuple:
    """``calls`` with each call that ``pattern`` matches replaced by ``lines_of(match)``."""
    out = []
    for call in calls:
        m = pattern.match(call)
        out += [call] if m is None else lines_of(m)
    return tuple(out)


def _forged_in_place(calls, manager: str, reads_answers: bool) -> tuple:
    """A forgery that only adds the next task's output (``rewrite_next_output``) written out in
    its step: the state loaded, task t's output appended to the manager's thread (``manager``:
    the team's ``GraphManager`` or ``SwarmGroupChatManager``), as AgentChat's message class
    serialises it, and the state stored again.  The output's task number and answer only where
    the check reads them (``read_state``): nothing else does."""
    def written(m) -> list:
        t = ast.literal_eval(m["done"])[-1]
        answer = ast.literal_eval(m["answers"]).get(t)
        fields = (f"task={t}, out={t}" + (f", answer={answer!r}" if answer is not None else "")
                  if reads_answers else f"out={t}")
        return [f"state = load({m['source']})",
                f'output = StructuredMessage[TaskOutput](content=TaskOutput({fields}), source="t{t}")',
                f'state["agent_states"]["{manager}"]["message_thread"].append(output.dump())'
                f"  # an output task {t} never wrote",
                f"{m['fn']}({m['to']}, state)"]
    return _expanded(calls, _FORGED, written)


_OVERWRITE = re.compile(r"^overwrite\((?P<thread>'[^']*'), state\)$")


def _overwritten_in_place(calls, every: str) -> tuple:
    """The one ``overwrite`` of the SQLite store in memory, of a state held in ``state``,
    written where it is made: ``overwrite_db``'s body, its thread the run's name (no helper for
    one call)."""
    if every.count("overwrite(") != 1:
        return tuple(calls)
    body = without_docstring(inspect.getsource(overwrite_db)).split("\n")[1:]
    return _expanded(calls, _OVERWRITE, lambda m: [
        line[4:].replace("state), thread))", f"state), {m['thread']}))") for line in body])


def _every_task_a_gate(agent: str) -> str:
    """``Task`` of a workflow in which every task is a gate (no task runs without an answer),
    where the answer is read once, by the effect: it asks until the user's message is an
    answer, and its effect takes the answer where it fires, with no ``value`` to name."""
    value = '        value = said.removeprefix("resume:") if self.kind == "gate" and said.startswith("resume:") else None\n'
    if value not in agent or len(re.findall(r"\bvalue\b", agent)) != 3 or "effect(self.t, value)" not in agent:
        return agent
    agent = agent.replace(value, "").replace(
        'if self.kind == "gate" and value is None:',
        'if not said.startswith("resume:"):  # every task is a gate: it asks until it is answered').replace(
        "effect(self.t, value)", 'effect(self.t, said.removeprefix("resume:"))')
    if "self.kind" not in agent.replace("self.t, self.kind = t, kind", ""):  # no "end" leaf to tell
        agent = agent.replace("self.t, self.kind = t, kind", "self.t = t")
    return agent


def _nothing_run_returned(script: str) -> str:
    """A step that loads a state in which nothing asks, and runs nothing: its ``return
    'completed'`` says so, with no ``result = None`` line."""
    return re.sub(r"^( +)result = None  # (load_state\(\) took it[^\n]*)\n\1return 'completed'$",
                  r"\1return 'completed'  # \2", script, flags=re.MULTILINE)


def _one_line_output(src: str) -> str:
    """``TaskOutput`` of one field on one line: ``class TaskOutput(BaseModel): out: int``."""
    # ``$(?!\n )``: the field is the class's last line (one field), not the first of several
    return re.sub(r"^class TaskOutput\(BaseModel\):\n    (\w+: \w+)$(?!\n )",
                  r"class TaskOutput(BaseModel): \1", src, flags=re.MULTILINE)



def _catching(calls, t: int) -> tuple | None:
    """A step whose last call runs the team and enters task ``t``, which raises there, with that
    call inside ``contextlib.suppress(RuntimeError)`` (``reproduction.script.suppressed``): what
    AutoGen re-raises the task's exception as; ``None`` where the last call is no plain line of
    its own (a loop's body, say) that runs the team."""
    if not calls or not RUNS.search(calls[-1]) or calls[-1][:1].isspace():
        return None
    return (*calls[:-1], *suppressed(calls[-1:], "RuntimeError", f"task {t}'s raise, as AutoGen re-raises it"))


def reproduction(variant, workflow, evidence) -> str | None:
    script = _reproduction(variant, workflow, evidence, unread_answer=True)
    if script is not None and "EFFECTS" in script and "effect(self.t" not in script:
        # the effect log stayed (Script's lean kept it): the task's effect, with its answer, too
        script = _reproduction(variant, workflow, evidence, unread_answer=False)
    if script is None:
        return None
    return _nothing_run_returned(fired_inlined(effect_inlined(script, said="  # its one effect")))


def _reproduction(variant, workflow, evidence, unread_answer: bool) -> str | None:
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
        if unwritten(calls):
            return None  # a step with no script lines yet (a forged part): the older script
        if op.name not in ("query", "race") and not calls:
            return None  # the runner made no call (a no-op resume): nothing to repeat
        if op.name == "query":
            calls = []  # a read: the check does it
        last = i == evidence.step
        while last and check.aspect == "effects" and len(calls) > 1 and calls[-1].startswith("save("):
            calls = calls[:-1]  # saved after the effects the check counts fired: no part of it
        if last and check.reads_outcome:
            if any(c.lstrip().startswith("result = ") for c in calls):
                calls = calls + ["outcome(result)"]
            else:  # the runner loaded the state, found nothing asking, and did not run the team
                calls = calls + ["result = None  # load_state() took it, no message in it asks: "
                                 "nothing to run"]
        if not sqlite_store:  # the JSON store holds one state per run: overwriting it saves
            calls = [re.sub(r"^overwrite\(", "save(", c) for c in calls]
        note = (" (here: every racer loads the saved state before any saves)"
                if op.name == "race" else "")
        calls = _team_built_where_used(_held_state_loaded(_unread_results(calls)))
        steps.append(_crash_at_next_task(step_of(evidence, i, calls, note=note), workflow))
    check, done_only = _done_alone(check, evidence)
    if check.reads_state:
        thread = ops[-1].new_thread if ops[-1].name == "fork" else ops[-1].thread
        check = replace(check, state_src=f"read_state({thread_label(thread)!r})")
    every = "\n".join(c for s in steps for c in s.calls)
    shape, gated = options["gate"], bool(workflow.gates)
    bad = any(s.bad_output is not None for s in steps)
    end = shape in ("loop", "loopany") and workflow.n in workflow.gates
    agent = _task_source(shape, workflow.n, gated, end, bad)
    steps, agent = _raising_in_task(steps, agent, check, evidence, workflow)
    killed = any(s.crash is not None and s.crash[2] == "sigkill" for s in steps)
    if _quiet(evidence):
        agent = _asking_only(agent, shape, any(s.crash is not None for s in steps))
    store, opening, reader = _store(every, sqlite_store, check, ops, shared=not killed)
    tampered = "rewrite(" in every
    rewriters = {_rewriter(evidence, i, c) for i, s in enumerate(steps) for c in s.calls
                 if "rewrite(" in c}
    rewriter = rewriters.pop() if len(rewriters) == 1 else rewrite
    reads_answers = check.reads_state and not done_only and (gated or tampered)  # read_state's
    if tampered and rewriter is rewrite_next_output:  # the forgery written out where it is made
        manager = "SwarmGroupChatManager" if shape == "handoff" else "GraphManager"
        steps = [replace(s, calls=_forged_in_place(s.calls, manager, reads_answers)) for s in steps]
        if sqlite_store and not killed:
            steps = [replace(s, calls=_overwritten_in_place(s.calls, every)) for s in steps]
        every = "\n".join(c for s in steps for c in s.calls)
        store, opening, reader = _store(every, sqlite_store, check, ops, shared=not killed)
    state_reader = (read_done if done_only else read_state if gated or tampered
                    else read_state_without_gates)
    readers = [*([rewriter] if "rewrite(" in every else []),
               *([(outcome if gated else outcome_without_gates)] if "outcome(" in every else []),
               *([state_reader] if check.reads_state else [])]
    output = _source(TaskOutput)
    if not ("rewrite(" in every or (check.reads_state and state_reader is read_state)):
        # no output's task number or answer is read (only the tasks done, or nothing)
        output = without_lines(without_lines(output, "answer:"), "task: int")
        agent = agent.replace("task=self.t, ", "").replace(", answer=value", "")
        if not killed and check.aspect in ("outcome", "state") and all(
                s.crash is None or (s.crash[2] == "exception" and s.crash[1] != "after_commit")
                for s in steps) and unread_answer:  # no effect log (Script's lean): nothing reads it
            agent = _without_value(agent)
    if shape != "split" and set(workflow.gates) == set(range(1, workflow.n + 1)):
        agent = _every_task_a_gate(agent)
    names = {outcome_without_gates: "outcome", rewrite_next_output: "rewrite",
             read_state_without_gates: "read_state", read_done: "read_state"}
    readers_src = [(reader if f in (read_state, read_state_without_gates, read_done) else str)(
        source_as(f, names.get(f, f.__name__))) for f in readers]
    parts = [_one_line_output(output), _inlined_output(agent),
             *map(_folded, [_team_source(shape, workflow, options["save"] == "step"),
                            *(["\n".join(opening)] if opening and store else []), *store,
                            *readers_src])]
    if "asks(" in "\n".join(parts):  # what tells an asking message (not in a chain)
        parts.insert(2, _folded(_source(asks)))
    defined = "\n".join(parts)
    uses = lambda name: re.search(rf"\b{name}\b", defined) is not None  # noqa: E731
    constants = [(name, value) for name, value in (("N", workflow.n),
                                                   ("GATES", set(workflow.gates) or "set()"))
                 if uses(name)]
    glue = [*(["overwrite = save  # the JSON store holds one state per run"]
              if "overwrite(" in every and not sqlite_store else []),
            *([f"{', '.join(n for n, _ in constants)} = {', '.join(str(v) for _, v in constants)}"]
              if constants else []),
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if any(s.bad_output is not None for s in steps[1:]) else [])]
    text = defined + "\n" + every
    messages = sorted(m for m in ("HandoffMessage", "StructuredMessage", "TextMessage")
                      if m in text)
    conditions = [c for c in ("HandoffTermination", "SourceMatchTermination",
                              "TextMentionTermination") if c in defined]
    imports = ("from pydantic import BaseModel",
               "from autogen_agentchat.agents import BaseChatAgent",
               "from autogen_agentchat.base import Response",
               *([f"from autogen_agentchat.conditions import {', '.join(conditions)}"]
                 if conditions else []),
               f"from autogen_agentchat.messages import {', '.join(messages)}",
               "from autogen_agentchat.teams import "
               + ("Swarm" if shape == "handoff" else "DiGraphBuilder, GraphFlow"))
    stdlib = ["json", "os"] + [m for m in ("copy", "pathlib", "sqlite3", "uuid") if f"{m}." in defined]
    return Script(
        header=header("AutoGen AgentChat", variant.description, evidence,
                      pins(evidence, PINNED)),
        imports=imports,
        workflow_src="\n".join([*parts, *glue]),
        steps=tuple(steps),
        check=check,
        stdlib=tuple(stdlib),
        asynchronous=True,
        lean=True,
    ).source()


__all__ = ["reproduction"]
