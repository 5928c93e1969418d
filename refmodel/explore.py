"""Breadth-first exploration of every operation sequence up to a depth bound.

``explore_reference`` counts the distinct reference worlds reachable at each depth.
``shortest_exposure`` runs a mutant beside the reference and returns the shortest operation
sequence after which the mutant's observation is not one the reference allows: the minimal
counterexample the fuzzer's shrinker should reach.  Both deduplicate on worlds, so the search is
over states, not over the (far larger) set of sequences.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from .classify import Divergence, classify
from .model import Model, World, forge_parts
from .ops import (
    CRASH_KINDS,
    PHASES,
    TAMPER_HOWS,
    CrashAt,
    Fork,
    InvalidOperation,
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
from .workflow import Workflow

ROOT = "t0"


def candidate_ops(model: Model, world: World, *, max_threads: int = 3,
                  admit=None) -> Iterator[Op]:
    """Every operation enabled in ``world``, with every crash point and BadOutput, in fixed order.

    Crash points and bad outputs name every task (a shape's: every task instance).  Resumes give
    each value; in a shape (docs/contract.md §7) also a map naming each pending question alone
    and all of them together, forks answer a checkpoint's other questions by one map too, and
    racers take one question or every pair of pending questions.  ``admit(op) -> bool``, when
    given, keeps only the operations a target can express (a variant's capabilities): the
    minimum for that variant.
    """
    wf = model.workflow
    shaped = wf.shape is not None
    labels = wf.shape.instances() if shaped else range(1, wf.n + 1)
    crashes = [None] + [CrashAt(t, phase, kind)
                        for t in labels for phase in PHASES for kind in CRASH_KINDS]

    def executing(make):
        for crash in crashes:
            yield make(crash=crash)
        for t in labels:
            yield make(bad_output=t)

    names = world.names()
    ops: list[Op] = []
    if ROOT not in names:
        ops += executing(lambda **kw: Start(ROOT, **kw))
    for name in names:
        thread = world.get(name)
        pending = (thread.durable.pending or ()) if shaped else ()
        maps = [((q, v),) for q in pending for v in wf.values]
        if len(pending) > 1:
            maps += [tuple(zip(pending, vs))
                     for vs in itertools.product(wf.values, repeat=len(pending))]
        for value in wf.values:
            ops += executing(lambda **kw: Resume(name, value=value, **kw))
        for answers in maps:
            ops += executing(lambda **kw: Resume(name, answers=answers, **kw))
        ops += executing(lambda **kw: Recover(name, **kw))
        if len(names) < max_threads:
            for gate, checkpoint in thread.gate_checkpoints:
                others = [q for q in checkpoint.pending if q != gate] if shaped else []
                for value in wf.values:
                    new = f"f{len(names)}"
                    ops += executing(lambda **kw: Fork(name, gate=gate, value=value,
                                                       new_thread=new, **kw))
                    if others:  # the whole checkpoint answered by one map
                        ops += executing(lambda **kw: Fork(
                            name, gate=gate, value=value, new_thread=new,
                            answers=[(q, value) for q in others], **kw))
        ops.append(Query(name))
        ops += [Tamper(name, how=how) for how in TAMPER_HOWS]
        if not shaped:  # refmodel.forge edits a chain's state
            ops += [Tamper(name, how="forged", part=part)
                    for part in forge_parts(wf, thread.durable)]
        ops += [Race(name, values=c) for c in itertools.combinations_with_replacement(wf.values, 2)]
        ops += [Race(name, values=vs, gates=pair) for pair in itertools.combinations(pending, 2)
                for vs in itertools.product(wf.values, repeat=2)]
        ops.append(TwinRecover(name))
        ops += [StaleResume(name, gate=gate, value=value)
                for gate, _ in thread.gate_checkpoints for value in wf.values]
    for op in ops:
        if model.enabled(world, op) and (admit is None or admit(op)):
            yield op


def explore_reference(workflow: Workflow, depth: int) -> list[int]:
    """Distinct reference worlds first reached at each depth ``1..depth``."""
    model = Model(workflow)
    seen = {World()}
    frontier = [World()]
    counts = []
    for _ in range(depth):
        nxt = []
        for world in frontier:
            for op in candidate_ops(model, world):
                for _observation, after in model.step(world, op):
                    if after not in seen:
                        seen.add(after)
                        nxt.append(after)
        counts.append(len(nxt))
        frontier = nxt
    return counts


@dataclass(frozen=True, slots=True)
class Exposure:
    """The shortest trace that exposes a mutant, and the category the classifier gives it."""

    mutant: str
    trace: tuple  # tuple[Op, ...]
    divergence: Divergence

    @property
    def length(self) -> int:
        return len(self.trace)


def shortest_exposure(workflow: Workflow, mutant: str | None, depth: int,
                      admit=None) -> Exposure | None:
    """BFS over (reference world, target world) pairs; ``None`` if nothing diverges by ``depth``.

    ``admit``: as for ``candidate_ops``, the operations the search may use.
    """
    reference = Model(workflow)
    target = Model(workflow, mutant)
    start = (World(), World())
    parent: dict = {start: None}
    frontier = [start]
    for _ in range(depth):
        nxt = []
        for pair in frontier:
            ref_world, target_world = pair
            for op in candidate_ops(reference, ref_world, admit=admit):
                try:
                    observed, target_after = target.step(target_world, op)[0]
                except InvalidOperation:
                    continue  # the target's world no longer admits it: not a comparable step
                allowed = reference.step(ref_world, op)
                divergence = classify(reference, ref_world, op, [o for o, _ in allowed], observed)
                if divergence is not None:
                    return Exposure(mutant or "reference", _path(parent, pair) + (op,), divergence)
                ref_after = next(w for o, w in allowed if o.same_as(observed))
                successor = (ref_after, target_after)
                if successor not in parent:
                    parent[successor] = (pair, op)
                    nxt.append(successor)
        frontier = nxt
    return None


def _path(parent: dict, pair) -> tuple:
    ops = []
    while parent[pair] is not None:
        pair, op = parent[pair]
        ops.append(op)
    return tuple(reversed(ops))
