"""One case: the generated flow, its store in ``workdir/store``, and the operations on it.

Every executing operation runs in a fresh ``contextvars`` context: ``Flow.from_checkpoint`` and
``Flow.fork`` attach a ``RuntimeState`` to the event bus in the caller's context, and later flows
in that context would join it.  The harness thread -> flow id / checkpoint location mapping lives
in ``store/sidetable.json``, so a worker killed between two operations loses nothing.

Every variant registers ``set_flow_persistence_factory`` to the case's ``store/flows.db``: a flow
restored from a checkpoint comes back without its ``persistence`` and would otherwise write its
pending-feedback row into the appdirs default database (``crewai/flow/persistence/factory.py``).

Each framework call is also recorded (``record_call``) as the line a CrewAI user would write, in
the names of ``repro.py``'s script: ``ID["run-1"]`` for a flow id (a fresh uuid on every run),
``checkpointing("ck/run-1")`` for a ``CheckpointConfig``, ``AT_GATE["run-1", 2]`` for the
checkpoint taken when a run paused at gate 2.  Kinds: "call" (a framework call), "id" and
"gate" (keeping a flow id or a checkpoint for later: the script keeps the ones a later line
reads), "read" (how ``query`` read the state).
"""

from __future__ import annotations

import contextvars
import uuid
from pathlib import Path

from adapters.protocol import (
    Case,
    Fork,
    HarnessError,
    Hooks,
    Op,
    Recover,
    Resume,
    StaleResume,
    Start,
    StateView,
    Workflow,
)
from adapters.calls import record_call
from adapters.files import SideTable
from adapters.reproduction.script import thread_label

from . import store
from .workflow import gate_of_method

ON_EVENTS = ["method_execution_finished", "method_execution_paused"]


class UnknownThread(HarnessError):
    """An operation named a thread this case never started (the adapter lost track of it)."""


class CrewAICase(Case):
    def __init__(self, variant, workflow: Workflow, workdir: Path, module, custom=None):
        from crewai.flow.async_feedback import HumanFeedbackPending
        from crewai.flow.persistence import SQLiteFlowPersistence
        from crewai.flow.persistence.factory import set_flow_persistence_factory

        self.variant, self.workflow, self.workdir = variant, workflow, Path(workdir)
        self.backend = variant.options["backend"]
        self.recover_spelling = variant.options["recover"]
        self.flow_cls = module.WorkflowFlow
        self.module = module
        self.pending_type = HumanFeedbackPending
        (self.workdir / store.STORE).mkdir(parents=True, exist_ok=True)
        self.side = SideTable(self.workdir / store.STORE)
        self.custom = custom  # bring your own store (--store): custom.CustomStore, registered
        if custom is not None:
            self.persistence = custom.store
            self.backend = "custom"
            return
        self.persistence = SQLiteFlowPersistence(str(store.FLOWS_DB))
        set_flow_persistence_factory(lambda: SQLiteFlowPersistence(str(store.FLOWS_DB)))

    # -- Case -------------------------------------------------------------------------------------

    def run(self, op: Op, hooks: Hooks) -> str:
        self.module.H = hooks
        self.module.BAD_OUTPUT = next((t for t in range(1, self.workflow.n + 1)
                                       if hooks.wants_bad_output(t)), None)
        try:
            return contextvars.copy_context().run(self._run, op, hooks)
        finally:
            self.module.H = self.module.BAD_OUTPUT = None

    def query(self, thread: str) -> StateView:
        info = self.side.get(thread)
        if info is None:
            return StateView.of(self.workflow, (), {}, None)
        self._rec(f"read_state({self._id(thread)}"
                  + (f", {self._loc(thread)!r})" if self.backend not in ("persist", "custom")
                     else ")"), "read")
        if self.custom is not None:  # through the store's own reads, as the script's read_state
            return self.custom.query(self.workflow, info["fid"])
        state, pending_method = store.read_persisted(self.workdir, info["fid"])
        if self.backend != "persist":
            loc = store.latest_checkpoint(self.workdir, info["location"])
            doc = store.read_checkpoint(self.workdir, loc) if loc else None
            state = store.flow_entity(doc).get("checkpoint_state") if doc else None
        return store.view_of(self.workflow, state, pending_method)

    def tamper(self, thread: str, how: str, part: str | None = None) -> None:
        info = self._info(thread)
        if self.custom is not None:  # only the store author's tamper (StoreHandle.tamper)
            self.custom.tamper(info["fid"], how)
            return
        view = self.query(thread)
        edit = store.edit_for(how, self.workflow, view, part)
        changed = False
        if edit is not None:  # the state: flow_states, the pending row's copy, the checkpoint
            changed = store.tamper_persisted(self.workdir, info["fid"], edit)
            if self.backend != "persist":
                loc = store.latest_checkpoint(self.workdir, info["location"])
                if loc is not None:
                    store.write_checkpoint(self.workdir, loc,
                                           self._tampered_checkpoint(loc, how, edit))
                    changed = True
        if part is not None:  # the pending-gate record agrees with the forged state
            pending = store.forged_durable(self.workflow, view, part).pending
            cls = f"{self.flow_cls.__module__}.{self.flow_cls.__name__}"
            store.set_pending(self.workdir, info["fid"], cls, pending)
            changed = True
        if not changed:
            raise HarnessError(f"tamper({thread}): the adapter finds nothing stored for this thread")

    def clone_store(self, dest: Path) -> None:
        store.clone(self.workdir, Path(dest))  # the side table (and, built in, the store)
        if self.custom is not None:
            self.custom.clone(Path(dest))

    def close(self) -> None:
        if self.custom is not None:
            self.custom.close()

    # -- operations -------------------------------------------------------------------------------

    def _run(self, op: Op, hooks: Hooks) -> str:
        if isinstance(op, Start):
            return self._start(op)
        if isinstance(op, Resume):
            return self._resume(op, hooks)
        if isinstance(op, Recover):
            return self._recover(op)
        if isinstance(op, Fork):
            return self._fork(op)
        if isinstance(op, StaleResume):
            return self._stale_resume(op, hooks)
        raise HarnessError(f"CrewAICase.run: not an executing operation: {op!r}")

    def _start(self, op: Start) -> str:
        if self.side.get(op.thread) is not None:
            raise HarnessError(f"thread {op.thread!r} exists already")
        # Each call is recorded before it is made: a call that raises is part of the script.
        if self.backend in ("persist", "custom"):
            self._rec("flow = WorkflowFlow()")
            flow = self.flow_cls()  # @persist on the class: every method's completion is saved
        else:
            self._rec(f"flow = WorkflowFlow(checkpoint={self._cfg_src(op.thread)}, "
                      "persistence=persistence)")
            flow = self.flow_cls(checkpoint=self._config(op.thread), persistence=self.persistence)
        self.side.set(op.thread, {"fid": flow.state.id, "location": self._location(op.thread)})
        self._rec(f"{self._id(op.thread)} = flow.state.id", "id")
        self._rec("flow.kickoff()")
        return self._finish(op.thread, flow.kickoff())

    def _resume(self, op: Resume, hooks: Hooks) -> str:
        info = self._info(op.thread)
        kwargs = ({} if self.backend in ("persist", "custom")
                  else {"checkpoint": self._config(op.thread)})
        self._rec(self._from_pending_src(op.thread) + f".resume({op.value!r})")
        flow = self.flow_cls.from_pending(info["fid"], self.persistence, **kwargs)
        hooks.race_ready()  # read the pending row; resume() writes
        return self._finish(op.thread, flow.resume(op.value))

    def _recover(self, op: Recover) -> str:
        info = self._info(op.thread)
        if self.backend in ("persist", "custom"):
            # The documented @persist resume: reload the latest flow_states row under this id.
            self._rec(f'WorkflowFlow().kickoff(inputs={{"id": {self._id(op.thread)}}})')
            return self._finish(op.thread, self.flow_cls().kickoff(inputs={"id": info["fid"]}))
        config = self._config(op.thread)
        loc = store.latest_checkpoint(self.workdir, info["location"])
        if loc is None:  # nothing checkpointed yet: re-issue the run's input under its id
            self._rec(f"WorkflowFlow(checkpoint={self._cfg_src(op.thread)})"
                      f'.kickoff(inputs={{"id": {self._id(op.thread)}}})')
            return self._finish(op.thread, self.flow_cls(checkpoint=config).kickoff(inputs={"id": info["fid"]}))
        latest = f"latest_checkpoint({self._loc(op.thread)!r})"
        return self._finish(op.thread, self._kickoff_restored(op.thread, loc, config, latest))

    def _kickoff_restored(self, thread: str, loc: str, config, loc_src: str):
        """Run the flow restored from checkpoint ``loc`` (``loc_src`` in the script), in the
        variant's recover spelling."""
        from crewai.state.checkpoint_config import CheckpointConfig

        if self.recover_spelling == "from_checkpoint":
            self._rec(f"flow = WorkflowFlow.from_checkpoint(CheckpointConfig(restore_from={loc_src}))")
            flow = self.flow_cls.from_checkpoint(CheckpointConfig(restore_from=loc))
            flow.checkpoint = config  # restored flows come back with checkpoint=None: re-attach
            self._rec(f"flow.checkpoint = {self._cfg_src(thread)}")
            self._rec("flow.kickoff()")
            return flow.kickoff()
        restore = config.model_copy(update={"restore_from": loc})
        self._rec(f"WorkflowFlow().kickoff(from_checkpoint={self._cfg_src(thread, loc_src)})")
        return self.flow_cls().kickoff(from_checkpoint=restore)

    def _stale_resume(self, op: StaleResume, hooks: Hooks) -> str:
        """Answer through the handle the caller kept from the pause at ``op.gate``.

        ``persist``: the flow id of the ``HumanFeedbackPending`` that pause returned, posted to
        the docs' feedback handler, ``from_pending(flow_id).resume(v)``: the same call as a
        resume, whatever the flow asks now.  Checkpoint backends: the checkpoint location
        written at that pause, restored in the variant's recover spelling (as ``crewai
        checkpoint resume <location>`` restores a location); if the restored flow pauses at
        that gate again, the answer goes to it (``from_pending(flow_id).resume(v)``).
        """
        if self.backend == "persist":
            return self._resume(Resume(op.thread, value=op.value), hooks)
        info = self._info(op.thread)
        loc = self._gate_checkpoint(op.thread, op.gate)
        if loc is None:
            raise HarnessError(f"no recorded checkpoint of {op.thread!r} with gate {op.gate} pending")
        config = self._config(op.thread)
        at_gate = f"AT_GATE[{thread_label(op.thread)!r}, {op.gate}]"
        result = self._kickoff_restored(op.thread, loc, config, at_gate)
        if isinstance(result, self.pending_type) and gate_of_method(result.context.method_name) == op.gate:
            self._record_pause(op.thread, result)
            self._rec(self._from_pending_src(op.thread) + f".resume({op.value!r})")
            flow = self.flow_cls.from_pending(info["fid"], self.persistence, checkpoint=config)
            result = flow.resume(op.value)
        return self._finish(op.thread, result)

    def _fork(self, op: Fork) -> str:
        source = self._info(op.thread)
        if self.side.get(op.new_thread) is not None:
            raise HarnessError(f"thread {op.new_thread!r} exists already")
        if self.backend in ("persist", "custom"):
            new_fid = str(uuid.uuid4())
            self.side.set(op.new_thread, {"fid": new_fid, "location": None})
            self._rec(f"{self._id(op.new_thread)} = str(uuid.uuid4())", "id")
            self._rec(f'WorkflowFlow().kickoff(inputs={{"id": {self._id(op.new_thread)}}}, '
                      f"restore_from_state_id={self._id(op.thread)})")
            result = self.flow_cls().kickoff(inputs={"id": new_fid}, restore_from_state_id=source["fid"])
            kwargs = {}
        else:
            from crewai.state.checkpoint_config import CheckpointConfig

            loc = self._gate_checkpoint(op.thread, op.gate)
            if loc is None:
                # The adapter recorded no pause at this gate: its own loss, not CrewAI's refusal.
                raise HarnessError(f"no recorded checkpoint of {op.thread!r} with gate {op.gate} pending")
            new = thread_label(op.new_thread)
            self._rec(f"flow = WorkflowFlow.fork(CheckpointConfig(restore_from="
                      f"AT_GATE[{thread_label(op.thread)!r}, {op.gate}]), branch={new!r})")
            flow = self.flow_cls.fork(CheckpointConfig(restore_from=loc), branch=op.new_thread)
            new_fid = flow.state.id  # Flow.fork assigns a fresh uuid4
            self._rec(f"{self._id(op.new_thread)} = flow.state.id", "id")
            self._rec(f"AT_GATE[{new!r}, {op.gate}] = AT_GATE[{thread_label(op.thread)!r}, {op.gate}]",
                      "gate")
            self.side.set(
                op.new_thread,
                {"fid": new_fid, "location": self._location(op.new_thread),
                 "gates": {str(op.gate): loc}},
            )
            kwargs = {"checkpoint": self._config(op.new_thread)}
            flow.checkpoint = kwargs["checkpoint"]  # the branch checkpoints into its own location
            self._rec(f"flow.checkpoint = {self._cfg_src(op.new_thread)}")
            self._rec("flow.kickoff()")
            result = flow.kickoff()
        # The branch's gate asks again; answer the gate the fork names, and only that one.
        if isinstance(result, self.pending_type) and gate_of_method(result.context.method_name) == op.gate:
            self._record_pause(op.new_thread, result)
            self._rec(self._from_pending_src(op.new_thread) + f".resume({op.value!r})")
            flow = self.flow_cls.from_pending(new_fid, self.persistence, **kwargs)
            result = flow.resume(op.value)
        return self._finish(op.new_thread, result)

    # -- helpers ----------------------------------------------------------------------------------

    def _finish(self, thread: str, result) -> str:
        if isinstance(result, self.pending_type):
            self._record_pause(thread, result)
            return "interrupted"
        return "completed"

    def _record_pause(self, thread: str, pending) -> None:
        """Remember the checkpoint taken at this pause: the one a later fork at the gate uses."""
        if self.backend in ("persist", "custom"):
            return
        self._remember_gate(thread, gate_of_method(pending.context.method_name))

    def _remember_gate(self, thread: str, gate: int) -> str | None:
        """The thread's newest checkpoint with ``gate`` pending, remembered as the checkpoint at
        that gate (and so in the script: ``checkpoint_at_gate``); None when it has none."""
        info = self.side.get(thread)
        for loc in reversed(store.list_checkpoints(self.workdir, info["location"])):
            try:
                if store.paused_gate(store.read_checkpoint(self.workdir, loc)) == gate:
                    info.setdefault("gates", {})[str(gate)] = loc
                    self.side.set(thread, info)
                    self._rec(f"AT_GATE[{thread_label(thread)!r}, {gate}] = "
                              f"checkpoint_at_gate({self._loc(thread)!r}, {gate})", "gate")
                    return loc
            except Exception:  # noqa: BLE001 - an unreadable checkpoint is not this pause
                continue
        return None

    def _gate_checkpoint(self, thread: str, gate: int) -> str | None:
        """The checkpoint taken at the pause at ``gate``: the one remembered at that pause, else
        the newest with the gate pending now.  CrewAI writes checkpoints on its event bus's
        thread pool, so a pause can return before its checkpoint is written; a user who forks
        later looks for it then, and finds it once it was written (CI of 8bcdd54: remembered
        only at the pause, it was missed and the fork was a tool error)."""
        known = (self.side.get(thread) or {}).get("gates", {}).get(str(gate))
        return known or self._remember_gate(thread, gate)

    # -- the call log: each call as a user writes it, in the names of repro.py's script ----------

    def _rec(self, source: str, kind: str = "call") -> None:
        record_call(self.workdir, source, kind)

    @staticmethod
    def _id(thread: str) -> str:
        return f"ID[{thread_label(thread)!r}]"

    def _loc(self, thread: str) -> str:
        """The thread's checkpoint location as the script names it (``ck/run-1``, in its folder)."""
        return f"ck/{thread_label(thread)}" + (".db" if self.backend == "sqlite" else "")

    def _cfg_src(self, thread: str, restore_from: str | None = None) -> str:
        return (f"checkpointing({self._loc(thread)!r}"
                + (f", restore_from={restore_from})" if restore_from else ")"))

    def _from_pending_src(self, thread: str) -> str:
        kwargs = "" if self.backend in ("persist", "custom") else f", checkpoint={self._cfg_src(thread)}"
        return f"WorkflowFlow.from_pending({self._id(thread)}, persistence{kwargs})"

    def _info(self, thread: str) -> dict:
        info = self.side.get(thread)
        if info is None:
            raise UnknownThread(f"no thread {thread!r} in this case")
        return info

    def _location(self, thread: str) -> str | None:
        if self.backend == "json":
            return store.json_location(thread)
        if self.backend == "sqlite":
            return store.sqlite_location(thread)
        return None

    def _config(self, thread: str):
        from crewai.state.checkpoint_config import CheckpointConfig
        from crewai.state.provider.json_provider import JsonProvider
        from crewai.state.provider.sqlite_provider import SqliteProvider

        info = self.side.get(thread)
        location = info["location"] if info else self._location(thread)
        provider = JsonProvider() if self.backend == "json" else SqliteProvider()
        return CheckpointConfig(location=location, provider=provider, on_events=list(ON_EVENTS))

    def _tampered_checkpoint(self, loc: str, how: str, edit):
        if how == "corrupt":
            raw = store.raw_checkpoint_bytes(self.workdir, loc)
            return raw[: max(1, len(raw) // 2)] if "#" not in loc else b"\x00not jsonb"
        import json

        doc = store.read_checkpoint(self.workdir, loc)
        entity = store.flow_entity(doc)
        entity["checkpoint_state"] = json.loads(edit(json.dumps(entity.get("checkpoint_state") or {})))
        if how == "forged":  # a consistent forgery: the methods of the forged tasks are completed too
            entity["checkpoint_completed_methods"] = store.completed_methods(
                self.workflow, entity["checkpoint_state"]["done"]
            )
        return json.dumps(doc)
