"""``LangGraphAdapter``: the declarations (variants, capabilities, tuning, deviations, versions) and
``open``.  The framework is imported in ``prepare`` and in workers, never at import time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters.protocol import (
    OPERATIONS,
    FORGE_PART_KINDS,
    TAMPER_HOWS,
    Adapter,
    Capabilities,
    Deviation,
    Tuning,
    Variant,
    Workflow,
)
from adapters.files import installed_versions

from .variants import BY_NAME, VARIANTS
from .promises import PROMISES

DISTRIBUTIONS = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langchain-core",
    "psycopg",
    "psycopg-binary",
    "pydantic",
    "ormsgpack",
)

INSTALL_HINT = "pip install -c constraints/langgraph.txt langgraph langgraph-checkpoint-sqlite " \
    "langgraph-checkpoint-postgres 'psycopg[binary]'"

TELEMETRY_OFF = {
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGSMITH_OTEL_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    "LANGCHAIN_CALLBACKS_BACKGROUND": "false",
}

# Citations (site-packages paths at the pinned versions; the test file at the mirror's commit).
TYPES_DURABILITY = "langgraph 1.2.24 langgraph/types.py:99-105 (Durability docstring)"
LOOP_SUPERSEDED = (
    "langgraph 1.2.24 langgraph/pregel/_loop.py:987-990: \"Finished tasks rerun only on time "
    "travel, or on a resume at a checkpoint the thread has moved past. A resume addressed at the "
    "thread's latest checkpoint hands their writes back, as without an id.\"; "
    "pregel/_checkpoint.py:174-188 (checkpoint_superseded: \"Whether the thread has moved past "
    "`saved`, the checkpoint `config` addressed\")"
)
TIME_TRAVEL_TESTS = (
    "langchain-ai/langgraph libs/langgraph/tests/test_time_travel.py:12-16 "
    "(module docstring, commit f09cfe8, after release 1.2.11)"
)

NOT_ON_MEMORY = {
    "race": "InMemorySaver keeps the store in one worker's memory: k processes cannot share it",
    "twin_recover": "InMemorySaver's store cannot be copied to another process "
    "(and dies with the worker, so nothing survives a SIGKILL to recover from)",
}
SIGKILL_ON_MEMORY = ("a SIGKILLed worker takes InMemorySaver's store with it "
                     "(exception crashes only)")
NO_SCHEMA = ("the functional API has no state schema: a @task may return any value, so no "
             "output is outside it")
FUNC_UPDATE_FORK = (
    "the functional API has no fork spelled update_state(C, None): the update is written as "
    "the @entrypoint's own output, so LangGraph marks the entrypoint as run and the invoke "
    "that follows executes nothing; its fork spellings are __copy__, invoke(None, C) and "
    "Command(resume) at C (the -copy, -travel and -command variants)"
)
# A SIGKILL after a commit, while the next step runs, is where 'async' and 'exit' lose work.
LOSSY_WEIGHTS = {"kind:sigkill": 3, "phase:after_commit": 3}
# The -barrier variant loses task t to a SIGKILL at after_commit(t) and at before_effect(t+1)
# (both fire while t's saves are held), never at in_flight: weight both phases.
BARRIER_WEIGHTS = {**LOSSY_WEIGHTS, "phase:before_effect": 3}


def _weights(o, crash_kinds) -> dict:
    if o["durability"] not in DURABILITY_LOSSES or "sigkill" not in crash_kinds:
        return {}
    return BARRIER_WEIGHTS if o.get("writes") == "held" else LOSSY_WEIGHTS


def _tamper_scope(o) -> str:
    """What one tamper of a built-in saver reaches (``Capabilities.tamper_scope``)."""
    if o.get("tamper") in ("trunchalf", "trunczero"):
        return "store"
    return "listing" if o["saver"] == "sqlite" else "lineage"


# No mechanism, no ✗ (docs/contract.md §5, "Whose defect"): what LangGraph does not check, a variant
# does not judge; the -pydantic variant judges the validator LangGraph offers.
NO_TYPED_VALIDATION = (
    "LangGraph validates no TypedDict state: a StateGraph coerces a node's input to its state "
    "schema only for a Pydantic model or a dataclass (langgraph 1.2.24 langgraph/graph/state.py:"
    "1736-1750, _pick_mapper / _coerce_state) and never checks a node's output "
    "(graph/state.py:1458-1496, _get_updates), so no value is outside a schema LangGraph checks; "
    "the -pydantic variant exercises the validator LangGraph offers"
)
NO_INTEGRITY = (
    "LangGraph's savers keep no integrity record of a checkpoint, so a well-formed, schema-valid "
    "forgery (edited values, deleted interrupt writes, a deleted head row) cannot be told from a "
    "real state. The opt-in EncryptedSerializer (langgraph-checkpoint 4.3.2 langgraph/checkpoint/"
    "serde/encrypted.py) authenticates only blobs it encrypted: it loads any blob whose type has "
    "no cipher suffix as plain (encrypted.py:28-30), leaves metadata plain, binds no blob to its "
    "checkpoint id and cannot see a deleted row"
)
TRUNCZERO_NA = (
    "a file cut to zero bytes is a valid, empty SQLite database: no byte fails to decode, so it is "
    "a forgery of an empty store (see the forged tamper's reason), and a resume on it starts a "
    "fresh run as LangGraph documents for a resume with nothing pending "
    "(langgraph/errors.py:164-165)"
)
PYDANTIC_OUTPUTS = (
    "https://docs.langchain.com/oss/python/langgraph/use-graph-api ('Use pydantic models for graph "
    "state', Known Limitations; langchain-ai/docs src/oss/langgraph/use-graph-api.mdx @03fadd7): "
    "\"Run-time validation only occurs on inputs to the first node in the graph, not on "
    "subsequent nodes or outputs.\""
)
NONSTRICT_RESUME = (
    "langgraph 1.2.24 langgraph/_internal/_constants.py:81-82: \"when True, the root graph refuses "
    "a resume that can't be matched to its pending interrupts\"; langgraph/errors.py:151: "
    "\"Raised in strict resume mode when a resume doesn't match the pending interrupts.\""
)


COMMAND_INTENT = ("the fork is the resume call itself, Command(resume=v), addressed at an older "
                  "checkpoint_id: LangGraph infers the intent from whether the thread moved past "
                  "that checkpoint (langgraph/pregel/_loop.py:987-990, 1.2.24)")


# What a caller holds when it answers through a stale handle (a second tab, a retried request),
# per resume spelling: what that spelling's own resume call takes, read while the gate asked.
_SNAPSHOT = ("the StateSnapshot.config (thread_id and checkpoint_id) graph.get_state returned "
             "while the gate was pending: graph.invoke(Command(resume=v), that config)")
STALE_HANDLES = {
    "head": _SNAPSHOT,
    "cpid": _SNAPSHOT,
    "map": "the interrupt id graph.get_state(...).interrupts showed while the gate was pending: "
           "graph.invoke(Command(resume={id: v}), thread config)",
    "mapstrict": "the interrupt id graph.get_state(...).interrupts showed while the gate was "
                 "pending: graph.invoke(Command(resume={id: v}), thread config with "
                 "__pregel_strict_resume)",
}


# What each weaker durability mode documents losing to a SIGKILL (types.py:99-105): the
# docstring quoted, the scope in words, and the categories it explains (the first cites the quote).
DURABILITY_LOSSES = {
    "async": (
        "\"'async': Changes are persisted asynchronously while the next step executes.\"",
        "durability='async' persists a step's checkpoint while the next step runs: after a "
        "SIGKILL, a task whose completion was not yet saved runs again (a gate task with the "
        "answer it was given, which it then consumes again), and the stored state lags behind "
        "the completed tasks",
        ("Replay", "StateMismatch", "DoubleConsume"),
    ),
    "exit": (
        "\"'exit': Changes are persisted only when the graph exits.\"",
        "durability='exit' persists nothing until the run exits: after a SIGKILL inside a run, "
        "every task (and every answer) of that run is lost, so tasks run again, an answered gate "
        "asks again, and the stored state lags",
        ("Replay", "StateMismatch", "DoubleConsume"),
    ),
}


class LangGraphAdapter(Adapter):
    """LangGraph (``langgraph``) on its memory, SQLite and PostgreSQL savers."""

    name = "langgraph"
    # From the release the seed paper measured up to the next major line (docs/releases.md).
    RELEASES = {"langgraph": ">=1.2.9,<2"}
    PROMISES = PROMISES  # promises.py: the framework's own words, per property
    _store = None  # bring your own store: a storefactory.StoreFactory (use_store)
    _probe = None

    def use_store(self, factory_path: str) -> None:
        """``--store mypkg.savers:make_saver``: every variant runs on that factory's saver."""
        from adapters import storefactory

        self._store = storefactory.load(factory_path)

    def store_probe(self):
        """What the factory's handle offers (one call of the factory in a forked child)."""
        from adapters import storefactory

        from .custom import check_saver

        if self._probe is None:
            self._probe = storefactory.probe(self._store, self.name, check_saver(self._store))
        return self._probe

    def environment(self) -> Mapping[str, str]:
        return dict(TELEMETRY_OFF)

    def prepare(self) -> None:
        try:
            import langgraph.checkpoint.memory  # noqa: F401
            import langgraph.checkpoint.postgres  # noqa: F401
            import langgraph.checkpoint.sqlite  # noqa: F401
            import langgraph.func  # noqa: F401
            import langgraph.graph  # noqa: F401
            import langgraph.types  # noqa: F401
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"{exc}; install with: {INSTALL_HINT}") from exc
        # The case's own modules too (driver, store, tamper, the reproduction layer): imported
        # here once, not in every forked worker's first ``open`` (50-60 ms a worker from .pyc
        # files, ~180 ms without them, of a SIGKILL case's ~150 ms).  Importing runs nothing.
        from . import case  # noqa: F401
        if self._store is not None:
            self.store_probe()  # a broken factory fails here, in one line, before any case

    def versions(self) -> Mapping[str, str]:
        out = installed_versions(DISTRIBUTIONS)
        if self._store is not None:  # the store's package; the factory path is inert text
            out[self._store.distribution] = self._store.version
            out["store-factory"] = self._store.path
        return out

    def baseline_variant(self, variant: Variant) -> str | None:
        """``SqliteSaver`` on the same axes: ``store-<name>-graph-sync-head-update`` is compared
        with ``sqlite-graph-sync-head-update``."""
        prefix = f"store-{self._store.name}-" if self._store is not None else None
        if prefix is None or not variant.name.startswith(prefix):
            return None
        return "sqlite-" + variant.name[len(prefix):]

    def store_methods(self, variant):
        if self._store is None:
            return {}
        from .custom import STORE_METHODS

        return STORE_METHODS

    def variants(self) -> Sequence[Variant]:
        if self._store is not None:
            from .custom import custom_variants

            return custom_variants(self._store)
        return VARIANTS

    def capabilities(self, variant: Variant) -> Capabilities:
        o = variant.options
        intents = {"resume": "RETRY", "fork": "FORK"}
        not_expressible: dict[str, str] = {}
        if o["fork"] == "command":
            intents["fork"] = "indistinguishable"
            not_expressible["fork_retry_intent"] = COMMAND_INTENT
        operations = set(OPERATIONS)
        crash_kinds = {"exception", "sigkill"}
        if o["saver"] == "memory":
            not_expressible.update(NOT_ON_MEMORY, sigkill=SIGKILL_ON_MEMORY)
            operations -= set(NOT_ON_MEMORY)
            crash_kinds = {"exception"}
        if o["api"] == "func":
            not_expressible["bad_output"] = NO_SCHEMA
            if o["fork"] == "update":
                operations.discard("fork")
                not_expressible["fork"] = FUNC_UPDATE_FORK
        validated = o["api"] == "graph" and o.get("state") == "pydantic"
        if o["api"] == "graph" and not validated:
            not_expressible["bad_output"] = NO_TYPED_VALIDATION
        dropped = {"forged"}
        not_expressible["tamper:forged"] = NO_INTEGRITY
        if not validated:
            dropped.add("invalid")
            not_expressible["tamper:invalid"] = NO_SCHEMA if o["api"] == "func" \
                else NO_TYPED_VALIDATION
        if o.get("tamper") == "trunczero":
            dropped.add("corrupt")
            not_expressible["tamper:corrupt"] = TRUNCZERO_NA
        tamper_hows, tamper_scope = frozenset(TAMPER_HOWS) - dropped, None
        if o["saver"] == "custom":
            from adapters.storefactory import not_expressible as store_na

            probe = self.store_probe()
            na = store_na(self._store, probe)
            not_expressible.update(na)
            operations -= {op for op in na if op in OPERATIONS}
            if "sigkill" in na:
                crash_kinds = {"exception"}
            # The store's own tampers, less what LangGraph's state cannot be judged on.
            tamper_hows = frozenset(probe.tamper_hows) - (dropped - {"corrupt"})
            tamper_scope = probe.tamper_scope
        return Capabilities(
            operations=frozenset(operations),
            stale_handle=STALE_HANDLES[o["resume"]],
            crash_kinds=frozenset(crash_kinds),
            bad_output=validated,
            forced_race=o["saver"] != "memory" and "race" in operations,
            tamper_hows=tamper_hows,
            # drophead's forgery is a rollback of the whole checkpoint, a custom store's is its
            # factory's own: neither edits one stored part.
            forge_parts=frozenset() if o["saver"] == "custom" or o.get("tamper") == "drophead"
            else frozenset(FORGE_PART_KINDS),
            max_racers=3,
            not_expressible=not_expressible,
            intents=intents,
            # Truncating the SQLite file damages every thread stored in it.  Otherwise a fork's
            # branch lives in its source's LangGraph thread: on PostgreSQL and in memory it shares
            # its channel blobs, so a tamper of one branch reaches the others' data ("lineage");
            # SqliteSaver keeps each checkpoint whole in a row of its own, which another branch
            # meets only in a listing of the thread (a fork's lookup, ``list()``), where a row
            # that does not decode fails loudly ("listing").  A custom store says its own reach
            # (its factory's StoreHandle).
            tamper_scope=tamper_scope or _tamper_scope(o),
        )

    def tuning(self, variant: Variant) -> Tuning:
        o = variant.options
        return Tuning(
            # A case is its graph, its saver and its connection, made by open() and closed by
            # Case.close; the adapter keeps nothing per case on itself or in a module.  The
            # worker checks that no thread or file outlives a case (worker.Residue); the whole
            # corpus replayed in one reused worker per variant left none and observed what
            # fresh workers did (benchmarks/history/round-21.md).  A third-party
            # store's package may keep module state (a pool, a client) we cannot vouch for:
            # those fork a worker per case.
            reuse_worker=o["saver"] != "custom",
            # A PostgreSQL case's database, and whatever a third-party store keeps, outlive the
            # case's directory; the memory and SQLite savers keep nothing outside it.
            needs_cleanup=o["saver"] in ("postgres", "custom"),
            # Where a durability mode loses work to a SIGKILL after a commit, draw that often
            # (only where the variant draws SIGKILLs at all).
            weights=_weights(o, self.capabilities(variant).crash_kinds),
        )

    def deviations(self, variant: Variant) -> Sequence[Deviation]:
        o = variant.options
        out = []
        # The durability docstrings explain what a SIGKILL loses; the memory saver has no
        # SIGKILL crash points, so they explain nothing there.
        mode = o["durability"]
        if o["saver"] != "memory" and mode in DURABILITY_LOSSES:
            quote, scope, categories = DURABILITY_LOSSES[mode]
            killed = frozenset({"sigkill"})
            out += [Deviation(category, f"{TYPES_DURABILITY}: {quote}" if i == 0
                              else f"{TYPES_DURABILITY} ({mode!r})", scope,
                              after_crash_kinds=killed)
                    for i, category in enumerate(categories)]
        if o["api"] == "func" and o["fork"] in ("copy", "travel", "command"):
            out.append(Deviation(
                "PrefixReplay",
                f"{TIME_TRAVEL_TESTS}: \"Replay (invoke with checkpoint_id): Re-executes nodes "
                "after the checkpoint ... Fork (update_state then invoke): Creates a new "
                "checkpoint without cached pending writes. Nodes re-execute\"",
                "a fork in the functional API, by any spelling (__copy__, invoke(None, C), "
                "Command(resume) at C): the @entrypoint is the one node after the gate's "
                "checkpoint, and the @task results before the gate are cached pending writes "
                "the fork does not carry, so those tasks run again in the new branch",
                ops=frozenset({"fork"}),
            ))
            # The same re-execution, met at a gate: a gate before the forked one runs again and
            # asks again, the fork's value answers it, and the forked gate asks once more, its
            # value not consumed (seen on sqlite-func-sync-head-copy).
            out.append(Deviation(
                "ForkIgnore",
                f"{TIME_TRAVEL_TESTS}: \"Fork (update_state then invoke): Creates a new "
                "checkpoint without cached pending writes. Nodes re-execute\"",
                "a fork in the functional API at a gate after another gate: the tasks before it "
                "run again (the PrefixReplay deviation), so the earlier gate asks again and the "
                "fork's value answers it; the forked gate then asks for an answer of its own",
                ops=frozenset({"fork"}),
                # That one way only: a fork that keeps a cached result, or is refused, is no
                # re-execution (sqlite-func-sync-head-command, a Command(resume) at C reusing
                # the gate's result of a crashed run at C, was a D while this covered them all).
                rules=frozenset({"fork-answered-earlier-gate"}),
            ))
        if o["api"] == "func":
            # A branch lives in its source's LangGraph thread, so once it (or the source's
            # other branches) wrote, the source is reached by its own checkpoint's id, one the
            # thread has moved past.  LangGraph then reruns the finished @tasks of that
            # checkpoint on purpose: they are the entrypoint's, the one node after it.  Limited
            # to that address (``superseded``) and to the rule naming a finished task run again:
            # a recovery or resume at the thread's head that reruns a task stays a ✗ (and the
            # graph API's nodes before a checkpoint are "NOT re-executed",
            # test_time_travel.py:281, so no graph variant declares it).
            scope = ("{op} of a thread whose LangGraph thread has moved past its checkpoint (a "
                     "fork's source, or a branch, after another thread of the same run wrote): "
                     "the call addresses that checkpoint's id, and LangGraph runs the @tasks "
                     "finished there again instead of handing their cached writes back")
            out.append(Deviation("Replay", LOOP_SUPERSEDED,
                                 scope.format(op="a recover (invoke(None, config))"),
                                 rules=frozenset({"recovery-refires-completed"}),
                                 superseded=True))
            out.append(Deviation("PrefixReplay", LOOP_SUPERSEDED,
                                 scope.format(op="a resume or a racer (Command(resume))"),
                                 ops=frozenset({"resume", "race"}),
                                 rules=frozenset({"resume-refires-prefix"}),
                                 superseded=True))
        if o["api"] == "graph" and o.get("state") == "pydantic":
            out.append(Deviation(
                "InvalidPersist", PYDANTIC_OUTPUTS,
                "a node's output is merged into the checkpoint without validation against the "
                "Pydantic state model (langgraph/graph/state.py:1458-1496); only a node's input "
                "is coerced (graph/state.py:1736-1750), so the out-of-schema value is persisted "
                "and refused later, loudly, by the next node that reads it (langgraph issue #6491)",
                rules=frozenset({"bad-output-accepted"}),
            ))
        if o["resume"] == "map":
            out.append(Deviation(
                "DoubleConsume", NONSTRICT_RESUME,
                "a resume through an interrupt id that is no longer pending, without strict mode: "
                "LangGraph does not refuse it and continues the run from its checkpoint as "
                "invoke(None) would; nothing is consumed again (the gate does not fire), but the "
                "thread's outstanding tasks run",
                ops=frozenset({"stale_resume"}),
                rules=frozenset({"stale-handle-consumed-again"}),
            ))
        if STALE_HANDLES[o["resume"]] is _SNAPSHOT and not o.get("guard"):
            # (The guarded variants refuse a stale handle themselves: a hole there is ours, ✗.)
            # A checkpoint config held from the pause is LangGraph's time-travel handle: invoking
            # with it replays from that checkpoint, which LangGraph documents as a fork, so the
            # gate consumes the value again in a new branch of the same thread.  A D, not a
            # refusal LangGraph owes: the API cannot tell a retried approval from time travel.
            out.append(Deviation(
                "DoubleConsume",
                f"{TIME_TRAVEL_TESTS}: \"Replay (invoke with checkpoint_id): Re-executes nodes "
                "after the checkpoint\"; docs concepts/time-travel.md: \"resume execution from a "
                "prior checkpoint ... In all cases, resuming past execution produces a new fork "
                "in the history\"",
                "a resume through a checkpoint config held from the pause (stale_resume): the "
                "thread has moved past that checkpoint, so LangGraph reruns the nodes after it; "
                "the gate's node runs again with the answer recorded at that checkpoint (not the "
                "stale call's value) and its effect fires a second time",
                ops=frozenset({"stale_resume"}),
            ))
        return out

    def open(self, variant: Variant, workflow: Workflow, workdir: Path):
        from .case import LangGraphCase

        return LangGraphCase(BY_NAME.get(variant.name, variant), workflow, workdir)

    def reproduction(self, variant: Variant, workflow: Workflow, evidence) -> str | None:
        from .repro import reproduction

        if variant.options.get("guard"):  # a script of plain LangGraph would not be the guard's
            return None
        return reproduction(BY_NAME.get(variant.name, variant), workflow, evidence)

    def cleanup(self, variant: Variant | None, workdir: Path) -> None:
        """Drop the PostgreSQL database named in ``workdir/postgres.json``, if it still exists.

        ``close()`` drops it in the worker whose ``open`` created it (or, for a
        ``clone_store`` destination, the first worker that opened it); this drops it whatever
        happened to that worker.  Idempotent; a no-op for the memory and SQLite savers, whose
        store is inside ``workdir``.  ``variant`` is not needed: the workdir names the database."""
        from .store import drop_postgres

        if variant is not None and variant.options.get("saver") == "custom":
            from .store import CustomStore

            store = CustomStore(Path(workdir), variant.options["store_factory"])
            try:
                store.cleanup()  # the factory's StoreHandle.cleanup (idempotent)
            finally:
                store.release()
            return
        drop_postgres(Path(workdir))
