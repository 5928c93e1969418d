"""One case on pydantic-graph 1.107.x: each operation spelled the way a user of the API writes it.

The driver (``_drive``) is the gate idiom of the docs' human-in-the-loop example: run nodes with
``GraphRun.next()`` and stop when the next node is a gate without an answer.  ``next()`` has then
already persisted that node with status ``'created'`` (graph.py:745-747), and nothing runs it, so
the interrupt is durable.  A gate at task 1 has no node before it to do that: ``start`` persists
it with ``graph.initialize`` (graph.py:311-334), the documented way to set up a run for later.

``iter_from_persistence`` restores the *first* ``'created'`` snapshot and marks it ``'pending'``
(file.py:96-104, in_mem.py:79, :143-146); nothing hands out a ``'pending'`` snapshot again.  So a
caller that loads the unanswered gate without answering it strands the run.  A user who knows the
run waits for input does not do that, and neither does ``recover`` here: when the latest snapshot
is an unanswered gate still ``'created'``, recover reports ``interrupted`` and touches nothing.

A racer (a ``Resume`` naming the gate it was shown, ``op.gate``) answers that question only:
the snapshot that asked it, by its id (kept when the gate asked, before the race began: the one a
racer loads before the start barrier), run as ``iter_from_persistence`` runs the snapshot
``load_next`` hands out (``set_snapshot_id``, then ``GraphRun`` from that snapshot's state,
graph.py:289-307), through ``graph.iter``.  ``GraphRun.next`` then claims that snapshot by id
(``record_run``), whose status check refuses one another racer already ran
(``GraphNodeStatusError``, file.py:69-81, in_mem.py:56-61, :121-129).  ``load_next`` would hand
a racer that comes once the other has returned the *next* gate's snapshot instead, and its answer
would answer a question it was never shown.

Every operation runs in its own ``asyncio.run`` (the framework is async only), with the host's
warning filters reset to Python's defaults, so that no ``-W error`` of the engine's turns a
framework warning into a refusal users would not see.  pydantic's serializer warning for a value
outside the state schema (the only signal it gives) is silenced: it repeats on every write.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import warnings
from pathlib import Path

from adapters.protocol import (
    Case,
    Fork,
    HarnessError,
    Recover,
    Resume,
    StaleResume,
    Start,
    StateView,
    Variant,
    Workflow,
    forge,
)
from adapters.calls import record_call
from adapters.files import SideTable
from adapters.reproduction.script import thread_label

from .store import LOCK_SUFFIX, FileStore, MemoryStore, durable_of
from .workflow import Deps, build, outcome

# What the call log holds for a custom store where no call of the framework's API was made
# (repro.py writes the first with the store's ScriptStore; a later line reading the second's
# ``last`` leaves the step unwritten).
STORE_TAMPER = "<unknown: the store factory's own tamper {how!r} of {run!r}>"
STORE_LAST = "last = <unknown: the latest snapshot, read back through the store factory>"


class PydanticGraphCase(Case):
    def __init__(self, variant: Variant, workflow: Workflow, workdir: Path):
        options = variant.options
        self.workflow, self.workdir = workflow, Path(workdir)
        self.backend = options["backend"]
        self.resume_spelling = options["resume"]
        self.recover_spelling = options["recover"]
        self.corrupt_how = options.get("corrupt", "truncate")
        self.built = build(options["shape"], workflow)
        self.graph = self.built.graph
        self.start_spelling = options.get("start", "iter")
        if self.backend == "custom":  # bring your own store (--store): custom.py
            from .custom import CustomStore

            self.store = CustomStore(self.workdir, self.built, options["store_factory"])
        elif self.backend == "file":
            self.store = FileStore(self.workdir, self.built)
        else:
            self.store = MemoryStore(self.workdir, self.built, self.backend)
        # thread -> {gate: id of the snapshot that asked it}: the handle a user keeps to fork
        # from that checkpoint later (``NodeSnapshot.id``, pydantic-graph's own snapshot id).
        self.asked = SideTable(self.workdir, "pydantic_graph_gate_snapshots.json")
        # A store that keeps only its latest snapshot (a custom one whose load_all raises
        # NotImplementedError): thread -> {gate: that snapshot as stored when the gate asked},
        # the copy a racer shown the gate holds once the store has moved on (``_shown``).
        self.shown = SideTable(self.workdir, "pydantic_graph_shown_snapshots.json")

    # -- executing operations -----------------------------------------------------------------
    def run(self, op, hooks) -> str:
        deps = Deps(hooks, self.workflow.gates)
        with warnings.catch_warnings():
            warnings.resetwarnings()
            warnings.simplefilter("default")
            # pydantic's only signal for a value outside the state schema (type_adapter.py:651);
            # silenced to keep campaign output readable: a warning never changes the outcome.
            warnings.filterwarnings("ignore", message="Pydantic serializer warnings")
            return asyncio.run(self._run(op, deps))

    def _persistence(self, thread: str, deps: Deps, *, create: bool = False):
        """The thread's persistence, with the gate's ``task_begins`` where it asks (see
        ``store.asking``): the unanswered gate node being persisted is the interrupt."""
        p = self.store.persistence(thread, create=create)

        def on_snapshot(node):
            if self.built.is_unanswered_gate(node):
                gate = self.built.task_of(node)
                # The snapshot just written (the newest): its id is the user's handle.
                self.asked.set(thread, {**(self.asked.get(thread) or {}),
                                        str(gate): self.store.last_id(thread)})
                self._keep_shown(thread, gate)
                if self.workflow.shape is None:  # a shaped task began in its node's run
                    deps.hooks.task_begins(gate)

        p.on_snapshot = on_snapshot
        return p

    async def _run(self, op, deps: Deps) -> str:
        if isinstance(op, Resume) and op.answers:
            # A shaped workflow's map of answers: pydantic-graph runs one node at a time, so at
            # most one question is pending (the node the run stopped before) and the map names
            # it; its value goes on that node as a plain resume's does.
            if len(op.answers) != 1:
                raise HarnessError(f"a map of {len(op.answers)} answers: one question at most "
                                   "is pending on a graph without parallel stages")
            op = Resume(op.thread, value=op.answers[0][1], gate=op.gate)
        if isinstance(op, Start):
            return await self._start(op.thread, deps)
        if isinstance(op, Resume):
            if op.gate is not None:  # a racer: the question it was shown, by its snapshot
                return await self._resume_shown(op, deps)
            if self.resume_spelling == "docs":
                return await self._resume_docs(op, deps)
            return await self._resume_ifp(op, deps)
        if isinstance(op, Recover):
            return await self._recover(op.thread, deps)
        if isinstance(op, Fork):
            return await self._fork(op, deps)
        if isinstance(op, StaleResume):
            if self.resume_spelling == "docs":
                return await self._stale_docs(op, deps)
            # iter_from_persistence takes no snapshot: the caller's handle is the persistence
            # itself, so answering through it is the resume call again.
            return await self._resume_ifp(Resume(op.thread, value=op.value), deps)
        raise HarnessError(f"Case.run does not take {op.name!r}")

    async def _stale_docs(self, op: StaleResume, deps: Deps) -> str:
        """The docs' idiom with the snapshot a second caller loaded while gate ``op.gate`` was
        next (``load_next()`` then), answered since: ``graph.iter`` of the gate node with the
        answer, from that snapshot's state, on the same persistence."""
        p = self._persistence(op.thread, deps)
        self._p("p", op.thread)
        self._rec("snapshots = await p.load_all()")
        snapshots = await p.load_all()
        held = self._gate_snapshot(snapshots, op.thread, op.gate)
        self._rec(f"async with graph.iter({self._node(op.gate, op.value)}, "
                  f"state=snapshots[{snapshots.index(held)}].state, deps=deps, persistence=p) "
                  "as run:")
        node = self.built.node(op.gate, answer=op.value)
        async with self.graph.iter(node, state=held.state, deps=deps, persistence=p) as run:
            return await self._drive(run)

    def _gate_snapshot(self, snapshots, thread: str, gate: int):
        """The checkpoint as a user addresses it: by the id of the snapshot that asked the gate
        (kept when the run paused there), whatever the store now holds under that id; a
        branch's own fork point was never asked, so it is the newest node snapshot whose node
        is gate ``gate``.  (Scanning by node alone lost the checkpoint a forged tamper had
        rewritten: the fork then failed in the adapter, a tool error, where pydantic-graph hands
        the forged snapshot back without complaint.)"""
        kept = (self.asked.get(thread) or {}).get(str(gate))
        found = next((s for s in snapshots if kept is not None and s.id == kept), None)
        found = found or next((s for s in reversed(snapshots)
                               if s.kind == "node" and self.built.task_of(s.node) == gate), None)
        if found is None:
            raise HarnessError(f"the adapter found no snapshot of {thread!r} with gate "
                               f"{gate} next")
        return found

    # -- the call log (repro scripts): each call as a user writes it, names from repro.py ------
    def _rec(self, source: str) -> None:
        record_call(self.workdir, source)

    def _p(self, var: str, thread: str) -> None:
        """Record how the script gets ``thread``'s persistence into the variable ``var``."""
        kind = {"file": "file_persistence", "custom": "custom_persistence"}.get(
            self.backend, "memory_persistence")
        self._rec(f"{var} = {kind}({thread_label(thread)!r})")

    def _node(self, task: int, answer=None) -> str:
        if self.built.shape != "single":  # one class per task: T1, T2, ... (classes_graph)
            return f"T{task}(" + (f"answer={answer!r})" if answer is not None else ")")
        return f"Task({task}" + (f", answer={answer!r})" if answer is not None else ")")

    async def _drive(self, run) -> str:
        """Run nodes until the run ends or the next node is an unanswered gate (``drive``)."""
        self._rec("    await drive(run)")
        return outcome(await self.built.drive(run))

    async def _start(self, thread: str, deps: Deps) -> str:
        p = self._persistence(thread, deps, create=True)
        self._p("p", thread)
        return await self._fresh_run(p, deps)

    async def _fresh_run(self, p, deps: Deps) -> str:
        first = self.built.node(self.built.first())
        if self.start_spelling == "initialize" and not self.built.is_unanswered_gate(first):
            # The run set up first and then continued from its persistence (graph.py:311-334).
            self._rec(f"await graph.initialize({self._node(1)}, p, state=State())")
            await self.graph.initialize(first, p, state=self.built.new_state())
            self._rec("async with graph.iter_from_persistence(p, deps=deps) as run:")
            async with self.graph.iter_from_persistence(p, deps=deps) as run:
                return await self._drive(run)
        if self.built.is_unanswered_gate(first):
            self._rec(f"await graph.initialize({self._node(1)}, p, state=State())")
            await self.graph.initialize(first, p, state=self.built.new_state())
            return "interrupted"
        self._rec(f"async with graph.iter({self._node(1)}, state=State(), deps=deps, "
                  "persistence=p) as run:")
        async with self.graph.iter(first, state=self.built.new_state(), deps=deps,
                                   persistence=p) as run:
            return await self._drive(run)

    async def _resume_ifp(self, op: Resume, deps: Deps) -> str:
        """``iter_from_persistence``; the answer goes on the restored node when it is a gate.

        Nothing else is checked: with nothing to restore the framework refuses
        (``GraphRuntimeError``); a restored node that is not a gate runs as restored; whatever
        gate ``load_next`` restores gets the answer (pydantic-graph's nodes carry no interrupt
        identity: declared ``interrupt_identity`` n/a).  A racer, which was shown one gate,
        resumes through ``_resume_shown`` instead."""
        p = self._persistence(op.thread, deps)
        self._p("p", op.thread)
        self._rec("async with graph.iter_from_persistence(p, deps=deps) as run:")
        async with self.graph.iter_from_persistence(p, deps=deps) as run:
            if self.built.is_gate(run.next_node):
                self._rec(f"    run.next_node.answer = {op.value!r}")
                run.next_node.answer = op.value
            return await self._drive(run)

    async def _resume_shown(self, op: Resume, deps: Deps) -> str:
        """A racer: answer gate ``op.gate`` through the snapshot that asked it (its id kept when
        it asked), in the variant's spelling, and nothing else.

        ``ifp``: that snapshot's node with the answer set on it, its snapshot id set, from its
        state: what ``iter_from_persistence`` builds from the snapshot ``load_next`` returns
        (graph.py:289-307), for the snapshot the racer was shown.  ``docs``: a new node carrying
        the answer, from the snapshot's state (the docs' idiom), with that snapshot's id.  The
        first ``run.next()`` then claims the snapshot by id (``snapshot_node_if_new`` finds it,
        ``record_run`` checks its status): a snapshot another racer ran already is refused by
        the framework (``GraphNodeStatusError``), never swapped for the next gate's."""
        p = self._persistence(op.thread, deps)
        self._p("p", op.thread)
        held, where = await self._shown(p, op.thread, op.gate)
        # A snapshot edited into an end snapshot under the same id (a forged tamper) has no
        # node: the racer still answers the gate it was shown, under that id.
        stored = held.node if held.kind == "node" else self.built.node(op.gate)
        if self.resume_spelling == "docs" or held.kind != "node":
            task = self.built.task_of(stored)
            answer = op.value if self.built.is_gate(stored) else None
            node = self.built.node(task, answer=answer)
            self._rec(f"node = {self._node(task, answer)}")
        else:
            node = self.built.fresh_copy(stored)  # the stored object stays as stored
            self._rec(f"node = {where}.node")
            if self.built.is_gate(node):
                node.answer = op.value
                self._rec(f"node.answer = {op.value!r}")
        node.set_snapshot_id(held.id)
        self._rec(f"node.set_snapshot_id({where}.id)")
        self._rec(f"async with graph.iter(node, state={where}.state, deps=deps, "
                  "persistence=p) as run:")
        state = copy.deepcopy(held.state)  # an in-memory store's own object stays as stored
        async with self.graph.iter(node, state=state, deps=deps, persistence=p) as run:
            return await self._drive(run)

    async def _shown(self, p, thread: str, gate: int):
        """The snapshot that asked ``gate`` (``_gate_snapshot``) and the script's name for it.

        A store that keeps only its latest snapshot (Simple; a custom one whose ``load_all``
        raises NotImplementedError): its latest snapshot when that is the one that asked, else
        the copy kept when it asked (``_keep_shown``), decoded by the framework's own reader:
        the snapshot a racer loaded before the other racer's run replaced it."""
        try:
            snapshots = await p.load_all()
        except NotImplementedError:
            pass
        else:
            self._rec("snapshots = await p.load_all()")
            held = self._gate_snapshot(snapshots, thread, gate)
            return held, f"snapshots[{snapshots.index(held)}]"
        kept = (self.asked.get(thread) or {}).get(str(gate))
        last, name = await self._last(p, thread)
        if last is not None and last.kind == "node" and (kept is None or last.id == kept):
            return last, self._read(name)
        raw = (self.shown.get(thread) or {}).get(str(gate))
        if raw is None:
            raise HarnessError(f"the adapter kept no snapshot of {thread!r} with gate {gate} "
                               "next (the store keeps only its latest)")
        from pydantic_graph.persistence.in_mem import FullStatePersistence

        decoder = FullStatePersistence()
        decoder.set_graph_types(self.graph)
        decoder.load_json(json.dumps([raw]).encode())
        self._rec(f"shown = <the snapshot {kept!r} as the racer loaded it before the race>")
        return decoder.history[-1], "shown"

    def _keep_shown(self, thread: str, gate: int) -> None:
        """For a custom store without history: the snapshot just written (the gate asking) as
        the store's reader returns it, kept for ``_shown``.  A reader that is a coroutine is
        not called here (this runs inside the framework's write, on its event loop)."""
        if self.backend != "custom":
            return
        read = self.store.handle(thread).read
        if read is None:  # no reader: the store has history (custom.require_reader)
            return
        try:  # never an exception of ours inside the framework's write
            result = read()
            if inspect.isawaitable(result):
                getattr(result, "close", lambda: None)()
                return
            doc = result if isinstance(result, list) else [result]
            if doc and isinstance(doc[-1], dict):
                self.shown.set(thread, {**(self.shown.get(thread) or {}), str(gate): doc[-1]})
        except Exception:  # noqa: BLE001 - no copy kept: _shown then says so, loudly
            return

    async def _resume_docs(self, op: Resume, deps: Deps) -> str:
        """The docs' idiom (``question_graph``'s ``main``): ``load_next()``, then a new node
        carrying the answer, run with ``graph.iter`` from the snapshot's state on the same
        persistence.  The docs' branch for ``load_next() is None`` starts a fresh run on the
        same persistence (their first invocation): so does this spelling, as the example's
        user would (on a finished run that runs the workflow again; it is the documented
        idiom's doing, and the variant's name says which idiom)."""
        p = self._persistence(op.thread, deps)
        self._p("p", op.thread)
        self._rec("snapshot = await p.load_next()")
        snapshot = await p.load_next()
        if snapshot is None:  # the example's first invocation: a fresh run, answer unused
            return await self._fresh_run(p, deps)
        task = self.built.task_of(snapshot.node)
        answer = op.value if self.built.is_gate(snapshot.node) else None
        node = self.built.node(task, answer=answer)
        self._rec(f"async with graph.iter({self._node(task, answer)}, state=snapshot.state, "
                  "deps=deps, persistence=p) as run:")
        async with self.graph.iter(node, state=snapshot.state, deps=deps, persistence=p) as run:
            return await self._drive(run)

    async def _last(self, p, thread: str):
        """The latest snapshot, and the script's name for it: read through the framework
        (``load_all``; Simple has none, its ``last_snapshot`` field is the whole store), or on
        a custom store through its factory (recorded only where a later call reads it, as a
        line no script can write: ``STORE_LAST``)."""
        if self.backend == "simple":
            self._rec("last = p.last_snapshot")
            return p.last_snapshot, "last"
        if self.backend == "custom":  # load_all, or the factory's reader (custom.py)
            return await self.store.last(thread), "<store>"
        self._rec("snapshots = await p.load_all()")
        snapshots = await p.load_all()
        return (snapshots[-1] if snapshots else None), "snapshots[-1]"

    def _read(self, name: str) -> str:
        """``name`` of ``_last`` as a later call reads it (a custom store's: the line recorded
        first)."""
        if name != "<store>":
            return name
        self._rec(STORE_LAST)
        return "last"

    async def _recover(self, thread: str, deps: Deps) -> str:
        p = self._persistence(thread, deps)
        self._p("p", thread)
        last, name = await self._last(p, thread)
        if last is None:  # nothing persisted: the framework answers (GraphRuntimeError)
            self._rec("async with graph.iter_from_persistence(p, deps=deps) as run:")
            async with self.graph.iter_from_persistence(p, deps=deps) as run:
                return await self._drive(run)
        waiting = (last.kind == "node" and last.status == "created"
                   and self.built.is_unanswered_gate(last.node))
        if waiting:
            return "interrupted"  # waits for an answer: nothing to recover, nothing loaded
        if self.recover_spelling == "initialize":
            if last.kind == "end":
                return "completed"
            if last.status != "created":
                node = self.built.fresh_copy(last.node)
                again = self._node(self.built.task_of(node), getattr(node, "answer", None))
                self._rec(f"await graph.initialize({again}, p, state={self._read(name)}.state)")
                await self.graph.initialize(node, p, state=last.state)
                if self.built.is_unanswered_gate(node):
                    return "interrupted"  # the gate is asked again
        self._rec("async with graph.iter_from_persistence(p, deps=deps) as run:")
        async with self.graph.iter_from_persistence(p, deps=deps) as run:
            return await self._drive(run)

    async def _fork(self, op: Fork, deps: Deps) -> str:
        """A new persistence object seeded with the gate checkpoint's state and the answer."""
        if op.answers:
            raise HarnessError("a fork's map of other answers: one question at most is pending "
                               "at a checkpoint of a graph without parallel stages")
        source = self._persistence(op.thread, deps)
        if self.backend == "simple":  # pragma: no cover - declared n/a
            raise HarnessError("SimpleStatePersistence keeps no earlier checkpoint")
        self._p("source", op.thread)
        self._rec("snapshots = await source.load_all()")
        snapshots = await source.load_all()
        checkpoint = self._gate_snapshot(snapshots, op.thread, op.gate)
        target = self._persistence(op.new_thread, deps, create=True)
        self._p("p", op.new_thread)
        self._rec(f"await graph.initialize({self._node(op.gate, op.value)}, p, "
                  f"state=snapshots[{snapshots.index(checkpoint)}].state)")
        self._rec("async with graph.iter_from_persistence(p, deps=deps) as run:")
        await self.graph.initialize(
            self.built.node(op.gate, answer=op.value), target, state=checkpoint.state
        )
        async with self.graph.iter_from_persistence(target, deps=deps) as run:
            return await self._drive(run)

    # -- reading and altering the store -------------------------------------------------------
    def query(self, thread: str) -> StateView:
        return self.store.query(thread)

    def tamper(self, thread: str, how: str, part: str | None = None) -> None:
        if self.backend == "custom":  # only the store author's tamper (StoreHandle.tamper)
            # A script writes it with the store's ScriptStore, if that has a function ``how``.
            self._rec(STORE_TAMPER.format(how=how, run=thread_label(thread)))
            self.store.tamper(thread, how)
            return
        before = None if self.backend == "file" else (self.store.snapshots(thread) or [None])[-1]
        status = getattr(before, "status", None)
        self._tamper(thread, how, part)
        self._rec_tamper(thread, how, before, status)

    def _rec_tamper(self, thread: str, how: str, before, status) -> None:
        """The tamper as a script writes it: the file edited on disk, or the newest snapshot
        object replaced or edited in memory (what ``store.py`` just did, in pydantic-graph's
        own classes)."""
        label = thread_label(thread)
        if self.backend == "file":
            self._rec(f"path = Path(WORKDIR) / {label + '.json'!r}")
            if how == "corrupt" and self.corrupt_how == "stale_lock":
                lock = f"Path(str(path) + {LOCK_SUFFIX!r})"
                self._rec(f"{lock}.write_bytes(b'left by a killed writer')")
            elif how == "corrupt":
                self._rec("path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])")
            elif how == "invalid":
                self._rec("doc = json.loads(path.read_bytes())")
                self._rec("doc[-1]['state']['done'].append('<invalid>')")
                self._rec("path.write_bytes(json.dumps(doc).encode())")
            else:
                self._rec("<unknown: a forged file is not written as a script yet>")
            return
        self._p("p", thread)
        last = "p.history[-1]" if self.backend == "full" else "p.last_snapshot"
        now = self.store.snapshots(thread)[-1]
        state = (f"State(done={list(now.state.done)!r}, "
                 f"answers={dict(now.state.answers)!r})")
        if how == "invalid":
            self._rec(f"{last}.state.done.append('<invalid>')")
        elif now is before and getattr(now, "status", None) != status:
            self._rec(f"{last}.status = 'success'")  # the pending record cleared
        elif now is before:
            self._rec(f"{last}.state = {state}")
        elif now.kind == "end":
            self._rec(f"{last} = EndSnapshot(state={state}, result=End(None), id={last}.id)")
        else:
            node = self._node(self.built.task_of(now.node))
            self._rec(f"{last} = NodeSnapshot(state={state}, node={node}, id={last}.id)")

    def _tamper(self, thread: str, how: str, part: str | None) -> None:
        if how == "corrupt":
            if self.backend != "file":
                raise HarnessError("an in-memory store has no bytes to corrupt")
            if self.corrupt_how == "stale_lock":
                self.store.stale_lock(thread)
            else:
                self.store.corrupt(thread)
        elif how == "invalid":
            self.store.invalid(thread)
        elif how == "forged":
            durable = durable_of(self.store.query(thread))
            if part == "pending" and durable.pending is not None:
                # pydantic-graph's pending-gate record is the gate node's snapshot with status
                # 'created' (nothing runs it); clearing that record alone marks it run.
                self.store.unask(thread)
            else:
                self.store.forge(thread, forge(self.workflow, durable, part))
        else:
            raise HarnessError(f"unknown tamper {how!r}")

    def clone_store(self, dest: Path) -> None:
        if self.backend == "custom":
            self.store.clone(Path(dest))
            return
        if self.backend != "file":
            raise HarnessError("an in-memory store cannot be copied to another process")
        self.store.clone(Path(dest))

    def close(self) -> None:
        if self.backend == "custom":
            self.store.close()
        elif self.backend != "file":
            from .store import _MEMORY

            _MEMORY.pop(str(self.workdir.resolve()), None)
