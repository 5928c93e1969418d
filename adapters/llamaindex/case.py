"""The case of a LlamaIndex variant, and what every case shares.

``open_case`` opens the case of the variant's persistence target (``backend``), one module each
under ``case_*.py``: ``case_core.py`` (the caller's ``Context.to_dict()`` snapshots),
``case_server.py`` (``llama-agents-server`` driven through its service object, ``api=private``),
``case_http.py`` (the same server over HTTP, a subclass of the former) and ``case_dbos.py``
(``llama-agents-dbos``).  What those cases share (the event loop a case keeps, how a failed
run is reported, and ``SqliteCase``: the server's and DBOS's run, copy and close) is
``case_common.py``: a case module importing this one, which imports them
all, would make a cycle.  Reading and copying the stores: ``store.py``.
"""

from __future__ import annotations

from pathlib import Path

from adapters.protocol import Case, Variant, Workflow


def open_case(variant: Variant, workflow: Workflow, workdir: Path) -> Case:
    """``LlamaIndexAdapter.open``: the case class of ``variant``'s backend (each module imported
    only here, in the worker: they import the framework)."""
    backend = variant.options["backend"]
    if backend == "core":
        from .case_core import CoreCase

        return CoreCase(variant, workflow, Path(workdir))
    if backend == "server" and variant.options.get("api") == "private":
        from .case_server import ServerCase

        return ServerCase(variant, workflow, Path(workdir))
    if backend == "server":
        from .case_http import HttpServerCase

        return HttpServerCase(variant, workflow, Path(workdir))
    if backend == "dbos":
        from .case_dbos import DBOSCase

        return DBOSCase(variant, workflow, Path(workdir))
    raise ValueError(f"unknown backend {backend!r}")
