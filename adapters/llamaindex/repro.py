"""A LlamaIndex Workflows finding as a standalone script: the workflow, the calls the case made,
the check.

``reproduction(variant, workflow, evidence)`` writes a core variant's script with
``adapters.reproduction.script.Script``.  Its workflow is the adapter's one definition
(``definitions``): ``events.RunState`` and ``workflow.task_body`` pasted by
``inspect.getsource``, the event classes the steps name, and the class ``workflow_source``
writes, the same source the cases execute.  Its steps are the lines ``case_core.py`` recorded
while the engine replayed the trace (``await drive('run-1', wf.run())``, ``restored =
Context.from_dict(wf, load('run-1'))``, ``handler.ctx.send_event(Ans1(response='a'))``), and
the caller's code below, pasted by name where the steps or the check call it: the caller's
store of ``ctx.to_dict()`` snapshots is the list ``SNAPSHOTS`` (the case keeps the same rows in
SQLite); ``drive`` reads a run's events and stores a snapshot when it pauses and when it ends
(and on every event while it runs, with ``EVERY_STEP``, the ``step`` snapshot schedule).

A race becomes straight lines: every racer restores the snapshot, then each answers and runs in
turn: the interleaving in which all read before any writes (a forced race holds them there).
Written for the core variants (both gate idioms, both snapshot schedules): start / resume /
recover / fork / race / query / stale_resume (the snapshot stored when the gate asked, restored
by its index: ``snapshot(k)``, as a fork's), exception crash points and out-of-schema outputs.
Not: SIGKILL, tampering, twin recovery; for those the report gives the replay line instead.
The server and DBOS variants' scripts are ``repro_served.py``'s, from the same definitions and
``script_source`` here.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import replace

from workflows.events import InputRequiredEvent, WorkflowIdleEvent

from adapters.reproduction.script import (
    Script,
    check_for,
    header,
    looped,
    pins,
    race_interleaving,
    step_of,
    thread_label,
    without_docstring,
)

from .events import RunState
from .workflow import event_names, task_body, workflow_source

PINNED = ("llama-index-workflows",)
SUPPORTED_OPS = {"start", "resume", "recover", "fork", "query", "race", "stale_resume"}
WORKFLOW_IMPORTS = (
    "from pydantic import BaseModel, Field",
    "from workflows import Context, Workflow, step",
    "from workflows.events import Event, HumanResponseEvent, InputRequiredEvent, StartEvent, "
    "StopEvent, WorkflowIdleEvent",
)
EVENT_BASES = {"Done": "Event", "Ask": "InputRequiredEvent", "Ans": "HumanResponseEvent"}
EVERY_STEP = False  # a script sets it: does the caller store a snapshot on every event too?


# -- the caller's code a script contains -----------------------------------------------------------

SNAPSHOTS = []  # the caller's store: (run, gate asking or None, ctx.to_dict()), oldest first


def save(thread, snapshot, asked=None):
    SNAPSHOTS.append((thread, asked, json.loads(json.dumps(snapshot))))


def load(thread):
    """The newest snapshot of ``thread``."""
    return [s for t, _, s in SNAPSHOTS if t == thread][-1]


def snapshot(k):
    """The k-th snapshot the caller stored (1: the first)."""
    return SNAPSHOTS[k - 1][2]


async def drive(thread, handler, asked=None):
    """Read the run's events until it goes idle (it waits for an answer: snapshot, stop) or
    ends (snapshot); with EVERY_STEP, a snapshot on every event while it runs too."""
    async for event in handler.stream_events(expose_internal=True):
        if isinstance(event, InputRequiredEvent):
            asked = int(type(event).__name__[3:])
        if isinstance(event, WorkflowIdleEvent):
            save(thread, handler.ctx.to_dict(), asked)
            await handler.cancel_run()
            return event
        if EVERY_STEP and handler.ctx.to_dict().get("is_running"):
            save(thread, handler.ctx.to_dict())
    result = await handler
    save(thread, handler.ctx.to_dict())
    return result


def outcome(stopped_at):
    return "interrupted" if isinstance(stopped_at, WorkflowIdleEvent) else "completed"


def read_state(thread):
    """Tasks done, answers and the gate waiting, as the newest snapshot of ``thread`` has them:
    an open waiter (``wait_for_event``), else the question asked when it was stored."""
    rows = [(asked, s) for t, asked, s in SNAPSHOTS if t == thread]
    if not rows:
        return {"done": [], "answers": {}, "pending": None}
    asked, snap = rows[-1]
    value = json.loads(snap["state"]["state_data"])["value"]
    waiting = [int(w["waiter_id"][4:]) for worker in snap["workers"].values()
               for w in worker["collected_waiters"] if w["resolved_event"] is None]
    return {"done": value["done"], "answers": value["answers"], "pending": (waiting or [asked])[0]}


# -- shared with repro_served.py -------------------------------------------------------------------


def pasted(*objects) -> str:
    return "\n".join(without_docstring(inspect.getsource(o)) for o in objects)


def definitions(workflow, gate: str, steps) -> str:
    """The adapter's workflow definition: the typed state, the events, ``task_body`` and the
    class, all as the cases run them; ``BAD_OUTPUT`` where a step sets it."""
    classes = [f"class {name}({EVENT_BASES[name.rstrip('0123456789')]}):\n    pass"
               for name in event_names(workflow)]
    bad = any(s.bad_output is not None for s in steps)
    return "\n".join([pasted(RunState), *classes, pasted(task_body),
                      *(["BAD_OUTPUT = None  # the task that writes a value outside the schema"]
                        if bad else []),
                      workflow_source(workflow, gate)])


UNREACHED = " (it stops at task {gate}'s question first: the crash point is never reached)"


def unreached(evidence, i: int) -> bool:
    """Operation ``i`` has a crash point its run never reached: the call returned at the question
    of a task before the one the point fires in (task t's "after it completed" fires as task
    t + 1 begins), so it ran as it would without one."""
    crash = getattr(evidence.ops[i], "crash", None)
    seen = evidence.observed[i] if i < len(evidence.observed) else None
    if crash is None or seen is None or seen.outcome != "interrupted" or seen.state is None:
        return False
    pending = seen.state.pending
    return pending is not None and pending < crash.task + (crash.phase == "after_commit")


def without_unreached(evidence, i: int, step):
    """``step`` without the crash point operation ``i`` never reached (``unreached``), said so:
    no process dies there (a SIGKILL's step needs no child process)."""
    if step.crash is None or not unreached(evidence, i):
        return step
    gate = evidence.observed[i].state.pending
    return replace(step, crash=None, comment=step.comment + UNREACHED.format(gate=gate))


def script_source(head: str, imports: tuple, parts: list, steps: list, check,
                  stdlib: tuple) -> str:
    return Script(header=head, imports=(*imports, *WORKFLOW_IMPORTS),
                  workflow_src="\n".join(parts), steps=tuple(steps), check=check,
                  stdlib=stdlib, asynchronous=True).source()


# -- composing a core variant's script -------------------------------------------------------------

RACE_NOTE = " (here: every racer restores the snapshot before any runs)"


def reproduction(variant, workflow, evidence) -> str | None:
    options = dict(variant.options)
    ops = evidence.ops[: evidence.step + 1]
    if options.get("backend") != "core" or any(op.name not in SUPPORTED_OPS for op in ops) or any(
            getattr(op, "crash", None) and op.crash.kind == "sigkill" for op in ops):
        return None
    check = check_for(evidence, state_readable=True, outcome_readable=ops[-1].name != "race")
    if check is None:
        return None
    steps = []
    for i, op in enumerate(ops):
        log = evidence.calls[i]
        if op.name == "race":
            calls = race_interleaving(log, rename="restored", read="from_dict(")
            if calls is None:
                return None
        elif op.name == "query":
            calls = []  # a read: the check does it
        else:
            calls = looped([src for kind, src in log if kind == "call"])
            if not calls:
                return None  # the case made no call (nothing to answer): nothing to repeat
        if i == evidence.step and check.aspect == "outcome" and not calls[-1].startswith("await drive("):
            return None
        note = RACE_NOTE if op.name == "race" else ""
        steps.append(without_unreached(evidence, i, step_of(evidence, i, calls, note=note)))
    thread = ops[-1].new_thread if ops[-1].name == "fork" else ops[-1].thread
    if check.aspect == "state":
        check = replace(check, state_src=f"read_state({thread_label(thread)!r})")
    called = "\n".join([*(c for s in steps for c in s.calls), check.state_src])
    helpers = [f for f in (load, snapshot) if f.__name__ + "(" in called]
    readers = [f for f in (outcome, read_state) if f.__name__ + "(" in called
               or (f is outcome and check.reads_outcome)]
    every = options["snapshot"] == "step"
    parts = [definitions(workflow, options["gate"], steps),
             "SNAPSHOTS = []  # the caller's store: (run, gate asking or None, ctx.to_dict())",
             f"EVERY_STEP = {every}  # " + ("a snapshot on every event while the run runs, too" if every
                                           else "a snapshot when the run pauses and when it ends"),
             pasted(save, *helpers, drive, *readers), "wf = Linear(timeout=None)"]
    head = header("LlamaIndex Workflows", variant.description, evidence, pins(evidence, PINNED))
    return script_source(head, (), parts, steps, check, ("json",))


__all__ = ["reproduction"]
