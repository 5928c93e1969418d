"""Variants, capabilities and documented deviations of the LlamaIndex adapter.

Pure data: no framework import.  Citations are ``file:line`` in the installed distributions at
the pinned versions (``constraints/llamaindex.txt``), site-packages-relative.
"""

from __future__ import annotations

from adapters.protocol import OPERATIONS, Capabilities, Deviation, Variant

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
        op_timeout=SERVER_OP_TIMEOUT if variant.options.get("api") == "http" else None,
    )


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


HITL_DOC = (
    "https://developers.llamaindex.ai/python/llamaagents/workflows/human_in_the_loop "
    "(\"Stopping/Resuming Between Human Responses\": \"You can break out of the event loop and "
    "resume later. This is useful when you want to pause the workflow to wait for a human "
    "response asynchronously\"; the context is serialized by the caller with ctx.to_dict() at "
    "the pause and restored with Context.from_dict); llama-index-workflows 2.26.1 persists "
    "nothing itself (the context is whatever the caller saves)"
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
    return (Deviation("Replay", HITL_DOC, scope, **crashed),
            Deviation("StateMismatch", HITL_DOC, scope, **crashed))


def deviations(variant: Variant) -> tuple[Deviation, ...]:
    idle = _idle_snapshots() if variant.options.get("snapshot") == "idle" else ()
    if variant.options["gate"] != "wait":
        return idle
    return idle + (
        Deviation(
            "PrefixReplay",
            WAIT_DOC,
            "effects that the waiting step itself fires before its ctx.wait_for_event call, "
            "fired again when the answer arrives.  Unreachable in the generated workflows: a "
            "gate's step fires its one effect after the wait, so a replay re-runs only "
            "task_begins (no effect); a re-fire of any other task's effect is not covered",
            ops=frozenset({"resume", "fork", "race"}),  # the operations that answer a wait
        ),
    )
