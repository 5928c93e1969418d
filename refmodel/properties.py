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
    for i, step in enumerate(history):
        state = step.observed.state
        if state is None or _branch(step) in damaged[i]:
            continue
        if not state.is_valid(workflow):
            return i
        if step.observed.outcome in ("interrupted", "completed"):
            branch = _branch(step)
            for b, t, v in step.observed.effects:
                # Reflected: the task is done, and a gate's answer is the value it fired with.
                if b == branch and (t not in state.done or (v is not None and state.answer(t) != v)):
                    return i
    return None


def eo(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Effect exactly-once: per branch (with what it inherited), each e_t at most once."""
    counts: dict[str, Counter] = {}
    excused: set = set()
    for i, step in enumerate(history):
        branch = _branch(step)
        if isinstance(step.op, Fork) and branch not in counts:
            source = counts.get(step.op.thread, Counter())
            counts[branch] = Counter({t: c for t, c in source.items() if t < step.op.gate})
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
        if (op.gate, op.value) not in fired or (state and state.answer(op.gate) != op.value):
            return i
    return None


def cv(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Checkpoint validity: nothing invalid persisted; tampered or bad state refused loudly."""
    tampered: set = set()
    for i, step in enumerate(history):
        op = step.op
        if op.name == "tamper":
            tampered.add(op.thread)
            continue
        if op.thread in tampered and op.name != "query":
            if step.observed.outcome.replace("rejected", "").strip("|") or step.observed.effects:
                return i
        if getattr(op, "bad_output", None) is not None and step.observed.outcome in (
            "interrupted",
            "completed",
        ):
            if any(t == op.bad_output for _, t, _ in step.observed.effects):
                return i
        if step.observed.state is not None and not step.observed.state.is_valid(workflow):
            return i
    return None


def co(workflow: Workflow, history: list[Step], tamper_scope: str = "thread") -> int | None:
    """Consume-once: each pending interrupt is consumed once, sequentially and across processes,
    and through a stale handle (which may not even replace the answer it once gave)."""
    consumed: set = set()
    excused: set = set()
    answered: dict = {}  # (branch, gate) -> the answer its last readable state showed
    for i, step in enumerate(history):
        state, branch = step.observed.state, _branch(step)
        if isinstance(step.op, StaleResume) and state is not None:
            last = answered.get((branch, step.op.gate))
            if last is not None and state.answer(step.op.gate) not in (None, last):
                return i
        if state is not None:
            answered.update({(branch, t): v for t, v in state.answers})
        gates = [(b, t) for b, t, _ in step.observed.effects if t in workflow.gates]
        if isinstance(step.op, Race) and len(gates) > len(set(gates)):
            return i
        for key in gates:
            if key in consumed and key not in excused:
                return i
            consumed.add(key)
            excused.discard(key)
        excused |= _excused(step)
        if isinstance(step.op, Fork):  # a branch inherits the source's consumed gates before it
            for b, t in list(consumed):
                if b == step.op.thread and t < step.op.gate:
                    consumed.add((step.op.new_thread, t))
    return None


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
            if step.observed.outcome == "rejected":
                return i
        if step.observed.outcome == "crashed":
            needs.add(_branch(step))
        elif step.observed.outcome in ("interrupted", "completed"):
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
