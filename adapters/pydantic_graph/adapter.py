"""``PydanticGraphAdapter``: the target ``pydantic-graph``, its 1.107.x state persistence.

The framework is imported in ``prepare`` from its canonical submodules (``pydantic_graph.graph``,
``pydantic_graph.persistence.*``): the top-level names of the legacy runner emit
``PydanticGraphDeprecationWarning`` in 1.107 (``pydantic_graph/__init__.py:66-94``).
"""

from __future__ import annotations

from pathlib import Path

from adapters.protocol import Adapter, Variant, Workflow, installed_versions

from . import variants as _variants
from .version import check_version, installed_version

#: Distributions whose behaviour the results depend on (recorded in every corpus entry).
DISTRIBUTIONS = ("pydantic-graph", "pydantic", "pydantic-core", "anyio", "logfire-api")


class PydanticGraphAdapter(Adapter):
    name = "pydantic-graph"

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

    def versions(self):
        return installed_versions(DISTRIBUTIONS)

    def variants(self):
        return _variants.all_variants()

    def capabilities(self, variant: Variant):
        return _variants.capabilities(variant)

    def deviations(self, variant: Variant):
        return _variants.deviations(variant)

    def open(self, variant: Variant, workflow: Workflow, workdir: Path):
        from .case import PydanticGraphCase

        return PydanticGraphCase(variant, workflow, Path(workdir))

    def cleanup(self, variant: Variant, workdir: Path) -> None:
        """Nothing lives outside ``workdir``: the files are the engine's to remove."""

    def reproduction(self, variant: Variant, workflow: Workflow, evidence):
        from .repro import reproduction

        return reproduction(variant, workflow, evidence)

    def repro_script(self, variant: Variant, workflow: Workflow, ops):
        from .repro_legacy import repro_script

        return repro_script(variant, workflow, ops)
