"""The differential state machine: random operation sequences on a target and on the refmodel.

``machine_for(session)`` builds a Hypothesis ``RuleBasedStateMachine`` bound to one prepared
target variant.  Each example draws a workflow (1-4 tasks, 0-2 gates, 2-3 values), then rules
apply operations the variant can express, each with a crash point drawn for it.  After every
operation the target's observation is judged by ``judge.judge_step`` (the comparison step shared
with ``replay`` and the minimizer).  The first ✗ raises the failure class of its category (from
``_fail``), and Hypothesis shrinks it to a minimal trace.  A documented deviation (D) does not
end the example: the machine goes on from the target's branch; an example with D's and no ✗
raises the first D at teardown, so it still lands in the corpus with verdict D.

Preconditions read the reference world, never the target's: generation is driven by the oracle,
so a shrunk trace is always one the reference gives a meaning to.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from adapters.protocol import Capabilities
from refmodel import (
    SHAPE_FEATURES,
    CrashAt,
    Fork,
    Loop,
    Query,
    Race,
    Recover,
    Resume,
    Shape,
    StaleResume,
    Start,
    Task,
    Tamper,
    TwinRecover,
    Workflow,
    World,
    forge_parts,
    part_kind,
)

from .failures import FAILURES
from .judge import judge_step, model_for, settle
from .runner import Session

VALUES = ("a", "b", "c")
MAX_THREADS = 4


def _weighted(weights: Mapping[str, float], axis: str, options) -> st.SearchStrategy:
    """``sampled_from(options)``, each repeated by its ``weights["<axis>:<option>"]`` (default
    1): the order is kept, so shrinking still moves toward the first option."""
    return st.sampled_from([o for o in sorted(options)
                            for _ in range(max(1, round(weights.get(f"{axis}:{o}", 1))))])


def _op_weight(weights: Mapping[str, float], op: str) -> int:
    """How many rules draw ``op``: its ``weights["op:<op>"]`` (default 1)."""
    return max(1, round(weights.get(f"op:{op}", 1)))


def _rule_copy(body, name: str, ready):
    """A rule named ``name`` that runs ``body(self, data)`` when ``ready(self)``.

    Hypothesis draws uniformly among the enabled rules, telling them apart by function name, so
    an operation drawn by k rules of distinct names is drawn k times as often (``op:`` weights).
    """
    def again(self, data):
        body(self, data)

    again.__name__ = again.__qualname__ = name
    return precondition(ready)(rule(data=st.data())(again))


@st.composite
def shaped_workflows(draw, features=SHAPE_FEATURES) -> Workflow:
    """A small shape of docs/contract.md §7: up to 2 stages of up to 2 tasks, each asking up to
    2 questions, an optional pre-effect, an optional loop of 2 visits; of ``features`` only
    (a missing one is not drawn at all, so a target with every feature draws as before).  Every
    draw shrinks toward the simplest: one stage, one task, no question, no pre-effect, no
    loop."""
    stages = []
    for _ in range(draw(st.integers(1, 2), label="stages")):
        tasks = []
        width = draw(st.integers(1, 2), label="tasks") if "parallel" in features else 1
        for _ in range(width):
            questions = draw(st.integers(0, 2 if "questions" in features else 1),
                             label="questions")
            pre = questions > 0 and "pre_effect" in features and draw(st.booleans(),
                                                                      label="pre_effect")
            tasks.append(Task(questions, pre))
        stages.append(tuple(tasks))
    values = VALUES[:draw(st.integers(2, 3), label="values")]
    asking = [i for i, stage in enumerate(stages, 1) if any(t.questions for t in stage)]
    loop = None
    if asking and "loop" in features and draw(st.booleans(), label="loop"):
        loop = Loop(draw(st.sampled_from(asking), label="loop_stage"), 2, values[0])
    return Workflow.of(Shape(tuple(stages), loop), values)


class DifferentialMachine(RuleBasedStateMachine):
    """The rules, drawing and comparison of one campaign; ``machine_for`` binds a subclass to a
    session (the class attributes below), since Hypothesis instantiates the class itself."""

    session: Session
    caps: Capabilities
    weights: Mapping[str, float] = {}
    deviations: list = []
    suppress: frozenset = frozenset()

    @staticmethod
    def notify(event, **data):
        pass

    def can(self, op: str) -> bool:
        return self.caps.expresses(op)

    @initialize(data=st.data())
    def setup(self, data):
        # Shrinking moves a boolean toward False: a finding on a shape shrinks to a linear
        # chain whenever one shows it (docs/contract.md §7).  An adapter without shapes
        # draws nothing more, so its campaigns draw exactly what they drew before.
        if self.caps.shapes and data.draw(st.booleans(), label="shaped"):
            self.workflow = data.draw(shaped_workflows(self.caps.shapes), label="shape")
        else:
            n = data.draw(st.integers(1, 4), label="n")
            gates = data.draw(st.sets(st.integers(1, n), max_size=min(2, n)), label="gates")
            k = data.draw(st.integers(2, 3), label="values")
            self.workflow = Workflow(n, frozenset(gates), VALUES[:k])
        self.model = model_for(self.workflow, self.caps)
        self.world = World()
        self.history = []
        self.deviations_seen = []  # [(step, Judgement)] of the D's met, in order
        self.excusing = None  # the first D met (suppressed or not): its consequences owe a D
        self.failed = False
        self.runner = self.session.case(self.workflow)
        self.notify("example", workflow=self.workflow)

    def teardown(self):
        runner = getattr(self, "runner", None)
        if runner is not None:
            runner.close()
        seen = getattr(self, "deviations_seen", None)
        if seen and not self.failed:
            # Only documented deviations in this example: it is a D finding, the first
            # consequence (an effect fired again after a D: what the weakening costs) if
            # there is one, else the first D.
            step, judgement = next(((i, j) for i, j in seen
                                    if j.divergence.rule == "consequence"), seen[0])
            self._fail(step, self.history[step - 1][0], judgement)

    # -- drawing --------------------------------------------------------------------------
    def _threads(self, data, keep):
        names = [n for n, t in self.world.threads if keep(t)]
        return data.draw(st.sampled_from(names), label="thread")

    def _tasks(self) -> st.SearchStrategy:
        """The tasks a crash point or a bad output names: numbers on a chain, task
        instances (``"3"``, ``"3#2"``) on a shape."""
        shape = self.workflow.shape
        if shape is None:
            return st.integers(1, self.workflow.n)
        return st.sampled_from(shape.instances())

    def _crash(self, data):
        n = self.workflow.n
        crash = st.builds(
            CrashAt,
            self._tasks(),
            _weighted(self.weights, "phase", self.caps.crash_phases),
            _weighted(self.weights, "kind", self.caps.crash_kinds),
        )
        crashes = self.caps.crash_kinds and self.caps.crash_phases
        options = st.none() | crash if crashes else st.none()
        point = data.draw(options, label="crash")
        bad = None
        if self.caps.bad_output and point is None:
            # About one executing op in four carries BadOutput; 0 (none) is the shrink target.
            drawn = data.draw(st.integers(0, 3 * n), label="bad_output")
            bad = drawn if 1 <= drawn <= n else None
            if bad is not None and self.workflow.shape is not None:
                bad = data.draw(self._tasks(), label="bad_task")
        return {"crash": point, "bad_output": bad}

    def _status(self, thread):
        return thread.durable.view(self.workflow).status

    def _any(self, keep) -> bool:
        return any(keep(t) for _, t in self.world.threads)

    # -- rules ----------------------------------------------------------------------------
    @precondition(lambda self: self.can("start") and len(self.world.threads) < 2)
    @rule(data=st.data())
    def start(self, data):
        name = f"t{sum(1 for n in self.world.names() if n.startswith('t'))}"
        self._check(Start(name, **self._crash(data)))

    @precondition(lambda self: self.can("resume") and self._any(
        lambda t: self._status(t) in ("interrupted", "completed")))
    @rule(data=st.data())
    def resume(self, data):
        name = self._threads(data, lambda t: self._status(t) in ("interrupted", "completed"))
        value = data.draw(st.sampled_from(self.workflow.values), label="value")
        pending = self.world.get(name).durable.pending if self.workflow.shape else None
        if pending and data.draw(st.booleans(), label="named"):
            # A map from pending question ids to values; the questions not named stay
            # pending (a plain resume with several pending is refused: also drawn).
            questions = data.draw(st.lists(st.sampled_from(pending), min_size=1,
                                           unique=True), label="questions")
            answers = [(q, data.draw(st.sampled_from(self.workflow.values), label="value"))
                       for q in questions]
            self._check(Resume(name, answers=answers, **self._crash(data)))
            return
        self._check(Resume(name, value=value, **self._crash(data)))

    @precondition(lambda self: self.can("recover") and self._any(lambda t: True))
    @rule(data=st.data())
    def recover(self, data):
        name = self._threads(data, lambda t: True)
        self._check(Recover(name, **self._crash(data)))

    @precondition(lambda self: self.can("fork") and len(self.world.threads) < MAX_THREADS
                  and self._any(lambda t: t.gate_checkpoints))
    @rule(data=st.data())
    def fork(self, data):
        name = self._threads(data, lambda t: t.gate_checkpoints)
        gates = [g for g, _ in self.world.get(name).gate_checkpoints]
        gate = data.draw(st.sampled_from(gates), label="gate")
        value = data.draw(st.sampled_from(self.workflow.values), label="value")
        new = f"f{len(self.world.threads)}"
        self._check(Fork(name, gate=gate, value=value, new_thread=new, **self._crash(data)))

    @precondition(lambda self: self.can("query") and self._any(lambda t: True))
    @rule(data=st.data())
    def query(self, data):
        self._check(Query(self._threads(data, lambda t: True)))

    @precondition(lambda self: self.can("tamper") and self.caps.tamper_hows and self._any(
        lambda t: not t.tampered and self._status(t) != "new"))
    @rule(data=st.data())
    def tamper(self, data):
        name = self._threads(data, lambda t: not t.tampered and self._status(t) != "new")
        hows = sorted(self.caps.tamper_hows)
        if self.workflow.shape is not None:  # the oracle forges chains only
            hows = [h for h in hows if h != "forged"] or hows
        how = data.draw(st.sampled_from(hows), label="how")
        self._check(Tamper(name, how=how, part=self._forge_part(data, name, how)))

    def _forge_part(self, data, name, how):
        """The stored part a ``forged`` tamper edits (``refmodel.forge_parts`` of the thread
        in the reference world), so that each part is forged on its own: a store that
        checks all but one part is caught only by an edit of that one."""
        if how != "forged" or not self.caps.forge_parts:
            return None
        parts = [p for p in forge_parts(self.workflow, self.world.get(name).durable)
                 if part_kind(p) in self.caps.forge_parts]
        return data.draw(st.sampled_from(parts), label="part") if parts else None

    def _raceable(self, thread) -> bool:
        # Racers on different questions of one thread (``Race.gates``) are not drawn: the
        # reference target settles a race by one claim per interrupt write, not per question.
        pending = thread.durable.pending
        return self._status(thread) == "interrupted" and (
            not isinstance(pending, tuple) or len(pending) == 1)

    @precondition(lambda self: self.can("race") and self._any(self._raceable))
    @rule(data=st.data())
    def race(self, data):
        name = self._threads(data, self._raceable)
        k = data.draw(st.integers(2, max(2, self.caps.max_racers)), label="racers")
        # Every racer answers the same value: which racer wins is timing, and with one value
        # the winner cannot change what follows, so the example replays alike when shrunk.
        value = data.draw(st.sampled_from(self.workflow.values), label="value")
        # Shrinking moves a boolean toward False: drawing "free" makes shrunk traces prefer
        # the forced schedule, whose outcome does not depend on timing.
        forced = self.caps.forced_race and not data.draw(st.booleans(), label="free")
        self._check(Race(name, values=(value,) * k, forced=forced))

    @precondition(lambda self: self.can("twin_recover") and self._any(lambda t: t.needs_recovery))
    @rule(data=st.data())
    def twin_recover(self, data):
        self._check(TwinRecover(self._threads(data, lambda t: t.needs_recovery)))

    def _stale_handles(self) -> list:
        """(thread, gate) of every handle a caller can hold after its gate was consumed."""
        return [(name, gate) for name, t in self.world.threads for gate, _ in t.gate_checkpoints
                if self.model.enabled(self.world, StaleResume(name, gate=gate,
                                                              value=self.workflow.values[0]))]

    def _draw_stale_resume(self, data):
        name, gate = data.draw(st.sampled_from(self._stale_handles()), label="handle")
        value = data.draw(st.sampled_from(self.workflow.values), label="value")
        self._check(StaleResume(name, gate=gate, value=value))

    # -- the comparison -------------------------------------------------------------------
    def _check(self, op):
        # Set until the step returns: teardown must not raise a D over an exception (an
        # engine error, a rejected example) that is already on its way out of a step.
        self.failed = True
        world = self.world
        observed = self.runner.apply(op)
        judgement = judge_step(self.model, world, op, observed, self.caps, self.deviations,
                               self.history)
        expected = list(judgement.allowed)
        self.history.append((op, observed, judgement.allowed))
        if judgement.verdict == "D" and self.excusing is None:
            self.excusing = judgement
        else:
            judgement = settle(self.workflow, op, self.history, judgement, self.excusing,
                               self.caps.tamper_scope)
        self.notify("op", op=op, observed=observed, world=world, allowed=expected)
        divergence = judgement.divergence
        if divergence is not None and divergence.category in self.suppress:
            if judgement.verdict == "✗":
                reject()
        elif judgement.verdict == "D":
            # A documented deviation does not end the search (docs/contract.md §5): record it,
            # go on from the target's branch; it is raised at the end if nothing worse follows.
            self.deviations_seen.append((len(self.history), judgement))
        elif judgement.verdict == "✗":
            self._fail(len(self.history), op, judgement)
        self.world = judgement.world
        self.failed = False

    def _fail(self, step, op, judgement):
        """Raise the failure of ``judgement``: the one place failures are raised.

        A ✗ and a D raise from two different lines, so Hypothesis, which tells failures
        apart by type and raising line, never shrinks a ✗ into a D of the same category.
        """
        divergence = judgement.divergence
        cls = FAILURES[divergence.category]
        message = f"{divergence.category} at step {step} ({op.name}): {divergence.detail}"
        fields = dict(history=self.history[:step] if judgement.verdict == "D" else self.history,
                      divergence=divergence, workflow=self.workflow)
        if judgement.verdict == "D":
            raise cls(message, verdict="D", citation=judgement.citation,
                      owner=judgement.owner, **fields)
        raise cls(message, verdict="✗", citation="", **fields)



def machine_for(session: Session, *, observer=None, suppress=frozenset(), weights=None
                ) -> type[RuleBasedStateMachine]:
    """A state machine class for ``session``'s variant (its capabilities decide the rules).

    ``observer(event, **data)`` is called for progress display: ``"example"`` when one starts
    (with its ``workflow``),
    ``"op"`` after each operation, with ``op``, ``observed``, ``world`` (the reference world
    before the op) and ``allowed`` (the observations the reference allowed).  ``suppress`` holds
    categories already found: an example with a ✗ of one of them is discarded (``reject``), and a
    D of one of them is not recorded, so that a campaign goes on to find the others instead of
    re-finding the first (one frequent category masks the rest).  ``weights`` (``--weight``)
    override the variant's ``Tuning.weights`` for this campaign: what is drawn, never what is
    allowed.
    """
    caps: Capabilities = session.adapter.capabilities(session.variant)
    weights = {**session.adapter.tuning(session.variant).weights, **(weights or {})}
    if session.settings.mode == "inprocess":  # no worker to kill, no processes to race
        caps = replace(caps, crash_kinds=caps.crash_kinds - {"sigkill"},
                       operations=caps.operations - {"race"})
    attrs = dict(session=session, caps=caps, weights=weights, suppress=frozenset(suppress),
                 deviations=list(session.adapter.deviations(session.variant)))
    if observer is not None:
        attrs["notify"] = staticmethod(observer)
    # ``op:stale_resume`` weight k: k rules of distinct names (see ``_rule_copy``).
    for k in range(_op_weight(weights, "stale_resume")):
        name = "stale_resume" + (f"_{k}" if k else "")
        attrs[name] = _rule_copy(
            DifferentialMachine._draw_stale_resume, name,
            lambda self: self.can("stale_resume") and bool(self._stale_handles()))
    return type(f"Differential_{session.adapter.name}_{session.variant.name}",
                (DifferentialMachine,), attrs)
