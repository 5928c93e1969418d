"""Bring your own saver (``resumefuzz fuzz langgraph --store mypkg.savers:make_saver``): the
variants and capabilities of a custom ``BaseCheckpointSaver``.

Variant names: ``store-<name>-<api>-<durability>-<resume>-<fork>``, the axes as in
``variants.py``; ``<name>`` comes from the factory (``adapters/storefactory.py``).  A custom
saver gets the default spelling on both APIs and the two weaker durability modes; its
description and options name the store's distribution and version.
"""

from __future__ import annotations

from adapters.protocol import Variant

from .variants import _WORDS, AXES, DEFAULTS

CUSTOM_TABLE = (
    "graph-sync-head-update",
    "func-sync-head-update",
    "graph-async-head-update",
    "graph-exit-head-update",
    "graph-sync-head-travel",
)


def custom_variants(factory) -> tuple[Variant, ...]:
    out = []
    for rest in CUSTOM_TABLE:
        options = dict(zip(AXES, ["custom", *rest.split("-")], strict=True))
        options.update({k: v for k, v in DEFAULTS.items() if k not in options})
        options.update(store=factory.name, store_factory=factory.path,
                       store_distribution=factory.distribution, store_version=factory.version,
                       call="ainvoke" if factory.asynchronous else "invoke")
        saver = (f"{'async ' if factory.asynchronous else ''}saver from {factory.path} "
                 f"({factory.distribution} {factory.version}), driven with {options['call']}")
        words = [saver, _WORDS[options["api"]], f"durability={options['durability']!r}",
                 _WORDS[options["resume"]], _WORDS[options["fork"]]]
        out.append(Variant(f"store-{factory.name}-{rest}", "; ".join(words), options))
    return tuple(out)


def check_saver(factory):
    """The probe's check: a ``BaseCheckpointSaver`` implementing the methods we will call."""
    def check(store) -> dict:
        from langgraph.checkpoint.base import BaseCheckpointSaver

        if not isinstance(store, BaseCheckpointSaver):
            raise TypeError(f"the factory returned a {type(store).__name__}, not a "
                            "langgraph.checkpoint.base.BaseCheckpointSaver")
        prefix = "a" if factory.asynchronous else ""
        missing = [m for m in ("get_tuple", "list", "put", "put_writes")
                   if getattr(type(store), prefix + m) is getattr(BaseCheckpointSaver, prefix + m)]
        if missing:
            hint = ("; an async saver needs an `async def` factory" if not factory.asynchronous
                    else "; a sync saver needs a plain `def` factory")
            raise TypeError(f"{type(store).__name__} does not implement "
                            f"{', '.join(prefix + m for m in missing)}{hint}")
        return {}
    return check


# What a store finding points at in a ``BaseCheckpointSaver`` (``Adapter.store_methods``): what
# LangGraph keeps where, so a store author knows which of their methods to read first.  Keys:
# categories, and "stale-read" for a store that reads back older data.
STORE_METHODS = {
    "StateMismatch": "put / get_tuple: a checkpoint's channel values (the done list, the "
                     "answers) as put must be what get_tuple returns; put_writes / get_tuple: "
                     "a pending interrupt and a finished task's result are writes of their "
                     "checkpoint, read back as CheckpointTuple.pending_writes",
    "Replay": "put_writes / get_tuple: a finished task's result is a write of its checkpoint "
              "(put_writes), read back as pending_writes; lost or not read back, LangGraph "
              "runs the task again",
    "PrefixReplay": "put_writes / get_tuple: a finished task's result is a write of its "
                    "checkpoint (put_writes), read back as pending_writes; lost or not read "
                    "back, LangGraph runs the task again",
    "DoubleConsume": "put / get_tuple: once an interrupt is consumed, the checkpoint written "
                     "after it (put) must be the one the next get_tuple returns",
    "LostUpdate": "put / put_writes: two callers resumed one interrupt; the second write to a "
                  "checkpoint the first already moved past is stored as if it were first",
    "ForkIgnore": "list / get_tuple with a checkpoint_id / put: a fork reads the checkpoint it "
                  "addresses (found through list) and writes its branch from there",
    "Stuck": "get_tuple / put_writes: the pending interrupt (a write of its checkpoint) must "
             "be read back for a resume to consume it",
    "InvalidPersist": "put / get_tuple (and the serializer): what is read back must be what "
                      "was put",
    "NondetRecovery": "the StoreHandle's clone / get_tuple: two copies of one store must read "
                      "back the same",
    "stale-read": "get_tuple and list: a read without a checkpoint_id must return the newest "
                  "checkpoint put, and list must start with it",
}
