"""Check an adapter when it is loaded, as pluggy checks a hook implementation when it registers.

``fuzz.targets.resolve`` checks every adapter it loads, built in or third-party, before anything
asks it a question.  A mismatch found here is one line naming the adapter and the method (a
``UsageError``: exit 2); found later it would be a ``TypeError`` mid-campaign (in a worker:
a harness error on every example), or, for a misspelt method name, no error at all, the
protocol's default answering silently in the adapter's place.

- **Signatures.**  Each method of ``adapters.protocol.Adapter`` that the adapter defines must take
  every call the protocol allows: the engine passes arguments by position, the protocol's
  optional ones left out or given, so the adapter's method must accept that many positional
  arguments (names are free; an extra parameter needs a default) and be a plain ``def`` where
  the protocol's is.  An adapter that does not subclass ``Adapter`` must define every method.
- **Misspellings.**  A public method whose name is one letter or so from a protocol method the
  adapter leaves at its default (``capabilites``) is taken for that method misspelt.  Other
  methods of the adapter's own (a helper such as ``store_probe``) are its business.
- **Shape** (built-in framework adapters only: a third-party adapter needs none of it): the same
  file for the same role in every adapter (docs/adapters.md, "The files of an adapter"), and none
  of a role's old names back.  Files are only listed: nothing is imported.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from pathlib import Path

from adapters.protocol import Adapter

from .errors import UsageError

#: The files every built-in framework adapter has, one per role.
REQUIRED = ("adapter.py", "variants.py", "workflow.py", "case.py", "repro.py", "promises.py")
#: The store role, where an adapter has such code: not required, but named so.
OPTIONAL = ("store.py",)
#: Names those roles had before they had one name each: one coming back is a role under two names.
RETIRED = ("stores.py", "flowsource.py", "workflow_graph.py", "teams.py", "declarations.py",
           "build.py")


class AdapterMismatch(UsageError):
    """An adapter does not fit the protocol (a method's parameters, a misspelt method, a built-in
    adapter's files)."""


def module_names(folder: Path) -> set[str]:
    """File names of every module under ``folder``, at any depth, a package counting as
    ``<name>.py``."""
    files = {p.name for p in folder.rglob("*.py")}
    packages = {f"{p.parent.name}.py" for p in folder.rglob("__init__.py") if p.parent != folder}
    return files | packages


def shape_problems(folder: Path) -> list[str]:
    """What keeps the adapter in ``folder`` from the one shape, in words (empty: none)."""
    if not folder.is_dir():
        return [f"no folder {folder}"]
    missing = [name for name in REQUIRED if not (folder / name).is_file()]  # at the top
    retired = sorted(module_names(folder) & set(RETIRED))
    out = []
    if missing:
        out.append(f"{folder.name}/ lacks {', '.join(missing)}")
    if retired:
        out.append(f"{folder.name}/ has {', '.join(retired)}, old names of roles that have one "
                   "name now")
    if out:
        out[-1] += " (docs/adapters.md, 'The files of an adapter')"
    return out


def _protocol_methods() -> dict:
    return {name: f for name, f in vars(Adapter).items()
            if not name.startswith("_") and inspect.isfunction(f)}


def _shown(sig: inspect.Signature) -> str:
    """``sig`` as the parameters a caller sees, without annotations: ``(variant, workdir)``."""
    return "(" + ", ".join(str(p.replace(annotation=inspect.Parameter.empty))
                           for p in sig.parameters.values()) + ")"


def _call_problem(name: str, impl, proto) -> str | None:
    """Why the bound method ``impl`` cannot take a call the protocol's ``proto`` allows."""
    spec = inspect.signature(proto)
    spec = spec.replace(parameters=list(spec.parameters.values())[1:])  # without self
    try:
        sig = inspect.signature(impl)
    except (TypeError, ValueError):  # a builtin or a C callable: nothing to read
        return None
    wanted = f"the protocol's Adapter.{name}{_shown(spec)}"
    if inspect.iscoroutinefunction(impl) and not inspect.iscoroutinefunction(proto):
        return f"{name}{_shown(sig)} is async; the engine calls {wanted} synchronously"
    params = list(spec.parameters.values())
    required = sum(p.default is inspect.Parameter.empty for p in params)
    for k in range(required, len(params) + 1):
        try:
            sig.bind(*range(k))
        except TypeError as exc:
            return f"{name}{_shown(sig)} does not take {wanted} with {k} argument(s): {exc}"
    return None


def signature_problems(adapter) -> list[str]:
    """What keeps ``adapter``'s methods from the protocol's, one entry per method."""
    cls = type(adapter)
    protocol = _protocol_methods()
    subclass = isinstance(adapter, Adapter)
    out, defaults = [], []
    for name, proto in protocol.items():
        if subclass and inspect.getattr_static(cls, name, None) is proto:
            defaults.append(name)  # the protocol's own: fits by definition
            continue
        if not hasattr(adapter, name):
            out.append(f"has no method {name} (Adapter.{name}); subclass "
                       "adapters.protocol.Adapter to inherit its default")
            continue
        impl = getattr(adapter, name)
        if not callable(impl):
            out.append(f"{name} is a {type(impl).__name__}, not a method (Adapter.{name})")
            continue
        problem = _call_problem(name, impl, proto)
        if problem:
            out.append(problem)
    for name in sorted(n for n in dir(cls) if not n.startswith("_") and n not in protocol):
        if not callable(inspect.getattr_static(cls, name, None)):
            continue
        close = difflib.get_close_matches(name, defaults, n=1, cutoff=0.85)
        if close:
            out.append(f"{name} is not a method of the protocol; {close[0]} (Adapter.{close[0]}, "
                       "left at its default) misspelt?")
    return out


def release_problems(adapter) -> list[str]:
    """What in ``adapter.RELEASES`` is not a distribution name -> PEP 440 range."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    releases = getattr(adapter, "RELEASES", {})
    if not isinstance(releases, Mapping):
        return [f"RELEASES is a {type(releases).__name__}, not a mapping of distribution -> range"]
    out = []
    for dist, spec in releases.items():
        try:
            SpecifierSet(spec)
        except (InvalidSpecifier, TypeError):
            out.append(f"RELEASES[{dist!r}] = {spec!r} is not a PEP 440 range (\">=1.2,<2\")")
    return out


def check(adapter, target: str, folder: Path | None = None) -> None:
    """Raise ``AdapterMismatch``, one line naming the target, its class and each method (or file)
    at fault, unless ``adapter`` fits the protocol (and, given its ``folder``, the shape)."""
    cls = type(adapter).__name__
    problems = [f"{cls}.{p}" if not p.startswith("has ") else f"{cls} {p}"
                for p in signature_problems(adapter)]
    problems += [f"{cls}.{p}" for p in release_problems(adapter)]
    if folder is not None:
        problems += shape_problems(folder)
    if problems:
        raise AdapterMismatch(f"target {target!r}: " + "; ".join(problems))
