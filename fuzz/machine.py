"""The differential state machine: random operation sequences on a target and on the refmodel.

``machine_for(session)`` builds a Hypothesis ``RuleBasedStateMachine`` bound to one prepared
target variant.  Each example draws a workflow (1-4 tasks, 0-2 gates, 2-3 values), then rules
apply operations the variant can express, each with a crash point drawn for it.  After every
operation the target's observation is checked against the set the reference allows
(``refmodel.classify``); the first divergence raises the failure class of its category, from one
line (``_check``), and Hypothesis shrinks it to a minimal trace.

Preconditions read the reference world, never the target's: generation is driven by the oracle,
so a shrunk trace is always one the reference gives a meaning to.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from adapters.protocol import Capabilities
from refmodel import (
    CrashAt,
    Fork,
    Model,
    Query,
    Race,
    Recover,
    Resume,
    Start,
    Tamper,
    TwinRecover,
    Workflow,
    World,
    classify,
)

from .failures import FAILURES
from .runner import Session

VALUES = ("a", "b", "c")
MAX_THREADS = 4


def _weighted(caps: Capabilities, axis: str, options) -> st.SearchStrategy:
    """``sampled_from(options)``, each repeated by its ``caps.weights["<axis>:<option>"]``
    (default 1): the order is kept, so shrinking still moves toward the first option."""
    return st.sampled_from([o for o in sorted(options)
                            for _ in range(max(1, round(caps.weights.get(f"{axis}:{o}", 1))))])


def machine_for(session: Session, *, observer=None, suppress=frozenset()
                ) -> type[RuleBasedStateMachine]:
    """A state machine class for ``session``'s variant (its capabilities decide the rules).

    ``observer(event, **data)`` is called for progress display: ``"example"`` when one starts,
    ``"op"`` after each operation.  ``suppress`` holds categories already found: an example
    that diverges with one of them is discarded (``reject``), so that a campaign goes on to find
    the others instead of re-finding the first (one frequent category masks the rest).
    """
    caps: Capabilities = session.adapter.capabilities(session.variant)
    if session.settings.mode == "inprocess":  # no worker to kill, no processes to race
        caps = replace(caps, crash_kinds=caps.crash_kinds - {"sigkill"},
                       operations=caps.operations - {"race"})
    deviations = list(session.adapter.deviations(session.variant))
    notify = observer or (lambda event, **data: None)

    def can(op: str) -> bool:
        return op in caps.operations

    class DifferentialMachine(RuleBasedStateMachine):
        @initialize(data=st.data())
        def setup(self, data):
            n = data.draw(st.integers(1, 4), label="n")
            gates = data.draw(st.sets(st.integers(1, n), max_size=min(2, n)), label="gates")
            k = data.draw(st.integers(2, 3), label="values")
            self.workflow = Workflow(n, frozenset(gates), VALUES[:k])
            self.model = Model(self.workflow)
            self.world = World()
            self.history = []
            self.runner = session.case(self.workflow)
            notify("example")

        def teardown(self):
            runner = getattr(self, "runner", None)
            if runner is not None:
                runner.close()

        # -- drawing --------------------------------------------------------------------------
        def _threads(self, data, keep):
            names = [n for n, t in self.world.threads if keep(t)]
            return data.draw(st.sampled_from(names), label="thread")

        def _crash(self, data):
            n = self.workflow.n
            crash = st.builds(
                CrashAt,
                st.integers(1, n),
                _weighted(caps, "phase", caps.crash_phases),
                _weighted(caps, "kind", caps.crash_kinds),
            )
            options = st.none() | crash if caps.crash_kinds and caps.crash_phases else st.none()
            point = data.draw(options, label="crash")
            bad = None
            if caps.bad_output and point is None:
                # About one executing op in four carries BadOutput; 0 (none) is the shrink target.
                drawn = data.draw(st.integers(0, 3 * n), label="bad_output")
                bad = drawn if 1 <= drawn <= n else None
            return {"crash": point, "bad_output": bad}

        def _status(self, thread):
            return thread.durable.view(self.workflow).status

        def _any(self, keep) -> bool:
            return any(keep(t) for _, t in self.world.threads)

        # -- rules ----------------------------------------------------------------------------
        @precondition(lambda self: can("start") and len(self.world.threads) < 2)
        @rule(data=st.data())
        def start(self, data):
            name = f"t{sum(1 for n in self.world.names() if n.startswith('t'))}"
            self._check(Start(name, **self._crash(data)))

        @precondition(lambda self: can("resume") and self._any(
            lambda t: self._status(t) in ("interrupted", "completed")))
        @rule(data=st.data())
        def resume(self, data):
            name = self._threads(data, lambda t: self._status(t) in ("interrupted", "completed"))
            value = data.draw(st.sampled_from(self.workflow.values), label="value")
            self._check(Resume(name, value=value, **self._crash(data)))

        @precondition(lambda self: can("recover") and self._any(lambda t: True))
        @rule(data=st.data())
        def recover(self, data):
            name = self._threads(data, lambda t: True)
            self._check(Recover(name, **self._crash(data)))

        @precondition(lambda self: can("fork") and len(self.world.threads) < MAX_THREADS
                      and self._any(lambda t: t.gate_checkpoints))
        @rule(data=st.data())
        def fork(self, data):
            name = self._threads(data, lambda t: t.gate_checkpoints)
            gates = [g for g, _ in self.world.get(name).gate_checkpoints]
            gate = data.draw(st.sampled_from(gates), label="gate")
            value = data.draw(st.sampled_from(self.workflow.values), label="value")
            new = f"f{len(self.world.threads)}"
            self._check(Fork(name, gate=gate, value=value, new_thread=new, **self._crash(data)))

        @precondition(lambda self: can("query") and self._any(lambda t: True))
        @rule(data=st.data())
        def query(self, data):
            self._check(Query(self._threads(data, lambda t: True)))

        @precondition(lambda self: can("tamper") and caps.tamper_hows and self._any(
            lambda t: not t.tampered and self._status(t) != "new"))
        @rule(data=st.data())
        def tamper(self, data):
            name = self._threads(data, lambda t: not t.tampered and self._status(t) != "new")
            how = data.draw(st.sampled_from(sorted(caps.tamper_hows)), label="how")
            self._check(Tamper(name, how=how))

        @precondition(lambda self: can("race") and self._any(
            lambda t: self._status(t) == "interrupted"))
        @rule(data=st.data())
        def race(self, data):
            name = self._threads(data, lambda t: self._status(t) == "interrupted")
            k = data.draw(st.integers(2, max(2, caps.max_racers)), label="racers")
            # Every racer answers the same value: which racer wins is timing, and with one value
            # the winner cannot change what follows, so the example replays alike when shrunk.
            value = data.draw(st.sampled_from(self.workflow.values), label="value")
            # Shrinking moves a boolean toward False: drawing "free" makes shrunk traces prefer
            # the forced schedule, whose outcome does not depend on timing.
            forced = caps.forced_race and not data.draw(st.booleans(), label="free")
            self._check(Race(name, values=(value,) * k, forced=forced))

        @precondition(lambda self: can("twin_recover") and self._any(lambda t: t.needs_recovery))
        @rule(data=st.data())
        def twin_recover(self, data):
            self._check(TwinRecover(self._threads(data, lambda t: t.needs_recovery)))

        # -- the comparison -------------------------------------------------------------------
        def _check(self, op):
            allowed = self.model.step(self.world, op)
            observed = self.runner.apply(op)
            expected = [o for o, _ in allowed]
            self.history.append((op, observed, tuple(expected)))
            notify("op", op=op)
            divergence = classify(self.model, self.world, op, expected, observed)
            if divergence is not None and divergence.category in suppress:
                reject()
            if divergence is not None:
                # How the thread died: in this very op, or before it (a recovery diverging).
                thread = self.world.get(op.thread)
                crash = getattr(op, "crash", None)
                if observed.outcome == "crashed" and crash is not None:
                    crash_kind = crash.kind
                else:
                    crash_kind = thread.crash_kind if thread is not None else None
                deviation = next((d for d in deviations if d.covers(
                    divergence.category, op.name, crash_kind)), None)
                raise FAILURES[divergence.category](
                    f"{divergence.category} at step {len(self.history)} ({op.name}): "
                    f"{divergence.detail}",
                    history=self.history,
                    divergence=divergence,
                    verdict="D" if deviation else "✗",
                    citation=deviation.citation if deviation else "",
                    workflow=self.workflow,
                )
            self.world = next(w for o, w in allowed if o.same_as(observed))
            if isinstance(op, Tamper) and caps.tamper_scope == "store":
                # The whole store was damaged: every other thread with a checkpoint is too.
                for name, thread in self.world.threads:
                    if not thread.tampered and self._status(thread) != "new":
                        self.world = self.model.step(self.world, Tamper(name, how=op.how))[0][1]

    DifferentialMachine.__name__ = f"Differential_{session.adapter.name}_{session.variant.name}"
    return DifferentialMachine
