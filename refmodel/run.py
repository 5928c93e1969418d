"""The canonical execution of tasks: a run is a list of micro-events.

A run from a durable state is written out as events (a task begins, its effect fires, it commits,
a gate interrupts).  A crash point cuts that list; what survives the cut is what happened.  The
oracle (``model.py``) and the reference target's tiny framework (``fuzz/targets``) both execute
these events, so the reference the fuzzer compares against and the reference it runs through the
worker machinery cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .ops import CrashAt
from .workflow import StateView, Workflow, sorted_pairs

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
