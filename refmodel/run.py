"""The canonical execution of tasks: a run is a list of micro-events.

A run from a durable state is written out as events (a task begins, its effect fires, it commits,
a gate interrupts).  A crash point cuts that list; what survives the cut is what happened.  The
oracle (``model.py``) and the reference target's tiny framework (``fuzz/targets``) both execute
these events, so the reference the fuzzer compares against and the reference it runs through the
worker machinery cannot drift apart.  A chain runs through ``execute``, a shaped workflow
(docs/contract.md §7) through ``execute_shape``: the same events, over task instances.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .ops import CrashAt
from .workflow import StateView, Workflow, instance, pre, question, sorted_pairs

BAD = "<bad>"  # what a mutant persists for a task that returned a value outside the schema


@dataclass(frozen=True, slots=True)
class Durable:
    """A thread's durable state: the log of completed tasks, the answers, the pending gate."""

    done: tuple = ()
    answers: tuple = ()  # sorted (task, value) pairs
    pending: int | None = None

    @property
    def frontier(self) -> int:
        """``F``: the number of completed tasks (they complete in order)."""
        return len(self.done)

    def commit(self, task: int, value: str | None, *, record=None) -> Durable:
        answers = dict(self.answers)
        if value is not None:
            answers[task] = value
        return Durable(self.done + (task if record is None else record,), sorted_pairs(answers.items()))

    def interrupt(self, gate: int) -> Durable:
        return replace(self, pending=gate)

    def view(self, workflow: Workflow) -> StateView:
        return StateView.of(workflow, self.done, self.answers, self.pending)


def rewind(durable: Durable, task: int) -> Durable:
    """The durable state just before ``task`` ran: ``task`` and what follows are undone."""
    index = durable.done.index(task) if task in durable.done else len(durable.done)
    done = durable.done[:index]
    return Durable(done, tuple((t, v) for t, v in durable.answers if t in done), None)


@dataclass(frozen=True, slots=True)
class Begin:
    task: int


@dataclass(frozen=True, slots=True)
class Effect:
    task: int
    value: str | None


@dataclass(frozen=True, slots=True)
class Commit:
    task: int
    durable: Durable


@dataclass(frozen=True, slots=True)
class Interrupt:
    task: int
    durable: Durable


@dataclass(frozen=True, slots=True)
class BadOutput:
    """Task ``task`` returned a value outside the schema; the reference refuses it here."""

    task: int


Event = Begin | Effect | Commit | Interrupt | BadOutput


def execute(
    workflow: Workflow,
    durable: Durable,
    *,
    answer: str | None = None,
    bad_output: int | None = None,
    persist_bad: bool = False,
    misrecord_answers: bool = False,
    replay_prefix: bool = False,
) -> list[Event]:
    """Run from ``durable`` until a gate interrupts, the run completes, or a bad output stops it.

    ``answer`` is consumed by the first gate reached (the pending one, when resuming).  The
    keyword switches after it are the mutants' hooks into execution: ``persist_bad``
    (InvalidPersist), ``misrecord_answers`` (StateMismatch), ``replay_prefix`` (PrefixReplay).
    """
    events: list[Event] = []
    answers = dict(durable.answers)
    if replay_prefix:
        for t in durable.done:
            events += [Begin(t), Effect(t, answers.get(t)), Commit(t, durable)]
    d = Durable(durable.done, durable.answers)
    for t in range(d.frontier + 1, workflow.n + 1):
        events.append(Begin(t))
        value = None
        if t in workflow.gates:
            if answer is None:
                events.append(Interrupt(t, d.interrupt(t)))
                return events
            value, answer = answer, None
        events.append(Effect(t, value))
        if bad_output == t:
            if not persist_bad:
                events.append(BadOutput(t))
                return events
            d = d.commit(t, value, record=BAD)
        else:
            if misrecord_answers and value is not None:
                # Persist the next value in line: well-formed, schema-valid, and not what was given.
                value = workflow.values[(workflow.values.index(value) + 1) % len(workflow.values)]
            d = d.commit(t, value)
        events.append(Commit(t, d))
    return events


def shaped(workflow: Workflow, done, answers, pending) -> Durable:
    """A shaped workflow's durable state, its labels in the canonical order (``pending`` is a
    tuple of question ids, ``None`` when nothing is pending)."""
    view = StateView.of(workflow, done, answers, tuple(pending) or None)
    return Durable(view.done, view.answers, view.pending)


def runnable(workflow: Workflow, durable: Durable) -> bool:
    """Can a task of a shaped workflow's current stage run (not done, not waiting)?"""
    shape = workflow.shape
    position = shape.position(durable.done, durable.answers)
    if position is None:
        return False
    waiting = set(durable.pending or ())
    return any(instance(t, position[1]) not in durable.done
               and not waiting & set(shape.questions(instance(t, position[1])))
               for t in shape.tasks(position[0]))


def execute_shape(
    workflow: Workflow,
    durable: Durable,
    given: dict | None = None,
    *,
    bad_output: str | None = None,
    persist_bad: bool = False,
    misrecord_answers: bool = False,
    cross_answers: bool = False,
    carry_answers: bool = False,
    ask_again: bool = False,
    lose_siblings: bool = False,
    pre_again: bool = False,
    replay_prefix: bool = False,
) -> list[Event]:
    """Run a shaped workflow (docs/contract.md §7) from ``durable`` until no branch can move.

    ``given`` maps pending question ids to the values this op consumes.  The stage's branches run
    in task order, each durable by itself (its interrupt or its commit); a branch whose question
    is still waiting is left alone.  A task's pre-effect fires as it first begins and is recorded
    by its first question being asked, in the same step (the pair is atomic, as an effect and its
    commit are).  The run pauses with one ``Interrupt`` that names every question pending.

    The keyword switches after ``bad_output`` are the shape mutants' hooks: ``cross_answers``
    (an answer also answers the task's next questions), ``carry_answers`` (a loop visit takes the
    previous visit's answers), ``ask_again`` (a task re-run asks the question it just answered
    again), ``lose_siblings`` (the join keeps only the branches that finished in this run),
    ``pre_again`` (a task re-run fires its pre-effect again), and the chain's ``persist_bad``,
    ``misrecord_answers`` and ``replay_prefix``.
    """
    shape = workflow.shape
    given = dict(given or {})
    done, answers = list(durable.done), dict(durable.answers)
    said = dict(answers)  # the values as given, which an effect carries (a mutant may misrecord)
    waiting = [q for q in durable.pending or () if q not in given]
    events: list[Event] = []
    if replay_prefix:
        for label in durable.done:
            value = "/".join(answers[q] for q in shape.questions(label)) or None
            events += [Begin(label), Effect(label, value), Commit(label, durable)]
    position = shape.position(done, answers)
    while position is not None:
        stage, visit = position
        finished_before = [instance(t, visit) for t in shape.tasks(stage)
                           if instance(t, visit) in done]
        for t in shape.tasks(stage):
            label = instance(t, visit)
            questions = shape.questions(label)
            if label in done or set(waiting) & set(questions):
                continue  # finished, or still waiting for its answer
            events.append(Begin(label))
            if shape.spec(t).pre_effect and (pre_again or not any(
                    q in answers or q in (durable.pending or ()) for q in questions)):
                events.append(Effect(pre(label), None))
            asks, carried = None, None
            for k, q in enumerate(questions, 1):
                if q in answers:
                    continue
                previous = question(instance(t, visit - 1), k) if visit > 1 else None
                if q in given:
                    said[q] = answers[q] = carried = given.pop(q)
                    if misrecord_answers:  # persist the next value in line, as on a chain
                        values = workflow.values
                        answers[q] = values[(values.index(carried) + 1) % len(values)]
                    if ask_again:
                        asks = q  # the re-run does not find the answer it just took
                        break
                elif cross_answers and carried is not None:
                    said[q] = answers[q] = carried
                elif carry_answers and previous in answers:
                    said[q] = answers[q] = said.get(previous, answers[previous])
                else:
                    asks = q
                    break
            if asks is not None:
                waiting.append(asks)
                events.append(Interrupt(label, shaped(workflow, done, answers, waiting)))
                continue
            events.append(Effect(label, "/".join(said[q] for q in questions) or None))
            if bad_output == label and not persist_bad:
                events.append(BadOutput(label))
                return events
            done.append(BAD if bad_output == label else label)
            events.append(Commit(label, shaped(workflow, done, answers, waiting)))
        if waiting:
            events.append(Interrupt(None, shaped(workflow, done, answers, waiting)))
            return events
        if lose_siblings:
            done = [d for d in done if d not in finished_before]
        position = shape.after(stage, visit, answers)
    return events


@dataclass(frozen=True, slots=True)
class Cut:
    """What survives when ``crash`` cuts a run: its events, and how the run ended."""

    events: tuple
    ending: str  # "interrupted" | "completed" | "crashed" | "rejected"
    crashed_at: CrashAt | None = None

    def durable(self, before: Durable) -> Durable:
        """The durable state after the surviving events."""
        for event in reversed(self.events):
            if isinstance(event, Commit | Interrupt):
                return event.durable
        return before

    def effects(self) -> list[Effect]:
        return [e for e in self.events if isinstance(e, Effect)]


def cut(events: list[Event], crash: CrashAt | None) -> Cut:
    """Apply a crash point to a run (docs/contract.md §2, crash points)."""
    for i, event in enumerate(events):
        if crash is not None and getattr(event, "task", None) == crash.task:
            if crash.phase == "before_effect" and isinstance(event, Begin):
                return Cut(tuple(events[: i + 1]), "crashed", crash)
            if crash.phase == "in_flight" and isinstance(event, Effect):
                return Cut(tuple(events[: i + 1]), "crashed", crash)
            if crash.phase == "after_commit" and isinstance(event, Commit):
                return Cut(tuple(events[: i + 1]), "crashed", crash)
        if isinstance(event, BadOutput):
            return Cut(tuple(events[: i + 1]), "rejected")
    last = events[-1] if events else None
    return Cut(tuple(events), "interrupted" if isinstance(last, Interrupt) else "completed")
