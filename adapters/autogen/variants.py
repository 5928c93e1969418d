"""The AutoGen variants, what each can express, and the weaker semantics AutoGen documents.

Four axes, each a choice AutoGen leaves to its user (docs/frameworks/autogen.md explains them):

- team and gate shape: ``graphflow-loop`` (the gate re-enqueues itself; the loop-back edge in a
  group of its own), ``graphflow-loopany`` (the same with one shared ``"any"`` group),
  ``graphflow-split`` (an effect-free asker before the gate), ``swarm-handoff``
  (``HandoffTermination(target="user")``);
- save policy: ``hitl`` (save when ``run()`` returns) or ``step`` (``max_turns=1``, save per turn);
- store: ``json`` (one file per thread, latest only) or ``sqlite`` (append-only history).
"""

from __future__ import annotations

from adapters.protocol import OPERATIONS, Capabilities, Deviation, Tuning, Variant

SHAPES = (("graphflow", "loop"), ("graphflow", "loopany"), ("graphflow", "split"), ("swarm", "handoff"))
SAVES = ("hitl", "step")
STORES = ("json", "sqlite")

_SHAPE_TEXT = {
    "loop": "GraphFlow; the gate asks by re-enqueueing itself (conditional self-edge in an "
    "activation group of its own, DiGraphBuilder's loop-back spelling) and "
    "TextMentionTermination('__INTERRUPT__') ends run()",
    "loopany": "GraphFlow; as loop, but the forward edge and the self-edge share one "
    "activation_condition='any' group",
    "split": "GraphFlow; an effect-free node ask<g> asks before gate t<g>; no cycle",
    "handoff": "Swarm; the gate hands off to 'user', HandoffTermination(target='user') ends run(), "
    "the answer is HandoffMessage(source='user', target='t<g>')",
}
_SAVE_TEXT = {
    "hitl": "save_state() when run() returns (at the interrupt and at the end)",
    "step": "max_turns=1, save_state() after every turn",
}
_STORE_TEXT = {
    "json": "one JSON file per thread, replaced atomically (latest only)",
    "sqlite": "append-only SQLite table ckpt(seq, thread, label, state) (history)",
}

STATE_DOC = "https://microsoft.github.io/autogen/stable/user-guide/agentchat-user-guide/tutorial/state.html"
HITL_DOC = ("https://microsoft.github.io/autogen/stable/user-guide/agentchat-user-guide/tutorial/"
            "human-in-the-loop.html")
TAG = "microsoft/autogen python-v0.7.5 (83afbf5857aa)"
# Where AutoGen's documentation puts the team state in the caller's hands (docs/contract.md §5,
# "Whose defect"): the caller serializes the dict and stores it, so what happens to it between calls
# (two processes loading it, a forged copy) is the caller's, a D with what the caller must add.
CALLER_STATE = (
    f"{STATE_DOC} ('Persisting State (File or Database)'; {TAG} "
    "python/docs/src/user-guide/agentchat-user-guide/tutorial/state.ipynb:281): 'In many cases, we "
    "may want to persist the state of the team to disk (or a database) and load it back later. "
    "State is a dictionary that can be serialized to a file or written to a database.'; "
    f"{HITL_DOC} ('Providing Feedback to the Next Run'; {TAG} "
    "python/docs/src/user-guide/agentchat-user-guide/tutorial/human-in-the-loop.ipynb:178-179): "
    "'Once a team finishes a run, the application saves the state of the team, puts it in a "
    "persistent storage, and resumes the team when the feedback arrives.'"
)
SAVE_CAUTION = (
    "autogen-agentchat 0.7.5 autogen_agentchat/teams/_group_chat/_base_group_chat.py:775-777 "
    "(BaseGroupChat.save_state: 'When calling :func:`~autogen_agentchat.teams.BaseGroupChat."
    "save_state` on a team while it is running, the state may not be consistent and may result in "
    "an unexpected state. It is recommended to call this method when the team is not running or "
    "after it is stopped.')"
)
CONSUME_ONCE = (
    "a consume-once guard in the caller's store, taken before run(task=answer): claim the id of "
    "the message that asks (the newest message of the saved thread; AgentChat gives every message "
    "a uuid4 'id' that save_state keeps) with an atomic insert into a table keyed by that id (or a "
    "compare-and-swap on the stored row's version), and refuse the answer when the claim fails"
)
SIGNED = (
    "integrity protection on the stored dict: an HMAC (or signature) over the JSON text that "
    "save_state() returned, made with a key the application keeps out of the store, checked "
    "before load_state(); a state that fails the check is refused"
)
SAVE_EVERY_TURN = (
    "save after every turn: run the team with max_turns=1 and call save_state() after each run() "
    "(the step variants), so a crash loses at most the turn in progress; a save_state() after "
    "run() raised is no substitute (GraphFlow at 0.7.5: the failed node is already off the ready "
    "queue, and the next run reports completion without running it)"
)
NO_BAD_OUTPUT = (
    "a task's output is a StructuredMessage[TaskOutput], which AutoGen validates when it is built "
    "from data and again when load_state() reads it back; an out-of-schema output exists only "
    "when the agent opts out of validation (TaskOutput.model_construct, which pydantic documents "
    "as 'no other validation is performed'), so no output outside the schema reaches AutoGen "
    "through its own mechanism"
)


def all_variants() -> list[Variant]:
    out = []
    for team, gate in SHAPES:
        for save in SAVES:
            for store in STORES:
                out.append(
                    Variant(
                        name=f"{team}-{gate}-{save}-{store}",
                        description=f"{_SHAPE_TEXT[gate]}; {_SAVE_TEXT[save]}; {_STORE_TEXT[store]}",
                        options={
                            "team": team,
                            "gate": gate,
                            "save": save,
                            "store": store,
                            "resume": "fresh team, load_state(latest), run(task=answer) if it asks",
                            "recover": "fresh team, load_state(latest), re-issue the run's input",
                            "fork": (
                                "fresh team, load_state(state saved when the gate asked), "
                                "run(task=answer)" if store == "sqlite" else "n/a"
                            ),
                        },
                    )
                )
    return out


NO_INTENT = (
    "AutoGen has no resume API: resume and fork are both load_state(state) + run(task=answer); "
    "nothing in the call says FORK or RETRY"
)
NO_IDENTITY = (
    "AutoGen has no interrupt object, id or consume record: an answer is one more task message, "
    "and the only guard is the caller's check that the saved state's last message asks"
)
NO_FORK_JSON = (
    "the JSON store keeps only the latest saved state per thread: once a gate is answered, the "
    "state at which it asked is gone, so there is nothing to fork from"
)


NO_STALE_JSON = (
    "the JSON store keeps only the latest saved state per thread: once a gate is answered, the "
    "state at which it asked is gone from the store, so no handle to it survives there (the "
    "sqlite variants resume through that state, as a caller holding its copy would)"
)
# Shapes (docs/contract.md §7): the adapter's teams are linear chains, so no variant declares a
# shape feature (Capabilities.shapes stays empty) and a shaped corpus entry replays as ERROR with
# the reason below.  Swarm's parallel reason is AutoGen's; the others are this adapter's: AutoGen
# has a spelling (DiGraphBuilder fan-out/fan-in, conditional back edges), the adapter does not
# build it yet.
SHAPE_NOT_BUILT = (
    "the adapter builds linear chains only (workflow.py: loop_graph, split_graph, swarm_team): "
    "a shaped workflow has no team here yet; per feature, not_expressible['shape:<feature>'] "
    "says whether AutoGen or the adapter lacks it"
)
SHAPE_GRAPH = {
    "parallel": (
        "not built by this adapter: GraphFlow spells a stage of parallel tasks as DiGraphBuilder "
        "edges from one node to several and a join whose edges share activation='all', but the "
        "adapter's teams (loop_graph, split_graph) are chains, and its gate check (the saved "
        "thread's last message asks) and answer message (one resume: text per run) name no "
        "question among several pending"
    ),
    "loop": (
        "not built by this adapter: GraphFlow spells a looped stage as a conditional edge back "
        "to the stage's first node, its condition reading the visit's answer, but the adapter's "
        "teams are chains whose TaskOutput carries one output per task, with no visit label"
    ),
}
SHAPE_SWARM = {
    "parallel": (
        "Swarm has no fan-out or join: each turn hands off to exactly one agent "
        "(HandoffMessage.target), so a stage of parallel tasks has no spelling in it"
    ),
    "loop": (
        "not built by this adapter: a Swarm agent can hand off back to an earlier one, but the "
        "adapter's agents hand off forward only and their TaskOutput carries no visit label"
    ),
}
SHAPE_ASKING = {
    "questions": (
        "not built by this adapter: its task agent asks once (one __INTERRUPT__ t<g> message "
        "or handoff to 'user') and reads one answer (the newest resume: message of its buffer); "
        "several questions of one task have no answer routing in it"
    ),
    "pre_effect": (
        "not built by this adapter: its task agent fires its one effect after the answer; work "
        "before the question (and what a re-run of on_messages does to it) is not spelled"
    ),
}


def shape_reasons(variant: Variant) -> dict:
    """``not_expressible["shape:<feature>"]`` for every feature of ``refmodel.SHAPE_FEATURES``."""
    team = SHAPE_SWARM if variant.options["gate"] == "handoff" else SHAPE_GRAPH
    reasons = {"shape": SHAPE_NOT_BUILT}
    reasons.update({f"shape:{k}": v for k, v in {**team, **SHAPE_ASKING}.items()})
    return reasons


STALE_HANDLE = (
    "the state dict team.save_state() returned when the gate asked (its row in the store), "
    "held after the gate was answered: load_state(it) into a fresh team, run(task=answer)"
)


# Why corrupt bytes are n/a: AutoGen keeps no bytes.  save_state() returns a dict and
# load_state() takes one; the JSON text is the application's (as pydantic-graph's in-memory
# persistence keeps objects only).  Until this was declared, a corrupt row was refused by the
# application's json.loads and recorded as rejected: a refusal AutoGen never made.
NO_CORRUPT = (
    "AutoGen keeps no bytes of its own: save_state() returns a dict and load_state() takes one, "
    "and the JSON text in the store is the application's (json.dumps / json.loads in the docs' "
    "persistence recipe); bytes that do not decode fail in the application's json.loads before "
    "AutoGen is called, so no verdict on AutoGen can come from them; invalid and forged "
    "content does reach load_state"
)


def capabilities(variant: Variant) -> Capabilities:
    not_expressible = {"fork_retry_intent": NO_INTENT, "interrupt_identity": NO_IDENTITY,
                       "tamper:corrupt": NO_CORRUPT, "bad_output": NO_BAD_OUTPUT,
                       **shape_reasons(variant)}
    operations = set(OPERATIONS)
    stale_handle = STALE_HANDLE
    if variant.options["store"] == "json":
        operations -= {"fork", "stale_resume"}
        not_expressible.update(fork=NO_FORK_JSON, stale_resume=NO_STALE_JSON)
        stale_handle = ""
    return Capabilities(
        operations=frozenset(operations),
        tamper_hows=frozenset({"invalid", "forged"}),  # no bytes of AutoGen's to corrupt
        bad_output=False,  # NO_BAD_OUTPUT
        forced_race=True,  # racers call race_ready() after load_state, before anything is written
        max_racers=3,
        not_expressible=not_expressible,
        intents={"resume": "indistinguishable", "fork": "indistinguishable"},
        stale_handle=stale_handle,
        # The caller's store: one JSON file, or rows, per thread; a fork saves a copy of the
        # source's text under its own thread, so a tamper reaches that thread alone.
        tamper_scope="thread",
    )


def tuning(variant: Variant) -> Tuning:
    # Each operation is one asyncio.run with a team built for it, and the store is the case's
    # files or SQLite rows in workdir: nothing of a case outlives it in the process.  The
    # corpus replayed in one reused worker per variant observed what fresh workers did,
    # leaving no thread or file (benchmarks/history/round-21.md).
    return Tuning(reuse_worker=True)


def deviations(variant: Variant) -> list[Deviation]:
    out = [
        Deviation("LostUpdate", CALLER_STATE,
                  "two processes load the same saved state and both run(task=answer): AutoGen "
                  "has no lock, version or consume record; the stored dict and its concurrency "
                  "are the application's. Covered: race ops whose racers consumed one question "
                  "more than once.",
                  owner="caller", remedy=CONSUME_ONCE, ops=frozenset({"race"})),
        Deviation("DoubleConsume", CALLER_STATE,
                  "a caller resumes through a saved state it held since the gate asked "
                  "(load_state, run(task=answer)) after the gate was answered: the held dict is "
                  "the caller's. Covered: stale_resume ops that consumed the gate again; not: any "
                  "other DoubleConsume.",
                  owner="caller", remedy=CONSUME_ONCE, ops=frozenset({"stale_resume"}),
                  rules=frozenset({"stale-handle-consumed-again"})),
        Deviation("InvalidPersist", CALLER_STATE,
                  "a well-formed, schema-valid state the run never produced (forged) is stored in "
                  "the caller's store and loaded: load_state validates the form of a state, "
                  "nothing says who wrote it. Covered: forged tampers only; an invalid tamper used "
                  "silently is AutoGen's (load_state validates every message).",
                  owner="caller", remedy=SIGNED, tamper_hows=frozenset({"forged"})),
    ]
    if variant.options["save"] == "hitl":
        scope = (
            "hitl saves only when a run returns, the documented HITL loop: a crash inside a run "
            "loses every task that run completed. Covered: the state read after a crashed op is "
            "the state saved when the previous run returned (a prefix of the reference's), and "
            "recovery re-issues the crashed run's input and re-executes those tasks, firing "
            "their effects again (a gate answered again with the crashed run's own answer). Not "
            "covered: any difference outside a crashed run and the recovery that follows it."
        )
        crashed = {"after_crash_kinds": frozenset({"exception", "sigkill"})}
        out += [Deviation(c, f"{CALLER_STATE}; {SAVE_CAUTION}", scope, owner="caller",
                          remedy=SAVE_EVERY_TURN, **crashed)
                for c in ("Replay", "StateMismatch", "DoubleConsume")]
    return out
