"""What LangGraph 1.2.24 promises about each resume property, in its own words.

The variants (``adapters/langgraph/variants.py``) differ on the axes that change a promise:
``api`` (``graph``: a ``StateGraph``; ``func``: ``@entrypoint`` + ``@task``), ``durability``
(``sync`` / ``async`` / ``exit``), ``fork`` (``update`` / ``copy`` / ``travel`` / ``command``),
``resume`` (``mapstrict`` is the strict-resume spelling) and ``state`` (``pydantic``: a Pydantic
state model).  A promise narrowed with ``options`` applies to the variants holding every one of
those pairs; an entry without options is the one for every other variant (the third-party store
variants included: they carry the same axes).

Quotes are verbatim at the pinned release, in this order of preference:

- the installed wheels' docstrings and comments (``langgraph 1.2.24 <path in site-packages>:LINE``;
  docstring line breaks joined with one space);
- the documentation at ``https://docs.langchain.com/oss/python/langgraph/...``, as rendered (link
  markup dropped), read in its source in langchain-ai/docs (``src/oss/langgraph/<page>.mdx``, the
  commit named with each quote);
- the maintainers' tests in langchain-ai/langgraph at commit f09cfe8 (after release 1.2.11; the
  1.2.24 wheel ships no tests): ``libs/langgraph/tests/test_time_travel.py``.

Where LangGraph promises nothing (consume-once across processes, integrity of stored
checkpoints, validation of a TypedDict state), the entry says why a user needs the property.
"""

from adapters.protocol import Promise

_LG = "langgraph 1.2.24"
_TYPES = f"{_LG} langgraph/types.py"
_DOCS = "https://docs.langchain.com/oss/python/langgraph"
_DURABLE = (f"{_DOCS}/durable-execution (langchain-ai/docs src/oss/langgraph/"
            "durable-execution.mdx @158dd92)")
_TRAVEL_PAGE = (f"{_DOCS}/use-time-travel (langchain-ai/docs src/oss/langgraph/"
                "use-time-travel.mdx @10913d4)")
_GRAPH_API = (f"{_DOCS}/use-graph-api, 'Use pydantic models for graph state' (langchain-ai/docs "
              "src/oss/langgraph/use-graph-api.mdx @03fadd7)")
_TT_TESTS = "langchain-ai/langgraph f09cfe8 libs/langgraph/tests/test_time_travel.py"

PROMISES = (
    # PC: what is persisted, and when: the durability mode decides.
    Promise(
        "PC",
        quote="'sync': Changes are persisted synchronously before the next step starts.",
        source=f"{_TYPES}:102 (Durability docstring)",
        options={"durability": "sync"},
    ),
    Promise(
        "PC",
        quote="'async': Changes are persisted asynchronously while the next step executes.",
        source=f"{_TYPES}:103 (Durability docstring)",
        options={"durability": "async"},
    ),
    Promise(
        "PC",
        quote="'exit': Changes are persisted only when the graph exits.",
        source=f"{_TYPES}:104 (Durability docstring)",
        options={"durability": "exit"},
    ),
    Promise(
        "PC",
        quote=("LangGraph's built-in persistence layer provides durable execution for workflows, "
               "ensuring that the state of each execution step is saved to a durable store."),
        source=_DURABLE,
    ),
    # EO: completed work is not redone on resume.
    Promise(
        "EO",
        quote=("Upon resuming the workflow, compose_essay task will not be re-executed as its "
               "result is cached by the checkpointer."),
        source=f"{_LG} langgraph/func/__init__.py:340-341 (entrypoint docstring example)",
        options={"api": "func"},
    ),
    Promise(
        "EO",
        quote=("By preserving completed work, durable execution enables a process to resume "
               "without reprocessing previous steps -- even after a significant delay (e.g., a "
               "week later)."),
        source=_DURABLE,
    ),
    # FD: a fork from a checkpoint asks again and takes the new answer.
    Promise(
        "FD",
        quote=("Fork from the checkpoint where interrupt fired. Interrupt re-triggered because "
               "fork clears cached data. Resume with different answer."),
        source=f"{_TT_TESTS}:500-501 (test_fork_from_interrupt_checkpoint_refires)",
        options={"fork": "update"},
    ),
    Promise(
        "FD",
        quote=("The interrupt is re-triggered because __copy__ creates a new checkpoint without "
               "cached resume values. Resume with new answer to verify."),
        source=f"{_TT_TESTS}:2534-2535 (test_copy_fork_retriggers_interrupt)",
        options={"fork": "copy"},
    ),
    Promise(
        "FD",
        quote=("Replay from checkpoint before interrupt node, then resume with a new answer and "
               "verify the graph completes with the new value."),
        source=f"{_TT_TESTS}:288-289 (test_replay_from_before_interrupt_then_resume)",
        options={"fork": "travel"},
    ),
    Promise(
        "FD",
        why=("LangGraph has no fork call that takes a resume value: Command(resume=v) addressed "
             "at an older checkpoint_id is the resume call itself, and on a checkpoint the thread "
             "has moved past it hands the gate the answer recorded there, not v "
             "(langgraph/pregel/_loop.py:963-966, 987-990). A user who re-decides an approval "
             "from an earlier checkpoint needs the new branch to run the gate with the new "
             "answer, or to be told it did not."),
        options={"fork": "command"},
    ),
    Promise(
        "FD",
        quote=("Specifically, you can resume execution from a prior checkpoint — either replaying "
               "the same state or modifying it to explore alternatives. In all cases, resuming "
               "past execution produces a new fork in the history."),
        source=_TRAVEL_PAGE,
    ),
    # CV: a Pydantic state model is the one validator LangGraph offers; nothing else is checked.
    Promise(
        "CV",
        quote=("Here, we'll see how a Pydantic BaseModel can be used for state_schema to add "
               "run-time validation on inputs."),
        source=_GRAPH_API,
        options={"state": "pydantic"},
    ),
    Promise(
        "CV",
        why=("LangGraph validates no TypedDict state and no @task result (a StateGraph coerces a "
             "node's input only for a Pydantic or dataclass schema, langgraph/graph/state.py:"
             "1736-1750), and its savers keep no integrity record: the optional "
             "EncryptedSerializer authenticates only blobs it encrypted and loads any blob whose "
             "type has no cipher suffix as plain (langgraph-checkpoint 4.3.2 langgraph/checkpoint/"
             "serde/encrypted.py:26-36). A user still needs a checkpoint that another program, a "
             "bad deploy or an attacker edited to be refused, because resuming it fires real "
             "effects on a state the run never produced."),
    ),
    # CO: resume values belong to one task's interrupts; strict mode refuses unmatched answers.
    Promise(
        "CO",
        quote="Raised in strict resume mode when a resume doesn't match the pending interrupts.",
        source=f"{_LG} langgraph/errors.py:151 (UnknownInterruptError docstring)",
        options={"resume": "mapstrict"},
    ),
    Promise(
        "CO",
        quote=("If a node contains multiple `interrupt` calls, LangGraph matches resume values to "
               "interrupts based on their order in the node. This list of resume values is scoped "
               "to the specific task executing the node and is not shared across tasks."),
        source=f"{_TYPES}:930-932 (interrupt docstring)",
    ),
    # CO across processes: the OSS savers say nothing of k processes resuming one thread (the
    # double-texting strategies are the LangGraph Platform server's, not the library's).
    Promise(
        "CO",
        why=("LangGraph's open-source savers promise nothing about two processes resuming one "
             "thread: no lock, version check or claim of the interrupt is documented or made "
             "(double-texting strategies belong to the LangGraph Platform server). A user who "
             "runs more than one worker, or retries an approval request, needs one interrupt to "
             "be answered once, or the gated payment or message goes out twice."),
        categories=frozenset({"LostUpdate"}),
    ),
    # RD: recovery follows the recorded steps.
    Promise(
        "RD",
        quote=("Wrap any code that might yield non-deterministic results (e.g., random number "
               "generation) inside tasks or nodes. This ensures that, upon resumption, the "
               "workflow follows the exact recorded sequence of steps with the same outcomes."),
        source=f"{_DURABLE} ('Determinism and Consistent Replay')",
    ),
    # FI: resume and fork are different calls, except the Command(resume) spelling at an old id.
    Promise(
        "FI",
        quote=("Finished tasks rerun only on time travel, or on a resume at a checkpoint the "
               "thread has moved past. A resume addressed at the thread's latest checkpoint hands "
               "their writes back, as without an id."),
        source=f"{_LG} langgraph/pregel/_loop.py:987-989 (comment)",
        options={"fork": "command"},
    ),
    Promise(
        "FI",
        quote=("Replay (invoke with checkpoint_id): Re-executes nodes after the checkpoint. "
               "Interrupts re-fire on replay. - Fork (update_state then invoke): Creates a new "
               "checkpoint without cached pending writes. Nodes re-execute and interrupts DO "
               "re-fire."),
        source=f"{_TT_TESTS}:13-16 (module docstring)",
    ),
    # LV: recovery after a failure.
    Promise(
        "LV",
        quote=("This capability guarantees that if a workflow is interrupted -- whether by a "
               "system failure or for human-in-the-loop interactions -- it can be resumed from its "
               "last recorded state."),
        source=_DURABLE,
    ),
)
