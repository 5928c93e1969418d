"""Variants, capabilities and documented deviations of the LlamaIndex adapter.

Pure data: no framework import.  Citations are ``file:line`` in the installed distributions at
the pinned versions (``constraints/llamaindex.txt``), site-packages-relative.
"""

from __future__ import annotations

from adapters.protocol import OPERATIONS, Capabilities, Deviation, Tuning, Variant

PINS = {
    "llama-index-workflows": "2.26.1",
    "llama-agents-server": "0.8.0",
    "llama-agents-dbos": "0.7.0",
    "dbos": "2.31.1",
}

WAIT_DOC = (
    "llama-index-workflows 2.26.1, workflows/context/context.py:546-548 (Context.wait_for_event "
    "docstring): 'The runtime pauses by throwing an internal control-flow exception and replays "
    "the entire step when the event arrives, so keep this call near the top of the step and make "
    "any preceding work safe to repeat.'"
)

_CORE_OPTS = {
    "backend": "core",
    "persist": "caller stores ctx.to_dict() rows in SQLite",
    "resume": "Context.from_dict + run(ctx=) + ctx.send_event(Ans)",
    "fork": "same call on an older snapshot (copied to the branch)",
    "recover": "Context.from_dict(head) + run(ctx=); nothing stored: run() again",
}
_SERVER_OPTS = {
    "backend": "server",
    "api": "http",
    "store": "SqliteWorkflowStore",
    "process": "the case worker serves server.app with uvicorn on 127.0.0.1 (a SIGKILL kills it)",
    "resume": "POST /events/{handler_id} (WorkflowClient.send_event)",
    "recover": "restart the server once the handler is older than the stock 30 s grace; nothing "
    "stored or a failed handler: POST /workflows/{name}/run-nowait with the handler_id",
    "resume_grace": "stock (30 s)",
}
# The in-process spelling through private attributes, with a patched framework constant: kept as
# variants of their own, named "-private", so that what they show is never taken for the server's.
_PRIVATE_OPTS = {
    **_SERVER_OPTS,
    "api": "private",
    "process": "in the case worker, no HTTP",
    "resume": "PRIVATE WorkflowServer._service.send_event (the code behind POST /events)",
    "recover": "new WorkflowServer on the store + start(); a failed handler: PRIVATE "
    "_service.start_workflow with the same handler_id",
    "resume_grace": "PATCHED: RESUME_FRESH_HANDLER_GRACE = None for recover, unbounded otherwise "
    "(stock is 30 s)",
}
PRIVATE_WORDS = ("PRIVATE API and a PATCHED framework constant (not what a deployment runs): "
                 "server._service calls in process, RESUME_FRESH_HANDLER_GRACE set by the adapter")
# recover waits out the server's 30 s resume grace, then follows the resumed run.
SERVER_OP_TIMEOUT = 120.0
_DBOS_OPTS = {
    "backend": "dbos",
    "system_database": "SQLite file",
    "resume": "WorkflowHandler(wf, rt.get_external_adapter(run_id)).send_event(Ans)",
    "recover": "DBOS(config) + DBOSRuntime.launch() in a new process (recovers PENDING runs)",
    "executor_id": "local (shared by every process)",
}


def _variant(name: str, base: dict, description: str, **options) -> Variant:
    return Variant(name, description, {**base, **options})


VARIANTS = (
    _variant("core-wait-idle", _CORE_OPTS, "core, ctx.wait_for_event gate, snapshot at each "
             "pause and at the end (the human-in-the-loop docs)", gate="wait", snapshot="idle"),
    _variant("core-wait-step", _CORE_OPTS, "core, ctx.wait_for_event gate, snapshot on every "
             "streamed event", gate="wait", snapshot="step"),
    _variant("core-event-idle", _CORE_OPTS, "core, InputRequiredEvent/HumanResponseEvent steps, "
             "snapshot at each pause and at the end", gate="event", snapshot="idle"),
    _variant("core-event-step", _CORE_OPTS, "core, InputRequiredEvent/HumanResponseEvent steps, "
             "snapshot on every streamed event", gate="event", snapshot="step"),
    _variant("server-wait", _SERVER_OPTS, "llama-agents-server over HTTP on 127.0.0.1 "
             "(WorkflowClient), SqliteWorkflowStore tick journal, ctx.wait_for_event gate",
             gate="wait"),
    _variant("server-event", _SERVER_OPTS, "llama-agents-server over HTTP on 127.0.0.1 "
             "(WorkflowClient), SqliteWorkflowStore tick journal, "
             "InputRequiredEvent/HumanResponseEvent steps", gate="event"),
    _variant("server-wait-private", _PRIVATE_OPTS, f"{PRIVATE_WORDS}; llama-agents-server, "
             "SqliteWorkflowStore tick journal, ctx.wait_for_event gate", gate="wait"),
    _variant("server-event-private", _PRIVATE_OPTS, f"{PRIVATE_WORDS}; llama-agents-server, "
             "SqliteWorkflowStore tick journal, InputRequiredEvent/HumanResponseEvent steps",
             gate="event"),
    _variant("dbos-wait", _DBOS_OPTS, "llama-agents-dbos DBOSRuntime on a SQLite system "
             "database, ctx.wait_for_event gate", gate="wait"),
)


def capabilities(variant: Variant) -> Capabilities:
    backend = variant.options["backend"]
    if backend == "core":
        return Capabilities(
            forced_race=True,  # each racer loads the snapshot, then waits, then runs
            operations=Capabilities().operations | {"stale_resume"},
            stale_handle="the Context.to_dict() snapshot the caller stored when the gate asked "
                         "(its row), answered since: Context.from_dict(workflow, it), "
                         "run(ctx=...), send_event(Ans<g>(response=v))",
            intents={"resume": "indistinguishable", "fork": "indistinguishable"},
            tamper_scope="thread",  # the caller's rows of one thread; a fork copies its snapshot
            forge_parts=frozenset({"done", "answer"}),
            tamper_hows=frozenset({"invalid", "forged"}),
            not_expressible={"forged pending": NO_PENDING_RECORD["core"],
                             "tamper:corrupt": NO_CORRUPT_CORE},
        )
    no_fork = {
        "server": "llama-agents-server has no API that restarts a handler from a journal prefix "
        "or an earlier tick; the nearest, run(context=<caller-saved ctx dict>) with "
        "accept_context_api=True, is the core variants' mechanism, not the server's store",
        "dbos": "DBOS.fork_workflow exists in dbos, but llama-agents-dbos exposes no fork and "
        "keys its own journal (workflow_journal, workflow_state) by run id, which a DBOS fork "
        "does not copy",
    }[backend]
    return Capabilities(
        operations=frozenset(OPERATIONS) - {"fork"},
        stale_handle=("the handler id and the question its event stream showed (Ans<g>), "
                      "answered since: the same answer sent again, as a retried "
                      + ("POST /events/{handler_id}" if variant.options.get("api") == "http"
                         else "send_event to the handler")),
        not_expressible={"fork": no_fork, "forged pending": NO_PENDING_RECORD[backend]},
        forge_parts=frozenset({"done", "answer"}),
        intents={"resume": "RETRY", "fork": "indistinguishable"},
        # Each racer finds its run and the question asked (the read), calls race_ready, then
        # sends its answer (the write): the server and DBOS cases hold their racers too.
        forced_race=True,
        # DBOS: every racer's launch recovers the waiting run under the shared executor id; 2
        # racers measured stuck until op_timeout each, so keep the race (and its cost) small.
        max_racers=2 if backend == "dbos" else 3,
        # One database for every handler, but a tamper edits the rows of one run id (its newest
        # tick, its workflow_state row), and nothing is forked: it reaches that thread alone.
        tamper_scope="thread",
    )


def tuning(variant: Variant) -> Tuning:
    # The HTTP variants wait on the server's own timers (its grace period) within one
    # operation: a longer limit, so that waiting is not taken for stuck.
    return Tuning(op_timeout=SERVER_OP_TIMEOUT if variant.options.get("api") == "http" else None)


# Why corrupt bytes are n/a on core: they never reach LlamaIndex.  Until this was declared, every
# resume or recover of a corrupted core row was a tool error (the application's JSONDecodeError),
# about 1.8 % of core-wait-idle's examples: counted, never judged.
NO_CORRUPT_CORE = (
    "the stored snapshot is the application's own JSON text (the docs' json.dumps of "
    "ctx.to_dict()): bytes that do not decode fail in the application's json.loads before "
    "LlamaIndex is called, so no verdict on LlamaIndex can come from them (a refusal there "
    "would be the adapter's, not the framework's); invalid and forged content does reach "
    "Context.from_dict"
)


# Why a forgery of the pending-gate record alone is n/a: LlamaIndex stores no such record of its
# own; the pause is derived from other stored parts.
NO_PENDING_RECORD = {
    "core": "the pending gate is no stored record of its own: it is the serialized context's "
    "open wait_for_event waiter or, in the event idiom, its running-and-idle flags, which also "
    "say whether any step is in progress; no edit of the pause alone exists in ctx.to_dict()",
    "server": "the pending gate is derived from the tick journal (the Ask<t> event ticks the "
    "framework's reducer replays), not a record of its own; an edit of it alone would be a "
    "forged journal entry of llama-agents-server's internal tick format",
    "dbos": "the pending gate is derived from the run's recorded event stream and its DBOS status "
    "(PENDING, last event WorkflowIdleEvent), not a record of its own; an edit of it alone "
    "would be a forged entry of DBOS's internal journal tables",
}


# Where LlamaIndex's documentation puts the core snapshot in the caller's hands (docs/contract.md
# §5, "Whose defect"): the caller serializes ctx.to_dict() and stores it, so two processes restoring
# it, a stale copy or a forged one are the caller's, a D with what the caller must add.
CALLER_STORE_DOC = (
    "https://developers.llamaindex.ai/python/llamaagents/workflows/human_in_the_loop/ "
    "(\"Stopping/Resuming Between Human Responses\": \"In a web app, the process that sees the "
    "prompt is often not the same request that receives the answer. Snapshot the context after "
    "the prompt, store it, and restore it when the response arrives.\"); "
    "https://developers.llamaindex.ai/python/llamaagents/workflows/durable_workflows/ (\"Runtime "
    "plugins for durability\": \"The checkpoint loop is durability you control. You decide when "
    "to snapshot, and resume is a couple of lines. If you'd rather not manage that, use a runtime "
    "plugin that owns persistence and recovery.\"); llama-index-workflows 2.26.1, "
    "workflows/context/context.py:360 (Context.to_dict): \"Serialize the context to a "
    "JSON-serializable dict.\", stored by the caller in its example, "
    "my_db.set(\"key\", json.dumps(ctx_dict)) (:384)"
)
DURABLE_DOC = (
    "https://developers.llamaindex.ai/python/llamaagents/workflows/durable_workflows/ "
    "(\"Snapshot the context\": \"This survives a restart, but not a crash during the run. You "
    "only have the state as of the last `to_dict()`. To survive a crash, snapshot as the run "
    "progresses.\"; \"Runtime plugins for durability\": \"The checkpoint loop is durability you "
    "control. You decide when to snapshot, and resume is a couple of lines.\")"
)
IDLE_REMEDY = ("snapshot as the run progresses: the docs' checkpoint loop saves ctx.to_dict() on "
               "every StepStateChanged with StepState.NOT_RUNNING (the core-*-step variants), or "
               "run on a runtime plugin that owns persistence (DBOSRuntime)")
CLAIM_SNAPSHOT = ("a consume-once guard in the snapshot store: claim the stored snapshot "
                  "atomically before restoring it to answer (UPDATE snapshots SET consumed = 1 "
                  "WHERE id = ? AND consumed = 0; go on only if one row changed), and refuse a "
                  "snapshot that is consumed or superseded by a newer row of the thread")
SIGN_SNAPSHOT = ("sign what it stores (an HMAC over the stored JSON text, checked before "
                 "Context.from_dict; refuse a mismatch) and declare the state's constraints in "
                 "the pydantic state model (Literal answers, a bounded task id) so that the "
                 "restored run refuses an out-of-range value when it loads the state")
SERVER_RERUN_DOC = (
    "llama-agents-server 0.8.0, llama_agents/server/_api.py:393 and :579 (POST "
    "/workflows/{name}/run and /run-nowait, body field handler_id): \"Workflow handler identifier "
    "to continue from a previous completed run.\"; llama_agents/server/_service.py:323 "
    "(_context_from_handler_id): \"Look up a completed handler's final state and build a Context "
    "from it.\" (the state alone: the new run starts from its StartEvent); "
    "llama_agents/server/_store/abstract_workflow_store.py:38 (TERMINAL_STATUSES: completed, "
    "failed, cancelled)"
)
SERVER_SINGLE_DOC = (
    "https://developers.llamaindex.ai/python/llamaagents/workflows/deployment/ (\"SQLite\": \"The "
    "simplest option for single-process deployments is `SqliteWorkflowStore`, which persists "
    "handler state, events, and results to a local file:\"; \"DBOS (Postgres)\": \"For "
    "multi-replica setups, each replica must have a unique `executor_id`:\", \"With Postgres, "
    "multiple server replicas can share the same database for distributed execution and "
    "recovery.\")"
)


def _caller_owned() -> tuple[Deviation, ...]:
    """core-*: the snapshot is the caller's value in the caller's store."""
    return (
        Deviation(
            "DoubleConsume", CALLER_STORE_DOC,
            "core-*: a stale_resume restores the ctx.to_dict() snapshot the caller stored while "
            "the gate asked (answered since) and sends the answer again; the snapshot is the "
            "caller's value and LlamaIndex core keeps no record that its question was answered, "
            "so the restored run consumes it again. Not covered: any other way of consuming a "
            "gate twice.",
            owner="caller", remedy=CLAIM_SNAPSHOT, ops=frozenset({"stale_resume"}),
            rules=frozenset({"stale-handle-consumed-again"})),
        Deviation(
            "LostUpdate", CALLER_STORE_DOC,
            "core-*: k processes each restore the same stored ctx.to_dict() snapshot of a paused "
            "run and send their answer; every restored context is a run of its own and "
            "LlamaIndex core has no shared store in which one racer could see another's consume.",
            owner="caller", remedy=CLAIM_SNAPSHOT, ops=frozenset({"race"})),
        Deviation(
            "InvalidPersist", CALLER_STORE_DOC,
            "core-*: a tamper (invalid or forged) of the caller's stored ctx.to_dict() row, then "
            "an operation on that thread: the bytes are the caller's, LlamaIndex offers no "
            "integrity check of a snapshot, and the variants' state model does not encode the "
            "task range or the values. Not covered: a BadOutput accepted during a run, which "
            "stays the framework's.",
            owner="caller", remedy=SIGN_SNAPSHOT, rules=frozenset({"tampered-state-used"})),
    )


def _idle_snapshots() -> tuple[Deviation, ...]:
    """Core with the documented schedule (a snapshot at each pause and at the end): a crash
    inside a run loses what that run did since the last pause, as AutoGen's caller-saved state
    does (adapters/autogen/variants.py)."""
    scope = (
        "core-*-idle saves the context only where the human-in-the-loop docs do, at a pause and "
        "at the end: a crash inside a run loses every task that run completed. Covered: the "
        "state read after a crashed op is the state saved at the previous pause (a prefix of the "
        "reference's), and recovery from that snapshot re-executes those tasks, firing their "
        "effects again. Not covered: any difference outside a crashed run and the recovery "
        "that follows it."
    )
    crashed = {"after_crash_kinds": frozenset({"exception", "sigkill"})}
    return (Deviation("Replay", DURABLE_DOC, scope, owner="caller", remedy=IDLE_REMEDY, **crashed),
            Deviation("StateMismatch", DURABLE_DOC, scope, owner="caller", remedy=IDLE_REMEDY,
                      **crashed))


def _server() -> tuple[Deviation, ...]:
    rerun = (
        "server-*: recover of a handler whose run failed (an exception crash point; `failed` is "
        "terminal and the server resumes no failed handler). The recovery runs the same handler "
        "id again, which the route documents as continuing a previous completed run: a new run "
        "from the StartEvent carrying only the stored state, so every task before the failure "
        "runs again. Not covered: a handler left running by a SIGKILL, which the server resumes "
        "from its tick journal."
    )
    failed = {"ops": frozenset({"recover"}), "after_crash_kinds": frozenset({"exception"})}
    return (
        Deviation("Replay", SERVER_RERUN_DOC, rerun,
                  rules=frozenset({"recovery-refires-completed"}), **failed),
        Deviation(
            "LostUpdate", SERVER_SINGLE_DOC,
            "server-*: the racers are k WorkflowServer processes on one SqliteWorkflowStore file, "
            "each rebuilding the idle handler from the journal and delivering its answer; the "
            "docs offer the SQLite store for single-process deployments and multi-replica "
            "serving only with DBOSRuntime on Postgres. Not covered: two answers to one server "
            "(a retried POST /events, two tabs).",
            ops=frozenset({"race"})),
    )


def deviations(variant: Variant) -> tuple[Deviation, ...]:
    backend = variant.options["backend"]
    out = (_caller_owned() if backend == "core" else _server() if backend == "server" else ())
    if variant.options.get("snapshot") == "idle":
        out += _idle_snapshots()
    if variant.options["gate"] != "wait":
        return out
    return out + (
        Deviation(
            "PrefixReplay",
            WAIT_DOC,
            "effects that the waiting step itself fires before its ctx.wait_for_event call, "
            "fired again when the answer arrives.  Unreachable in the generated workflows: a "
            "gate's step fires its one effect after the wait, so a replay re-runs only "
            "task_begins (no effect); a re-fire of any other task's effect is not covered",
            ops=frozenset({"resume", "fork", "race"}),  # the operations that answer a wait
            rules=frozenset({"resume-refires-prefix"}),
        ),
    )
