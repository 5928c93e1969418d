"""The one comparison step: judge an observed operation against the reference, and whole traces.

Every place a trace is judged goes through here: the campaign's state machine
(``machine.DifferentialMachine._check``), ``replay``, and the trace minimizer.  So they cannot
drift apart (the issue this module closes: replay lacked the whole-store tamper step and the
deviation lookup, and reported ERROR where the machine would have followed an allowed branch).

``judge_step(model, world, op, observed, caps, deviations, history)`` -> ``Judgement``:

- the allowed observations (``refmodel.Model.step``; the tamper reach of ``caps`` is the model's,
  see ``model_for``);
- ``divergence``: ``None`` when ``observed`` is one of them, else ``refmodel.classify``'s label
  with the history before the step;
- ``verdict``: ``None`` (allowed), ``"D"`` when one of the adapter's documented deviations covers
  the divergence (``adapters.protocol.Deviation.covers``), else ``"✗"``;
- ``world``: the world after the step: the allowed branch the target took, or, after a ``D``,
  the target's observed branch adopted (``Model.adopt``), so that the search goes on under the
  cited weakening (docs/contract.md §5).  After a ``✗`` it is the reference's canonical branch (the
  example ends there; the field is only informative).

``judge_trace(runner_factory, workflow, ops, caps, deviations)`` applies ``ops`` through a fresh
runner (``runner_factory(workflow)``, anything with ``apply(op) -> Observation`` and ``close()``,
such as ``runner.Session.case``) and returns a ``TraceVerdict``: the first ✗ if any, else the
first D, with every D seen on the way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from refmodel import (Divergence, Model, Observation, Op, Step, Workflow, World, classify,
                      properties)

from .errors import OracleDisagreement


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict on one step (see the module docstring)."""

    allowed: tuple  # tuple[Observation, ...], canonical first
    divergence: Divergence | None
    verdict: str | None  # None | "✗" | "D"
    citation: str
    world: World
    # Whose the divergence is (docs/contract.md §5, "Whose defect"): "framework" for a ✗ and for a D
    # the framework documents; "caller" for a D on state the framework leaves in the caller's hands.
    owner: str = "framework"

    @property
    def ok(self) -> bool:
        return self.divergence is None


@dataclass(frozen=True, slots=True)
class SeenDeviation:
    """A documented deviation met on the way: the step index (0-based), its label, its citation."""

    index: int
    divergence: Divergence
    citation: str
    owner: str = "framework"


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceVerdict:
    """The judgement of a whole trace on a target.

    ``first_divergence_index`` is the 0-based index of the step that decides the verdict: the
    first ✗, or, when no ✗ came, the first D (``None`` when every step was allowed).
    ``observations`` and ``expected`` hold one entry per step applied (the trace stops at a ✗).
    """

    first_divergence_index: int | None
    divergence: Divergence | None
    verdict: str | None
    citation: str = ""
    owner: str = "framework"
    observations: tuple = ()
    expected: tuple = ()  # tuple[tuple[Observation, ...], ...]
    deviations_seen: tuple = field(default=())  # tuple[SeenDeviation, ...]


def model_for(workflow: Workflow, caps, mutant: str | None = None) -> Model:
    """The reference model for a target with capabilities ``caps`` (its tamper reach)."""
    return Model(workflow, mutant, tamper_scope=getattr(caps, "tamper_scope", "thread"))


def crash_kind_of(world: World, op: Op, observed: Observation) -> str | None:
    """How the op's thread died: in this very op, or before it (a recovery diverging)."""
    crash = getattr(op, "crash", None)
    if observed.outcome == "crashed" and crash is not None:
        return crash.kind
    thread = world.get(op.thread)
    return thread.crash_kind if thread is not None else None


def _written(op: Op) -> str | None:
    """The thread whose checkpoints ``op`` writes: a fork's new branch, the thread of any other
    op that makes the framework run (``Op.runs``).  A query reads and a tamper edits what is
    there; neither moves a thread ahead of another."""
    if op.name == "fork":
        return op.new_thread
    return op.thread if op.runs else None


def superseded(world: World, op: Op, history=()) -> bool:
    """Is ``op``'s thread behind its lineage: was another thread of the same run (the run, or a
    branch forked from it, directly or not) written after this thread last was?

    A framework that keeps a run and its branches in one thread of its own (LangGraph) then
    reaches this thread only by its checkpoint's id, which the thread has moved past: the
    framework's time travel.  An op refused loudly is not counted as a write: the head it would
    have moved may not have moved, and a ``D`` claimed for a call that was no time travel would
    hide a defect (the conservative side is ✗)."""
    thread = world.get(op.thread)
    if thread is None:
        return False
    root = thread.lineage or op.thread
    family = {n for n, t in world.threads if (t.lineage or n) == root}
    last: dict = {}
    for i, (done, observed, _allowed) in enumerate(history):
        name = _written(done)
        if name in family and observed.outcome != "rejected":
            last[name] = i
    mine = last.get(op.thread, -1)
    return any(i > mine for n, i in last.items() if n != op.thread)


def last_tamper(op: Op, history=()) -> str | None:
    """How ``op``'s thread was last tampered with (``"forged"``, ...), or ``None``.  A branch
    forked from a tampered thread carries what it was forked from (docs/contract.md §3: it inherits
    the damage), so a fork of a fork of a forged dict is still forged."""
    how: dict = {}
    for done, _observed, _allowed in history:
        if done.name == "tamper":
            how[done.thread] = done.how
        elif done.name == "fork" and done.thread in how:
            how[done.new_thread] = how[done.thread]
    return how.get(op.thread)


def judge_step(model: Model, world: World, op: Op, observed: Observation, caps=None,
               deviations=(), history=()) -> Judgement:
    """Judge one observed step (raises ``refmodel.InvalidOperation`` if ``op`` is not enabled)."""
    alternatives = model.step(world, op)
    allowed = tuple(o for o, _ in alternatives)
    divergence = classify(model, world, op, list(allowed), observed, history)
    if divergence is None:
        after = next(w for o, w in alternatives if o.same_as(observed))
        return Judgement(allowed, None, None, "", after)
    kind = crash_kind_of(world, op, observed)
    behind = superseded(world, op, history)
    how = last_tamper(op, history)
    deviation = next((d for d in deviations
                      if d.covers(divergence.category, op.name, kind, divergence.rule, behind,
                                  how)), None)
    if deviation is None:
        return Judgement(allowed, divergence, "✗", "", alternatives[0][1])
    return Judgement(allowed, divergence, "D", deviation.citation,
                     model.adopt(world, op, observed), deviation.owner)


#: The properties whose later violation a D can hide (docs/contract.md §5: "A D excuses the
#: divergence it cites, not its consequences").  After a D the model adopts the target's branch, so
#: an effect that fires again because a documented-lossy checkpoint was lost is allowed *there*;
#: the model-free predicates (``refmodel.properties``), which count every effect the run fired,
#: still see it.  Only EO and CO: they count effects, which no adoption rewrites.
CONSEQUENCES = ("EO", "CO")
#: How a consequence's detail reads after its property's name (a report tells it apart by them).
CONSEQUENCE_WORDS = "broken: an effect fired again after the documented deviation"


def consequence(workflow: Workflow, op: Op, history, excusing: Judgement, world: World,
                tamper_scope: str = "thread") -> Judgement | None:
    """The D a step allowed by the model still owes after an earlier D (``excusing``): the first
    violation of a property of ``CONSEQUENCES`` that ``history`` (every step so far, this one
    last) shows at its last step, excused by the same citation, or ``None``.  ``world``: the
    world after the step (the judgement's, unchanged)."""
    steps = [Step(o, observed, allowed) for o, observed, allowed in history]
    last = len(steps) - 1
    for prop in CONSEQUENCES:
        if properties.PROPERTIES[prop](workflow, steps, tamper_scope) != last:
            continue
        if prop == "EO":
            category = "Replay" if op.name in ("recover", "twin_recover") else "PrefixReplay"
        else:
            category = "LostUpdate" if op.name == "race" else "DoubleConsume"
        cause = excusing.divergence
        detail = (f"{prop} {CONSEQUENCE_WORDS} ({cause.category}: {cause.detail}); excused by "
                  "the same citation")
        return Judgement(steps[last].allowed, Divergence(category, detail, "consequence"), "D",
                         excusing.citation, world, excusing.owner)
    return None


def settle(workflow: Workflow, op: Op, history, judgement: Judgement, excusing: Judgement | None,
           tamper_scope: str = "thread") -> Judgement:
    """A judgement once the step is in ``history`` (every step so far, this one last), read again
    without the model.  After a D (``excusing``), the D its consequences owe (``consequence``).
    Before any D, a step the model allowed must break no property by the model-free predicates
    either: the two are independent readings of the contract, and where they disagree one of them
    is wrong, so the run is no verdict (``OracleDisagreement``, an engine error)."""
    if judgement.verdict is not None:
        return judgement
    if excusing is not None:
        return consequence(workflow, op, history, excusing, judgement.world,
                           tamper_scope) or judgement
    steps = [Step(o, observed, allowed) for o, observed, allowed in history]
    last = len(steps) - 1
    broken = sorted(p for p, at in properties.broken(workflow, steps, tamper_scope).items()
                    if at == last)
    if broken:
        raise OracleDisagreement(
            f"the model allowed step {last + 1} ({op.name} {getattr(op, 'thread', '')}, observed "
            f"{steps[last].observed.outcome}) but the model-free predicates read it as breaking "
            f"{', '.join(broken)}; the operations: "
            + json.dumps([o.to_json() for o, _, _ in history]))
    return judgement


def judge_trace(runner_factory, workflow: Workflow, ops, caps=None, deviations=(), *,
                mutant: str | None = None) -> TraceVerdict:
    """Apply ``ops`` on a fresh runner and judge each step; stop at the first ✗."""
    model = model_for(workflow, caps, mutant)
    world, history, seen, excusing = World(), [], [], None
    runner = runner_factory(workflow)
    try:
        for i, op in enumerate(ops):
            observed = runner.apply(op)
            judgement = judge_step(model, world, op, observed, caps, deviations, history)
            history.append((op, observed, judgement.allowed))
            if judgement.verdict == "✗":
                return _verdict(i, judgement.divergence, "✗", "", history, seen)
            world = judgement.world
            judgement = settle(workflow, op, history, judgement, excusing,
                               getattr(caps, "tamper_scope", "thread"))
            if judgement.verdict == "D":
                excusing = excusing or judgement
                seen.append(SeenDeviation(i, judgement.divergence, judgement.citation,
                                          judgement.owner))
    finally:
        runner.close()
    if seen:
        # A consequence (an effect fired again after the D) is the one to report: it is what a
        # user pays for the weakening.  Otherwise the first D.
        first = next((d for d in seen if d.divergence.rule == "consequence"), seen[0])
        return _verdict(first.index, first.divergence, "D", first.citation, history, seen,
                        first.owner)
    return _verdict(None, None, None, "", history, seen)


def _verdict(index, divergence, verdict, citation, history, seen,
             owner="framework") -> TraceVerdict:
    return TraceVerdict(
        first_divergence_index=index, divergence=divergence, verdict=verdict, citation=citation,
        owner=owner,
        observations=tuple(o for _, o, _ in history), expected=tuple(a for _, _, a in history),
        deviations_seen=tuple(seen))


__all__ = ["CONSEQUENCES", "CONSEQUENCE_WORDS", "Judgement", "SeenDeviation", "TraceVerdict", "consequence",
           "crash_kind_of", "judge_step", "judge_trace", "model_for"]
