"""One case: the generated flow, its store in ``workdir/store``, and the operations on it.

Every executing operation runs in a fresh ``contextvars`` context: ``Flow.from_checkpoint`` and
``Flow.fork`` attach a ``RuntimeState`` to the event bus in the caller's context, and later flows
in that context would join it.  The harness thread -> flow id / checkpoint location mapping lives
in ``store/sidetable.json``, so a worker killed between two operations loses nothing.

Every variant registers ``set_flow_persistence_factory`` to the case's ``store/flows.db``: a flow
restored from a checkpoint comes back without its ``persistence`` and would otherwise write its
pending-feedback row into the appdirs default database (``crewai/flow/persistence/factory.py``).
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
    SideTable,
    Start,
    StateView,
    Workflow,
)

from . import store
from .flowsource import gate_of_method

ON_EVENTS = ["method_execution_finished", "method_execution_paused"]


class UnknownThread(HarnessError):
    """An operation named a thread this case never started (the adapter lost track of it)."""


class CrewAICase(Case):
    def __init__(self, variant, workflow: Workflow, workdir: Path, module):
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
        self.persistence = SQLiteFlowPersistence(str(store.FLOWS_DB))
        set_flow_persistence_factory(lambda: SQLiteFlowPersistence(str(store.FLOWS_DB)))

    # -- Case -------------------------------------------------------------------------------------

    def run(self, op: Op, hooks: Hooks) -> str:
        self.module.H = hooks
        try:
            return contextvars.copy_context().run(self._run, op, hooks)
        finally:
            self.module.H = None

    def query(self, thread: str) -> StateView:
        info = self.side.get(thread)
        if info is None:
            return StateView.of(self.workflow, (), {}, None)
        state, pending_method = store.read_persisted(self.workdir, info["fid"])
        if self.backend != "persist":
            loc = store.latest_checkpoint(self.workdir, info["location"])
            doc = store.read_checkpoint(self.workdir, loc) if loc else None
            state = store.flow_entity(doc).get("checkpoint_state") if doc else None
        return store.view_of(self.workflow, state, pending_method)

    def tamper(self, thread: str, how: str) -> None:
        info = self._info(thread)
        view = self.query(thread)
        edit = store.edit_for(how, self.workflow, view)
        changed = store.tamper_persisted(self.workdir, info["fid"], edit)
        if self.backend != "persist":
            loc = store.latest_checkpoint(self.workdir, info["location"])
            if loc is not None:
                store.write_checkpoint(self.workdir, loc, self._tampered_checkpoint(loc, how, edit))
                changed = True
        if not changed:
            raise HarnessError(f"tamper({thread}): the adapter finds nothing stored for this thread")

    def clone_store(self, dest: Path) -> None:
        store.clone(self.workdir, Path(dest))

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
        raise HarnessError(f"CrewAICase.run: not an executing operation: {op!r}")

    def _start(self, op: Start) -> str:
        if self.side.get(op.thread) is not None:
            raise HarnessError(f"thread {op.thread!r} exists already")
        if self.backend == "persist":
            flow = self.flow_cls()  # @persist on the class: every method's completion is saved
        else:
            flow = self.flow_cls(checkpoint=self._config(op.thread), persistence=self.persistence)
        self.side.set(op.thread, {"fid": flow.state.id, "location": self._location(op.thread)})
        return self._finish(op.thread, flow.kickoff())

    def _resume(self, op: Resume, hooks: Hooks) -> str:
        info = self._info(op.thread)
        kwargs = {} if self.backend == "persist" else {"checkpoint": self._config(op.thread)}
        flow = self.flow_cls.from_pending(info["fid"], self.persistence, **kwargs)
        hooks.race_ready()  # read the pending row; resume() writes
        return self._finish(op.thread, flow.resume(op.value))

    def _recover(self, op: Recover) -> str:
        info = self._info(op.thread)
        if self.backend == "persist":
            # The documented @persist resume: reload the latest flow_states row under this id.
            return self._finish(op.thread, self.flow_cls().kickoff(inputs={"id": info["fid"]}))
        from crewai.state.checkpoint_config import CheckpointConfig

        config = self._config(op.thread)
        loc = store.latest_checkpoint(self.workdir, info["location"])
        if loc is None:  # nothing checkpointed yet: re-issue the run's input under its id
            return self._finish(op.thread, self.flow_cls(checkpoint=config).kickoff(inputs={"id": info["fid"]}))
        if self.recover_spelling == "from_checkpoint":
            flow = self.flow_cls.from_checkpoint(CheckpointConfig(restore_from=loc))
            flow.checkpoint = config  # restored flows come back with checkpoint=None: re-attach
            return self._finish(op.thread, flow.kickoff())
        restore = config.model_copy(update={"restore_from": loc})
        return self._finish(op.thread, self.flow_cls().kickoff(from_checkpoint=restore))

    def _fork(self, op: Fork) -> str:
        source = self._info(op.thread)
        if self.side.get(op.new_thread) is not None:
            raise HarnessError(f"thread {op.new_thread!r} exists already")
        if self.backend == "persist":
            new_fid = str(uuid.uuid4())
            self.side.set(op.new_thread, {"fid": new_fid, "location": None})
            result = self.flow_cls().kickoff(inputs={"id": new_fid}, restore_from_state_id=source["fid"])
            kwargs = {}
        else:
            from crewai.state.checkpoint_config import CheckpointConfig

            loc = self._gate_checkpoint(op.thread, op.gate)
            if loc is None:
                # The adapter recorded no pause at this gate: its own loss, not CrewAI's refusal.
                raise HarnessError(f"no recorded checkpoint of {op.thread!r} with gate {op.gate} pending")
            flow = self.flow_cls.fork(CheckpointConfig(restore_from=loc), branch=op.new_thread)
            new_fid = flow.state.id  # Flow.fork assigns a fresh uuid4
            self.side.set(
                op.new_thread,
                {"fid": new_fid, "location": self._location(op.new_thread),
                 "gates": {str(op.gate): loc}},
            )
            kwargs = {"checkpoint": self._config(op.new_thread)}
            flow.checkpoint = kwargs["checkpoint"]  # the branch checkpoints into its own location
            result = flow.kickoff()
        # The branch's gate asks again; answer the gate the fork names, and only that one.
        if isinstance(result, self.pending_type) and gate_of_method(result.context.method_name) == op.gate:
            self._record_pause(op.new_thread, result)
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
        if self.backend == "persist":
            return
        gate = gate_of_method(pending.context.method_name)
        info = self.side.get(thread)
        for loc in reversed(store.list_checkpoints(self.workdir, info["location"])):
            try:
                if store.paused_gate(store.read_checkpoint(self.workdir, loc)) == gate:
                    info.setdefault("gates", {})[str(gate)] = loc
                    self.side.set(thread, info)
                    return
            except Exception:  # noqa: BLE001 - an unreadable checkpoint is not this pause
                continue

    def _gate_checkpoint(self, thread: str, gate: int) -> str | None:
        return (self.side.get(thread) or {}).get("gates", {}).get(str(gate))

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
