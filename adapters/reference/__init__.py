"""The built-in targets ``reference`` and ``mutant:<Category>``: the refmodel as a tiny framework.

The fuzzer's self-test needs a target whose right answer is known, run through exactly the worker,
barrier and ledger machinery a real framework goes through.  This one executes the refmodel's own
runs (``refmodel.run.execute``, ``execute_shape`` for a shaped workflow) against a real store
on disk (``store.py``): effects fire through
the hooks, checkpoints are JSON files written atomically, a SIGKILL leaves a lock file behind, a
race is settled by a claim file changed only under an ``flock``.  A mutant flips one switch, in
the store or the run, so that it is wrong in exactly the way its category names; the shape
mutants (``refmodel.mutants.SHAPE_SWITCHES``) flip theirs in the shaped run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from adapters.protocol import (
    Adapter,
    Capabilities,
    Case,
    Durable,
    Fork,
    Recover,
    Resume,
    StaleResume,
    Start,
    StateView,
    Tuning,
    Variant,
    Workflow,
    forge,
)

from refmodel.run import rewind
from refmodel.workflow import instance

from .store import Refused, Store, write_file

DEFAULT = Variant("default", "the refmodel on a JSON-file store", {"store": "json-files"})


class ReferenceAdapter(Adapter):
    """``ReferenceAdapter()`` is the reference; ``ReferenceAdapter("Replay")`` its Replay mutant."""

    def __init__(self, mutant: str | None = None):
        from refmodel.mutants import check_mutant

        check_mutant(mutant)
        self.mutant = mutant
        self.name = f"mutant:{mutant}" if mutant else "reference"

    def versions(self):
        return {"resumefuzz-reference": "1"}

    def variants(self):
        return [DEFAULT]

    def capabilities(self, variant):
        from refmodel import SHAPE_FEATURES
        from refmodel.mutants import SHAPE_SWITCHES

        # The chain mutants, and targets derived from this class, plant their switches in the
        # chain's run only: drawing shapes for them would only dilute the campaign that must
        # find their fault.
        return Capabilities(
            shapes=frozenset(SHAPE_FEATURES) if type(self) is ReferenceAdapter and (
                self.mutant is None or self.mutant in SHAPE_SWITCHES) else frozenset(),
            forced_race=True, operations=Capabilities().operations | {"stale_resume"},
            stale_handle="the checkpoint file <thread>.cp<gate>.json read while the gate was "
                         "pending (its write number names the interrupt)")

    def tuning(self, variant):
        # A case is its JSON files in workdir, nothing in the process.
        return Tuning(reuse_worker=True)

    def open(self, variant, workflow, workdir):
        return ReferenceCase(workflow, Path(workdir), self.mutant)

    # No reproduction script (``reproduction`` stays ``None``): the self-test
    # targets have no framework to report to, and a script would have to carry the refmodel or
    # import it.  Their reports say so; ``resumefuzz replay`` reproduces them.


class ReferenceCase(Case):
    def __init__(self, workflow: Workflow, workdir: Path, mutant: str | None):
        self.workflow, self.workdir, self.mutant = workflow, workdir, mutant
        # UncheckedPending: the digest leaves the pending-gate record out, so a forgery of that
        # record alone passes the integrity check.
        self.store = Store(workdir, workflow,
                           unchecked=("pending",) if mutant == "UncheckedPending" else ())

    def _on(self, switch: str) -> bool:
        """Is the mutant switch ``switch`` (a category name) on?  One per mutant here; a test
        target may override this to combine switches, or turn one on only in some states."""
        return self.mutant == switch

    # -- executing ops ------------------------------------------------------------------------
    def run(self, op, hooks) -> str:
        from refmodel.run import execute, execute_shape

        if self.workflow.shape is not None:
            # A run that does not return (a crash, a refused output) leaves the "crashed"
            # marker: the next recovery knows the thread was left by a crash (the
            # SiblingReplay switch reads it).
            mutant = self.mutant

            def shaped(durable, given):
                labels = self.workflow.shape.instances()
                return execute_shape(
                    self.workflow, durable, given,
                    bad_output=next((t for t in labels if hooks.wants_bad_output(t)), None),
                    cross_answers=mutant == "CrossedAnswer", carry_answers=mutant == "LoopCarry",
                    ask_again=mutant == "AskedAgain", lose_siblings=mutant == "LostSiblingWrite",
                    pre_again=mutant == "PreEffectAgain")

            return self._drive(op, hooks, lambda: self._plan_shape(op, hooks), shaped,
                               break_stale=True, marks_crash=True)
        trusting = self._on("InvalidPersist")

        def chain(durable, answer):
            bad = next((t for t in range(1, self.workflow.n + 1) if hooks.wants_bad_output(t)),
                       None)
            return execute(
                self.workflow, durable, answer=answer, bad_output=bad, persist_bad=trusting,
                misrecord_answers=self._on("StateMismatch") and isinstance(op, Resume),
                replay_prefix=self._on("PrefixReplay") and isinstance(op, Resume))

        return self._drive(op, hooks, lambda: self._plan(op, trusting, hooks), chain,
                           break_stale=not (self._on("Stuck") and isinstance(op, Recover)))

    def _drive(self, op, hooks, plan, events_of, *, break_stale: bool,
               marks_crash: bool = False) -> str:
        """Run ``op`` on its branch, locked: ``plan()`` says where it starts (durable state,
        write counter, answers, claim on the interrupt it consumes), ``events_of(durable,
        answers)`` runs the workflow from there, and each event reaches the hooks or the store.
        A consume that does not finish leaves its interrupt open (the claim is released)."""
        from refmodel.run import BadOutput, Begin, Commit, Effect, Interrupt

        branch = op.new_thread if isinstance(op, Fork) else op.thread
        self.store.lock(branch, break_stale=break_stale)
        claim = None
        try:
            durable, seq, given, claim = plan()
            if marks_crash:
                write_file(self.store.path(branch, "crashed"), "")
            events = events_of(durable, given)
            for event in events:
                if isinstance(event, Begin):
                    hooks.task_begins(event.task)
                elif isinstance(event, Effect):
                    hooks.effect(event.task, event.value)
                elif isinstance(event, Commit | Interrupt):
                    seq += 1
                    self.store.write(branch, event.durable, seq)
                    if claim is not None and isinstance(event, Commit):
                        self.store.settle(claim)
                        claim = None
                elif isinstance(event, BadOutput):
                    raise Refused(f"task {event.task} returned a value outside the state schema")
            if marks_crash:
                self.store.path(branch, "crashed").unlink(missing_ok=True)
            return "interrupted" if events and isinstance(events[-1], Interrupt) else "completed"
        except BaseException:
            if claim is not None:
                self.store.release(claim)
            raise
        finally:
            self.store.unlock(branch)

    # -- shaped workflows (docs/contract.md §7) -------------------------------------------------
    def _plan_shape(self, op, hooks):
        """Where a shaped run starts: (durable state, write counter, answers given, claim)."""
        from refmodel.run import runnable

        wf = self.workflow
        head_path = self.store.path(op.thread, "head.json")
        if isinstance(op, Start):
            return self._plan_start(op)
        if isinstance(op, Fork):
            if self.store.load(self.store.path(op.new_thread, "head.json"), trusting=True):
                raise Refused(f"branch {op.new_thread!r} already exists")
            loaded = self.store.load(self.store.path(op.thread, f"cp{op.gate}.json"))
            if loaded is None:
                raise Refused(f"no checkpoint of {op.thread!r} has question {op.gate} pending")
            checkpoint, seq = loaded
            self.store.write(op.new_thread, checkpoint, seq)
            return checkpoint, seq, {**dict(op.answers), op.gate: op.value}, None
        loaded = self.store.load(head_path)
        durable, seq = loaded if loaded else (Durable(), 0)
        hooks.race_ready()
        pending = tuple(durable.pending or ())
        if isinstance(op, StaleResume):
            # The handle's question was answered: its interrupt is consumed, once.
            raise Refused(f"question {op.gate} was answered already")
        if isinstance(op, Resume):
            named = dict(op.answers) or ({op.gate: op.value} if op.gate is not None else None)
            if named is None and len(pending) > 1:
                if self.mutant != "PlainResumePicks":
                    raise Refused(f"several questions are pending ({', '.join(pending)}): "
                                  "name the one answered")
                named = {pending[0]: op.value}
            if named is None and pending:
                named = {pending[0]: op.value}
            if named and set(named) <= set(pending):
                return durable, seq, named, self.store.claim(op.thread, seq)
            raise Refused("nothing is pending")
        # Recover: run whatever branch can run; the questions asked stay pending.
        if not runnable(wf, durable):
            raise Refused("nothing to recover")
        crashed = self.store.path(op.thread, "crashed").exists()
        if self.mutant == "SiblingReplay" and crashed:
            stage, visit = wf.shape.position(durable.done, durable.answers)
            siblings = {instance(t, visit) for t in wf.shape.tasks(stage)}
            durable = Durable(tuple(d for d in durable.done if d not in siblings),
                              durable.answers, durable.pending)
        return durable, seq, None, None

    def _plan_start(self, op):
        """A new thread starts from nothing: (empty state, no writes, no answer, no claim)."""
        if self.store.load(self.store.path(op.thread, "head.json"), trusting=True) is not None:
            raise Refused(f"thread {op.thread!r} already exists")
        return Durable(), 0, None, None

    def _plan(self, op, trusting: bool, hooks):
        """Where the run starts: (durable state, write counter, answer, claim)."""
        head_path = self.store.path(op.thread, "head.json")
        if isinstance(op, Start):
            return self._plan_start(op)
        if isinstance(op, Fork):
            return self._plan_fork(op, trusting)
        loaded = self.store.load(head_path, trusting=trusting)
        durable, seq = loaded if loaded else (Durable(), 0)
        hooks.race_ready()  # a racer has read the pending interrupt; nothing is written yet
        status = durable.view(self.workflow).status
        if isinstance(op, StaleResume):
            return self._plan_stale(op, durable, seq, trusting)
        if isinstance(op, Resume):
            if durable.pending is not None and op.gate in (None, durable.pending):
                claim = None if self._on("LostUpdate") else self.store.claim(op.thread, seq)
                return durable, seq, op.value, claim
            gates = [t for t in durable.done if t in self.workflow.gates]
            if self._on("DoubleConsume") and gates and op.gate is None:
                # Sequential resumes only: a racer names its interrupt, and a re-consume that
                # depended on when a racer read would make the self-test timing-dependent.
                return rewind(durable, gates[-1]), seq, op.value, None
            raise Refused("nothing is pending")
        # Recover
        if status not in ("new", "incomplete"):
            raise Refused(f"nothing to recover: the thread is {status}")
        replay = self._on("Replay") or (
            self._on("NondetRecovery") and "twin" in self.workdir.name
        )
        if replay and durable.done:
            last = durable.done[-1]
            return rewind(durable, last), seq, dict(durable.answers).get(last), None
        return durable, seq, None, None

    def _plan_stale(self, op: StaleResume, head: Durable, seq: int, trusting: bool):
        """Resume through the handle ``cp<gate>.json``: the interrupt it names (its write
        number) must still be the head's pending one, and is claimed as a resume claims it."""
        loaded = self.store.load(self.store.path(op.thread, f"cp{op.gate}.json"), trusting=trusting)
        if loaded is None:
            raise Refused(f"no checkpoint of {op.thread!r} has gate {op.gate} pending")
        checkpoint, raised = loaded
        if self.mutant == "DoubleConsume":
            # The mutant trusts the handle: its checkpoint is resumed again, consuming twice.
            return checkpoint, seq, op.value, None
        if head.pending != op.gate or seq != raised:
            raise Refused(f"the interrupt of gate {op.gate} raised by write {raised} was "
                          f"consumed already (the thread is at write {seq})")
        return head, seq, op.value, self.store.claim(op.thread, seq)

    def _plan_fork(self, op: Fork, trusting: bool):
        if self.store.load(self.store.path(op.new_thread, "head.json"), trusting=True):
            raise Refused(f"branch {op.new_thread!r} already exists")
        loaded = self.store.load(self.store.path(op.thread, f"cp{op.gate}.json"), trusting=trusting)
        if loaded is None:
            raise Refused(f"no checkpoint of {op.thread!r} has gate {op.gate} pending")
        checkpoint, seq = loaded
        # The branch starts as a durable copy of the checkpoint (the fork point is its own).
        self.store.write(op.new_thread, checkpoint, seq)
        value = op.value
        if self._on("ForkIgnore"):
            head = self.store.load(self.store.path(op.thread, "head.json"), trusting=True)
            if head and op.gate in head[0].done:
                value = dict(head[0].answers).get(op.gate, value)
        return checkpoint, seq, value, None

    # -- reading and altering the store -------------------------------------------------------
    def query(self, thread: str) -> StateView:
        return self.store.view(thread)

    def tamper(self, thread: str, how: str, part: str | None = None) -> None:
        head = self.store.path(thread, "head.json")
        doc = self.store.read_raw(head)
        targets = [head]
        pending = doc["body"]["pending"]
        if isinstance(pending, list):  # a shape's questions: every checkpoint of this write
            for q in pending:
                cp = self.store.path(thread, f"cp{q}.json")
                cp_doc = self.store.read_raw(cp)
                if cp_doc and cp_doc["body"]["seq"] == doc["body"]["seq"]:
                    targets.append(cp)
        elif pending is not None:
            cp = self.store.path(thread, f"cp{pending}.json")
            cp_doc = self.store.read_raw(cp)
            if cp_doc and cp_doc["body"]["seq"] == doc["body"]["seq"]:
                targets.append(cp)  # the latest checkpoint, stored twice
        for path in targets:
            text = path.read_text()
            if how == "corrupt":
                path.write_text(text[: len(text) // 2])
                continue
            body = dict(doc["body"])
            if how == "invalid":
                if body["answers"]:
                    body["answers"] = {t: "<not-a-value>" for t in body["answers"]}
                else:
                    body["done"] = body["done"] + [self.workflow.n + 7]
            else:  # forged: schema-valid, not produced by this run; the digest is left stale
                durable = Durable(tuple(body["done"]),
                                  tuple(sorted((int(t), v) for t, v in body["answers"].items())),
                                  body["pending"])
                forged = forge(self.workflow, durable, part)
                body.update(done=list(forged.done), pending=forged.pending,
                            answers={str(t): v for t, v in forged.answers})
            write_file(path, json.dumps({"body": body, "digest": doc["digest"]}))

    def clone_store(self, dest: Path) -> None:
        for path in self.workdir.iterdir():
            if path.is_file():
                shutil.copyfile(path, Path(dest) / path.name)


