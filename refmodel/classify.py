"""Map a divergence to its fault category (docs/contract.md §5): an ordered table of rules.

``classify(model, world, op, allowed, observed, history=())`` is given the world *before* the op,
the allowed observations the oracle computed for it, what the target reported, and the steps
that came before (``refmodel.Step`` or ``(op, observed, allowed)`` tuples).  It returns ``None``
when the observation is allowed: equal observations never get a category.  Otherwise the rules
of ``RULES`` run in order and the first that matches names the divergence (Jepsen/Elle style: an
ordered, cited list of small anomaly rules); ``Unclassified`` is last and always matches.

The table, in order (docs/semantics.md, "Classification" restates it with the reasons):

=====  ===============================  ================  =========================================
 #      rule                             category          clause
=====  ===============================  ================  =========================================
 1      tampered-state-used              InvalidPersist    §3 What a tamper reaches
 2      recovery-refires-completed       Replay            §5 Replay (R1); also a crash point
                                                           that fires at a completed task
 3      fork-kept-another-value          ForkIgnore        §5 ForkIgnore (R2), §4 FD
 4      fork-answered-earlier-gate       ForkIgnore        §5 ForkIgnore (R2), §4 FD
 5      fork-never-consumed              ForkIgnore        §5 ForkIgnore (R2), §4 FD
 6      fork-gate-not-run                ForkIgnore        §5 ForkIgnore (R2), §4 FD (the gate's
                                                           effect in the new branch)
 7      recovery-ignores-fork-value      ForkIgnore        §5 ForkIgnore (R2), §4 FD
 8      bad-output-accepted              InvalidPersist    §2 BadOutput, §5 InvalidPersist (R3)
 9      invalid-state-persisted          InvalidPersist    §4 CV, §5 InvalidPersist (R3)
 10     twin-copies-differ               NondetRecovery    §5 NondetRecovery (R4), §4 RD
 11     stale-handle-consumed-again      DoubleConsume     §2 stale handle; §5 DoubleConsume (R5)
 12     consumed-gate-fires-again        DoubleConsume     §5 DoubleConsume (R5), §4 CO
 13     stale-answer-consumed            DoubleConsume     §5 DoubleConsume (R5): an answer given
                                                           to one gate answers another, or is
                                                           consumed again by a later op
 13a    unnamed-question-answered        DoubleConsume     §7 several pending: a plain resume
                                                           never silently answers one of them
 13b    question-took-another-answer     DoubleConsume     §7 several questions, loops: an answer
                                                           answers no other question or visit
 13c    answered-question-asked-again    DoubleConsume     §7 several questions: an answered
                                                           question is never asked again
 14     resume-refires-prefix            PrefixReplay      §5 PrefixReplay (R9); also a crash
                                                           point that fires at a completed task
 14a    pre-effect-fired-again           PrefixReplay      §7 work before the question (D where
                                                           the re-run is documented)
 15     racers-consume-twice             LostUpdate        §5 LostUpdate (R11), §4 CO
 16     no-answer-in-time                Stuck             §3 outcome stuck, §4 LV
 17     refused-after-crash              Stuck             §4 LV, §5 Stuck (R6)
 18     answer-dropped-after-crash       Stuck             §4 LV, §5 Stuck (R6); §3: asking
                                                           again is the crash's outcome, the
                                                           answer given after it is consumed
 19     pending-gate-refused             Stuck             §2 resume; §4 LV, §5 Stuck (R6):
                                                           refused, on an undamaged thread
 20     state-differs                    StateMismatch     §3-4 PC (done list, answers)
 21     completed-work-lost              StateMismatch     §4 PC (the durable prefix)
 22     stale-read                       StateMismatch     §4 PC (an earlier state read back)
 23     read-refused                     StateMismatch     §4 PC (a query of an intact thread
                                                           refused)
 24     fork-refused                     ForkIgnore        §4 FD (a fork of an undamaged
                                                           thread refused)
 25     unexplained                      Unclassified      §5 Unclassified
=====  ===============================  ================  =========================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .model import Model, ThreadModel, World
from .mutants import CATEGORY_INFO
from .ops import (OWN_ROW_SCOPES, Fork, Observation, Op, Race, Recover, Resume, StaleResume,
                  TwinRecover)


@dataclass(frozen=True, slots=True)
class Divergence:
    """A labelled divergence: the category, a one-line why, and the rule that named it."""

    category: str
    detail: str
    rule: str = ""
    clause: str = ""

    @property
    def property(self) -> str:
        return CATEGORY_INFO[self.category].breaks


@dataclass(frozen=True, slots=True)
class Context:
    """What a rule reads: the step, the world before it, and the history before it."""

    model: Model
    world: World
    op: Op
    allowed: tuple  # tuple[Observation, ...], canonical first
    observed: Observation
    history: tuple  # tuple[(op, observed, allowed)], the steps before this one

    @property
    def thread(self) -> ThreadModel | None:
        return self.world.get(self.op.thread)

    @property
    def done(self) -> set:
        return set(self.thread.durable.done) if self.thread else set()

    @property
    def prefix(self) -> set:
        """The tasks done where the op starts: the thread's durable ones, or, for a fork, those
        of the checkpoint it forks from."""
        if not isinstance(self.op, Fork):
            return self.done
        checkpoint = self.thread.checkpoint(self.op.gate)
        return set(checkpoint.done) if checkpoint else set()

    @property
    def branch(self) -> str:
        return self.op.new_thread if isinstance(self.op, Fork) else self.op.thread

    @property
    def fired(self) -> list:
        """The (task, value) effects the op fired in its own branch."""
        return [(t, v) for b, t, v in self.observed.effects if b == self.branch]

    @property
    def base(self):
        """The durable state the op starts from: the thread's, or the fork's checkpoint
        (``None`` for a start)."""
        if self.thread is None:
            return None
        if isinstance(self.op, Fork):
            return self.thread.checkpoint(self.op.gate)
        return self.thread.durable

    def named(self) -> set:
        """The questions of a shaped workflow this op answers by name (a plain resume names
        the one pending question; with several pending it names none)."""
        op = self.op
        names = {q for q, _ in getattr(op, "answers", ())} | set(getattr(op, "gates", ()))
        if isinstance(op, Resume | Fork | StaleResume) and op.gate is not None:
            names.add(op.gate)
        pending = (self.base.pending or ()) if self.base is not None else ()
        if isinstance(op, Resume | Race) and not names and len(pending) == 1:
            names.add(pending[0])
        return names

    @property
    def canonical(self) -> Observation | None:
        return self.allowed[0] if self.allowed else None

    @property
    def expected_tasks(self) -> set:
        """The tasks whose effect the canonical outcome fires in the op's branch."""
        canonical = self.canonical
        return {t for b, t, _ in canonical.effects if b == self.branch} if canonical else set()

    def ran(self, task: int) -> bool:
        """Whether ``task``'s effect fired in the op's branch."""
        return any(t == task for t, _ in self.fired)

    def recorded(self, gate: int):
        """The answer the persisted state the target reported holds for ``gate`` (or None)."""
        return self.observed.state.answer(gate) if self.observed.state is not None else None


@dataclass(frozen=True, slots=True)
class Rule:
    """One anomaly rule: ``check(ctx)`` returns a detail line when it explains the divergence."""

    name: str
    category: str
    clause: str
    check: Callable[[Context], str | None]


# -- the rules, in table order -------------------------------------------------------------------


def _tampered_state_used(ctx: Context) -> str | None:
    # A damaged thread explains everything that follows on it: a loud refusal is always allowed
    # (so any divergence is a continuation), and whatever else the run then did (re-fired a task
    # the forgery un-did, ignored a fork's value, hung) the cause is that it ran on damaged data.
    thread = ctx.thread
    if thread is None or not (thread.tampered or thread.damaged):
        return None
    if isinstance(ctx.op, Fork) and not thread.damaged:
        return None
    own_rows = ctx.model.tamper_scope in OWN_ROW_SCOPES
    if isinstance(ctx.op, Fork) and own_rows and thread.checkpoint(ctx.op.gate) != thread.durable:
        return None  # a fork from an older checkpoint of a thread-scoped tamper reads clean bytes
    if own_rows and not thread.tampered:
        # Reached, not tampered (under "listing" only: under "thread" a tamper reaches nothing
        # else): only through a listing of the framework-level thread, which can fail loudly
        # (allowed) but hands it no damaged bytes, every checkpoint being a row of its own.
        # Whatever else it did is its own defect, judged by the rules below (two racers
        # consuming one interrupt on an intact branch are LostUpdate's, not CV's).
        return None
    how = thread.tampered or "reached by a tamper"
    return f"{how}: damaged state used silently ({ctx.observed.outcome})"


def _reentered(ctx: Context, base: set) -> str:
    """`` (...)`` when the op's own crash point fired at a task of ``base`` (already done) where
    the reference does not crash: the framework started that task again, and the crash stopped
    it before (``before_effect``) or after its effect.  The same re-run as a re-fired effect,
    reached with a crash point on it; empty otherwise."""
    crash = getattr(ctx.op, "crash", None)
    canonical = ctx.canonical
    if crash is None or crash.task not in base or canonical is None:
        return ""
    if "crashed" in ctx.observed.outcome.split("|") and "crashed" not in canonical.outcome:
        return f" (its crash point at task {crash.task}, {crash.phase}, fired: the task ran again)"
    return ""


def _recovery_refires_completed(ctx: Context) -> str | None:
    if isinstance(ctx.op, Recover | TwinRecover):
        again = sorted({t for t, _ in ctx.fired if t in ctx.done})
        if again:
            return f"recovery re-fired completed task(s) {again}"
        entered = _reentered(ctx, ctx.done)
        if entered:
            return f"recovery re-entered completed task {ctx.op.crash.task}{entered}"
    return None


def _fork_kept_another_value(ctx: Context) -> str | None:
    op = ctx.op
    if not isinstance(op, Fork):
        return None
    other = [v for t, v in ctx.fired if t == op.gate and v != op.value]
    # A refused fork made no branch: the state it reports is the source's, whose answer it did
    # not keep (rule 5 names it, "never consumed ... (refused)").
    kept = ctx.recorded(op.gate) if ctx.observed.outcome != "rejected" else None
    if other or (kept is not None and kept != op.value):
        return f"fork with {op.value!r} at gate {op.gate} got {other[0] if other else kept!r}"
    return None


def _fork_never_consumed(ctx: Context) -> str | None:
    op = ctx.op
    if not isinstance(op, Fork):
        return None
    if _reentered(ctx, ctx.prefix):
        # The fork ran a task before its gate again and its own crash point fired there: the
        # crash, not the fork, kept the gate from consuming the value.  Rule 14 names the
        # re-run (a framework may document it: LangGraph's functional forks, whose crashed
        # branch would otherwise read as a ForkIgnore ✗ under their declared PrefixReplay).
        return None
    # A refused fork consumed nothing, whatever answer the state it reports holds (the source's
    # own, when the source gave the same value: LangGraph's time travel, two interrupts pending).
    recorded = ctx.recorded(op.gate) == op.value and ctx.observed.outcome != "rejected"
    if op.gate in ctx.expected_tasks and not ctx.ran(op.gate) and not recorded:
        refused = " (refused)" if ctx.observed.outcome == "rejected" else ""
        return f"fork with {op.value!r} at gate {op.gate} never consumed it{refused}"
    return None


def _fork_answered_earlier_gate(ctx: Context) -> str | None:
    # The fork's value went to a gate before the forked one: that earlier gate ran again in the
    # new branch, asked again, and took the value; the forked gate never consumed it.  Its own
    # rule, not only "never consumed", because it is a scope a framework can document (LangGraph's
    # functional API re-runs the tasks before a forked gate) and an adapter can declare it by name
    # (``Deviation.rules``) without covering every other way a fork ignores its value.
    op = ctx.op
    if not isinstance(op, Fork) or ctx.observed.outcome == "rejected":
        return None
    expected = ctx.expected_tasks
    earlier = sorted({t for t, v in ctx.fired if t in ctx.model.workflow.gates and t < op.gate
                      and v == op.value and t not in expected})
    if earlier and op.gate in expected and not ctx.ran(op.gate):
        return (f"fork with {op.value!r} at gate {op.gate}: gate {earlier[0]} asked again in the "
                f"new branch and took the value; gate {op.gate} never consumed it")
    return None


def _fork_gate_not_run(ctx: Context) -> str | None:
    # The new branch records the fork's value at the gate, yet the gate never ran there: its
    # effect did not fire where the reference fires it (docs/contract.md §4 FD: the fork "fires
    # e_gate(v) in the new branch").  Met on LangGraph: a run at the fork's checkpoint had completed
    # the gate and crashed later, and the fork took that run's cached result instead of running the
    # gate (a retry of the source, not a new branch).
    op = ctx.op
    if not isinstance(op, Fork) or ctx.observed.outcome == "rejected":
        return None
    if (op.gate not in ctx.expected_tasks or ctx.recorded(op.gate) != op.value
            or ctx.ran(op.gate)):
        return None
    if any(t in ctx.model.workflow.gates and v == op.value for t, v in ctx.fired):
        return None  # the value answered another gate: rule 4 (earlier) or 13 (one never reached)
    detail = (f"fork with {op.value!r} at gate {op.gate}: the new branch records {op.value!r} "
              f"but the gate never ran there (e{op.gate}({op.value!r}) did not fire in it)")
    if any((op.thread, op.gate, op.value) in _step(step)[1].effects for step in ctx.history):
        detail += (f"; e{op.gate}({op.value!r}) fired earlier on {op.thread}: the branch took "
                   "that run's result")
    return detail


def _creating_fork(ctx: Context) -> Fork | None:
    """The fork that created the op's thread, if it is a branch."""
    for step in ctx.history:
        op = _step(step)[0]
        if isinstance(op, Fork) and op.new_thread == ctx.op.thread:
            return op
    return None


def _recovery_ignores_fork_value(ctx: Context) -> str | None:
    # The same defect as a fork that keeps another value, reached through a crash: the fork died
    # before its gate completed, and recovery finished the gate with a value it was not given.
    if not isinstance(ctx.op, Recover | TwinRecover):
        return None
    fork = _creating_fork(ctx)
    if fork is None or fork.gate in ctx.done:
        return None
    other = [v for t, v in ctx.fired if t == fork.gate and v != fork.value]
    if other:
        return (f"recovery finished fork {ctx.op.thread}'s gate {fork.gate} with {other[0]!r}, "
                f"the fork gave {fork.value!r}")
    return None


def _bad_output_accepted(ctx: Context) -> str | None:
    bad = getattr(ctx.op, "bad_output", None)
    canonical = ctx.canonical
    if bad is not None and canonical is not None and canonical.outcome == "rejected":
        if ctx.observed.outcome != "rejected":
            return f"bad_output: task {bad}'s out-of-schema output accepted"
    return None


def _invalid_state_persisted(ctx: Context) -> str | None:
    state = ctx.observed.state
    if state is not None and not state.is_valid(ctx.model.workflow):
        return f"invalid_state: {state.to_json()}"
    return None


def _twin_copies_differ(ctx: Context) -> str | None:
    observed = ctx.observed
    if isinstance(ctx.op, TwinRecover) and observed.twin is not None:
        main = Observation(observed.outcome, observed.effects, observed.state)
        if not main.same_as(observed.twin) or not observed.twin.same_as(main):
            return "the two copies of the store recovered differently"
    return None


def _stale_handle_consumed_again(ctx: Context) -> str | None:
    # A resume through a stale handle consumed its gate again: the gate, or a task after it, ran
    # again (from the handle's checkpoint, or by answering whatever the head now asks), or the
    # gate's stored answer was replaced.  Tasks before the gate alone are PrefixReplay's.
    op = ctx.op
    if not isinstance(op, StaleResume) or ctx.thread is None:
        return None
    again = [(t, v) for t, v in ctx.fired if _at_or_after(ctx.model.workflow, t, op.gate)]
    if again:
        fired = ", ".join(f"e{t}({v!r})" if v is not None else f"e{t}" for t, v in again)
        rerun = sorted({t for t, _ in again if t in ctx.done})
        how = (f"re-ran completed task(s) {rerun}" if rerun else
               f"answered what the thread asks now (gate {ctx.thread.durable.pending})")
        return (f"resume({op.value!r}) through a stale handle of consumed gate {op.gate} "
                f"{how}: {fired} fired")
    before = ctx.thread.durable.answers
    state = ctx.observed.state
    now = state.answer(op.gate) if state is not None else None
    if now is not None and now != dict(before).get(op.gate):
        return (f"stale handle of gate {op.gate}: its answer {dict(before).get(op.gate)!r} "
                f"replaced by {now!r}")
    return None


def _at_or_after(workflow, task, gate) -> bool:
    """Does ``task``'s effect come at or after ``gate`` in a run?  In a shaped workflow: the
    question's own task instance, or one in a later stage or visit (a pre-effect is before)."""
    if workflow.shape is None:
        return task >= gate
    if not (workflow.shape.knows(task) and workflow.shape.knows(gate)) or task.endswith(".pre"):
        return False
    mine, asked = workflow.shape.order(task), workflow.shape.order(gate)
    return mine[:3] == asked[:3] or mine[:2] > asked[:2]


def _consumed_gate_fires_again(ctx: Context) -> str | None:
    if isinstance(ctx.op, Resume):
        wf = ctx.model.workflow
        again = sorted({t for t, _ in ctx.fired if t in ctx.done and wf.gated(t)})
        if again:
            return f"gate(s) {again} consumed a second time"
    return None


def _given(ctx: Context) -> set:
    """The values the op itself may consume: its own, or an answer a crash left to finish."""
    op = ctx.op
    if isinstance(op, Race):
        return set(op.values)
    if isinstance(op, Resume | Fork | StaleResume):
        return {op.value} | {v for _, v in getattr(op, "answers", ())}
    kept = ctx.thread.kept if ctx.thread is not None else None
    if isinstance(kept, tuple):  # a shaped thread keeps (question, value) pairs
        return {v for _, v in kept}
    return {kept} if kept is not None else set()


def _earlier_values(ctx: Context) -> set:
    """Every value given to this thread before (and what its state answers)."""
    values = {v for _, v in ctx.thread.durable.answers} if ctx.thread else set()
    for step in ctx.history:
        op = _step(step)[0]
        mine = op.thread == ctx.op.thread or getattr(op, "new_thread", None) == ctx.op.thread
        if mine and isinstance(op, Resume | Fork | StaleResume):
            values |= {op.value} | {v for _, v in getattr(op, "answers", ())}
        elif mine and isinstance(op, Race):
            values.update(op.values)
    return values


def _stale_answer_consumed(ctx: Context) -> str | None:
    # A gate not yet completed fires with a value no allowed outcome gives it there: a value this
    # op did not give that was given earlier (consumed again), or this op's own value answering
    # a gate the op does not reach in any allowed outcome (given to one gate, answers another).
    wf = ctx.model.workflow
    base = ctx.prefix
    given, earlier = _given(ctx), None
    for t, v in ctx.fired:
        if t not in wf.gates or t in base:
            continue
        if any((ctx.branch, t, v) in e.effects for e in ctx.allowed):
            continue
        if v in given:
            if not any(b == ctx.branch and g == t for e in ctx.allowed for b, g, _ in e.effects):
                return f"gate {t} consumed {v!r}, the answer this op gave another gate"
            continue
        earlier = _earlier_values(ctx) if earlier is None else earlier
        if v in earlier:
            return f"gate {t} consumed {v!r}, an answer given earlier, not to this op"
    return None


def _shaped_state(ctx: Context):
    """The state the target reported, for a shaped workflow's rules (``None`` otherwise)."""
    if ctx.model.workflow.shape is None or ctx.observed.state is None:
        return None
    return ctx.observed.state


def _unnamed_question_answered(ctx: Context) -> str | None:
    # docs/contract.md §7: with several questions pending, a plain resume is refused loudly (or
    # follows a documented rule, D); answering one of them silently hands the caller's answer to
    # a question it never named: an interrupt consumed by an answer not given to it (CO).
    op, base = ctx.op, ctx.base
    if ctx.model.workflow.shape is None or not isinstance(op, Resume) or base is None:
        return None
    pending = base.pending or ()
    if op.answers or op.gate is not None or len(pending) < 2:
        return None
    state = ctx.observed.state
    took = [q for q in pending if state is not None and state.answer(q) is not None
            and q not in dict(base.answers)]
    if took or ctx.fired:
        what = f"question(s) {took}" if took else f"task(s) {sorted({t for t, _ in ctx.fired})}"
        return (f"a plain resume({op.value!r}) with {list(pending)} pending went to {what}: "
                "the caller named no question")
    return None


def _question_took_another_answer(ctx: Context) -> str | None:
    # docs/contract.md §7: a question the caller never answered holds an answer given to this
    # thread (another question's of the same task, or the previous loop visit's): one answer
    # consumed twice.  A value never given is no answer consumed again: PC's, rule 20.
    state = _shaped_state(ctx)
    if state is None:
        return None
    before = dict(ctx.base.answers) if ctx.base is not None else {}
    allowed = {pair for e in ctx.allowed if e.state is not None for pair in e.state.answers}
    named, given = ctx.named(), _given(ctx) | _earlier_values(ctx)
    for q, v in state.answers:
        if q not in before and q not in named and (q, v) not in allowed and v in given:
            return (f"question {q} took {v!r}, though the caller never answered it (an answer "
                    "given to another question or loop visit)")
    return None


def _answered_question_asked_again(ctx: Context) -> str | None:
    # docs/contract.md §7: a task re-run from its start is fed the answers already given; asking
    # one again invites a second consume of the same interrupt id.
    state = _shaped_state(ctx)
    if state is None or not isinstance(state.pending, tuple):
        return None
    answered = set(dict(ctx.base.answers) if ctx.base is not None else {}) | {
        q for q, _ in state.answers}
    again = [q for q in state.pending if q in answered]
    if again:
        return f"answered question(s) {again} asked again"
    return None


def _pre_effect_fired_again(ctx: Context) -> str | None:
    # docs/contract.md §7: a pre-effect fires again only when the framework re-runs the task
    # from its start; its first question having been asked records that it fired.  A framework
    # documenting that re-run declares this rule as a deviation (D); otherwise EO PrefixReplay.
    wf, base = ctx.model.workflow, ctx.base
    if wf.shape is None or base is None:
        return None
    asked = {q for q, _ in base.answers} | set(base.pending or ())
    again = sorted({t for t, _ in ctx.fired if wf.shape.knows(t) and t.endswith(".pre")
                    and asked & set(wf.shape.questions(t[: -len(".pre")]))})
    if again:
        return f"pre-effect(s) {again} fired again: their task's question was asked already"
    return None


def _resume_refires_prefix(ctx: Context) -> str | None:
    op = ctx.op
    if not isinstance(op, Resume | Fork | Race | StaleResume):  # racers resume too
        return None
    base = ctx.prefix
    again = sorted({t for t, _ in ctx.fired if t in base})
    if again:
        return f"resume re-fired completed task(s) {again}"
    entered = _reentered(ctx, base)
    return f"resume re-entered completed task {op.crash.task}{entered}" if entered else None


def _racers_consume_twice(ctx: Context) -> str | None:
    # More than one racer consumed the interrupt: its effect fired twice, or more than one racer
    # went past it (a task after the gate fired more than once).
    if isinstance(ctx.op, Race) and ctx.model.workflow.shape is not None:
        # A shaped race: a task whose question the racers answered completed more than once.
        twice = sorted({t for t, _ in ctx.fired if ctx.model.workflow.gated(t)
                        and sum(1 for u, _ in ctx.fired if u == t) > 1})
        return f"more than one racer consumed the question(s) of task(s) {twice}" if twice else None
    if isinstance(ctx.op, Race):
        gate = ctx.thread.durable.pending
        consumed = [v for t, v in ctx.fired if t == gate]
        if len(consumed) > 1:
            return f"{len(consumed)} racers consumed gate {gate}: {consumed}"
        after = sorted({t for t, _ in ctx.fired if gate is not None and t > gate
                        and sum(1 for u, _ in ctx.fired if u == t) > 1})
        if after:
            return f"more than one racer went past gate {gate}: task(s) {after} fired again"
    return None


def _no_answer_in_time(ctx: Context) -> str | None:
    if "stuck" in ctx.observed.outcome.split("|"):  # a racer counts as much as a lone caller
        return f"{ctx.op.name} did not answer within its time limit"
    return None


def _refused_after_crash(ctx: Context) -> str | None:
    # A crashed thread must be able to go on: recovering it, or answering the gate it was
    # consuming when it died, is never refused before running anything where the reference runs
    # something (even when the reference would itself refuse later, at a BadOutput).
    op, thread, canonical = ctx.op, ctx.thread, ctx.canonical
    if not isinstance(op, Recover | TwinRecover | Resume | Race) or thread is None:
        return None
    if not thread.needs_recovery or canonical is None:
        return None
    runs = canonical.outcome != "rejected" or bool(canonical.effects)
    if runs and ctx.observed.outcome.split("|")[0] == "rejected" and not ctx.fired:
        return f"{op.name} after a crash was refused"
    return None


def _answer_dropped_after_crash(ctx: Context) -> str | None:
    # The same defect as a refusal after a crash, reached another way: answering the gate a
    # crash interrupted while it was being consumed returns the same gate pending again, with
    # nothing fired and the answer not recorded.  Asking again is the crash's own allowed outcome
    # (section 3); the answer given afterwards must be consumed, so the thread did not go on.
    op, thread, canonical, state = ctx.op, ctx.thread, ctx.canonical, ctx.observed.state
    if not isinstance(op, Resume) or thread is None or not thread.needs_recovery:
        return None
    if canonical is None or canonical.outcome == "rejected" or state is None:
        return None
    gate = thread.durable.pending
    if (ctx.observed.outcome == "interrupted" and not ctx.fired and gate is not None
            and state.pending == gate and state.answer(gate) is None):
        return f"resume after a crash asked gate {gate} again: its answer {op.value!r} was dropped"
    return None


def _crash_elsewhere(ctx: Context) -> str | None:
    """The latest earlier step whose op crashed another thread, as ``"<thread> at step <i>"``
    (evidence for the reader: a crash elsewhere is not what the rule needs)."""
    for i in range(len(ctx.history) - 1, -1, -1):
        op, observed, _ = _step(ctx.history[i])
        mine = op.thread == ctx.op.thread or getattr(op, "new_thread", None) == ctx.op.thread
        if not mine and "crashed" in observed.outcome.split("|"):
            return f"{getattr(op, 'new_thread', None) or op.thread} at step {i + 1}"
    return None


def _pending_gate_refused(ctx: Context) -> str | None:
    # Rule 17 without a crash of the thread: answering the gate an undamaged thread has pending
    # is refused before anything runs, where the contract allows no refusal (section 2: resume
    # consumes it).  Like a hang (rule 16), the thread cannot go on (LlamaIndex's server: an
    # idle handler's run was garbage-collected, send_event finds "No active workflow").
    op, thread, canonical = ctx.op, ctx.thread, ctx.canonical
    if not isinstance(op, Resume | Race) or thread is None or thread.durable.pending is None:
        return None
    if canonical is None or ctx.fired or ctx.observed.outcome.split("|")[0] != "rejected":
        return None
    if any("rejected" in e.outcome.split("|") and not e.effects for e in ctx.allowed):
        return None  # a refusal the contract allows here is no liveness failure
    crash = _crash_elsewhere(ctx)
    after = f", after the crash of {crash}" if crash else ""
    return (f"{op.name} of {op.thread}'s pending gate {thread.durable.pending} refused before "
            f"running anything{after}: the thread cannot go on")


def _state_differs(ctx: Context) -> str | None:
    observed = ctx.observed
    like = [e for e in ctx.allowed
            if e.outcome == observed.outcome and e.effects == observed.effects]
    if like:
        # The states allowed with this outcome and these effects, not the canonical one: that
        # may be another outcome's, and equal to the state observed (a confusing "X != X").
        expected = " or ".join(dict.fromkeys(
            str(e.state.to_json() if e.state else None) for e in like))
        got = observed.state.to_json() if observed.state else None
        if got is None and observed.error:  # not read at all: say why, not "None"
            return f"the persisted state could not be read ({observed.error}); expected {expected}"
        return f"{_stale(ctx)}persisted state {got} != expected {expected}"
    return None


def _earlier(ctx: Context) -> tuple | None:
    """``(k, op)``: the latest earlier step after which the diverging op's thread read back, and
    was allowed to read back, exactly the state read now, when no state allowed now is that
    one: the store returned an old version of the thread (a lagging replica, a cache, a read
    that ignores the newest write).  None otherwise."""
    state = ctx.observed.state
    # A refused op leaves the state as it was: the refusal, not the read, is what diverged.
    if state is None or ctx.observed.outcome == "rejected" or any(
            e.state == state for e in ctx.allowed):
        return None
    branch = _branch_of(ctx.op)
    for k in range(len(ctx.history) - 1, -1, -1):
        op, observed, allowed = _step(ctx.history[k])
        if _branch_of(op) != branch or observed.state != state:
            continue
        if any(a.state == state for a in allowed):
            return k + 1, op
    # Not the empty state before the thread's first op: a store that lost the run's writes
    # reads back the same nothing, and "stale" would send its author to the wrong method.
    return None


def _branch_of(op) -> str:
    return getattr(op, "new_thread", None) or op.thread


#: How a stale read's detail begins (rules 20 and 22): what a report reads to point a store's
#: author at the read that must return the newest data (``fuzz/baseline.py``).
STALE_READ = "stale read"


def _stale(ctx: Context, found: tuple | None = None) -> str:
    """``"stale read (...): "`` when the state read back is an earlier one (``_earlier``, or
    ``found`` when the caller has it already)."""
    found = found or _earlier(ctx)
    if found is None:
        return ""
    k, op = found
    return f"{STALE_READ} (thread {_branch_of(ctx.op)}'s state as it was after step {k}, {op.name}): "


def _stale_read(ctx: Context) -> str | None:
    # Rule 20 names a stale state when the labels agree; here they do not (the op ran on the
    # old version and did something else, or a query of it): still the store's read, PC.
    if isinstance(ctx.op, Fork):
        return None
    found = _earlier(ctx)
    if found is not None:
        got = ctx.observed.state.to_json()
        expected = ctx.canonical.state.to_json() if ctx.canonical and ctx.canonical.state else None
        return f"{_stale(ctx, found)}read back {got} ({ctx.observed.outcome}), expected {expected}"
    return _stale_pause(ctx)


def _stale_pause(ctx: Context) -> str | None:
    # The op ran nothing and answered "interrupted", a pause the thread is no longer in (no
    # allowed outcome says it) but was in after an earlier step: it read an older checkpoint,
    # while the state read back after it is current.
    observed = ctx.observed
    if observed.outcome != "interrupted" or observed.effects:
        return None
    if any(e.outcome == "interrupted" for e in ctx.allowed):
        return None
    lineage = _lineage(ctx, _branch_of(ctx.op))
    for k in range(len(ctx.history) - 1, -1, -1):
        op, seen, allowed = _step(ctx.history[k])
        if (_branch_of(op) in lineage and seen.state is not None
                and seen.state.status == "interrupted"
                and any(a.state == seen.state for a in allowed)):
            expected = ctx.canonical.outcome if ctx.canonical else None
            return (f"{STALE_READ} (the op answered from thread {_branch_of(op)}'s checkpoint as "
                    f"it was after step {k + 1}, {op.name}): it reported interrupted with "
                    f"nothing run, expected {expected}")
    return None


def _lineage(ctx: Context, branch: str) -> set:
    """``branch`` and the threads it was forked from, through the history's forks: a fork's
    checkpoints grow from its source's, so a stale read of it may return one of theirs."""
    lineage = {branch}
    for step in reversed(ctx.history):
        op = _step(step)[0]
        if isinstance(op, Fork) and op.new_thread in lineage:
            lineage.add(op.thread)
    return lineage


def _fork_refused(ctx: Context) -> str | None:
    # A fork of a checkpoint the source thread has (the model enables only those), refused
    # where the model allows no refusal (an undamaged source): the value never reaches a branch.
    # A store under test whose history lost the checkpoint answers this way.
    if not isinstance(ctx.op, Fork) or ctx.observed.outcome != "rejected" or ctx.observed.effects:
        return None
    if any(e.outcome == "rejected" for e in ctx.allowed):
        return None
    error = f": {ctx.observed.error}" if ctx.observed.error else ""
    return (f"the fork of {ctx.op.thread} at gate {ctx.op.gate} was refused, so no branch got "
            f"{ctx.op.value!r}{error}")


def _read_refused(ctx: Context) -> str | None:
    # A query of an undamaged thread (rule 1 and the model's own alternatives take damaged
    # ones) must read the persisted state; a store that raises instead lost it for the caller.
    if ctx.op.name != "query" or ctx.observed.outcome != "rejected":
        return None
    if any(e.outcome == "rejected" for e in ctx.allowed):
        return None
    error = f": {ctx.observed.error}" if ctx.observed.error else ""
    return f"reading thread {ctx.op.thread}'s persisted state was refused{error}"


def _completed_work_lost(ctx: Context) -> str | None:
    # The persisted state dropped tasks of the durable prefix that every allowed outcome keeps,
    # with the op's labels differing too (so rule 20 does not see it): pydantic-graph's docs
    # idiom on a finished run, where load_next() finds nothing and a fresh run replaces it.
    state = ctx.observed.state
    if state is None or not ctx.done or isinstance(ctx.op, Fork) or ctx.canonical is None:
        return None
    lost = sorted(ctx.done - set(state.done))
    kept = all(e.state is None or ctx.done <= set(e.state.done) for e in ctx.allowed)
    if lost and kept:
        return (f"the persisted state {state.to_json()} lost completed task(s) {lost} of the "
                f"durable prefix ({ctx.observed.outcome}, expected {ctx.canonical.outcome})")
    return None


def _unexplained(ctx: Context) -> str:
    expected = ctx.canonical.outcome if ctx.canonical else None
    return f"observed {ctx.observed.outcome}, expected {expected}"


RULES: tuple[Rule, ...] = (
    Rule("tampered-state-used", "InvalidPersist",
         "docs/contract.md §3 What a tamper reaches", _tampered_state_used),
    Rule("recovery-refires-completed", "Replay",
         "docs/contract.md §5 Replay (R1)", _recovery_refires_completed),
    Rule("fork-kept-another-value", "ForkIgnore",
         "docs/contract.md §5 ForkIgnore (R2); §4 FD", _fork_kept_another_value),
    Rule("fork-answered-earlier-gate", "ForkIgnore",
         "docs/contract.md §5 ForkIgnore (R2); §4 FD", _fork_answered_earlier_gate),
    Rule("fork-never-consumed", "ForkIgnore",
         "docs/contract.md §5 ForkIgnore (R2); §4 FD", _fork_never_consumed),
    Rule("fork-gate-not-run", "ForkIgnore",
         "docs/contract.md §5 ForkIgnore (R2); §4 FD (fires e_gate(v) in the new branch)",
         _fork_gate_not_run),
    Rule("recovery-ignores-fork-value", "ForkIgnore",
         "docs/contract.md §5 ForkIgnore (R2); §4 FD", _recovery_ignores_fork_value),
    Rule("bad-output-accepted", "InvalidPersist",
         "docs/contract.md §2 BadOutput; §5 InvalidPersist (R3)", _bad_output_accepted),
    Rule("invalid-state-persisted", "InvalidPersist",
         "docs/contract.md §4 CV; §5 InvalidPersist (R3)", _invalid_state_persisted),
    Rule("twin-copies-differ", "NondetRecovery",
         "docs/contract.md §5 NondetRecovery (R4); §4 RD", _twin_copies_differ),
    Rule("stale-handle-consumed-again", "DoubleConsume",
         "docs/contract.md §2 resume through a stale handle; §5 DoubleConsume (R5); §4 CO",
         _stale_handle_consumed_again),
    Rule("consumed-gate-fires-again", "DoubleConsume",
         "docs/contract.md §5 DoubleConsume (R5); §4 CO", _consumed_gate_fires_again),
    Rule("stale-answer-consumed", "DoubleConsume",
         "docs/contract.md §5 DoubleConsume (R5): an answer given to one gate answers another, "
         "or is consumed again by a later op", _stale_answer_consumed),
    Rule("unnamed-question-answered", "DoubleConsume",
         "docs/contract.md §7 Several pending at once (never silently answers a question the "
         "caller did not name); §5 DoubleConsume (R5)", _unnamed_question_answered),
    Rule("question-took-another-answer", "DoubleConsume",
         "docs/contract.md §7 Several questions, Loops (never hands one question's answer to "
         "another, nor visit i's to visit i+1); §5 DoubleConsume (R5)",
         _question_took_another_answer),
    Rule("answered-question-asked-again", "DoubleConsume",
         "docs/contract.md §7 Several questions (never asks an answered question again); "
         "§5 DoubleConsume (R5)", _answered_question_asked_again),
    Rule("resume-refires-prefix", "PrefixReplay",
         "docs/contract.md §5 PrefixReplay (R9)", _resume_refires_prefix),
    Rule("pre-effect-fired-again", "PrefixReplay",
         "docs/contract.md §7 Work before the question (D where the re-run is documented, "
         "otherwise EO PrefixReplay); §5 PrefixReplay (R9)", _pre_effect_fired_again),
    Rule("racers-consume-twice", "LostUpdate",
         "docs/contract.md §5 LostUpdate (R11); §4 CO", _racers_consume_twice),
    Rule("no-answer-in-time", "Stuck",
         "docs/contract.md §3 outcome stuck; §4 LV", _no_answer_in_time),
    Rule("refused-after-crash", "Stuck",
         "docs/contract.md §4 LV; §5 Stuck (R6)", _refused_after_crash),
    Rule("answer-dropped-after-crash", "Stuck",
         "docs/contract.md §4 LV; §5 Stuck (R6); §3 (asking again is the crash's outcome, not "
         "the next answer's)", _answer_dropped_after_crash),
    Rule("pending-gate-refused", "Stuck",
         "docs/contract.md §2 resume (consume it once); §4 LV; §5 Stuck (R6): refused",
         _pending_gate_refused),
    Rule("state-differs", "StateMismatch",
         "docs/contract.md §3-4 PC (done list, answers)", _state_differs),
    Rule("completed-work-lost", "StateMismatch",
         "docs/contract.md §4 PC (the persisted state equals the state the durable prefix implies)",
         _completed_work_lost),
    Rule("stale-read", "StateMismatch",
         "docs/contract.md §4 PC (what is read back is the state persisted last)", _stale_read),
    Rule("read-refused", "StateMismatch",
         "docs/contract.md §4 PC (the persisted state can be read back)", _read_refused),
    Rule("fork-refused", "ForkIgnore",
         "docs/contract.md §4 FD (a fork of a gate's checkpoint delivers its value)",
         _fork_refused),
    Rule("unexplained", "Unclassified", "docs/contract.md §5 Unclassified", _unexplained),
)


def _step(step) -> tuple:
    """A history entry as ``(op, observed, allowed)``: a ``Step`` or a tuple."""
    if hasattr(step, "op"):
        return (step.op, step.observed, step.allowed)
    return tuple(step)


def classify(
    model: Model, world: World, op: Op, allowed: list[Observation], observed: Observation,
    history=(),
) -> Divergence | None:
    """The first rule of ``RULES`` that explains ``observed``, or ``None`` when it is allowed."""
    if any(expected.same_as(observed) for expected in allowed):
        return None
    ctx = Context(model, world, op, tuple(allowed), observed, tuple(history))
    for rule in RULES:
        detail = rule.check(ctx)
        if detail:
            return Divergence(rule.category, detail, rule.name, rule.clause)
    raise AssertionError("the last rule always matches")  # pragma: no cover


__all__ = ["RULES", "Context", "Divergence", "Rule", "classify"]
