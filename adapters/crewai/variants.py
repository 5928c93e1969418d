"""The CrewAI Flows variants, what each can express, and the weaker semantics CrewAI documents.

Axes (``Variant.options``):

- ``backend``: ``persist`` (class-level ``@persist(SQLiteFlowPersistence("store/flows.db"))``),
  ``json`` / ``sqlite`` (``CheckpointConfig(provider=JsonProvider() | SqliteProvider())`` with
  ``on_events=["method_execution_finished", "method_execution_paused"]``; ``sqlite`` runs its
  checkpoint provider on SQLite 3.5x from ``pysqlite3``, stdlib SQLite elsewhere);
- ``resume``: always ``Flow.from_pending(id, persistence).resume(v)`` (the only durable answer path;
  checkpoint variants pass ``checkpoint=cfg`` through ``from_pending``'s constructor kwargs);
- ``recover``: ``kickoff_id`` (``Flow().kickoff(inputs={"id": id})``), ``from_checkpoint``
  (``Flow.from_checkpoint(CheckpointConfig(restore_from=latest)).kickoff()``) or
  ``kickoff_from_checkpoint`` (``Flow().kickoff(from_checkpoint=CheckpointConfig(restore_from=
  latest, ...))``); "latest" is what ``crewai checkpoint resume <location>`` picks;
- ``fork``: ``restore_from_state_id`` (``Flow().kickoff(inputs={"id": new},
  restore_from_state_id=old)``) or ``Flow.fork`` (``Flow.fork(CheckpointConfig(restore_from=
  paused-at-gate checkpoint), branch=new).kickoff()``); either way the branch's gate pauses again
  and is answered with ``from_pending(new id).resume(v)``.
"""

from __future__ import annotations

from adapters.protocol import Capabilities, Deviation, Variant

VERSION = "1.15.30"
RUNTIME = "crewai/flow/runtime/__init__.py"  # at crewai==1.15.30

VARIANTS = (
    Variant(
        "persist-sqlite",
        "@persist(SQLiteFlowPersistence) + @human_feedback; recover = kickoff(inputs={'id'}); "
        "fork = restore_from_state_id",
        {"backend": "persist", "resume": "from_pending", "recover": "kickoff_id",
         "fork": "restore_from_state_id"},
    ),
    Variant(
        "checkpoint-json-from_checkpoint",
        "CheckpointConfig + JsonProvider; recover = Flow.from_checkpoint(cfg).kickoff(); fork = Flow.fork",
        {"backend": "json", "resume": "from_pending", "recover": "from_checkpoint", "fork": "Flow.fork"},
    ),
    Variant(
        "checkpoint-json-kickoff",
        "CheckpointConfig + JsonProvider; recover = Flow().kickoff(from_checkpoint=cfg); fork = Flow.fork",
        {"backend": "json", "resume": "from_pending", "recover": "kickoff_from_checkpoint",
         "fork": "Flow.fork"},
    ),
    Variant(
        "checkpoint-sqlite-from_checkpoint",
        "CheckpointConfig + SqliteProvider (pysqlite3); recover = Flow.from_checkpoint(cfg).kickoff(); "
        "fork = Flow.fork",
        {"backend": "sqlite", "resume": "from_pending", "recover": "from_checkpoint", "fork": "Flow.fork"},
    ),
    Variant(
        "checkpoint-sqlite-kickoff",
        "CheckpointConfig + SqliteProvider (pysqlite3); recover = Flow().kickoff(from_checkpoint=cfg); "
        "fork = Flow.fork",
        {"backend": "sqlite", "resume": "from_pending", "recover": "kickoff_from_checkpoint",
         "fork": "Flow.fork"},
    ),
)


def capabilities(variant: Variant) -> Capabilities:
    # Every operation is expressible; the race can be forced because each racer reads the pending
    # row in from_pending() and writes only in resume().  resume (from_pending().resume) and fork
    # (restore_from_state_id / Flow.fork) are distinct calls: the intents are distinguishable.
    # A tamper reaches one thread: each flow id has its own flow_states / pending_feedback rows
    # (a fork gets a fresh id), and each thread its own checkpoint location (a directory, or a
    # database file).  Flow.fork reads the checkpoint it is given ("thread" reach); @persist's
    # restore_from_state_id takes a flow id and reads its latest row, the tampered one, whatever
    # checkpoint the fork means: every fork of a tampered persist thread reads damaged bytes
    # ("history" reach, docs/semantics.md).
    scope = "history" if variant.options.get("backend") == "persist" else "thread"
    handle = STALE_HANDLES[variant.options["backend"] == "persist"]
    # The built-in stores, the sandbox and CrewAI's data dirs all live in workdir: nothing
    # for Adapter.cleanup to release (a custom store's variants keep the default).
    return Capabilities(forced_race=True, max_racers=3, tamper_scope=scope,
                        operations=Capabilities().operations | {"stale_resume"},
                        stale_handle=handle, needs_cleanup=False)


# What a caller keeps from a pause and answers through later (a second tab, a retried webhook).
STALE_HANDLES = {
    True: "the flow id of the HumanFeedbackPending the paused kickoff/resume returned, posted to "
          "the docs' feedback handler: Flow.from_pending(flow_id, persistence).resume(v)",
    False: "the checkpoint location written when the gate paused (as `crewai checkpoint` lists "
           "it), restored in the variant's recover spelling (restore_from=loc), then "
           "Flow.from_pending(flow_id).resume(v) if it pauses at that gate again",
}


_FORK_DOC = (
    "https://docs.crewai.com/en/guides/flows/inputs-id-deprecation (\"restore_from_state_id=<uuid> "
    "- fork: hydrates state from the snapshot ... re-running a flow seeded from a previous state\"); "
    f"{RUNTIME}:2133-2140 (kickoff docstring: \"whose latest snapshot should hydrate this run's "
    "state\"); :2327-2344 and :2351-2380 (a new instance has no completed methods, so the hydrated "
    "run executes from its start methods)"
)


def deviations(variant: Variant) -> tuple[Deviation, ...]:
    if variant.options.get("fork") == "restore_from_state_id":
        return (
            Deviation(
                "PrefixReplay",
                _FORK_DOC,
                "fork via restore_from_state_id: the new branch re-runs the flow from its start "
                "methods, seeded with the source's latest state, so the effects of the tasks before "
                "the forked gate fire again in the new branch",
                ops=frozenset({"fork"}),
            ),
        )
    return ()
