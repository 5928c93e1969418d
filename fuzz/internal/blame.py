"""Who raised it: the framework (a refusal, an observation) or the harness (a tool error).

The rule (documented for adapter authors in ``adapters/protocol.py`` and ``docs/adapters.md``):

1. A ``CrashInjected`` anywhere in the chain: the injected crash (handled by the worker first).
2. A ``HarnessError`` anywhere in the chain (causes, contexts, group members): the harness.
3. A ``Refused`` in the explicit chain (``__cause__``, followed from the outermost exception):
   the framework refused, in the words the adapter passed on.
4. Otherwise the *root cause* decides: follow ``__cause__`` (an explicit ``raise ... from``; a
   group: its first member) to the end.  It is a refusal when the innermost frame of its
   traceback that is not the standard library belongs to neither our code nor the adapter's:
   the framework (or another installed package it calls).  Anything else is the harness.

An exception raised in the store under test, or passing through it (``--store``: its factory's
module and its class's module, ``adapters.storeprotocol.STORE_MODULES``), is the store's answer, an
observation like a framework's refusal, and its error names the store's method (``[in
MySaver.get_tuple]``): a saver that raises is a finding about the saver, never a tool error.

"Our code" is the module trees ``adapters``, ``fuzz`` and ``refmodel``, the module tree of the
adapter class (a third-party adapter loaded by dotted path), and modules an adapter generates
under a name starting with ``resumefuzz_``.  Frames are judged by their module's ``__name__``,
so it does not matter where a package is installed.

Only explicit causes are followed: an exception raised *while handling* a framework exception
(an implicit ``__context__``, say a ``LookupError`` in the adapter's ``except`` block) is the
adapter's own failure.  The error text of a refusal is the outermost framework exception (or
``Refused``) of the chain, so an adapter's wrapper never hides the framework's words.
"""

from __future__ import annotations

import sys
import traceback
from dataclasses import dataclass

from adapters.protocol import CrashInjected, HarnessError, Refused
from adapters.storeprotocol import STORE_MODULES

OURS = ("adapters", "fuzz", "refmodel")
GENERATED_PREFIX = "resumefuzz_"  # modules an adapter writes and imports (CrewAI's flows)
TEXT_LIMIT = 500
TRACEBACK_LIMIT = 4000


@dataclass(frozen=True)
class Blame:
    """``who`` is "framework" or "harness"; ``error`` the chosen exception as one line."""

    who: str
    error: str
    traceback: str = ""


def roots_of(adapter) -> frozenset:
    """The top-level module names that count as our code for ``adapter``."""
    module = type(adapter).__module__ or ""
    return frozenset(OURS + ((module.split(".")[0],) if module else ()))


def describe(exc: BaseException) -> str:
    """``"ExcType: first line of the message"`` (a group: its first leaf's)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text[:TEXT_LIMIT]


def crash_in(exc: BaseException) -> CrashInjected | None:
    """The ``CrashInjected`` anywhere in the chain (causes, contexts, groups) of ``exc``."""
    return next((e for e in _everything(exc) if isinstance(e, CrashInjected)), None)


def blame(exc: BaseException, roots: frozenset) -> Blame:
    """Attribute an exception that ended ``Case.run`` (or a query) by the rule above."""
    harness = next((e for e in _everything(exc) if isinstance(e, HarnessError)), None)
    chain = _causes(exc)
    refused = any(isinstance(e, Refused) for e in chain)
    if harness is None and (refused or _site(chain[-1], roots) == "framework"):
        chosen = next(e for e in chain
                      if isinstance(e, Refused) or _site(e, roots) == "framework")
        return Blame("framework", describe(chosen) + store_note(exc))
    culprit = harness or exc
    text = "".join(traceback.format_exception(exc))[-TRACEBACK_LIMIT:]
    return Blame("harness", describe(culprit), text)


STORE_FRAME = " [in "  # how an error of the store under test names its method: " [in X.y]"


def store_note(exc: BaseException) -> str:
    """``" [in LaggySaver.get_tuple]"``: the innermost frame of the store under test
    (``STORE_MODULES``) in the chain of ``exc``, so that the error a store raised names the
    method to look at; ``""`` outside a store under test, or when no frame of it is there."""
    if not STORE_MODULES:
        return ""
    found = ""
    for e in _causes(exc):
        for frame, _ in traceback.walk_tb(e.__traceback__):
            if frame.f_globals.get("__name__") in STORE_MODULES:
                found = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    return f"{STORE_FRAME}{found}]" if found else ""


def _site(exc: BaseException, roots: frozenset) -> str:
    """Where ``exc`` was raised: the innermost frame outside the standard library decides, except
    that an exception raised in (or passing through) the store under test is the store's
    answer, an observation, wherever it was raised from (``STORE_MODULES``)."""
    frames = list(traceback.walk_tb(exc.__traceback__))
    if STORE_MODULES and any(f.f_globals.get("__name__") in STORE_MODULES for f, _ in frames):
        return "framework"
    for frame, _ in reversed(frames):
        name = frame.f_globals.get("__name__") or ""
        top = name.split(".")[0]
        if top in sys.stdlib_module_names or name.startswith("<frozen"):
            continue
        if top in roots or top.startswith(GENERATED_PREFIX):
            return "ours"
        return "framework"
    return "ours"  # no frame at all outside the standard library: not the framework's


def _causes(exc: BaseException) -> list:
    """``exc`` and its explicit causes, outermost first; a group continues with its first
    member (a task group's failure is its tasks')."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        if isinstance(exc, BaseExceptionGroup) and exc.exceptions and exc.__cause__ is None:
            exc = exc.exceptions[0]
        else:
            exc = exc.__cause__
    return chain


def _everything(exc: BaseException):
    seen, stack = set(), [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack += [e.__cause__, e.__context__]
        stack += list(getattr(e, "exceptions", ()))
