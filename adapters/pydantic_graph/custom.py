"""Bring your own store (``resumefuzz fuzz pydantic-graph --store mypkg.persist:make_persistence``):
the variants, capabilities and store of a custom ``BaseStatePersistence``.

A pydantic-graph persistence holds **one run** (``FileStatePersistence(path)``, ``graph.iter(...,
persistence=p)``), so the factory is called once per harness thread: with a ``StoreContext``
whose ``workdir`` is that thread's own directory ``<case>/stores/<thread>`` (and whose
``store_id`` is stable for it).  The same directory reopens the same run, in any worker.

Reading a run back: through ``StoreHandle.read()`` when the factory gives one (the content as
stored, so a value outside the state schema is reported, not hidden by a ValidationError), else
through the persistence's own ``load_all()``.  A persistence whose ``load_all`` raises
``NotImplementedError`` keeps no history: fork (which restarts from an earlier gate's snapshot)
is n/a on it, and it needs ``read``.

Variant names: ``store-<name>-start_<s>-resume_<r>-recover_<c>``.  ``start``: ``iter`` (a new run
is ``graph.iter(first node, state, persistence=p)``, the usual spelling) or ``initialize``
(``graph.initialize(first node, p, state)`` then ``iter_from_persistence(p)``, the spelling for a
run set up to be continued later); the other axes as in ``variants.py``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import shutil
import uuid
from pathlib import Path

from adapters.protocol import (
    OPERATIONS,
    Capabilities,
    HarnessError,
    StateView,
    Unreadable,
    Variant,
)
from adapters.files import SideTable
from adapters.storeprotocol import StoreFactoryError, TamperTarget

from .store import view_of
from .variants import NO_IDENTITY
from .workflow import Built, task_of_json

CUSTOM_TABLE = (
    ("iter", "ifp", "ifp"),
    ("initialize", "ifp", "ifp"),
    ("initialize", "docs", "ifp"),
    ("initialize", "ifp", "initialize"),
)

START_WORDS = {
    "iter": "a new run is graph.iter(first node, state=State(), persistence=p)",
    "initialize": "a new run is graph.initialize(first node, p, state=State()) then "
                  "iter_from_persistence(p)",
}

NO_HISTORY = ("{who}: its load_all() raises NotImplementedError, so the snapshot at an earlier "
              "gate is gone once the run moves on; a fork restarts from that snapshot")


def custom_variants(factory) -> tuple[Variant, ...]:
    out = []
    for start, resume, recover in CUSTOM_TABLE:
        options = {"backend": "custom", "shape": "single", "start": start, "resume": resume,
                   "recover": recover, "fork": "initialize-new", "store": factory.name,
                   "store_factory": factory.path, "store_distribution": factory.distribution,
                   "store_version": factory.version}
        name = f"store-{factory.name}-start_{start}-resume_{resume}-recover_{recover}"
        who = f"persistence from {factory.path} ({factory.distribution} {factory.version})"
        out.append(Variant(name, describe(options, who), options))
    return tuple(out)


def describe(options: dict, who: str) -> str:
    """A custom variant in words, its persistence named ``who`` (a reproduction script names
    the store's class, not the factory it never imports)."""
    return (f"{who}, one per run; {START_WORDS[options['start']]}; resume: {options['resume']}; "
            f"recover: {options['recover']}")


def check_persistence(store) -> dict:
    """The probe's check: a ``BaseStatePersistence``, and whether its ``load_all`` works."""
    from pydantic_graph.persistence import BaseStatePersistence

    if not isinstance(store, BaseStatePersistence):
        raise TypeError(f"the factory returned a {type(store).__name__}, not a "
                        "pydantic_graph.persistence.BaseStatePersistence")
    from adapters.protocol import Workflow

    from .workflow import build

    store.set_graph_types(build("single", Workflow(1)).graph)
    try:
        asyncio.run(_await(store.load_all()))
    except NotImplementedError:
        return {"history": False}
    return {"history": True}


async def _await(awaitable):
    return await awaitable


def capabilities(factory, probe) -> Capabilities:
    from adapters.storefactory import not_expressible as store_na

    na = {"interrupt_identity": NO_IDENTITY, **store_na(factory, probe)}
    if not probe.info.get("history", True):
        na["fork"] = NO_HISTORY.format(who=f"{type_name(probe)} ({factory.distribution} "
                                           f"{factory.version})")
    operations = frozenset(op for op in OPERATIONS if op not in na)
    crash_kinds = frozenset({"exception"} if "sigkill" in na else {"exception", "sigkill"})
    return Capabilities(operations=operations, crash_kinds=crash_kinds, forced_race=False,
                        max_racers=3, tamper_hows=probe.tamper_hows,
                        tamper_scope=probe.tamper_scope, not_expressible=na,
                        intents={"resume": "RETRY", "fork": "FORK"})


def type_name(probe) -> str:
    return probe.store_type.rsplit(".", 1)[-1]


def require_reader(factory, probe) -> None:
    """A run the harness cannot read back cannot be judged: fail before anything runs."""
    if not probe.info.get("history", True) and not probe.read:
        raise StoreFactoryError(
            f"--store {factory.path!r}: {type_name(probe)}.load_all() raises "
            "NotImplementedError and the factory returned no StoreHandle.read: resumefuzz "
            "cannot read a run's state back")


_OBSERVED = None


def observed(inner):
    """``inner`` (the user's persistence) inside a ``BaseStatePersistence`` that forwards every
    public method to it and calls ``on_snapshot(node)`` after ``snapshot_node``, where the
    framework persists the next node to run (``store.asking``'s hook, for a persistence object
    we did not build and so cannot subclass).  The class is built on first use: pydantic-graph
    is imported in workers, never at import time."""
    global _OBSERVED
    if _OBSERVED is None:
        from pydantic_graph.persistence import BaseStatePersistence

        class Forwarding(BaseStatePersistence):
            def __init__(self, inner):
                self.inner, self.on_snapshot, self.last_id = inner, None, None

            async def snapshot_node(self, state, next_node):
                await self.inner.snapshot_node(state, next_node)
                # The id the snapshot was stored under: NodeSnapshot takes the node's own
                # (BaseNode.get_snapshot_id), so it is known without reading the store back.
                self.last_id = next_node.get_snapshot_id()
                if self.on_snapshot is not None:
                    self.on_snapshot(next_node)

            async def snapshot_node_if_new(self, snapshot_id, state, next_node):
                await self.inner.snapshot_node_if_new(snapshot_id, state, next_node)

            async def snapshot_end(self, state, end):
                await self.inner.snapshot_end(state, end)

            def record_run(self, snapshot_id):
                return self.inner.record_run(snapshot_id)

            async def load_next(self):
                return await self.inner.load_next()

            async def load_all(self):
                return await self.inner.load_all()

            def set_graph_types(self, graph):
                self.inner.set_graph_types(graph)

            def should_set_types(self):
                return self.inner.should_set_types()

            def set_types(self, state_type, run_end_type):
                self.inner.set_types(state_type, run_end_type)

        Forwarding.__name__ = Forwarding.__qualname__ = "Observed"
        _OBSERVED = Forwarding
    return _OBSERVED(inner)


class CustomStore:
    """One factory handle per harness thread, each on ``workdir/stores/<dir>`` (the thread ->
    directory mapping in a ``SideTable``, so it survives a killed worker)."""

    def __init__(self, workdir: Path, built: Built, factory_path: str):
        from adapters import storefactory

        self.workdir, self.built = Path(workdir), built
        self.factory = storefactory.load(factory_path)
        self.table = SideTable(self.workdir, "pydantic_graph_stores.json")
        self.handles: dict = {}
        self.observed: dict = {}  # thread -> the forwarding persistence last handed out

    # -- handles ------------------------------------------------------------------------------
    def thread_dir(self, thread: str, *, create: bool = False) -> Path | None:
        name = self.table.get(thread)
        if name is None and create:
            safe = thread if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", thread) else uuid.uuid4().hex
            name = f"run-{safe}"
            self.table.set(thread, name)
        return None if name is None else self.workdir / "stores" / name

    def handle(self, thread: str, *, create: bool = False):
        from adapters import storefactory

        if thread not in self.handles:
            if create and self.table.get(thread) is not None:
                raise HarnessError(f"thread {thread!r} already has a store")
            path = self.thread_dir(thread, create=create)
            if path is None:
                raise HarnessError(f"the adapter has no store for thread {thread!r}")
            path.mkdir(parents=True, exist_ok=True)
            self.handles[thread] = storefactory.open_handle(self.factory, path, "pydantic-graph")
        elif create:
            raise HarnessError(f"thread {thread!r} already has a store")
        return self.handles[thread]

    def persistence(self, thread: str, *, create: bool = False):
        p = observed(self.handle(thread, create=create).store)
        p.set_graph_types(self.built.graph)
        self.observed[thread] = p
        return p

    def last_id(self, thread: str) -> str | None:
        """The id of the snapshot this worker last stored for ``thread`` through
        ``snapshot_node`` (the case asks it right after the write, in ``on_snapshot``)."""
        p = self.observed.get(thread)
        return None if p is None else p.last_id

    # -- content ------------------------------------------------------------------------------
    async def last(self, thread: str):
        """The latest snapshot as a framework object (recover): ``load_all`` or ``read``."""
        handle = self.handle(thread)
        if handle.read is None:
            snapshots = await handle.store.load_all()
            return snapshots[-1] if snapshots else None
        from pydantic_graph.persistence.in_mem import FullStatePersistence

        result = handle.read()
        raw = _snapshot_dicts(await result if inspect.isawaitable(result) else result)
        if not raw:
            return None
        # Decoded by the framework's own public JSON reader (FullStatePersistence.load_json),
        # which builds the snapshot schema of this graph's node classes.
        decoder = FullStatePersistence()
        decoder.set_graph_types(self.built.graph)
        decoder.load_json(json.dumps(raw[-1:]).encode())
        return decoder.history[-1]

    def _raw(self, handle) -> list:
        result = handle.read()
        if inspect.isawaitable(result):
            result = asyncio.run(_await(result))
        return _snapshot_dicts(result)

    def query(self, thread: str) -> StateView:
        wf = self.built.workflow
        if self.table.get(thread) is None:
            return StateView.of(wf, (), {}, None)
        handle = self.handle(thread)
        if handle.read is not None:
            try:
                doc = self._raw(handle)
            except Unreadable:
                raise
            except Exception as exc:  # noqa: BLE001 - whatever the store says about its data
                raise Unreadable(f"StoreHandle.read(): {type(exc).__name__}: {exc}") from None
            if not doc:
                return StateView.of(wf, (), {}, None)
            last = doc[-1]
            state = last.get("state")
            if not isinstance(state, dict):
                raise Unreadable("the latest snapshot has no state object")
            next_task = (task_of_json(self.built.shape, last.get("node"))
                         if last.get("kind") == "node" else None)
            return view_of(wf, state.get("done"), state.get("answers"), next_task)
        p = self.persistence(thread)
        try:
            snapshots = asyncio.run(_await(p.load_all()))
        except Exception as exc:  # noqa: BLE001 - a refusal to decode is what tamper shows
            raise Unreadable(f"load_all(): {type(exc).__name__}: {str(exc)[:200]}") from None
        if not snapshots:
            return StateView.of(wf, (), {}, None)
        last = snapshots[-1]
        next_task = None if last.kind == "end" else self.built.task_of(last.node)
        return view_of(wf, getattr(last.state, "done", None), getattr(last.state, "answers", None),
                       next_task)

    # -- tamper and twin ----------------------------------------------------------------------
    def tamper(self, thread: str, how: str) -> str:
        from adapters import storefactory

        handle = self.handle(thread)
        if handle.tamper is None or how not in handle.tamper_hows:
            raise HarnessError(f"the store factory {self.factory.path} offers no tamper {how!r}")
        name = self.table.get(thread)
        line = storefactory.call(None, handle.tamper, TamperTarget(how=how, thread_id=name))
        return f"{how}: {line or f'run {name} damaged by the store factory'}"

    def clone(self, dest: Path) -> None:
        """The case's side tables (every file at the top of ``workdir``, as ``FileStore.clone``
        copies them), then each run's data through the factory's ``clone``."""
        from adapters import storefactory

        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        threads = self.table.load()
        for thread, name in sorted(threads.items()):
            handle = self.handle(thread)
            if handle.clone is None:
                raise HarnessError(f"the store factory {self.factory.path} offers no clone")
            target = dest / "stores" / name
            target.mkdir(parents=True, exist_ok=True)
            storefactory.call(None, handle.clone, storefactory.context(target, "pydantic-graph"))
        for item in sorted(self.workdir.iterdir()):
            if item.is_file():
                shutil.copyfile(item, dest / item.name)

    def close(self) -> None:
        from adapters import storefactory

        for handle in self.handles.values():
            try:
                storefactory.call(None, handle.close)
            except Exception:  # noqa: BLE001 - closing is best effort; the data stays
                pass
        self.handles.clear()


def _snapshot_dicts(result) -> list:
    """What ``StoreHandle.read()`` returned, as a list of snapshot dicts, oldest first."""
    if result is None:
        return []
    doc = result if isinstance(result, list) else [result]
    if not all(isinstance(s, dict) for s in doc):
        raise Unreadable("StoreHandle.read() returned something other than snapshot dicts")
    return doc


def cleanup(workdir: Path, factory_path: str) -> None:
    """Every run's ``StoreHandle.cleanup`` (idempotent), for the case in ``workdir``."""
    from adapters import storefactory

    factory = storefactory.load(factory_path)
    table = SideTable(Path(workdir), "pydantic_graph_stores.json")
    for name in sorted(set(table.load().values())):
        path = Path(workdir) / "stores" / name
        if not path.exists():
            continue
        handle = storefactory.open_handle(factory, path, "pydantic-graph")
        try:
            storefactory.call(None, handle.cleanup)
        finally:
            storefactory.call(None, handle.close)


# What a store finding points at in a ``BaseStatePersistence`` (``Adapter.store_methods``); keys:
# categories, and "stale-read" for a store that reads back older data.
STORE_METHODS = {
    "StateMismatch": "snapshot_node / snapshot_end / load_all: the snapshots saved must be what "
                     "load_all returns, in order, with their statuses",
    "Replay": "record_run / load_next: a node recorded as run (record_run) must not be handed "
              "out again by load_next",
    "PrefixReplay": "record_run / load_next: a node recorded as run (record_run) must not be "
                    "handed out again by load_next",
    "DoubleConsume": "load_next: the next snapshot is handed out once (marked pending); a "
                     "second caller must not get it too",
    "LostUpdate": "load_next: the next snapshot is handed out once (marked pending); two "
                  "callers at once must not both get it",
    "ForkIgnore": "snapshot_node_if_new / load_all: a new run's snapshots, apart from its "
                  "source's",
    "Stuck": "load_next / record_run: after a crash, the snapshot a run died in must be "
             "loadable again",
    "InvalidPersist": "load_all / load_next (the type adapter set_types gave): what is read "
                      "back must validate as what was saved",
    "NondetRecovery": "the StoreHandle's clone / load_all: two copies of one store must read "
                      "back the same",
    "stale-read": "load_all / load_next: the snapshots read back must be the newest saved",
}
