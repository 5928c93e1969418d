"""``LlamaIndexAdapter``: LlamaIndex Workflows under the resume contract (target ``llamaindex``).

Three persistence targets, each its own set of variants (``variants.py``): the core's
``Context.to_dict()`` snapshots stored by the caller, the ``llama-agents-server`` tick journal in
a ``SqliteWorkflowStore``, and the ``llama-agents-dbos`` runtime on a SQLite system database.
This module imports no framework code at import time; ``prepare()`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from adapters.protocol import Adapter, Op, Variant, Workflow
from adapters.files import installed_versions

from . import variants
from .promises import PROMISES

DISTRIBUTIONS = (
    "llama-index-workflows",
    "llama-index-instrumentation",
    "llama-agents-server",
    "llama-agents-client",
    "llama-agents-dbos",
    "dbos",
    "pydantic",
    "SQLAlchemy",
)

INSTALL_HINT = (
    "LlamaIndex is not installed: pip install -c constraints/llamaindex.txt "
    "llama-index-workflows llama-agents-server llama-agents-dbos dbos"
)


class LlamaIndexAdapter(Adapter):
    name = "llamaindex"
    # From the release the seed paper measured up to the next major line (docs/releases.md).
    RELEASES = {"llama-index-workflows": ">=2.22.2,<3"}
    PROMISES = PROMISES  # promises.py: the framework's own words, per property

    def environment(self) -> Mapping[str, str]:
        # llama-index-workflows sends nothing by itself; OpenTelemetry (pulled in by the
        # instrumentation package and by dbos) is disabled, and DBOS is kept off its cloud mode.
        return {
            "OTEL_SDK_DISABLED": "true",
            "DO_NOT_TRACK": "1",
            "DBOS__CLOUD": "false",
        }

    def prepare(self) -> None:
        try:
            import llama_agents.dbos  # noqa: F401  (imports dbos; starts no thread)
            import llama_agents.server  # noqa: F401
            import workflows  # noqa: F401
        except ImportError as exc:
            raise ImportError(f"{INSTALL_HINT} ({exc})") from exc
        from . import events, workflow  # noqa: F401  (the generated classes' modules)

    def versions(self) -> Mapping[str, str]:
        return installed_versions(DISTRIBUTIONS)

    def variants(self) -> Sequence[Variant]:
        return variants.VARIANTS

    def variant(self, name: str) -> Variant:
        for variant in variants.VARIANTS:
            if variant.name == name:
                return variant
        raise KeyError(f"no variant {name!r}; have {[v.name for v in variants.VARIANTS]}")

    def capabilities(self, variant: Variant):
        return variants.capabilities(variant)

    def tuning(self, variant: Variant):
        return variants.tuning(variant)

    def deviations(self, variant: Variant):
        return variants.deviations(variant)

    def open(self, variant: Variant, workflow: Workflow, workdir: Path):
        from .case import open_case

        return open_case(variant, workflow, workdir)

    def reproduction(self, variant: Variant, workflow: Workflow, evidence) -> str | None:
        if variant.options.get("backend") in ("server", "dbos"):
            from .repro_served import served_reproduction

            return served_reproduction(variant, workflow, evidence)
        from .repro import reproduction

        return reproduction(variant, workflow, evidence)
