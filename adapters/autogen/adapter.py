"""``AutoGenAdapter``: declarations (in the engine's parent) and ``open`` (in its workers).

AutoGen is imported in ``prepare()`` and ``open()`` only, after ``environment()`` has turned its
runtime tracing off.  AutoGen without an LLM starts no threads and opens no sockets, so a parent
that has imported it can still fork workers.
"""

from __future__ import annotations

from pathlib import Path

from adapters.protocol import Adapter, Variant, Workflow
from adapters.files import installed_versions

from . import variants as _variants
from .promises import PROMISES

DISTRIBUTIONS = ("autogen-agentchat", "autogen-core", "pydantic", "pydantic-core", "protobuf", "opentelemetry-api")
INSTALL_HINT = "pip install -c constraints/autogen.txt autogen-agentchat autogen-core"


class AutoGenAdapter(Adapter):
    name = "autogen"
    # From the release the seed paper measured up to the next major line (docs/releases.md).
    RELEASES = {"autogen-agentchat": ">=0.7.5,<0.8"}
    PROMISES = PROMISES  # promises.py: the framework's own words, per property

    def environment(self):
        return {
            "OTEL_SDK_DISABLED": "true",  # only opentelemetry-api is installed; belt and braces
            "AUTOGEN_DISABLE_RUNTIME_TRACING": "true",  # autogen_core/_telemetry/_tracing.py:28
            "PYTHONHASHSEED": "0",  # DiGraph start nodes are a set (for spawned interpreters)
        }

    def prepare(self) -> None:
        try:
            from . import case, workflow  # noqa: F401  (imports autogen_agentchat and autogen_core)
        except ImportError as exc:
            raise ImportError(f"AutoGen AgentChat is not installed ({exc}); {INSTALL_HINT}") from exc

    def versions(self):
        return installed_versions(DISTRIBUTIONS)

    def variants(self):
        return _variants.all_variants()

    def capabilities(self, variant: Variant):
        return _variants.capabilities(variant)

    def tuning(self, variant: Variant):
        return _variants.tuning(variant)

    def deviations(self, variant: Variant):
        return _variants.deviations(variant)

    def open(self, variant: Variant, workflow: Workflow, workdir: Path):
        from .case import AutoGenCase

        return AutoGenCase(variant.options, workflow, workdir)

    def reproduction(self, variant: Variant, workflow: Workflow, evidence):
        from .repro import reproduction

        return reproduction(variant, workflow, evidence)
