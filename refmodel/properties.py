"""One predicate per property of docs/contract.md §4, over a recorded history.

These read only what was observed (and the ops that were issued), like Elle reads a history:
they are a second, model-free check on the same run, and they name the *property* a report cites.
Each returns the index of the first step that breaks the property, or ``None``.
FI is not a predicate over a history: it is read from an adapter's declaration (see the matrix).

A tamper damages what shares its bytes (docs/contract.md §3, "What a tamper reaches"):
``tamper_scope`` says how far (``"thread"``, ``"history"``, ``"lineage"``, ``"listing"``,
``"store"``).  On a damaged thread a refusal is correct and a silent continuation is a CV matter, so
FD, LV and PC do not judge steps on damaged threads.  ``"listing"`` reads as ``"lineage"`` here: a
branch it reached may refuse, so its steps are not judged; the classifier (``classify.py``) judges
what such a branch does besides refusing as on intact data.
"""

from __future__ import annotations

from collections import Counter

from .ops import LINEAGE_SCOPES, Fork, Race, Recover, StaleResume, Step, TwinRecover
from .workflow import Workflow


def _branch(step: Step) -> str:
    return step.op.new_thread if isinstance(step.op, Fork) else step.op.thread


def _refused(step: Step) -> bool:
    return step.observed.outcome == "rejected"


def _excused(step: Step) -> set:
    """Tasks whose effect this step left in flight: a later re-fire of them is allowed."""
    crash = getattr(step.op, "crash", None)
    out = set()
    if step.observed.outcome == "crashed" and crash is not None and crash.phase == "in_flight":
        out.add((_branch(step), crash.task))
    bad = getattr(step.op, "bad_output", None)
    if step.observed.outcome == "rejected" and bad is not None:
        out.add((_branch(step), bad))
    return out


def damaged_before(history: list[Step], tamper_scope: str = "thread") -> list[set]:
    """Per step, the threads a tamper had reached before it (forks inherit the damage of their
    source under a lineage or store reach; a store tamper reaches runs started after it too)."""
    damaged, roots, everything, out = set(), {}, False, []
    for step in history:
        op = step.op
        out.append(damaged | ({_branch(step)} if everything else set()))
        if isinstance(op, Fork):
            roots[op.new_thread] = roots.get(op.thread, op.thread)
            if op.thread in damaged and tamper_scope != "thread":
                damaged.add(op.new_thread)
        roots.setdefault(op.thread, op.thread)
        if everything:
            damaged.add(_branch(step))
        if op.name == "tamper":
            damaged.add(op.thread)
            if tamper_scope in LINEAGE_SCOPES:
                root = roots.get(op.thread, op.thread)
                damaged |= {t for t, r in roots.items() if r == root}
            elif tamper_scope == "store":
                damaged |= set(roots)
                everything = True
    return out


def pc(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Prefix consistency: every readable state is a valid prefix, and reflects what fired."""
    damaged = damaged_before(history, tamper_scope)
    done: dict = {}  # branch -> task instances a readable state of it showed done (a shape)
    for i, step in enumerate(history):
        state = step.observed.state
        # A tamper's own read shows the damage it made: the framework's reading of it is CV's.
        if state is None or step.op.name == "tamper" or _branch(step) in damaged[i]:
            continue
        if not state.is_valid(workflow):
            return i
        if workflow.shape is not None:
            # A branch's durable prefix only grows: a finished sibling never drops out of it
            # (docs/contract.md §7, Stages: a sibling's write is never lost).
            if not done.get(_branch(step), set()) <= set(state.done):
                return i
            done[_branch(step)] = set(state.done)
        if step.observed.outcome in ("interrupted", "completed"):
            branch = _branch(step)
            for b, t, v in step.observed.effects:
                if b == branch and not _reflected(workflow, state, t, v):
                    return i
    return None


def _reflected(workflow: Workflow, state, task, value) -> bool:
    """Does ``state`` reflect the effect ``(task, value)``?  The task is done, and a gate's answer
    is the value it fired with; in a shaped workflow a task's answers joined in question order,
    and a pre-effect is reflected by its task's first question being asked (or the task done)."""
    if workflow.shape is None:
        return task in state.done and (value is None or state.answer(task) == value)
    if not workflow.shape.knows(task):
        return False
    if task.endswith(".pre"):
        label = task[: -len(".pre")]
        first = workflow.shape.questions(label)[0]
        return (label in state.done or state.answer(first) is not None
                or first in (state.pending or ()))
    answers = [state.answer(q) for q in workflow.shape.questions(task)]
    return task in state.done and (value is None or "/".join(map(str, answers)) == value)


def _before(workflow: Workflow, task, gate) -> bool:
    """Did ``task``'s effect fire before the checkpoint at which ``gate`` was pending?  In a
    shaped workflow: a task instance of an earlier stage or visit, or the gate's own pre-effect
    (a sibling finished before the checkpoint is not counted: the fork starts with it done)."""
    if workflow.shape is None:
        return task < gate
    if not (workflow.shape.knows(task) and workflow.shape.knows(gate)):
        return False
    mine, asked = workflow.shape.order(task), workflow.shape.order(gate)
    if str(task).endswith(".pre"):
        return mine[:3] == asked[:3] or mine[:2] < asked[:2]
    return mine[:2] < asked[:2]


def eo(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Effect exactly-once: per branch (with what it inherited), each e_t at most once."""
    counts: dict[str, Counter] = {}
    excused: set = set()
    for i, step in enumerate(history):
        branch = _branch(step)
        # A refused fork made no branch: the name may be forked again, from another gate.
        if isinstance(step.op, Fork) and branch not in counts and not _refused(step):
            source = counts.get(step.op.thread, Counter())
            counts[branch] = Counter({t: c for t, c in source.items()
                                      if _before(workflow, t, step.op.gate)})
        for b, t, _ in step.observed.effects:
            if (b, t) in excused:  # the re-fire of an effect left in flight is allowed, once
                excused.discard((b, t))
                continue
            tally = counts.setdefault(b, Counter())
            tally[t] += 1
            if tally[t] > 1:
                return i
        excused |= _excused(step)
    return None


def fd(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Fork determinism: a fork with v answers its gate with v and fires e_gate(v)."""
    damaged = damaged_before(history, tamper_scope)
    for i, step in enumerate(history):
        op = step.op
        if not isinstance(op, Fork) or step.observed.outcome not in ("interrupted", "completed"):
            continue
        if op.thread in damaged[i]:
            continue  # a fork of a damaged thread that ran on is CV's (InvalidPersist)
        fired = {(t, v) for b, t, v in step.observed.effects if b == op.new_thread}
        state = step.observed.state
        if workflow.shape is not None:
            # Each question the fork names takes its value; a task fires once all of its are
            # answered, so the effect is no per-question evidence.
            wanted = {**dict(op.answers), op.gate: op.value}
            if state and any(state.answer(q) != v for q, v in wanted.items()):
                return i
            continue
        if (op.gate, op.value) not in fired or (state and state.answer(op.gate) != op.value):
            return i
    return None


def cv(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Checkpoint validity: nothing invalid persisted; tampered or bad state refused loudly."""
    damaged = damaged_before(history, tamper_scope)
    tampered: dict = {}  # thread -> the gate its tampered (latest) checkpoint had pending
    pending: dict = {}  # branch -> the gate its last readable state had pending
    for i, step in enumerate(history):
        op = step.op
        if op.name == "tamper":
            tampered[op.thread] = pending.get(op.thread)
            continue
        if step.observed.state is not None:
            pending[_branch(step)] = step.observed.state.pending
        # A fork addresses the checkpoint where its gate was asked: the tampered one only when
        # that gate was the one pending when the tamper came; an older checkpoint may be forked
        # (§3, "What a tamper reaches": any run on damaged bytes still counts below, through the
        # state it persists).
        older = isinstance(op, Fork) and op.thread in tampered and tampered[op.thread] != op.gate
        if op.thread in tampered and op.name != "query" and not older:
            if step.observed.outcome.replace("rejected", "").strip("|") or step.observed.effects:
                return i
        if getattr(op, "bad_output", None) is not None and step.observed.outcome in (
            "interrupted",
            "completed",
        ):
            if any(t == op.bad_output for _, t, _ in step.observed.effects):
                return i
        # What a tamper left is read back as it is (a read uses nothing): only a state no
        # tamper reached must fit the schema.
        intact = op.thread not in tampered and _branch(step) not in damaged[i]
        if intact and step.observed.state is not None and not step.observed.state.is_valid(workflow):
            return i
    return None


def co(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Consume-once: each pending interrupt is consumed once, sequentially and across processes,
    and through a stale handle (which may not even replace the answer it once gave)."""
    consumed: set = set()
    excused: set = set()
    answered: dict = {}  # (branch, gate) -> the answer its last readable state showed
    named: set = set()  # (branch, question) the caller answered, in a shaped workflow
    asked: dict = {}  # (branch, question) -> its answer in the last readable state, or None
    for i, step in enumerate(history):
        state, branch = step.observed.state, _branch(step)
        if workflow.shape is not None and _question_consumed_twice(step, branch, asked, named):
            return i
        if isinstance(step.op, StaleResume) and state is not None:
            last = answered.get((branch, step.op.gate))
            if last is not None and state.answer(step.op.gate) not in (None, last):
                return i
        if state is not None:
            answered.update({(branch, t): v for t, v in state.answers})
        gates = [(b, t) for b, t, _ in step.observed.effects if workflow.gated(t)]
        if isinstance(step.op, Race) and len(gates) > len(set(gates)):
            return i
        for key in gates:
            if key in consumed and key not in excused:
                return i
            consumed.add(key)
            excused.discard(key)
        excused |= _excused(step)
        if isinstance(step.op, Fork) and not _refused(step):
            # A branch inherits the source's consumed gates before its own (a refused fork made
            # no branch).
            for b, t in list(consumed):
                if b == step.op.thread and _before(workflow, t, step.op.gate):
                    consumed.add((step.op.new_thread, t))
    return None


def _question_consumed_twice(step: Step, branch: str, asked: dict, named: set) -> bool:
    """docs/contract.md §7, per interrupt id: does this step's readable state show a question
    answered that no caller named (an answer handed to another question or loop visit, or a
    plain resume with several pending answering one), or an answered question asked again?
    ``named`` grows with the questions each op names: its map, its gate, a racer's question, or
    the one question pending before a plain resume (the previous state read on the branch).
    ``asked`` holds, per branch, each question's answer in the last state read (``None``:
    pending); a branch starts from its first state, its source's later answers not its own."""
    op, state = step.op, step.observed.state
    if isinstance(op, Fork):
        named |= {(op.new_thread, q) for b, q in set(named) if b == op.thread}
    names = {q for q, _ in getattr(op, "answers", ())} | set(getattr(op, "gates", ()))
    if getattr(op, "gate", None) is not None:
        names.add(op.gate)
    pending = [q for (b, q), v in asked.items() if b == branch and v is None]
    if op.name in ("resume", "race") and not names and len(pending) == 1:
        names.add(pending[0])
    named |= {(branch, q) for q in names}
    if state is None or not isinstance(state.pending, tuple | type(None)):
        return False
    given = {q for q, _ in state.answers}
    if any((branch, q) not in named for q in given):
        return True
    if any(q in given or asked.get((branch, q)) for q in state.pending or ()):
        return True
    for key in [k for k in asked if k[0] == branch and asked[k] is None]:
        del asked[key]
    asked.update({(branch, q): None for q in state.pending or ()})
    asked.update({(branch, q): v for q, v in state.answers})
    return False


def rd(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Recovery determinism: two copies of one durable state recover alike."""
    for i, step in enumerate(history):
        twin = step.observed.twin
        if isinstance(step.op, TwinRecover) and twin is not None:
            o = step.observed
            if (o.outcome, o.effects, o.state) != (twin.outcome, twin.effects, twin.state):
                return i
    return None


def lv(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Liveness: recovering a crashed run is neither refused nor left hanging."""
    needs: set = set()
    damaged = damaged_before(history, tamper_scope)
    for i, step in enumerate(history):
        if _branch(step) in damaged[i]:
            continue  # refusing damaged data is correct; running on it is CV's
        if step.observed.outcome == "stuck":
            return i
        if isinstance(step.op, Recover | TwinRecover) and step.op.thread in needs:
            # A recovery whose task returned a value outside the schema is refused for that
            # (CV's BadOutput), not for want of liveness: the run still needs recovering.
            bad = getattr(step.op, "bad_output", None) is not None
            if step.observed.outcome == "rejected" and not bad:
                return i
        # Only a run its store reads as unfinished needs recovery.  A crash after the last task
        # committed leaves a completed run, and one at a gate may leave the gate pending (§3's
        # label freedom): there recovery has nothing to run and may be refused (§3, "nothing to
        # do"), and an answer, not a recovery, moves a pending gate on.
        settled = getattr(step.observed.state, "status", None) in ("interrupted", "completed")
        if step.observed.outcome == "crashed" and not settled:
            needs.add(_branch(step))
        elif step.observed.outcome in ("interrupted", "completed") or settled:
            needs.discard(_branch(step))
    return None


PROPERTIES = {"PC": pc, "EO": eo, "FD": fd, "CV": cv, "CO": co, "RD": rd, "LV": lv}


def broken(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> dict[str, int]:
    """Every property some step breaks, with the index of the first step breaking it."""
    out = {}
    for name, predicate in PROPERTIES.items():
        index = predicate(workflow, history, tamper_scope)
        if index is not None:
            out[name] = index
    return out
