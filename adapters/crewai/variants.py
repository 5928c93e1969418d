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

from adapters.protocol import Capabilities, Deviation, Tuning, Variant

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
    return Capabilities(forced_race=True, max_racers=3, tamper_scope=scope,
                        operations=Capabilities().operations | {"stale_resume"},
                        stale_handle=handle)


def tuning(variant: Variant) -> Tuning:
    # The built-in stores, the sandbox and CrewAI's data dirs all live in workdir: nothing for
    # Adapter.cleanup to release (a custom store's variants keep the defaults).  No worker
    # reuse: CrewAI's event bus keeps threads and an event loop running across flows.
    return Tuning(needs_cleanup=False)


# What a caller keeps from a pause and answers through later (a second tab, a retried webhook).
STALE_HANDLES = {
    True: "the flow id of the HumanFeedbackPending the paused kickoff/resume returned, posted to "
          "the docs' feedback handler: Flow.from_pending(flow_id, persistence).resume(v)",
    False: "the checkpoint location written when the gate paused (as `crewai checkpoint` lists "
           "it), restored in the variant's recover spelling (restore_from=loc), then "
           "Flow.from_pending(flow_id).resume(v) if it pauses at that gate again",
}


_REPO = "crewAIInc/crewAI f4731f5025f8"
_STATE_PAGE = "https://docs.crewai.com/v1.15.30/en/guides/flows/mastering-flow-state"
_HITL_PAGE = "https://docs.crewai.com/v1.15.30/en/learn/human-feedback-in-flows"
_CK_PAGE = "https://docs.crewai.com/v1.15.30/en/concepts/checkpointing"
_DEPR_PAGE = "https://docs.crewai.com/v1.15.30/en/guides/flows/inputs-id-deprecation"
_RT = f"crewai {VERSION} {RUNTIME}"

# The human-feedback guide puts a resume that arrives twice on the resume handler: CrewAI's own
# store reads the pending request without claiming it, and the guide says so in its words.
_IDEMPOTENT = (
    f"{_HITL_PAGE} ('Best Practices for Async Feedback': \"Your resume handler should be "
    f"idempotent for safety\"; {_REPO} docs/v1.15.17/en/learn/human-feedback-in-flows.mdx:638, "
    "the same line from docs/v1.10.0 to docs/edge)"
)
_FORK_DOC = (
    f"{_STATE_PAGE} ('Forking Persisted State': \"# flow_2 starts with counter=1 (hydrated), then "
    f"step() bumps it to 2.\"; {_REPO} docs/v1.15.17/en/guides/flows/mastering-flow-state.mdx:382); "
    f"{_DEPR_PAGE} (\"For most production scenarios — re-running a flow seeded from a previous "
    f"state — fork is what you want.\"); {_RT}:2133-2134 (kickoff docstring: \"whose latest "
    "snapshot should hydrate this run's state\"); :2327-2344 and :2351-2380"
)
_CLAIM = ("claim the request before resuming it: an atomic consume-once record keyed by "
          "(flow_id, flow.pending_feedback.method_name, flow.pending_feedback.requested_at), e.g. "
          "an INSERT under a unique key or a lock held from from_pending() to the end of resume(); "
          "a handler that loses the claim must not call resume()")


def deviations(variant: Variant) -> tuple[Deviation, ...]:
    out = [Deviation(
        "LostUpdate", _IDEMPOTENT,
        "k processes each run the guide's resume handler, Flow.from_pending(flow_id).resume(v), "
        "on one pending request: the pending_feedback row is read with no claim and deleted with "
        "no check (flow/persistence/sqlite.py load_pending_feedback / clear_pending_feedback), so "
        "every racer consumes it and the gate's listener fires k times; the guide makes the "
        "resume handler responsible for being idempotent",
        remedy=_CLAIM, ops=frozenset({"race"}))]
    if variant.options.get("backend") == "persist":
        out.append(Deviation(
            "DoubleConsume",
            _IDEMPOTENT + (f"; {_RT}:1260-1268 (from_pending(flow_id, ...): \"Create a Flow "
                           "instance from a pending feedback state.\", keyed by the flow id alone)"),
            "a resume handler called again with the flow id of a request it already answered "
            "(a retried webhook, a second tab): from_pending(flow_id) loads whatever request the "
            "flow has pending now, and resume(v) answers it",
            remedy=("before resume(), check that flow.pending_feedback.method_name (and "
                    "requested_at) is the request this answer was given for, and keep a "
                    "consume-once record per request"),
            ops=frozenset({"stale_resume"}), rules=frozenset({"stale-handle-consumed-again"})))
        out.append(Deviation(
            "Replay",
            (f"{_STATE_PAGE} ('Class-Level Persistence' example: \"# Second run - pass the ID to "
             "load the persisted state\" ... \"# Will be higher due to persisted state\"; "
             f"{_REPO} docs/v1.15.17/en/guides/flows/mastering-flow-state.mdx:318-321); "
             f"{_RT}:2339-2343 (\"When _completed_methods is empty (e.g. a pure state-reload via "
             "kickoff(inputs={\"id\": ...})), the flow executes from scratch\")"),
            "recover via kickoff(inputs={'id': id}) on a class-level @persist flow reloads the "
            "latest state row and runs the flow again from its start methods (the guide's counter "
            "example re-runs increment on the loaded state): methods that had completed fire their "
            "effects again",
            ops=frozenset({"recover", "twin_recover"}),
            rules=frozenset({"recovery-refires-completed"})))
    else:  # the json / sqlite checkpoint backends
        out.append(Deviation(
            "DoubleConsume",
            (f"{_CK_PAGE} ('What a checkpoint is': \"Restoring rebuilds that state and continues. "
             "Completed tasks are skipped, memory and knowledge are rehydrated, and downstream "
             "work runs against the same outputs the original run produced.\"); " + _IDEMPOTENT),
            "a checkpoint written while the gate was pending, restored after the gate was "
            "answered (from_checkpoint / kickoff(from_checkpoint=)): the restore rebuilds the "
            "state at the pause, asks the gate again under the same flow id, and the re-sent "
            "answer is consumed a second time in the same lineage",
            remedy=("restore only the latest checkpoint of a run (or fork() for an alternate "
                    "branch), and keep a consume-once record per (flow_id, method_name) that the "
                    "resume handler checks"),
            ops=frozenset({"stale_resume"}), rules=frozenset({"stale-handle-consumed-again"})))
    if variant.options.get("fork") == "restore_from_state_id":
        out.append(Deviation(
            "PrefixReplay",
            _FORK_DOC,
            "fork via restore_from_state_id: the new branch re-runs the flow from its start "
            "methods, seeded with the source's latest state, so the effects of the tasks before "
            "the forked gate fire again in the new branch",
            ops=frozenset({"fork"}),
        ))
    return tuple(out)
