"""Resolve a target name to a prepared adapter.

``reference``, ``mutant:<Category>``, ``mutant:<switch>`` (``refmodel.SWITCHES``) and
``mutant:<shape switch>`` (``refmodel.mutants.SHAPE_SWITCHES``) are built in (the self-test
targets); ``langgraph``,
``crewai``, ``llamaindex``, ``pydantic-graph`` and ``autogen`` name the framework adapters in this
repository; anything of the form ``package.module:Class`` is a third-party adapter.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from adapters.protocol import Adapter, Variant
from refmodel import MUTANTS, SWITCHES
from refmodel.mutants import SHAPE_SWITCHES

from . import adaptercheck
from .errors import TargetUnavailable, UsageError
from .internal import netguard

FRAMEWORKS = {
    "langgraph": "adapters.langgraph:LangGraphAdapter",
    "crewai": "adapters.crewai:CrewAIAdapter",
    "llamaindex": "adapters.llamaindex:LlamaIndexAdapter",
    "pydantic-graph": "adapters.pydantic_graph:PydanticGraphAdapter",
    "autogen": "adapters.autogen:AutoGenAdapter",
}


def known_targets() -> list[str]:
    return ["reference", *(f"mutant:{m}" for m in (*MUTANTS, *SWITCHES, *SHAPE_SWITCHES)),
            *FRAMEWORKS]


def resolve_registered(name: str) -> Adapter:
    """``resolve`` for a name read from a file: only the registry's targets, never a dotted path
    (a corpus file is data; importing a module it names would run that module's code)."""
    if name not in known_targets():
        raise UsageError(
            f"target {name!r} is not a registered target ({', '.join(known_targets())}); a "
            "corpus file cannot name code to import: pass it yourself with --target"
        )
    return resolve(name)


def resolve(name: str) -> Adapter:
    """The adapter for ``name``, not yet prepared, checked against the protocol
    (``adaptercheck``); ``UsageError`` for an unknown name or an adapter that does not fit."""
    from adapters.reference import ReferenceAdapter

    if name == "reference":
        return _checked(ReferenceAdapter(), name)
    if name.startswith("mutant:"):
        mutant = name.partition(":")[2]
        known = (*MUTANTS, *SWITCHES, *SHAPE_SWITCHES)
        if mutant not in known:
            raise UsageError(f"unknown mutant {mutant!r}; expected one of: {', '.join(known)}")
        return _checked(ReferenceAdapter(mutant), name)
    path = FRAMEWORKS.get(name, name)
    if ":" not in path:
        raise UsageError(
            f"unknown target {name!r}; expected one of: {', '.join(known_targets())}, "
            "or a dotted path such as mypkg.mod:MyAdapter"
        )
    module_name, _, attr = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if name in FRAMEWORKS:
            raise TargetUnavailable(f"target {name!r}: its adapter cannot be imported: {exc}") from None
        raise UsageError(f"target {name!r}: cannot import {module_name!r}: {exc}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise UsageError(f"target {name!r}: {module_name!r} has no attribute {attr!r}")
    adapter = factory()
    if not adapter.name:
        adapter.name = name
    # A built-in framework adapter is a package of its own, whose files have one shape.
    folder = Path(module.__file__).parent if name in FRAMEWORKS else None
    return _checked(adapter, name, folder)


def _checked(adapter: Adapter, name: str, folder: Path | None = None) -> Adapter:
    adaptercheck.check(adapter, name, folder)
    return adapter


def prepare(adapter: Adapter, netguard_log: str | None = None) -> Adapter:
    """Switch telemetry off, guard the network, then import the framework (once, here)."""
    for key, value in adapter.environment().items():
        os.environ[key] = str(value)
    if netguard_log:
        os.environ["RESUMEFUZZ_NETGUARD_LOG"] = netguard_log
    netguard.install()
    unsupported = unsupported_release(adapter)
    if unsupported:
        raise TargetUnavailable(f"target {adapter.name!r}: {unsupported}")
    try:
        adapter.prepare()
    except ImportError as exc:
        raise TargetUnavailable(f"target {adapter.name!r}: {exc}") from None
    return adapter


def unsupported_release(adapter: Adapter) -> str:
    """Why the installed framework is not a release ``adapter`` drives (``Adapter.RELEASES``),
    or "" when it is (a distribution not installed is left to ``prepare``'s install hint)."""
    from importlib import metadata

    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    for dist, spec in getattr(adapter, "RELEASES", {}).items():
        try:
            installed = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        try:
            inside = Version(installed) in SpecifierSet(spec)
        except InvalidVersion:
            inside = False
        if not inside:
            return (f"{dist} {installed} is outside the releases this adapter drives ({spec}): "
                    f"pip install '{dist}{spec}'")
    return ""


def select_variants(adapter: Adapter, names: list[str] | None) -> list[Variant]:
    variants = list(adapter.variants())
    if not names:
        return variants
    by_name = {v.name: v for v in variants}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UsageError(
            f"target {adapter.name!r} has no variant {unknown[0]!r}; "
            f"its variants: {', '.join(by_name)}"
        )
    return [by_name[n] for n in names]


def use_store(adapter, path: str | None) -> None:
    """Point ``adapter`` at the store factory ``path`` (``--store``); one-line error if the
    target has no store extension point or the factory cannot be imported."""
    if path is None:
        return
    from adapters.storeprotocol import StoreFactoryError

    try:
        adapter.use_store(path)
    except (NotImplementedError, StoreFactoryError) as exc:
        raise UsageError(str(exc)) from None


def prepare_store(adapter):
    """``prepare(adapter)``, with a broken store factory (found by its probe) a usage error."""
    from adapters.storeprotocol import StoreFactoryError

    try:
        return prepare(adapter)
    except StoreFactoryError as exc:
        raise UsageError(str(exc)) from None
