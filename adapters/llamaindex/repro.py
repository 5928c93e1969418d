"""A LlamaIndex Workflows finding as a short script: the workflow, the calls the case made, the
check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script`` from the
definitions below (pasted by name with ``inspect.getsource``: real code, importable and tested
here), a ``Workflow`` class with one ``@step`` per task (a few lines each, written from the
plan, as ``workflow.py`` builds it), and the lines ``case_core.py`` recorded while the engine
replayed the trace: ``await drive('run-1', wf.run())``, ``ctx = Context.from_dict(wf,
load('run-1'))``, ``handler.ctx.send_event(Ans1(response='a'))``.  The caller's store of
``ctx.to_dict()`` snapshots is a list in memory (the case keeps the same rows in SQLite).

Only what the trace uses is pasted: ``drive`` without the per-event save where the variant saves
at a pause and at the end only, without questions and pauses where no task has a gate (and then,
saving at the end only, it awaits the run without reading its stream); ``task_body`` written into
the step of a workflow of one task; ``RunState.answers`` only where a gate records one or the
check reads it; a task raising "after it completed" set as the raise of the next task as it
starts (where it fires), so the script takes the short ``crash_point``; a crash point the run
never reached (it stopped at an earlier task's question: ``unreached``) left out, said in its
step; in a workflow without gates, ``read_state`` as ``read_done`` (no answers, nothing
pending); in the ``wait`` idiom, ``drive`` without noting the question (its waiter says it).
A task that always raises (``sole_raising_crash``) ends the workflow: no later task, event or
gate is written (none runs), and its step's run is inside ``contextlib.suppress(RuntimeError)``
(no ``observe``); ``snapshot(k)`` and ``load(run)`` called once written out at the call;
``read_state`` without its "no row yet" case where a step surely stored one; ``drive`` returning
nothing where no ``outcome`` reads it.

A race becomes straight lines: every racer restores the snapshot, then each answers and runs in
turn: the interleaving in which all read before any writes (a forced race holds them there).
Written for the core variants (both gate idioms, both snapshot schedules): start / resume /
recover / fork / race / query / stale_resume (the snapshot stored when the gate asked, restored
by its index: ``snapshot(k)``, as a fork's), exception crash points and out-of-schema outputs.
Not: SIGKILL, tampering, twin recovery; for those the report gives the replay line instead.
The server and DBOS variants' scripts are ``repro_served.py``'s,
from the same workflow definition.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import replace

from pydantic import BaseModel
from workflows.events import InputRequiredEvent, WorkflowIdleEvent

from adapters.reproduction.runtime import crash_point, effect
from adapters.reproduction.script import (
    Script,
    check_for,
    header,
    pins,
    looped,
    race_interleaving,
    sole_raising_crash,
    source_as,
    step_of,
    suppressed,
    thread_label,
    without_docstring,
    without_lines,
)

# A script sets BAD_OUTPUT itself; EVERY_STEP it never needs (its drive() is written for its
# variant: the per-event save in it or not).
BAD_OUTPUT, EVERY_STEP = None, False
PINNED = ("llama-index-workflows",)
SUPPORTED_OPS = {"start", "resume", "recover", "fork", "query", "race", "stale_resume"}


# -- what the script contains --------------------------------------------------------------------


class RunState(BaseModel):
    done: list[int] = []
    answers: dict[int, str] = {}


async def task_body(ctx, t, value):
    """Task t's work: its one effect, then its result in the typed state."""
    effect(t, value)
    crash_point(t, "after its effect")
    async with ctx.store.edit_state() as state:
        state.done = [*state.done, "<bad>" if t == BAD_OUTPUT else t]
        if value is not None:
            state.answers = {**state.answers, t: value}


SNAPSHOTS = []  # the caller's store: (run, gate asking or None, ctx.to_dict()), oldest first


def save(thread, snapshot, asked=None):
    SNAPSHOTS.append((thread, asked, json.loads(json.dumps(snapshot))))


def load(thread):
    return [s for t, _, s in SNAPSHOTS if t == thread][-1]


def snapshot(k):
    """The k-th snapshot the caller stored (1: the first)."""
    return SNAPSHOTS[k - 1][2]


async def drive(thread, handler, asked=None):
    """Read the run's events until it goes idle (it waits for an answer: snapshot, stop) or
    ends (snapshot); with EVERY_STEP, a snapshot on every event while it runs too
    (``drive_source`` pastes what the variant and the workflow use)."""
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


def read_done(thread):
    """``read_state`` of a workflow without gates: no answer to record, no question pending."""
    rows = [s for t, _, s in SNAPSHOTS if t == thread]
    value = json.loads(rows[-1]["state"]["state_data"])["value"] if rows else {"done": []}
    return {"done": value["done"], "answers": {}, "pending": None}


def outcome(stopped_at):
    return "interrupted" if isinstance(stopped_at, WorkflowIdleEvent) else "completed"


def read_state(thread):
    """Tasks done, answers and the gate waiting, as the newest snapshot of ``thread`` has them."""
    rows = [(asked, s) for t, asked, s in SNAPSHOTS if t == thread]
    if not rows:
        return {"done": [], "answers": {}, "pending": None}
    asked, snap = rows[-1]
    value = json.loads(snap["state"]["state_data"])["value"]
    waiting = [int(w["waiter_id"][4:]) for worker in snap["workers"].values()
               for w in worker["collected_waiters"] if w["resolved_event"] is None]
    return {"done": value["done"], "answers": value["answers"], "pending": (waiting or [asked])[0]}


# -- composing it ----------------------------------------------------------------------------------


def _source(*objects) -> str:
    return "\n".join(without_docstring(inspect.getsource(o)) for o in objects)


def workflow_class(n: int, gates, idiom: str, crash_at=frozenset(), inline: str | None = None,
                   raising: tuple | None = None) -> str:
    """``class Linear(Workflow)``: task t a step taking ``Done<t-1>`` (``StartEvent``) and
    returning ``Done<t>`` (``StopEvent``); a gate waits with ``ctx.wait_for_event`` (``wait``)
    or is a step ``ask<t>`` returning ``Ask<t>`` whose answer ``Ans<t>`` starts the task
    (``event``), as ``workflow.py`` builds it.  Task t's steps start with its crash point
    "before its effect" only where ``crash_at`` (``crash_points``) has ``(t, "before_effect")``;
    ``inline``: ``task_body``'s source, written into the one task's step (a workflow of one
    task: no helper called once); ``raising``: ``(step, task, moment)`` of the one crash its
    task raises by itself (``sole_raising_crash``), written where the point would be; that task
    is then the last one written (it returns ``StopEvent``): it always raises, so no later task
    runs (nor the rest of its own step): ``n`` and ``gates`` stop there (``reachable``)."""
    raises = raising[1] if raising else None

    def begin(t):
        if t == raises:
            step, _, moment = raising
            return [f'        raise RuntimeError("task {t} fails {moment}")  # the crash point of step {step + 1}']
        return [f'        crash_point({t}, "before its effect")'] if (t, "before_effect") in crash_at else []

    # An event class is its name alone: one line each.
    events = [f"class Done{t}(Event): pass" for t in range(1, n)]
    events += [f"class Ask{g}(InputRequiredEvent): pass\nclass Ans{g}(HumanResponseEvent): pass"
               for g in sorted(gates)]
    lines = ["class Linear(Workflow):"]
    for t in range(1, n + 1):
        takes = "StartEvent" if t == 1 else f"Done{t - 1}"
        gives = "StopEvent" if t == n else f"Done{t}"
        done = 'StopEvent(result="done")' if t == n else f"Done{t}()"
        value = "None"
        body = begin(t)
        if t in gates and idiom == "event":
            lines += ["    @step", f"    async def ask{t}(self, ev: {takes}) -> Ask{t}:", *begin(t),
                      f"        return Ask{t}()"]
            takes, value = f"Ans{t}", "ev.response"
        elif t in gates:
            body += [f"        answer = await ctx.wait_for_event(Ans{t}, waiter_event=Ask{t}(), "
                     f'waiter_id="gate{t}", timeout=None)']
            value = "answer.response"
        call = [f"        await task_body(ctx, {t}, {value})"] if inline is None else _inlined(inline, t, value)
        rest = [] if t == raises else [*call, f"        return {done}"]
        lines += ["    @step", f"    async def task{t}(self, ctx: Context[RunState], ev: {takes}) -> {gives}:",
                  *body, *rest]
    return "\n".join(events + lines)


def _inlined(body: str, t: int, value: str) -> list:
    """``task_body``'s statements as task ``t``'s own, ``value`` its answer (never ``None`` at
    a gate: the answer is then recorded unconditionally)."""
    out, unguarded = [], False
    for line in body.splitlines()[1:]:  # below ``async def task_body(ctx, t, value):``
        if "if value is not None:" in line:
            unguarded = True  # the line it guards, one level up
            continue
        line, unguarded = (line[4:] if unguarded else line), False
        out.append("    " + re.sub(r"\bvalue\b", value, re.sub(r"\bt\b", str(t), line)))
    return out


def task_body_source(workflow, crash_at=frozenset()) -> str:
    """``task_body``'s source, without the crash point when no step crashes after a task's
    effect and without the answer when no task has a gate."""
    body = _source(task_body)
    if not any(phase == "in_flight" for _, phase in crash_at):
        body = without_lines(body, "crash_point(")
    if not workflow.gates:  # no task has an answer to record
        body = without_lines(body, "if value is not None:", extra=1)
    return body


def crash_points(steps, n: int) -> set:
    """``(task, phase)`` of every crash point a step fires at: its own, or for a task raising
    "after it completed" (which the full ``crash_point`` raises as the next task starts), the
    next task's "before its effect" (none for the last task: raised once the call returns)."""
    out = set()
    for task, phase, _ in (s.crash for s in steps if s.crash):
        if phase != "after_commit":
            out.add((task, phase))
        elif task < n:
            out.add((task + 1, "before_effect"))
    return out


def reachable(workflow, raising=None):
    """``workflow`` as far as its runs can go: up to the task that always raises (``raising``,
    ``sole_raising_crash``'s), which no run passes; the whole workflow without one."""
    if raising is None:
        return workflow
    return replace(workflow, n=raising[1], gates=tuple(g for g in workflow.gates if g <= raising[1]))


def definitions(workflow, idiom: str, crash_at, *, answers: bool, raising=None) -> list:
    """``RunState`` (without ``answers`` where no gate records one and nothing reads them),
    ``task_body`` (written into the step of the one task that calls it instead, none if no
    task does: a task that always raises calls it not) and ``Linear``, with the crash points
    ``crash_at`` only and no task after the one that always raises (``raising``)."""
    state = _source(RunState)
    ran = reachable(workflow, raising)
    if not (ran.gates or answers):
        state = without_lines(state, "answers:")
    body = task_body_source(ran, crash_at)
    callers = ran.n - (raising is not None)  # the tasks whose step calls task_body
    linear = workflow_class(ran.n, set(ran.gates), idiom, crash_at,
                            inline=body if callers <= 1 else None, raising=raising)
    return [state, *([] if callers <= 1 else [body]), linear]


UNREACHED = " (it stops at task {gate}'s question first: the crash point is never reached)"


def unreached(evidence, i: int) -> bool:
    """Operation ``i`` has a crash point its run never reached: the call returned at the question
    of a task before the one the point fires in (task t's "after it completed" fires as task
    t + 1 begins), so it ran as it would without one.  Its step is written without it."""
    crash = getattr(evidence.ops[i], "crash", None)
    seen = evidence.observed[i] if i < len(evidence.observed) else None
    if crash is None or seen is None or seen.outcome != "interrupted" or seen.state is None:
        return False
    pending = seen.state.pending
    return pending is not None and pending < crash.task + (crash.phase == "after_commit")


def without_unreached(evidence, i: int, step):
    """``step`` without the crash point operation ``i`` never reached (``unreached``), said so."""
    if step.crash is None or not unreached(evidence, i):
        return step
    gate = evidence.observed[i].state.pending
    return replace(step, crash=None, comment=step.comment + UNREACHED.format(gate=gate))


def as_raised(step, n: int):
    """A step in which task t < n raises "after it completed": the same crash set where it
    fires, as task t + 1 starts (its point "before its effect", where the full ``crash_point``
    of the runtime raises it too: that task always starts in the same call), so the script
    takes the three-line ``crash_point`` and no ``observe_crashing``."""
    if step.crash is None:
        return step
    task, phase, kind = step.crash
    if phase != "after_commit" or kind != "exception" or task >= n:
        return step
    said = f"task {task} raises after it completed"
    return replace(step, crash=(task + 1, "before_effect", kind),
                   comment=step.comment.replace(said, f"{said} (as task {task + 1} starts)", 1))


def drive_source(gates: bool, every_step: bool, asked: bool, idiom: str = "event",
                 returns: bool = True) -> str:
    """``drive`` as the variant runs it: the per-event save only where it saves on every event
    (said there, with no switch to set); where nothing asks, no question to note and no pause to
    stop at (and, saving at the end only, no stream to read: the run is awaited); in the
    ``wait`` idiom no question to note either (a pause there is its open waiter, which
    ``read_state`` reads, as the case's view does); without ``returns`` (no call reads what it
    returns: no ``outcome``), it returns nothing."""
    src = _source(drive)
    if not returns:
        src = (src.replace("            return event\n", "            return\n", 1)
               .replace("    result = await handler\n", "    await handler\n", 1))
        src = without_lines(src, "    return result")
    if idiom == "wait":
        src = without_lines(src, "InputRequiredEvent", extra=1)
    if every_step:
        src = src.replace("if EVERY_STEP and ", "if ")
    else:
        src = without_lines(src, "EVERY_STEP", extra=1)
    if not gates:
        src = without_lines(without_lines(src, "InputRequiredEvent", extra=1), "WorkflowIdleEvent", extra=3)
        if not every_step:
            src = without_lines(src, "async for event in")
        if not asked:  # no call passes the question of a restored pause
            src = src.replace(", asked=None):", "):", 1)
    return src


def raised_there(step, task: int):
    """The step in which task ``task`` raises by itself (``sole_raising_crash``): its run, from
    its first ``await drive(``, inside ``contextlib.suppress(RuntimeError)`` (what the task
    raises; a mistake in the script, a ``NameError``, still stops it), so it needs no
    ``observe``; unchanged (run through ``observe``) if it has no such call."""
    first = next((k for k, c in enumerate(step.calls) if c.startswith("await drive(")), None)
    if first is None:
        return step
    calls = [*step.calls[:first],
             *suppressed(step.calls[first:], "RuntimeError", f"task {task} raises here (the crash point)")]
    return replace(step, calls=tuple(calls), guarded=False)


def written_out(steps) -> list:
    """``steps`` with ``snapshot(k)`` and ``load(run)``, where the script calls it once, written
    out at its call (``SNAPSHOTS[k - 1][2]``; the newest snapshot of the run): no helper
    defined for one call."""
    every = "\n".join(c for s in steps for c in s.calls)
    forms = {}
    if len(re.findall(r"\bsnapshot\(", every)) == 1:
        forms[r"\bsnapshot\((\d+)\)"] = lambda m: f"SNAPSHOTS[{int(m[1]) - 1}][2]"
    if len(re.findall(r"\bload\(", every)) == 1:
        forms[r"\bload\(('[^']*')\)"] = lambda m: f"[s for t, _, s in SNAPSHOTS if t == {m[1]}][-1]"
    for pattern, form in forms.items():
        steps = [replace(s, calls=tuple(re.sub(pattern, form, c) for c in s.calls)) for s in steps]
    return steps


def stored_before(steps, label: str) -> bool:
    """Is a snapshot of run ``label`` surely stored before the check reads it: a step saves one
    before any call that may fail (its first call), or runs it through ``drive`` (which saves
    at the pause or the end) and neither crashes nor is refused?"""
    for s in steps:
        first = s.calls[0] if s.calls else ""
        if first.startswith(f"save({label!r},"):
            return True
        if not (s.guarded or s.crash) and any(c.startswith(f"await drive({label!r},") for c in s.calls):
            return True
    return False


def reader_source(readers, idiom: str, gates: bool = True) -> str:
    """The readers the script calls; ``read_state`` of the ``event`` idiom takes the question
    from the stored row alone (no step waits inside the runtime: no waiter to read); of a
    workflow without gates, it is ``read_done`` (the tasks done: no answers, nothing asked)."""
    if read_state in readers and not gates:
        return "\n".join(source_as(read_done, "read_state") if f is read_state else _source(f)
                         for f in readers)
    src = _source(*readers)
    if read_state in readers and idiom == "event":
        src = without_lines(src, "waiting = [", extra=1).replace("(waiting or [asked])[0]", "asked")
    return src


def workflow_imports(text: str) -> tuple:
    """The imports of pydantic and Workflows that the definitions in ``text`` use."""
    events = [k for k in ("Event", "HumanResponseEvent", "InputRequiredEvent", "StartEvent", "StopEvent",
                          "WorkflowIdleEvent") if re.search(rf"\b{k}\b", text)]
    return ("from pydantic import BaseModel",
            "from workflows import Context, Workflow, step",
            "from workflows.events import " + ", ".join(events))


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
        else:
            calls = looped([src for kind, src in log if kind == "call"])
        if op.name == "query":
            calls = []  # a read: the check does it
        elif not calls and op.name != "race":
            return None  # the case made no call (nothing to answer): nothing to repeat
        last = i == evidence.step
        if last and check.aspect == "outcome" and not calls[-1].startswith("await drive("):
            return None
        note = " (here: every racer restores the snapshot before any runs)"
        steps.append(without_unreached(evidence, i, step_of(evidence, i, calls,
                                                            note=note if op.name == "race" else "")))
    thread = ops[-1].new_thread if ops[-1].name == "fork" else ops[-1].thread
    if check.aspect == "state":
        check = replace(check, state_src=f"read_state({thread_label(thread)!r})")
    steps = [as_raised(s, workflow.n) for s in steps]
    # The one crash, before a task's effect, that no other step reaches: the task's own raise.
    raising = sole_raising_crash(steps, evidence, set(workflow.gates), check)
    if raising is not None and raising[2] == "before its effect":
        steps[raising[0]] = raised_there(replace(steps[raising[0]], crash=None, guarded=True), raising[1])
    else:
        raising = None
    steps = written_out(steps)
    every = "\n".join(c for s in steps for c in s.calls)
    readers = [f for f in (snapshot, outcome, read_state)
               if f.__name__ + "(" in every or (f is outcome and check.aspect == "outcome")
               or (f is read_state and check.aspect == "state")]
    gates = bool(reachable(workflow, raising).gates)  # a task that always raises: none after it
    reader = reader_source(readers, options["gate"], gates)
    if check.aspect == "state" and stored_before(steps, thread_label(thread)):
        reader = without_lines(reader, "if not rows:", extra=1)  # it always has a row there
        reader = re.sub(r"    rows = (\[.*\])\n    (.*) = rows\[-1\]\n", r"    \2 = \1[-1]\n", reader)
    returns = check.reads_outcome or "outcome(" in every  # what drive returns, read
    parts = [*definitions(workflow, options["gate"], crash_points(steps, workflow.n),
                          answers=read_state in readers and gates, raising=raising),
             "SNAPSHOTS = []  # the caller's store: (run, gate asking or None, ctx.to_dict())",
             _source(save, *([load] if re.search(r"\bload\(", every) else [])),
             drive_source(gates, options["snapshot"] == "step", "asked=" in every, options["gate"],
                          returns=returns),
             *([reader] if readers else [])]
    glue = [*(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if any(s.bad_output is not None for s in steps[1:]) else []),
            "wf = Linear(timeout=None)"]
    text = "\n".join(parts)
    return Script(
        header=header("LlamaIndex Workflows", variant.description, evidence, pins(evidence, PINNED)),
        imports=workflow_imports(text),
        workflow_src="\n".join([text, *glue]),
        steps=tuple(steps),
        check=check,
        stdlib=("json",),  # and contextlib, which Script adds for a suppressed step
        asynchronous=True,
        lean=True,
    ).source()


__all__ = ["reproduction"]
