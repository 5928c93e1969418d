"""What CrewAI Flows 1.15.30 promises about each resume property, in its own words.

CrewAI has two persistence mechanisms, and the variants use both (``Variant.options["backend"]``):
``@persist`` (``persist``: a ``FlowPersistence`` stores the flow's state after each method, and
``kickoff(inputs={"id"})`` / ``restore_from_state_id`` hydrate a run from the latest row) and
``CheckpointConfig`` (``json`` / ``sqlite``: event-driven snapshots of the whole runtime, restored
with ``Flow.from_checkpoint`` and branched with ``Flow.fork``).  A pending ``@human_feedback`` request
lives in the ``FlowPersistence`` in every variant and is answered with
``Flow.from_pending(flow_id).resume(v)``.  Promises that hold for one mechanism only are narrowed
with ``options``; an entry without options is the one for ``@persist`` and for every variant the
adapter does not list (the third-party store variants are ``@persist`` flows).

Quotes are verbatim at the pinned release, in this order of preference: the installed package's
docstrings (``crewai 1.15.30 <path in site-packages>:LINE``; docstring line breaks joined with one
space), then the documentation at ``https://docs.crewai.com/v1.15.30/...``.  The checkpointing
page's sentences were read on the v1.15.30 page itself; the other pages' sentences were read in
their source in crewAIInc/crewAI at commit f4731f5025f8 (``docs/v1.15.17/...``, the newest
versioned copy in that snapshot), where the same lines are unchanged from ``docs/v1.15.2`` to
``docs/edge``; the v1.15.29 and v1.15.34 copies of those pages were seen in part only.
"""

from adapters.protocol import Promise

_PKG = "crewai 1.15.30"
_RUNTIME = f"{_PKG} crewai/flow/runtime/__init__.py"
_REPO = "crewAIInc/crewAI f4731f5025f8"
_CK_PAGE = "https://docs.crewai.com/v1.15.30/en/concepts/checkpointing"
_STATE_PAGE = "https://docs.crewai.com/v1.15.30/en/guides/flows/mastering-flow-state"
_STATE_MDX = f"{_REPO} docs/v1.15.17/en/guides/flows/mastering-flow-state.mdx"
_HITL_MDX = f"{_REPO} docs/v1.15.17/en/learn/human-feedback-in-flows.mdx"

_JSON = {"backend": "json"}
_SQLITE = {"backend": "sqlite"}

PROMISES = (
    # PC: what is written, and when.
    Promise(
        "PC",
        quote=("The decorator is a pure metadata stamper: it records the persistence configuration "
               "on the class or method, and the Flow engine saves state after each persisted "
               "method completes, driven by the flow's definition."),
        source=f"{_PKG} crewai/flow/persistence/decorators.py:157-159 (persist docstring)",
    ),
    Promise(
        "PC",
        quote=("When set on a Crew, Flow, or Agent, checkpoints are written automatically "
               "whenever the specified event(s) fire."),
        source=f"{_PKG} crewai/state/checkpoint_config.py:163-164 (CheckpointConfig docstring)",
        options=_JSON,
    ),
    Promise(
        "PC",
        quote=("When set on a Crew, Flow, or Agent, checkpoints are written automatically "
               "whenever the specified event(s) fire."),
        source=f"{_PKG} crewai/state/checkpoint_config.py:163-164 (CheckpointConfig docstring)",
        options=_SQLITE,
    ),
    # EO: the checkpoint restore promises to skip completed work; @persist promises nothing.
    Promise(
        "EO",
        why=("@persist stores the state, not which methods finished: kickoff(inputs={'id'}) and "
             "restore_from_state_id run the flow again from its start methods over the loaded "
             "state (the state guide's counter examples show it), so a method that charges a card "
             "or sends a message fires again unless the application guards it."),
    ),
    Promise(
        "EO",
        quote=("Restoring rebuilds that state and continues. Completed tasks are skipped, memory "
               "and knowledge are rehydrated, and downstream work runs against the same outputs "
               "the original run produced."),
        source=f"{_CK_PAGE} ('What a checkpoint is')",
        options=_JSON,
    ),
    Promise(
        "EO",
        quote=("Restoring rebuilds that state and continues. Completed tasks are skipped, memory "
               "and knowledge are rehydrated, and downstream work runs against the same outputs "
               "the original run produced."),
        source=f"{_CK_PAGE} ('What a checkpoint is')",
        options=_SQLITE,
    ),
    # FD: what a fork starts from.
    Promise(
        "FD",
        quote=("restore_from_state_id: Optional UUID of a previously-persisted flow whose latest "
               "snapshot should hydrate this run's state."),
        source=f"{_RUNTIME}:2133-2134 (Flow.kickoff docstring)",
    ),
    Promise(
        "FD",
        quote=("Forking does the same restore under a new lineage, so the new branch and the "
               "original run can write checkpoints side by side without overwriting each other."),
        source=f"{_CK_PAGE} ('What a checkpoint is')",
        options=_JSON,
    ),
    Promise(
        "FD",
        quote=("Forking does the same restore under a new lineage, so the new branch and the "
               "original run can write checkpoints side by side without overwriting each other."),
        source=f"{_CK_PAGE} ('What a checkpoint is')",
        options=_SQLITE,
    ),
    # CV: the structured (pydantic) state the variants use; CrewAI validates it when it loads it
    # (Flow._restore_state / _initialize_state call model_validate), not when it saves it.
    Promise(
        "CV",
        quote="All fields are validated according to their defined types",
        source=(f"{_STATE_PAGE} ('Structured State Management', 'How It Works'; "
                f"{_STATE_MDX}:144)"),
    ),
    # CO: nothing promised; the HITL guide asks the application's handler to be idempotent.
    Promise(
        "CO",
        why=("A pending @human_feedback request is keyed by the flow id alone and answered by "
             "from_pending(flow_id).resume(v), which reads the request without claiming it; a "
             "retried webhook, a second browser tab or two workers answering one approval must "
             "release the gated action once (the HITL guide only asks that 'Your resume handler "
             f"should be idempotent for safety', {_HITL_MDX}:638)."),
    ),
    # RD: nothing promised.
    Promise(
        "RD",
        why=("A restored backup or a second host recovers from a copy of the same store; the "
             "`crewai checkpoint resume <location>` CLI picks the newest checkpoint by file mtime "
             "(JSON) or rowid (SQLite), so both copies must still pick the same checkpoint and "
             "re-run the same methods, or one of them repeats an effect the other does not."),
    ),
    # FI: distinct calls for the two intents.
    Promise(
        "FI",
        quote=("The new run is assigned a fresh ``state.id`` (or ``inputs[\"id\"]`` if pinned), so "
               "its ``@persist`` writes land under a separate persistence key and the source "
               "flow's history is preserved."),
        source=f"{_RUNTIME}:2134-2137 (Flow.kickoff docstring, restore_from_state_id)",
    ),
    Promise(
        "FI",
        quote="Fork a Flow from a checkpoint, creating a new execution branch.",
        source=f"{_RUNTIME}:713 (Flow.fork docstring; Flow.from_checkpoint, :662, restores)",
        options=_JSON,
    ),
    Promise(
        "FI",
        quote="Fork a Flow from a checkpoint, creating a new execution branch.",
        source=f"{_RUNTIME}:713 (Flow.fork docstring; Flow.from_checkpoint, :662, restores)",
        options=_SQLITE,
    ),
    # LV: recovery after a failure.
    Promise(
        "LV",
        quote=("One of CrewAI's most powerful features is the ability to persist flow state across "
               "executions. This enables workflows that can be paused, resumed, and even "
               "recovered after failures."),
        source=f"{_STATE_PAGE} ('Persisting Flow State'; {_STATE_MDX}:281)",
    ),
    Promise(
        "LV",
        quote=("Path or location of a checkpoint to restore from. When passed via a kickoff "
               "method's from_checkpoint parameter, the crew or flow resumes from this checkpoint."),
        source=f"{_PKG} crewai/state/checkpoint_config.py:191-193 (CheckpointConfig.restore_from)",
        options=_JSON,
    ),
    Promise(
        "LV",
        quote=("Path or location of a checkpoint to restore from. When passed via a kickoff "
               "method's from_checkpoint parameter, the crew or flow resumes from this checkpoint."),
        source=f"{_PKG} crewai/state/checkpoint_config.py:191-193 (CheckpointConfig.restore_from)",
        options=_SQLITE,
    ),
)
