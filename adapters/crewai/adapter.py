"""``CrewAIAdapter``: CrewAI Flows (Flow API only: no Crew, Agent or LLM) under resumefuzz.

Nothing here imports CrewAI at module import time: the engine imports this module, applies
``environment()`` (telemetry, tracing and version checks off; home and data directories in a
sandbox), and only then calls ``prepare()``, which imports ``crewai.flow``.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters.protocol import (
    Adapter,
    Capabilities,
    Case,
    Deviation,
    Tuning,
    Variant,
    Workflow,
)
from adapters.files import atomic_write_text, installed_versions

from . import sandbox, store, variants
from .workflow import module_source
from .promises import PROMISES

DISTRIBUTIONS = (
    "crewai", "crewai-core", "crewai-cli", "pydantic", "portalocker", "aiosqlite",
    "pysqlite3", "appdirs",
)


class CrewAIAdapter(Adapter):
    name = "crewai"
    # From the release the seed paper measured up to the next major line (docs/releases.md).
    RELEASES = {"crewai": ">=1.15.2,<2"}
    PROMISES = PROMISES  # promises.py: the framework's own words, per property

    _store = None  # bring your own store: a storefactory.StoreFactory (use_store)
    _probe = None

    def __init__(self) -> None:
        self._env: dict[str, str] | None = None

    def use_store(self, factory_path: str) -> None:
        """``--store mypkg.persist:make_persistence``: the flow persists to that factory's
        ``FlowPersistence`` (``custom.py``).  A plain ``def`` factory only: CrewAI calls a
        ``FlowPersistence`` synchronously."""
        from adapters import storefactory
        from adapters.storeprotocol import StoreFactoryError

        factory = storefactory.load(factory_path)
        if factory.asynchronous:
            raise StoreFactoryError(f"--store {factory_path!r}: target 'crewai' takes a plain "
                                    "`def` factory (CrewAI calls FlowPersistence synchronously)")
        self._store = factory

    def store_probe(self):
        """What the factory's handle offers (one call of the factory in a forked child)."""
        from adapters import storefactory

        from .custom import check_persistence

        if self._probe is None:
            self._probe = storefactory.probe(self._store, self.name, check_persistence)
        return self._probe

    # -- declarations (parent) ----------------------------------------------------------------

    def environment(self) -> Mapping[str, str]:
        """The switches of ``sandbox.SWITCHES`` and a session sandbox for what CrewAI writes on
        import (it has no case yet); each case re-points them at its own directory."""
        if self._env is None:
            root = Path(tempfile.mkdtemp(prefix="resumefuzz-crewai-"))
            owner = os.getpid()
            atexit.register(lambda: os.getpid() == owner and shutil.rmtree(root, ignore_errors=True))
            self._env = sandbox.environment(root)
            for key in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "TMPDIR"):
                Path(self._env[key]).mkdir(parents=True, exist_ok=True)
        return dict(self._env)

    def prepare(self) -> None:
        os.environ.update(self.environment())  # idempotent when the engine applied them already
        try:
            import crewai.flow.flow  # noqa: F401 - the import is the point (6-16 s)
            import crewai.state.checkpoint_config  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                "CrewAI is not installed: pip install -c constraints/crewai.txt crewai pysqlite3"
            ) from exc
        if self._store is not None:
            self.store_probe()  # a broken factory fails here, in one line, before any case

    def versions(self) -> Mapping[str, str]:
        found = installed_versions(DISTRIBUTIONS)
        import sqlite3

        found["sqlite (stdlib)"] = sqlite3.sqlite_version
        try:  # what is installed; whether the adapter accepts it is store.newer_sqlite's call
            from pysqlite3 import dbapi2 as newer

            found["sqlite (pysqlite3)"] = newer.sqlite_version
        except ImportError:
            found["sqlite (pysqlite3)"] = "not installed"
        found["python"] = sys.version.split()[0]
        if self._store is not None:  # the store's package; the factory path is inert text
            found[self._store.distribution] = self._store.version
            found["store-factory"] = self._store.path
        return found

    def baseline_variant(self, variant: Variant) -> str | None:
        """``@persist(SQLiteFlowPersistence)``, the same spellings."""
        if self._store is None or not variant.name.startswith(f"store-{self._store.name}-"):
            return None
        return "persist-sqlite"

    def store_methods(self, variant):
        if self._store is None:
            return {}
        from .custom import STORE_METHODS

        return STORE_METHODS

    def variants(self) -> Sequence[Variant]:
        if self._store is not None:
            from .custom import custom_variants

            return custom_variants(self._store)
        return variants.VARIANTS

    def capabilities(self, variant: Variant) -> Capabilities:
        if variant.options["backend"] == "custom":
            from .custom import capabilities

            return capabilities(self._store, self.store_probe())
        return variants.capabilities(variant)

    def tuning(self, variant: Variant) -> Tuning:
        if variant.options["backend"] == "custom":
            return super().tuning(variant)
        return variants.tuning(variant)

    def deviations(self, variant: Variant) -> Sequence[Deviation]:
        return variants.deviations(variant)

    # -- cases (workers) ----------------------------------------------------------------------

    def open(self, variant: Variant, workflow: Workflow, workdir: Path) -> Case:
        from .case import CrewAICase

        workdir = Path(workdir).resolve()
        sandbox_dir = sandbox.enter_case(workdir)
        (workdir / store.STORE).mkdir(parents=True, exist_ok=True)
        if variant.options["backend"] == "sqlite":
            use_newer_sqlite_for_checkpoints()
        custom = None
        if variant.options["backend"] == "custom":
            from .custom import CustomStore

            custom = CustomStore(workdir, variant.options["store_factory"])
            custom.register()  # before the flow class is defined (its @persist() resolves it)
        module = load_flow_module(workflow, variant, sandbox_dir)
        case = CrewAICase(variant, workflow, workdir, module, custom=custom)
        sandbox.capture_output(sandbox_dir)  # only once the case opened: open errors stay visible
        return case

    def cleanup(self, variant: Variant, workdir: Path) -> None:
        """Everything a case of the built-in stores leaves (store, sandbox with lock files and
        CrewAI's data dirs) is inside ``workdir``, which the engine removes; a custom store's
        factory drops what it keeps elsewhere (``StoreHandle.cleanup``)."""
        if variant is not None and variant.options.get("backend") == "custom":
            from .custom import cleanup

            cleanup(Path(workdir), variant.options["store_factory"])

    def reproduction(self, variant: Variant, workflow: Workflow, evidence) -> str | None:
        """A custom store's script builds it as its factory's ``ScriptStore`` says (None, and
        the report says so, when the factory declares none)."""
        from .repro import reproduction

        return reproduction(variant, workflow, evidence)



def use_newer_sqlite_for_checkpoints() -> None:
    """Run ``SqliteProvider`` on pysqlite3's SQLite (>= 3.45, for ``jsonb()``), in this worker only.

    The provider module calls ``sqlite3.connect`` through its module global
    (``crewai/state/provider/sqlite_provider.py``); rebinding that global swaps the engine for the
    checkpoint provider alone.  ``SQLiteFlowPersistence``, the engine's ledger and every other
    variant keep the standard library's SQLite.
    """
    import crewai.state.provider.sqlite_provider as provider

    provider.sqlite3 = store.newer_sqlite()


def load_flow_module(workflow: Workflow, variant: Variant, directory: Path):
    """Write the generated flow to ``directory`` and import it as a fresh module."""
    backend = variant.options["backend"]
    persist = (f"SQLiteFlowPersistence({str(store.FLOWS_DB)!r})" if backend == "persist"
               else "" if backend == "custom" else None)  # "": the registered default
    source = module_source(workflow, persist)
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    name = f"resumefuzz_crewai_flow_{digest}"
    path = Path(directory) / f"{name}.py"
    if not path.exists() or path.read_text() != source:
        atomic_write_text(path, source)  # racers open the same case at once: never half a file
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
