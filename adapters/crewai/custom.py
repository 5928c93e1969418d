"""Bring your own store (``resumefuzz fuzz crewai --store mypkg.persist:make_persistence``): the
variant, capabilities and store access of a custom ``FlowPersistence``.

One ``FlowPersistence`` holds every flow of a case, keyed by flow id (``save_state(flow_uuid,
...)``), so the factory is called once per case and worker, with the case's ``workdir``.  The
flow uses it the way CrewAI documents for a custom backend: the factory's store is registered
with ``set_flow_persistence_factory`` and the flow class is decorated ``@persist()`` (class
level: every method's completion is saved), so ``@persist`` and the runtime's pause/resume
paths all fall back to it; resume is ``Flow.from_pending(id, store).resume(v)``, recover
``Flow().kickoff(inputs={"id": id})``, fork ``kickoff(inputs={"id": new},
restore_from_state_id=old)`` (as the built-in ``persist-sqlite`` variant).

The harness reads a flow back through the store's own public reads: ``load_state(id)`` (the
latest state) and ``load_pending_feedback(id)`` (the pause, if the store keeps it: CrewAI's base
class returns ``None``, and a store that does not override it cannot be resumed by
``from_pending``).  Copy and tamper go through the factory's ``StoreHandle`` only.
"""

from __future__ import annotations

from pathlib import Path

from adapters.protocol import (
    OPERATIONS,
    Capabilities,
    HarnessError,
    StateView,
    Unreadable,
    Variant,
)
from adapters.storeprotocol import TamperTarget


def custom_variants(factory) -> tuple[Variant, ...]:
    options = {"backend": "custom", "resume": "from_pending", "recover": "kickoff_id",
               "fork": "restore_from_state_id", "store": factory.name,
               "store_factory": factory.path, "store_distribution": factory.distribution,
               "store_version": factory.version}
    description = (f"@persist() + set_flow_persistence_factory(persistence from {factory.path} "
                   f"({factory.distribution} {factory.version})) + @human_feedback; "
                   "recover = kickoff(inputs={'id'}); fork = restore_from_state_id")
    return (Variant(f"store-{factory.name}-persist", description, options),)


def check_persistence(store) -> dict:
    """The probe's check: a ``FlowPersistence``; and whether it keeps pending feedback."""
    from crewai.flow.persistence.base import FlowPersistence

    if not isinstance(store, FlowPersistence):
        raise TypeError(f"the factory returned a {type(store).__name__}, not a "
                        "crewai.flow.persistence.base.FlowPersistence")
    overrides = {m: getattr(type(store), m) is not getattr(FlowPersistence, m)
                 for m in ("save_pending_feedback", "load_pending_feedback",
                           "clear_pending_feedback")}
    return {"pending_feedback": overrides}


def capabilities(factory, probe) -> Capabilities:
    from adapters.storefactory import not_expressible as store_na

    na = store_na(factory, probe)
    operations = frozenset(op for op in OPERATIONS if op not in na)
    crash_kinds = frozenset({"exception"} if "sigkill" in na else {"exception", "sigkill"})
    # As persist-sqlite: each racer reads the pending row in from_pending() and writes only in
    # resume(), so the race can be forced; a tamper reaches the flow id it names.
    return Capabilities(operations=operations, crash_kinds=crash_kinds,
                        forced_race="race" in operations, max_racers=3,
                        tamper_hows=probe.tamper_hows, tamper_scope=probe.tamper_scope,
                        not_expressible=na)


class CustomStore:
    """The case's handle on the factory's store (opened in the worker, in ``workdir``)."""

    def __init__(self, workdir: Path, factory_path: str):
        from adapters import storefactory

        self.workdir = Path(workdir)
        self.factory = storefactory.load(factory_path)
        self.handle = storefactory.open_handle(self.factory, self.workdir, "crewai")
        self.store = self.handle.store

    def register(self) -> None:
        """Make the store CrewAI's default persistence in this worker (before the flow class
        is defined: ``@persist()`` resolves the default when it decorates)."""
        from crewai.flow.persistence.factory import set_flow_persistence_factory

        store = self.store
        set_flow_persistence_factory(lambda: store)

    def read(self, fid: str) -> tuple[dict | None, str | None]:
        """(latest state of ``fid`` or None, paused method name or None), through the store."""
        try:
            state = self.store.load_state(fid)
            pending = self.store.load_pending_feedback(fid)
        except Exception as exc:  # noqa: BLE001 - a refusal to decode is what tamper shows
            raise Unreadable(f"{type(self.store).__name__}: {type(exc).__name__}: "
                             f"{str(exc)[:200]}") from None
        method = getattr(pending[1], "method_name", None) if pending else None
        return state, method

    def query(self, workflow, fid: str) -> StateView:
        from .store import view_of

        state, method = self.read(fid)
        return view_of(workflow, state, method)

    def tamper(self, fid: str, how: str) -> str:
        from adapters import storefactory

        if self.handle.tamper is None or how not in self.handle.tamper_hows:
            raise HarnessError(f"the store factory {self.factory.path} offers no tamper {how!r}")
        line = storefactory.call(None, self.handle.tamper, TamperTarget(how=how, thread_id=fid))
        return f"{how}: {line or f'flow {fid} damaged by the store factory'}"

    def clone(self, dest: Path) -> None:
        from adapters import storefactory

        if self.handle.clone is None:
            raise HarnessError(f"the store factory {self.factory.path} offers no clone")
        storefactory.call(None, self.handle.clone,
                          storefactory.context(Path(dest).resolve(), "crewai"))

    def close(self) -> None:
        from adapters import storefactory

        try:
            storefactory.call(None, self.handle.close)
        except Exception:  # noqa: BLE001 - closing is best effort; the data stays
            pass


def cleanup(workdir: Path, factory_path: str) -> None:
    """The factory's ``StoreHandle.cleanup`` for the case in ``workdir`` (idempotent)."""
    from adapters import storefactory

    handle = storefactory.open_handle(storefactory.load(factory_path), Path(workdir).resolve(),
                                      "crewai")
    try:
        storefactory.call(None, handle.cleanup)
    finally:
        storefactory.call(None, handle.close)


# What a store finding points at in a ``FlowPersistence`` (``Adapter.store_methods``); keys:
# categories, and "stale-read" for a store that reads back older data.
STORE_METHODS = {
    "StateMismatch": "save_state / load_state: the state saved after each method must be what "
                     "load_state returns for the flow's id",
    "Replay": "save_state / load_state: a method whose completion was saved must read back as "
              "done, or the flow runs it again",
    "PrefixReplay": "save_state / load_state: a method whose completion was saved must read "
                    "back as done, or the flow runs it again",
    "DoubleConsume": "save_pending_feedback / load_pending_feedback / clear_pending_feedback: "
                     "an answered pause must read back as cleared",
    "LostUpdate": "load_pending_feedback / clear_pending_feedback: one pause answered twice at "
                  "once",
    "Stuck": "save_pending_feedback / load_pending_feedback: the pause awaiting an answer must "
             "read back after a crash",
    "InvalidPersist": "save_state / load_state: what is read back must validate as the flow's "
                      "state model",
    "stale-read": "load_state: must return the state saved last for the flow's id",
}
