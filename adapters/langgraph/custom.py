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
