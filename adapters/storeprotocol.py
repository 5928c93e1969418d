"""Bring your own store: what a store factory receives and may return (docs/stores.md).

A *store factory* (``--store mypkg.savers:make_saver``) builds the store a framework adapter runs
its cases on.  This module is the factory's contract, as ``adapters/protocol.py`` is an
adapter's: it defines names only and imports nothing of ours, so that a store author's module,
the engine's attribution of errors (``fuzz/internal/blame.py``) and the command line can import
it without the loader.  ``adapters/storefactory.py`` loads, probes and opens factories with it;
``resumefuzz`` re-exports ``StoreContext``, ``StoreHandle``, ``TamperTarget`` and ``ScriptStore``
for store authors.

``StoreHandle.tamper_scope`` says what ``Capabilities.tamper_scope`` says, in the same words
(``refmodel.TAMPER_SCOPES``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: The modules of the store under test in this process: the factory's module and the module of
#: the store's class (``adapters.storefactory.open_handle`` adds them in the worker that opens a
#: handle).  An exception raised in them, or passing through them, is the store's answer, an
#: observation and never a tool error; the engine names the store's method that raised it
#: (``fuzz/internal/blame.py``), so a store author's report points at their code.
STORE_MODULES: set = set()


class StoreFactoryError(ValueError):
    """A ``--store`` factory path, or the factory behind it, is unusable (one-line message).

    The command line turns it into a usage error (exit 2) before any case runs."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreContext:
    """What a store factory is called with, in every worker that opens a case.

    ``workdir`` is the case's directory: the same directory means the same data, so a factory
    called again after a worker was SIGKILLed must re-open what the first call created (a file
    inside ``workdir``, or an external database named by ``store_id``).  ``store_id`` is a short
    name made of ``[a-z0-9_]`` only, stable for ``workdir``, fit to name a database, a key prefix
    or a table; ``case_id`` names the case in logs.  ``framework`` is the target name.
    """

    workdir: Path
    store_id: str
    case_id: str
    framework: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TamperTarget:
    """What ``StoreHandle.tamper`` is asked to damage, in the framework's own ids.

    ``thread_id``: the LangGraph thread id, the pydantic-graph run's persistence key, the
    CrewAI flow id.  ``checkpoint_id``: the stored checkpoint to damage (LangGraph), else None.
    ``how``: one of the handle's ``tamper_hows`` (``corrupt``: bytes the store cannot decode;
    ``invalid``: decodes, breaks the state; ``forged``: a well-formed state the run never
    produced).  ``part``: for ``forged``, the stored part to edit (``Case.tamper``), or None.
    """

    how: str
    thread_id: str
    checkpoint_id: str | None = None
    part: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreHandle:
    """A store, plus what only the store's author can say about its data.

    A factory returns either the framework's store object alone (then the operations that need
    more are ``n/a``, with the reason, for that store) or a ``StoreHandle``:

    - ``clone(dest)``: copy the data so that the factory, called with the ``StoreContext``
      ``dest`` (a new, empty ``workdir`` and its own ``store_id``), opens an identical copy
      (twin recovery); this case's store stays usable;
    - ``tamper(target)``: damage the stored data *directly*, not through the framework's API;
      return one line saying what was done; ``tamper_hows`` lists the kinds it implements and
      ``tamper_scope`` what one tamper reaches (``Capabilities.tamper_scope``);
    - ``close()``: release connections (the data stays); ``cleanup()``: delete what the case
      stored outside ``workdir`` (a database, keys); idempotent, called once the case ended;
    - ``shared``: False when processes cannot share the data (an in-memory store): no race,
      no SIGKILL crash, no twin;
    - ``read()`` (pydantic-graph): the run's stored snapshots as stored, without the
      framework: a list of snapshot dicts (oldest first, as ``pydantic_graph.persistence``
      dumps them), or the latest one alone, or None when nothing is stored.  Needed only when
      the persistence's ``load_all`` raises ``NotImplementedError``; when given, the harness
      reads the state through it (the content, not what the framework accepts).

    An ``async def`` factory builds an asynchronous store (a LangGraph async saver): it is
    awaited on the case's event loop, the graph is driven with ``ainvoke``, and ``clone``,
    ``tamper``, ``close`` and ``cleanup`` may then be coroutine functions too.
    """

    store: object
    clone: Callable[[StoreContext], None] | None = None
    tamper: Callable[[TamperTarget], str] | None = None
    tamper_hows: frozenset = frozenset({"corrupt"})
    tamper_scope: str = "thread"
    close: Callable[[], None] | None = None
    cleanup: Callable[[], None] | None = None
    shared: bool = True
    read: Callable[[], object] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptStore:
    """How a reproduction script builds a factory's store, in the framework's own terms (an
    optional part of a store factory: ``factory.store_script = "pkg.module:NAME"``, the dotted
    path of a ``ScriptStore``, imported only when a report's script is written).

    A finding's script must stand alone: the framework, the store's package and the standard
    library, none of resumefuzz.  So the store is built there by real code of the store's
    author, pasted by its source: ``functions`` (module-level functions of one module, whose
    top-level imports the script takes too, apart from resumefuzz's own) and ``setup``
    (statements run once at the top of the script, after them: a fresh database, say).
    ``build`` names the function of ``functions`` that returns a new store object on the same
    data each time it is called (a child process of the script calls it again for its own
    connection); its one optional parameter ``cls`` defaults to the store's class, which a
    forced race subclasses (a first read that waits for the other racers).  The functions may
    use ``WORKDIR``, the script's own temporary directory.  ``distributions``: what the
    script's "Needs: pip install" line pins besides the framework.  ``close``: statements that
    release the store before the script's verdict exits, where an open one would keep the
    process alive (aiosqlite's worker thread); the framework's own object is in scope there
    (LangGraph: ``graph.checkpointer``).
    """

    functions: tuple
    build: str
    setup: tuple = ()
    distributions: tuple = ()
    close: tuple = ()

    @property
    def builder(self):
        """The function of ``functions`` named ``build`` (``storefactory.script_of`` checks it
        is there)."""
        return next(f for f in self.functions if f.__name__ == self.build)


__all__ = [
    "STORE_MODULES",
    "ScriptStore",
    "StoreContext",
    "StoreFactoryError",
    "StoreHandle",
    "TamperTarget",
]
