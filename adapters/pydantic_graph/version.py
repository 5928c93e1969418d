"""Which pydantic-graph this adapter can drive, decided from the version string alone.

pydantic-graph 2.0 deleted the ``BaseNode`` runner's state persistence
(``pydantic_graph.persistence``, ``Graph.iter_from_persistence``, ``Graph.initialize``,
snapshots): pydantic/pydantic-ai PR #5470, "v2: remove deprecated BaseNode-runner / persistence /
pydantic_graph.beta".  The last release
line that has it is 1.107.x.  Against a 2.x install the adapter refuses with one line, and the
matrix shows ``n/a`` with that line as the reason.
"""

from __future__ import annotations

DISTRIBUTION = "pydantic-graph"
PIN = "1.107.10"
INSTALL_HINT = f"pip install 'pydantic-graph=={PIN}' (or -c constraints/pydantic_graph.txt)"


class PersistenceRemoved(ImportError):
    """The installed pydantic-graph has no state persistence to test (2.x and later)."""


def check_version(version: str) -> None:
    """Raise ``PersistenceRemoved`` (an ``ImportError``) unless ``version`` is a 1.x release.

    Only the major number decides: 1.x has the persistence API (deprecated since 1.97 but
    present), 2.x and later do not.  A version that does not parse is refused too: the adapter
    would otherwise guess.
    """
    major = version.split(".", 1)[0]
    if not major.isdigit():
        raise PersistenceRemoved(
            f"pydantic-graph {version!r}: cannot tell its major version; {INSTALL_HINT}"
        )
    if int(major) >= 2:
        raise PersistenceRemoved(
            f"pydantic-graph {version} has no state persistence (removed in 2.0, "
            f"pydantic/pydantic-ai#5470): n/a; to fuzz 1.x persistence, {INSTALL_HINT}"
        )
    if int(major) < 1:
        raise PersistenceRemoved(
            f"pydantic-graph {version} predates the 1.x persistence API this adapter drives; "
            f"{INSTALL_HINT}"
        )


def installed_version() -> str:
    """The installed distribution's version; ``ImportError`` with the install hint if absent."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        raise ImportError(f"pydantic-graph is not installed; {INSTALL_HINT}") from None
