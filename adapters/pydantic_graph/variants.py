"""The pydantic-graph 1.107.x variants, what each can express, and what the framework documents.

Axes (each a visible option, never a hidden choice):

- ``backend``: ``file`` (``FileStatePersistence``, a JSON file plus its lock file), ``full``
  (``FullStatePersistence``, in memory, full history, ``deep_copy=True``), ``simple``
  (``SimpleStatePersistence``, in memory, last snapshot only; the default when none is passed).
- ``shape``: ``single`` parametrised node class or N ``classes`` (the persisted schema differs);
  only the file backend serialises, so the in-memory backends use ``single``.
- ``resume``: ``ifp`` (``iter_from_persistence``, the answer set on the restored gate node) or
  ``docs`` (the docs' human-in-the-loop idiom: ``load_next()``, then ``graph.iter(Gate(answer=v),
  state=snapshot.state)``).
- ``recover``: ``ifp`` (``iter_from_persistence``) or ``initialize`` (the user workaround:
  ``graph.initialize(<last node>, state=<last state>)`` then ``iter_from_persistence``).
- ``fork``: ``initialize-new`` (a new persistence object seeded by ``graph.initialize`` with the
  gate checkpoint's state and the fork's answer, then ``iter_from_persistence``).
- ``corrupt`` (file only): how ``tamper(corrupt)`` breaks the store, ``truncate`` (bytes that do
  not decode) or ``stale_lock`` (the lock file a killed writer leaves behind).
"""

from __future__ import annotations

from adapters.protocol import OPERATIONS, Capabilities, Deviation, Tuning, Variant

MEMORY_REASON = (
    "the {cls} store is a Python object in the worker process: it dies with a SIGKILLed worker "
    "and cannot be shared with, or copied to, another process"
)


def _variant(backend: str, shape: str, resume: str, recover: str, corrupt: str | None) -> Variant:
    name = f"{backend}-{shape}-resume_{resume}-recover_{recover}"
    if corrupt == "stale_lock":
        name += "-stale_lock"
    options = {"backend": backend, "shape": shape, "resume": resume, "recover": recover,
               "fork": "n/a" if backend == "simple" else "initialize-new"}
    if corrupt:
        options["corrupt"] = corrupt
    resume_words = {"ifp": "iter_from_persistence with the answer on the restored gate node",
                    "docs": "load_next() then graph.iter(Gate(answer=v), state=snapshot.state)"}
    recover_words = {
        "ifp": "iter_from_persistence",
        "initialize": "graph.initialize(last node, last state) + iter_from_persistence",
    }
    description = (f"{backend} persistence, {shape} node shape; resume: {resume_words[resume]}; "
                   f"recover: {recover_words[recover]}")
    if corrupt == "stale_lock":
        description += "; tamper(corrupt) leaves a stale lock file"
    return Variant(name, description, options)


def all_variants() -> list[Variant]:
    out = []
    for shape in ("single", "classes"):
        for resume in ("ifp", "docs"):
            for recover in ("ifp", "initialize"):
                out.append(_variant("file", shape, resume, recover, "truncate"))
    out.append(_variant("file", "single", "ifp", "ifp", "stale_lock"))
    for backend in ("full", "simple"):
        for resume in ("ifp", "docs"):
            for recover in ("ifp", "initialize"):
                out.append(_variant(backend, "single", resume, recover, None))
    return out


NO_IDENTITY = (
    "pydantic-graph has no interrupt object: a gate is a node whose answer is unset, and a "
    "resume sets the answer on whatever node iter_from_persistence / load_next restores "
    "(graph.py:288-293, file.py:96-104), so a resume cannot name the interrupt it answers"
)


STALE_HANDLES = {
    "docs": "the snapshot load_next() returned while the gate was next (the docs' idiom), "
            "answered since: graph.iter(Gate(answer=v), state=snapshot.state, persistence=p)",
    "ifp": "the persistence object itself (iter_from_persistence takes no snapshot): the "
           "resume call again, iter_from_persistence(p) with the answer on the restored gate",
}
NO_STALE_SIMPLE = (
    "SimpleStatePersistence keeps only the last snapshot (persistence/in_mem.py:32-38): the "
    "snapshot at which an answered gate was next is gone, so the docs' idiom has no handle to "
    "it left (the ifp spelling's handle, the persistence, is exercised)"
)


NO_VALIDATION_IN_MEMORY = (
    "FullStatePersistence and SimpleStatePersistence keep the state object the node left and "
    "validate nothing (persistence/in_mem.py:41-42, :101-106; no TypeAdapter runs on an in-memory "
    "path unless the caller calls dump_json/load_json): a value outside the state type breaks "
    "no mechanism of pydantic-graph's"
)
NO_INTEGRITY = (
    "pydantic-graph 1.x has no integrity protection of snapshots (no checksum, signature or MAC "
    "in pydantic_graph/persistence/; the in-memory stores are plain objects of the caller's "
    "process): a well-formed, schema-valid snapshot it did not write cannot be told from its own"
)


NO_PARALLEL = (
    "pydantic-graph 1.x runs one node at a time: a node's run returns the one next node "
    "(basenode.py:49, BaseNode.run -> BaseNode | End; graph.py:667, GraphRun.next: 'Manually "
    "drive the graph run by passing in the node you want to run next'), and a run's "
    "persistence holds one next node "
    "per snapshot; parallel branches and joins belong to the builder API (GraphBuilder, Fork, "
    "Join: graph_builder.py, join.py; pydantic_graph.beta in earlier 1.x), which has no state "
    "persistence to resume from (only graph.py, the legacy runner, persists)"
)
NO_SHAPES_CLASSES = (
    "the classes node shape (one class per task) is built for linear chains only; shaped "
    "workflows run on the single node shape's variants"
)


def shapes(variant: Variant) -> tuple[frozenset, dict]:
    """The shape features a built-in variant runs (``workflow.shaped_graph``) and why the rest
    are not expressible."""
    reasons = {"shape:parallel": NO_PARALLEL}
    if variant.options["shape"] != "single":
        reasons.update({f"shape:{f}": NO_SHAPES_CLASSES
                        for f in ("questions", "pre_effect", "loop")})
        return frozenset(), reasons
    return frozenset({"questions", "pre_effect", "loop"}), reasons


def capabilities(variant: Variant) -> Capabilities:
    backend = variant.options["backend"]
    shaped, shape_reasons = shapes(variant)
    intents = {"resume": "RETRY", "fork": "FORK"}
    handle = STALE_HANDLES[variant.options["resume"]]
    if backend == "file":
        # One JSON file (and lock file) per thread, holding its whole history: a truncation
        # damages every snapshot of the thread, so a fork from any of them reads damaged bytes;
        # a fork initializes a file of its own, which a later tamper of its source leaves intact.
        return Capabilities(forced_race=False, max_racers=3, intents=intents,
                            operations=Capabilities().operations | {"stale_resume"},
                            stale_handle=handle,
                            not_expressible={"interrupt_identity": NO_IDENTITY,
                                             "tamper:forged": NO_INTEGRITY, **shape_reasons},
                            shapes=shaped,
                            tamper_hows=frozenset({"corrupt", "invalid"}),
                            tamper_scope="history")
    cls = "FullStatePersistence" if backend == "full" else "SimpleStatePersistence"
    reason = MEMORY_REASON.format(cls=cls)
    not_expressible = {"race": reason, "twin_recover": reason, "interrupt_identity": NO_IDENTITY,
                       "bad_output": NO_VALIDATION_IN_MEMORY, "tamper:forged": NO_INTEGRITY,
                       **shape_reasons}
    ops = set(OPERATIONS) - {"race", "twin_recover"}
    if backend == "simple":
        not_expressible["fork"] = (
            "SimpleStatePersistence keeps only the last snapshot (persistence/in_mem.py:32-38): "
            "the checkpoint at which an earlier gate was pending is gone"
        )
        ops.discard("fork")
        if variant.options["resume"] == "docs":
            ops.discard("stale_resume")
            not_expressible["stale_resume"] = NO_STALE_SIMPLE
            handle = ""
    return Capabilities(
        operations=frozenset(ops),
        stale_handle=handle,
        crash_kinds=frozenset({"exception"}),
        bad_output=False,  # NO_VALIDATION_IN_MEMORY
        tamper_hows=frozenset({"invalid"}),  # no bytes to corrupt (objects only); NO_INTEGRITY
        not_expressible=not_expressible,
        intents=intents,
        tamper_scope="thread",  # one persistence object per thread, in this worker
        shapes=shaped,
    )


def tuning(variant: Variant) -> Tuning:
    """The built-in backends' (a custom store keeps the defaults)."""
    # The file backend's files are in workdir; the in-memory backends' persistence objects are
    # the case's, gone with it.  Each operation is its own asyncio.run.  The corpus replayed in
    # one reused worker per variant observed what fresh workers did, leaving no thread or file
    # (benchmarks/history/round-21.md).  Nothing outside workdir: no cleanup.
    return Tuning(reuse_worker=True, needs_cleanup=False)


DOCS_IDIOM = (
    "pydantic/pydantic-ai docs/graph.md@0171c1acaca714dfccddbaf4c042e9aa7198e495 (State "
    "Persistence, 'Example: Human in the loop', ai_q_and_a_run.py): \"if snapshot := await "
    "persistence.load_next():  # (4)!\" ... \"else:\" / \"state = QuestionState()\" / "
    "\"node = Ask()  # (5)!\" then \"async with question_graph.iter(node, state=state, "
    "persistence=persistence) as run:\"; annotation (5): \"If the graph hasn't been run before, "
    "we create a new `QuestionState` and start with the `Ask` node.\""
)


def deviations(variant: Variant) -> list[Deviation]:
    """Only the docs' resume idiom's own branch: pydantic-graph's API documents no weaker
    resume semantics (docs/frameworks)."""
    if variant.options.get("resume") != "docs":
        return []
    fresh = ("resume spelled as the docs' question graph example on a run whose load_next() "
             "returns None (a finished run): the example's else-branch starts a fresh run from "
             "the first node on the same persistence")
    return [
        Deviation("PrefixReplay", DOCS_IDIOM, fresh + ", so completed tasks fire again",
                  ops=frozenset({"resume"})),
        Deviation("StateMismatch", DOCS_IDIOM,
                  fresh + ", whose first snapshot (a gate asked again) becomes the run's latest "
                  "state", ops=frozenset({"resume"})),
        # A shaped workflow (docs/contract.md §7): the fresh run asks its first question again,
        # answered in the finished run; classification names that before the state it leaves.
        Deviation("DoubleConsume", DOCS_IDIOM,
                  fresh + ", which asks the workflow's first question again (a question the "
                  "finished run answered)", ops=frozenset({"resume"}),
                  rules=frozenset({"answered-question-asked-again"})),
    ]
