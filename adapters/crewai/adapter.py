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
    Op,
    Variant,
    Workflow,
    atomic_write_text,
    installed_versions,
)

from . import sandbox, store, variants
from .flowsource import flow_source

DISTRIBUTIONS = (
    "crewai", "crewai-core", "crewai-cli", "pydantic", "portalocker", "aiosqlite",
    "pysqlite3-binary", "appdirs",
)


class CrewAIAdapter(Adapter):
    name = "crewai"

    def __init__(self) -> None:
        self._env: dict[str, str] | None = None

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
                "CrewAI is not installed: pip install -c constraints/crewai.txt crewai pysqlite3-binary"
            ) from exc

    def versions(self) -> Mapping[str, str]:
        found = installed_versions(DISTRIBUTIONS)
        import sqlite3

        found["sqlite (stdlib)"] = sqlite3.sqlite_version
        try:
            found["sqlite (pysqlite3)"] = store.newer_sqlite().sqlite_version
        except ImportError:
            found["sqlite (pysqlite3)"] = "not installed"
        found["python"] = sys.version.split()[0]
        return found

    def variants(self) -> Sequence[Variant]:
        return variants.VARIANTS

    def capabilities(self, variant: Variant) -> Capabilities:
        return variants.capabilities(variant)

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
        module = load_flow_module(workflow, variant, sandbox_dir)
        case = CrewAICase(variant, workflow, workdir, module)
        sandbox.capture_output(sandbox_dir)  # only once the case opened: open errors stay visible
        return case

    def cleanup(self, variant: Variant, workdir: Path) -> None:
        """Everything a case leaves (store, sandbox with lock files and CrewAI's data dirs) is
        inside ``workdir``, which the engine removes; no database or service to drop."""

    def repro_script(self, variant: Variant, workflow: Workflow, ops: Sequence[Op]) -> str | None:
        from .repro import script

        return script(variant, workflow, ops)


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
    persist = str(store.FLOWS_DB) if variant.options["backend"] == "persist" else None
    source = flow_source(workflow, persist_path=persist)
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
