"""``PydanticGraphAdapter``: the target ``pydantic-graph``, its 1.107.x state persistence.

The framework is imported in ``prepare`` from its canonical submodules (``pydantic_graph.graph``,
``pydantic_graph.persistence.*``): the top-level names of the legacy runner emit
``PydanticGraphDeprecationWarning`` in 1.107 (``pydantic_graph/__init__.py:66-94``).
"""

from __future__ import annotations

from pathlib import Path

from adapters.protocol import Adapter, Variant, Workflow
from adapters.files import installed_versions

from . import variants as _variants
from .version import check_version, installed_version
from .promises import PROMISES

#: Distributions whose behaviour the results depend on (recorded in every corpus entry).
DISTRIBUTIONS = ("pydantic-graph", "pydantic", "pydantic-core", "anyio", "logfire-api")


class PydanticGraphAdapter(Adapter):
    name = "pydantic-graph"
    # From the release the seed paper measured up to the next major line (docs/releases.md).
    RELEASES = {"pydantic-graph": ">=1.107.1,<2"}
    PROMISES = PROMISES  # promises.py: the framework's own words, per property
    _store = None  # bring your own store: a storefactory.StoreFactory (use_store)
    _probe = None

    def use_store(self, factory_path: str) -> None:
        """``--store mypkg.persist:make_persistence``: every variant runs on that factory's
        ``BaseStatePersistence``, one per run (``custom.py``).  A plain ``def`` factory only:
        the adapter drives each operation in its own ``asyncio.run``, so a persistence built on
        an event loop of the factory's own would outlive it."""
        from adapters import storefactory
        from adapters.storeprotocol import StoreFactoryError

        factory = storefactory.load(factory_path)
        if factory.asynchronous:
            raise StoreFactoryError(f"--store {factory_path!r}: target 'pydantic-graph' takes a "
                                    "plain `def` factory (the persistence's methods are async "
                                    "already; each operation runs in its own asyncio.run)")
        self._store = factory

    def store_probe(self):
        """What the factory's handle offers (one call of the factory in a forked child)."""
        from adapters import storefactory

        from .custom import check_persistence, require_reader

        if self._probe is None:
            self._probe = storefactory.probe(self._store, self.name, check_persistence)
            require_reader(self._store, self._probe)
        return self._probe

    def environment(self):
        # logfire-api is a no-op shim unless logfire is installed; switch it off regardless.
        return {
            "OTEL_SDK_DISABLED": "true",
            "LOGFIRE_SEND_TO_LOGFIRE": "false",
            "LOGFIRE_IGNORE_NO_CONFIG": "1",
        }

    def prepare(self) -> None:
        """Refuse 2.x (no persistence) before importing anything, then import the 1.x runner."""
        check_version(installed_version())
        import pydantic_graph.graph  # noqa: F401
        import pydantic_graph.persistence.file  # noqa: F401
        import pydantic_graph.persistence.in_mem  # noqa: F401
        if self._store is not None:
            self.store_probe()  # a broken factory fails here, in one line, before any case

    def versions(self):
        out = installed_versions(DISTRIBUTIONS)
        if self._store is not None:  # the store's package; the factory path is inert text
            out[self._store.distribution] = self._store.version
            out["store-factory"] = self._store.path
        return out

    def baseline_variant(self, variant):
        """``FileStatePersistence`` with the same resume and recover spellings (its new runs
        start with ``graph.iter``, the only start the file persistence has)."""
        import re

        prefix = f"store-{self._store.name}-" if self._store is not None else None
        if prefix is None or not variant.name.startswith(prefix):
            return None
        found = re.fullmatch(r"start_[a-z]+-(resume_[a-z]+-recover_[a-z]+)",
                             variant.name[len(prefix):])
        return f"file-single-{found.group(1)}" if found else None

    def store_methods(self, variant):
        if self._store is None:
            return {}
        from .custom import STORE_METHODS

        return STORE_METHODS

    def variants(self):
        if self._store is not None:
            from .custom import custom_variants

            return custom_variants(self._store)
        return _variants.all_variants()

    def capabilities(self, variant: Variant):
        if variant.options["backend"] == "custom":
            from .custom import capabilities

            return capabilities(self._store, self.store_probe())
        return _variants.capabilities(variant)

    def tuning(self, variant: Variant):
        if variant.options["backend"] == "custom":
            # A third-party store's package may keep state we cannot vouch for, and what it
            # keeps outside workdir is its factory's cleanup's to release.
            return super().tuning(variant)
        return _variants.tuning(variant)

    def deviations(self, variant: Variant):
        return _variants.deviations(variant)

    def open(self, variant: Variant, workflow: Workflow, workdir: Path):
        from .case import PydanticGraphCase

        return PydanticGraphCase(variant, workflow, Path(workdir))

    def cleanup(self, variant: Variant, workdir: Path) -> None:
        """Nothing of the built-in stores lives outside ``workdir``: the files are the engine's
        to remove.  A custom store's runs get their factory's ``StoreHandle.cleanup``."""
        if variant is not None and variant.options.get("backend") == "custom":
            from .custom import cleanup

            cleanup(Path(workdir), variant.options["store_factory"])

    def reproduction(self, variant: Variant, workflow: Workflow, evidence):
        from .repro import reproduction

        if variant.options.get("backend") == "custom":
            # The store is built in the script by its factory's ScriptStore; a factory that
            # declares none gets no script (the report says so).
            from adapters import storefactory

            recipe = storefactory.script_of(storefactory.load(variant.options["store_factory"]))
            return reproduction(variant, workflow, evidence, recipe) if recipe else None
        return reproduction(variant, workflow, evidence)
