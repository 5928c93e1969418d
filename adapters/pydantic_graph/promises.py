"""What pydantic-graph 1.107.10 promises about each resume property, in its own words.

pydantic-graph 1.x persists a run as snapshots (``NodeSnapshot``: the state before a node runs and
the node to run; ``EndSnapshot``), written by the framework itself through a
``BaseStatePersistence`` (``FileStatePersistence``, ``FullStatePersistence``,
``SimpleStatePersistence``, or the user's subclass), with a status per snapshot that
``record_run`` checks before a node runs.  Most of what it documents is that mechanism, in the
installed package's docstrings (cited ``pydantic-graph 1.107.10 pydantic_graph/<path>:LINE``, line
breaks joined with one space).  The user guide's "State Persistence" section (docs/graph.md of
pydantic/pydantic-ai) is quoted once, for LV; the project's notes
(docs/frameworks/pydantic_graph.md) record that the section left the docs in 1.97, so it is
cited at the commit it was read at.
There is no interrupt primitive and no intent parameter: a gate is a node whose answer is unset.
"""

from adapters.protocol import Promise

_PKG = "pydantic-graph 1.107.10 pydantic_graph"
_DOCS = ("pydantic/pydantic-ai docs/graph.md@0171c1acaca714dfccddbaf4c042e9aa7198e495 "
         "('State Persistence'; https://ai.pydantic.dev/graph/ while the section was published)")

PROMISES = (
    # PC: a snapshot of the state is written before every node runs.
    Promise(
        "PC",
        quote="Snapshot the state of a graph, when the next step is to run a node.",
        source=f"{_PKG}/persistence/__init__.py:114 (BaseStatePersistence.snapshot_node)",
    ),
    Promise(
        "PC",
        quote=("Defaults to `True` so even if nodes or state are modified after the snapshot is "
               "taken, the persistence history will record the value at the time of the "
               "snapshot."),
        source=f"{_PKG}/persistence/in_mem.py:92-93 (FullStatePersistence.deep_copy)",
        options={"backend": "full"},
    ),
    Promise(
        "PC",
        quote="File based state persistence that hold graph run state in a JSON file.",
        source=f"{_PKG}/persistence/file.py:31 (FileStatePersistence)",
        options={"backend": "file"},
    ),
    # EO: a node snapshot runs once; the status check refuses a second run.
    Promise(
        "EO",
        quote="Record the run of the node, or error if the node is already running.",
        source=f"{_PKG}/persistence/__init__.py:154 (BaseStatePersistence.record_run)",
    ),
    # FD: a fork is a new run seeded with the checkpoint's state and the node carrying the answer.
    Promise(
        "FD",
        quote="Initialize a new graph run in persistence without running it.",
        source=f"{_PKG}/graph.py:319 (Graph.initialize, whose node and state the caller passes)",
    ),
    # CV: the file backend (and a custom store that builds the framework's type adapter) reads
    # and writes snapshots through a pydantic TypeAdapter of the graph's state type; the
    # in-memory ones keep Python objects and validate nothing.
    *(Promise(
        "CV",
        quote=("This can be used to create [type adapters][pydantic.TypeAdapter] for serializing "
               "and deserializing snapshots"),
        source=f"{_PKG}/persistence/__init__.py:218 (BaseStatePersistence.set_types; {where})",
        options={"backend": backend},
    ) for backend, where in (
        ("file", "FileStatePersistence builds the snapshot list's TypeAdapter there, "
                 "file.py:110-111, and validates every load with it, file.py:123"),
        ("custom", "the hook in which a custom persistence builds the graph's snapshot type "
                   "adapter"),
    )),
    *(Promise(
        "CV",
        why=("The in-memory persistences store the state object as the node left it and never "
             "validate it, so a value outside the graph's state type is kept and handed to the "
             "next node; a run resumed from such a state (or from a snapshot another part of the "
             "process edited) makes decisions on data its own type declaration forbids."),
        options={"backend": backend},
    ) for backend in ("full", "simple")),
    # CO: the snapshot status is the consume-once record.
    Promise(
        "CO",
        quote=("Error caused by trying to run a node that already has status `'running'`, "
               "`'success'`, or `'error'`."),
        source=f"{_PKG}/exceptions.py:52 (GraphNodeStatusError, raised by record_run)",
    ),
    Promise(
        "CO",
        quote="Lock a file by checking and writing a `.pydantic-graph-persistence-lock` to it.",
        source=(f"{_PKG}/persistence/file.py:151 (FileStatePersistence._lock, held by load_next, "
                "record_run and snapshot_node_if_new across processes)"),
        options={"backend": "file"},
    ),
    # RD: what a resume runs is read from the store alone.
    Promise(
        "RD",
        quote=("This method has similar functionality to "
               "[`iter`][pydantic_graph.graph.Graph.iter], but instead of passing the node to "
               "run, it will restore the node and state from "
               "state persistence."),
        source=f"{_PKG}/graph.py:271-272 (Graph.iter_from_persistence)",
    ),
    # FI: no intent parameter; the persistence object the caller passes carries it.
    Promise(
        "FI",
        quote=("You should use a different file for each graph run, but a single file should be "
               "reused for multiple steps of the same run."),
        source=f"{_PKG}/persistence/file.py:36-37 (FileStatePersistence.json_file)",
        options={"backend": "file"},
    ),
    Promise(
        "FI",
        quote=("Each instance of a `BaseStatePersistence` subclass should be used for a single "
               "graph run."),
        source=f"{_PKG}/persistence/__init__.py:109 (BaseStatePersistence)",
    ),
    # LV: the user guide's promise of resumption.
    Promise(
        "LV",
        quote=("To allow graph runs to be interrupted and resumed, `pydantic-graph` provides state "
               "persistence — a system for snapshotting the state of a graph run before and after "
               "each node is run, allowing a graph run to be resumed from any point in the graph."),
        source=_DOCS,
    ),
)
