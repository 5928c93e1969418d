"""The adapter protocol: everything resumefuzz asks of a framework adapter, in one file.

An *adapter* drives one real framework (LangGraph, CrewAI, ...) through the operations of
docs/contract.md §2 and reads back what its store holds.  The fuzz engine (``fuzz/``) talks to
adapters only through the names defined here, the way pytest talks to plugins only through
``hookspec.py``.  An adapter imports this module, ``refmodel`` (the contract's vocabulary, which
this module re-exports), the helper modules beside it and its framework; never another adapter,
never ``fuzz`` internals.  The helpers are not the contract, so they live apart:
``adapters/files.py`` (``SideTable``, ``atomic_write_text``, ``copy_files``, ``copy_apart``,
``installed_versions``), ``adapters/calls.py`` (``record_call``, the log a reproduction script
replays) and ``adapters/storeprotocol.py`` (what a ``--store`` factory receives and returns).

Life cycle, and the process each call runs in::

    parent (imported the framework once)        worker processes (forked from the parent)
    ------------------------------------        --------------------------------------------
    adapter = MyAdapter()
    adapter.environment()   -> os.environ       (telemetry off *before* the framework imports)
    adapter.prepare()       imports framework
    adapter.variants(), .capabilities(v),
    .tuning(v), .deviations(v), .versions()
                                               case = adapter.open(variant, workflow, workdir)
                                               case.run(op, hooks) / case.query(thread) /
                                               case.tamper(thread, how[, part]) / case.clone_store(dst)
                                               case.close()

A worker may be replaced between any two operations of a case (a ``sigkill`` crash point kills
it; the next operation runs in a fresh worker that calls ``open`` again on the same ``workdir``).
So **everything an adapter must remember across operations lives in ``workdir``**: the store, and
any mapping from harness thread names to framework ids (``adapters.files.SideTable`` does that
atomically).
Never keep such state in the parent, and never run a workflow in the parent: the frameworks start
threads on first use, and a parent with threads cannot fork safely.

Third-party adapters plug in by dotted path: ``resumefuzz fuzz mypkg.mod:MyAdapter``.
``docs/adapters.md`` has a complete minimal example.  Every adapter is checked against the
methods below when it is loaded (``fuzz/adaptercheck.py``): one that cannot take the calls they
allow is a one-line error before any case runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from refmodel import RULES as _RULES
from refmodel import (  # re-exported: the vocabulary of the protocol
    CRASH_KINDS,
    PHASES,
    FORGE_PART_KINDS,
    TAMPER_HOWS,
    TAMPER_SCOPES,
    CrashAt,
    Durable,
    Fork,
    Op,
    Query,
    Race,
    Recover,
    Resume,
    StaleResume,
    Start,
    StateView,
    Tamper,
    TwinRecover,
    Workflow,
    forge,
    forge_parts,
)

#: Every operation name an adapter may declare (docs/contract.md §2).
OPERATIONS = ("start", "resume", "recover", "fork", "query", "tamper", "race", "twin_recover",
              "stale_resume")
#: Operations an adapter must opt into (``Capabilities.operations`` leaves them out by default):
#: ``stale_resume`` was added to the contract after adapters existed, and an adapter whose
#: ``Case.run`` does not know it must not be sent it.
OPT_IN = frozenset({"stale_resume"})


# =================================================================================================
# Declarations: what an adapter can express, which variants it has, what it documents as weaker.
# =================================================================================================


@dataclass(frozen=True, slots=True)
class Variant:
    """One way users deploy the framework: a backend, an API style, a durability mode, a spelling.

    ``name`` is what users pass to ``--variant`` (``"sqlite-graph-sync-head"``); ``options`` holds
    the axes it fixes (``{"saver": "sqlite", "api": "graph", "durability": "sync",
    "resume": "head", "fork": "update_state"}``) so reports and the matrix can show them.
    Each documented spelling of resume or fork is a variant of its own, never a hidden choice.
    """

    name: str
    description: str = ""
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Which operations and crash points a variant can express.

    Everything not declared is reported ``n/a`` with the reason from ``not_expressible``
    (operation name -> why), never generated and never counted as passed.  How the engine runs
    what a variant expresses (how often, how long, in which workers) is its ``Tuning``.

    ``intents`` declares the fork/retry discriminator (property FI): for each of ``"resume"``
    and ``"fork"``, the intent the spelling carries, ``"RETRY"`` / ``"FORK"``, or
    ``"indistinguishable"`` when the API cannot tell them apart.

    ``stale_handle`` says what a caller holds when it resumes through a *stale handle*
    (``StaleResume``, docs/contract.md §2): the framework's own object or id, obtained while the
    gate was pending (``"the StateSnapshot.config (checkpoint_id) read while the gate asked"``).
    A variant expresses ``stale_resume`` only with ``"stale_resume"`` in ``operations`` *and* a
    ``stale_handle``; otherwise ``not_expressible["stale_resume"]`` says why it cannot.
    """

    operations: frozenset = frozenset(OPERATIONS) - OPT_IN
    crash_kinds: frozenset = frozenset(CRASH_KINDS)
    crash_phases: frozenset = frozenset(PHASES)
    tamper_hows: frozenset = frozenset(TAMPER_HOWS)
    # The kinds of stored part ``Case.tamper`` can forge on its own (``Tamper.part``): "done"
    # (the log), "answer" (one gate's answer), "pending" (the pending-gate record).  The engine
    # draws only these; empty: ``forged`` without a part (``forge``'s default edit), for
    # adapters written before parts existed.  A kind left out is n/a: say why in
    # ``not_expressible["forged <kind>"]``.
    forge_parts: frozenset = frozenset(FORGE_PART_KINDS)
    bad_output: bool = True  # can a task return a value outside the state schema?
    # What a tamper reaches (docs/contract.md §3, "What a tamper reaches"): "thread", only
    # the tampered thread's latest checkpoint; "history", every checkpoint of the tampered thread
    # (one file holds its whole history, or the fork spelling can only read its latest state), so
    # every fork taken from it, but no other branch; "lineage", every branch that shares its
    # framework-level thread or file (a run and all the forks taken from it); "listing", the same
    # branches, but every checkpoint is a row of its own that another branch meets only in a
    # listing of the framework-level thread (LangGraph's ``list()``, which fails loudly on a row
    # it cannot decode): those branches may refuse, and whatever else they do is judged as on
    # intact data; "store", the whole store (a truncated database file): every thread in it
    # counts as tampered afterwards.
    tamper_scope: str = "thread"
    forced_race: bool = False  # can the store hold racers' writes until all have read?
    max_racers: int = 3
    not_expressible: Mapping[str, str] = field(default_factory=dict)
    intents: Mapping[str, str] = field(
        default_factory=lambda: {"resume": "RETRY", "fork": "FORK"}
    )
    stale_handle: str = ""
    # What of the shaped workflows of docs/contract.md §7 (``Workflow.shape``) the adapter can
    # run, of ``refmodel.SHAPE_FEATURES``: ``parallel`` (stages of parallel tasks),
    # ``questions`` (several questions per task), ``pre_effect`` (work before the question),
    # ``loop`` (a looped stage).  The engine draws shapes that use these only; empty (the
    # default): every workflow the adapter gets is a linear chain.  Say why a feature is missing
    # in ``not_expressible["shape:<feature>"]``.
    shapes: frozenset = frozenset()

    def expresses(self, op: str) -> bool:
        """Can the variant express operation ``op`` (``stale_resume`` needs its handle too)?"""
        return op in self.operations and (op != "stale_resume" or bool(self.stale_handle))


@dataclass(frozen=True, slots=True)
class Tuning:
    """How the engine runs a variant's cases (``Adapter.tuning``): what it draws more often, how
    long an operation may take, whether a worker serves several cases, whether a case needs the
    adapter's ``cleanup``.

    Kept apart from ``Capabilities`` because none of it changes what a variant can express or
    what the contract allows: tuning changes cost and emphasis only, so two runs that differ in
    it judge the same operations the same way.  The defaults are the safe ones.
    """

    # Generator weighting, so that what a variant's properties need is drawn often: relative
    # weights (default 1) of crash kinds and phases, keyed ``"kind:<kind>"`` / ``"phase:<phase>"``
    # (e.g. ``{"kind:sigkill": 3, "phase:after_commit": 3}`` where a durability mode only loses
    # work to a SIGKILL after a commit), and of operations, ``"op:<name>"`` (only
    # ``op:stale_resume`` so far: drawn that many times as often when it is enabled).  Weights
    # change what is drawn, never what is allowed; ``resumefuzz fuzz --weight`` overrides them.
    weights: Mapping[str, float] = field(default_factory=dict)
    # Seconds one operation of this variant may take before it is ``stuck`` (``None``: the
    # engine's ``--op-timeout``).  For operations that legitimately wait on a framework's own
    # timer (a server's grace period), never to make a hung framework look alive.
    op_timeout: float | None = None
    # May one worker process serve this variant's cases one after another (each opened, closed
    # and cleaned up in turn), rather than a fresh fork of the prepared parent for each case?
    # True only where nothing of a case outlives its ``Case.close`` and ``Adapter.cleanup`` in
    # the process: no module-level registry, cache, event bus, thread or connection pool that a
    # later case could meet.  A worker killed at a crash point is never reused either way, nor
    # one that finds a thread or an open file of its case still alive after closing it (the
    # worker checks those two; module-level state is the adapter's to rule out).  It also lets
    # a spare worker warm up on a throwaway case of its own before it is needed (a workdir
    # under ``warm-NNNNNN/``, opened, run, closed and cleaned up like any case's), and a racer
    # serve the racers of later races (each race's case opened, resumed and closed in turn).
    reuse_worker: bool = False
    # Does a case of this variant keep anything outside its ``workdir`` that ``Adapter.cleanup``
    # must release (a database on a server, a third-party store's resources)?  False: the
    # workdir, which the engine removes, holds all of it, and the engine never calls
    # ``cleanup`` for the variant, nor forks the short-lived worker that runs it after a case
    # whose worker was killed (about one case in two in a campaign with crash points).  The
    # default, True, is the safe one: an adapter that overrides ``cleanup`` gets it called.
    needs_cleanup: bool = True


@dataclass(frozen=True, slots=True)
class Deviation:
    """A weaker semantics the framework *documents*: a finding of ``category`` that the
    weakening explains gets verdict ``D`` instead of ``✗``.

    ``citation`` names the document and the passage (a URL, or a file and line of the
    framework's own source or docs, at the pinned version); ``scope`` says which findings it
    covers, in words a reader can check against the shrunk trace.
    """

    category: str
    citation: str
    scope: str
    # Whose the excused divergence is (docs/contract.md §5, "Whose defect"): "framework", a
    # weaker semantics the framework documents for its own store; "caller", state the
    # framework's documentation puts in the caller's hands (AutoGen's ``save_state()`` dict,
    # LlamaIndex's ``ctx.to_dict()``), where ``remedy`` says what the caller must add.
    owner: str = "framework"
    remedy: str = ""
    # Machine-readable limits of the weakening (empty: no limit).  ``ops``: names of the
    # operations whose divergence it explains; ``after_crash_kinds``: the thread's last crash
    # must be of one of these kinds (``"exception"``, ``"sigkill"``), e.g. a durability mode that
    # only loses work when the process dies.  ``rules``: names of the classification rules
    # (``refmodel.RULES``, docs/semantics.md "Classification") whose findings it explains, when
    # the weakening is one way of diverging among several of its category: a category-wide
    # deviation would turn every other way into a ``D`` as well.  ``superseded``: only an op on
    # a thread that is behind its lineage (``fuzz.judge.superseded``: another thread forked from
    # the same run was written after it), which a framework keeping a run and its branches in one
    # thread reaches by an old checkpoint's id, its time travel.
    ops: frozenset = frozenset()
    after_crash_kinds: frozenset = frozenset()
    rules: frozenset = frozenset()
    superseded: bool = False
    # ``tamper_hows``: only on a thread whose last tamper was of one of these kinds (``"forged"``:
    # a caller-owned dict forged by whoever can write the caller's store; an ``invalid`` one the
    # framework's own validator should refuse stays a ✗).
    tamper_hows: frozenset = frozenset()

    def __post_init__(self) -> None:
        if self.owner not in DEVIATION_OWNERS:
            raise ValueError(f"Deviation({self.category!r}).owner: {self.owner!r} is not one of "
                             f"{DEVIATION_OWNERS}")
        if self.owner == "caller" and not self.remedy:
            raise ValueError(f"Deviation({self.category!r}): a caller-owned deviation says what "
                             "the caller must add (remedy)")
        # Checked when the adapter builds it: a misspelt rule would cover nothing, and the
        # weakening would silently stop applying (a D turned into a ✗ nobody asked for).
        categories = {rule.name: rule.category for rule in _RULES}
        wrong = sorted(r for r in self.rules if categories.get(r) != self.category)
        if wrong:
            raise ValueError(
                f"Deviation({self.category!r}).rules: {wrong} name no classification rule of "
                f"that category (refmodel.RULES: "
                f"{sorted(n for n, c in categories.items() if c == self.category)})")

    def covers(self, category: str, op_name: str, crash_kind: str | None,
               rule: str = "", superseded: bool = False, tamper_how: str | None = None) -> bool:
        """Does this weakening explain a ``category`` divergence of ``op_name``, named by the
        classification rule ``rule``, on a thread that is (``superseded``) or is not behind its
        lineage, and whose last tamper was ``tamper_how`` (``None``: never tampered)?"""
        return (category == self.category
                and (not self.ops or op_name in self.ops)
                and (not self.after_crash_kinds or crash_kind in self.after_crash_kinds)
                and (not self.rules or rule in self.rules)
                and (not self.superseded or superseded)
                and (not self.tamper_hows or tamper_how in self.tamper_hows))


#: Who a ``Deviation`` says owns the divergence it excuses.
DEVIATION_OWNERS = ("framework", "caller")
#: The properties a ``Promise`` may speak of (docs/contract.md §4).
PROMISE_PROPERTIES = ("PC", "EO", "FD", "CV", "CO", "RD", "FI", "LV")


@dataclass(frozen=True, slots=True)
class Promise:
    """What the framework itself promises about one property, in its own words.

    A report's "What the documentation promises" quotes this, never our contract: a maintainer
    reads a finding against their framework's words.  Either ``quote`` (verbatim) and ``source``
    (a docs page, or ``package/module.py:LINE`` or a test's name, at the pinned release), or an
    empty quote with ``why``: the framework promises nothing here, and why a user needs the
    property all the same.  ``options`` narrows it to the variants whose ``Variant.options``
    hold every one of these pairs (``{"durability": "exit"}``); empty: every variant.
    ``categories`` narrows it to findings of these fault categories (``{"LostUpdate"}``: what a
    framework says of a resume does not speak of k processes racing); empty: every category.
    """

    property: str
    quote: str = ""
    source: str = ""
    why: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    categories: frozenset = frozenset()

    def __post_init__(self) -> None:
        if self.property not in PROMISE_PROPERTIES:
            raise ValueError(f"Promise.property: {self.property!r} is not one of "
                             f"{PROMISE_PROPERTIES}")
        if bool(self.quote) != bool(self.source):
            raise ValueError(f"Promise({self.property!r}): a quote needs its source, a source "
                             "its quote")
        if not self.quote and not self.why:
            raise ValueError(f"Promise({self.property!r}): promises nothing here, so say why "
                             "a user needs the property (why)")

    @property
    def promised(self) -> bool:
        return bool(self.quote)

    def applies(self, variant: "Variant") -> bool:
        return all(variant.options.get(k) == v for k, v in self.options.items())


# =================================================================================================
# What the engine hands to a running operation.
# =================================================================================================


class CrashInjected(Exception):
    """Raised inside a task by ``Hooks`` at an ``exception``-kind crash point.

    Let it propagate: the engine reports ``crashed`` when this exception is anywhere in the
    chain (``__cause__`` / ``__context__``) of what ``Case.run`` raised.  Any other exception is
    a refusal of the framework or a failure of the harness: see "Who raised it" below.
    """


class Unreadable(Exception):
    """Raised by ``Case.query`` when the store holds something the framework cannot decode."""


class Refused(Exception):
    """The framework refused the operation loudly, by a means other than raising.

    Raise it from ``Case.run`` when the framework says no without an exception of its own (an
    HTTP 4xx/5xx from a server's route, an error status in a returned handle), with the
    framework's own words as the message.  An exception the *framework* raises needs no
    wrapping: the engine records its type and first line.  Never raise it for a condition the
    adapter decided on its own: that would invent a refusal the framework did not make.
    """


class HarnessError(Exception):
    """The adapter itself failed (a thread it lost track of, a file it could not write).

    Never an observation of the framework: the engine counts and shows it as a tool error for
    the example, and never turns it into a finding.  Any exception raised from the adapter's own
    code (rather than from inside the framework) is treated the same way.
    """


# Who raised it.  When ``Case.run`` (or ``query``) raises, the engine decides, in the worker
# (``fuzz/internal/blame.py``), whether the *framework refused* (outcome ``rejected``; the
# observation's ``error`` is ``"ExcType: first line of message"`` of the framework's exception)
# or the *harness failed* (a tool error for the example: counted, shown with the adapter's
# traceback, never a finding; ``fuzz.errors.HarnessFailure``):
#
# 1. ``CrashInjected`` anywhere in the chain: ``crashed``.
# 2. ``HarnessError`` anywhere in the chain (causes, contexts, group members): the harness.
# 3. ``Refused`` in the explicit chain (``raise Refused(...) from exc`` included): a refusal.
# 4. Otherwise the root cause decides: follow ``__cause__`` (explicit ``raise ... from``; for an
#    exception group, its first member) to the end, and take the innermost frame of its traceback
#    that is not the standard library.  Inside the framework (or any other installed package it
#    calls): a refusal.  Inside our code, ``adapters``, ``fuzz``, ``refmodel``, the module tree of
#    a third-party adapter class (``mypkg`` for ``mypkg.mod:MyAdapter``), or a module an adapter
#    generates under a name starting with ``resumefuzz_``: the harness.
#
# So: let the framework's exceptions propagate (wrapping them ``raise X from exc`` keeps the
# framework's words: the error text is the outermost framework exception of the chain); raise
# ``Refused`` only for a refusal the framework made by other means; raise ``HarnessError`` (or
# let any exception of your own propagate) when the adapter cannot do its job.  An exception
# raised *while handling* a framework exception (implicit ``__context__``) is the adapter's own.
# A home-made checkpointer that is its own framework (``docs/examples/toy_adapter.py``, the
# built-in reference) raises ``Refused`` (or a subclass) for its refusals.
#
# What the framework prints (fds 1 and 2 of the worker, logging included, from any thread) is
# captured, never shown on the terminal: the last 4 KB of each operation go to the runner's log
# (``CaseRunner.log``), for the report.


class Hooks:
    """Callbacks the engine passes to ``Case.run``; an adapter's task bodies call them.

    Write every task body of the built workflow as::

        def task_body(t):
            hooks.task_begins(t)            # first line, on every execution (re-runs too)
            value = <the gate's resume value> if t is a gate else None
            hooks.effect(t, value)          # the task's one external effect
            return hooks.output(t, value)   # what the task writes into the workflow state

    ``task_begins`` is where ``before_effect`` crash points fire (and ``after_commit`` of the
    task that completed before it); ``effect`` writes one ledger row and is where ``in_flight``
    fires.  When ``run`` returns, the engine fires ``after_commit`` of the last task itself.
    ``output`` returns ``t`` normally, and a value outside the state schema when the op carries
    ``BadOutput(t)``; an adapter whose state is typed may build its own out-of-schema value
    instead, after asking ``wants_bad_output(t)``.
    """

    def task_begins(self, task: int) -> None:  # pragma: no cover - the engine implements these
        raise NotImplementedError

    def effect(self, task: int, value: str | None) -> None:  # pragma: no cover
        raise NotImplementedError

    def wants_bad_output(self, task: int) -> bool:  # pragma: no cover
        raise NotImplementedError

    def output(self, task: int, value: str | None):
        """``t`` normally; ``"<bad>"`` (a string where the schema has an int) for BadOutput(t)."""
        return "<bad>" if self.wants_bad_output(task) else task

    def race_ready(self) -> None:
        """In a forced race, call once the pending interrupt has been *read* and before anything
        is *written*; it blocks until every racer has read.  A no-op outside forced races."""


# =================================================================================================
# The two classes an adapter implements.
# =================================================================================================


class Case:
    """One test case: one fresh store in ``workdir``, opened in a worker process.

    ``open`` (on the adapter) builds the framework objects for ``workflow``: tasks ``1..n``
    in order, gates at ``workflow.gates``, every task body written as shown on ``Hooks``.
    """

    def run(self, op: Op, hooks: Hooks) -> str:
        """Apply one executing operation (``Start``, ``Resume``, ``Recover``, ``Fork``, and
        ``StaleResume`` where the variant declares it).

        Returns ``"interrupted"`` (a gate is pending) or ``"completed"`` (the run finished, or
        the call was a no-op on a finished run), or ``"ok"`` for a no-op on a stored state that
        neither asks nor is finished (a racer that loaded another racer's run mid-way; a state
        forged that way): the label docs/contract.md §3 gives a no-op with no status to report.
        Let the framework's exception propagate to report a loud refusal (``rejected``), or
        raise ``Refused``; let ``CrashInjected`` propagate (``crashed``).  Anything else the
        adapter raises is a harness error ("Who raised it" above).  The engine reads effects
        from its ledger and the state with ``query`` afterwards: return nothing else.

        ``Fork(thread, gate, value, new_thread)``: resume the checkpoint at which ``gate`` was
        pending in ``thread`` as the new branch ``new_thread``, answering ``value``; effects in
        it are labelled ``new_thread`` by the engine.  ``Race`` is not passed here: the engine
        runs a race as k concurrent ``Resume`` ops on k workers sharing this ``workdir``.
        ``Recover`` after a crash re-issues the run's original input where the framework needs
        it (documented per adapter).

        ``StaleResume(thread, gate, value)``: answer ``value`` through the handle the caller
        obtained while ``gate`` was pending in ``thread`` (``Capabilities.stale_handle``), as a
        second browser tab or a retried request would, after an earlier op consumed the gate.
        Make exactly the framework call that handle allows; never check the head yourself (a
        refusal must be the framework's).  The reference allows a refusal or a no-op.
        """
        raise NotImplementedError

    def query(self, thread: str) -> StateView:
        """Read ``thread``'s persisted state from the store **without running anything**.

        Report what is stored, even when it breaks the schema (``StateView.of(workflow, done,
        answers, pending)`` derives the status).  A thread with nothing stored reads as status
        ``new``.  Raise ``Unreadable`` when the framework cannot decode the store.
        """
        raise NotImplementedError

    def tamper(self, thread: str, how: str, part: str | None = None) -> None:
        """Alter ``thread``'s latest persisted checkpoint in the store, directly (not via the API).

        ``corrupt``: bytes that do not decode.  ``invalid``: decodes, breaks the state schema
        (an answer outside ``workflow.values``, an unknown task).  ``forged``: well-formed and
        schema-valid, not a state this run produced: write ``forge(workflow, durable, part)``'s
        content, in the framework's own storage format.  ``part`` (``forged`` only; one of
        ``forge_parts(workflow, durable)``) is the stored part to edit on its own: ``"done"``
        (the log of completed tasks), ``"answer:<t>"`` (gate ``t``'s answer) or ``"pending"``
        (the pending-gate record alone, e.g. LangGraph's interrupt write, a pending flag);
        ``None``: ``forge``'s default edit.  Leave every other part's bytes as they were, so that
        a store that protects only some parts is caught by an edit of exactly the part it skips.
        The engine passes ``part`` only when it is set, and only of a kind in
        ``Capabilities.forge_parts``.
        """
        raise NotImplementedError

    def clone_store(self, dest: Path) -> None:
        """Copy the store byte for byte into the empty directory ``dest`` (for ``twin_recover``).

        The engine then opens a second case on ``dest`` in another worker and recovers both.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release connections and files.  May not be called if the worker is killed."""


class Adapter:
    """A framework adapter: declarations (called in the parent) and ``open`` (in workers).

    Subclass it or implement the same methods; ``name`` is the target name users type.
    """

    name: str = ""

    def environment(self) -> Mapping[str, str]:
        """Environment variables to set before the framework is imported: telemetry, tracing
        and version checks off; data directories inside the case's temporary directory."""
        return {}

    def prepare(self) -> None:
        """Import the framework (once, in the parent, before any worker is forked).

        Raise ``ImportError`` with an install hint if the framework is missing; the engine turns
        it into a one-line error (exit 2), never a silent skip.
        """

    def versions(self) -> Mapping[str, str]:
        """Distribution name -> installed version, for every package whose behaviour matters."""
        return {}

    def variants(self) -> Sequence[Variant]:
        raise NotImplementedError

    def capabilities(self, variant: Variant) -> Capabilities:
        return Capabilities()

    def tuning(self, variant: Variant) -> Tuning:
        """How the engine runs ``variant``'s cases: generator weights, a longer operation time
        limit, worker reuse, whether ``cleanup`` is needed (``Tuning``)."""
        return Tuning()

    def deviations(self, variant: Variant) -> Sequence[Deviation]:
        return ()

    #: What the framework promises (the adapter's ``promises.py``): see ``promises``.
    PROMISES: Sequence[Promise] = ()

    #: The releases the adapter drives: distribution -> a PEP 440 range (``{"langgraph":
    #: ">=1.2.9,<2"}``).  Before the framework is imported, the engine refuses an installed
    #: release outside it in one line (the matrix shows n/a with that line); empty: any.
    RELEASES: Mapping[str, str] = {}

    def promises(self, variant: Variant | None = None) -> Sequence[Promise]:
        """What the framework promises, property by property, for ``variant`` (those of
        ``PROMISES`` that ``Promise.applies`` to it; ``None``: every one, for the docs table).
        Every property of ``PROMISE_PROPERTIES`` should have one: a report quotes it, or says
        the framework promises nothing there."""
        return tuple(p for p in self.PROMISES if variant is None or p.applies(variant))

    def open(self, variant: Variant, workflow: Workflow, workdir: Path) -> Case:
        """Open (or re-open, after a killed worker) the case whose store lives in ``workdir``."""
        raise NotImplementedError

    def cleanup(self, variant: Variant, workdir: Path) -> None:
        """Release what a case stored outside ``workdir`` (a PostgreSQL database, say).

        Called by the engine in a worker after the case ends: the case's own worker, after
        ``Case.close``, when it closes normally; a short-lived one otherwise (the case's worker
        was killed and never reached ``Case.close``, or did not close).  Must be idempotent.
        Never called for a variant whose ``Tuning.needs_cleanup`` is False."""

    def use_store(self, factory_path: str) -> None:
        """Bring your own store: run every case on the store ``factory_path``
        (``"mypkg.savers:make_saver"``) builds, instead of the adapter's own stores.

        Called in the parent, before ``prepare``; the adapter imports the factory here (never
        calls it: the factory runs in workers, in ``open``) and from then on ``variants`` lists
        the variants of that store (``store-<name>-...``).  The path comes from the command line
        only, never from a corpus file.  Adapters whose framework has no persistence extension
        point keep this default, which refuses."""
        raise NotImplementedError(f"target {self.name!r} has no store extension point")

    def baseline_variant(self, variant: Variant) -> str | None:
        """Under ``use_store``: the name of the variant of the framework's *own* store that
        ``variant`` (a ``store-<name>-...`` variant) is compared with, the same API style and
        spellings over the store the framework ships (LangGraph's ``SqliteSaver``, say).  A
        finding on the store under test that this variant shows too is the framework's, not the
        store's (``fuzz/baseline.py``).  ``None``: no such variant (no store in use, or none
        comparable); every finding then stays the store's to explain."""
        return None

    def store_methods(self, variant: Variant) -> Mapping[str, str]:
        """Under ``use_store``: what each kind of store finding implicates, in the store API's
        own names and with what each method holds, for the report of a store's finding: keys
        are categories, and ``"stale-read"`` for a store that reads back older data
        (``"put_writes / get_tuple: a pending interrupt is a write of its checkpoint"``).
        Empty when the adapter cannot tell.  The engine picks the entry (``fuzz/baseline.py``);
        an error the store raised names its method by itself (``[in MySaver.get_tuple]``)."""
        return {}

    def reproduction(self, variant: Variant, workflow: Workflow, evidence: Evidence) -> str | None:
        """A standalone script that reproduces a finding with the framework's public API and the
        standard library alone: the workflow definition, the calls the adapter recorded
        (``evidence.calls``, see ``adapters.calls.record_call``) in order, and a check of the
        diverging step that exits 1 when the defect shows and 0 when it does not.  Compose it
        with ``adapters.reproduction.script.Script``.  ``None`` when the trace has an operation
        the adapter cannot write as a script: the report then says there is no script and gives
        the replay line, since a script that only printed would read as a reproduction to file."""
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    """What a reproduction script replays and checks (``Adapter.reproduction``).

    ``calls[i]``: what the adapter recorded with ``adapters.calls.record_call`` while the
    engine replayed operation ``i`` and then queried its thread: ``(kind, source)`` pairs,
    ``kind`` being ``"call"`` (a framework call the operation made) or ``"read"`` (how ``query``
    read the state).  ``observed[i]``: what the target showed.  ``allowed``: every observation the
    contract allows at ``step``, the operation that diverged.
    """

    ops: tuple
    calls: tuple
    observed: tuple
    step: int
    allowed: tuple
    versions: Mapping[str, str] = field(default_factory=dict)
    category: str = ""
    detail: str = ""


__all__ = [
    "DEVIATION_OWNERS",
    "OPERATIONS",
    "OPT_IN",
    "PROMISE_PROPERTIES",
    "Adapter",
    "Capabilities",
    "Case",
    "CrashAt",
    "CrashInjected",
    "Deviation",
    "Durable",
    "Evidence",
    "Fork",
    "HarnessError",
    "Hooks",
    "Op",
    "Promise",
    "Query",
    "Race",
    "Recover",
    "Refused",
    "Resume",
    "StaleResume",
    "Start",
    "FORGE_PART_KINDS",
    "TAMPER_SCOPES",
    "StateView",
    "Tamper",
    "Tuning",
    "TwinRecover",
    "Unreadable",
    "Variant",
    "Workflow",
    "forge",
    "forge_parts",
]
