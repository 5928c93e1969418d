"""Bring your own store: load a store factory named by dotted path, probe what it offers, and
open it in a worker.  Shared by every adapter with a persistence extension point (LangGraph
``BaseCheckpointSaver``, pydantic-graph ``BaseStatePersistence``, CrewAI ``FlowPersistence``).

The factory protocol (``StoreContext`` in, the store or a ``StoreHandle`` out) is defined in
``adapters/storeprotocol.py`` and documented in ``docs/stores.md``.  Life cycle:

- parent: ``load(path)`` imports the factory's module (the path comes from the command line
  only) and reads its name and distribution; ``probe`` calls the factory once in a forked
  child, on a scratch directory, to learn what the handle offers (clone, tamper, shared) before
  any variant is declared, and to fail up front, in one line, when the factory is broken;
- worker: ``open_handle`` calls the factory for the case's ``workdir``.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import inspect
import json
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .protocol import TAMPER_HOWS, TAMPER_SCOPES
from .storeprotocol import (
    STORE_MODULES,
    StoreContext,
    StoreFactoryError,
    StoreHandle,
)

PATH_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@dataclass(frozen=True, kw_only=True)
class StoreFactory:
    """A loaded factory: ``func(StoreContext) -> store | StoreHandle`` (or ``async def``).

    ``name`` (``[a-z0-9]+``, used in variant names) comes from ``func.store_name`` if the
    factory sets it, else from the factory module's top-level package.  ``distribution``: the
    PyPI package that ships the *store* (``func.store_distribution``, else the distribution of
    the factory's top-level package), whose version reports and the matrix show.
    """

    path: str
    func: object
    name: str
    distribution: str
    version: str
    asynchronous: bool
    #: ``func.store_script``: the dotted path (``pkg.module:NAME``) of the factory's
    #: ``ScriptStore``, how a reproduction script builds the store; None when it offers none.
    script: str | None = None

    def describe(self) -> str:
        return f"{self.distribution} {self.version} (factory {self.path})"


@dataclass(frozen=True, kw_only=True)
class Probe:
    """What one call of the factory returned, as the parent needs it to declare variants."""

    store_type: str
    clone: bool
    tamper_hows: frozenset
    tamper_scope: str
    shared: bool
    info: dict
    read: bool = False


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower()) or "store"


#: Factories handed over as objects (``resumefuzz.pytest.store_test``), by the path they were
#: registered under: forked workers inherit this, so a factory defined anywhere (a test
#: module, a closure) opens there without being importable by name.
_REGISTERED: dict = {}


def register(func) -> str:
    """Make the callable ``func`` loadable by ``load``; returns the path it goes by."""
    if not callable(func):
        raise StoreFactoryError(f"store factory {func!r} is not callable")
    qual = getattr(func, "__qualname__", type(func).__name__).replace("<locals>.", "")
    path = f"{getattr(func, '__module__', None) or 'factory'}:{re.sub(r'[^A-Za-z0-9_]', '_', qual)}"
    _REGISTERED[path] = func
    return path


def load(path: str) -> StoreFactory:
    """Import the factory named ``pkg.module:function`` (in the parent; never called here)."""
    if path in _REGISTERED:
        return _describe(path, _REGISTERED[path])
    if not isinstance(path, str) or not PATH_RE.match(path):
        raise StoreFactoryError(f"--store {path!r}: expected a dotted path such as "
                                "mypkg.savers:make_saver")
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any failure to import is the user's input
        raise StoreFactoryError(f"--store {path!r}: cannot import {module_name!r}: "
                                f"{type(exc).__name__}: {exc}") from None
    func = getattr(module, attr, None)
    if func is None or not callable(func):
        raise StoreFactoryError(f"--store {path!r}: {module_name!r} has no callable {attr!r}")
    return _describe(path, func)


def _describe(path: str, func) -> StoreFactory:
    module_name = path.partition(":")[0]
    top = module_name.split(".")[0]
    name = _slug(getattr(func, "store_name", None) or top)
    distribution = getattr(func, "store_distribution", None)
    if distribution is None:
        dists = metadata.packages_distributions().get(top) or [top.replace("_", "-")]
        distribution = dists[0]
    try:
        version = metadata.version(distribution)
    except metadata.PackageNotFoundError:
        version = "not installed"
    script = getattr(func, "store_script", None)
    if script is not None and (not isinstance(script, str) or not PATH_RE.match(script)):
        raise StoreFactoryError(f"--store {path!r}: store_script {script!r} is not a dotted "
                                "path such as mypkg.savers:SCRIPT")
    return StoreFactory(path=path, func=func, name=name, distribution=distribution,
                        version=version, asynchronous=inspect.iscoroutinefunction(func),
                        script=script)


def script_of(factory: StoreFactory):
    """The factory's ``ScriptStore`` (imported now, for a report's script), or None when it
    declares none.  A declared one that does not load is the factory's error, in one line."""
    if factory.script is None:
        return None
    from .storeprotocol import ScriptStore

    module_name, _, attr = factory.script.partition(":")
    try:
        recipe = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:  # noqa: BLE001 - the factory author's module, any failure
        raise StoreFactoryError(f"--store {factory.path!r}: store_script {factory.script!r} "
                                f"does not load: {type(exc).__name__}: {exc}") from None
    if not isinstance(recipe, ScriptStore):
        raise StoreFactoryError(f"--store {factory.path!r}: store_script {factory.script!r} is "
                                f"a {type(recipe).__name__}, not a ScriptStore")
    if recipe.build not in [f.__name__ for f in recipe.functions]:
        raise StoreFactoryError(f"--store {factory.path!r}: store_script {factory.script!r} "
                                f"builds with {recipe.build!r}, which is not one of its functions")
    return recipe


def context(workdir: Path, framework: str) -> StoreContext:
    """The factory's argument for ``workdir``: ids stable for the directory."""
    workdir = Path(workdir)
    digest = hashlib.sha1(str(workdir.resolve()).encode()).hexdigest()[:16]
    return StoreContext(workdir=workdir, store_id=f"rf_{digest}",
                        case_id=f"{workdir.parent.name}/{workdir.name}", framework=framework)


def as_handle(result, path: str) -> StoreHandle:
    """The factory's result as a validated ``StoreHandle``."""
    handle = result if isinstance(result, StoreHandle) else StoreHandle(store=result)
    if handle.store is None:
        raise StoreFactoryError(f"--store {path!r}: the factory returned no store")
    if handle.tamper_scope not in TAMPER_SCOPES:
        raise StoreFactoryError(f"--store {path!r}: tamper_scope {handle.tamper_scope!r} is not "
                                f"one of {', '.join(TAMPER_SCOPES)}")
    unknown = set(handle.tamper_hows) - set(TAMPER_HOWS)
    if unknown:
        raise StoreFactoryError(f"--store {path!r}: unknown tamper_hows {sorted(unknown)}; "
                                f"expected some of {', '.join(TAMPER_HOWS)}")
    return handle


class Loop:
    """A private event loop on a daemon thread (workers only): async factories, async stores and
    their coroutine callbacks all run on it, whichever thread asks."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="resumefuzz-store-loop",
                                       daemon=True)
        self.thread.start()

    def run(self, awaitable):
        return asyncio.run_coroutine_threadsafe(_await(awaitable), self.loop).result()

    def call(self, func, *args):
        """``func(*args)``, awaited on the loop when it returns an awaitable."""
        result = func(*args)
        return self.run(result) if inspect.isawaitable(result) else result

    def stop(self) -> None:
        """Stop the loop and its thread, and the default executor's threads (``asyncio_0``...,
        which a saver's ``run_in_executor`` starts): a process must not keep threads it would
        later fork from."""
        if self.thread.is_alive():
            try:
                self.run(self.loop.shutdown_default_executor())
            except Exception:  # noqa: BLE001 - a loop already failing: stop it all the same
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=10)
        if not self.thread.is_alive() and not self.loop.is_closed():
            self.loop.close()


async def _await(awaitable):
    return await awaitable


def open_handle(factory: StoreFactory, workdir: Path, framework: str,
                loop: Loop | None = None) -> StoreHandle:
    """Call the factory for ``workdir`` (in a worker).  An async factory needs ``loop``."""
    ctx = context(workdir, framework)
    if factory.asynchronous:
        if loop is None:
            raise StoreFactoryError(f"--store {factory.path!r}: an async factory needs an event "
                                    f"loop, and target {framework!r} drives its store synchronously")
        result = loop.run(factory.func(ctx))
    else:
        result = factory.func(ctx)
    handle = as_handle(result, factory.path)
    STORE_MODULES.update({factory.path.partition(":")[0], type(handle.store).__module__})
    return handle


def call(loop: Loop | None, func, *args):
    """Call a handle's callback, awaiting it on ``loop`` if it is a coroutine function."""
    if func is None:
        return None
    if loop is not None:
        return loop.call(func, *args)
    result = func(*args)
    if inspect.isawaitable(result):
        return asyncio.run(_await(result))
    return result


def probe(factory: StoreFactory, framework: str, check=None) -> Probe:
    """Call the factory once in a forked child on a scratch directory, then close and clean up.

    ``check(store)`` (the adapter's) raises ``TypeError`` when the object is not the framework's
    store type, and returns a dict of extra facts.  Any failure is a ``StoreFactoryError``."""
    scratch = Path(tempfile.mkdtemp(prefix="resumefuzz-store-probe-"))
    workdir = scratch / "store"
    workdir.mkdir()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read_fd)
            loop = Loop() if factory.asynchronous else None
            handle = open_handle(factory, workdir, framework, loop)
            info = check(handle.store) if check is not None else {}
            doc = {"store_type": f"{type(handle.store).__module__}."
                                 f"{type(handle.store).__qualname__}",
                   "clone": handle.clone is not None,
                   "tamper_hows": sorted(handle.tamper_hows) if handle.tamper else [],
                   "tamper_scope": handle.tamper_scope, "shared": bool(handle.shared),
                   "read": handle.read is not None,
                   "info": info or {}}
            call(loop, handle.close)
            call(loop, handle.cleanup)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent in one line
            first = (str(exc).splitlines() or [""])[0]
            doc = {"error": f"{type(exc).__name__}: {first}"}
            code = 1
        with os.fdopen(write_fd, "w") as f:
            f.write(json.dumps(doc))
        os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        raw = f.read()
    os.waitpid(pid, 0)
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        doc = json.loads(raw)
    except ValueError:
        raise StoreFactoryError(f"--store {factory.path!r}: the factory's probe process died "
                                "without a word") from None
    if "error" in doc:
        raise StoreFactoryError(f"--store {factory.path!r}: calling the factory failed: "
                                f"{doc['error']}")
    return Probe(store_type=doc["store_type"], clone=doc["clone"],
                 tamper_hows=frozenset(doc["tamper_hows"]), tamper_scope=doc["tamper_scope"],
                 shared=doc["shared"], info=doc["info"], read=doc["read"])


def not_expressible(factory: StoreFactory, probe_: Probe) -> dict:
    """Operation -> why it is n/a on this store (the loud part of "where it cannot")."""
    who = f"the store factory {factory.path} ({factory.distribution} {factory.version})"
    out = {}
    if not probe_.shared:
        out["race"] = f"{who} says its data cannot be shared between processes (shared=False)"
        out["twin_recover"] = out["race"]
        out["sigkill"] = f"{who} keeps its data in the worker process: a SIGKILL takes it along"
    elif not probe_.clone:
        out["twin_recover"] = (f"{who} returned no StoreHandle.clone: resumefuzz cannot copy "
                               "a store it does not know")
    if not probe_.tamper_hows:
        out["tamper"] = (f"{who} returned no StoreHandle.tamper: resumefuzz cannot edit a "
                         "store's data directly without the store author's help")
    else:
        missing = sorted(set(TAMPER_HOWS) - set(probe_.tamper_hows))
        if missing:
            out["tamper_" + "_".join(missing)] = (
                f"{who} implements tamper {', '.join(sorted(probe_.tamper_hows))} only")
    return out
