"""A CrewAI Flows finding as a short script: the flow, the calls the case made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script`` from
the definitions below (pasted into the script by name with ``inspect.getsource``: each is real
code) and the calls ``case.py`` recorded while the engine replayed the trace
(``WorkflowFlow.from_pending(ID['run-1'], persistence).resume('a')``).  A flow id is a fresh
uuid on every run, so the script keeps it in ``ID`` by run name; the checkpoint a run paused at
is found again by what it records (``checkpoint_at_gate``), the latest one as ``crewai checkpoint
resume <location>`` picks it (``latest_checkpoint``).

The flow class itself is written per workflow (``flow_class``): one ``@start``/``@listen`` chain,
a ``@human_feedback`` method before each gated task whose provider pauses durably, every task
calling ``task_body``.  Where flows checkpoint, each step runs in a fresh ``contextvars``
context, as the case runs each operation: ``Flow.from_checkpoint`` and ``Flow.fork`` attach
their runtime state to the caller's context, and later flows in it would join that state (a
``@persist`` flow records none: its steps run one after the other).

Written for every variant and every operation but tampering (for that the report gives the
replay line instead).  A twin recovery is written as the recovery of the
original store, the first of the two the fuzzer runs (the second, on a copy, runs after it and
cannot change it); where only the copy's recovery differs, the script copies the store first as
the engine does (``COPY``) and checks the copy's recovery against the original's
(``_with_twin``).  A stale resume through the flow id is ``from_pending(id).resume(v)`` again.  A forced race holds its racers at a
``multiprocessing.Barrier`` between ``from_pending`` (the read) and ``resume`` (the write), as
the case's ``race_ready`` does; racers that make the same calls are one ``racer`` function, run
in each process (``_one_racer``).

What the script says once is written in its shortest form: the list log's ``effect`` inside
``task_body`` (``_effect_in_task``), ``fired`` and ``outcome`` where their one reader reads them,
a flow with one gate found paused by the trigger alone (``checkpoint_at_the_gate``), the flow as
far as the trace goes (``_reach``); a script still over the issue's budget takes the compact
spellings of ``_compact``.

Where every step runs in a child process, a crashing step's child inherits ``CRASH`` from the
parent, which sets it before the fork (``_crash_set_in_parent``): no ``observe_crashing``, the
crash of the last task "after it completed" written as the step's own last line.  Where steps
run in fresh contexts, the last runs in the script's own (``_last_step_here``): nothing runs
after it, so that context is as fresh as a copy.

A custom store (``--store``) is built by its factory's ``ScriptStore`` (``custom_store``: the
recipe's own functions and setup, pasted), registered with ``set_flow_persistence_factory``
for the class's ``@persist()``, as the case registers it; its calls are ``@persist``'s.  None
where a step runs in a child process or for a differing twin recovery (see ``reproduction``).
"""

from __future__ import annotations

import ast
import glob
import inspect
import json
import os
import pathlib
import re
from dataclasses import dataclass, replace

from crewai.flow.async_feedback import HumanFeedbackPending
from crewai.flow.flow import FlowState
from crewai.state.checkpoint_config import CheckpointConfig

from adapters.reproduction.runtime import WORKDIR, crash_point, effect
from adapters.reproduction.script import (
    MOMENTS,
    OUTCOME_WORDS,
    Check,
    Script,
    check_for,
    crash_spot,
    effect_inlined,
    effect_rows,
    fired_inlined,
    header,
    line_count,
    pins,
    ran,
    sole_raising_crash,
    source_as,
    step_of,
    store_class,
    store_parts,
    without_docstring,
    without_lines,
)

from . import sandbox
from .case import ON_EVENTS
from .workflow import feedback_of

PINNED = ("crewai",)
# The switches of ``sandbox.SWITCHES`` a script sets: telemetry (``OTEL_SDK_DISABLED``: CrewAI's
# one reader of the three telemetry switches, and the OpenTelemetry SDK), the PyPI version check
# (``CI``), the first-run trace prompt, trace auto-collection and ``./.crewai``
# (``CREWAI_TESTING``).  Tracing stays off without them: the script's fresh HOME holds no trace
# consent (``should_enable_tracing``); the others are redundant with these, or concern what a
# flow without Memory never builds (chromadb) or a Redis lock nobody configured.
SCRIPT_SWITCHES = ("OTEL_SDK_DISABLED", "CI", "CREWAI_TESTING")
SUPPORTED_OPS = {"start", "resume", "recover", "twin_recover", "fork", "query", "race", "stale_resume"}
BAD_OUTPUT, PROVIDER, SQLITE = None, None, None  # the script's glue sets these
persistence = None  # the script's glue: SQLiteFlowPersistence("flows.db")


# -- what the script contains --------------------------------------------------------------------


class WorkflowState(FlowState):
    done: list[int] = []
    answers: dict[int, str] = {}


class PendingProvider:
    """Asked for feedback, it pauses the flow durably (no console, no LLM)."""

    def request_feedback(self, context, flow): raise HumanFeedbackPending(context=context)


def task_body(state, t, value):
    """Task t: its one effect (with the answer, if it is a gate), then its result in the state;
    task ``BAD_OUTPUT`` writes a value outside the state schema (a string where the schema has a
    task number).  The script keeps only what its trace uses (``_task_body``)."""
    crash_point(t, "before its effect")
    effect(t, value)
    crash_point(t, "after its effect")
    out = "<bad>" if t == BAD_OUTPUT else t
    if out not in state.done:  # a re-run shows in the effects, not as a duplicate
        state.done = [*state.done, out]
    if value is not None:
        state.answers = {**state.answers, t: value}
    return out


def checkpointing(location, restore_from=None):
    """Checkpoint into ``location`` whenever a method finishes or the flow pauses."""
    return CheckpointConfig(location=location, provider=PROVIDER(), restore_from=restore_from,
                            on_events=["method_execution_finished", "method_execution_paused"])


# The script carries the backend's one, as ``checkpoints``.


def checkpoints_json(location):
    """Every checkpoint file under ``location``, oldest first, as ``crewai checkpoint resume``
    orders them (by modification time)."""
    files = glob.glob(os.path.join(location, "**", "*.json"), recursive=True)
    return sorted(files, key=lambda path: (os.stat(path).st_mtime_ns, path))


def checkpoints_sqlite(location):
    """Every checkpoint row in the file ``location``, oldest first (by rowid), as
    ``file.db#id``, the form ``restore_from`` takes."""
    if not os.path.exists(location):
        return []
    rows = SQLITE.connect(location).execute("SELECT id FROM checkpoints ORDER BY rowid")
    return [f"{location}#{row[0]}" for row in rows]


checkpoints = None  # the script's own: one of the two above


def latest_checkpoint(location):
    return checkpoints(location)[-1]


def checkpoint_at_gate(location, gate):
    """The newest checkpoint written when the flow paused at ``gate_<gate>``."""
    for loc in reversed(checkpoints(location)):
        doc = json.loads(PROVIDER().from_checkpoint(loc))  # as its provider reads it
        paused = [n["event"]["method_name"] for n in doc["event_record"]["nodes"].values()
                  if n["event"]["type"] == "method_execution_paused"]  # in the order they came
        if doc["trigger"] == "method_execution_paused" and paused[-1:] == [f"gate_{gate}"]:
            return loc


def checkpoint_at_the_gate(location, gate):
    """``checkpoint_at_gate`` of a flow with one gate, which it can pause at alone: the newest
    checkpoint written as the flow paused (the script names it ``checkpoint_at_gate``)."""
    return [loc for loc in checkpoints(location)
            if json.loads(PROVIDER().from_checkpoint(loc))["trigger"] == "method_execution_paused"][-1]


# ``read_state``: the script carries the one of these its backend and workflow need.


def read_state_persist(flow_id):
    """Tasks done, answers and the pending gate, as stored: the flow's latest saved state and
    its pending feedback."""
    state = persistence.load_state(flow_id) or {"done": [], "answers": {}}
    pending = persistence.load_pending_feedback(flow_id)
    return {"done": state["done"], "answers": {str(t): v for t, v in state["answers"].items()},
            "pending": int(pending[1].method_name.split("_")[1]) if pending else None}


def read_state_checkpoint(flow_id, location):
    """``read_state_persist``, the state read from the flow's latest checkpoint."""
    found = checkpoints(location)
    entities = json.loads(PROVIDER().from_checkpoint(found[-1]))["entities"] if found else []
    state = next((e["checkpoint_state"] for e in entities if e["entity_type"] == "flow"), None)
    state = state or {"done": [], "answers": {}}
    pending = persistence.load_pending_feedback(flow_id)
    return {"done": state["done"], "answers": {str(t): v for t, v in state["answers"].items()},
            "pending": int(pending[1].method_name.split("_")[1]) if pending else None}


def read_state_persist_done(flow_id):
    """The tasks done, as stored (a flow without gates has no answers and no pending one)."""
    return {"done": (persistence.load_state(flow_id) or {"done": []})["done"]}


def read_state_checkpoint_done(location):
    """``read_state_persist_done``, from the flow's latest checkpoint."""
    found = checkpoints(location)
    entities = json.loads(PROVIDER().from_checkpoint(found[-1]))["entities"] if found else []
    state = next((e["checkpoint_state"] for e in entities if e["entity_type"] == "flow"), None)
    return {"done": state["done"] if state else []}


class Kept:
    """Strings kept in files, one a key: what one child process keeps, the processes after it read."""

    def __getitem__(self, key): return pathlib.Path(WORKDIR, repr(key)).read_text()

    def __setitem__(self, key, value): pathlib.Path(WORKDIR, repr(key)).write_text(value)


def outcome(result):
    return "interrupted" if isinstance(result, HumanFeedbackPending) else "completed"


# -- composing it ----------------------------------------------------------------------------------


def flow_class(workflow, persist: str | None, crashing: set, stateful: bool = True,
               reach: tuple | None = None, restored: bool = False) -> str:
    """The flow of ``workflow`` as a user writes it: tasks 1..n in one ``@listen`` chain; a gated
    task is a ``@human_feedback`` method that pauses, and the task listening to it.  ``persist``:
    the argument of the class's ``@persist(...)`` (``""``: the registered default), None for
    none; ``crashing``: the tasks that may die before their effect (a gated one in its gate,
    before it asks); ``stateful``: the tasks write ``WorkflowState`` (else the flow's state is
    the bare ``FlowState``, its id, and the tasks are given none); ``reach``: ``(last, gate)``
    of ``_reach``, the flow as far as the trace goes (tasks 1..last, then the gate of task
    ``gate`` alone, where the flow stops), None for all of it; ``restored``: some step restores
    a flow from a checkpoint, whose gated listeners read the answer through ``feedback_of``."""
    lines = [f"@persist({persist})"] if persist is not None else []
    last, stop = reach or (workflow.n, None)
    lines += [f"class WorkflowFlow(Flow[{'WorkflowState' if stateful else 'FlowState'}]):",
              "    _skip_auto_memory = True  # no Memory: it would import lancedb"]
    previous = None
    for t in range(1, last + 1 + (stop is not None)):
        listen = "@start()" if previous is None else f"@listen({previous})"
        if t == stop:  # the flow pauses here, and no run of the trace answers it
            left = f"task {t}" if t == workflow.n else f"tasks {t}-{workflow.n}"
            lines += [f"    {listen}", f'    @human_feedback(message="gate {t}", provider=PendingProvider())',
                      f'    def gate_{t}(self): return "gate {t}"  # no run goes further: {left} left out']
            break
        value = "None"
        if t in workflow.gates:
            crash = [f'        crash_point({t}, "before its effect")'] if t in crashing else []
            lines += [f"    {listen}",
                      f'    @human_feedback(message="gate {t}", provider=PendingProvider())',
                      *([f"    def gate_{t}(self):", *crash, f'        return "gate {t}"'] if crash
                        else [f'    def gate_{t}(self): return "gate {t}"'])]
            listen, value = f"@listen(gate_{t})", ("feedback_of(self, result)" if restored
                                                    else "self.last_human_feedback.feedback")
        state = "self.state, " if stateful else ""
        args = "self, result=None" if restored and t in workflow.gates else "self"
        lines += [f"    {listen}", f"    def task_{t}({args}): return task_body({state}{t}, {value})"]
        previous = f"task_{t}"
    return "\n".join(lines)


def _reach(evidence, ops, workflow) -> tuple | None:
    """How far the flow goes in any run of the trace, the allowed ones included: ``(last, gate)``,
    the last task any of them ran and the gate after it that one stops at (None if none does),
    for a trace of starts, resumes and forks with no crash point whose runs all stop at a gate
    or raise (a task that ran fired its effect or stands in the state); None where some run may
    go to the end, or the trace reaches the last task anyway."""
    if any(op.name not in ("start", "resume", "fork", "query") or getattr(op, "crash", None)
           for op in ops):
        return None
    seen = [*evidence.observed[: len(ops)], *evidence.allowed]
    if any(o.outcome not in ("interrupted", "rejected") for o in seen):
        return None
    ran = {t for o in seen for _, t, _ in o.effects}
    ran |= {t for o in seen if o.state is not None for t in o.state.done if isinstance(t, int)}
    pending = {o.state.pending for o in seen if o.state is not None and o.state.pending}
    last = max(ran | {p - 1 for p in pending} | {0})
    stop = last + 1 if last + 1 in pending else None
    if last + (stop is not None) >= workflow.n:
        return None
    return last, stop


def _source(*objects, backend: str = "persist", done_only: bool = False, one_gate: bool = False) -> str:
    """The objects' source; ``checkpoints`` is the backend's, ``read_state`` the backend's
    reader (``done_only``: of the tasks done alone).  A SQLite ``checkpoints`` that only a
    checkpoint the script knows is there is looked for in (no ``read_state``) does not ask
    whether the file exists.  ``one_gate``: the flow has one gate, so ``checkpoint_at_gate``
    looks for the newest pause alone (``checkpoint_at_the_gate``)."""
    out = []

    def finder():
        if one_gate:
            return source_as(checkpoint_at_the_gate, "checkpoint_at_gate")
        return without_docstring(inspect.getsource(checkpoint_at_gate))
    # ``checkpoints`` that only ``checkpoint_at_gate`` calls: its lines written into that loop.
    inline = checkpoint_at_gate in objects and "checkpoints" in objects and not (
        {latest_checkpoint, "read_state"} & set(objects))
    for o in objects:
        if inline and o == "checkpoints":
            continue
        if inline and o is checkpoint_at_gate:
            listing = source_as(globals()[f"checkpoints_{backend}"], "checkpoints")
            out.append(_with_checkpoints_inlined(finder(), without_lines(listing, "if not os.path.exists", extra=1)))
        elif o == "read_state":
            kind = "persist" if backend == "persist" else "checkpoint"
            o = globals()[f"read_state_{kind}{'_done' if done_only else ''}"]
            out.append(source_as(o, "read_state"))
        elif o == "checkpoints":
            src = source_as(globals()[f"checkpoints_{backend}"], "checkpoints")
            if "read_state" not in objects:
                src = without_lines(src, "if not os.path.exists", extra=1)
            out.append(src)
        elif o is checkpoint_at_gate:
            out.append(finder())
        else:
            out.append(without_docstring(inspect.getsource(o)))
    return "\n".join(out)


def _with_checkpoints_inlined(finder: str, listing: str) -> str:
    """``checkpoint_at_gate``'s source (``finder``) with the body of ``checkpoints`` (``listing``:
    its statements, then ``return <the list>``) written into it: the statements first, the list
    where it called ``checkpoints(location)``."""
    *statements, last = listing.splitlines()[1:]
    found = last.strip().removeprefix("return ")
    head, *body = finder.splitlines()
    return "\n".join([head, *statements, *(line.replace("checkpoints(location)", found) for line in body)])


def _task_body(answers: bool, done: bool, bad: bool, read: bool = True) -> str:
    """``task_body`` as the trace uses it: without the answer where nothing reads it (no task
    asks for one, or the check reads no state), without the state at all where nothing reads
    the tasks done either (no state check, no value written outside the schema), the task
    itself as its result where none writes outside the schema (its crash points are trimmed by
    ``Script``, and by ``reproduction`` where no task may die before its effect in it: none,
    or only gated ones in a run that starts, which die in their gates).  ``read``: the check
    reads the tasks done; where it does not (they are there for the value outside the schema
    alone), a task re-run may write its number twice."""
    src = without_docstring(inspect.getsource(task_body))
    if done and not read:
        src = src.replace("    if out not in state.done:  # a re-run shows in the effects, not as a duplicate\n"
                          "        state.done = [*state.done, out]", "    state.done = [*state.done, out]")
    if not answers:
        src = without_lines(src, "if value is not None", extra=1)
    if not done:
        src = without_lines(src, "if out not in state.done", extra=1)
        src = src.replace("def task_body(state, t, value):", "def task_body(t, value):", 1)
    if not bad:
        src = re.sub(r"\bout\b", "t", without_lines(src, "out = "))
    return src


def _raising(body: str, raising: tuple | None) -> str:
    """``task_body``'s source with the crash point of ``raising`` (``sole_raising_crash``: step
    i, task, moment) written as the task's own raise."""
    if raising is None:
        return body
    i, task, moment = raising
    return body.replace(f'    crash_point(t, "{moment}")',
                        f"    if t == {task}:  # the crash point of step {i + 1}\n"
                        f'        raise RuntimeError("task {task} fails {moment}")', 1)


def _setup(backend: str, n: int, gates, restored: bool, pending: bool,
           store_imports: tuple | None = None) -> list:
    """Before CrewAI is imported: every file it writes goes into WORKDIR (the current directory
    and HOME), and nothing phones home (``SCRIPT_SWITCHES``); ``pending``: the script names
    ``HumanFeedbackPending``; ``store_imports``: a custom store's imports, which replace
    ``SQLiteFlowPersistence`` (its default persistence is registered)."""
    lines = [*_environment(),
             *(["from crewai.flow.async_feedback import HumanFeedbackPending"] if pending else []),
             f"from crewai.flow.flow import Flow, FlowState{', listen' if n > 1 or gates else ''}, start",
             *(["from crewai.flow.human_feedback import human_feedback"] if gates else [])]
    if store_imports is None:
        lines.append("from crewai.flow.persistence import SQLiteFlowPersistence"
                     + (", persist" if backend == "persist" else ""))
    else:
        lines += ["from crewai.flow.persistence import persist",
                  "from crewai.flow.persistence.factory import set_flow_persistence_factory",
                  *store_imports]
    if restored:
        lines.append("from crewai.flow.persistence.factory import set_flow_persistence_factory")
    if backend == "json":
        lines.append("from crewai.state import CheckpointConfig, JsonProvider as PROVIDER")
    if backend == "sqlite":
        lines += ["from crewai.state import CheckpointConfig, SqliteProvider as PROVIDER",
                  "from crewai.state.provider import sqlite_provider",
                  "import pysqlite3.dbapi2 as SQLITE",
                  "sqlite_provider.sqlite3 = SQLITE  # it stores jsonb(): SQLite >= 3.45, not every "
                  "Python's"]
    return lines


def _environment(compact: bool = False) -> list:
    """The lines that set the script's directory and environment (``_setup``); ``compact``: the
    environment on one line (``_compact``)."""
    env = ", ".join(f"{k}={sandbox.SWITCHES[k]!r}" for k in SCRIPT_SWITCHES)
    if compact:
        return ["os.chdir(WORKDIR)  # CrewAI writes under the current directory and HOME; "
                "no telemetry, version check, trace prompt:",
                f"os.environ.update(HOME=WORKDIR, XDG_DATA_HOME=WORKDIR, {env})"]
    return ["os.chdir(WORKDIR)  # CrewAI writes under the current directory and HOME",
            "os.environ.update(HOME=WORKDIR, XDG_DATA_HOME=WORKDIR,  # no telemetry, version check, "
            "trace prompt",
            f"                  {env})"]


def _kept(calls: tuple, reads_state: bool) -> list:
    """Per operation, the ``ID[...] = ...`` and ``AT_GATE[...] = ...`` lines (kinds "id" and
    "gate": a flow id, the checkpoint a run paused at) that a later line reads; the others say
    nothing and are left out."""
    # A state check reads the last operation's thread: its read keeps that run's id.
    last = calls[-1] if calls and reads_state else ()
    kept, later = [], " ".join(src for kind, src in last if kind == "read")
    for entries in reversed(calls):
        mine = set()
        for kind, src in reversed(entries):
            name, _, value = src.partition(" = ")
            if kind in ("id", "gate") and name in later:
                mine.add((kind, src))
                later = later.replace(name, "") + " " + value  # earlier lines see an older value
            elif kind == "call":
                later += " " + src
        kept.append(mine)
    return kept[::-1]


# The check's words (adapters.reproduction.script), as a CrewAI user says them.
WORDS = (
    (r"stops at an interrupt", "pauses for feedback (returns HumanFeedbackPending)"),
    (r"runs to the end", "completes"),
    (r"task (\d+) ran with ", r"task_\1 ran with feedback "),
    (r"task (\d+) (ran|answered)", r"task_\1 \2"),
    (r"the interrupt of task (\d+) pending", r"gate_\1 waiting for feedback"),
    (r"nothing pending", "no feedback pending"),
    (r"tasks done: ", "state.done: "),
)


def in_crewai_terms(check, calls: list):
    """``check`` with its expected and observed text in CrewAI's words, naming the call that
    diverged (``kickoff()``, ``resume('a')``) rather than "the call"."""
    last = (re.findall(r"\.(kickoff\(\)|resume\('[^']*'\)|kickoff)", calls[-1]) or ["the call"])[-1] \
        if calls else "the call"
    name = "kickoff()" if last == "kickoff" else last

    def say(text):
        for pattern, words in WORDS:
            text = re.sub(pattern, words, text)
        return text.replace("the call ", f"{name} ", 1)
    return replace(check, expected=say(check.expected), observed=say(check.observed))


def _held(call: str) -> tuple:
    """A forced racer's ``X.resume(v)`` as ``flow = X``, the barrier, ``flow.resume(v)``: every
    racer reads the pending feedback before any resumes."""
    read, _, value = call.rpartition(".resume(")
    return (f"flow = {read}", "BARRIER.wait()", f"flow.resume({value}")


def _joined(calls: list, width: int) -> list:
    """``flow = X`` then ``flow.kickoff()`` -> ``X.kickoff()`` (nothing else reads ``flow``),
    where that fits in ``width`` characters."""
    out = []
    for src in calls:
        if src == "flow.kickoff()" and out and out[-1].startswith("flow = ") \
                and len(out[-1]) - len("flow = ") + len(".kickoff()") <= width:
            src = out.pop().removeprefix("flow = ") + ".kickoff()"
        out.append(src)
    return out


def _inlined(calls: list, later: str) -> list:
    """``calls`` without ``ID[...] = flow.state.id`` where only this step reads that id (not
    ``later``, the steps after it and the check) and ``flow`` stays the same flow: its readers
    name ``flow.state.id`` itself (a fork's branch answered in the step that forks it)."""
    out, rest = [], list(calls)
    while rest:
        src = rest.pop(0)
        name, _, value = src.partition(" = ")
        if (value == "flow.state.id" and name.startswith("ID[") and name not in later
                and not any(c.startswith("flow = ") for c in rest)):
            rest = [c.replace(name, value) for c in rest]
        else:
            out.append(src)
    return out


def _without_unread(script: str) -> str:
    """``script`` without the glue that keeps what its check does not read: the effects a step
    fired (``before = ...`` and ``fired = ...``) where the check reads the stored state, its
    status where the check reads no outcome."""
    lines = script.splitlines()
    check = lines[-1]
    if "status" not in check:  # a race's: its effects alone
        lines = [("fired = effects()[before:]" if line == "status, fired = 'completed', effects()[before:]"
                  else line) for line in lines]
    if "fired" not in check:
        lines = [line for line in lines if not re.fullmatch(r"fired = .*\[before:\]", line)]
        if "status" not in check:
            lines = [line for line in lines if line != "status, fired = 'completed', effects()[before:]"]
            lines = [re.sub(r"^status(, fired)? = ", "", line) for line in lines]
        if not any("[before:]" in line for line in lines if not line.startswith(" ")):
            lines = [line for line in lines if not re.fullmatch(r"before = len\(.*\)", line)]
    return "\n".join(lines) + "\n"


def _twin_differs(evidence) -> bool:
    """A twin recovery whose copy's outcome or effects differ from the original's, which the
    contract allows (a NondetRecovery that only the copy shows)."""
    main = evidence.observed[evidence.step]
    return (evidence.ops[evidence.step].name == "twin_recover" and main.twin is not None
            and (main.outcome, effect_rows(main)) != (main.twin.outcome, effect_rows(main.twin)))


# The copy a restored backup or a second host has of the store: the bytes, in directory order,
# with fresh file times (``clone_store``, ``adapters.files.copy_files``), the SQLite journal as it is.
COPY = ('shutil.copytree("ck", "copy/ck", copy_function=shutil.copyfile)  # bytes, fresh mtimes',
        'for name in glob.glob("flows.db*"):  # flows.db, its -wal and -shm as they are',
        '    shutil.copyfile(name, f"copy/{name}")')


def _with_twin(script: str, evidence, calls: list, isolated: bool) -> str:
    """``script`` whose last step recovers the store, as the recovery of a byte copy taken
    before it too (``COPY``), checked against the first: the engine's twin recovery."""
    lines = script.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("# Expected: "))
    start = max(i for i, line in enumerate(lines[:end]) if re.match(r"# \d+\. ", line))
    block = lines[start + 1: end]
    defs = [line for i, line in enumerate(block) if line.startswith((" ", "def "))]
    runs = [line for line in block if line not in defs]
    again = (["before = len(effects())", runs[-2].replace("status = ", "twin = ", 1) + ", effects()[before:]"]
             if isolated else [runs[-1].replace("status, fired = ", "twin = ", 1)])
    main = evidence.observed[evidence.step]
    said = in_crewai_terms(Check(
        aspect="outcome", allowed=(),
        expected="the copy recovers as the store did: the same outcome, the same tasks run",
        observed=f"the store: the call {OUTCOME_WORDS[main.outcome]}, {ran(effect_rows(main))}; "
                 f"the copy: {OUTCOME_WORDS[main.twin.outcome]}, {ran(effect_rows(main.twin))}"),
        calls)
    lines[start: len(lines)] = [
        lines[start].replace("the first of two recoveries each on its own copy of the store",
                             "on the store and on a byte copy of it taken first"),
        *COPY, *defs, *runs,
        'os.chdir("copy")  # CrewAI stores paths relative to the current directory',
        *again,
        f"# Expected: {said.expected}", f"# Observed: {said.observed}",
        "verdict('the recovery of the copy (outcome, effects fired)', twin, [(status, fired)])"]
    text = "\n".join(lines) + "\n"
    return text.replace("the first of two recoveries each on its own copy of the store",
                        "then on a byte copy of the store taken before it")


def reproduction(variant, workflow, evidence) -> str | None:
    options = dict(variant.options)
    backend = options["backend"]
    ops = evidence.ops[: evidence.step + 1]
    if evidence.step >= len(evidence.observed) or any(op.name not in SUPPORTED_OPS for op in ops):
        return None
    check = check_for(evidence, state_readable=True, outcome_readable=ops[-1].name != "race")
    if check is not None and check.aspect == "outcome" and evidence.observed[evidence.step].outcome == "crashed":
        # The crash point is ours; that it was reached at all says which task ran again: say
        # that (the effects) when it tells the observation apart too.
        check = check_for(evidence, state_readable=True, outcome_readable=False) or check
    twin = check is None and _twin_differs(evidence)
    if twin:  # the recovery of the copy tells it apart: the check is written by _with_twin
        check = Check(aspect="outcome", allowed=(), expected="", observed="")
    if check is None:
        return None
    step_calls = [src for kind, src in (evidence.calls[evidence.step] if evidence.step < len(evidence.calls)
                                        else ()) if kind == "call"]
    check = in_crewai_terms(check, step_calls)
    # Without gates nothing is answered or pending: the script reads the tasks done alone.
    done_only = not workflow.gates
    if done_only and check.aspect == "state":
        check = replace(check, allowed=tuple({"done": a["done"]} for a in check.allowed),
                        expected=check.expected.replace("; no feedback pending", ""),
                        observed=check.observed.replace("; no feedback pending", ""))
    # CrewAI's event bus runs threads that a fork does not copy: a child forked from a process
    # that ran a flow hangs.  So when a step must run in a child (a race, a SIGKILL), every step
    # does, and the ids they keep go through a file.  Otherwise, where flows checkpoint, each
    # step runs in a fresh context, as the case runs each operation: every flow joins the
    # runtime state of the caller's context (the one its checkpoints record), and a restored
    # one attaches its own there.  A flow that only persists (@persist) records none of it: its
    # steps run one after the other, as a user's would; so does a script of one step.
    isolated = any(op.name == "race" or (getattr(op, "crash", None) is not None
                                         and op.crash.kind == "sigkill") for op in ops)
    fresh = (not isolated and backend not in ("persist", "custom")
             and sum(op.name != "query" for op in ops) > 1)
    store = None
    if backend == "custom":
        # A custom store (--store) as its factory's ScriptStore builds it, under @persist()'s
        # calls and reads.  Not where a step runs in a child (a race, a SIGKILL): @persist()
        # holds the parent's store object, whose connection the children would share; nor for
        # a twin recovery, whose copy the factory makes (StoreHandle.clone), not a file copy.
        store = None if isolated or twin else custom_store(options)
        if store is None:
            return None
        backend = "persist"
    calls = [_read_by_location(entries) if done_only and backend != "persist" else entries
             for entries in evidence.calls[: len(ops)]]
    kept = _kept(calls, check.aspect == "state")
    steps = []
    for i, op in enumerate(ops):
        entries = calls[i] if i < len(calls) else ()
        observes = i == evidence.step and (check.aspect == "outcome" or evidence.observed[i].outcome
                                           in ("rejected", "crashed"))
        # How much of a line the script's glue around a joined call takes: a lambda run in a
        # fresh context, a function's return of its outcome, an observed lambda.
        around = 20 if isolated else 40 if fresh else 43 if observes else 0
        later = " ".join(src for e in calls[i + 1:] for kind, src in e if kind != "read")
        if check.reads_state:  # the check reads the last step's read
            later += " " + " ".join(src for kind, src in (calls[len(ops) - 1] if len(calls) >= len(ops)
                                                           else ()) if kind == "read")
        mine = _inlined([src for kind, src in entries if kind == "call" or (kind, src) in kept[i]], later)
        step_calls = _joined(mine, width=100 - around)
        wide = _joined(mine, width=96 - (19 if observes else 0))
        if len(step_calls) > 1 < len(wide):  # the lines of a function (which may return the last)
            step_calls = wide
        if op.name not in ("query", "race") and not step_calls:
            return None  # the adapter failed before any framework call: nothing to repeat
        racers = ()
        if op.name == "race":
            step_calls = [src for kind, src in entries if kind == "call"]
            if len(step_calls) != len(op.values):
                return None  # a racer that made no call, or more than one
            racers = tuple(_held(c) if op.forced else (c,) for c in step_calls)
            step_calls = []
        steps.append(step_of(evidence, i, step_calls if op.name != "query" else (), racers=racers))
        if i == evidence.step and check.aspect == "state":
            reads = [src for kind, src in entries if kind == "read"]
            if not reads:
                return None
            check = replace(check, state_src=reads[-1])
    bad = any(s.bad_output is not None for s in steps)
    # The one crash no other step reaches, in a task without a gate (a gated task dies in its
    # gate): the task's own raise, with no CRASH for the step to set.
    raising = None if isolated else sole_raising_crash(steps, evidence, set(workflow.gates), check)
    if raising is not None and raising[1] in workflow.gates:
        raising = None
    if raising is not None:
        steps[raising[0]] = replace(steps[raising[0]], crash=None, guarded=True)
    # The state the tasks write is what the check reads, and the field a value outside the
    # schema goes to: the tasks done (and the answers, where a task asks); none where neither.
    done = check.reads_state or bad
    answers = check.reads_state and not done_only
    # The tasks that may die before their effect: at that moment, or as the one after a task
    # that dies after it completed (the last task's such death comes once the call returns).
    targets = [(i, t) for i, s in enumerate(steps) if s.crash for t in
               ([s.crash[0]] if s.crash[1] == "before_effect" else
                [s.crash[0] + 1] if s.crash[1] == "after_commit" else []) if t <= workflow.n]
    crashing = {t for _, t in targets}
    # A gated task dies before its effect in its gate, before it asks: a run that starts reaches
    # the gate first, so the task's own point matters only for a task without a gate, or a
    # step that may begin past the gate (a resume answers it).
    body_before = any(t not in workflow.gates or ops[i].name != "start" for i, t in targets)
    parent_crash = isolated and not twin and _crash_in_parent(steps, evidence, workflow.n)
    crashes = [(i, s.crash) for i, s in enumerate(steps) if s.crash]
    if parent_crash:
        steps = [replace(s, crash=None, calls=s.calls + _after_return(s, evidence.observed[i], workflow.n))
                 for i, s in enumerate(steps)]
    text = " ".join(c for s in steps for c in (*s.calls, *(r for rs in s.racers for r in rs)))
    text += " " + check.state_src
    readers = [f for f in (checkpointing, "checkpoints", latest_checkpoint, checkpoint_at_gate,
                           "read_state") if _needed(f, text, backend)]
    if check.aspect == "outcome":
        readers.append(outcome)
    kept = (lambda name: "Kept()") if isolated else (lambda name: "{}")
    where = ", in files: each step runs in a child process" if isolated else ""
    if isolated and "[" in text:
        readers.append(Kept)
    # A flow restored from a checkpoint has no persistence of its own, nor one built without
    # ``persistence=`` (a recovery with nothing checkpointed yet): CrewAI asks a factory.
    calls_made = [c for s in steps for c in (*s.calls, *(r for rs in s.racers for r in rs))]
    restored = backend != "persist" and any(
        "from_checkpoint" in c or ".fork(" in c or ("WorkflowFlow(" in c and "persistence" not in c)
        for c in calls_made)
    forced = any(op.name == "race" and op.forced for op in ops)
    built_in = 'SQLiteFlowPersistence("flows.db")' if backend == "persist" else None
    glue = [*([f"BARRIER = multiprocessing.Barrier({max(len(s.racers) for s in steps)})"
               "  # racers wait here until all have read"] if forced else []),
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if bad and steps[0].bad_output is None else []),
            *([f"persistence = {store.recipe.build}()",
               "set_flow_persistence_factory(lambda: persistence)  # what @persist() and pauses use"]
              if store else []),
            flow_class(workflow, "" if store else built_in, crashing, stateful=done,
                       reach=_reach(evidence, ops, workflow), restored=restored),
            *(['persistence = SQLiteFlowPersistence("flows.db")']
              if store is None and ("persistence" in text or ("read_state" in readers and not (
                  done_only and backend != "persist"))) else []),
            *(['set_flow_persistence_factory(lambda: SQLiteFlowPersistence("flows.db"))'
               "  # for flows without persistence="] if restored else []),
            *([f"ID = {kept('ids')}  # flow ids by run{where}"] if "ID[" in text else []),
            *([f"AT_GATE = {kept('gates')}  # the checkpoint each run paused at, by gate{where}"]
              if "AT_GATE[" in text else [])]
    needs = pins(evidence, PINNED + (("pysqlite3",) if backend == "sqlite" else ())
                 + (tuple(store.recipe.distributions) if store else ()))
    state_class = _source(WorkflowState)
    definitions = "\n".join(filter(None, [  # no readers: no blank line
        (state_class if answers else without_lines(state_class, "answers:")) if done else "",
        _source(PendingProvider) if workflow.gates else "",
        _source(feedback_of) if workflow.gates and restored else "",
        _raising(_task_body(answers, done, bad, check.reads_state), raising) if body_before else
        without_lines(_raising(_task_body(answers, done, bad, check.reads_state), raising),
                      'crash_point(t, "before its effect")'),
        _source(*readers, backend=backend, done_only=done_only, one_gate=len(workflow.gates) == 1),
        store.source if store else ""]))
    description = variant.description
    if store:  # the script names the store's class, not our factory
        description = re.sub(r"persistence from \S+ \(", f"{store.cls} (", description)
    workflow_src = "\n".join([*_setup(backend, workflow.n, workflow.gates, restored,
                                     bool(workflow.gates) or outcome in readers,
                                     store.imports if store else None),
                              definitions, *glue])
    if parent_crash:
        workflow_src = _crash_points_kept(workflow_src, crashes)
    script = Script(
        header=header("CrewAI Flows", description, evidence, needs),
        imports=(),  # after the environment is set: in the workflow part
        workflow_src=workflow_src,
        steps=tuple(steps),
        check=check,
        stdlib=("os", "tempfile", *(store.stdlib if store else ()),
                *(["json"] if checkpoint_at_gate in readers or (
                    "read_state" in readers and backend != "persist") else []),
                *(["glob"] if twin or backend == "json" and "checkpoints" in readers else []),
                *(["shutil"] if twin else []),
                *(["uuid"] if "uuid." in text else []), *(["pathlib"] if Kept in readers else []),
                *(["multiprocessing"] if forced else [])),
        fresh_context=fresh,
        isolated=isolated,
        lean=True,
    ).source()
    if parent_crash:
        script = _crash_set_in_parent(script, crashes, len(steps))
    if twin:
        return _with_twin(script, evidence, step_calls, isolated)
    script = _one_racer(_without_unread(script))
    script = _last_step_here(script, len(steps)) if fresh else script
    script = _outcome_inlined(fired_inlined(_effect_in_task(_lookups_after(script))))
    # Where no process dies and none races (not isolated, no twin), the budget is 60 lines.
    return _compact(script) if not isolated and line_count(script) > BUDGET else script


# -- a crash in a child process: CRASH set by the parent before it forks the step's child -----

_CRASH_AT = re.compile(r'^\s*crash_point\([^,()]+, "(?P<moment>[a-z ]+)"\)$')
CRASH_NOTE = "  # a step's CRASH fails its call here"


def _crash_in_parent(steps, evidence, n: int) -> bool:
    """Can the steps of an isolated script (each in a child process) crash with no
    ``observe_crashing``, the parent setting ``CRASH`` before it forks the step's child
    (``_crash_set_in_parent``)?  Yes, unless the checked step's last task dies after it
    completed: that comes once the call has returned, and ``observe_crashing`` tells whether
    the task ran (an earlier step's is written as its own line, ``_after_return``)."""
    last = [(i, s.crash) for i, s in enumerate(steps) if s.crash and s.crash[1] == "after_commit"
            and s.crash[0] >= n]
    # ... and some crash point is the flow's own: the line that has Script paste crash_point
    inside = any(s.crash and (s.crash[1] != "after_commit" or s.crash[0] < n) for s in steps)
    return inside and not any(i == evidence.step for i, _ in last)


def _after_return(step, observed, n: int) -> tuple:
    """The crash of the workflow's last task "after it completed", once the call has returned,
    as the step's own last line, where that task ran in it (else nothing dies)."""
    if not (step.crash and step.crash[1] == "after_commit" and step.crash[0] >= n
            and step.crash[0] in [t for t, _ in effect_rows(observed)]):
        return ()
    return (f'crash_point({step.crash[0]}, "after it completed")  # the last task dies once the call returned',)


def _crash_points_kept(src: str, crashes: list) -> str:
    """``src`` with the crash points of the moments the steps crash at alone (a crash "after it
    completed" fires at the next task's "before its effect"), each marked with ``CRASH_NOTE``:
    ``Script``, told of no crash, keeps a line that is more than the call."""
    moments = {MOMENTS[c[1]] for _, c in crashes}
    if "after it completed" in moments:
        moments.add("before its effect")
    out = []
    for line in src.splitlines():
        m = _CRASH_AT.match(line)
        if m is None:
            out.append(line)
        elif m["moment"] in moments:
            out.append(line + CRASH_NOTE)
    return "\n".join(out)


def _crash_set_in_parent(script: str, crashes: list, count: int) -> str:
    """``script`` whose crashing steps' ``in_child(step_i)`` are preceded by ``CRASH = (task,
    moment, kind)`` (the child inherits it) and followed by ``CRASH = None`` (unless last)."""
    lines = script.splitlines()
    for i, crash in crashes:
        run = next(k for k, line in enumerate(lines)
                   if re.fullmatch(rf"(status = )?in_child\(step_{i + 1}\)", line))
        lines[run: run + 1] = [f"CRASH = {crash_spot(crash)!r}  # where the call in its child fails",
                               lines[run], *(["CRASH = None"] if i + 1 < count else [])]
    return "\n".join(lines) + "\n"


def _one_racer(script: str) -> str:
    """``def racer_1():`` ... ``def racer_k():`` with the same body, ``race(racer_1, ...)``: one
    ``def racer():``, ``race(racer, racer)``."""
    lines = script.splitlines()
    starts = [k for k, line in enumerate(lines) if re.fullmatch(r"def racer_\d+\(\):", line)]
    if len(starts) < 2:
        return script
    end = starts[-1] + 1
    while end < len(lines) and lines[end].startswith(" "):
        end += 1
    bodies = []
    for a, b in zip(starts, starts[1:] + [end]):
        bodies.append(lines[a + 1: b])
    if any(body != bodies[0] for body in bodies) or end - starts[0] != len(bodies) * (len(bodies[0]) + 1):
        return script
    call = "race(" + ", ".join(f"racer_{r}" for r in range(1, len(bodies) + 1)) + ")"
    if call not in lines[end:]:
        return script
    rest = [("race(" + ", ".join(["racer"] * len(bodies)) + ")" if line == call else line)
            for line in lines[end:]]
    return "\n".join([*lines[: starts[0]], "def racer():", *bodies[0], *rest]) + "\n"


def _last_step_here(script: str, count: int) -> str:
    """``script`` whose last step, in a fresh context like every step, runs in the script's
    own: nothing runs after it, so that context is as fresh as a copy of it."""
    lines = script.splitlines()
    name = f"step_{count}"
    run = f"contextvars.copy_context().run({name})"
    if f"def {name}():" not in lines or run not in lines:
        return script
    at = lines.index(f"def {name}():")
    end = at + 1
    while end < len(lines) and lines[end].startswith("    "):
        end += 1
    body = [line[4:] for line in lines[at + 1: end]]
    if any(line.lstrip().startswith("return") for line in body):
        return script
    lines[lines.index(run)] = "\n".join(body)
    del lines[at: end]
    text = "\n".join(lines) + "\n"
    if "contextvars." not in text:
        text = re.sub(r"^import (.*)$", lambda m: "import " + ", ".join(
            x for x in m[1].split(", ") if x != "contextvars"), text, count=1, flags=re.M)
    return text


# -- shorter spellings of what the script says once ------------------------------------------------

BUDGET = 60  # lines, for a script where no process dies and none races (issue 14)


def _compact(script: str) -> str:
    """``script``, over the budget, in the compact spellings of what every script says (the plain
    ones read more easily, and most scripts fit with them): CrewAI's pausing names imported
    from ``crewai.flow``, the environment set on one line, the persistence factory through its
    module, the SQLite driver and the provider module it goes into on one import line, and
    ``checkpointing`` with its events as the default of a parameter where no call passes a
    checkpoint to restore.  The same objects, the same calls."""
    lines = script.splitlines(keepends=True)
    pausing = ["from crewai.flow.async_feedback import HumanFeedbackPending\n",
               "from crewai.flow.human_feedback import human_feedback\n"]
    if all(line in lines for line in pausing):
        lines[lines.index(pausing[0])] = "from crewai.flow import HumanFeedbackPending, human_feedback\n"
        lines.remove(pausing[1])
    factory = "from crewai.flow.persistence.factory import set_flow_persistence_factory\n"
    sqlite = "from crewai.flow.persistence import SQLiteFlowPersistence\n"
    if factory in lines and sqlite in lines:
        lines[lines.index(sqlite)] = "from crewai.flow.persistence import SQLiteFlowPersistence, factory\n"
        lines.remove(factory)
        lines = [re.sub(r"^set_flow_persistence_factory\(", "factory.set_flow_persistence_factory(", line)
                 for line in lines]
    driver = ["from crewai.state.provider import sqlite_provider\n", "import pysqlite3.dbapi2 as SQLITE\n"]
    if all(line in lines for line in driver):
        lines[lines.index(driver[0])] = ("import crewai.state.provider.sqlite_provider as sqlite_provider, "
                                         "pysqlite3.dbapi2 as SQLITE\n")
        lines.remove(driver[1])
    script = "".join(lines)
    script = script.replace("\n".join(_environment()) + "\n", "\n".join(_environment(compact=True)) + "\n", 1)
    plain = without_docstring(inspect.getsource(checkpointing)) + "\n"
    events = repr(ON_EVENTS).replace("'", '"')
    assert plain.endswith(f"on_events={events})\n"), "checkpointing() checkpoints on other events than ON_EVENTS"
    if not re.search(r"\bcheckpointing\([^()]*,", script.replace(plain, "")):  # no call restores
        script = script.replace(plain, (
            f"def checkpointing(location, on_events={events}):\n"
            "    return CheckpointConfig(location=location, provider=PROVIDER(), on_events=on_events)\n"), 1)
    return script


def _effect_in_task(script: str) -> str:
    """The list log's ``effect`` written into ``task_body``, its one caller (``effect_inlined``):
    the task appends its row to ``EFFECTS`` itself; a ``task_body`` left with that and its result,
    on one line."""
    return effect_inlined(script).replace(
        "def task_body(t, value):\n    EFFECTS.append((t, value))\n    return t\n",
        "def task_body(t, value): EFFECTS.append((t, value)); return t  # its one effect, its result\n")


_STEP_DEF = re.compile(r"^def (step_\d+)\(\):$")


def _lookups_after(script: str) -> str:
    """A step run in a fresh context whose one call is followed by the lookups of the checkpoint
    it paused at (``AT_GATE[...] = checkpoint_at_gate(...)``, which read the store through the
    provider and run no flow): the call alone in the fresh context, a lambda, and the lookups
    after it, in the script's own (the same calls in the same order)."""
    lines = script.splitlines()
    k = 0
    while k < len(lines):
        m = _STEP_DEF.match(lines[k])
        end = k + 1
        while m and end < len(lines) and lines[end].startswith("    "):
            end += 1
        body = [line[4:] for line in lines[k + 1: end]]
        run = f"contextvars.copy_context().run({m[1]})" if m else None
        if (m and end < len(lines) and lines[end] == run and len(body) > 1 and _is_call(body[0])
                and all(re.fullmatch(r"AT_GATE\[[^]]*\] = checkpoint_at_gate\([^()]*\)", b) for b in body[1:])):
            lines[k: end + 1] = ["contextvars.copy_context().run(", f"    lambda: {body[0]})", *body[1:]]
        k += 1
    return "\n".join(lines) + "\n"


def _is_call(src: str) -> bool:
    try:
        node = ast.parse(src).body[0]
    except SyntaxError:
        return False
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)


_OUTCOME = 'def outcome(result):\n    return "interrupted" if isinstance(result, HumanFeedbackPending) else "completed"\n'


def _outcome_inlined(script: str) -> str:
    """``outcome``, where one step returns it (``return outcome(X)``), written there: ``result =
    X``, then what ``outcome`` returns."""
    uses = re.findall(r"^( *)return outcome\((.*)\)$", script, flags=re.MULTILINE)
    if _OUTCOME not in script or len(uses) != 1 or script.count("outcome(") != 2:
        return script
    indent, call = uses[0]
    said = _OUTCOME.splitlines()[1].strip()
    script = script.replace(_OUTCOME, "", 1)
    return script.replace(f"{indent}return outcome({call})\n", f"{indent}result = {call}\n{indent}{said}\n", 1)


@dataclass(frozen=True, slots=True)
class StoreParts:
    """A custom store in a script: its factory's ``ScriptStore`` (``recipe``), the class it
    builds (``cls``), and ``store_parts``'s standard-library modules, imports and source."""

    recipe: object
    cls: str
    stdlib: tuple
    imports: tuple
    source: str


def custom_store(options) -> StoreParts | None:
    """The script's store for a custom backend (``--store``), as its factory's ``ScriptStore``
    builds it; None when the factory declares none."""
    from adapters import storefactory

    recipe = storefactory.script_of(storefactory.load(options["store_factory"]))
    if recipe is None:
        return None
    return StoreParts(recipe, store_class(recipe), *store_parts(recipe))


def _needed(f, text: str, backend: str) -> bool:
    """Does the script need reader ``f``: one of its calls (or a reader it needs) calls it?"""
    reads_checkpoints = backend != "persist" and "read_state(" in text
    if f == "checkpoints":
        return reads_checkpoints or "latest_checkpoint(" in text or "checkpoint_at_gate(" in text
    return (f if isinstance(f, str) else f.__name__) + "(" in text


def _read_by_location(entries) -> tuple:
    """A checkpoint variant's ``read_state(ID[...], location)`` as ``read_state(location)``:
    without gates there is no pending feedback to look up by flow id."""
    return tuple((kind, re.sub(r"read_state\(ID\[[^]]*\], ", "read_state(", src) if kind == "read"
                  else src) for kind, src in entries)
