"""Trace-level minimization, after Hypothesis's shrink.

Hypothesis shrinks the choice sequence that generated a failing example; it does not know that an
operation on another thread, a query, or a recover that changed nothing can simply be dropped, so
shrunk traces keep operations a maintainer then has to read and rule out.  This pass works on the
operations themselves (delta debugging, Zeller & Hildebrandt 2002), in the style of Hypothesis's
own ``shrinker.py``: a registry of small named passes, each a function proposing simpler
candidates, run in order until none of them changes anything (a fixpoint).

A candidate is kept when it is

1. well formed for the reference: some path through the oracle admits every operation
   (``Model.why_disabled``), so it is a trace the contract gives a meaning to;
2. simpler, by ``size`` (fewer operations first; then fewer threads, simpler operations, a
   smaller workflow, canonical thread names), which also guarantees termination;
3. judged to diverge with the same category, property and verdict, the expected observations
   re-derived from the oracle and the operations re-run on the target (``_judge``).

Each candidate is judged once (cached by the canonical JSON of workflow and operations), and the
whole pass stops at ``deadline`` (a ``time.monotonic()`` value: the campaign's time box), keeping
the simplest trace judged so far.

Timing-dependent findings (a free race; a failure Hypothesis could not reproduce every time) are
judged by rate.  The rule: the original reproduced ``k0`` of ``n0`` replays; a candidate is run up
to ``n0`` times and kept when it reproduces at least ``ceil(p * n0)`` times (and at least once),
where ``p`` is the 95% Wilson lower bound of ``k0/n0``.  Runs stop as soon as the outcome is
decided.  With ``k0 = n0 = 5`` a candidate needs 3 of 5; with ``1/5``, 1 of 5.

This module does not import Hypothesis.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from refmodel import (
    CATEGORY_INFO,
    MUTANTS,
    CrashAt,
    Fork,
    InvalidOperation,
    InvalidWorkflow,
    Model,
    Query,
    Race,
    Recover,
    Resume,
    Shape,
    StaleResume,
    Start,
    Tamper,
    Task,
    TwinRecover,
    Workflow,
    World,
    candidate_ops,
    classify,
    shortest_exposure,
)

from .errors import EngineError, HarnessFailure
from .rate import TRIALS, Rate
from .trace import Finding, Trace


# -- judging ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Diverged:
    """A candidate that diverged: the divergence's identity and the judged trace.  (Not
    ``fuzz.judge.Judgement``, the verdict of one step, which this is made from.)

    ``trace`` holds the operations up to and including the first divergence, with what the
    target observed, the oracle's canonical expectation per operation, and the finding.
    """

    category: str
    property: str
    verdict: str
    trace: Trace

    @property
    def key(self) -> tuple:
        return (self.category, self.property, self.verdict)


def _judge(session, candidate: Trace) -> Diverged | None:
    """Run ``candidate`` on ``session``'s target beside the oracle; its deciding divergence.

    ``None`` when nothing diverges, or when the candidate stops being well formed on the branch
    the target took.  Judging is ``fuzz.judge.judge_trace``, the one comparison step the
    machine and ``replay`` use too (the branch followed, the tamper's reach, the verdict from
    the adapter's documented deviations, a D that does not end the trace).
    """
    from .judge import judge_trace

    adapter, variant = session.adapter, session.variant
    try:
        verdict = judge_trace(session.case, candidate.workflow, candidate.operations,
                              adapter.capabilities(variant), list(adapter.deviations(variant)))
    except (InvalidOperation, HarnessFailure):
        return None  # not well formed on this branch, or the adapter failed: not a candidate
    if verdict.verdict is None:
        return None
    i, divergence = verdict.first_divergence_index, verdict.divergence
    finding = Finding(divergence.category, divergence.property, i, divergence.detail,
                      verdict.verdict, verdict.citation, owner=verdict.owner)
    judged = candidate.with_(operations=candidate.operations[:i + 1],
                             observations=tuple(verdict.observations[:i + 1]),
                             expected=tuple(allowed[0] for allowed in verdict.expected[:i + 1]),
                             finding=finding)
    return Diverged(finding.category, finding.property, finding.verdict, judged)


def session_judge(session) -> Callable[[Trace], Diverged | None]:
    """The judge the minimizer uses for ``session``'s target variant."""
    return lambda candidate: _judge(session, candidate)


# -- the timing rule --------------------------------------------------------------------------


def timing_dependent(trace: Trace) -> bool:
    """A free race decides by timing; a finding whose detail says so was measured as such."""
    detail = trace.finding.detail if trace.finding else ""
    return detail.startswith("timing-dependent") or any(
        isinstance(op, Race) and not op.forced for op in trace.operations)


def measure(judge, trace: Trace, goal: tuple, runs: int = TRIALS) -> Rate:
    """How often ``trace`` diverges with ``goal``'s identity over ``runs`` runs."""
    hits = 0
    for _ in range(runs):
        judged = judge(trace)
        hits += judged is not None and judged.key == goal
    return Rate(hits, runs)


# -- simplicity ----------------------------------------------------------------------------------


def _task_cost(task, workflow: Workflow) -> int:
    """A chain's task number; a shape's task instance by its place in the shape's order."""
    if isinstance(task, int):
        return task
    instances = workflow.shape.instances() if workflow.shape is not None else ()
    return instances.index(task) + 1 if task in instances else len(instances) + 1


def _op_cost(op, workflow: Workflow) -> int:
    rank = {v: i for i, v in enumerate(workflow.values)}  # the first value is the simplest
    cost = 0
    crash = getattr(op, "crash", None)
    if crash is not None:
        phases = ("before_effect", "in_flight", "after_commit")
        cost += (4 + _task_cost(crash.task, workflow) + (crash.kind == "sigkill")
                 + phases.index(crash.phase))
    bad = getattr(op, "bad_output", None)
    if bad is not None:
        cost += 4 + _task_cost(bad, workflow)
    if isinstance(op, Race):
        cost += 2 * len(op.values) + (not op.forced) + len(set(op.values)) - 1
        cost += sum(rank.get(v, 0) for v in op.values)
    if isinstance(op, Resume | StaleResume):
        cost += rank.get(op.value, 0)
    answers = getattr(op, "answers", ())
    cost += sum(1 + rank.get(v, 0) for _, v in answers)
    return cost


def canonical_names(ops) -> tuple:
    """Rename threads as the machine names them: starts ``t0, t1``, forks ``f<threads so far>``."""
    mapping: dict = {}
    out = []
    for op in ops:
        if isinstance(op, Start) and op.thread not in mapping:
            mapping[op.thread] = f"t{sum(1 for v in mapping.values() if v.startswith('t'))}"
        thread = mapping.get(op.thread, op.thread)
        if isinstance(op, Fork):
            if op.new_thread not in mapping:
                mapping[op.new_thread] = f"f{len(mapping)}"
            op = replace(op, thread=thread, new_thread=mapping[op.new_thread])
        else:
            op = replace(op, thread=thread)
        out.append(op)
    return tuple(out)


def size(workflow: Workflow, ops) -> tuple:
    """The order candidates must decrease in: shorter first, then simpler."""
    threads = {op.thread for op in ops} | {op.new_thread for op in ops if isinstance(op, Fork)}
    return (len(ops), len(threads), sum(_op_cost(op, workflow) for op in ops),
            (workflow.n, len(workflow.gates), len(workflow.values), _shape_cost(workflow)),
            tuple(ops) != canonical_names(ops))


def _shape_cost(workflow: Workflow) -> int:
    """What a shape adds to its tasks: questions past a task's first, pre-effects, loop
    visits (a chain: 0), so that a shape without one of them is the simpler."""
    shape = workflow.shape
    if shape is None:
        return 0
    tasks = [t for stage in shape.stages for t in stage]
    return (sum(max(0, t.questions - 1) + t.pre_effect for t in tasks)
            + (shape.loop.visits if shape.loop else 0))


def admissible(workflow: Workflow, ops) -> bool:
    """Does some path through the oracle admit every operation (its preconditions)?

    The oracle may allow several outcomes per operation; the target decides which one is taken,
    so a candidate is well formed when at least one path admits it all.
    """
    model = Model(workflow)
    frontier = {World()}
    for op in ops:
        nxt = set()
        for world in frontier:
            if model.enabled(world, op):
                nxt.update(after for _, after in model.step(world, op))
        if not nxt:
            return False
        frontier = nxt
    return True


def key_of(workflow: Workflow, ops) -> str:
    """The cache key: canonical JSON of the workflow and the operations."""
    return json.dumps({"workflow": workflow.to_json(), "operations": [o.to_json() for o in ops]},
                      sort_keys=True)


# -- the minimum to reach ------------------------------------------------------------------------


def inexpressible(op, caps) -> str | None:
    """Why ``caps`` cannot express ``op`` (the variant's declared n/a reason), or None.

    The machine never draws such an op; a corpus entry can hold one when it was recorded before
    the adapter declared the idiom n/a (LangGraph's functional ``update_state`` fork).  Judging it
    would blame the framework for what the harness did, so replay refuses it with the reason.
    """
    if op.name not in caps.operations:
        return caps.not_expressible.get(op.name, f"the variant has no {op.name!r} operation")
    crash = getattr(op, "crash", None)
    if crash is not None and (crash.kind not in caps.crash_kinds
                              or crash.phase not in caps.crash_phases):
        return f"crash point {crash.kind}@{crash.phase} is not among the variant's crash points"
    if getattr(op, "bad_output", None) is not None and not caps.bad_output:
        return caps.not_expressible.get("bad_output", "the variant has no BadOutput")
    how = getattr(op, "how", None)
    if op.name == "tamper" and how not in caps.tamper_hows:
        return caps.not_expressible.get(f"tamper:{how}", f"tamper {how!r} is not expressible")
    part = getattr(op, "part", None)
    if part and part.split(":")[0] not in getattr(caps, "forge_parts", frozenset()):
        return caps.not_expressible.get(f"forged {part.split(':')[0]}",
                                        f"a forged {part!r} part is not expressible")
    if op.name == "race" and getattr(op, "forced", False) and not caps.forced_race:
        # The racers would run free (nothing holds them between read and write): judging that as
        # the forced schedule would claim an interleaving the run never had.
        return "a forced race: the variant cannot hold the racers' reads (forced_race=False)"
    return None


def shape_inexpressible(workflow, caps) -> str | None:
    """Why ``caps`` cannot run ``workflow``'s shape (docs/contract.md §7), or None: a feature
    it uses that the variant does not declare (``Capabilities.shapes``), with the variant's
    reason (``not_expressible["shape:<feature>"]``) where it gives one."""
    if workflow.shape is None:
        return None
    missing = sorted(workflow.shape.features() - frozenset(caps.shapes))
    if not caps.shapes:
        return caps.not_expressible.get("shape", "the variant runs linear chains only")
    if missing:
        return caps.not_expressible.get(f"shape:{missing[0]}",
                                        f"the variant runs no shape with {missing[0]!r}")
    return None


def expressible(caps) -> Callable:
    """The operations a variant can express (its ``Capabilities``): explore's ``admit``.  Those
    ``inexpressible`` passes, the operation named by ``caps.expresses``, a race within
    ``max_racers``."""

    def admit(op) -> bool:
        if not caps.expresses(op.name) or inexpressible(op, caps) is not None:
            return False
        return not isinstance(op, Race) or len(op.values) <= caps.max_racers

    return admit


def mechanism_caps(caps, ops):
    """``caps`` narrowed to the kinds of operations ``ops`` use: their names, crash kinds and
    phases, tamper kinds, BadOutput or not.  A finding that goes through a forged checkpoint is
    another defect than one that goes through a task's bad output, even in the same category:
    its shortest exposure is the shortest one through a forged checkpoint."""
    crashes = [op.crash for op in ops if getattr(op, "crash", None) is not None]
    return replace(
        caps, operations=caps.operations & {op.name for op in ops},
        crash_kinds=caps.crash_kinds & {c.kind for c in crashes},
        crash_phases=caps.crash_phases & {c.phase for c in crashes},
        tamper_hows=caps.tamper_hows & {op.how for op in ops if isinstance(op, Tamper)},
        bad_output=caps.bad_output and any(getattr(op, "bad_output", None) for op in ops))


# Small workflows the machine also draws: a category's minimum is the least over these.
MINIMA_WORKFLOWS = (Workflow(3, {2}), Workflow(2, {1}), Workflow(1, {1}), Workflow(2, set()))


def category_minima(caps=None, depth: int = 3) -> dict:
    """Category -> the fewest operations that expose its mutant with what ``caps`` can express
    (every operation when ``None``), over ``MINIMA_WORKFLOWS``; a category no exposure within
    ``depth`` reaches is absent."""
    admit = expressible(caps) if caps is not None else None
    out: dict = {}
    for mutant in MUTANTS:
        for workflow in MINIMA_WORKFLOWS:
            exposure = shortest_exposure(workflow, mutant, depth, admit)
            if exposure is not None and exposure.divergence.category == mutant:
                out[mutant] = min(out.get(mutant, depth + 1), exposure.length)
    return out


# -- the passes ----------------------------------------------------------------------------------
# Each pass takes the current (workflow, ops) and yields candidate (workflow, ops) pairs, the most
# promising first.  A pass knows nothing of judging; ``minimize`` keeps the first one that works.

Candidate = tuple  # (Workflow, tuple[Op, ...])


def _descendants(ops, root: str) -> set:
    """``root`` and every branch forked from it, transitively."""
    names = {root}
    for op in ops:
        if isinstance(op, Fork) and op.thread in names:
            names.add(op.new_thread)
    return names


def drop_thread(workflow, ops) -> Iterator[Candidate]:
    """Drop every operation of one thread and of the branches forked from it."""
    for root in dict.fromkeys(op.thread for op in ops):
        gone = _descendants(ops, root)
        yield workflow, tuple(op for op in ops if op.thread not in gone
                              and not (isinstance(op, Fork) and op.new_thread in gone))


def drop_idle(workflow, ops) -> Iterator[Candidate]:
    """Drop, all at once, the queries and the operations after which the oracle's world (on its
    canonical path) did not change: recovers and resumes with nothing to do."""
    model, world, keep = Model(workflow), World(), []
    try:
        for op in ops[:-1]:
            after = model.step(world, op)[0][1]
            if not (isinstance(op, Query) or (after == world and isinstance(
                    op, Recover | Resume | TwinRecover | Query))):
                keep.append(op)
            world = after
    except InvalidOperation:
        return
    yield workflow, tuple(keep) + ops[-1:]


def drop_blocks(workflow, ops) -> Iterator[Candidate]:
    """Delta debugging's complements: drop a block of operations, large blocks first."""
    n = len(ops)
    size_ = n // 2
    while size_ >= 1:
        for start in range(0, n - size_ + 1, size_):
            yield workflow, ops[:start] + ops[start + size_:]
        size_ //= 2


def merge_threads(workflow, ops) -> Iterator[Candidate]:
    """Run a later-started thread's operations on an earlier one (its start dropped), and a
    branch's on its source (the fork turned into a resume of the source, or dropped)."""
    for i, op in enumerate(ops):
        if isinstance(op, Fork):
            rest = tuple(replace(o, thread=op.thread) if o.thread == op.new_thread else o
                         for o in ops[i + 1:])
            resume = Resume(op.thread, crash=op.crash, bad_output=op.bad_output, value=op.value)
            yield workflow, ops[:i] + (resume,) + rest
            yield workflow, ops[:i] + rest
    started = [op.thread for op in ops if isinstance(op, Start)]
    for i, keep in enumerate(started):
        for gone in started[i + 1:]:
            out = []
            for op in ops:
                if isinstance(op, Start) and op.thread == gone:
                    continue
                out.append(replace(op, thread=keep) if op.thread == gone else op)
            yield workflow, tuple(out)


def fold_into_fork(workflow, ops) -> Iterator[Candidate]:
    """A later resume of a fork's source run as the fork itself, the two threads trading places
    from there on: a fork is a resume on a new branch, so the branch can take the resume's
    value, crash point and BadOutput, and the source's later operations then run on the branch
    and the branch's on the source.  Where the branch was there only to be tampered with (a
    tamper that reaches the source's lineage) this saves the resume: ``start; fork f1; resume
    t0 (crash); tamper f1; resume t0`` becomes ``start; fork f1 (crash); tamper t0; resume f1``.
    No drop or merge reaches it: each keeps the resume, or the branch the tamper needs."""
    for i, fork in enumerate(ops):
        if not isinstance(fork, Fork):
            continue
        swap = {fork.thread: fork.new_thread, fork.new_thread: fork.thread}
        for j in range(i + 1, len(ops)):
            resume = ops[j]
            if not (isinstance(resume, Resume) and resume.thread == fork.thread):
                continue
            folded = replace(fork, value=resume.value, crash=resume.crash,
                             bad_output=resume.bad_output)
            rest = tuple(replace(op, thread=swap.get(op.thread, op.thread)) for op in ops[j + 1:])
            yield workflow, ops[:i] + (folded,) + ops[i + 1:j] + rest


def _earlier(task, workflow) -> list:
    """The tasks before ``task``: lower numbers on a chain, earlier instances on a shape."""
    if isinstance(task, int):
        return list(range(1, task))
    instances = workflow.shape.instances() if workflow.shape is not None else ()
    return list(instances[:instances.index(task)]) if task in instances else []


def _simpler_op(op, workflow) -> Iterator:
    crash = getattr(op, "crash", None)
    if crash is not None:
        yield replace(op, crash=None)
        if crash.kind != "exception":
            yield replace(op, crash=CrashAt(crash.task, crash.phase, "exception"))
        for task in _earlier(crash.task, workflow):
            yield replace(op, crash=CrashAt(task, crash.phase, crash.kind))
        for phase in ("before_effect", "in_flight", "after_commit"):
            if phase == crash.phase:
                break
            yield replace(op, crash=CrashAt(crash.task, phase, crash.kind))
    bad = getattr(op, "bad_output", None)
    if bad is not None:
        yield replace(op, bad_output=None)
        for task in _earlier(bad, workflow):
            yield replace(op, bad_output=task)
    if isinstance(op, Race):
        yield Resume(op.thread, value=op.values[0])  # one caller instead of several
        if len(op.values) > 2:
            yield replace(op, values=op.values[:-1])
        if not op.forced:
            yield replace(op, forced=True)
        if len(set(op.values)) > 1 or op.values[0] != workflow.values[0]:
            yield replace(op, values=(workflow.values[0],) * len(op.values))
    if isinstance(op, Resume | StaleResume) and op.value != workflow.values[0]:
        yield replace(op, value=workflow.values[0])


def simplify_ops(workflow, ops) -> Iterator[Candidate]:
    """One operation made simpler: no crash point or BadOutput, a lower k in a race, ..."""
    for i, op in enumerate(ops):
        for simpler in _simpler_op(op, workflow):
            yield workflow, ops[:i] + (simpler,) + ops[i + 1:]


def rename_threads(workflow, ops) -> Iterator[Candidate]:
    """The machine's own thread names (t0, f1, ...), whatever dropping operations left."""
    yield workflow, canonical_names(ops)


def shrink_workflow(workflow, ops) -> Iterator[Candidate]:
    """A smaller workflow: one task fewer, one gate fewer, one value fewer.  Not for a shaped
    workflow, whose operations name its labels: the search shrank its shape already."""
    if workflow.shape is not None:
        return
    shapes = []
    if workflow.n > 1:
        shapes.append((workflow.n - 1, {g for g in workflow.gates if g < workflow.n},
                       workflow.values))
    for gate in sorted(workflow.gates):
        shapes.append((workflow.n, workflow.gates - {gate}, workflow.values))
    if len(workflow.values) > 2:
        shapes.append((workflow.n, workflow.gates, workflow.values[:-1]))
    for shape in shapes:
        try:
            yield Workflow(*shape), ops
        except InvalidWorkflow:
            continue


def simplify_shape(workflow, ops) -> Iterator[Candidate]:
    """A simpler shape for the same operations (docs/contract.md §7): no loop, a task without
    its pre-effect or with one question fewer, the last task gone, a value fewer.  Labels keep
    their meaning (tasks are numbered in stage order, so only the last task can go); a
    candidate whose operations name a label it lacks is not admissible and never runs.  A shape
    simplified to a linear one is a chain, whose tasks are numbers: not reached here."""
    shape = workflow.shape
    if shape is None:
        return
    stages = [list(stage) for stage in shape.stages]
    simpler = [(shape.stages, None)] if shape.loop is not None else []  # (stages, loop)

    def with_task(si: int, ti: int, task: Task) -> tuple:
        changed = [list(stage) for stage in stages]
        changed[si][ti] = task
        return tuple(map(tuple, changed)), shape.loop

    for si, stage in enumerate(stages):
        for ti, task in enumerate(stage):
            if task.pre_effect:
                simpler.append(with_task(si, ti, Task(task.questions, False)))
            if task.questions > 1:
                simpler.append(with_task(si, ti, Task(task.questions - 1, task.pre_effect)))
    fewer = [list(stage) for stage in stages]
    fewer[-1].pop()
    if not fewer[-1]:
        fewer.pop()
    if fewer:
        simpler.append((tuple(map(tuple, fewer)), shape.loop))
    for new_stages, loop in simpler:
        try:
            yield Workflow.of(Shape(new_stages, loop), workflow.values), ops
        except InvalidWorkflow:  # a loop left on a stage that no longer asks
            continue
    if len(workflow.values) > 2:
        yield Workflow.of(shape, workflow.values[:-1]), ops


def _reshaped(workflow) -> list:
    """Workflows of another shape that may let fewer operations show the same thing: each gate
    one task later, one task in front of every gate, and the small shapes explore uses.  None
    for a shaped workflow, whose operations name its labels."""
    if workflow.shape is not None:
        return []
    shapes = []
    for gate in sorted(workflow.gates):
        if gate < workflow.n and gate + 1 not in workflow.gates:
            shapes.append((workflow.n, (workflow.gates - {gate}) | {gate + 1}))
    shapes.append((workflow.n + 1, {g + 1 for g in workflow.gates}))
    shapes += [(w.n, w.gates) for w in MINIMA_WORKFLOWS]
    out = []
    for n, gates in dict.fromkeys((n, frozenset(g)) for n, g in shapes):
        if (n, gates) != (workflow.n, workflow.gates):
            out.append(Workflow(n, gates, workflow.values))
    return out


def reshape_workflow(workflow, ops) -> Iterator[Candidate]:
    """Fewer operations on a workflow of another shape (a gate that comes after a completed
    task lets a single resume show what otherwise takes a second run): every shape in
    ``_reshaped`` with each block dropped.  Costly, so it runs after the cheap passes."""
    for shape in _reshaped(workflow):
        for _, fewer in drop_blocks(workflow, ops):
            yield shape, fewer


EXPOSURE_DEPTH = 3  # the longest exposure ``known_exposures`` proposes (explore's default depth)
EXPOSURES_PER_LENGTH = 24  # candidates of one length, the simplest first: each is a target run


_EXPOSURES: dict = {}  # (workflow, category, length, repr(caps)) -> exposures: pure, so cached


def exposures(workflow: Workflow, category: str, length: int, caps=None) -> tuple:
    """Traces of exactly ``length`` operations on ``workflow`` after which the ``category``
    mutant's model diverges from the reference with that category: explore's search, keeping
    every divergent last step from every world pair reached (one path per pair), not only the
    first.  ``caps`` narrows the operations to what a variant can express (``expressible``)."""
    key = (workflow, category, length, repr(caps))
    if key not in _EXPOSURES:
        _EXPOSURES[key] = _exposures(workflow, category, length,
                                     expressible(caps) if caps is not None else None)
    return _EXPOSURES[key]


def _exposures(workflow, category, length, admit) -> tuple:
    reference, target = Model(workflow), Model(workflow, category)
    layer: dict = {(World(), World()): ()}
    seen = set(layer)
    for depth in range(1, length + 1):
        nxt: dict = {}
        found = []
        for (ref_world, target_world), path in layer.items():
            for op in candidate_ops(reference, ref_world, admit=admit):
                try:
                    observed, target_after = target.step(target_world, op)[0]
                except InvalidOperation:
                    continue
                allowed = reference.step(ref_world, op)
                divergence = classify(reference, ref_world, op, [o for o, _ in allowed],
                                      observed)
                if divergence is not None:
                    if depth == length and divergence.category == category:
                        found.append(path + (op,))
                    continue  # a trace ends at its first divergence
                if depth < length:
                    pair = (next(w for o, w in allowed if o.same_as(observed)), target_after)
                    if pair not in seen:
                        seen.add(pair)
                        nxt[pair] = path + (op,)
        layer = nxt
    return tuple(found)


def known_exposures(category: str, caps, timed: bool) -> Callable:
    """The pass that tries the category's own short exposures on the target: what explore finds
    shows the category on the mutant's model in fewer operations than the trace may have, by
    a route no dropping or merging reaches (a BadOutput moved from a resume to the start of a
    gateless workflow, a race on the first run instead of on a fork).  A candidate is kept, as
    every other, only when the target diverges with the same category, property and verdict.

    Free races become forced where the store can force them; otherwise they are proposed only
    for a timing-dependent finding (judged by rate), never judged once.
    """
    def fixed(ops):
        if not any(isinstance(op, Race) and not op.forced for op in ops):
            return ops
        if caps.forced_race:
            return tuple(replace(op, forced=True) if isinstance(op, Race) else op for op in ops)
        return ops if timed else None

    def known_exposures(workflow, ops) -> Iterator[Candidate]:
        shapes = [workflow] + [Workflow(w.n, w.gates, workflow.values) for w in MINIMA_WORKFLOWS]
        # The exposure search walks chains: a shape's state space is too wide to search here.
        shapes = [w for w in dict.fromkeys(shapes) if w.shape is None]
        for length in range(1, min(len(ops) - 1, EXPOSURE_DEPTH) + 1):
            proposed = []
            for shape in shapes:
                for found in exposures(shape, category, length, caps):
                    found = fixed(found)
                    if found is not None:
                        proposed.append((shape, found))
            proposed.sort(key=lambda c: size(*c))
            yield from proposed[:EXPOSURES_PER_LENGTH]

    return known_exposures


PASSES: tuple = (drop_thread, drop_idle, drop_blocks, merge_threads, fold_into_fork,
                 simplify_ops, shrink_workflow, simplify_shape, reshape_workflow, rename_threads)


# -- the driver ----------------------------------------------------------------------------------


@dataclass
class Minimized:
    """What ``minimize`` did: the simplest trace judged, and what it cost."""

    trace: Trace
    before: int  # operations in the trace it started from
    judged: int = 0  # candidates run on the target (each at most once)
    cached: int = 0  # candidates answered from the cache
    rejected: int = 0  # candidates the oracle does not admit (never run)
    errors: list = field(default_factory=list)  # engine errors while judging a candidate
    passes: dict = field(default_factory=dict)  # pass name -> candidates it got accepted
    stopped: str = "fixpoint"  # or "deadline"
    seconds: float = 0.0

    @property
    def after(self) -> int:
        return len(self.trace.operations)


def minimize(trace: Trace, judge: Callable[[Trace], Diverged | None], *,
             deadline: float | None = None, rate: Rate | None = None,
             passes=PASSES, caps=None) -> Minimized:
    """Minimize ``trace`` (which has a ``finding``) on the target ``judge`` runs.

    ``rate``: the measured rate of a timing-dependent finding; when it is ``None`` and the trace
    is timing-dependent (``timing_dependent``), the original is measured first (``TRIALS`` runs).
    ``caps``: the target variant's ``Capabilities``; given, a candidate it cannot express
    (``expressible``) is never run, and the ``known_exposures`` pass runs
    after ``drop_blocks``: the category's own short exposures, restricted to the operations the
    variant can express and the original trace uses (``mechanism_caps``), so that a finding is
    never traded for another defect of the same category.
    """
    started = time.monotonic()
    goal = (trace.finding.category, trace.finding.property or CATEGORY_INFO[
        trace.finding.category].breaks, trace.finding.verdict)
    result = Minimized(trace, len(trace.operations))
    timed = rate is not None or timing_dependent(trace)
    if timed and rate is None:
        rate = measure(judge, trace, goal)
        if rate.k == 0:  # it does not come up at all now: nothing to compare candidates with
            result.stopped = "not reproduced"
            result.seconds = round(time.monotonic() - started, 2)
            return result
    cache: dict = {key_of(trace.workflow, trace.operations): "original"}
    express = expressible(caps) if caps is not None else None
    if caps is not None and goal[0] in MUTANTS and drop_blocks in passes:
        at = passes.index(drop_blocks) + 1
        passes = passes[:at] + (known_exposures(
            goal[0], mechanism_caps(caps, trace.operations), timed),) + passes[at:]

    def attempt(workflow, ops) -> Diverged | None:
        key = key_of(workflow, ops)
        if key in cache:
            result.cached += 1
            return None if cache[key] == "original" else cache[key]
        # A candidate the variant cannot express (a race made forced on a store that cannot
        # hold its racers' reads) would run as something else than the trace says.
        if not admissible(workflow, ops) or (express is not None and not all(map(express, ops))):
            result.rejected += 1
            cache[key] = None
            return None
        candidate = trace.with_(workflow=workflow, operations=ops)
        result.judged += 1
        verdict = None
        try:
            if not timed:
                judged = judge(candidate)
                verdict = judged if judged is not None and judged.key == goal else None
            else:
                verdict = _by_rate(judge, candidate, goal, rate)
        except EngineError as exc:
            result.errors.append(str(exc).splitlines()[0])
        cache[key] = verdict
        return verdict

    best_workflow, best_ops = trace.workflow, tuple(trace.operations)
    best: Diverged | None = None
    changed = True
    while changed:
        changed = False
        for pass_ in passes:
            progress = True
            while progress:  # restart the pass on each success: its candidates changed
                progress = False
                current = size(best_workflow, best_ops)
                for workflow, ops in pass_(best_workflow, best_ops):
                    if deadline is not None and time.monotonic() >= deadline:
                        result.stopped = "deadline"
                        return _done(result, trace, best, started)
                    if not ops or size(workflow, ops) >= current:
                        continue
                    judged = attempt(workflow, ops)
                    if judged is None:
                        continue
                    best = judged
                    best_workflow, best_ops = judged.trace.workflow, judged.trace.operations
                    result.passes[pass_.__name__] = result.passes.get(pass_.__name__, 0) + 1
                    progress = changed = True
                    break
    return _done(result, trace, best, started)


def _by_rate(judge, candidate: Trace, goal: tuple, rate: Rate) -> Diverged | None:
    """The timing rule (module docstring): at least ``rate.needed(n)`` of ``n`` runs."""
    runs = max(rate.n, 1)
    needed = rate.needed(runs)
    hits, first = 0, None
    for done in range(runs):
        judged = judge(candidate)
        if judged is not None and judged.key == goal:
            hits += 1
            first = first or judged
        if hits >= needed:
            return first
        if hits + (runs - done - 1) < needed:
            return None
    return None


def _done(result: Minimized, original: Trace, best: Diverged | None, started: float):
    if best is not None:
        from .corpus import fingerprint

        found = best.trace
        entry = original.with_(workflow=found.workflow, operations=found.operations,
                               observations=found.observations, expected=found.expected,
                               finding=found.finding)
        result.trace = entry.with_(fingerprint=fingerprint(found.finding.category, entry))
    result.seconds = round(time.monotonic() - started, 2)
    return result
