"""What LlamaIndex Workflows promises about each resume property, in its own words.

Three persistence targets, three owners (``Variant.options["backend"]``):

- ``core``: llama-index-workflows has no checkpointer.  ``ctx.to_dict()`` returns a dict, the
  application stores it and restores it with ``Context.from_dict`` + ``run(ctx=...)``; the docs
  call that "durability you control".  What the framework documents is the mechanism (what a
  snapshot holds, that completed steps do not re-run from it, that a typed state is validated);
  the store, the snapshot schedule and any guard between calls are the caller's.
- ``server``: llama-agents-server keeps a tick journal, handler rows and the state in its own
  ``SqliteWorkflowStore``: the framework's store.
- ``dbos``: llama-agents-dbos journals every step transition in the DBOS system database: the
  framework's store.

Quotes are verbatim at the pinned releases (``constraints/llamaindex.txt``): the installed
packages' docstrings (``<dist> <version> <path in site-packages>:LINE``, docstring line breaks
joined with one space), then the documentation site (developers.llamaindex.ai, which is not
versioned by release: the page as stored, cited by URL and section).
"""

from adapters.protocol import Promise

_WF = "llama-index-workflows 2.26.1"
_SRV = "llama-agents-server 0.8.0"
_DBOS = "llama-agents-dbos 0.7.0"
_SITE = "https://developers.llamaindex.ai/python/llamaagents/workflows"
_DURABLE = f"{_SITE}/durable_workflows/"
_STATE = f"{_SITE}/managing_state/"
_DBOS_PAGE = f"{_SITE}/dbos/"

_CORE = {"backend": "core"}
_SERVER = {"backend": "server"}
_DBOS_OPTS = {"backend": "dbos"}

PROMISES = (
    # PC ------------------------------------------------------------------------------------------
    Promise(
        "PC",
        quote=("A run advances by reducing events in a controlled way, so its state is well "
               "defined at every step boundary."),
        source=f"{_DURABLE} ('Snapshot the context')",
    ),
    Promise(
        "PC",
        quote="Save the store, queues, buffers, active work and running flag.",
        source=f"{_WF} workflows/context/context.py:362 (Context.to_dict)",
        options=_CORE,
    ),
    Promise(
        "PC",
        quote=("This survives a restart, but not a crash during the run. You only have the state "
               "as of the last `to_dict()`. To survive a crash, snapshot as the run progresses."),
        source=f"{_DURABLE} ('Snapshot the context')",
        options={"backend": "core", "snapshot": "idle"},
    ),
    Promise(
        "PC",
        quote=("There is no built-in checkpointer to enable. The workflow stream emits an internal "
               "event every time a step changes state, and you snapshot when you see one finish."),
        source=f"{_DURABLE} ('The checkpoint loop')",
        options={"backend": "core", "snapshot": "step"},
    ),
    Promise(
        "PC",
        quote=("Persistence backend for handler state, events, and ticks. Defaults to "
               "``MemoryWorkflowStore``. Use ``SqliteWorkflowStore`` or ``PostgresWorkflowStore`` "
               "for durable persistence across restarts."),
        source=f"{_SRV} llama_agents/server/server.py:80-83 (WorkflowServer.__init__, workflow_store)",
        options=_SERVER,
    ),
    Promise(
        "PC",
        quote=("State is persisted to the database using SQL state stores, enabling state recovery "
               "across process restarts."),
        source=f"{_DBOS} llama_agents/dbos/runtime.py:321-322 (DBOSRuntime)",
        options=_DBOS_OPTS,
    ),
    # EO ------------------------------------------------------------------------------------------
    Promise(
        "EO",
        quote="Completed steps don't re-run, because their output is already in the restored state.",
        source=f"{_DURABLE} ('Snapshot the context')",
    ),
    Promise(
        "EO",
        quote="Resume previously running (non-idle) workflows from persistence.",
        source=(f"{_SRV} llama_agents/server/_runtime/persistence_runtime.py:334 "
                "(PersistenceDecorator._on_server_start: the run is rebuilt from its tick journal)"),
        options=_SERVER,
    ),
    Promise(
        "EO",
        quote=("Every step transition is persisted automatically, so a crashed workflow resumes "
               "exactly where it left off \u2014 no snapshot code required."),
        source=_DBOS_PAGE,
        options=_DBOS_OPTS,
    ),
    # FD ------------------------------------------------------------------------------------------
    Promise(
        "FD",
        why=("The server and the DBOS runtime expose no fork (no restart of a handler from an "
             "earlier tick or journal entry); a user who re-answers an earlier question on a new "
             "branch needs that branch to take the new answer, and gets it only by the core's "
             "caller-saved snapshots."),
    ),
    Promise(
        "FD",
        quote="Reconstruct a `Context` from a serialized payload.",
        source=(f"{_WF} workflows/context/context.py:404 (Context.from_dict: any stored snapshot, "
                "restored and answered, is a branch)"),
        options=_CORE,
    ),
    # CV ------------------------------------------------------------------------------------------
    Promise(
        "CV",
        quote="Get automatic validation of your state",
        source=f"{_STATE} (typed state: a Pydantic model, Context[MyState])",
    ),
    # CO ------------------------------------------------------------------------------------------
    Promise(
        "CO",
        why=("An answer sent to a paused handler (POST /events, send_event) releases whatever the "
             "workflow does next (a payment, an approval); a retried request, a second browser tab "
             "or a second replica must not make it happen twice."),
    ),
    Promise(
        "CO",
        why=("LlamaIndex core keeps no record that a question was answered: the answer is one more "
             "event sent into a context restored from the caller's stored snapshot, so two "
             "processes or a stale tab restoring the same snapshot each consume it, unless the "
             "caller's store lets only one of them through."),
        options=_CORE,
    ),
    # RD ------------------------------------------------------------------------------------------
    Promise(
        "RD",
        quote="No concurrent timeout tasks, ensuring deterministic ordering for replay",
        source=(f"{_WF} workflows/runtime/control_loop/runner.py:123 (_ControlLoopRunner: "
                "\"This control loop uses a sequential, deterministic design\", :120)"),
    ),
    # FI ------------------------------------------------------------------------------------------
    Promise(
        "FI",
        why=("The server and the DBOS runtime have one spelling, an answer sent to the handler "
             "(RETRY); with no fork there is nothing to tell it from, but a user who retries a "
             "request must not open a branch by accident."),
    ),
    Promise(
        "FI",
        why=("In the core, resuming and branching are the same calls, Context.from_dict(snapshot) "
             "then run(ctx=...) and send_event(answer): nothing tells a retry of the pending "
             "question from a new branch off an older snapshot, so an application that offers both "
             "must keep the difference in its own store."),
        options=_CORE,
    ),
    # LV ------------------------------------------------------------------------------------------
    Promise(
        "LV",
        quote="This page shows how to checkpoint that run and resume it after a restart.",
        source=_DURABLE,
    ),
    Promise(
        "LV",
        quote=("Seconds to wait after a workflow becomes idle before releasing it from memory. The "
               "workflow is automatically reloaded when new events arrive."),
        source=f"{_SRV} llama_agents/server/server.py:91-93 (WorkflowServer.__init__, idle_timeout)",
        options=_SERVER,
    ),
    Promise(
        "LV",
        quote=("When a replica restarts, DBOS automatically detects and relaunches any incomplete "
               "workflows belonging to its `executor_id`."),
        source=f"{_DBOS_PAGE} ('Crash recovery')",
        options=_DBOS_OPTS,
    ),
)
