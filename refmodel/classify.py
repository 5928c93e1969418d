"""Map a divergence to its fault category (CONTRACT.md section 5): first match in section 5's order.

``classify(model, world, op, allowed, observed)`` is given the world *before* the op, the allowed
observations the oracle computed for it, and what the target reported.  It returns ``None`` when
the observation is allowed: equal observations never get a category.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Model, World
from .mutants import CATEGORY_INFO
from .ops import Fork, Observation, Op, Race, Recover, Resume, TwinRecover


@dataclass(frozen=True, slots=True)
class Divergence:
    """A labelled divergence: the category, the property it breaks, and a one-line why."""

    category: str
    detail: str

    @property
    def property(self) -> str:
        return CATEGORY_INFO[self.category].breaks


def classify(
    model: Model, world: World, op: Op, allowed: list[Observation], observed: Observation
) -> Divergence | None:
    if any(expected.same_as(observed) for expected in allowed):
        return None
    wf = model.workflow
    thread = world.get(op.thread)
    done = set(thread.durable.done) if thread else set()
    branch = op.new_thread if isinstance(op, Fork) else op.thread
    fired = [(t, v) for b, t, v in observed.effects if b == branch]
    canonical = allowed[0] if allowed else None

    # A tampered store explains everything that follows it: whatever else the run then did
    # (re-fired a task the forgery un-did, say), the cause is that it ran on (docs/semantics.md).
    # A fork reads the checkpoint it addresses: only the latest one was tampered with.
    reads_tampered = thread is not None and thread.tampered and (
        not isinstance(op, Fork) or thread.checkpoint(op.gate) == thread.durable)
    if reads_tampered:
        if observed.outcome.replace("rejected", "").strip("|") or fired:
            return Divergence(
                "InvalidPersist",
                f"{thread.tampered}: tampered state used silently ({observed.outcome})",
            )

    # Replay (R1, EO): recovery fires again the effect of a task that had durably completed.
    if isinstance(op, Recover | TwinRecover):
        again = sorted({t for t, _ in fired if t in done})
        if again:
            return Divergence("Replay", f"recovery re-fired completed task(s) {again}")

    # ForkIgnore (R2, FD): the branch's gate took a value other than the one the fork gave.
    if isinstance(op, Fork):
        other = [v for t, v in fired if t == op.gate and v != op.value]
        kept = observed.state.answer(op.gate) if observed.state is not None else None
        if other or (kept is not None and kept != op.value):
            got = other[0] if other else kept
            return Divergence("ForkIgnore", f"fork with {op.value!r} at gate {op.gate} got {got!r}")
        gate_expected = canonical is not None and any(
            b == branch and t == op.gate for b, t, _ in canonical.effects)
        if gate_expected and not any(t == op.gate for t, _ in fired) and kept != op.value:
            return Divergence("ForkIgnore",
                              f"fork with {op.value!r} at gate {op.gate} never consumed it")

    # InvalidPersist (R3, CV): tampered state used, a bad output accepted, invalid state persisted.
    bad = getattr(op, "bad_output", None)
    if bad is not None and canonical is not None and canonical.outcome == "rejected":
        if observed.outcome != "rejected":
            return Divergence(
                "InvalidPersist", f"bad_output: task {bad}'s out-of-schema output accepted"
            )
    if observed.state is not None and not observed.state.is_valid(wf):
        return Divergence("InvalidPersist", f"invalid_state: {observed.state.to_json()}")

    # NondetRecovery (R4, RD): two copies of one durable state decided differently.
    if isinstance(op, TwinRecover) and observed.twin is not None:
        main = Observation(observed.outcome, observed.effects, observed.state)
        if not main.same_as(observed.twin) or not observed.twin.same_as(main):
            return Divergence("NondetRecovery", "the two copies of the store recovered differently")

    # DoubleConsume (R5, CO): a gate whose interrupt was already consumed fires again.
    if isinstance(op, Resume):
        again = sorted({t for t, _ in fired if t in done and t in wf.gates})
        if again:
            return Divergence("DoubleConsume", f"gate(s) {again} consumed a second time")

    # PrefixReplay (R9, EO): resuming fires again tasks that completed before the gate.
    if isinstance(op, Resume | Fork | Race):  # racers resume too
        base = done
        if isinstance(op, Fork):
            base = set(thread.checkpoint(op.gate).done) if thread.checkpoint(op.gate) else set()
        again = sorted({t for t, _ in fired if t in base})
        if again:
            return Divergence("PrefixReplay", f"resume re-fired completed task(s) {again}")

    # LostUpdate (R11, CO): more than one racer consumed the interrupt.
    if isinstance(op, Race):
        gate = thread.durable.pending
        consumed = [v for t, v in fired if t == gate]
        if len(consumed) > 1:
            return Divergence("LostUpdate", f"{len(consumed)} racers consumed gate {gate}: {consumed}")

    # Stuck (R6, LV): no answer in time, or recovery after a crash refused.
    if "stuck" in observed.outcome.split("|"):  # a racer counts as much as a lone caller
        return Divergence("Stuck", f"{op.name} did not answer within its time limit")
    # A crashed thread must be able to go on: recovering it, or answering the gate it was
    # consuming when it died, is never refused where the reference goes on (LV).
    if isinstance(op, Recover | TwinRecover | Resume | Race) and thread is not None \
            and thread.needs_recovery and canonical is not None and canonical.outcome != "rejected":
        if observed.outcome.split("|")[0] == "rejected" and not fired:
            return Divergence("Stuck", f"{op.name} after a crash was refused")

    # StateMismatch (PC): the run matched, the persisted state does not.
    if any(
        e.outcome == observed.outcome and e.effects == observed.effects for e in allowed
    ):
        expected = canonical.state.to_json() if canonical and canonical.state else None
        got = observed.state.to_json() if observed.state else None
        return Divergence("StateMismatch", f"persisted state {got} != expected {expected}")

    return Divergence("Unclassified", f"observed {observed.outcome}, expected {canonical.outcome}")
