"""The oracle: the set of observations the contract allows for an operation, and what follows each.

``Model(workflow, mutant=None).step(world, op)`` returns the allowed ``(Observation, World)``
pairs, canonical choice first.  Where the contract allows more than one outcome (section 3) the
list has one entry per choice, and the harness follows the one the target took, as Jepsen treats
an indeterminate operation.  A mutant model returns only its own canonical choice.

Everything here is a pure function of its arguments: no clock, no randomness, no global state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations_with_replacement, product

from .mutants import check_mutant
from .ops import (
    Fork,
    InvalidOperation,
    Observation,
    Op,
    Query,
    Race,
    Recover,
    Resume,
    StaleResume,
    Start,
    Tamper,
    TwinRecover,
)
from .ops import LINEAGE_SCOPES, TAMPER_SCOPES
from .run import BAD, Cut, Durable, cut, execute, execute_shape, rewind, runnable, shaped
from .workflow import Workflow, instance, parse, sorted_pairs


@dataclass(frozen=True, slots=True)
class ThreadModel:
    """The oracle's knowledge of one thread: its durable state and what the contract excuses.

    ``inflight`` is a task whose effect fired without the task completing (a re-fire is allowed);
    ``kept`` is an answer given to a consume that crashed before the gate completed (recovery may
    finish the gate with it; in a shaped workflow the sorted ``(question, value)`` pairs the
    crash left undurable); ``crash_kind`` says how the thread last died, while it still needs
    recovery.  ``gate_checkpoints`` keeps, per gate, the latest checkpoint at which it was pending:
    the checkpoints a fork can address.

    ``tampered`` is how this thread's own latest checkpoint was tampered with (every executing
    op on it is refused); ``damaged`` says a tamper *reached* the thread (its own, one of its
    lineage under ``tamper_scope="lineage"`` or ``"listing"``, the whole store under
    ``"store"``, or the checkpoint it was forked from): a loud refusal is then always allowed
    (docs/contract.md §3, "What a tamper reaches").  ``lineage`` is the run a branch was forked
    from, directly or not (its framework-level thread); ``None`` for a run itself.
    """

    durable: Durable = Durable()
    gate_checkpoints: tuple = ()  # sorted (gate, Durable)
    tampered: str | None = None
    inflight: int | None = None
    kept: str | tuple | None = None
    crash_kind: str | None = None
    damaged: bool = False
    lineage: str | None = None

    @property
    def needs_recovery(self) -> bool:
        return self.crash_kind is not None

    def checkpoint(self, gate: int) -> Durable | None:
        return dict(self.gate_checkpoints).get(gate)


@dataclass(frozen=True, slots=True)
class World:
    """All threads the harness created, by name (a sorted tuple, so worlds hash by value)."""

    threads: tuple = ()
    store_damaged: bool = False  # a tamper reached the whole store (``tamper_scope="store"``)

    def get(self, name: str) -> ThreadModel | None:
        return dict(self.threads).get(name)

    def put(self, name: str, thread: ThreadModel) -> World:
        threads = dict(self.threads)
        threads[name] = thread
        return World(tuple(sorted(threads.items())), self.store_damaged)

    def names(self) -> list[str]:
        return [name for name, _ in self.threads]


Alternative = tuple  # (Observation, World)


def _leads_to(earlier: Durable, later: Durable) -> bool:
    """Whether a run can pass through ``earlier`` on its way to ``later``: its done list a
    prefix, its answers a part."""
    return (later.done[: len(earlier.done)] == earlier.done
            and set(earlier.answers) <= set(later.answers))


class Model:
    """The reference semantics of docs/contract.md for one workflow, optionally with a mutant
    switch."""

    def __init__(self, workflow: Workflow, mutant: str | None = None, *,
                 tamper_scope: str = "thread"):
        if tamper_scope not in TAMPER_SCOPES:
            raise ValueError(f"tamper_scope must be one of {TAMPER_SCOPES}, got {tamper_scope!r}")
        self.workflow = workflow
        self.mutant = check_mutant(mutant)
        self.tamper_scope = tamper_scope

    # -- public ---------------------------------------------------------------------------------

    def step(self, world: World, op: Op) -> list[Alternative]:
        """The allowed (observation, next world) pairs for ``op``, canonical first.

        Raises ``InvalidOperation`` when ``op`` is not applicable to ``world`` (see ``enabled``).
        """
        reason = self.why_disabled(world, op)
        if reason:
            raise InvalidOperation(f"{op.name} on {op.thread!r}: {reason}")
        handler = getattr(self, "_" + op.name)
        alternatives = _dedupe(handler(world, op))
        return alternatives[:1] if self.mutant else alternatives

    def enabled(self, world: World, op: Op) -> bool:
        return not self.why_disabled(world, op)

    def why_disabled(self, world: World, op: Op) -> str:
        """Why ``op`` cannot be applied to ``world`` (empty when it can).

        These are the harness's preconditions, shared by ``explore`` and the fuzz machine: they
        keep generated traces to the ones the contract gives a meaning to.  In a shaped workflow
        (docs/contract.md §7) crash points and bad outputs name task instances, and resumes,
        forks and racers name pending question ids.
        """
        wf = self.workflow
        reason = self._why_not_its_tasks(op)
        if reason:
            return reason
        thread = world.get(op.thread)
        if isinstance(op, Start):
            return "thread already exists" if thread is not None else ""
        if thread is None:
            return "no such thread"
        status = thread.durable.view(wf).status
        reason = (self._why_not_answered_shape(world, thread, status, op) if wf.shape is not None
                  else self._why_not_answered(world, thread, status, op))
        if reason:
            return reason
        if isinstance(op, Tamper):
            if status == "new":
                return "nothing is persisted to tamper with"
            if thread.tampered:
                return "already tampered"
            if op.how == "forged" and wf.shape is not None:
                return "forging a shaped state is not modelled (refmodel.forge edits a chain)"
            if op.part is not None and op.part not in forge_parts(wf, thread.durable):
                return f"no stored part {op.part!r} to forge; have {forge_parts(wf, thread.durable)}"
        if isinstance(op, TwinRecover) and not thread.needs_recovery:
            return "twin_recover needs a thread left by a crash"
        if isinstance(op, StaleResume):
            return _why_no_stale_handle(wf, thread, op)
        return ""

    def _why_not_its_tasks(self, op: Op) -> str:
        """Does ``op`` name only tasks (crash point, bad output) and questions of the workflow?"""
        wf = self.workflow
        if wf.shape is None:
            if getattr(op, "answers", ()) or getattr(op, "gates", ()):
                return "question maps and racers' questions belong to a shaped workflow"
            crash = getattr(op, "crash", None)
            # A shape's labels are strings: on a chain they name no task.
            if crash is not None and not (isinstance(crash.task, int) and 1 <= crash.task <= wf.n):
                return f"crash task {crash.task} is not a task of the workflow"
            bad = getattr(op, "bad_output", None)
            if bad is not None and not (isinstance(bad, int) and 1 <= bad <= wf.n):
                return f"bad_output task {bad} is not a task of the workflow"
            return ""
        labels = wf.shape.instances()
        for what in ("crash", "bad_output"):
            task = getattr(op, what, None)
            task = task.task if what == "crash" and task is not None else task
            if task is not None and task not in labels:
                return f"{what} task {task!r} is not a task instance of the shape"
        return ""

    def _why_not_answered(self, world: World, thread, status: str, op: Op) -> str:
        """A chain's resume, race and fork preconditions."""
        wf = self.workflow
        if isinstance(op, Resume | Race):
            values = op.values if isinstance(op, Race) else (op.value,)
            if any(v not in wf.values for v in values):
                return f"resume values must be drawn from {wf.values}"
            if isinstance(op, Race) and status != "interrupted":
                return "a race needs a pending interrupt"
            if status not in ("interrupted", "completed"):
                return "resume needs a pending interrupt or a completed run"
        if isinstance(op, Fork):
            if op.value not in wf.values:
                return f"fork value must be drawn from {wf.values}"
            if thread.checkpoint(op.gate) is None:
                return f"no checkpoint of this thread has gate {op.gate} pending"
            if not op.new_thread or world.get(op.new_thread) is not None:
                return f"fork needs a new thread name, got {op.new_thread!r}"
        return ""

    def _why_not_answered_shape(self, world: World, thread, status: str, op: Op) -> str:
        """A shape's resume, race and fork preconditions: answers by question id."""
        wf, shape = self.workflow, self.workflow.shape
        asks = {q for label in shape.instances() for q in shape.questions(label)}
        pending = thread.durable.pending or ()
        if isinstance(op, Race):
            values = op.values
        elif isinstance(op, Fork):
            values = [op.value, *(v for _, v in op.answers)]
        elif isinstance(op, Resume | StaleResume):
            values = [v for _, v in getattr(op, "answers", ())] or [op.value]
        else:
            values = ()
        if any(v not in wf.values for v in values):
            return f"answers must be drawn from {wf.values}"
        named = [q for q, _ in getattr(op, "answers", ())] + list(getattr(op, "gates", ()))
        if isinstance(op, Resume | Fork | StaleResume) and op.gate not in (None, 0):
            named.append(op.gate)
        if any(q not in asks for q in named):
            return f"{named} must name questions of the shape"
        if isinstance(op, Resume):
            if op.answers and op.gate is not None:
                return "a resume names its questions by gate or by a map, not both"
            if status not in ("interrupted", "completed"):
                return "resume needs a pending interrupt or a completed run"
        if isinstance(op, Race):
            if status != "interrupted":
                return "a race needs a pending interrupt"
            if not op.gates and len(pending) != 1:
                return "racers of a thread with several questions pending name theirs (gates)"
            if not set(op.gates) <= set(pending):
                return f"a racer's question is not pending ({pending})"
        if isinstance(op, Fork):
            checkpoint = thread.checkpoint(op.gate)
            if checkpoint is None:
                return f"no checkpoint of this thread has question {op.gate!r} pending"
            others = {q for q, _ in op.answers}
            if op.gate in others or not others <= set(_pending(checkpoint)):
                return f"a fork's map names other questions pending at its checkpoint: {others}"
            if not op.new_thread or world.get(op.new_thread) is not None:
                return f"fork needs a new thread name, got {op.new_thread!r}"
        return ""

    def _asked_by(self, gate, later) -> bool:
        """Is ``gate`` asked no later than ``later`` in a run (in a shape: by stage, visit,
        task, question)?"""
        shape = self.workflow.shape
        return gate <= later if shape is None else shape.order(gate) <= shape.order(later)

    def _answer(self, gate, value):
        """What a run consumes for ``value`` given at ``gate``: the value itself on a chain (it
        goes to the first gate reached), a one-question map in a shaped workflow."""
        return value if self.workflow.shape is None else {gate: value}

    # -- operations -----------------------------------------------------------------------------

    def _start(self, world: World, op: Start):
        fresh = ThreadModel(damaged=world.store_damaged)
        return self._or_refused(fresh, world, self._run(world, op.thread, fresh, op, answer=None))

    def _resume(self, world: World, op: Resume):
        thread = world.get(op.thread)
        if thread.tampered:
            return [self._refused(world, op.thread)]
        if self.workflow.shape is not None:
            return self._resume_shape(world, op, thread)
        pending = thread.durable.pending
        if pending is not None and op.gate in (None, pending):
            alternatives = self._run(world, op.thread, thread, op, answer=op.value)
            if thread.kept is not None and thread.kept != op.value:
                # Section 3: after a crash while consuming, the framework may keep the answer
                # it was given and finish the gate once with it, whichever call continues the
                # run (LangGraph replays the resume value it had written before the crash).
                alternatives += self._run(world, op.thread, thread, op, answer=thread.kept)
            return self._or_refused(thread, world, alternatives)
        if self.mutant == "DoubleConsume":
            gates = [t for t in thread.durable.done if t in self.workflow.gates]
            if gates:
                rewound = rewind(thread.durable, gates[-1])
                return self._run(world, op.thread, replace(thread, durable=rewound), op, op.value)
        return self._or_refused(thread, world, self._nothing_to_do(world, op.thread))

    def _resume_shape(self, world: World, op: Resume, thread: ThreadModel):
        # docs/contract.md §7, several pending at once: each named question consumes its value
        # once and the rest stay pending; a plain resume answers the one pending question, and
        # with several it is refused loudly: it never silently answers one the caller did not
        # name.  A map naming a question that is not pending has nothing to do as a whole.
        pending = thread.durable.pending or ()
        named = dict(op.answers) or ({op.gate: op.value} if op.gate is not None else None)
        if named is None and len(pending) > 1:
            if self.mutant != "PlainResumePicks":
                refused = Observation("rejected", (), thread.durable.view(self.workflow))
                return self._or_refused(thread, world, [(refused, world)])
            named = {pending[0]: op.value}
        if named is None and pending:
            named = {pending[0]: op.value}
        if named and set(named) <= set(pending):
            alternatives = self._run(world, op.thread, thread, op, answer=named)
            if thread.kept is not None and not dict(thread.kept).items() <= named.items():
                # Section 3: the answers a crash left kept may finish their questions once,
                # whichever call continues the run.
                kept = {**named, **dict(thread.kept)}
                alternatives += self._run(world, op.thread, thread, op, answer=kept)
            return self._or_refused(thread, world, alternatives)
        return self._or_refused(thread, world, self._nothing_to_do(world, op.thread))

    def _stale_resume(self, world: World, op: StaleResume):
        # docs/contract.md §2 (stale handle): the gate was consumed already, so the interrupt is
        # consumed once: a loud refusal, or a no-op that fires nothing and changes nothing.
        # A no-op may report the thread's status, or what the stale handle itself shows (its
        # gate pending): the label is the adapter's reading of the call, not a property.
        thread = world.get(op.thread)
        if self.mutant == "DoubleConsume":
            # The mutant resumes the handle's checkpoint again: the gate is consumed twice.
            again = replace(thread, durable=thread.checkpoint(op.gate))
            return self._run(world, op.thread, again, op, answer=self._answer(op.gate, op.value))
        state = thread.durable.view(self.workflow)
        noop = state.status if state.status in ("interrupted", "completed") else "ok"
        return [(Observation(outcome, (), state), world)
                for outcome in ("rejected", noop, "interrupted")]

    def _recover(self, world: World, op: Recover, *, twin: bool = False):
        thread = world.get(op.thread)
        if thread.tampered:
            return [self._refused(world, op.thread)]
        if self.workflow.shape is not None:
            return self._recover_shape(world, op, thread, twin)
        status = thread.durable.view(self.workflow).status
        if status in ("new", "incomplete"):
            if self.mutant == "Stuck" and thread.crash_kind == "sigkill":
                return [self._refused(world, op.thread)]
            replay = (self.mutant == "Replay" or (twin and self.mutant == "NondetRecovery"))
            if replay and thread.durable.done:
                last = thread.durable.done[-1]
                rewound = rewind(thread.durable, last)
                answer = dict(thread.durable.answers).get(last)
                return self._run(world, op.thread, replace(thread, durable=rewound), op, answer)
            alternatives = self._run(world, op.thread, thread, op, answer=None)
            if thread.kept is not None:
                # The crash while consuming left the gate unasked (section 3's label freedom):
                # recovery may still finish it once with the answer it was given.
                alternatives += self._run(world, op.thread, thread, op, answer=thread.kept)
            return self._or_refused(thread, world, alternatives)
        alternatives = self._nothing_to_do(world, op.thread)
        if status == "interrupted":
            crash = getattr(op, "crash", None)
            gate = thread.durable.pending
            if crash is not None and (crash.task, crash.phase) == (gate, "before_effect"):
                # Re-asking the pending gate enters it again: its crash point may fire there.
                died = replace(thread, crash_kind=crash.kind)
                alternatives.append((Observation("crashed", (), thread.durable.view(self.workflow)),
                                     world.put(op.thread, died)))
                # The crash leaves a state whose next task is a gate: section 3's label freedom
                # holds here as after any such crash ("incomplete, nothing pending, the gate
                # will be asked again").  Without it LangGraph's graph API, which clears the
                # interrupt when the gate is entered again, read as a PC defect.
                unasked = _gate_label_choice(self.workflow, thread.durable)
                if unasked is not None:
                    alternatives.append((
                        Observation("crashed", (), unasked.view(self.workflow)),
                        world.put(op.thread, replace(died, durable=unasked))))
            if thread.kept is not None:
                alternatives += self._run(world, op.thread, thread, op, answer=thread.kept)
        return self._or_refused(thread, world, alternatives)

    def _recover_shape(self, world: World, op: Op, thread: ThreadModel, twin: bool):
        # A shaped thread can be interrupted and still have a branch to run (a crash in a
        # sibling after one branch asked): recovery runs whatever can run, from the durable
        # state, and leaves the questions pending.
        # A crash while consuming answers leaves them kept (section 3): recovery may finish
        # their tasks once with them, or leave the questions to be asked again.
        kept = [] if thread.kept is None else self._run(world, op.thread, thread, op,
                                                        dict(thread.kept))
        if not runnable(self.workflow, thread.durable):
            return self._or_refused(thread, world, self._nothing_to_do(world, op.thread) + kept)
        if self.mutant == "Stuck" and thread.crash_kind == "sigkill":
            return [self._refused(world, op.thread)]
        if self.mutant == "SiblingReplay" and thread.needs_recovery:
            # The mutant restarts the crashed stage: its finished branches run again.
            thread = replace(thread, durable=_stage_undone(self.workflow, thread.durable))
        replay = self.mutant == "Replay" or (twin and self.mutant == "NondetRecovery")
        if replay and thread.durable.done:
            # Restart at the last completed task instance (the answers it took stay recorded).
            thread = replace(thread, durable=replace(thread.durable, done=thread.durable.done[:-1]))
        return self._or_refused(thread, world,
                                self._run(world, op.thread, thread, op, None) + kept)

    def _fork(self, world: World, op: Fork):
        source = world.get(op.thread)
        checkpoint = source.checkpoint(op.gate)
        if source.tampered and checkpoint == source.durable:
            # The checkpoint addressed is the tampered one: the branch is refused, not created.
            return [(Observation("rejected", (), None), world)]
        value = op.value
        answered = dict(source.durable.answers)
        consumed = source.durable.done if self.workflow.shape is None else answered
        if self.mutant == "ForkIgnore" and op.gate in consumed:
            value = dict(source.durable.answers).get(op.gate, value)
        # Under a lineage or store reach every checkpoint of a damaged thread shares its bytes:
        # the branch inherits the damage (docs/contract.md §3, "What a tamper reaches").
        damaged = source.damaged and self.tamper_scope != "thread"
        branch = ThreadModel(checkpoint, ((op.gate, checkpoint),), damaged=damaged,
                             lineage=source.lineage or op.thread)
        # A fork that crashes before its gate ran may leave its interrupt persisted or not: the
        # label freedom of ``_run`` (section 3) covers it.
        answer = self._answer(op.gate, value)
        if op.answers:
            answer = {**dict(op.answers), **answer}
        return self._or_refused(branch, world,
                                self._run(world, op.new_thread, branch, op, answer=answer))

    def _query(self, world: World, op: Query):
        thread = world.get(op.thread)
        if thread.tampered or thread.damaged:
            # A read uses nothing: it may refuse or report what it reads (docs/semantics.md).
            return [
                (Observation("rejected", (), None), world),
                (Observation("ok", (), None), world),
            ]
        return [(Observation("ok", (), self._view(world, op.thread)), world)]

    def _tamper(self, world: World, op: Tamper):
        thread = world.get(op.thread)
        unseen = self.mutant == "UncheckedPending" and op.how == "forged" and op.part == "pending"
        if self.mutant == "InvalidPersist" or unseen:
            # The mutant cannot tell: it runs on from the forged state, or from the last state it
            # could still decode (a silent fallback) when the bytes are corrupt or invalid.
            # UncheckedPending's integrity check skips the pending-gate record: only a forgery
            # of that record alone goes unseen.
            if op.how == "forged":
                thread = replace(thread, durable=forge(self.workflow, thread.durable, op.part))
            return [(Observation("ok", (), None), world.put(op.thread, thread))]
        after = world.put(op.thread, replace(thread, tampered=op.how, damaged=True))
        for name in self.reach(world, op.thread):
            after = after.put(name, replace(after.get(name), damaged=True))
        if self.tamper_scope == "store":
            after = replace(after, store_damaged=True)
        return [(Observation("ok", (), None), after)]

    def reach(self, world: World, name: str) -> list[str]:
        """The threads a tamper of ``name`` damages besides ``name`` itself (``tamper_scope``)."""
        if self.tamper_scope == "store":
            return [n for n in world.names() if n != name]
        if self.tamper_scope in LINEAGE_SCOPES:
            root = world.get(name).lineage or name
            return [n for n, t in world.threads if n != name and (t.lineage or n) == root]
        return []

    def _race(self, world: World, op: Race):
        thread = world.get(op.thread)
        k = len(op.values)
        refused = (Observation("|".join(["rejected"] * k), (), None), world)
        if thread.tampered:
            return [refused]
        if self.mutant == "LostUpdate":
            return [self._lost_update(world, op, thread)]
        alternatives = []
        # Each loser is refused, or is a no-op that reports the status it then reads: the
        # winner's outcome (read after its commit), the gate still asked (read before it; a
        # race starts at a pending gate), or ``ok`` (read while the winner's run was saving
        # its way on: nothing asks and nothing is finished, the no-op label of
        # ``_nothing_to_do``).  The label of a call that did nothing is no property: what it
        # did is judged on the effects and the persisted state.
        labels = ["rejected", "interrupted", "ok"]
        for answer in self._winners(op, thread):
            for observation, after in self._run(world, op.thread, thread, op, answer=answer):
                won = observation.outcome
                outcomes = {"|".join(sorted([won, *losers]))
                            for losers in combinations_with_replacement(
                                dict.fromkeys([*labels, won]), k - 1)}
                for outcome in sorted(outcomes, key=lambda o: (o.count("rejected") * -1, o)):
                    alternatives.append((replace(observation, outcome=outcome), after))
        if thread.damaged and not self.mutant:
            alternatives.append(refused)
        return alternatives

    def _winners(self, op: Race, thread: ThreadModel) -> list:
        """What the race consumes, one entry per choice of winners: any racer may win; same
        value, same result.  In a shaped workflow each question a racer names is consumed once,
        by one of its racers, and the run goes on with all of them (docs/contract.md §7)."""
        if self.workflow.shape is None:
            return list(dict.fromkeys(op.values))
        racers: dict = {}
        for gate, value in zip(_racer_gates(op, thread), op.values):
            racers.setdefault(gate, {})[value] = None
        return [dict(zip(racers, choice)) for choice in product(*racers.values())]

    def _twin_recover(self, world: World, op: TwinRecover):
        main = self._recover(world, op, twin=False)
        if self.mutant == "NondetRecovery":
            second = self._recover(world, op, twin=True)[0][0]
            return [(replace(main[0][0], twin=second), main[0][1])]
        return [(replace(observation, twin=observation), after) for observation, after in main]

    # -- adopting an observed branch (a documented deviation) ----------------------------------

    def adopt(self, world: World, op: Op, observed: Observation) -> World:
        """The world after ``op`` when the target's ``observed`` branch is taken as the truth.

        Used when a documented deviation (docs/contract.md §5) covers a divergence: the example goes
        on under the cited weakening.  The op's thread (the new branch, for a fork) gets the durable
        state the framework persisted (``observed.state``); everything the contract excuses
        (in-flight effect, kept answer, crash kind) comes from the reference's canonical branch,
        with the crash kind of what was observed.  An unreadable or schema-breaking state cannot
        be adopted: the canonical world is kept (docs/semantics.md, "Deviations").
        """
        name = op.new_thread if isinstance(op, Fork) else op.thread
        try:
            canonical = self.step(world, op)[0][1]
        except InvalidOperation:
            canonical = world
        thread = canonical.get(name)
        state = observed.state
        if thread is None or state is None or not state.is_valid(self.workflow):
            return canonical
        durable = Durable(tuple(state.done), tuple(state.answers), state.pending)
        # The gates asked before this op (for a fork, its source's up to the fork's gate) stay
        # addressable; one the canonical run asked on the way only if the observed branch went
        # that way too (its state leads to the observed one): a gate the target never reached
        # is no checkpoint a later fork can address.
        before = world.get(name)
        prior = ({g for g, _ in before.gate_checkpoints} if before is not None else
                 {g for g, _ in thread.gate_checkpoints
                  if isinstance(op, Fork) and self._asked_by(g, op.gate)})
        checkpoints = {g: c for g, c in thread.gate_checkpoints
                       if g in prior or _leads_to(c, durable)}
        for gate in _pending(durable):
            checkpoints[gate] = durable
        crash = getattr(op, "crash", None)
        if observed.outcome == "crashed":
            crash_kind = crash.kind if crash is not None else (thread.crash_kind or "exception")
        elif observed.outcome in ("interrupted", "completed"):
            crash_kind = None
        else:
            crash_kind = thread.crash_kind
        return canonical.put(name, replace(thread, durable=durable, crash_kind=crash_kind,
                                           gate_checkpoints=sorted_pairs(checkpoints.items())))

    # -- helpers --------------------------------------------------------------------------------

    def _run(self, world: World, name: str, thread: ThreadModel, op: Op, answer):
        """Execute on ``thread`` (as ``name``) with the op's crash point, for each allowed choice."""
        wf = self.workflow
        if wf.shape is not None:
            events = execute_shape(
                wf, thread.durable, answer, bad_output=getattr(op, "bad_output", None),
                persist_bad=self.mutant == "InvalidPersist",
                misrecord_answers=self.mutant == "StateMismatch" and isinstance(op, Resume),
                cross_answers=self.mutant == "CrossedAnswer",
                carry_answers=self.mutant == "LoopCarry",
                ask_again=self.mutant == "AskedAgain",
                lose_siblings=self.mutant == "LostSiblingWrite",
                pre_again=self.mutant == "PreEffectAgain",
                replay_prefix=self.mutant == "PrefixReplay" and isinstance(op, Resume | Race),
            )
        else:
            events = execute(
                wf,
                thread.durable,
                answer=answer,
                bad_output=getattr(op, "bad_output", None),
                persist_bad=self.mutant == "InvalidPersist",
                misrecord_answers=self.mutant == "StateMismatch" and isinstance(op, Resume),
                replay_prefix=self.mutant == "PrefixReplay" and isinstance(op, Resume | Race),
            )
        result = cut(events, getattr(op, "crash", None))
        after_thread = self._after(thread, result, answer)
        after = world.put(name, after_thread)
        state = after_thread.durable.view(wf)
        effects = [(name, e.task, e.value) for e in result.effects()]
        outcome = result.ending
        alternatives = [(Observation(outcome, effects, state), after)]
        if outcome != "crashed":
            labels = []
        elif wf.shape is None:
            labels = [_gate_label_choice(wf, after_thread.durable)]
        else:
            labels = _shape_label_choices(wf, thread.durable, after_thread.durable,
                                          after_thread.kept)
        for unasked in filter(None, labels):
            # docs/contract.md §3: after a crash while an answer was being consumed, or after a task
            # whose successor is a gate, "interrupted, gate pending" and "incomplete, nothing
            # pending (the gate will be asked again)" are both allowed: the other label.
            other = world.put(name, replace(after_thread, durable=unasked))
            alternatives.append((Observation(outcome, effects, unasked.view(wf)), other))
        # An effect in flight at the last crash may fire again, or not (section 3).
        if thread.inflight is not None:
            again = [e for e in effects if e[1] == thread.inflight]
            if again:
                effects_once = list(effects)
                effects_once.remove(again[0])
                alternatives += [(replace(o, effects=effects_once), w) for o, w in alternatives]
        return alternatives

    def _after(self, thread: ThreadModel, result: Cut, answer) -> ThreadModel:
        """The thread after a run: durable state, fork checkpoints, and what the contract excuses."""
        durable = result.durable(thread.durable)
        checkpoints = dict(thread.gate_checkpoints)
        for event in result.events:
            for gate in _pending(getattr(event, "durable", Durable())):
                checkpoints[gate] = event.durable
        inflight, kept, crash_kind = None, None, None
        if result.ending == "crashed":
            crash = result.crashed_at
            crash_kind = crash.kind
            inflight = crash.task if crash.phase == "in_flight" else None
            gate = thread.durable.pending
            if isinstance(answer, dict):
                # A shaped run consumes its map as its branches begin: whatever the crash left
                # undurable was being consumed (the framework holds the whole map).
                kept = tuple(sorted((q, v) for q, v in answer.items()
                                    if q not in dict(durable.answers))) or None
            elif answer is not None and gate == crash.task and crash.phase != "after_commit":
                kept = answer  # the answer was being consumed when the run died
        elif result.ending == "rejected":  # BadOutput: the task's effect fired, it did not return
            crash_kind = "rejected"
            inflight = result.events[-1].task
        if inflight is None and result.ending == "crashed" and thread.inflight is not None:
            # Still not completed: the earlier in-flight effect stays excused.
            if thread.inflight not in durable.done:
                inflight = thread.inflight
        return ThreadModel(
            durable, sorted_pairs(checkpoints.items()), None, inflight, kept, crash_kind,
            thread.damaged, thread.lineage,
        )

    def _nothing_to_do(self, world: World, name: str) -> list[Alternative]:
        """An op with nothing to do may be refused or be a no-op (section 3)."""
        thread = world.get(name)
        state = thread.durable.view(self.workflow)
        noop = state.status if state.status in ("interrupted", "completed") else "ok"
        return [
            (Observation("rejected", (), state), world),
            (Observation(noop, (), state), world),
        ]

    def _or_refused(self, thread: ThreadModel, world: World, alternatives) -> list[Alternative]:
        """On a thread a tamper reached, a loud refusal is always allowed (docs/contract.md §3)."""
        if thread.damaged and not self.mutant:
            alternatives = list(alternatives) + [self._refused(world, "")]
        return alternatives

    def _refused(self, world: World, name: str) -> Alternative:
        """A tampered store: refused loudly, nothing fires, the state is not compared."""
        return (Observation("rejected", (), None), world)

    def _view(self, world: World, name: str):
        thread = world.get(name)
        if thread is None:
            return Durable().view(self.workflow)
        return None if thread.tampered else thread.durable.view(self.workflow)

    def _lost_update(self, world: World, op: Race, thread: ThreadModel) -> Alternative:
        """Every racer read the same pending interrupt and consumed it; the last write wins."""
        outcomes, effects, after = [], [], world
        for gate, value in zip(_racer_gates(op, thread), op.values):
            answer = self._answer(gate, value)
            (observation, after), *_ = self._run(world, op.thread, thread, op, answer=answer)
            outcomes.append(observation.outcome)
            effects += observation.effects
        state = after.get(op.thread).durable.view(self.workflow)
        return (Observation("|".join(sorted(outcomes)), effects, state), after)


def _why_no_stale_handle(workflow: Workflow, thread: ThreadModel, op: StaleResume) -> str:
    """Why the caller cannot hold a stale handle to ``op.gate`` of ``thread`` (empty: it can).

    The handle was obtained while the gate was pending on this run (a checkpoint of it where
    the gate asked), and an earlier op consumed the gate since.  Only runs: a branch's gate
    checkpoint is its source's, which the caller addressed by the fork.  Not on a thread a
    tamper reached: there a loud refusal is always allowed and CV decides (docs/semantics.md).
    """
    if op.value not in workflow.values:
        return f"resume values must be drawn from {workflow.values}"
    if thread.lineage is not None:
        return "a stale handle is taken on a run, not on a fork's branch"
    if thread.checkpoint(op.gate) is None:
        return f"no checkpoint of this thread has gate {op.gate} pending: no handle to it"
    consumed = thread.durable.done if workflow.shape is None else dict(thread.durable.answers)
    if op.gate not in consumed:
        return f"gate {op.gate} is not consumed yet: a handle to it is not stale"
    if thread.tampered or thread.damaged:
        return "a tamper reached this thread"
    return ""


def _pending(durable: Durable) -> tuple:
    """The gates (question ids, in a shaped workflow) pending in ``durable``."""
    pending = durable.pending
    return () if pending is None else pending if isinstance(pending, tuple) else (pending,)


def _racer_gates(op: Race, thread: ThreadModel) -> tuple:
    """The gate each racer answers: its own (``Race.gates``), else the one pending."""
    return op.gates or (_pending(thread.durable) or (None,))[:1] * len(op.values)


def _stage_undone(workflow: Workflow, durable: Durable) -> Durable:
    """``durable`` with the finished branches of its current stage visit not done (the answers
    they took stay recorded)."""
    stage, visit = workflow.shape.position(durable.done, durable.answers)
    siblings = {instance(t, visit) for t in workflow.shape.tasks(stage)}
    return replace(durable, done=tuple(d for d in durable.done if d not in siblings))


def _shape_label_choices(workflow: Workflow, before: Durable, durable: Durable,
                         kept) -> list[Durable]:
    """The other allowed labels of the state a crash left in a shaped workflow (section 3, per
    question): a question being answered (``kept``) or asked by the crashed run may read as not
    asked, and the next question a branch would ask as asked.  Never the first question of a
    task with a pre-effect: its asking records the pre-effect, so reading it either way would
    excuse a second pre-effect or hide one."""
    shape = workflow.shape

    def free(q) -> bool:
        return not (q.endswith(".q1") and shape.spec(parse(q)[0]).pre_effect)

    pending = _pending(durable)
    being_answered = set(dict(kept or ())) | (set(pending) - set(_pending(before)))
    unasked = {q for q in pending if free(q) and q in being_answered}
    askable = set()
    position = shape.position(durable.done, durable.answers)
    if position is not None:
        for t in shape.tasks(position[0]):
            label = instance(t, position[1])
            questions = [q for q in shape.questions(label) if q not in dict(durable.answers)]
            if label not in durable.done and questions and not set(questions) & set(pending):
                askable |= {questions[0]} if free(questions[0]) else set()
    choices = []
    for drop, add in ((unasked, set()), (set(), askable), (unasked, askable)):
        labels = (set(pending) - drop) | add
        if (drop or add) and labels != set(pending):
            choices.append(shaped(workflow, durable.done, durable.answers, labels))
    return choices


def _gate_label_choice(workflow: Workflow, durable: Durable) -> Durable | None:
    """The other allowed label of a state whose next task is a gate, or ``None``."""
    if durable.frontier + 1 not in workflow.gates:
        return None
    return replace(durable, pending=None if durable.pending is not None else durable.frontier + 1)


def _dedupe(alternatives: list[Alternative]) -> list[Alternative]:
    seen, unique = set(), []
    for alternative in alternatives:
        if alternative not in seen:
            seen.add(alternative)
            unique.append(alternative)
    return unique


def forge_parts(workflow: Workflow, durable: Durable) -> tuple[str, ...]:
    """The stored parts ``forge`` can edit on their own in ``durable``, each edit schema-valid:
    ``"done"`` (the log), ``"answer:<t>"`` for each answered gate, ``"pending"`` (the pending
    gate record).  A store that protects some parts only (a checksum that skips the pending-gate
    record) is caught by an edit of exactly the part it skips."""
    if workflow.shape is not None:
        return ()  # forging a shaped state is not modelled: ``forge`` edits a chain
    parts = ["done"] if durable.done or durable.frontier < workflow.n else []
    parts += [f"answer:{t}" for t, _ in durable.answers]
    if durable.pending is not None or _askable(workflow, durable):
        parts.append("pending")
    return tuple(parts)


def _askable(workflow: Workflow, durable: Durable) -> bool:
    """Could the next task be recorded as the pending gate (schema: pending = frontier + 1)?"""
    return durable.frontier < workflow.n and durable.frontier + 1 in workflow.gates


def forge(workflow: Workflow, durable: Durable, part: str | None = None) -> Durable:
    """A well-formed, schema-valid state this run did not produce (``tamper(forged)``).

    ``part=None``: a different answer for the last answered gate if there is one, else the next
    task marked done.  ``part`` (one of ``forge_parts``) edits that part: ``"done"`` drops the
    last completed task and its answer (or marks task 1 done when none is), with no gate
    pending, as the schema then requires; ``"answer:<t>"`` gives gate ``t`` another value;
    ``"pending"`` alone clears the pending gate, or records the next task as pending when it is
    a gate.  Adapters write this content into their store; mutants of InvalidPersist run from it.
    """
    if part == "done":
        if durable.done:
            last = durable.done[-1]
            return Durable(durable.done[:-1],
                           tuple((t, v) for t, v in durable.answers if t != last), None)
        return forge(workflow, Durable())
    if part is not None and part.startswith("answer:"):
        task = int(part.split(":", 1)[1])
        value = dict(durable.answers)[task]
        other = next(v for v in workflow.values + (value + "'",) if v != value)
        return replace(durable, answers=sorted_pairs({**dict(durable.answers), task: other}.items()))
    if part == "pending":
        return replace(durable, pending=None if durable.pending is not None
                       else durable.frontier + 1)
    if part is not None:
        raise ValueError(f"forge: unknown part {part!r}; have {forge_parts(workflow, durable)}")
    if durable.answers:
        task, value = durable.answers[-1]
        other = next(v for v in workflow.values + (value + "'",) if v != value)
        answers = dict(durable.answers)
        answers[task] = other
        return replace(durable, answers=sorted_pairs(answers.items()))
    if durable.frontier < workflow.n:
        task = durable.frontier + 1  # marked done, though it never ran (a gate gets an answer)
        answers = dict(durable.answers)
        if task in workflow.gates:
            answers[task] = workflow.values[0]
        return Durable(durable.done + (task,), sorted_pairs(answers.items()))
    return Durable(durable.done[:-1], tuple((t, v) for t, v in durable.answers if t != durable.done[-1]))


__all__ = ["BAD", "Model", "ThreadModel", "World", "forge", "forge_parts"]
