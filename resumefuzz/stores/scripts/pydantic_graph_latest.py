"""``latest_persistence``'s store in a reproduction script: a ``LatestStatePersistence`` whose two
callbacks keep the run's latest snapshot in ``WORKDIR/latest.json``, replaced atomically, as the
factory (``resumefuzz/stores/pydantic_graph_latest.py``) keeps it in the run's directory.

``corrupt`` is the factory's tamper ``corrupt`` (the file cut in half), for a script whose trace
tampers: the pydantic-graph adapter calls the function of ``functions`` named after the tamper.
The path is taken when the store is built (a script gives each run a ``WORKDIR`` of its own, as
the factory is called once per run with that run's directory).
"""

import json
import os
from pathlib import Path

from pydantic_graph_persistence import LatestStatePersistence

from adapters.storeprotocol import ScriptStore
from adapters.reproduction.runtime import WORKDIR


def latest_persistence(cls=LatestStatePersistence):
    path = Path(WORKDIR) / "latest.json"

    async def load():  # the latest snapshot as a dict; None while nothing is stored
        return json.loads(path.read_bytes()) if path.exists() else None

    async def save(snapshot):  # a temporary file, then os.replace: the old document or the new
        path.with_suffix(".tmp").write_text(json.dumps(snapshot))
        os.replace(path.with_suffix(".tmp"), path)

    return cls(load=load, save=save)


def corrupt():
    """The stored document cut in half: no JSON decoder accepts it."""
    path = Path(WORKDIR) / "latest.json"
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


SCRIPT = ScriptStore(functions=(latest_persistence, corrupt), build="latest_persistence",
                     distributions=("pydantic-graph-persistence",))
