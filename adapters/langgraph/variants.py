"""The LangGraph adapter's variants: every saver, API style, durability mode and spelling.

Naming scheme: ``<saver>-<api>-<durability>-<resume>-<fork>[-<modifier>]``, every axis always
spelled out, so that a name says exactly what ran:

=============  ==============================================================================
axis           values
=============  ==============================================================================
saver          ``memory`` (InMemorySaver), ``sqlite`` (SqliteSaver on a file), ``postgres``
               (PostgresSaver on a fresh database)
api            ``graph`` (StateGraph, one node per task), ``func`` (@entrypoint + @task)
durability     ``sync``, ``async``, ``exit`` (``invoke(..., durability=...)``)
resume         ``head``: ``Command(resume=v)`` at the thread head; ``cpid``: the same,
               addressed at the tip's ``checkpoint_id``; ``map``: ``Command(resume={id: v})``;
               ``mapstrict``: the map with ``__pregel_strict_resume`` (strict resume)
fork           ``update``: ``update_state(C, None)``, ``invoke(None)``, then ``Command(resume)``;
               ``copy``: the same with ``as_node="__copy__"``; ``travel``: ``invoke(None, C)``
               then ``Command(resume)`` at the new head; ``command``: ``Command(resume=v)``
               addressed at the older checkpoint ``C``
modifier       ``pydantic``: the state is a Pydantic model; ``trunchalf`` / ``trunczero``:
               ``tamper(corrupt)`` truncates the SQLite file to half / zero bytes;
               ``drophead``: ``tamper(forged)`` deletes the newest checkpoint (a rollback);
               ``barrier``: a user-level wrapper saver holds each task's saves until the
               next task begins, so crash points fall inside an ``'async'`` save;
               ``guarded``: ours, not LangGraph's: every resume goes through a consume-once
               guard that claims the interrupt id first (``guard.py``; a mitigation to copy)
=============  ==============================================================================

Each saver has a default variant (``<saver>-graph-sync-head-update``); the others change one
axis at a time from a default (the SQLite default spans every axis; functional variants are
defaults of their own for the fork spellings that behave differently there).
"""

from __future__ import annotations

from adapters.protocol import Variant

AXES = ("saver", "api", "durability", "resume", "fork")
DEFAULTS = {"api": "graph", "durability": "sync", "resume": "head", "fork": "update",
            "state": "typed", "tamper": "blob"}
MODIFIERS = {
    "pydantic": {"state": "pydantic"},
    "trunchalf": {"tamper": "trunchalf"},
    "trunczero": {"tamper": "trunczero"},
    "drophead": {"tamper": "drophead"},
    "barrier": {"writes": "held"},
    "guarded": {"guard": "consume-once"},
}

# (base name without modifier, modifier or "")
_TABLE = [
    # memory: the defaults, the API, the durability modes (exception crashes only)
    ("memory-graph-sync-head-update", ""),
    ("memory-func-sync-head-update", ""),
    ("memory-graph-async-head-update", ""),
    ("memory-graph-exit-head-update", ""),
    # sqlite: every axis, one at a time
    ("sqlite-graph-sync-head-update", ""),
    ("sqlite-func-sync-head-update", ""),
    ("sqlite-graph-async-head-update", ""),
    ("sqlite-graph-async-head-update", "barrier"),
    ("sqlite-graph-exit-head-update", ""),
    ("sqlite-graph-sync-cpid-update", ""),
    ("sqlite-graph-sync-map-update", ""),
    ("sqlite-graph-sync-mapstrict-update", ""),
    ("sqlite-graph-sync-head-copy", ""),
    ("sqlite-graph-sync-head-travel", ""),
    ("sqlite-graph-sync-head-command", ""),
    ("sqlite-graph-sync-head-update", "pydantic"),
    ("sqlite-graph-sync-head-update", "trunchalf"),
    ("sqlite-graph-sync-head-update", "trunczero"),
    ("sqlite-graph-sync-head-update", "drophead"),
    # ours: SqliteSaver behind a consume-once guard of resumes (guard.py), a positive control
    ("sqlite-graph-sync-head-update", "guarded"),
    ("sqlite-graph-sync-cpid-update", "guarded"),
    # the functional API's own spellings and durability (its results are pending writes)
    ("sqlite-func-exit-head-update", ""),
    ("sqlite-func-sync-map-update", ""),
    ("sqlite-func-sync-head-copy", ""),
    ("sqlite-func-sync-head-travel", ""),
    ("sqlite-func-sync-head-command", ""),
    # postgres: the defaults, the API, the durability modes, the rollback tamper
    ("postgres-graph-sync-head-update", ""),
    ("postgres-func-sync-head-update", ""),
    ("postgres-graph-async-head-update", ""),
    ("postgres-graph-exit-head-update", ""),
    ("postgres-graph-sync-head-update", "drophead"),
]

_WORDS = {
    "memory": "InMemorySaver (in the worker process)",
    "sqlite": "SqliteSaver on workdir/checkpoints.sqlite",
    "postgres": "PostgresSaver on a fresh database per case",
    "graph": "StateGraph, one node per task",
    "func": "functional API, @entrypoint + one @task per task",
    "head": "resume = Command(resume=v) at the thread head",
    "cpid": "resume = Command(resume=v) addressed at the tip's checkpoint_id",
    "map": "resume = Command(resume={interrupt_id: v})",
    "mapstrict": "resume = Command(resume={interrupt_id: v}) with strict resume",
    "update": "fork = update_state(C, None), invoke(None), Command(resume=v)",
    "copy": "fork = update_state(C, None, as_node='__copy__'), invoke(None), Command(resume=v)",
    "travel": "fork = invoke(None, C), then Command(resume=v) at the new head",
    "command": "fork = Command(resume=v) addressed at the older checkpoint C",
    "pydantic": "state is a Pydantic model",
    "trunchalf": "tamper(corrupt) truncates the SQLite file to half its size",
    "trunczero": "tamper(corrupt) truncates the SQLite file to zero bytes",
    "drophead": "tamper(forged) deletes the newest checkpoint of the thread",
    "barrier": "a wrapper saver holds each task's saves until the next task begins (a disk as "
               "slow as durability='async' allows; driver.WriteHold)",
    "guarded": "ours, not LangGraph's: each Command(resume) first claims its interrupt id in a "
               "claims table of the SQLite file, refusing a second claimant "
               "(guard.ConsumeOnceGraph)",
}


def _variant(base: str, modifier: str) -> Variant:
    options = dict(zip(AXES, base.split("-"), strict=True))
    options.update({k: v for k, v in DEFAULTS.items() if k not in options})
    options.update(MODIFIERS.get(modifier, {}))
    name = f"{base}-{modifier}" if modifier else base
    words = [_WORDS[options["saver"]], _WORDS[options["api"]],
             f"durability={options['durability']!r}", _WORDS[options["resume"]],
             _WORDS[options["fork"]]]
    if modifier:
        words.append(_WORDS[modifier])
    return Variant(name, "; ".join(words), options)


VARIANTS = tuple(_variant(base, modifier) for base, modifier in _TABLE)
BY_NAME = {v.name: v for v in VARIANTS}
