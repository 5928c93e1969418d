"""Where a case's snapshots live, and how the adapter reads and alters them without the framework.

``FileStore``: one ``FileStatePersistence`` JSON file per harness thread in ``workdir`` (plus the
framework's ``<file>.pydantic-graph-persistence-lock`` while a write holds it), the thread -> file
mapping in a ``SideTable``: everything survives a killed worker.  ``MemoryStore``: one
``FullStatePersistence`` or ``SimpleStatePersistence`` object per thread, in a registry of this
worker process (the store dies with the process).

``query`` reads the store's *content*, not what the framework would accept: the raw JSON list for
files (so a value outside the state schema is reported, not hidden by a ValidationError), the
snapshot objects for memory.  A thread's persisted state is its latest snapshot: the state
(``done``, ``answers``) and, for a node snapshot, the node to run next; a gate node there (with or
without an answer: the gate has not completed) is the pending interrupt.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path

from adapters.protocol import Durable, HarnessError, StateView, Unreadable, Workflow
from adapters.files import SideTable

from .workflow import Built, State, node_json, parse_key, task_of_json

LOCK_SUFFIX = ".pydantic-graph-persistence-lock"  # persistence/file.py:158


def view_of(workflow: Workflow, done, answers, next_task) -> StateView:
    """The contract's view of one latest snapshot (``next_task``: ``None`` for an end snapshot;
    a shaped workflow's node key, ``ShapedBuilt.task_of``, for a shaped one)."""
    if not isinstance(done, list) or not isinstance(answers, dict):
        raise Unreadable(f"the state is not {{done: list, answers: dict}}: {done!r}, {answers!r}")
    if workflow.shape is not None:  # labels are strings: the next node's key is a question id
        parsed = parse_key(next_task)
        pending = (next_task,) if parsed is not None and parsed[2] >= 1 else None
        return StateView.of(workflow, done, answers, pending)
    pairs = {(int(k) if isinstance(k, str) and k.lstrip("-").isdigit() else k): v
             for k, v in answers.items()}
    pending = next_task if next_task in workflow.gates else None
    return StateView.of(workflow, done, pairs, pending)


def durable_of(view: StateView) -> Durable:
    return Durable(tuple(view.done), tuple(view.answers), view.pending)


_ASKING: dict = {}


def asking(cls):
    """``cls`` (a persistence class) with one hook: ``on_snapshot(node)`` is called where the
    framework persists the next node to run (``snapshot_node``: ``GraphRun.next`` after the
    previous node's ``record_run`` finished, and ``Graph.initialize``), *after* the write.

    pydantic-graph has no interrupt primitive: a gate "asks" when the unanswered gate node is
    persisted with status ``'created'`` and nothing runs it.  That one write is also the commit
    of the task before it (a snapshot holds the state *before* its node runs, so the previous
    task's results first become durable in it).  The case calls the gate's ``task_begins``
    right after it, where the adapter returns the pause: ``after_commit`` of the previous task
    fires after its commit, and a ``before_effect`` crash point at a gate fires with the pause
    already durable (there is no moment between the two in this framework).  A subclass
    overriding a public method of ``BaseStatePersistence``, as a user's custom persistence
    would: the framework's own code runs unchanged."""
    if cls not in _ASKING:
        class Asking(cls):
            on_snapshot = None

            async def snapshot_node(self, state, next_node):
                await super().snapshot_node(state, next_node)
                if self.on_snapshot is not None:
                    self.on_snapshot(next_node)

        Asking.__name__ = Asking.__qualname__ = cls.__name__
        _ASKING[cls] = Asking
    return _ASKING[cls]


class FileStore:
    def __init__(self, workdir: Path, built: Built):
        self.workdir, self.built = Path(workdir), built
        self.table = SideTable(self.workdir, "pydantic_graph_threads.json")

    # -- names --------------------------------------------------------------------------------
    def path(self, thread: str) -> Path | None:
        name = self.table.get(thread)
        return None if name is None else self.workdir / name

    def create(self, thread: str) -> Path:
        """Give a new thread its own file (named after it when the name is a safe file name)."""
        if self.table.get(thread) is not None:
            raise HarnessError(f"thread {thread!r} already has a store")
        safe = thread if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", thread) else uuid.uuid4().hex
        name = f"run-{safe}.json"
        self.table.set(thread, name)
        return self.workdir / name

    def persistence(self, thread: str, *, create: bool = False):
        from pydantic_graph.persistence.file import FileStatePersistence

        path = self.create(thread) if create else self.path(thread)
        if path is None:
            raise HarnessError(f"the adapter has no persistence file for thread {thread!r}")
        p = asking(FileStatePersistence)(path)
        p.set_graph_types(self.built.graph)
        return p

    def lock_path(self, thread: str) -> Path:
        path = self.path(thread)
        return path.parent / f"{path.name}{LOCK_SUFFIX}"

    # -- content ------------------------------------------------------------------------------
    def raw(self, thread: str) -> list | None:
        """The JSON list of snapshots as stored; ``None`` if nothing was ever written."""
        path = self.path(thread)
        if path is None or not path.exists():
            return None
        try:
            doc = json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError) as exc:
            raise Unreadable(f"{path.name}: not JSON: {exc}") from None
        if not isinstance(doc, list) or not all(isinstance(s, dict) for s in doc):
            raise Unreadable(f"{path.name}: not a list of snapshots")
        return doc

    def last_id(self, thread: str) -> str | None:
        """The ``id`` of the newest stored snapshot."""
        doc = self.raw(thread)
        return doc[-1].get("id") if doc else None

    def write_raw(self, thread: str, doc: list) -> None:
        # The framework writes with Path.write_bytes (file.py:138), indent 2; so do we.
        self.path(thread).write_bytes(json.dumps(doc, indent=2).encode())

    def query(self, thread: str) -> StateView:
        doc = self.raw(thread)
        if not doc:
            return StateView.of(self.built.workflow, (), {}, None)
        last = doc[-1]
        state = last.get("state")
        if not isinstance(state, dict):
            raise Unreadable("the latest snapshot has no state object")
        next_task = None
        if last.get("kind") == "node":
            next_task = self.built.key_of_json(last.get("node"))
        return view_of(self.built.workflow, state.get("done"), state.get("answers"), next_task)

    # -- tamper -------------------------------------------------------------------------------
    def corrupt(self, thread: str) -> None:
        """Truncate the file mid-way: bytes that no JSON decoder accepts."""
        path = self.path(thread)
        data = path.read_bytes()
        path.write_bytes(data[: max(1, len(data) // 2)])

    def stale_lock(self, thread: str) -> None:
        """Leave the lock file a SIGKILLed writer leaves (file.py:171-179 writes a token line)."""
        self.lock_path(thread).write_bytes(b"stale-lock-left-by-a-killed-writer\n")

    def invalid(self, thread: str) -> None:
        """Decodes, breaks the state schema: a string where ``done`` holds ints."""
        doc = self.raw(thread)
        doc[-1]["state"]["done"].append("<invalid>")
        self.write_raw(thread, doc)

    def forge(self, thread: str, forged: Durable) -> None:
        """Write ``forged`` as the latest snapshot: well-formed and schema-valid, edited in
        place (it keeps its ``id``, as an edit of the file on disk does)."""
        doc = self.raw(thread)
        last = doc[-1]
        wf, shape = self.built.workflow, self.built.shape
        state = {"done": list(forged.done), "answers": {str(t): v for t, v in forged.answers}}
        k = len(forged.done) + 1
        current = task_of_json(shape, last.get("node")) if last.get("kind") == "node" else None
        if k > wf.n:
            new = last if last.get("kind") == "end" else {
                "state": state, "result": {"data": None}, "ts": _now(), "kind": "end",
                "id": last.get("id"),
            }
        elif current == k:
            new = last
        else:
            node = node_json(shape, wf, k)
            new = {"state": state, "node": node, "start_ts": None, "duration": None,
                   "status": "created", "kind": "node", "id": last.get("id")}
        new["state"] = state
        doc[-1] = new
        self.write_raw(thread, doc)

    def unask(self, thread: str) -> None:
        """Clear the pending-gate record alone: the latest snapshot (the unanswered gate node,
        status ``'created'``) is marked ``'success'``, as if it had run; its state is kept."""
        doc = self.raw(thread)
        doc[-1]["status"] = "success"
        self.write_raw(thread, doc)

    # -- twin ---------------------------------------------------------------------------------
    def clone(self, dest: Path) -> None:
        """Every file of the store (JSON files, lock files, the side table), byte for byte."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        for item in sorted(self.workdir.iterdir()):
            if item.is_file():
                shutil.copyfile(item, dest / item.name)


_MEMORY: dict[str, dict] = {}  # workdir -> {thread: persistence object}; this worker only


class MemoryStore:
    def __init__(self, workdir: Path, built: Built, backend: str):
        self.built, self.backend = built, backend
        self.threads = _MEMORY.setdefault(str(Path(workdir).resolve()), {})

    def persistence(self, thread: str, *, create: bool = False):
        from pydantic_graph.persistence.in_mem import FullStatePersistence, SimpleStatePersistence

        if create:
            if thread in self.threads:
                raise HarnessError(f"thread {thread!r} already has a store")
            cls = FullStatePersistence if self.backend == "full" else SimpleStatePersistence
            p = asking(cls)()
            p.set_graph_types(self.built.graph)
            self.threads[thread] = p
        if thread not in self.threads:
            raise HarnessError(f"the adapter has no persistence object for {thread!r} in this process")
        return self.threads[thread]

    def snapshots(self, thread: str) -> list:
        """The stored snapshot objects: Full's ``history`` (in_mem.py:95), Simple's
        ``last_snapshot`` (in_mem.py:38; its ``load_all`` raises NotImplementedError)."""
        p = self.threads.get(thread)
        if p is None:
            return []
        if self.backend == "full":
            return p.history
        return [] if p.last_snapshot is None else [p.last_snapshot]

    def query(self, thread: str) -> StateView:
        snaps = self.snapshots(thread)
        if not snaps:
            return StateView.of(self.built.workflow, (), {}, None)
        last = snaps[-1]
        state = last.state
        next_task = None if last.kind == "end" else self.built.task_of(last.node)
        return view_of(self.built.workflow, getattr(state, "done", None),
                       getattr(state, "answers", None), next_task)

    def last_id(self, thread: str) -> str | None:
        snaps = self.snapshots(thread)
        return snaps[-1].id if snaps else None

    def _replace_last(self, thread: str, snapshot) -> None:
        p = self.threads[thread]
        if self.backend == "full":
            p.history[-1] = snapshot
        else:
            p.last_snapshot = snapshot

    def invalid(self, thread: str) -> None:
        self.snapshots(thread)[-1].state.done.append("<invalid>")

    def forge(self, thread: str, forged: Durable) -> None:
        from pydantic_graph import End
        from pydantic_graph.persistence import EndSnapshot, NodeSnapshot

        last = self.snapshots(thread)[-1]
        state = State(list(forged.done), dict(forged.answers))
        k = len(forged.done) + 1
        current = None if last.kind == "end" else self.built.task_of(last.node)
        if k > self.built.workflow.n:
            new = last if last.kind == "end" else EndSnapshot(state=state, result=End(None),
                                                              id=last.id)
        elif current == k:
            new = last
        else:
            new = NodeSnapshot(state=state, node=self.built.node(k), id=last.id)
        new.state = state
        self._replace_last(thread, new)

    def unask(self, thread: str) -> None:
        """``FileStore.unask`` on the stored objects: the gate node's snapshot marked run."""
        self.snapshots(thread)[-1].status = "success"


def _now() -> str:
    return datetime.now(tz=timezone.utc).isoformat().replace("+00:00", "Z")
